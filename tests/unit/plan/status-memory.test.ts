// spark-vllm status with vLLM loaded: the free figures per host and a warning line below 4 GiB (memory.py LOW_AFTER_LOAD_GIB).
import { test } from "node:test";
import assert from "node:assert/strict";
import { ClusterStatus, renderStatus } from "../../../components/plan/status";

const running = { state: "running", pid: 812, uptimeSeconds: 600, servedModel: "qwen3.5-122b" };
const status = (bWarning?: string): ClusterStatus => ({
    stack: "spark", serving: true, endpoint: "http://spark-a.local:8000/v1", model: "qwen3.5-122b", problems: [],
    hosts: [
        { host: "spark-a", role: "head", container: "running", vllm: running, health: 200,
            memory: { availableGiB: 16.4, totalGiB: 119.7, cudaFreeGiB: 8.2, freeGiB: 16.4, freeSource: "mem-available" } },
        { host: "spark-b", role: "worker", container: "running", vllm: running,
            memory: { availableGiB: 3.1, totalGiB: 119.7, cudaFreeGiB: 1.0, freeGiB: 3.1, freeSource: "mem-available", ...(bWarning ? { warning: bWarning } : {}) } },
    ],
});

test("status shows MemAvailable and CUDA's free figure per host, and each host's low-memory warning on its own line", () => {
    const quiet = renderStatus(status());
    assert.match(quiet, /spark-a \(head\): .*16\.4 of 119\.7 GiB free \(CUDA free 8\.2 GiB\)/);
    assert.doesNotMatch(quiet, /warning/);
    const warning = "spark-b: 3.10 GiB free with vLLM running (CUDA free 1.00 GiB, MemAvailable 3.10 GiB), below 4 GiB: …";
    const loud = renderStatus(status(warning));
    assert.match(loud, /spark-b \(worker\): .*3\.1 of 119\.7 GiB free \(CUDA free 1 GiB\)/);
    assert.ok(loud.trimEnd().endsWith(`- warning: ${warning}`), loud);
});
