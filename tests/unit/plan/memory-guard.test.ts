// The memory guard's floor (spark-vllm:memoryGuard.floorGiB): parsed with its default and bounds at its key path, and
// handed to every host's supervisor as its argument (supervise.py reads memoryFloorBytes; its tests run the guard).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { rawConfig, specProblems } from "../../fixtures";

const supervisorArgs = (raw: Record<string, unknown>) =>
    planCluster(parseSpec(raw)).hosts.map(h => JSON.parse(h.container.command[0]) as { dir: string; memoryFloorBytes?: number });

test("every host's supervisor gets the floor in bytes: 4 GiB by default, the configured one, none when 0", () => {
    assert.deepEqual(parseSpec(rawConfig(2)).memoryGuard, { floorGiB: 4 });
    assert.deepEqual(supervisorArgs(rawConfig(2)).map(a => a.memoryFloorBytes), [4 * 2 ** 30, 4 * 2 ** 30]);
    assert.deepEqual(supervisorArgs({ ...rawConfig(2), memoryGuard: { floorGiB: 10 } }).map(a => a.memoryFloorBytes), [10 * 2 ** 30, 10 * 2 ** 30]);
    const off = supervisorArgs({ ...rawConfig(2), memoryGuard: { floorGiB: 0 } });
    assert.deepEqual(off.map(a => "memoryFloorBytes" in a), [false, false]);
    assert.deepEqual(off.map(a => a.dir), ["/var/lib/spark-vllm/launches", "/var/lib/spark-vllm/launches"]);
});

test("a floor out of bounds, not a whole number or an unknown key is refused at its key path", () => {
    assert.match(specProblems({ ...rawConfig(2), memoryGuard: { floorGiB: 65 } }).join("\n"), /memoryGuard\.floorGiB/);
    assert.match(specProblems({ ...rawConfig(2), memoryGuard: { floorGiB: -1 } }).join("\n"), /memoryGuard\.floorGiB/);
    assert.match(specProblems({ ...rawConfig(2), memoryGuard: { floorGiB: 2.5 } }).join("\n"), /memoryGuard\.floorGiB/);
    assert.match(specProblems({ ...rawConfig(2), memoryGuard: { floor: 4 } }).join("\n"), /memoryGuard\.floor\b/);
});
