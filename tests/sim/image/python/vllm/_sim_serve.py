"""`vllm serve` stand-in.

Binds the port at once (not listening), resolves the model, checks the
architecture against the image's release.json, joins the simulated Ray cluster
(placement group of TP*PP GPUs) or, with --nnodes N > 1, vLLM's own multi-node
rendezvous (--node-rank/--master-addr/--master-port, --headless on the other
nodes), checks free memory and the CUDA build against the simulated GB10,
"loads" for load_seconds (plus compile_seconds unless the compile cache has the
graph) with real-looking log lines, and only then listens and serves an
OpenAI-compatible API. Fault switches come from $HF_HOME/sim-faults.json (see
simcommon.faults and tests/sim/README.md)."""
import asyncio
import hashlib
import importlib
import json
import math
import os
import random
import secrets
import signal
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import simcommon as sc

PY = "/usr/local/lib/python3.12/dist-packages"
TOKENS_PER_GIB = 13054  # KV tokens per GiB (Qwen3.5-122B-ish, FP8 KV off)

STOP = threading.Event()
GIB = 1024 ** 3
# Model load and torch.compile times when neither a fault nor release.json sets them: short, so the suite does not wait
# through them; the tests about loading and compiling set `load_seconds` / `compile_seconds` themselves.
DEFAULT_LOAD_SECONDS = 0.5
DEFAULT_COMPILE_SECONDS = 0.3



def verify_token(api_key, authorization):
    """Whether an Authorization header carries the key, as vLLM's AuthenticationMiddleware.verify_token decides
    (vllm-project/vllm vllm/entrypoints/openai/server_utils.py, commit 029329a8eded26d05ef8d4a302a6c9f318817dd8):
    `scheme, _, param = value.partition(" ")`, the scheme compared with `scheme.lower() != "bearer"` (any case), the
    rest after the first space compared whole by the sha256 of each with secrets.compare_digest."""
    if not authorization:
        return False
    scheme, _, param = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return secrets.compare_digest(hashlib.sha256(param.encode("utf-8")).digest(),
                                  hashlib.sha256(api_key.encode("utf-8")).digest())

def guarded_prefix(version):
    """The paths vLLM's own --api-key guards, by the image's vLLM version: "/v1" only up to 0.20.1 (vllm 0.20.1 wheel,
    vllm/entrypoints/openai/server_utils.py AuthenticationMiddleware: `if url_path.startswith("/v1") and not
    self.verify_token(headers)`); later GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere") (vllm-project/vllm#42594
    added /v2; vllm/entrypoints/serve/utils/server_utils.py, commit 0753ceeb9cb7d7e39564ebebfe031d179e0c9924), checked as
    `url_path.startswith(GUARDED_PREFIX)`."""
    v = tuple(int(p) for p in str(version).split(".")[:3] if p.isdigit())
    return ("/v1",) if v <= (0, 20, 1) else ("/v1", "/v2", "/inference", "/cohere")


def middleware_args(argv):
    """Every --middleware value, in order (vLLM's FrontendArgs: `action="append"`)."""
    out = []
    for i, a in enumerate(argv):
        if a == "--middleware" and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif a.startswith("--middleware="):
            out.append(a.split("=", 1)[1])
    return out


def vllm_config_root():
    """VLLM_CONFIG_ROOT as vllm/envs.py resolves it: the variable (user-expanded), else $XDG_CONFIG_HOME/vllm, else
    ~/.config/vllm (get_default_config_root)."""
    default = os.path.join(os.getenv("XDG_CONFIG_HOME", os.path.join(os.path.expanduser("~"), ".config")), "vllm")
    return os.path.expanduser(os.getenv("VLLM_CONFIG_ROOT", default))


# vllm/v1/executor/ray_executor.py RayDistributedExecutor.WORKER_SPECIFIC_ENV_VARS: never copied to a worker.
WORKER_SPECIFIC_ENV_VARS = {"VLLM_HOST_IP", "VLLM_HOST_PORT", "LOCAL_RANK", "CUDA_VISIBLE_DEVICES",
                            "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"}
# vllm/ray/ray_env.py DEFAULT_ENV_VAR_PREFIXES_TO_COPY and DEFAULT_EXTRA_ENV_VARS_TO_COPY.
RAY_ENV_PREFIXES = {"VLLM_", "LMCACHE_", "NCCL_", "UCX_", "HF_", "HUGGING_FACE_"}
RAY_ENV_EXTRA = {"PYTHONHASHSEED"}


def ray_env_vars_to_copy(environ, config_root, log=None):
    """vllm/ray/ray_env.py get_env_vars_to_copy(exclude_vars=WORKER_SPECIFIC_ENV_VARS) over ENVIRON, step by step:
    RAY_NON_CARRY_OVER_ENV_VARS from <VLLM_CONFIG_ROOT>/ray_non_carry_over_env_vars.json (read at import; a file that
    does not parse is an empty set, with a warning); 1. vLLM's registered variables (every one is VLLM_-prefixed, so
    the prefix covers those that are set); 2. every set variable with a prefix of DEFAULT_ENV_VAR_PREFIXES_TO_COPY plus
    VLLM_RAY_ENV_VAR_PREFIXES_TO_COPY (comma-separated); 3. DEFAULT_EXTRA_ENV_VARS_TO_COPY plus
    VLLM_RAY_EXTRA_ENV_VARS_TO_COPY; 4. minus exclude_vars and RAY_NON_CARRY_OVER_ENV_VARS. Logs as vLLM does."""
    path = os.path.join(config_root, "ray_non_carry_over_env_vars.json")
    non_carry = set()
    if os.path.exists(path):
        try:
            with open(path) as f:
                non_carry = set(json.load(f))
        except ValueError:
            if log:
                log.warning("ray_env.py:27", "Failed to parse %s. Using an empty set for non-carry-over env vars." % path)
    split = lambda v: {x.strip() for x in (environ.get(v) or "").split(",") if x.strip()}
    prefixes = RAY_ENV_PREFIXES | split("VLLM_RAY_ENV_VAR_PREFIXES_TO_COPY")
    names = {k for k in environ if any(k.startswith(p) for p in prefixes)}
    names |= RAY_ENV_EXTRA | split("VLLM_RAY_EXTRA_ENV_VARS_TO_COPY")
    names -= WORKER_SPECIFIC_ENV_VARS
    names -= non_carry
    if log:
        log.info("ray_env.py:170", "RAY_NON_CARRY_OVER_ENV_VARS from config: %r" % (non_carry or set()))
        log.info("ray_env.py:173", "Env var prefixes to copy: %r" % prefixes)
        log.info("ray_env.py:176", "Copying the following environment variables to workers: %r"
                 % sorted(v for v in names if v in environ))
        log.info("ray_env.py:181", "If certain env vars should NOT be copied, add them to %s file" % path)
    return names


class Fatal(Exception):
    """Already reported; exit with the given code."""

    def __init__(self, code=1):
        self.code = code


# ------------------------------------------------------------------ logging

class Log:
    def __init__(self, tag, pid, sub=None):
        self.prefix = "(%s pid=%d) " % (tag, pid) if tag else ""
        if sub:
            self.prefix += sub + " "

    def _emit(self, level, where, msg, stream):
        lines = str(msg).split("\n")
        write = sc.out if stream == "out" else sc.err
        write("%s%s %s [%s] %s" % (self.prefix, level, sc.vllm_ts(), where, lines[0]))
        for line in lines[1:]:
            write(self.prefix + line)

    def info(self, where, msg):
        self._emit("INFO", where, msg, "out")

    def warning(self, where, msg):
        self._emit("WARNING", where, msg, "out")

    def error(self, where, msg):
        self._emit("ERROR", where, msg, "out")

    def raw(self, line, stream="out"):
        (sc.out if stream == "out" else sc.err)(self.prefix + line)

    def traceback(self, frames, final, level_where=None):
        """Print a traceback; if level_where, every line carries 'ERROR ts [where] '."""
        lines = ["Traceback (most recent call last):"]
        for f, ln, fn, code in frames:
            lines.append('  File "%s", line %d, in %s' % (f, ln, fn))
            if code:
                lines.append("    " + code)
        lines += final.split("\n")
        for line in lines:
            if level_where:
                sc.out("%sERROR %s [%s] %s" % (self.prefix, sc.vllm_ts(), level_where, line))
            else:
                sc.err(self.prefix + line)


API_FRAMES = [
    ("/usr/local/bin/vllm", 10, "<module>", "sys.exit(main())"),
    (PY + "/vllm/entrypoints/cli/main.py", 73, "main", "args.dispatch_function(args)"),
    (PY + "/vllm/entrypoints/cli/serve.py", 60, "cmd", "uvloop.run(run_server(args))"),
    (PY + "/uvloop/__init__.py", 96, "run", "return __asyncio.run("),
    ("/usr/lib/python3.12/asyncio/runners.py", 195, "run", "return runner.run(main)"),
    ("/usr/lib/python3.12/asyncio/runners.py", 118, "run", "return self._loop.run_until_complete(task)"),
    ("uvloop/loop.pyx", 1518, "uvloop.loop.Loop.run_until_complete", ""),
    (PY + "/uvloop/__init__.py", 48, "wrapper", "return await main"),
]

# The API server's way into the engine client, shared by config errors and the engine wrapper.
SERVER_FRAMES = API_FRAMES + [
    (PY + "/vllm/entrypoints/openai/api_server.py", 1941, "run_server",
     "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)"),
    (PY + "/vllm/entrypoints/openai/api_server.py", 1957, "run_server_worker",
     "async with build_async_engine_client("),
    ("/usr/lib/python3.12/contextlib.py", 210, "__aenter__", "return await anext(self.gen)"),
]

CONFIG_FRAMES = SERVER_FRAMES + [
    (PY + "/vllm/entrypoints/openai/api_server.py", 178, "build_async_engine_client_from_engine_args",
     "vllm_config = engine_args.create_engine_config(usage_context=usage_context)"),
    (PY + "/vllm/engine/arg_utils.py", 1290, "create_engine_config",
     "model_config = self.create_model_config()"),
    (PY + "/vllm/engine/arg_utils.py", 1147, "create_model_config", "return ModelConfig("),
    (PY + "/pydantic/_internal/_dataclasses.py", 121, "__init__",
     "s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)"),
]

WRAPPER_FRAMES = SERVER_FRAMES + [
    (PY + "/vllm/entrypoints/openai/api_server.py", 203, "build_async_engine_client_from_engine_args",
     "async_llm = AsyncLLM.from_vllm_config("),
    (PY + "/vllm/v1/engine/async_llm.py", 223, "from_vllm_config", "return cls("),
    (PY + "/vllm/v1/engine/async_llm.py", 134, "__init__", "self.engine_core = EngineCoreClient.make_async_mp_client("),
    (PY + "/vllm/v1/engine/core_client.py", 102, "make_async_mp_client", "return AsyncMPClient(*client_args)"),
    (PY + "/vllm/v1/engine/core_client.py", 769, "__init__", "super().__init__("),
    (PY + "/vllm/v1/engine/core_client.py", 448, "__init__", "with launch_core_engines(vllm_config, executor_class,"),
    ("/usr/lib/python3.12/contextlib.py", 144, "__exit__", "next(self.gen)"),
    (PY + "/vllm/v1/engine/utils.py", 732, "launch_core_engines", "wait_for_engine_startup("),
    (PY + "/vllm/v1/engine/utils.py", 785, "wait_for_engine_startup", "raise RuntimeError("),
]

# create_engine_config building the ParallelConfig (pydantic dataclass: __post_init__/validators -> ValidationError)
PARALLEL_FRAMES = SERVER_FRAMES + [
    (PY + "/vllm/entrypoints/openai/api_server.py", 178, "build_async_engine_client_from_engine_args",
     "vllm_config = engine_args.create_engine_config(usage_context=usage_context)"),
    (PY + "/vllm/engine/arg_utils.py", 1520, "create_engine_config", "parallel_config = ParallelConfig("),
    (PY + "/pydantic/_internal/_dataclasses.py", 121, "__init__",
     "s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)"),
]

# `vllm serve --headless` (vllm/entrypoints/cli/serve.py run_headless)
HEADLESS_FRAMES = [
    ("/usr/local/bin/vllm", 10, "<module>", "sys.exit(main())"),
    (PY + "/vllm/entrypoints/cli/main.py", 73, "main", "args.dispatch_function(args)"),
    (PY + "/vllm/entrypoints/cli/serve.py", 111, "cmd", "run_headless(args)"),
]

# the worker process of the multiproc executor, up to the device set-up
WORKER_FRAMES = [
    (PY + "/vllm/v1/executor/multiproc_executor.py", 571, "worker_main", "worker = WorkerProc(*args, **kwargs)"),
    (PY + "/vllm/v1/executor/multiproc_executor.py", 437, "__init__", "self.worker.init_device()"),
    (PY + "/vllm/v1/worker/worker_base.py", 326, "init_device", "self.worker.init_device()  # type: ignore"),
]

DEVICE_FRAMES = [
    (PY + "/vllm/v1/worker/gpu_worker.py", 239, "init_device",
     "self.requested_memory = request_memory(self.init_snapshot, self.cache_config)"),
    (PY + "/vllm/v1/worker/utils.py", 412, "request_memory", "raise ValueError("),
]

DIST_FRAMES = [
    (PY + "/vllm/v1/worker/gpu_worker.py", 248, "init_device",
     "init_worker_distributed_environment(self.vllm_config, self.rank,"),
    (PY + "/vllm/v1/worker/gpu_worker.py", 912, "init_worker_distributed_environment",
     "init_distributed_environment(parallel_config.world_size, rank,"),
    (PY + "/vllm/distributed/parallel_state.py", 1226, "init_distributed_environment",
     "torch.distributed.init_process_group("),
    (PY + "/torch/distributed/c10d_logger.py", 81, "wrapper", "return func(*args, **kwargs)"),
    (PY + "/torch/distributed/distributed_c10d.py", 1710, "init_process_group",
     "store, rank, world_size = next(rendezvous_iterator)"),
    (PY + "/torch/distributed/rendezvous.py", 195, "_tcp_rendezvous_handler",
     "store = _create_c10d_store("),
    (PY + "/torch/distributed/rendezvous.py", 163, "_create_c10d_store", "return TCPStore("),
]

KERNEL_FRAMES = [
    (PY + "/vllm/v1/worker/gpu_model_runner.py", 3355, "load_model", "self.model = model_loader.load_model("),
    (PY + "/vllm/model_executor/model_loader/base_loader.py", 50, "load_model",
     "model = initialize_model(vllm_config=vllm_config,"),
    (PY + "/torch/utils/_device.py", 104, "__torch_function__", "return func(*args, **kwargs)"),
]

ENGINE_FRAMES = [
    ("/usr/lib/python3.12/multiprocessing/process.py", 314, "_bootstrap", "self.run()"),
    ("/usr/lib/python3.12/multiprocessing/process.py", 108, "run", "self._target(*self._args, **self._kwargs)"),
]
ENGINE_CORE_FRAMES = [
    (PY + "/vllm/v1/engine/core.py", 834, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
    (PY + "/vllm/v1/engine/core.py", 610, "__init__", "super().__init__("),
    (PY + "/vllm/v1/engine/core.py", 102, "__init__", "self.model_executor = executor_class(vllm_config)"),
    (PY + "/vllm/v1/executor/abstract.py", 101, "__init__", "self._init_executor()"),
    (PY + "/vllm/v1/executor/ray_executor.py", 99, "_init_executor", "self._init_workers_ray(placement_group)"),
]


# ------------------------------------------------------------------ args

def parse_args(argv):
    flags = {"trust-remote-code", "enforce-eager", "disable-log-stats", "disable-log-requests",
             "enable-prefix-caching", "no-enable-prefix-caching", "enable-auto-tool-choice",
             "enable-chunked-prefill", "disable-custom-all-reduce", "headless", "enable-expert-parallel"}
    opts, pos = {}, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            key = a[2:].replace("_", "-")
            if "=" in key:
                k, v = key.split("=", 1)
                opts[k] = v
            elif key in flags or i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                opts[key] = True
            else:
                opts[key] = argv[i + 1]
                i += 1
        elif a in ("-tp", "-pp", "-dp", "-n", "-r") and i + 1 < len(argv):
            opts[{"-tp": "tensor-parallel-size", "-pp": "pipeline-parallel-size",
                  "-dp": "data-parallel-size", "-n": "nnodes", "-r": "node-rank"}[a]] = argv[i + 1]
            i += 1
        else:
            pos.append(a)
        i += 1
    return opts, pos


# ------------------------------------------------------------------ model resolution

def resolve_model(model):
    if os.path.isdir(model):
        return os.path.abspath(model)
    if model.count("/") == 1 and not model.startswith(("/", ".")):
        hub = os.environ.get("HF_HUB_CACHE") or os.path.join(sc.hf_home(), "hub")
        repo = os.path.join(hub, "models--" + model.replace("/", "--"))
        snaps = os.path.join(repo, "snapshots")
        ref = None
        try:
            with open(os.path.join(repo, "refs", "main")) as f:
                ref = f.read().strip()
        except OSError:
            pass
        if ref and os.path.isdir(os.path.join(snaps, ref)):
            return os.path.join(snaps, ref)
        try:
            cands = sorted(os.listdir(snaps), key=lambda d: os.path.getmtime(os.path.join(snaps, d)))
            if cands:
                return os.path.join(snaps, cands[-1])
        except OSError:
            pass
    return None


# ------------------------------------------------------------------ serve

class Server:
    def __init__(self, argv):
        self.argv = list(argv)
        self.opts, pos = parse_args(argv)
        self.model = self.opts.get("model") or (pos[0] if pos else "Qwen/Qwen3-0.6B")
        names = self.opts.get("served-model-name")
        self.served = [n for n in str(names).split(",") if n] if isinstance(names, str) else [self.model]
        self.tp = int(self.opts.get("tensor-parallel-size") or 1)
        self.pp = int(self.opts.get("pipeline-parallel-size") or 1)
        self.world = self.tp * self.pp
        self.backend = self.opts.get("distributed-executor-backend")
        self.host = self.opts.get("host") or "0.0.0.0"
        if self.host is True:
            self.host = "0.0.0.0"
        self.port = int(self.opts.get("port") or 8000)
        self.util = float(self.opts.get("gpu-memory-utilization") or 0.9)
        self.api_key = self.opts.get("api-key") or os.environ.get("VLLM_API_KEY") or None
        self.middleware_paths = middleware_args(self.argv)
        self.middleware = []
        self.trust = bool(self.opts.get("trust-remote-code"))
        self.rel = sc.release()
        self.version = self.rel.get("version", "0.0.0")
        self.faults = sc.faults()
        self.pid = os.getpid()
        self.epid = self.pid + random.randint(60, 140)
        self.api = Log("APIServer", self.pid)
        self.eng = Log("EngineCore_DP0", self.epid)
        self.t0 = time.time()
        self.crash_at = self.faults.get("crash_after_seconds")
        self.engine_up = False
        self.pg = None
        self.actors = []
        self.bundles = []
        self.sock = None
        self.httpd = None
        self.max_len = None
        self.path = None
        self.stats = {"prompt": 0, "gen": 0, "ok": 0}
        self.my_ip = sc.node_ip()
        # vLLM's multi-node launch without Ray (vllm/config/parallel.py defaults)
        self.nnodes = int(self.opts.get("nnodes") or 1)
        self.node_rank = int(self.opts.get("node-rank") or 0)
        self.master_addr = self.opts.get("master-addr") or "127.0.0.1"
        self.master_port = int(self.opts.get("master-port") or 29501)
        self.headless = bool(self.opts.get("headless"))
        self.local_world = max(1, self.world // self.nnodes)
        self.mp_peers = []
        self.mp_lock = threading.Lock()
        self.mp_srv = None
        self.mp_conn = None
        self.total_gib = sc.GPU_TOTAL_GIB
        self.compile_cache_hit = None
        self.wlog = None

    # ---------------------------------------------------------- failure helpers
    def parallel_error(self, message):
        """ParallelConfig refused the arguments (a pydantic dataclass: the ValueError becomes a ValidationError)."""
        final = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig\n"
                 "  Value error, %s [type=value_error, input_value=ArgsKwargs((), {'pipeline_parallel_size': %d, "
                 "'tensor_parallel_size': %d, ...}), input_type=ArgsKwargs]\n"
                 "    For further information visit https://errors.pydantic.dev/2.12/v/value_error"
                 % (message, self.pp, self.tp))
        frames = PARALLEL_FRAMES if not self.headless else HEADLESS_FRAMES + [
            (PY + "/vllm/entrypoints/cli/serve.py", 190, "run_headless", "vllm_config = engine_args.create_engine_config("),
        ] + PARALLEL_FRAMES[-2:]
        self.api.traceback(frames, final)
        raise Fatal(1)

    def validate_parallel(self):
        """vllm/config/parallel.py: ParallelConfig.__post_init__ and _verify_args, in that order."""
        mp_era = self.mp_supported()
        local = int(os.environ.get("VLLM_SIM_LOCAL_GPUS", "1"))
        if self.backend in (None, True) and self.world > 1 and self.nnodes == 1 and mp_era and self.world > local:
            self.parallel_error(
                "World size (%d) is larger than the number of available GPUs (%d) in this node. If this is "
                "intentional and you are using:\n- ray, set '--distributed-executor-backend ray'.\n"
                "- multiprocessing, set '--nnodes' appropriately." % (self.world, local))
        if self.nnodes > 1 and self.backend not in (None, True, "mp", "uni", "external_launcher"):
            self.parallel_error("nnodes > 1 can only be set when distributed executor backend is mp, uni or "
                                "external_launcher.")
        if self.backend == "ray" and not sc.ray_importable():
            # vllm/v1/executor/ray_utils.py assert_ray_available (no space after the first full stop, as in vLLM)
            self.parallel_error("Failed to import Ray: No module named 'ray'.Please install Ray with `pip install ray`.")

    def mp_supported(self):
        v = [int(p) for p in str(self.version).split(".")[:2] if p.isdigit()]
        return tuple(v) >= (0, 11)

    def check_mp_flags_known(self, argv):
        """Before vLLM 0.11 (vllm-project/vllm#23691) the multi-node flags do not exist: argparse refuses them."""
        if self.mp_supported():
            return
        unknown, i = [], 0
        while i < len(argv):
            a = argv[i]
            name = a.split("=", 1)[0]
            if name in ("--nnodes", "--node-rank", "--master-addr", "--master-port", "-n", "-r"):
                unknown.append(a)
                if "=" not in a and i + 1 < len(argv):
                    unknown.append(argv[i + 1])
                    i += 1
            i += 1
        if unknown:
            sc.err("usage: vllm serve [model_tag] [options]")
            sc.err("vllm serve: error: unrecognized arguments: %s" % " ".join(unknown))
            raise Fatal(2)

    def config_error(self, final, chained=None):
        """APIServer-side failure while building the model config (no engine yet)."""
        if chained:
            self.api.traceback(CONFIG_FRAMES[:-1] + [
                (PY + "/vllm/transformers_utils/config.py", 612, "get_config",
                 "config_dict, _ = PretrainedConfig.get_config_dict(")], chained)
            self.api.raw("", "err")
            self.api.raw("During handling of the above exception, another exception occurred:", "err")
            self.api.raw("", "err")
        self.api.traceback(CONFIG_FRAMES, final)
        raise Fatal(1)

    def engine_failed(self, final, frames=(), worker=None):
        """Engine core dies during startup: root cause, then the APIServer wrapper."""
        where = "core.py:843"
        self.eng.error(where, "EngineCore failed to start.")
        self.eng.traceback(ENGINE_CORE_FRAMES + list(frames), final, level_where=where)
        self.eng.raw("Process EngineCore_DP0:", "err")
        self.eng.traceback(ENGINE_FRAMES + [
            (PY + "/vllm/v1/engine/core.py", 847, "run_engine_core", "raise e")] + ENGINE_CORE_FRAMES
            + list(frames), final)
        self.release_pg()
        self.api.traceback(WRAPPER_FRAMES, "RuntimeError: Engine core initialization failed. See root cause "
                                           "above. Failed core proc(s): {}")
        raise Fatal(1)

    def engine_dead(self, final, frames=()):
        """Engine dies after it was up (serving or late load)."""
        self.eng.error("core.py:796", "EngineCore encountered a fatal error.")
        self.eng.traceback([(PY + "/vllm/v1/engine/core.py", 787, "run_engine_core", "engine_core.run_busy_loop()"),
                            (PY + "/vllm/v1/engine/core.py", 814, "run_busy_loop", "self._process_engine_step()"),
                            (PY + "/vllm/v1/engine/core.py", 847, "_process_engine_step",
                             "outputs, model_executed = self.step_fn()")] + list(frames), final,
                           level_where="core.py:796")
        self.api.error("async_llm.py:480", "AsyncLLM output_handler failed.")
        self.api.traceback([(PY + "/vllm/v1/engine/async_llm.py", 439, "output_handler",
                             "outputs = await engine_core.get_output_async()"),
                            (PY + "/vllm/v1/engine/core_client.py", 846, "get_output_async",
                             "raise self._format_exception(outputs) from None")],
                           "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
                           "See stack trace (above) for the root cause.")
        self.uvicorn_shutdown()
        raise Fatal(1)

    def check_crash(self):
        if STOP.is_set():
            raise Fatal(0)
        if self.crash_at is not None and time.time() - self.t0 >= float(self.crash_at):
            self.crash_at = None
            sc.out("SIM_CRASH_AT %.6f" % time.time())
            final = ("RuntimeError: CUDA error: an illegal memory access was encountered\n"
                     "CUDA kernel errors might be asynchronously reported at some other API call, so the "
                     "stacktrace below might be incorrect.\n"
                     "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                     "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
            frames = [(PY + "/vllm/v1/worker/gpu_worker.py", 262, "load_model",
                       "self.model_runner.load_model(eager_load=self._sleep_saved_buffers == {})"),
                      (PY + "/torch/cuda/__init__.py", 1053, "synchronize", "return torch._C._cuda_synchronize()")]
            if self.engine_up:
                self.engine_dead(final, frames)
            self.engine_failed(final, frames)

    def sleep(self, seconds):
        end = time.time() + seconds
        while time.time() < end:
            self.check_crash()
            self.check_cluster()
            time.sleep(min(0.1, max(0.0, end - time.time())))

    # ---------------------------------------------------------- phases
    def bind(self):
        fam = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((self.host, self.port))
        except OSError as e:
            s.close()
            self.api.traceback(API_FRAMES + [
                (PY + "/vllm/entrypoints/openai/api_server.py", 1926, "run_server",
                 "listen_address, sock = setup_server(args)"),
                (PY + "/vllm/entrypoints/openai/api_server.py", 1904, "setup_server",
                 "sock = create_server_socket(sock_addr)"),
                (PY + "/vllm/entrypoints/openai/api_server.py", 1847, "create_server_socket",
                 "sock.bind(addr)")], "OSError: [Errno %d] %s" % (e.errno, e.strerror))
            raise Fatal(1)
        # Two sockets with SO_REUSEADDR may both bind a port while neither listens; real vLLM's
        # second instance fails here, so hold a per-address lock for the life of the process.
        import fcntl
        lockdir = os.environ.get("VLLM_SIM_LOCK_DIR", "/tmp/vllm-sim-ports")
        try:
            os.makedirs(lockdir, exist_ok=True)
            self.lockf = open(os.path.join(lockdir, "%s_%d.lock" % (self.host, self.port)), "w")
            fcntl.flock(self.lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            s.close()
            self.api.traceback(API_FRAMES + [
                (PY + "/vllm/entrypoints/openai/api_server.py", 1926, "run_server",
                 "listen_address, sock = setup_server(args)"),
                (PY + "/vllm/entrypoints/openai/api_server.py", 1904, "setup_server",
                 "sock = create_server_socket(sock_addr)"),
                (PY + "/vllm/entrypoints/openai/api_server.py", 1847, "create_server_socket",
                 "sock.bind(addr)")], "OSError: [Errno 98] Address already in use")
            raise Fatal(1)
        except OSError:
            pass
        self.sock = s

    def banner(self):
        a = self.api
        a.info("utils.py:299", "")
        a.info("utils.py:299", "       \u2588     \u2588     \u2588\u2584   \u2584\u2588")
        a.info("utils.py:299", " \u2584\u2584 \u2584\u2588 \u2588     \u2588     \u2588 \u2580\u2584\u2580 \u2588  version %s"
               % self.version)
        a.info("utils.py:299", "  \u2588\u2584\u2588\u2580 \u2588     \u2588     \u2588     \u2588  model   %s" % self.model)
        a.info("utils.py:299", "   \u2580\u2580  \u2580\u2580\u2580\u2580\u2580 \u2580\u2580\u2580\u2580\u2580 \u2580     \u2580")
        a.info("utils.py:299", "")
        def typed(v):
            for conv in (int, float):
                try:
                    return conv(v)
                except (TypeError, ValueError):
                    pass
            return v

        shown = {k.replace("-", "_"): typed(v) for k, v in self.opts.items() if k != "api-key"}
        shown["model_tag"] = self.model
        shown["model"] = self.model
        if self.api_key:
            shown["api_key"] = ["<redacted>"]
        a.info("utils.py:233", "non-default args: %r" % shown)

    def load_config(self):
        path = resolve_model(self.model)
        cfg_path = os.path.join(path, "config.json") if path else None
        if not path or not os.path.isfile(cfg_path):
            chained = None
            if not path:
                chained = ("OSError: %s is not a local folder and is not a valid model identifier listed on "
                           "'https://huggingface.co/models'\nIf this is a private repository, make sure to pass a "
                           "token having permission to this repo either by logging in with `hf auth login` or "
                           "by passing `token=<your_token>`" % self.model)
            self.config_error(
                "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
                "  Value error, Invalid repository ID or local directory specified: '%s'.\n"
                "Please verify the following requirements:\n"
                "1. Provide a valid Hugging Face repository ID.\n"
                "2. Specify a local directory that contains a recognized configuration file.\n"
                "   - For Hugging Face models: ensure the presence of a 'config.json'.\n"
                "   - For Mistral models: ensure the presence of a 'params.json'.\n"
                " [type=value_error, input_value=ArgsKwargs((), {'model': '%s', ...}), input_type=ArgsKwargs]\n"
                "    For further information visit https://errors.pydantic.dev/2.12/v/value_error"
                % (self.model, self.model), chained)
        with open(cfg_path) as f:
            cfg = json.load(f)
        self.path, self.cfg = path, cfg
        if cfg.get("auto_map") and not self.trust:
            self.config_error(
                "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
                "  Value error, The repository %s contains custom code which must be executed to correctly "
                "load the model. You can inspect the repository content at https://hf.co/%s .\n"
                " You can inspect the repository content at https://hf.co/%s.\n"
                "Please pass the argument `trust_remote_code=True` to allow custom code to be run. "
                "[type=value_error, input_value=ArgsKwargs((), {'model': '%s', ...}), input_type=ArgsKwargs]"
                % (path, self.model, self.model, self.model))
        mt = cfg.get("model_type")
        from vllm.transformers_utils.config import _CONFIG_REGISTRY
        if mt and mt not in _CONFIG_REGISTRY and not cfg.get("auto_map"):
            # as vLLM's HFConfigParser.parse: a type without a config of vLLM's own goes to the image's real
            # transformers (AutoConfig.from_pretrained); its ValueError surfaces in ModelConfig's validation
            from transformers import AutoConfig
            try:
                AutoConfig.from_pretrained(path)
            except ValueError as e:
                self.config_error(
                    "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
                    "  Value error, %s [type=value_error, input_value=ArgsKwargs((), {'model': '%s', ...}), "
                    "input_type=ArgsKwargs]" % (e, self.model))
        self.archs = cfg.get("architectures") or ["UnknownForCausalLM"]
        derived = cfg.get("max_position_embeddings") or cfg.get("text_config", {}).get("max_position_embeddings") \
            or 32768
        self.max_len = int(self.opts.get("max-model-len") or derived)
        if self.max_len > derived:
            self.config_error(
                "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
                "  Value error, User-specified max_model_len (%d) is greater than the derived max_model_len "
                "(max_position_embeddings=%d or model_max_length=None in model's config.json). To allow "
                "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_"
                "MODEL_LEN must be used with extreme caution. If the model uses relative position encoding "
                "(RoPE), positions exceeding derived_max_model_len lead to nan. If the model uses absolute "
                "position encoding, positions exceeding derived_max_model_len will cause a CUDA array "
                "out-of-bounds error. [type=value_error, input_value=ArgsKwargs((), {'model': '%s', ...}), "
                "input_type=ArgsKwargs]" % (self.max_len, derived, self.model))
        self.api.info("model.py:637", "Resolved architecture: %s" % self.archs[0])
        self.api.info("model.py:1750", "Using max model len %d" % self.max_len)
        heads = cfg.get("num_attention_heads") or cfg.get("text_config", {}).get("num_attention_heads")
        if heads and heads % self.tp:
            self.api.traceback(CONFIG_FRAMES[:-2] + [
                (PY + "/vllm/engine/arg_utils.py", 1420, "create_engine_config",
                 "config = VllmConfig("),
                (PY + "/vllm/config/model.py", 1040, "verify_with_parallel_config",
                 "raise ValueError(")],
                "ValueError: Total number of attention heads (%d) must be divisible by tensor parallel size (%d)."
                % (heads, self.tp))
            raise Fatal(1)
        self.api.info("scheduler.py:228", "Chunked prefill is enabled with max_num_batched_tokens=8192.")

    def engine_init(self):
        e = self.eng
        e.info("core.py:93", "Initializing a V1 LLM engine (v%s) with config: model='%s', speculative_config=None, "
               "tokenizer='%s', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
               "trust_remote_code=%s, dtype=torch.bfloat16, max_seq_len=%d, download_dir=None, load_format=auto, "
               "tensor_parallel_size=%d, pipeline_parallel_size=%d, data_parallel_size=1, "
               "disable_custom_all_reduce=False, quantization=%s, enforce_eager=%s, device_config=cuda, "
               "served_model_name=%s, enable_prefix_caching=True, enable_chunked_prefill=True"
               % (self.version, self.model, self.model, self.trust, self.max_len, self.tp, self.pp,
                  (self.cfg.get("quantization_config") or {}).get("quant_method"),
                  bool(self.opts.get("enforce-eager")), self.served[0]))
        if self.faults.get("arch_unsupported") or any(a not in self.rel.get("architectures", [])
                                                      for a in self.archs):
            self.engine_failed(
                "ValueError: Model architectures %r are not supported for now. Supported architectures: "
                "dict_keys(%r)" % (self.archs, list(self.rel.get("architectures", []))),
                [(PY + "/vllm/model_executor/model_loader/utils.py", 207, "get_model_architecture",
                  "model_cls, arch = model_config.registry.resolve_model_cls("),
                 (PY + "/vllm/model_executor/models/registry.py", 876, "resolve_model_cls",
                  "return self._raise_for_unsupported(architectures)"),
                 (PY + "/vllm/model_executor/models/registry.py", 802, "_raise_for_unsupported",
                  "raise ValueError(")])
        if self.faults.get("arch_inspect_failed"):
            self.inspect_failed(self.eng)

    def inspect_failed(self, log, ip=None):
        log.error("registry.py:700", "Error in inspecting model architecture '%s'" % self.archs[0])
        log.traceback([(PY + "/vllm/model_executor/models/registry.py", 1158, "_run_in_subprocess",
                        "returned.check_returncode()"),
                       ("/usr/lib/python3.12/subprocess.py", 502, "check_returncode",
                        "raise CalledProcessError(self.returncode, self.args, self.stdout,")],
                      "subprocess.CalledProcessError: Command '['/usr/bin/python3', '-m', "
                      "'vllm.model_executor.models.registry']' returned non-zero exit status 1.",
                      level_where="registry.py:700")
        self.engine_failed(
            "ValueError: Model architectures %r failed to be inspected. Please check the logs for more details."
            % self.archs,
            [(PY + "/vllm/model_executor/models/registry.py", 796, "_raise_for_unsupported", "raise ValueError(")])

    # ---------------------------------------------------------- ray
    def use_ray(self):
        if self.nnodes > 1:
            return False
        local = int(os.environ.get("VLLM_SIM_LOCAL_GPUS", "1"))
        # before vLLM 0.11 a world larger than the node fell back to Ray; from 0.11 it is an error (validate_parallel)
        return self.backend == "ray" or (self.backend in (None, True) and self.world > local and not self.mp_supported())

    def ray_setup(self):
        """vllm/v1/executor/ray_utils.py initialize_ray_cluster and ray_executor.py _init_workers_ray, on real Ray:
        ray.init, the current node's GPU, a PACK placement group of one GPU per rank (the first pinned to this node),
        then one RayWorkerWrapper actor per bundle. Ray's own exceptions are the messages."""
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        from vllm._sim_ray_worker import RayWorkerWrapper
        e = self.eng
        addr = sc.current_cluster_address()
        e.info("ray_utils.py:353", "Connecting to existing Ray cluster at address: %s" % (addr or "auto"))
        init_frames = [(PY + "/vllm/v1/executor/ray_utils.py", 330, "initialize_ray_cluster", "ray.init(address=ray_address)")]
        # ray.init makes SIGTERM exit the process (python/ray/_private/worker.py init: sigterm_handler). Real vLLM calls it
        # in its engine-core process, and the API server keeps its own shutdown; this one process keeps the server's.
        server_sigterm = signal.getsignal(signal.SIGTERM)
        try:
            ray.init(address=addr, log_to_driver=False)
        except Exception as err:  # ConnectionError, RuntimeError (token), … as Ray raises them
            self.engine_failed("%s: %s" % (type(err).__name__, err), init_frames)
        finally:
            signal.signal(signal.SIGTERM, server_sigterm)
        self.ray = ray
        node_id = ray.get_runtime_context().get_node_id()
        res = ray._private.state.available_resources_per_node().get(node_id, {})
        e.info("ray_utils.py:402", "No current placement group found. Creating a new placement group.")
        if res.get("GPU", 0) < 1:
            self.engine_failed(
                "ValueError: Current node has no GPU available. current_node_resource=%r. vLLM engine cannot "
                "start without GPU. Make sure you have at least 1 GPU available in a node current_ip=%r "
                "current_node_resource=%r." % (res, self.my_ip, res),
                [(PY + "/vllm/v1/executor/ray_utils.py", 420, "initialize_ray_cluster", "raise ValueError(")])
        specs = [{"GPU": 1.0} for _ in range(self.world)]
        specs[0]["node:%s" % self.my_ip] = 0.001
        self.pg = placement_group(specs, strategy="PACK")
        ready_ref = self.pg.ready()
        timeout = float(self.faults.get("placement_timeout_seconds", 1800))  # PG_WAIT_TIMEOUT
        start = time.time()
        interval = min(10.0, max(1.0, timeout / 3))
        next_log = start + interval
        while True:
            self.check_crash()
            ready, _ = ray.wait([ready_ref], timeout=0.3)
            if ready:
                ray.get(ready_ref, timeout=0)  # as _wait_until_pg_ready does before the workers are placed
                break
            now = time.time()
            if now - start >= timeout:
                self.release_pg()
                # vllm/v1/executor/ray_utils.py _wait_until_pg_ready (vLLM 0.17)
                self.engine_failed(
                    "ValueError: Cannot provide a placement group requiring %d GPUs (placement_group_specs=%r) "
                    "within %d seconds.\nTensor parallel size may exceed available GPUs in your cluster. Check "
                    "resources with `ray status` and `ray list nodes`.\nIf running on K8s with limited GPUs, "
                    "consider reducing --tensor-parallel-size to match available GPU resources."
                    % (self.world, specs, int(timeout)),
                    [(PY + "/vllm/v1/executor/ray_utils.py", 452, "initialize_ray_cluster",
                      "_wait_until_pg_ready(current_placement_group)"),
                     (PY + "/vllm/v1/executor/ray_utils.py", 281, "_wait_until_pg_ready", "raise ValueError(")])
            if now >= next_log:
                e.info("ray_utils.py:268", "Waiting for creating a placement group of specs for %d seconds. "
                       "specs=%r. Check `ray status` and `ray list nodes` to see if you have enough resources, "
                       "and make sure the IP addresses used by ray cluster are the same as VLLM_HOST_IP "
                       "environment variable specified in each node if you are running on a multi-node."
                       % (int(now - start), specs))
                interval *= 2
                next_log = now + interval
        worker = ray.remote(num_cpus=0, num_gpus=1)(RayWorkerWrapper)
        self.actors = [worker.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=self.pg, placement_group_capture_child_tasks=True, placement_group_bundle_index=i)).remote()
            for i in range(self.world)]
        try:
            infos = ray.get([a.info.remote() for a in self.actors], timeout=120)
        except Exception as err:
            self.engine_failed("%s.%s: %s" % (type(err).__module__, type(err).__name__, err),
                               [(PY + "/vllm/v1/executor/ray_executor.py", 99, "_init_executor",
                                 "self._init_workers_ray(placement_group)")])
        self.bundles = [{"NodeID": i["node_id"], "NodeManagerAddress": i["ip"], "pid": i["pid"],
                         "SimImage": {"vllm": i["vllm"], "architectures": i["architectures"]}} for i in infos]
        self.copy_env_to_workers()
        threading.Thread(target=self.lease_loop, daemon=True).start()
        # per-worker images: a worker whose image lacks the architecture fails model inspection there
        for rank, n in enumerate(self.bundles):
            img = n.get("SimImage") or {}
            if img.get("architectures") is not None and any(a not in img["architectures"] for a in self.archs):
                wlog = Log("EngineCore_DP0", self.epid, "(RayWorkerWrapper pid=%d, ip=%s)" % (
                    n.get("pid") or 0, n["NodeManagerAddress"]))
                wlog.info("worker_base.py:250", "vLLM version on this node: %s" % img.get("vllm"))
                self.inspect_failed(wlog)

    def copy_env_to_workers(self):
        """What vLLM's RayDistributedExecutor sends from the driver to every Ray worker it starts, as
        vllm/v1/executor/ray_executor.py _init_workers_ray computes it: get_env_vars_to_copy(exclude_vars=
        WORKER_SPECIFIC_ENV_VARS, …) of vllm/ray/ray_env.py (the prefix version, after vllm-project/vllm#34383; the
        carry-everything rule is vllm-project/vllm#14099), then each name set in the driver's os.environ with the
        driver's value, sent to each actor's update_environment_variables."""
        e = self.eng
        names = ray_env_vars_to_copy(os.environ, vllm_config_root(), e)
        carried = {k: os.environ[k] for k in sorted(names) if k in os.environ}
        self.ray.get([a.update_environment_variables.remote(carried) for a in self.actors], timeout=60)

    def release_pg(self):
        pg, self.pg = getattr(self, "pg", None), None
        if pg is not None:
            try:
                self.ray.util.remove_placement_group(pg)
            except Exception:
                pass

    def lease_loop(self):
        """The executor's next execute_model on a dead actor: Ray's exception (ActorDiedError when its node or raylet
        is gone) ends the engine, as ray.get(refs[0]) in vllm/v1/executor/ray_executor.py execute_model raises it."""
        ray = self.ray
        while not STOP.is_set() and self.actors:
            try:
                ray.get([a.ping.remote() for a in self.actors], timeout=10)
            except ray.exceptions.GetTimeoutError:
                continue
            except Exception as err:
                self.cluster_problem = err
                return
            time.sleep(1.0)

    cluster_problem = None

    def check_cluster(self):
        err = self.cluster_problem
        if not err:
            return
        self.cluster_problem = None
        final = "%s.%s: %s" % (type(err).__module__, type(err).__name__, err)
        frames = [(PY + "/vllm/v1/executor/ray_executor.py", 478, "execute_model", "return ray.get(refs[0])"),
                  (PY + "/ray/_private/worker.py", 2962, "get", "values, debugger_breakpoint = worker.get_objects(")]
        if self.engine_up:
            self.engine_dead(final, frames)
        self.engine_failed(final, frames)

    # ---------------------------------------------------------- the simulated GB10
    def worker_name(self, rank):
        """Process tag of a multiproc worker (vllm/v1/executor/multiproc_executor.py: Worker_PP<p>_TP<t>)."""
        pp_str = "PP%d" % (rank // self.tp) if self.pp > 1 else ""
        tp_str = "TP%d" % (rank % self.tp) if self.tp > 1 else ""
        suffix = pp_str + ("_" if pp_str and tp_str else "") + tp_str
        return "Worker_" + suffix if suffix else "Worker"

    def device_init(self, logs, fail):
        """gpu_worker.init_device: CUDA init, torch's device warning, then vLLM's start-up free-memory check
        (vllm/v1/worker/utils.py request_memory) - before the worker joins the process group."""
        init_err = sc.cuda_init_error()
        if init_err:
            fail("RuntimeError: " + init_err, [
                (PY + "/vllm/v1/worker/gpu_worker.py", 214, "init_device", "torch.cuda.set_device(self.device)"),
                (PY + "/torch/cuda/__init__.py", 567, "set_device", "torch._C._cuda_setDevice(device)"),
                (PY + "/torch/cuda/__init__.py", 410, "_lazy_init", "torch._C._cuda_init()")])
        warn = sc.incompatible_device_warning()
        if warn:
            for w in logs:
                w.raw("%s/torch/cuda/__init__.py:283: UserWarning: %s" % (PY, warn.split("\n", 1)[0]), "err")
                for line in warn.split("\n")[1:]:
                    w.raw(line, "err")
                w.raw("  warnings.warn(incompatible_device_warn.format(device_name, capability, \" \".join(arch_list), "
                      "device_name))", "err")
        mem = sc.gpu_memory()
        total, free = mem["total_gib"], sc.vllm_startup_free_gib(self.rel.get("version"))
        requested = math.ceil(total * GIB * self.util) / GIB
        if free * GIB < requested * GIB:
            fail("ValueError: Free memory on device cuda:0 (%.2f/%.2f GiB) on startup is less than desired GPU memory "
                 "utilization (%s, %.2f GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
                 "processes." % (free, total, self.util, requested), DEVICE_FRAMES)
        self.total_gib = total
        return requested

    def first_kernel(self, fail):
        """The first CUDA kernel (model initialisation): an image without kernels for 12.1, or with PTX only from a
        CUDA newer than the driver, fails here with CUDA's own error."""
        err = sc.cuda_kernel_error()
        if err:
            fail(err.rstrip("\n"), KERNEL_FRAMES)

    def compile_graph(self, w, rank):
        """vLLM's torch.compile with its cache under VLLM_CACHE_ROOT (default ~/.cache/vllm): a second start with the same
        model and flags loads the compiled graph instead of compiling (log lines as in vLLM 0.17's backends.py)."""
        if self.opts.get("enforce-eager"):
            return 0.0
        key_src = json.dumps([self.version, self.path or self.model, self.tp, self.pp, self.max_len,
                              self.opts.get("dtype"), self.opts.get("kv-cache-dtype"), self.opts.get("quantization"),
                              self.opts.get("max-num-batched-tokens")], sort_keys=True)
        key = hashlib.sha256(key_src.encode()).hexdigest()[:10]
        d = os.path.join(sc.vllm_cache_root(), "torch_compile_cache", key, "rank_%d_0" % rank, "backbone")
        marker = os.path.join(d, "vllm_compile_cache.py")
        disabled = os.environ.get("VLLM_DISABLE_COMPILE_CACHE", "0") not in ("0", "")
        compile_s = float(self.faults.get("compile_seconds", self.rel.get("compile_seconds", DEFAULT_COMPILE_SECONDS)))
        t0 = time.time()
        w.info("backends.py:643", "Using cache directory: %s for vLLM's torch.compile" % d)
        self.sleep(0.2)
        w.info("backends.py:703", "Dynamo bytecode transform time: %.2f s" % (time.time() - t0))
        rng = "(1, %d)" % int(self.opts.get("max-num-batched-tokens") or 8192)
        if os.path.isfile(marker) and not disabled:
            t1 = time.time()
            self.sleep(max(0.1, compile_s / 10))
            w.info("backends.py:226", "Directly load the compiled graph(s) for compile range %s from the cache, took "
                                      "%.3f s" % (rng, time.time() - t1))
            self.compile_cache_hit = True
        else:
            w.info("backends.py:261", "Cache the graph of compile range %s for later use" % rng)
            t1 = time.time()
            self.sleep(compile_s)
            w.info("backends.py:278", "Compiling a graph for compile range %s takes %.2f s" % (rng, time.time() - t1))
            if not disabled:
                try:
                    os.makedirs(d, exist_ok=True)
                    with open(marker, "w") as f:
                        f.write("# simulated vLLM compile cache: %s\n" % key_src)
                except OSError:
                    pass
            self.compile_cache_hit = False
        took = time.time() - t0
        w.info("monitor.py:34", "torch.compile takes %.2f s in total" % took)
        return took

    # ---------------------------------------------------------- multi-node without Ray (vLLM >= 0.11)
    def mp_listen(self):
        """The head's TCPStore server at --master-addr:--master-port (torch.distributed rendezvous)."""
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            srv.bind((self.master_addr, self.master_port))
            srv.listen(64)
        except OSError as e:
            srv.close()
            name = {98: "EADDRINUSE", 99: "EADDRNOTAVAIL"}.get(e.errno, "E%d" % e.errno)
            self.engine_failed(
                "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
                "address. port: %d, useIpv6: false, code: -%d, name: %s, message: %s"
                % (self.master_port, e.errno, name, (e.strerror or "").lower()), DIST_FRAMES)
        self.mp_srv = srv
        threading.Thread(target=self.mp_accept, daemon=True).start()

    def mp_accept(self):
        while not STOP.is_set():
            try:
                conn, _ = self.mp_srv.accept()
            except OSError:
                return
            threading.Thread(target=self.mp_hello, args=(conn,), daemon=True).start()

    def mp_hello(self, conn):
        try:
            conn.settimeout(10)
            line = conn.makefile("r").readline()
            hello = json.loads(line)
            conn.settimeout(None)
        except (OSError, ValueError):
            conn.close()
            return
        with self.mp_lock:
            self.mp_peers = [p for p in self.mp_peers if p["node_rank"] != hello.get("node_rank")]
            self.mp_peers.append(dict(hello, conn=conn))

    def mp_joined(self):
        with self.mp_lock:
            return self.local_world + sum(int(p.get("ranks", 1)) for p in self.mp_peers)

    def mp_rendezvous_head(self):
        """Wait until every node's ranks have connected, then let them all go; a missing node is torch's TCPStore
        timeout on the head ("Timed out after 601 seconds waiting for clients. 1/2 clients joined.")."""
        timeout = float(self.faults.get("mp_join_timeout_seconds", 600))
        start = time.time()
        while self.mp_joined() < self.world:
            if time.time() - start >= timeout:
                self.engine_failed(
                    "torch.distributed.DistStoreError: Timed out after %d seconds waiting for clients. %d/%d clients "
                    "joined." % (int(timeout) + 1, self.mp_joined(), self.world), DIST_FRAMES)
            self.sleep(0.2)
        with self.mp_lock:
            for p in self.mp_peers:
                try:
                    p["conn"].sendall(b"go\n")
                except OSError:
                    pass

    def mp_connect_worker(self, fail):
        """A headless node's ranks connect to the head's store; no head within the timeout is torch's client error."""
        timeout = float(self.faults.get("mp_connect_timeout_seconds", 600))
        deadline = time.time() + timeout
        while not STOP.is_set():
            try:
                conn = socket.create_connection((self.master_addr, self.master_port), timeout=1)
            except OSError:
                if time.time() >= deadline:
                    ms = int(timeout * 1000)
                    t = time.time()
                    sc.err("[E%s.%09d socket.cpp:1011] [c10d] The client socket has timed out after %dms while trying "
                           "to connect to (%s, %d)." % (time.strftime("%m%d %H:%M:%S", time.localtime(t)),
                                                        int((t % 1) * 1e9), ms, self.master_addr, self.master_port))
                    fail("torch.distributed.DistNetworkError: The client socket has timed out after %dms while trying to "
                         "connect to (%s, %d)." % (ms, self.master_addr, self.master_port), DIST_FRAMES)
                time.sleep(0.3)
                continue
            try:
                conn.sendall((json.dumps({"node_rank": self.node_rank, "ranks": self.local_world, "ip": self.my_ip,
                                          "pid": self.pid}) + "\n").encode())
                conn.settimeout(0.5)
                buf = b""
                while not STOP.is_set():
                    try:
                        chunk = conn.recv(64)
                    except socket.timeout:
                        continue
                    if not chunk:
                        break
                    buf += chunk
                    if b"go\n" in buf:
                        conn.settimeout(None)
                        self.mp_conn = conn
                        return
            except OSError:
                pass
            conn.close()
            deadline = time.time() + timeout
            time.sleep(0.3)
        raise Fatal(0)

    def worker_failed(self, final, frames=()):
        """A headless node's worker process died during start-up: its traceback, then the executor's exception."""
        where = "multiproc_executor.py:597"
        self.wlog.error(where, "WorkerProc failed to start.")
        self.wlog.traceback(WORKER_FRAMES + list(frames), final, level_where=where)
        self.api.traceback(HEADLESS_FRAMES + [
            (PY + "/vllm/entrypoints/cli/serve.py", 219, "run_headless",
             "executor = MultiprocExecutor(vllm_config, monitor_workers=False)"),
            (PY + "/vllm/v1/executor/abstract.py", 101, "__init__", "self._init_executor()"),
            (PY + "/vllm/v1/executor/multiproc_executor.py", 154, "_init_executor",
             "self.workers = WorkerProc.wait_for_ready(unready_workers)"),
            (PY + "/vllm/v1/executor/multiproc_executor.py", 523, "wait_for_ready", "raise e from None")],
            "Exception: WorkerProc initialization failed due to an exception in a background process. See stack "
            "trace for root cause.")
        raise Fatal(1)

    def run_headless(self):
        """`vllm serve --headless` (vllm/entrypoints/cli/serve.py run_headless)."""
        self.api = Log(None, self.pid)
        self.load_config()
        self.validate_parallel()
        if self.node_rank % max(1, self.nnodes) == 0:
            # node 0 of a DP group in headless mode: engines wait for an API server's handshake that never comes here
            self.api.info("serve.py:229", "Launching 1 data parallel engine(s) in headless mode, with head node "
                                          "address tcp://127.0.0.1:29550.")
            while not STOP.is_set():
                time.sleep(0.2)
            self.api.info("serve.py:254", "Shutting down.")
            return 0
        self.api.info("serve.py:217", "Launching vLLM (v%s) headless multiproc executor, with head node address "
                                      "%s:%d for torch.distributed process group."
                      % (self.version, self.master_addr, self.master_port))
        first = self.node_rank * self.local_world
        ranks = list(range(first, first + self.local_world))
        wpid = self.pid + random.randint(20, 50)
        logs = [Log(self.worker_name(r), wpid + i) for i, r in enumerate(ranks)]
        self.wlog = logs[0]
        self.device_init(logs, self.worker_failed)
        for r, w in zip(ranks, logs):
            w.info("parallel_state.py:1208", "world_size=%d rank=%d local_rank=%d distributed_init_method=tcp://%s:%d "
                                             "backend=nccl" % (self.world, r, r - first, self.master_addr,
                                                               self.master_port))
        self.mp_connect_worker(self.worker_failed)
        for r, w in zip(ranks, logs):
            w.info("pynccl.py:111", "vLLM is using nccl==2.27.5")
            w.info("parallel_state.py:1411", "rank %d in world size %d is assigned as DP rank 0, PP rank %d, TP rank "
                                             "%d, EP rank %d" % (r, self.world, r // self.tp, r % self.tp, r % self.tp))
        self.first_kernel(self.worker_failed)
        for w in logs:
            w.info("gpu_model_runner.py:3338", "Starting to load model %s..." % self.model)
        load_s = float(self.faults.get("load_seconds", self.rel.get("load_seconds", DEFAULT_LOAD_SECONDS)))
        t0 = time.time()
        self.sleep(load_s)
        logs[0].info("default_loader.py:314", "Loading weights took %.2f seconds" % (time.time() - t0))
        model_gib = float(self.faults.get("model_memory_gib", self.cfg.get("sim_model_memory_gib", 59.12)))
        for w in logs:
            w.info("gpu_model_runner.py:3420", "Model loading took %.2f GiB memory and %.6f seconds"
                   % (model_gib, time.time() - t0 + 0.4))
        self.compile_graph(logs[0], first)
        kv_gib = round(self.util * self.total_gib - model_gib - 2.37, 2)
        for w in logs:
            w.info("gpu_worker.py:359", "Available KV cache memory: %.2f GiB" % kv_gib)
        sc.hold_vllm_memory(self.util * self.total_gib)  # weights + KV cache: the share stays held while serving
        # the workers now serve the head's engine until stopped
        while not STOP.is_set():
            time.sleep(0.2)
        return 0

    # ---------------------------------------------------------- load
    def load(self):
        e = self.eng
        ray = self.use_ray()
        mp_multi = self.nnodes > 1
        port = 29500
        if ray:
            self.ray_setup()
            workers = [Log("EngineCore_DP0", self.epid, "(RayWorkerWrapper pid=%d, ip=%s)" % (
                n.get("pid") or 0, n["NodeManagerAddress"])) for n in self.bundles]
            master = self.bundles[0]["NodeManagerAddress"] if self.bundles else self.my_ip
        elif mp_multi:
            # this node's ranks 0..local_world-1 are multiproc workers of the engine core
            wpid = self.epid + random.randint(20, 50)
            workers = [Log(self.worker_name(r), wpid + r) for r in range(self.local_world)]
            master, port = self.master_addr, self.master_port
        else:
            workers = [e]
            master = self.my_ip
        # gpu_worker.init_device: CUDA, then the free-memory check, before joining the process group
        want = self.device_init(workers, lambda final, frames: self.engine_failed(
            final, (WORKER_FRAMES if mp_multi else []) + list(frames)))
        if mp_multi:
            self.mp_listen()
        e.info("shm_broadcast.py:289", "vLLM message queue communication handle: Handle(local_reader_ranks=[0], "
               "buffer_handle=(1, 4194304, 6, 'psm_%s'), local_subscribe_addr=ipc:///tmp/%s, "
               "remote_subscribe_addr=tcp://%s:%d, remote_addr_ipv6=False)" % (
                   secrets.token_hex(4), secrets.token_hex(16), master, random.randint(40000, 60000)))
        for rank, w in enumerate(workers):
            w.info("parallel_state.py:1208", "world_size=%d rank=%d local_rank=%d distributed_init_method=tcp://%s:"
                   "%d backend=nccl" % (self.world, rank, rank if mp_multi else 0, master, port))
        if mp_multi:
            self.mp_rendezvous_head()
        if self.faults.get("nccl_hang"):
            for w in workers:
                w.info("pynccl.py:111", "vLLM is using nccl==2.27.5")
            timeout = self.faults.get("nccl_timeout_seconds")
            t_hang = time.time()
            while True:
                self.sleep(0.5)
                if timeout is not None and time.time() - t_hang >= float(timeout):
                    timeout = None
                    ts = time.strftime("%m%d %H:%M:%S")
                    for rank, w in enumerate(workers):
                        w.raw("[rank%d]:[E%s.%06d ProcessGroupNCCL.cpp:685] [Rank %d] Watchdog caught collective "
                              "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                              "Timeout(ms)=600000) ran for 600090 milliseconds before timing out." % (
                                  rank, ts, random.randint(0, 999999), rank), "err")
        for rank, w in enumerate(workers):
            w.info("pynccl.py:111", "vLLM is using nccl==2.27.5")
            t = rank % self.tp
            p = rank // self.tp
            w.info("parallel_state.py:1411", "rank %d in world size %d is assigned as DP rank 0, PP rank %d, "
                   "TP rank %d, EP rank %d" % (rank, self.world, p, t, t))
        self.first_kernel(self.engine_failed)
        for w in workers:
            w.info("gpu_model_runner.py:3338", "Starting to load model %s..." % self.model)
        load_s = float(self.faults.get("load_seconds", self.rel.get("load_seconds", DEFAULT_LOAD_SECONDS)))
        shards = max(2, int(self.faults.get("shards", 4)))
        tload = time.time()
        steps = max(1, int(load_s))
        oom_step = steps // 2 if self.faults.get("oom_during_load") else None
        sc.out("%sLoading safetensors checkpoint shards:   0%% Completed | 0/%d [00:00<?, ?it/s]" % (
            workers[0].prefix, shards))
        for i in range(1, steps + 1):
            self.sleep(load_s / steps)
            if oom_step is not None and i > oom_step:
                self.engine_failed(
                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                    "capacity of %.2f GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process "
                    "has 117.41 GiB memory in use. Of the allocated memory 115.93 GiB is allocated by PyTorch, and "
                    "0.61 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large "
                    "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
                    "documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html"
                    "#environment-variables)" % self.total_gib,
                    [(PY + "/vllm/v1/worker/gpu_model_runner.py", 3355, "load_model",
                      "self.model = model_loader.load_model("),
                     (PY + "/vllm/model_executor/model_loader/base_loader.py", 55, "load_model",
                      "self.load_weights(model, model_config)"),
                     (PY + "/torch/utils/_device.py", 104, "__torch_function__", "return func(*args, **kwargs)")])
            done = max(1, int(round(shards * i / steps)))
            el = time.time() - tload
            sc.out("%sLoading safetensors checkpoint shards: %3d%% Completed | %d/%d [%02d:%02d<00:00, %.2fs/it]"
                   % (workers[0].prefix, int(100 * done / shards), done, shards, int(el) // 60, int(el) % 60,
                      el / max(done, 1)))
        took = time.time() - tload
        workers[0].info("default_loader.py:314", "Loading weights took %.2f seconds" % took)
        model_gib = float(self.faults.get("model_memory_gib", self.cfg.get("sim_model_memory_gib", 59.12)))
        for w in workers:
            w.info("gpu_model_runner.py:3420", "Model loading took %.2f GiB memory and %.6f seconds" % (
                model_gib, took + 0.4))
        self.check_crash()
        self.compile_graph(workers[0], 0)
        kv_gib = round(want - model_gib - 2.37, 2)
        if kv_gib <= 0:
            self.engine_failed(
                "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                "when initializing the engine.",
                [(PY + "/vllm/v1/core/kv_cache_utils.py", 704, "check_enough_kv_cache_memory", "raise ValueError(")])
        for w in workers:
            w.info("gpu_worker.py:359", "Available KV cache memory: %.2f GiB" % kv_gib)
        sc.hold_vllm_memory(want)  # weights + KV cache: the share stays held while serving
        tokens = int(kv_gib * TOKENS_PER_GIB)
        if tokens < self.max_len:
            need = self.max_len / TOKENS_PER_GIB
            self.engine_failed(
                "ValueError: To serve at least one request with the models's max seq len (%d), (%.2f GiB KV cache "
                "is needed, which is larger than the available KV cache memory (%.2f GiB). Based on the available "
                "memory, the estimated maximum model length is %d. Try increasing `gpu_memory_utilization` or "
                "decreasing `max_model_len` when initializing the engine." % (self.max_len, need, kv_gib, tokens),
                [(PY + "/vllm/v1/core/kv_cache_utils.py", 716, "check_enough_kv_cache_memory", "raise ValueError(")])
        e.info("kv_cache_utils.py:1229", "GPU KV cache size: {:,} tokens".format(tokens))
        e.info("kv_cache_utils.py:1234", "Maximum concurrency for {:,} tokens per request: {:.2f}x".format(
            self.max_len, tokens / self.max_len))
        if not self.opts.get("enforce-eager"):
            sc.out("%sCapturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%%|\u2588\u2588\u2588\u2588\u2588"
                   "\u2588\u2588\u2588\u2588\u2588| 67/67 [00:02<00:00, 28.41it/s]" % workers[0].prefix)
            sc.out("%sCapturing CUDA graphs (decode, FULL): 100%%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588"
                   "\u2588\u2588| 35/35 [00:01<00:00, 30.12it/s]" % workers[0].prefix)
            for w in workers:
                w.info("gpu_model_runner.py:4244", "Graph capturing finished in 3 secs, took 0.92 GiB")
        e.info("core.py:250", "init engine (profile, create kv cache, warmup model) took %.2f seconds" % (
            time.time() - tload))
        self.engine_up = True
        self.kv_tokens = tokens

    # ---------------------------------------------------------- http
    def load_middleware(self):
        """--middleware as vLLM's build_app loads it (vllm/entrypoints/openai/api_server.py: `module_path, object_name =
        middleware.rsplit(".", 1)`, `getattr(importlib.import_module(module_path), object_name)`, a class added with
        app.add_middleware, which Starlette puts outermost): the real module is imported and each request runs through
        it as ASGI (make_handler's through_middleware). Only classes (pure ASGI middleware) are simulated."""
        for path in self.middleware_paths:
            module_path, object_name = path.rsplit(".", 1)
            try:
                imported = getattr(importlib.import_module(module_path), object_name)
            except ImportError as e:
                self.api.traceback(API_FRAMES, "ModuleNotFoundError: %s" % e)
                raise Fatal(1)
            if not isinstance(imported, type):
                self.api.traceback(API_FRAMES, "ValueError: Invalid middleware %s. Must be a function or a class." % path)
                raise Fatal(1)
            self.middleware.append(imported)

    def start_http(self):
        a = self.api
        self.load_middleware()
        a.info("api_server.py:1634", "Supported tasks: ['generate']")
        shown_host = self.host if self.host not in ("", "0.0.0.0") else "0.0.0.0"
        a.info("api_server.py:1912", "Starting vLLM API server 0 on http://%s:%d" % (shown_host, self.port))
        a.info("launcher.py:34", "Available routes are:")
        for route, methods in [("/openapi.json", "GET, HEAD"), ("/docs", "GET, HEAD"), ("/health", "GET"),
                               ("/load", "GET"), ("/ping", "POST"), ("/ping", "GET"), ("/tokenize", "POST"),
                               ("/detokenize", "POST"), ("/v1/models", "GET"), ("/version", "GET"),
                               ("/v1/responses", "POST"), ("/v1/chat/completions", "POST"),
                               ("/v1/completions", "POST"), ("/v1/embeddings", "POST"), ("/metrics", "GET")]:
            a.info("launcher.py:42", "Route: %s, Methods: %s" % (route, methods))
        self.httpd = ThreadingHTTPServer(self.sock.getsockname()[:2], make_handler(self), bind_and_activate=False)
        self.httpd.socket.close()
        self.httpd.socket = self.sock
        self.httpd.daemon_threads = True
        a.raw("INFO:     Started server process [%d]" % self.pid)
        a.raw("INFO:     Waiting for application startup.")
        try:
            self.sock.listen(128)
        except OSError as e:
            a.traceback(API_FRAMES, "OSError: [Errno %d] %s" % (e.errno, e.strerror))
            raise Fatal(1)
        a.raw("INFO:     Application startup complete.")
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()

    def uvicorn_shutdown(self):
        a = self.api
        if self.httpd:
            a.raw("INFO:     Shutting down")
            self.httpd.shutdown()
            a.raw("INFO:     Waiting for application shutdown.")
            a.raw("INFO:     Application shutdown complete.")
            a.raw("INFO:     Finished server process [%d]" % self.pid)
        self.close()

    def close(self):
        self.release_pg()
        for sock in [self.mp_srv, self.mp_conn] + [p.get("conn") for p in self.mp_peers]:
            try:
                if sock:
                    sock.close()
            except OSError:
                pass
        try:
            if self.httpd:
                self.httpd.server_close()
            elif self.sock:
                self.sock.close()
        except OSError:
            pass

    def run(self):
        self.check_mp_flags_known(self.argv)
        if self.headless:
            return self.run_headless()
        self.banner()
        self.bind()
        self.api.info("api_server.py:1839", "vLLM API server version %s" % self.version)
        self.load_config()
        self.validate_parallel()
        self.check_crash()
        self.engine_init()
        self.load()
        self.start_http()
        while not STOP.is_set():
            self.check_crash()
            self.check_cluster()
            time.sleep(0.1)
        self.uvicorn_shutdown()
        return 0


# ------------------------------------------------------------------ http handler

WORDS = ("Hello! This is a deterministic answer from the simulated vLLM server. It counts tokens by words, "
         "honours max_tokens and stops when the sentence ends.").split()


def make_handler(srv):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "uvicorn"
        sys_version = ""

        def log_message(self, fmt, *args):
            pass

        def log_request(self, code="-", size="-"):
            try:
                phrase = self.responses.get(int(code), ("",))[0]
            except (ValueError, TypeError):
                phrase = ""
            srv.api.raw('INFO:     %s:%d - "%s %s HTTP/1.1" %s %s' % (
                self.client_address[0], self.client_address[1], self.command, self.path, code, phrase))

        def send_json(self, code, obj, extra=None):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def err(self, code, msg, typ, param=None):
            self.send_json(code, {"error": {"message": msg, "type": typ, "param": param, "code": code}})

        def through_middleware(self):
            """Runs the request's scope through the --middleware classes (the last one outermost, as Starlette stacks
            add_middleware); True when it reached the app, else the middleware's own response has been sent."""
            if not srv.middleware:
                return True
            reached, sent = [], []

            async def app(scope, receive, send):
                reached.append(True)

            async def receive():
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message):
                sent.append(message)

            stack = app
            for cls in srv.middleware:
                stack = cls(app=stack)
            raw = self.path.split("?", 1)
            scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": self.command,
                     "scheme": "http", "path": urllib.parse.unquote(raw[0]), "raw_path": raw[0].encode(),
                     "query_string": (raw[1] if len(raw) > 1 else "").encode(), "root_path": "",
                     "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()],
                     "client": self.client_address[:2], "server": srv.sock.getsockname()[:2]}
            asyncio.run(stack(scope, receive, send))
            if reached:
                return True
            start = next(m for m in sent if m["type"] == "http.response.start")
            self.send_response(start["status"])
            for k, v in start.get("headers", []):
                self.send_header(k.decode("latin-1"), v.decode("latin-1"))
            self.end_headers()
            self.wfile.write(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))
            return False

        def authorized(self):
            """The --middleware stack, then vLLM's own AuthenticationMiddleware (GUARDED_PREFIX by the image's version,
            on the path as uvicorn decodes it)."""
            if not self.through_middleware():
                return False
            path = urllib.parse.unquote(self.path.split("?", 1)[0])
            if not srv.api_key or not path.startswith(guarded_prefix(srv.version)):
                return True
            if verify_token(srv.api_key, self.headers.get("Authorization")):
                return True
            self.send_json(401, {"error": "Unauthorized"})
            return False

        def do_GET(self):
            path = self.path.split("?")[0]
            if not self.authorized():
                return
            if path in ("/health", "/ping"):
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()
            elif path == "/version":
                self.send_json(200, {"version": srv.version})
            elif path == "/load":
                self.send_json(200, {"server_load": 0})
            # Real vLLM mounts Prometheus' ASGI app by prefix (vllm/entrypoints/openai/api_server.py mount_metrics:
            # `Mount("/metrics", make_asgi_app())` with `path_regex = re.compile("^/metrics(?P<path>.*)$")`), so
            # /metricsX and /metrics/… answer metrics too.
            elif path.startswith("/metrics"):
                body = metrics(srv).encode()
                self.send_response(200)
                self.send_header("content-type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif path == "/v1/models":
                now = int(srv.t0)
                self.send_json(200, {"object": "list", "data": [
                    {"id": n, "object": "model", "created": now, "owned_by": "vllm", "root": srv.path,
                     "parent": None, "max_model_len": srv.max_len,
                     "permission": [{"id": "modelperm-" + secrets.token_hex(16), "object": "model_permission",
                                     "created": now, "allow_create_engine": False, "allow_sampling": True,
                                     "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                                     "allow_fine_tuning": False, "organization": "*", "group": None,
                                     "is_blocking": False}]} for n in srv.served]})
            else:
                self.send_json(404, {"detail": "Not Found"})

        def do_POST(self):
            path = self.path.split("?")[0]
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            if not self.authorized():
                return
            if path not in ("/v1/completions", "/v1/chat/completions"):
                return self.send_json(404, {"detail": "Not Found"})
            try:
                req = json.loads(raw or b"{}")
                assert isinstance(req, dict)
            except (ValueError, AssertionError):
                return self.err(400, "JSON decode error", "BadRequestError")
            model = req.get("model") or srv.served[0]
            if model not in srv.served:
                return self.err(404, "The model `%s` does not exist." % model, "NotFoundError", "model")
            chat = path.endswith("chat/completions")
            if chat:
                msgs = req.get("messages")
                if not isinstance(msgs, list) or not msgs:
                    return self.err(400, "messages: Field required", "BadRequestError")
                prompt = " ".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict))
            else:
                if "prompt" not in req:
                    return self.err(400, "prompt: Field required", "BadRequestError")
                prompt = req["prompt"] if isinstance(req["prompt"], str) else json.dumps(req["prompt"])
            max_tokens = req.get("max_completion_tokens") or req.get("max_tokens")
            max_tokens = int(max_tokens) if max_tokens is not None else (len(WORDS) if chat else 16)
            if max_tokens < 1:
                return self.err(400, "max_tokens must be at least 1, got %d." % max_tokens, "BadRequestError")
            toks = WORDS[:max_tokens]
            finish = "stop" if len(toks) == len(WORDS) else "length"
            ptoks = max(1, len(prompt.split()))
            srv.stats["prompt"] += ptoks
            srv.stats["gen"] += len(toks)
            srv.stats["ok"] += 1
            rid = ("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(16)
            created = int(time.time())
            usage = {"prompt_tokens": ptoks, "total_tokens": ptoks + len(toks), "completion_tokens": len(toks),
                     "prompt_tokens_details": None}
            if req.get("stream"):
                return self.stream(chat, rid, created, model, toks, finish, usage, req)
            text = " ".join(toks)
            if chat:
                choice = {"index": 0, "message": {"role": "assistant", "content": text, "refusal": None,
                                                  "annotations": None, "audio": None, "function_call": None,
                                                  "tool_calls": [], "reasoning_content": None},
                          "logprobs": None, "finish_reason": finish, "stop_reason": None}
                obj = "chat.completion"
            else:
                choice = {"index": 0, "text": " " + text, "logprobs": None, "finish_reason": finish,
                          "stop_reason": None, "prompt_logprobs": None}
                obj = "text_completion"
            self.send_json(200, {"id": rid, "object": obj, "created": created, "model": model,
                                 "choices": [choice], "usage": usage, "service_tier": None,
                                 "system_fingerprint": None, "prompt_logprobs": None, "kv_transfer_params": None})

        def stream(self, chat, rid, created, model, toks, finish, usage, req):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            obj = "chat.completion.chunk" if chat else "text_completion"

            def chunk(delta_or_text, fin=None):
                if chat:
                    c = {"index": 0, "delta": delta_or_text, "logprobs": None, "finish_reason": fin}
                    if fin:
                        c["stop_reason"] = None
                else:
                    c = {"index": 0, "text": delta_or_text, "logprobs": None, "finish_reason": fin,
                         "stop_reason": None}
                data = {"id": rid, "object": obj, "created": created, "model": model, "choices": [c]}
                self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")
                self.wfile.flush()

            # Streaming takes time as on a GPU, so the serving proof measures something: the first token after
            # ttft_ms (default 40), then tokens_per_second (default 100) - fault switches like the others.
            f = sc.faults()
            ttft = float(f.get("ttft_ms", 40)) / 1000
            gap = 1 / float(f.get("tokens_per_second", 100))
            try:
                # vLLM sends the role chunk with the engine's first output (vllm/entrypoints/openai/serving_chat.py
                # chat_completion_stream_generator, first_iteration), so it too comes after the time to first token.
                time.sleep(ttft)
                if chat:
                    chunk({"role": "assistant", "content": ""})
                for i, t in enumerate(toks):
                    if i:
                        time.sleep(gap)
                    piece = (" " if (i or not chat) else "") + t
                    fin = finish if i == len(toks) - 1 else None
                    chunk({"content": piece} if chat else piece, fin)
                if (req.get("stream_options") or {}).get("include_usage"):
                    data = {"id": rid, "object": obj, "created": created, "model": model, "choices": [],
                            "usage": usage}
                    self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except OSError:
                pass

    return H


def metrics(srv):
    labels = '{engine="0",model_name="%s"}' % srv.served[0]
    rows = [
        ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", 0.0),
        ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", 0.0),
        ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", 0.0),
        ("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", float(srv.stats["prompt"])),
        ("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
         float(srv.stats["gen"])),
    ]
    out = []
    for name, typ, help_, val in rows:
        out += ["# HELP %s %s" % (name, help_), "# TYPE %s %s" % (name, typ), "%s%s %s" % (name, labels, val)]
    out += ["# HELP vllm:request_success_total Count of successfully processed requests.",
            "# TYPE vllm:request_success_total counter",
            'vllm:request_success_total{engine="0",finished_reason="stop",model_name="%s"} %s' % (
                srv.served[0], float(srv.stats["ok"])),
            "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
            "# TYPE vllm:cache_config_info gauge",
            'vllm:cache_config_info{block_size="16",engine="0",gpu_memory_utilization="%s",num_gpu_blocks="%d"} '
            '1.0' % (srv.util, getattr(srv, "kv_tokens", 0) // 16)]
    return "\n".join(out) + "\n"


def on_term(signum, frame):
    STOP.set()


def serve(argv):
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    srv = Server(argv)
    try:
        return srv.run()
    except Fatal as f:
        srv.close()
        return f.code
