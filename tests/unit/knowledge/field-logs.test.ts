// Owners' logs from 2026 (issue 47): every class of failure they posted is recognised with its root-cause line and a hint
// that names the fix. tests/fixtures/logs/field/index.json cites each fixture's source and says what diagnose must find;
// `composed` marks one composed from quoted messages rather than posted as a log. The held-out set (../heldout) is
// scored in heldout-logs.test.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { diagnose, DIAGNOSIS_CATALOG, normaliseLog } from "../../../components/knowledge/diagnosis";
import { diagnoseWithNccl } from "../../../components/knowledge/nccl";

const FIELD = path.join(__dirname, "..", "..", "fixtures", "logs", "field");

interface FieldFixture {
    source: string;
    url: string | null;
    composed?: boolean;
    kind: string;
    /** Text the root-cause line must contain (its start, unless the owner's copy kept a prefix diagnose strips). */
    line: string;
    /** Words the hint must contain: the fix. */
    fix: string[];
    note?: string;
}
const INDEX = JSON.parse(readFileSync(path.join(FIELD, "index.json"), "utf8")) as { fixtures: Record<string, FieldFixture> };
const hintOf = (kind: string) => DIAGNOSIS_CATALOG.find(e => e.kind === kind)!.hint;

/** The classes issue 47 names, each with the fix its hint must name. */
const CLASSES: Record<string, string[]> = {
    "rdma-kernel-regression": ["7.0.0-1019-nvidia", "CmaFree", "CmaTotal", "kho=off", "kexec_crash_size", "6.17.0-1032", "memlock"],
    "roce-gid-index": ["NCCL_IB_GID_INDEX", "per host", "/sys/class/infiniband/<hca>/ports/1/gids/", "gid_attrs/types", "RoCE v2"],
    "socket-iface-missing": ["GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "spark-vllm:hosts[].fabric.interface", "ip -br addr", "eth0"],
    "driver-oom": ["NV_ERR_NO_MEMORY", "journalctl -k", "reboot", "power-cycle", "memory guard", "MemAvailable"],
    "worker-died": ["dead worker's own log", "spark-vllm diagnose --stack", "journalctl -k"],
    "mp-across-nodes": ["spark-vllm:vllm.backend: ray", "--distributed-executor-backend ray", "--nnodes"],
};

test("the field index lists every .log in field/ and each entry cites its source", () => {
    const logs = readdirSync(FIELD).filter(f => f.endsWith(".log")).sort();
    assert.deepEqual(Object.keys(INDEX.fixtures).sort(), logs);
    for (const [file, f] of Object.entries(INDEX.fixtures)) {
        assert.ok(f.source.length > 10, file);
        assert.ok(f.url === null || /^https:\/\/github\.com\/[^/]+\/[^/]+\/(issues|pull)\/[0-9]+$/.test(f.url), `${file}: ${f.url}`);
        assert.ok(f.url !== null || /file id [0-9]+|composed/.test(f.source), `${file}: a source without a URL says why`);
        assert.equal(/composed/i.test(file), f.composed === true, `${file}: composed fixtures are named and marked so`);
        assert.ok(f.fix.length > 0, file);
    }
});

test("every class of issue 47 has owners' logs in field/, at least one of them not composed", () => {
    for (const kind of Object.keys(CLASSES)) {
        const real = Object.values(INDEX.fixtures).filter(f => f.kind === kind && !f.composed);
        assert.ok(real.length >= 1, kind);
    }
});

for (const [file, f] of Object.entries(INDEX.fixtures)) {
    test(`field/${file}: ${f.kind} (${f.source.split(" ")[0]}), root-cause line, hint naming the fix`, () => {
        const log = readFileSync(path.join(FIELD, file), "utf8");
        // What `spark-vllm diagnose` prints (bin/diagnose-command.ts uses diagnoseWithNccl).
        const d = diagnoseWithNccl(log);
        assert.ok(d, "a diagnosis");
        assert.equal(d.kind, f.kind);
        assert.ok(d.line.includes(f.line), d.line);
        assert.ok(normaliseLog(log).some(l => l.trim().endsWith(d.line)), "the line is a whole log line");
        assert.equal(d.hint, hintOf(f.kind));
        for (const fix of f.fix) assert.ok(d.hint.includes(fix), `${f.kind} hint names ${fix}`);
    });
}

test("each class's hint names its fix", () => {
    for (const [kind, words] of Object.entries(CLASSES)) {
        for (const w of words) assert.ok(hintOf(kind).includes(w), `${kind}: ${w}`);
    }
});

// Ordering: a rank's own cause wins over the consequences other processes print, wherever it is in the log.
const ENOMEM = "(EngineCore pid=721) (RayWorkerProc pid=330, ip=192.168.177.12) gx10-b:555:771 [0] misc/ibvwrap.cc:217 (wrap_ibv_reg_mr_iova2) NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory";
const DIST = "(EngineCore pid=721) ERROR 09-12 10:01:02 [core.py:1099] torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:93, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.30.7";
const SYSERR = "(EngineCore pid=721) ERROR 09-12 10:01:02 [core.py:1099] ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.";
const WRAPPER = "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}";
const RAYLET = "(EngineCore pid=721) (raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, check the logs for the dead worker.";

test("ordering: the worker's ibv_reg_mr ENOMEM wins over the head's DistBackendError, ncclSystemError and wrapper printed before it", () => {
    for (const log of [[DIST, SYSERR, WRAPPER, ENOMEM], [ENOMEM, DIST, SYSERR, WRAPPER], [RAYLET, DIST, ENOMEM]]) {
        const d = diagnoseWithNccl(log.join("\n"));
        assert.equal(d?.kind, "rdma-kernel-regression", log.join(" | "));
        assert.match(d!.line, /Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory$/);
    }
});

test("ordering: the generic nccl-error never wins over a specific class", () => {
    const gloo = "(RayWorkerProc pid=330, ip=192.168.177.12) RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for: enp1s0f1np1";
    assert.equal(diagnose([SYSERR, gloo].join("\n"))?.kind, "socket-iface-missing");
    const qp = "spark-b:311:402 [0] misc/ibvwrap.cc:309 NCCL WARN Call to ibv_modify_qp failed with 61 No data available, on dev rocep1s0f1:1, curr state INIT, next state RTR, local GID index 3, local GID ::, remote GID ::";
    assert.equal(diagnose([SYSERR, DIST, qp].join("\n"))?.kind, "roce-gid-index");
    assert.equal(diagnose([SYSERR, DIST, qp].join("\n"))?.line, qp.replace(/^.*?spark-b/, "spark-b"));
    // Alone, the head's `unhandled system error` (ncclSystemError) is the GID class; its hint also names the kernel's
    // ENOMEM, the other common system error on a Spark.
    assert.equal(diagnose(DIST)?.kind, "roce-gid-index");
    assert.equal(diagnose([SYSERR, DIST].join("\n"))?.kind, "roce-gid-index");
    assert.match(hintOf("roce-gid-index"), /ibv_reg_mr_iova2 failed with error Cannot allocate memory.*kho=off/);
    assert.equal(diagnose("RuntimeError: NCCL error: internal error - please report this issue to the NCCL developers")?.kind, "nccl-error");
});

test("ordering: a dead worker's consequence loses to any cause, even one printed after it; the wrapper never wins", () => {
    const oom = "(RayWorkerProc pid=330, ip=192.168.177.12) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.";
    assert.equal(diagnose([RAYLET, WRAPPER, oom].join("\n"))?.kind, "cuda-oom");
    assert.equal(diagnose([RAYLET, WRAPPER].join("\n"))?.kind, "worker-died");
    const stall = "(EngineCore pid=171) INFO 07-16 08:20:50 [shm_broadcast.py:705] No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).";
    const rpc = "(EngineCore pid=171) ERROR 07-16 08:23:49 [core.py:1242] TimeoutError: RPC call to sample_tokens timed out.";
    // The broadcast-block line is weak (compilation prints it on healthy starts); the RPC timeout is firm.
    assert.equal(diagnose([stall, stall, rpc].join("\n"))?.line, "TimeoutError: RPC call to sample_tokens timed out.");
    assert.equal(diagnose([stall, "ValueError: No available memory for the cache blocks."].join("\n"))?.kind, "no-cache-memory");
});

test("mp-across-nodes needs the semaphore's traceback: a bare FileNotFoundError is not it", () => {
    const bare = "FileNotFoundError: [Errno 2] No such file or directory\nException: WorkerProc initialization failed\n";
    assert.equal(diagnose(bare)?.kind, "unknown-engine-failure");
    const real = readFileSync(path.join(FIELD, "recipe-registry-13.log"), "utf8");
    // In the order a traceback prints it, frame then source then exception.
    const ordered = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/multiprocessing/synchronize.py", line 115, in __setstate__',
        "    self._semlock = _multiprocessing.SemLock._rebuild(*state)",
        "FileNotFoundError: [Errno 2] No such file or directory",
        "Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.",
    ].join("\n");
    for (const log of [real, ordered]) assert.equal(diagnose(log)?.kind, "mp-across-nodes");
    // A file that is missing names its path: not a semaphore.
    assert.equal(diagnose(`${ordered.replace("No such file or directory", "No such file or directory: '/models/x'")}`)?.kind, "unknown-engine-failure");
});

test("driver-oom is the driver's message, not any out-of-memory", () => {
    assert.equal(diagnose("Out of memory: Killed process 4242 (python3) total-vm:1234kB")?.kind, undefined);
    assert.equal(diagnose("[Sat Sep 13 01:02:03 2026] NVRM: nvAssertOkFailedNoLog: Assertion failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from pRmApi->Alloc(...) @ nv_gpu_ops.c:4647")?.kind, "driver-oom");
});
