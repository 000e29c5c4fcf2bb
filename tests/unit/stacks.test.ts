// Every committed stack (Pulumi.<stack>.yaml): its header says what it serves on how many Sparks, the real
// program evaluates under mocks with one container per host and TP × PP = the hosts' GPUs, and
// `spark-vllm plan --stack NAME --json` exits 0 with no mandatory policy violated.
// (tests/policies/stacks.test.ts runs the policy pack on the same stacks.)
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { evaluateWithMocks, stackConfig } from "../harness/mocks";
import { resourceNames } from "../../components/plan/naming";

const ROOT = path.join(__dirname, "..", "..");
const STACKS = fs.readdirSync(ROOT).map(f => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1]).filter((s): s is string => !!s).sort();
const COUNT = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight"];

test("the committed stacks: spark and at least three more variants", () => {
    assert.ok(STACKS.includes("spark") && STACKS.length >= 4, STACKS.join(", "));
});

for (const stack of STACKS) {
    const config = stackConfig(stack) as Record<string, any>;
    const hosts: Array<{ gpus?: number }> = config["spark-vllm:hosts"];
    const gpus = hosts.reduce((n, h) => n + (h.gpus ?? 1), 0);

    test(`Pulumi.${stack}.yaml: the header names the model and how many Sparks`, () => {
        const header = fs.readFileSync(path.join(ROOT, `Pulumi.${stack}.yaml`), "utf8").split("\n").filter((l, i, all) => all.slice(0, i + 1).every(x => x.startsWith("#"))).join("\n");
        assert.ok(header.includes(config["spark-vllm:model"].id), `header of Pulumi.${stack}.yaml names ${config["spark-vllm:model"].id}`);
        assert.match(header, new RegExp(`\\b(${COUNT[hosts.length]}|${hosts.length}) (DGX )?Sparks?\\b`, "i"));
    });

    test(`Pulumi.${stack}.yaml: evaluates under mocks, one container per host, TP × PP = ${gpus} GPUs`, () => {
        const { resources, error } = evaluateWithMocks(config, { stack, preview: true });
        assert.equal(error, undefined);
        // One per host, and the endpoint proxy on the head.
        assert.equal(resources.filter(r => r.type === "docker:index/container:Container").length, hosts.length + 1);
        const serve = resources.find(r => r.name === resourceNames().of("vllm-launch"))?.inputs.create as string;
        const m = /vllm serve .*--tensor-parallel-size (\d+) --pipeline-parallel-size (\d+)/.exec(serve);
        assert.ok(m, "the launch runs vllm serve with TP and PP");
        assert.equal(Number(m[1]) * Number(m[2]), gpus);
    });

    test(`Pulumi.${stack}.yaml: spark-vllm plan --json exits 0, the memory fits, no mandatory policy violated`, () => {
        const r = spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), "plan", "--stack", stack, "--json"], { cwd: ROOT, encoding: "utf8" });
        assert.equal(r.status, 0, r.stderr);
        const report = JSON.parse(r.stdout);
        assert.equal(report.hosts.length, hosts.length);
        assert.ok(report.memory.weightsFit && report.memory.maxModelLenFits && report.memory.hostHeadroomOk, JSON.stringify(report.memory));
        const failed = report.policies.filter((v: { enforcementLevel: string; violations: string[] }) => v.enforcementLevel === "mandatory" && v.violations.length);
        assert.deepEqual(failed, []);
    });
}
