// The simulated Sparks' image cache: what a cluster's prune may remove while other clusters run beside it.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CACHE_PRUNE_AFTER_MS, prunable } from "../../sim/image";
import { SIM_CACHE_DIR, SIM_DIR } from "../../sim/hosts";

const STAND_IN = /^((proxy-)?rootfs-[0-9a-f]{16}\.tar|registry-[0-9a-f]{16})$/;
const now = 1_000_000_000_000;
const entry = (name: string, ageMs: number) => ({ path: `/c/${name}`, name, mtimeMs: now - ageMs });

test("a registry another cluster is serving from (used within the day) is never pruned; one unused for a day is", () => {
    const entries = [
        entry("registry-aaaaaaaaaaaaaaaa", 60_000),                    // the default set, in use by another e2e file
        entry("registry-bbbbbbbbbbbbbbbb", 0),                         // this cluster's own
        entry("registry-cccccccccccccccc", CACHE_PRUNE_AFTER_MS + 1),  // an old tests/sim/image/ tree
        entry("rootfs-dddddddddddddddd.tar", CACHE_PRUNE_AFTER_MS * 3),
        entry("vllm-cpu-registry-eeeeeeeeeeeeeeee", CACHE_PRUNE_AFTER_MS * 3), // the other kind: not this prune's
        entry("build.lock", CACHE_PRUNE_AFTER_MS * 3),
    ];
    assert.deepEqual(prunable(entries, STAND_IN, ["/c/registry-bbbbbbbbbbbbbbbb"], now),
        ["/c/registry-cccccccccccccccc", "/c/rootfs-dddddddddddddddd.tar"]);
    assert.deepEqual(prunable(entries, STAND_IN, ["/c/registry-cccccccccccccccc", "/c/rootfs-dddddddddddddddd.tar"], now), []);
});

test("the image cache lives outside the repository, so a fresh clone (CI's) reuses what this machine built", () => {
    if (process.env.SPARK_VLLM_SIM_CACHE) return assert.equal(SIM_CACHE_DIR, process.env.SPARK_VLLM_SIM_CACHE);
    assert.ok(!SIM_CACHE_DIR.startsWith(SIM_DIR), `${SIM_CACHE_DIR} is under ${SIM_DIR}`);
    assert.match(SIM_CACHE_DIR, /\/spark-vllm\/sim$/);
});
