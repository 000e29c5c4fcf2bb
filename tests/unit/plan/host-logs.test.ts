// `spark-vllm diagnose --stack`: each host's logs as the generated script reads them (run here by sh against a temp
// logDir, a `journalctl` on PATH standing for the host's journal), and the cluster's root cause chosen among the hosts:
// a dead worker's own cause beats the head's consequence (issue 47).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { ClusterPlan } from "../../../components/plan/clusterPlan";
import { KERNEL_LINES, clusterRootCause, hostLogsScript, parseHostLogs } from "../../../components/plan/hostLogs";
import { diagnoseTiered } from "../../../components/knowledge/diagnosis";
import { rawConfig } from "../../fixtures";
import { testTempDir } from "../../tempDir";

const FIELD = path.join(__dirname, "..", "..", "fixtures", "logs", "field");
/** The head's log of eugr/spark-vllm-docker#255: only the consequence of a worker that died elsewhere. */
const HEAD_CONSEQUENCE = fs.readFileSync(path.join(FIELD, "eugr-255.log"), "utf8");
/** A worker's own cause, as the simulated Sparks' stand-in prints it (tests/sim/image/python/vllm/_sim_serve.py check_crash). */
const WORKER_CAUSE = [
    "INFO 12-07 07:10:01 [gpu_worker.py:262] Loading weights",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/torch/cuda/__init__.py", line 1053, in synchronize',
    "    return torch._C._cuda_synchronize()",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "",
].join("\n");
const NVRM = "Dec 07 07:09:58 spark-b kernel: NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359";

function planWith(logDir: string): ClusterPlan {
    return planCluster(parseSpec({ ...rawConfig(2), logDir }));
}

/** One host's answer: the script run by sh with `files` in a logDir of its own and `journal` as journalctl's output. */
function hostAnswer(files: Record<string, string>, journal: string | null) {
    const logDir = testTempDir("host-logs");
    for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(logDir, name), text);
    const bin = testTempDir("host-logs-bin");
    // No journal, no ring buffer: both commands print nothing (a user outside systemd-journal; dmesg_restrict).
    fs.writeFileSync(path.join(bin, "journalctl"), journal === null ? "#!/bin/sh\nexit 0\n" : `#!/bin/sh\ncat <<'END'\n${journal}\nEND\n`, { mode: 0o755 });
    fs.writeFileSync(path.join(bin, "dmesg"), "#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1\n", { mode: 0o755 });
    const plan = planWith(logDir);
    const run = spawnSync("sh", ["-s"], { input: hostLogsScript(plan), encoding: "utf8", env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
    return { plan, run };
}

test("the tiers: the head's log of a worker that died holds only a consequence, the worker's own a cause", () => {
    assert.equal(diagnoseTiered(HEAD_CONSEQUENCE)?.tier, "consequence");
    assert.equal(diagnoseTiered(HEAD_CONSEQUENCE)?.diagnosis.kind, "worker-died");
    assert.equal(diagnoseTiered(WORKER_CAUSE)?.tier, "firm");
    assert.equal(diagnoseTiered(WORKER_CAUSE)?.diagnosis.kind, "cuda-error");
});

test("every host's logs are read, and the worker's own cause is the cluster's root cause, not the head's consequence", () => {
    const head = hostAnswer({ "vllm-serve.log": HEAD_CONSEQUENCE, "ray-start.log": "Ray runtime started.\n" }, "Dec 07 07:00:00 spark-a kernel: Linux version 6.17.0-1032-nvidia");
    const worker = hostAnswer({ "vllm-serve.log": WORKER_CAUSE }, null);
    assert.equal(head.run.status, 0, head.run.stderr);
    assert.equal(worker.run.status, 0, worker.run.stderr);
    const a = parseHostLogs(head.plan, head.plan.hosts[0], head.run.status, head.run.stdout, head.run.stderr);
    const b = parseHostLogs(worker.plan, worker.plan.hosts[1], worker.run.status, worker.run.stdout, worker.run.stderr);
    assert.equal(a.error, undefined);
    assert.deepEqual(a.sources.map(s => [s.source, s.state, s.diagnosis?.kind]),
        [["vllm-serve.log", "read", "worker-died"], ["ray-start.log", "read", undefined], ["kernel", "read", undefined]]);
    assert.deepEqual(b.sources.map(s => [s.source, s.state, s.diagnosis?.kind]),
        [["vllm-serve.log", "read", "cuda-error"], ["ray-start.log", "missing", undefined], ["kernel", "unreadable", undefined]]);
    const root = clusterRootCause([a, b])!;
    assert.equal(root.host, b.host);
    assert.equal(root.source, "vllm-serve.log");
    assert.equal(root.diagnosis!.line, "RuntimeError: CUDA error: an illegal memory access was encountered");
    // With the worker's log gone, the head's consequence is what is left.
    assert.equal(clusterRootCause([a])!.diagnosis!.kind, "worker-died");
});

test("the kernel's driver lines are read and diagnosed; a tie in tier goes to the earlier host", () => {
    const noise = Array.from({ length: KERNEL_LINES + 50 }, (_, i) => `Dec 07 06:00:${String(i % 60).padStart(2, "0")} spark-b kernel: usb 1-1: new device ${i}`);
    const host = hostAnswer({}, [...noise, NVRM].join("\n"));
    assert.equal(host.run.status, 0, host.run.stderr);
    const b = parseHostLogs(host.plan, host.plan.hosts[1], 0, host.run.stdout, "");
    const kernel = b.sources.find(s => s.source === "kernel")!;
    assert.equal(kernel.state, "read");
    assert.equal(kernel.text!.trim(), NVRM, "only the driver's lines are kept");
    assert.equal(kernel.diagnosis?.kind, "driver-oom");
    const other = hostAnswer({ "vllm-serve.log": WORKER_CAUSE }, null);
    const a = parseHostLogs(other.plan, other.plan.hosts[0], 0, other.run.stdout, "");
    assert.equal(clusterRootCause([a, b])!.host, a.host);
    assert.equal(clusterRootCause([b, a])!.host, b.host);
});

test("a log cannot forge another source's line, and a host that does not answer is named with why", () => {
    const forged = "SPARK_VLLM_LOG kernel ok " + Buffer.from(NVRM).toString("base64") + "\n";
    const host = hostAnswer({ "vllm-serve.log": forged }, null);
    const parsed = parseHostLogs(host.plan, host.plan.hosts[0], 0, host.run.stdout, "");
    assert.equal(parsed.sources.find(s => s.source === "kernel")!.state, "unreadable");
    assert.equal(parsed.sources.find(s => s.source === "vllm-serve.log")!.text, forged);
    const down = parseHostLogs(host.plan, host.plan.hosts[1], 255, "", "ssh: connect to host 198.18.0.3 port 22: Connection refused\n");
    assert.deepEqual(down.sources, []);
    assert.match(down.error!, /exit 255: ssh: connect to host .* Connection refused$/);
    assert.equal(clusterRootCause([down]), undefined);
});
