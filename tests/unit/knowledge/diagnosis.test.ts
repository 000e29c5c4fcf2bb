import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import {
    contextAround,
    diagnose,
    DIAGNOSIS_CATALOG,
    LOG_SYNTAX,
    normaliseLog,
} from "../../../components/knowledge/diagnosis";
import { toolsProgram } from "../../../components/plan/toolsProgram";
import { testTempDir } from "../../tempDir";

const FIXTURES = path.join(__dirname, "..", "..", "fixtures", "logs");
const fixture = (name: string) => readFileSync(path.join(FIXTURES, name), "utf8");

/** Fixture → kind and the start of the root-cause line (the line itself is checked to be a whole log line). */
const EXPECTED: Record<string, [kind: string, line: string]> = {
    "nccl-socket-fallback.log": ["nccl-socket-fallback", "vm:941:941 [0] NCCL INFO NET/IB : No device found."],
    "arch-inspect-failed.log": ["arch-inspect-failed", "Value error, Model architectures ['Qwen3_5MoeForConditionalGeneration'] failed to be inspected."],
    "arch-unsupported.log": ["arch-unsupported", "ValueError: Model architectures ['Qwen3_5MoeForConditionalGeneration'] are not supported for now."],
    "transformers-unknown-arch.log": ["transformers-unknown-arch", "ValueError: The checkpoint you are trying to load has model type `qwen3_5_moe`"],
    "kv-cache-insufficient.log": ["kv-cache-insufficient", "ValueError: To serve at least one request with the models's max seq len (262144), (24.00 GiB KV cache is needed"],
    "no-cache-memory.log": ["no-cache-memory", "ValueError: No available memory for the cache blocks."],
    "startup-free-memory.log": ["startup-free-memory", "ValueError: Free memory on device cuda:0 (84.12/119.70 GiB) on startup"],
    "cuda-oom.log": ["cuda-oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB."],
    "nccl-error.log": ["nccl-error", "RuntimeError: NCCL error: remote process exited or there was a network error"],
    // NCCL_SOCKET_IFNAME names an interface spark-b does not have: NCCL's bootstrap WARN is the cause, the
    // `unhandled system error` printed after it (on both hosts) only its consequence.
    "socket-iface-missing.log": ["socket-iface-missing", "spark-b:311:311 [0] bootstrap.cc:105 NCCL WARN Bootstrap : no socket interface found"],
    "nccl-timeout.log": ["nccl-timeout", "[E1129 23:05:14.123456789 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout"],
    "ray-placement-group.log": ["ray-placement-group", "ValueError: Cannot provide a placement group of placement_group_specs=["],
    "ray-no-gpu.log": ["ray-no-gpu", "ValueError: Current node has no GPU available. current_node_resource={'accelerator_type:GB10'"],
    "port-in-use.log": ["port-in-use", "OSError: [Errno 98] Address already in use"],
    "trust-remote-code.log": ["trust-remote-code", "ValueError: Loading moonshotai/Kimi-K2-Instruct requires you to execute the configuration file"],
    "gated-repo.log": ["gated-repo", "huggingface_hub.errors.GatedRepoError: 401 Client Error."],
    "invalid-repo-or-path.log": ["invalid-repo-or-path", "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error."],
    "quantization-unsupported.log": ["quantization-unsupported", "Value error, Unknown quantization method: modelopt_fp4."],
    "tp-divisibility.log": ["tp-divisibility", "ValueError: Total number of attention heads (64) must be divisible by tensor parallel size (3)."],
    "cuda-kernel-image.log": ["cuda-kernel-image", "RuntimeError: CUDA error: no kernel image is available for execution on the device"],
    "cuda-error.log": ["cuda-error", "RuntimeError: CUDA error: an illegal memory access was encountered"],
    "ray-missing.log": ["ray-missing", "ValueError: Failed to import Ray: No module named 'ray'.Please install Ray with `pip install ray`."],
    "rendezvous-timeout.log": ["rendezvous-timeout", "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined."],
    "unknown-engine-failure.log": ["unknown-engine-failure", "AssertionError: expert map has 0 local experts on rank 1 (expected 64)"],
};

/** One line each, in the real wording, for the patterns the fixtures do not exercise. */
const SAMPLES: [kind: string, line: string][] = [
    ["ray-missing", "ValueError: Failed to import Ray: No module named 'ray'.Please install Ray with `pip install ray`."],
    ["ray-missing", "ValueError: Failed to import Ray, please install Ray with `pip install ray`."],
    ["rendezvous-timeout", "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined."],
    ["kv-cache-insufficient", "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (12345). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."],
    ["kv-cache-insufficient", "ValueError: To serve at least one request with the model's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (4.21 GiB)."],
    ["startup-free-memory", "ValueError: Free memory on device (61.05/119.7 GiB) on startup is less than desired GPU memory utilization (0.52, 62.24 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."],
    ["cuda-oom", "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 108.00 MiB."],
    ["cuda-oom", "RuntimeError: CUDA error: out of memory"],
    ["roce-gid-index", "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3"],
    ["nccl-error", "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.27.3"],
    // vllm/v1/executor/multiproc_executor.py (monitor_workers)
    ["worker-died", "ERROR 03-18 11:21:32 [multiproc_executor.py:149] Worker proc VllmWorker-1 died unexpectedly, shutting down executor."],
    ["worker-died", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."],
    ["worker-died", "TimeoutError: RPC call to sample_tokens timed out."],
    ["driver-oom", "kernel: NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359"],
    ["nccl-error", "ncclInternalError: Internal check failed."],
    ["nccl-error", "spark-b:311:402 [0] transport/net_ib.cc:1134 NCCL WARN NET/IB : Got completion from peer 192.168.100.10<42135> with status=12"],
    ["nccl-timeout", "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600004 milliseconds before timing out."],
    ["ray-placement-group", "WARNING 03-18 11:21:32 ray_utils.py:320] The number of required GPUs exceeds the total number of available GPUs in the placement group."],
    ["ray-placement-group", "ValueError: The number of required GPUs exceeds the total number of available GPUs in the cluster."],
    ["port-in-use", "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use"],
    ["trust-remote-code", "ValueError: The repository for internlm/internlm2-chat-7b contains custom code which must be executed to correctly load the model. You can inspect the repository content at https://hf.co/internlm/internlm2-chat-7b."],
    ["trust-remote-code", "Please pass the argument `trust_remote_code=True` to allow custom code to be run."],
    ["gated-repo", "Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.2-1B-Instruct/resolve/main/config.json."],
    ["gated-repo", "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://huggingface.co/meta-llama/Llama-3.2-1B/resolve/main/config.json"],
    ["invalid-repo-or-path", "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/models/qwen'. Use `repo_type` argument if needed."],
    ["invalid-repo-or-path", "OSError: Qwen/Qwen3.5-9000B is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'"],
    ["invalid-repo-or-path", "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing traffic has been disabled."],
    ["invalid-repo-or-path", "ValueError: Cannot find any of ['config.json', 'params.json'] in /models/qwen"],
    ["quantization-unsupported", "ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 89. Current capability: 86."],
    ["quantization-unsupported", "ValueError: fp8 quantization is currently not supported in ROCm."],
    ["tp-divisibility", "ValueError: Total number of hidden layers (61) must be divisible by pipeline parallel size (2)."],
    ["transformers-unknown-arch", "KeyError: 'qwen3_5_moe'"],
    ["arch-unsupported", "ValueError: Model architecture MPTForCausalLM was supported in vLLM until v0.10.2, and is not supported anymore."],
];

const kinds = DIAGNOSIS_CATALOG.map(e => e.kind);
/** The stable kinds promised in DESIGN.md. */
const DESIGN_KINDS = ["arch-unsupported", "arch-inspect-failed", "transformers-unknown-arch", "kv-cache-insufficient",
    "no-cache-memory", "startup-free-memory", "cuda-oom", "nccl-error", "nccl-timeout", "ray-placement-group", "ray-no-gpu",
    "port-in-use", "trust-remote-code", "gated-repo", "quantization-unsupported", "tp-divisibility", "invalid-repo-or-path"];


for (const [name, [kind, start]] of Object.entries(EXPECTED)) {
    test(`${name}: ${kind}, root-cause line`, () => {
        const log = fixture(name);
        const lines = log.split("\n").length;
        assert.ok(lines >= 60 && lines <= 200, `${name} has ${lines} lines`);
        const d = diagnose(log);
        assert.ok(d, "a diagnosis");
        assert.equal(d.kind, kind);
        assert.ok(d.line.startsWith(start), d.line);
        assert.ok(normaliseLog(log).some(l => l.trim().endsWith(d.line)), "the line is a whole log line");
        assert.equal(d.hint, DIAGNOSIS_CATALOG.find(e => e.kind === kind)!.hint);
    });
}

/** Owners' logs (tests/fixtures/logs/field, its index.json; field-logs.test.ts checks each): kind by file. */
const FIELD = path.join(FIXTURES, "field");
const fieldKinds = Object.values(JSON.parse(readFileSync(path.join(FIELD, "index.json"), "utf8")).fixtures as Record<string, { kind: string }>).map(f => f.kind);

test("every kind in the catalog has a fixture: a whole log here, or owners' logs in field/", () => {
    const covered = new Set([...Object.values(EXPECTED).map(([k]) => k), ...fieldKinds]);
    assert.deepEqual([...covered].sort(), [...kinds].sort());
    for (const [k] of Object.values(EXPECTED)) assert.ok(kinds.includes(k), k);
    assert.equal(new Set(kinds).size, kinds.length);
    for (const k of DESIGN_KINDS) assert.ok(kinds.includes(k), k);
});

test("single lines in the real wording are recognised", () => {
    for (const [kind, line] of SAMPLES) {
        const d = diagnose(`(APIServer pid=1) INFO 11-29 22:44:49 [api_server.py:1805] vLLM API server version 0.17.1\n${line}\n`);
        assert.equal(d?.kind, kind, line);
    }
});

test("the wrapper printed after the root cause never wins", () => {
    const log = fixture("kv-cache-insufficient.log");
    const lines = normaliseLog(log);
    const cause = lines.findIndex(l => l.includes("KV cache is needed"));
    const wrapper = lines.findIndex(l => l.includes("Engine core initialization failed. See root cause above."));
    assert.ok(cause >= 0 && wrapper > cause);
    assert.equal(diagnose(log)?.kind, "kv-cache-insufficient");
});

test("a cause printed after the wrapper (interleaved processes) still wins", () => {
    const log = [
        "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        "(EngineCore_DP0 pid=312) ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
    ].join("\n");
    assert.equal(diagnose(log)?.kind, "no-cache-memory");
});

test("wrapper-only logs: unknown-engine-failure with the wrapper line", () => {
    const d = diagnose("(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n");
    assert.equal(d?.kind, "unknown-engine-failure");
    assert.equal(d?.line, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}");
    const withWorker = diagnose("Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.\n");
    assert.equal(withWorker?.kind, "unknown-engine-failure");
});

test("unknown failures: the last exception before the wrapper, not an earlier harmless one", () => {
    const log = [
        "(APIServer pid=1) ModuleNotFoundError: No module named 'flash_attn'",
        "(EngineCore_DP0 pid=3) ERROR 11-29 22:45:10 [core.py:708] EngineCore failed to start.",
        "(EngineCore_DP0 pid=3) ERROR 11-29 22:45:10 [core.py:708] AssertionError: expert map is empty",
        "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ].join("\n");
    assert.deepEqual(diagnose(log)?.line, "AssertionError: expert map is empty");
});

test("clean startup and empty logs have no diagnosis", () => {
    assert.equal(diagnose(fixture("clean-startup.log")), undefined);
    assert.equal(diagnose(""), undefined);
    assert.ok(fixture("clean-startup.log").includes("Application startup complete."));
});

test("a traceback source line naming the error is not the root cause", () => {
    const log = [
        '  File "/usr/local/lib/python3.12/dist-packages/huggingface_hub/utils/_http.py", line 426, in hf_raise_for_status',
        "    raise _format(GatedRepoError, message, response) from e",
        "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-abc)",
    ].join("\n");
    assert.equal(diagnose(log)?.line, "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-abc)");
    // A frame without a source line (Cython) is directly followed by the exception.
    const cython = '  File "uvloop/loop.pyx", line 1518, in uvloop.loop.Loop.run_until_complete\nOSError: [Errno 98] Address already in use';
    assert.equal(diagnose(cython)?.kind, "port-in-use");
});

test("weak patterns only count when no firm pattern matches anywhere", () => {
    const warn = "spark-b:311:402 [0] transport/net_ib.cc:1134 NCCL WARN NET/IB : Got completion from peer 192.168.100.10<42135> with status=12";
    assert.equal(diagnose(`${warn}\nValueError: No available memory for the cache blocks.`)?.kind, "no-cache-memory");
    assert.equal(diagnose(warn)?.kind, "nccl-error");
});

test("normaliseLog strips ANSI, CR and (nested) process prefixes, keeps indentation", () => {
    const raw =
        "\x1b[1;36m(EngineCore_DP0 pid=312)\x1b[0;0m \x1b[36m(RayWorkerWrapper pid=311, ip=192.168.100.11)\x1b[0m \x1b[32mINFO\x1b[0m 11-29 22:45:21 [x.py:1] hi\r\n" +
        "(pid=523) [rank0]:   File \"a.py\", line 1, in f  \r\n" +
        "(raylet, ip=192.168.100.11) worker died [repeated 2x across cluster]\rnext";
    assert.deepEqual(normaliseLog(raw), [
        "INFO 11-29 22:45:21 [x.py:1] hi",
        '  File "a.py", line 1, in f',
        "worker died",
        "next",
    ]);
});

test("contextAround: normalised lines before and after the root cause", () => {
    const log = fixture("cuda-oom.log");
    const d = diagnose(log)!;
    const ctx = contextAround(log, d.line);
    assert.equal(ctx.length, 15);
    assert.ok(ctx[10].endsWith(d.line));
    assert.ok(ctx.every(l => !l.includes("\x1b") && !l.startsWith("(")));
    assert.deepEqual(contextAround(log, d.line, 2, 1).length, 4);
    assert.deepEqual(contextAround(log, "not in the log"), []);
    assert.deepEqual(contextAround("only line", "only line"), ["only line"]);
});

test("catalog patterns stay in the JS/Python common regex subset", () => {
    const sources = [...DIAGNOSIS_CATALOG.flatMap(e => [...e.patterns, ...(e.weakPatterns ?? []), ...(e.requires ?? [])]), ...Object.values(LOG_SYNTAX)];
    for (const s of sources) {
        assert.doesNotMatch(s, /\\[dDwWsSbBAZzpPk]|\(\?<|\(\?P|\(\?[imsx]/, s);
        new RegExp(s, "s");
    }
    for (const e of DIAGNOSIS_CATALOG) assert.ok(e.hint.length > 40 && /^[\x20-\x7e]*$/.test(e.hint), e.kind);
});

test("hints name the Spark settings to change", () => {
    const hint = (k: string) => DIAGNOSIS_CATALOG.find(e => e.kind === k)!.hint;
    for (const k of ["kv-cache-insufficient", "no-cache-memory", "startup-free-memory", "cuda-oom"]) {
        assert.match(hint(k), /128 GB is unified memory/);
        assert.match(hint(k), /spark-vllm:vllm\.gpuMemoryUtilization/);
        assert.match(hint(k), /drop_caches/);
    }
    for (const k of ["nccl-error", "nccl-timeout"]) {
        for (const s of ["spark-vllm:hosts[].fabric.interface", ".hcas", "enp1s0f1np1", "enP2p1s0f1np1", "rocep1s0f1", "roceP2p1s0f1", "IPC_LOCK", "memlock unlimited", "/dev/infiniband"]) {
            assert.ok(hint(k).includes(s), `${k}: ${s}`);
        }
    }
    for (const k of ["arch-unsupported", "arch-inspect-failed", "transformers-unknown-arch"]) {
        assert.match(hint(k), /does not work/);
        assert.match(hint(k), /spark-vllm:image/);
    }
    assert.match(hint("port-in-use"), /spark-vllm:vllm\.port/);
    assert.match(hint("port-in-use"), /leftover process/);
    assert.match(hint("trust-remote-code"), /spark-vllm:model\.trustRemoteCode: true/);
    assert.match(hint("gated-repo"), /spark-vllm:hfToken/);
    assert.match(hint("gated-repo"), /licence/);
});

test("no hint says a plain `pulumi up` relaunches vLLM: after a failed probe it re-runs only the probe", () => {
    for (const e of DIAGNOSIS_CATALOG) assert.doesNotMatch(e.hint, /run `pulumi up` again/, e.kind);
    const rendezvous = DIAGNOSIS_CATALOG.find(e => e.kind === "rendezvous-timeout")!.hint;
    assert.match(rendezvous, /`pulumi up --replace` of every host's memory gate that `spark-vllm status` prints/);
});

test("the Python port (in the shipped helper program) gives the same answers as TypeScript", () => {
    const texts = [
        ...readdirSync(FIXTURES).filter(f => f.endsWith(".log")).sort().map(fixture),
        ...["field", "heldout"].flatMap(d => readdirSync(path.join(FIXTURES, d)).filter(f => f.endsWith(".log")).sort().map(f => fixture(path.join(d, f)))),
        ...SAMPLES.map(([, line]) => line),
        "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above.\n",
        // Longer than any line cap: both sides cut (or keep) it alike.
        `(EngineCore_DP0 pid=3) ERROR ${"x".repeat(20000)} CUDA out of memory\nRuntimeError: ${"y ".repeat(9000)}\n`,
        "",
    ];
    const dir = testTempDir("diagnosis");
    const tools = path.join(dir, "spark_vllm_tools.py");
    writeFileSync(tools, toolsProgram());
    const check = `
import json, runpy, sys
g = runpy.run_path(sys.argv[1], run_name="joined")
out = []
for text in json.load(sys.stdin):
    d = g["diagnose"](text)
    out.append({"diagnosis": d, "lines": g["normalise_log"](text), "context": g["context_around"](text, d["line"]) if d else None})
json.dump(out, sys.stdout)
`;
    const run = spawnSync("python3", ["-c", check, tools], { input: JSON.stringify(texts), encoding: "utf8", maxBuffer: 64 << 20 });
    assert.equal(run.status, 0, run.stderr);
    const results = JSON.parse(run.stdout) as { diagnosis: unknown; lines: string[]; context: string[] | null }[];
    assert.equal(results.length, texts.length);
    texts.forEach((text, i) => {
        const d = diagnose(text);
        assert.deepEqual(results[i].diagnosis, d ?? null, `text ${i}`);
        assert.deepEqual(results[i].lines, normaliseLog(text), `text ${i}`);
        assert.deepEqual(results[i].context, d ? contextAround(text, d.line) : null, `text ${i}`);
    });
});

test("Ray placement: current vLLM's multi-GPU timeout and Ray's autoscaler warning are ray-placement-group", () => {
    // vllm/v1/executor/ray_utils.py _wait_until_pg_ready (total_gpu_required > 1)
    const vllm = "ValueError: Cannot provide a placement group requiring 2.0 GPUs (placement_group_specs=[{'GPU': 1.0, 'node:192.168.100.10': 0.001}, {'GPU': 1.0}]) within 1800 seconds.";
    const log = `INFO 03-18 11:20:01 [ray_utils.py:402] No current placement group found. Creating a new placement group.\n${vllm}\nTensor parallel size may exceed available GPUs in your cluster. Check resources with \`ray status\` and \`ray list nodes\`.\n`;
    assert.deepEqual([diagnose(log)?.kind, diagnose(log)?.line], ["ray-placement-group", vllm]);
    // ray-project/ray python/ray/autoscaler/_private/autoscaler.py (and the v2 autoscaler's plural), as the driver prints it
    for (const line of [
        "(autoscaler +1m2s) Error: No available node types can fulfill resource request {'GPU': 1.0}. Add suitable node types to this cluster to resolve this issue.",
        "(autoscaler +35s) Error: No available node types can fulfill resource requests {'GPU': 1.0}*1. Add suitable node types to this cluster to resolve this issue.",
    ]) {
        const d = diagnose(`INFO 03-18 11:20:01 [ray_utils.py:402] Waiting\n${line}\n`);
        assert.equal(d?.kind, "ray-placement-group", line);
    }
    // weak: a firm cause elsewhere in the log wins over the autoscaler's warning
    const both = "(autoscaler +35s) Error: No available node types can fulfill resource request {'GPU': 1.0}.\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n";
    assert.equal(diagnose(both)?.kind, "cuda-oom");
});

test("nccl-socket-fallback is judged by the transport NCCL used: a healthy P2P run that printed `No device found.` is none", () => {
    const nccl = (f: string) => readFileSync(path.join(__dirname, "..", "..", "fixtures", "nccl", f), "utf8");
    assert.match(nccl("p2p.nccl.log"), /NET\/IB : No device found\./);
    assert.equal(diagnose(nccl("p2p.nccl.log")), undefined, "channels via P2P/CUMEM, no HCA asked for");
    assert.equal(diagnose(nccl("torchrun.nccl.log")), undefined);
    for (const f of ["socket.nccl.log", "hca-missing-net.nccl.log", "hca-missing.nccl.log"])
        assert.equal(diagnose(nccl(f))?.kind, "nccl-socket-fallback", f);
});

test("the cuda-kernel-image hint agrees with the images table: sm_120 kernels run on the GB10's 12.1", async () => {
    const { cudaKernelsRunOn, GB10_CAPABILITY } = await import("../../../components/knowledge/images");
    assert.equal(cudaKernelsRunOn(["sm_120"], GB10_CAPABILITY).runs, true);
    const hint = DIAGNOSIS_CATALOG.find(e => e.kind === "cuda-kernel-image")!.hint;
    assert.match(hint, /sm_120 runs on 12\.1/);
    assert.match(hint, /arch list includes 12\.0 or 12\.1/);
    assert.doesNotMatch(hint, /arch list including 12\.1\)/, "the old hint asked for 12.1 only");
});
