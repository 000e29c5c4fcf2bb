import * as assert from "node:assert/strict";
import { SpecError } from "../components/spec/spec";
import { parseSpec } from "../components/spec/parseSpec";
// Stack configs for tests: test hosts only (198.18.0.0/15), never real machines.
export function hostConfig(i: number, gpus = 1) {
    const name = `spark-${String.fromCharCode(97 + i)}`;
    return {
        name,
        ssh: { host: `198.18.0.${i + 2}`, user: "root" },
        fabric: { interface: "enp1s0f1np1", address: `198.18.1.${i + 2}`, hcas: ["rocep1s0f1", "roceP2p1s0f1"] },
        gpus,
    };
}

export const TEST_IMAGE = "198.18.0.1:5000/vllm-sim:0.17.1@sha256:" + "ab".repeat(32);

/** A valid config for `n` hosts with TP × PP = n. */
export function clusterConfig(n: number, opts: { tp?: number; pp?: number } = {}): Record<string, unknown> {
    return {
        "spark-vllm:hosts": Array.from({ length: n }, (_, i) => hostConfig(i)),
        "spark-vllm:image": TEST_IMAGE,
        "spark-vllm:model": { id: "Qwen/Qwen3.5-122B-A10B-FP8", servedName: "qwen3.5-122b", cacheDir: "/root/.cache/huggingface" },
        "spark-vllm:vllm": { tensorParallelSize: opts.tp ?? n, pipelineParallelSize: opts.pp ?? 1, maxModelLen: 32768 },
    };
}

/** The same config as raw values without the namespace, as parseSpec takes it. */
export function rawConfig(n: number, opts: { tp?: number; pp?: number } = {}): Record<string, any> {
    return Object.fromEntries(Object.entries(clusterConfig(n, opts)).map(([k, v]) => [k.replace("spark-vllm:", ""), v]));
}

/** Every problem parseSpec reports for a raw config; fails the test when the config is accepted. */
export function specProblems(raw: Record<string, unknown>): string[] {
    try {
        parseSpec(raw);
    } catch (e) {
        assert.ok(e instanceof SpecError, `expected SpecError, got ${e}`);
        return e.problems;
    }
    assert.fail("expected the config to be rejected");
}
