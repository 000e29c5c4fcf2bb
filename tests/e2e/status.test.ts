// Day two on the simulated Sparks: the serving proof's figures in the outputs, and `spark-vllm status` against a
// healthy, a degraded (vLLM killed on the head) and a dead (worker container stopped) cluster. Needs root.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { simSuite } from "./suite";
import { destroy, up } from "../engine/engine";
import { leftovers } from "../sim/stacks";

const ROOT = path.join(__dirname, "..", "..");
const suite = simSuite("status");

test("serving figures after up; status: healthy (0), vLLM killed (5, its host named), worker container stopped (5); destroy leaves nothing", async () => {
    const stack = suite.stack("day2");
    const dir = path.dirname(stack.statePath);
    fs.writeFileSync(path.join(dir, `Pulumi.${stack.name}.yaml`), yaml.dump({ config: stack.config }));
    const status = () => {
        const r = spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), "status", "--stack", stack.name, "--dir", dir, "--json"],
            { encoding: "utf8", env: { ...process.env, ...stack.transport.env } });
        console.log(`--- spark-vllm status (exit ${r.status}):\n${r.stdout}${r.stderr}---`);
        return { code: r.status, report: JSON.parse(r.stdout) };
    };
    try {
        const r = await up(stack);
        assert.equal(r.error, undefined, r.error);
        // The serving proof measured the stand-in's stream (ttft_ms 40, 100 tokens/s): real, plausible figures.
        const serving = r.outputs?.serving as { levels: Array<Record<string, number>>; warnings: string[] };
        assert.deepEqual(serving.levels.map(l => l.concurrency), [1, 4]);
        for (const l of serving.levels) {
            assert.ok(l.ttftP50Ms >= 40 && l.ttftP95Ms >= l.ttftP50Ms, JSON.stringify(l));
            assert.ok(l.outputTokensPerSecond > 10 && l.outputTokensPerSecond < 100 * l.concurrency, JSON.stringify(l));
        }
        assert.deepEqual(serving.warnings, []);

        const healthy = status();
        assert.equal(healthy.code, 0);
        assert.equal(healthy.report.serving, true);
        assert.equal(healthy.report.hosts[0].vllm.state, "running");
        assert.equal(healthy.report.hosts[0].vllm.servedModel, "qwen3.5-122b");
        assert.equal(healthy.report.hosts[0].health, 200);
        assert.deepEqual(healthy.report.hosts.map((h: { raylet: boolean }) => h.raylet), [true, true]);

        const pid = (await suite.sim.docker("spark-a", ["exec", "spark-vllm-spark-a", "cut", "-d", " ", "-f1", "/var/tmp/spark-vllm/vllm-serve.pid"])).stdout.trim();
        assert.match(pid, /^[0-9]+$/);
        // The container's supervisor would relaunch it (components/launches.ts): without its record, nothing does.
        await suite.sim.docker("spark-a", ["exec", "spark-vllm-spark-a", "rm", "-f", "/var/lib/spark-vllm/launches/vllm.json"]);
        await suite.sim.docker("spark-a", ["exec", "spark-vllm-spark-a", "kill", "-KILL", pid]);
        const degraded = status();
        assert.equal(degraded.code, 5);
        assert.match(degraded.report.problems.join("\n"), /^spark-a: vLLM is not running \(exited\)/);

        await suite.sim.docker("spark-b", ["stop", "-t", "1", "spark-vllm-spark-b"]);
        const dead = status();
        assert.equal(dead.code, 5);
        assert.ok(dead.report.problems.includes("spark-b: container spark-vllm-spark-b is exited; run `pulumi up -s day2` to start it and relaunch the cluster"),
            dead.report.problems.join("\n"));
    } finally {
        const d = await destroy(stack);
        assert.equal(d.error, undefined, d.error);
        assert.deepEqual(await leftovers(suite.sim), []);
    }
});
