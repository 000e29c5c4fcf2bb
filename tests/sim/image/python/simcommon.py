"""Shared helpers for the ray / vllm stand-ins (python3 standard library only).

Environment contract (all optional):
  VLLM_SIM_RELEASE   path of the release description (default /etc/vllm-sim/release.json)
  VLLM_SIM_FAULTS    path of the fault switches (default $HF_HOME/sim-faults.json)
  RAY_SIM_DIR        ray state directory of this "host" (default /tmp/ray)
  VLLM_HOST_IP       this host's fabric address (node IP default)

GPU model (read by the vllm stand-in and by the torch stand-in's torch.cuda): see gpu_memory(),
cuda_arch_list(), cuda_kernel_error() below and tests/sim/README.md "GPU, memory and CUDA".
"""
import json
import os
import socket
import sys
import time

DEFAULT_RELEASE = {
    "version": "0.17.1",
    "architectures": [
        "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
        "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
        "Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
        "GptOssForCausalLM", "Gemma3ForConditionalGeneration",
    ],
    "transformers": "4.57.1",
    "load_seconds": 3,
    "ray": "2.60.0",
}

# ---------------------------------------------------------------- GPU model (a DGX Spark's GB10)
#
# Facts (cited in components/knowledge/images.ts and components/plan/memory.ts):
# - CUDA reports 121.69 GiB total on a Spark ("Free memory on device cuda:0 (104.5/121.69 GiB) ..."); free memory
#   is free *system* memory: the page cache and other processes count as used (unified memory).
# - GB10 is compute capability 12.1; the DGX OS driver here is 580.95.05 (CUDA 13.0), as the sim's nvidia-smi says.
GPU_TOTAL_GIB = 121.69
OS_USED_GIB = 9.69          # DGX OS + Docker at rest: free = 112.00 GiB with no faults (the stand-in's old default)
GPU_CAPABILITY = (12, 1)
GPU_NAME = "NVIDIA GB10"
DRIVER_VERSION = "580.95.05"
# driver branch -> CUDA version it ships with (CUDA toolkit release notes); minimum driver per CUDA major under
# minor-version compatibility (CUDA Compatibility guide). Same tables as components/knowledge/images.ts.
DRIVER_BRANCH_CUDA = [(525, (12, 0)), (530, (12, 1)), (535, (12, 2)), (545, (12, 3)), (550, (12, 4)),
                      (555, (12, 5)), (560, (12, 6)), (570, (12, 8)), (575, (12, 9)), (580, (13, 0)),
                      (590, (13, 1))]


def page_cache_path():
    """File the sim's flush helper writes 0 into (next to sim-faults.json); see tests/sim/README.md."""
    return os.path.join(os.path.dirname(faults_path()), "sim-page-cache-gib")


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def page_cache_gib(f=None):
    """Page cache now: faults' page_cache_gib, unless a flush (sim-page-cache-gib) happened after the faults were set."""
    f = faults() if f is None else f
    cached = float(f.get("page_cache_gib", 0) or 0)
    flushed = _mtime(page_cache_path())
    set_at = _mtime(faults_path())
    if flushed is not None and (set_at is None or flushed >= set_at):
        try:
            with open(page_cache_path()) as fh:
                return float(fh.read().strip() or 0)
        except (OSError, ValueError):
            return 0.0
    return cached


def drop_caches():
    """What `sync; echo 3 > /proc/sys/vm/drop_caches` does to this sim host: the page cache becomes 0."""
    path = page_cache_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as fh:
        fh.write("0\n")
    os.replace(tmp, path)


def vllm_hold_path(pid):
    """File a running stand-in vLLM writes its share into (beside the faults file, which stands for one host), as real
    vLLM holds gpuMemoryUtilization x total for weights and KV cache once loaded."""
    return "%s.vllm-holds-%d" % (faults_path(), pid)


def _start_ticks(pid):
    """A process's start time (field 22 of /proc/PID/stat, proc(5)): with the pid it names one process, also across
    containers, whose pid namespaces hand the same numbers out again."""
    with open("/proc/%d/stat" % pid) as fh:
        return fh.read().rsplit(")", 1)[1].split()[19]


def hold_vllm_memory(gib):
    with open(vllm_hold_path(os.getpid()), "w") as fh:
        fh.write("%.4f %s\n" % (gib, _start_ticks(os.getpid())))


def vllm_held_gib():
    """What live stand-in vLLM processes of this host hold: a file whose pid is gone, or now names another process
    (a replaced container reuses pids), is ignored."""
    held = 0.0
    folder, prefix = os.path.dirname(faults_path()), os.path.basename(faults_path()) + ".vllm-holds-"
    for name in (os.listdir(folder) if os.path.isdir(folder) else []):
        if not name.startswith(prefix):
            continue
        try:
            with open(os.path.join(folder, name)) as fh:
                gib, started = fh.read().split()
            if _start_ticks(int(name.rsplit("-", 1)[1])) != started:
                continue
            held += float(gib)
        except (OSError, ValueError):
            continue
    return held


def gpu_memory():
    """What torch.cuda.mem_get_info() returns here, in GiB: total, free and what the free figure is made of.

    free = total - OS at rest - page cache - memory held by other processes (not flushable);
    the fault free_memory_gib, when set, is taken as the free figure itself (older switch)."""
    f = faults()
    total = float(f.get("gpu_total_gib", GPU_TOTAL_GIB))
    cache = page_cache_gib(f)
    held = float(f.get("memory_held_gib", 0) or 0)
    used = float(f.get("os_used_gib", OS_USED_GIB))
    if f.get("free_memory_gib") is not None:
        free = float(f["free_memory_gib"])
    else:
        free = max(0.0, total - used - cache - held - vllm_held_gib())
    return {"total_gib": total, "free_gib": round(free, 4), "page_cache_gib": cache, "held_gib": held,
            "os_used_gib": used}


def mem_available_gib():
    """/proc/meminfo MemAvailable on this sim host: what is free plus the page cache, which the kernel reclaims."""
    m = gpu_memory()
    return round(min(m["total_gib"], m["free_gib"] + m["page_cache_gib"]), 4)


def vllm_startup_free_gib(vllm_version, cap=None):
    """The free figure real vLLM's start-up check takes (MemorySnapshot.measure, vllm/utils/mem_utils.py): CUDA's before
    0.11.1; MemAvailable (psutil) from 0.11.1 on capability 8.7/11.0/12.1, from 0.20.0 on any integrated GPU (a sim
    GB10 is one). components/knowledge/images.ts [uma-free] cites the releases."""
    cap = tuple(cap or GPU_CAPABILITY)
    v = _ver(vllm_version, 3)
    if v >= (0, 11, 1) and cap in ((8, 7), (11, 0), (12, 1)):
        return mem_available_gib()
    return gpu_memory()["free_gib"]


def mem_get_info():
    """(free_bytes, total_bytes) like torch.cuda.mem_get_info()."""
    m = gpu_memory()
    return int(m["free_gib"] * 1024 ** 3), int(m["total_gib"] * 1024 ** 3)


def _ver(s, n=2):
    parts = [int(p) for p in str(s).split(".")[:n] if p.isdigit()]
    return tuple(parts + [0] * (n - len(parts)))


def driver_version():
    return str(faults().get("driver_version") or DRIVER_VERSION)


def driver_cuda(driver=None):
    """(major, minor) CUDA the driver supports natively, or None for a branch not in the table."""
    try:
        branch = int(str(driver or driver_version()).split(".")[0])
    except ValueError:
        return None
    best = None
    for b, cuda in DRIVER_BRANCH_CUDA:
        if branch >= b:
            best = cuda
    return best


def cuda_runtime():
    """torch.version.cuda of this image."""
    return str(release().get("cuda") or "13.0")


def cuda_arch_list():
    """torch.cuda.get_arch_list() of this image (release.json cuda_arch_list)."""
    return list(release().get("cuda_arch_list") or ["sm_80", "sm_89", "sm_90", "sm_100", "sm_103", "sm_120"])


def torch_version():
    """torch.__version__ of this image (release.json torch)."""
    return str(release().get("torch") or "2.11.0+cu130")


def _arch(t):
    t = t.strip().lower()
    for prefix, kind in (("sm_", "sass"), ("compute_", "ptx")):
        if t.startswith(prefix):
            body = t[len(prefix):]
            variant = body[-1] if body[-1:] in ("a", "f") else ""
            digits = body[:-1] if variant else body
            if digits.isdigit() and len(digits) >= 2:
                return kind, int(digits[:-1]), int(digits[-1]), variant
    return None


def kernels_for_device(cap=GPU_CAPABILITY):
    """'sass', 'ptx' or None: how this image's kernels run on the GPU (CUDA's binary-compatibility rule)."""
    major, minor = cap
    parsed = [a for a in (_arch(t) for t in cuda_arch_list()) if a]
    if any(k == "sass" and M == major and (m == minor if v == "a" else m <= minor) for k, M, m, v in parsed):
        return "sass"
    if any(k == "ptx" and ((M, m) == (major, minor) if v == "a" else (M, m) <= (major, minor))
           for k, M, m, v in parsed):
        return "ptx"
    return None


def _runs_on(targets, cap=GPU_CAPABILITY):
    """Does any SASS target (sm_XY[a|f]) of a kernel run on the GPU? CUDA's rule (components/knowledge/images.ts cudaKernelsRunOn):
    sm_XYa only on exactly X.Y, sm_XY / sm_XYf on X.y with y >= Y."""
    major, minor = cap
    return any(k == "sass" and M == major and (m == minor if v == "a" else m <= minor)
               for k, M, m, v in (a for a in (_arch(t) for t in targets) if a))


def vllm_kernels():
    """How the stand-in vLLM's own CUTLASS kernels were compiled: release.json vllm_kernels = {"cuda": "12.9.1",
    "scaled_mm_sm120": ["sm_120a"], "nvfp4_sm120": [...], "nvfp4_sm100": [...]} (the SASS targets of each kernel family, as
    components/knowledge/vllmKernels.ts derives them from a release's CMake rules). Without it: a build with the image's CUDA whose
    arch list has 12.x SASS gets the SM120 kernels vLLM's CMake gives a plain 12.0: sm_120f from CUDA 13.0, sm_120a before
    (CMakeLists.txt SCALED_MM_ARCHS / FP4_ARCHS, vLLM 0.11.1-0.33.0)."""
    given = release().get("vllm_kernels")
    if given:
        return dict(given)
    cuda = cuda_runtime()
    has12 = any(a and a[0] == "sass" and a[1] == 12 for a in (_arch(t) for t in cuda_arch_list()))
    sm120 = (["sm_120f"] if _ver(cuda) >= (13, 0) else ["sm_120a"]) if has12 and _ver(cuda) >= (12, 8) else []
    return {"cuda": cuda, "scaled_mm_sm120": sm120, "nvfp4_sm120": sm120, "nvfp4_sm100": []}


CUDA_CHECK_SUFFIX = ("CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                     "below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                     "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")


def cuda_error_text(message, name):
    """PyTorch's C10_CUDA_CHECK text (c10/cuda/CUDAException.cpp), as in public GB10 logs."""
    cls = "torch.AcceleratorError" if _ver(torch_version().split("+")[0]) >= (2, 8) else "RuntimeError"
    return ("%s: CUDA error: %s\nSearch for `%s' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
            "group__CUDART__TYPES.html for more information.\n%s" % (cls, message, name, CUDA_CHECK_SUFFIX))


def cuda_init_error():
    """PyTorch's message when the driver is older than the runtime's major release (no CUDA device then), or None."""
    drv = driver_cuda()
    rt = _ver(cuda_runtime())
    if drv is None or rt[0] <= drv[0]:
        return None
    return ("The NVIDIA driver on your system is too old (found version %d). Please update your GPU driver by "
            "downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
            "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your "
            "version of the CUDA driver." % (drv[0] * 1000 + drv[1] * 10))


def incompatible_device_warning():
    """torch.cuda's UserWarning for a GPU none of the image's SASS or PTX covers, or None."""
    if kernels_for_device() is not None:
        return None
    sm = "%d%d" % GPU_CAPABILITY
    return ("\n%s with CUDA capability sm_%s is not compatible with the current PyTorch installation.\n"
            "The current PyTorch install supports CUDA capabilities %s.\n"
            "If you want to use the %s GPU with PyTorch, please check the instructions at "
            "https://pytorch.org/get-started/locally/\n" % (GPU_NAME, sm, " ".join(cuda_arch_list()), GPU_NAME))


def cuda_kernel_error():
    """The CUDA error the first kernel launch gets on this host, or None.

    - no SASS for 12.x with minor <= 1 and no PTX <= 12.1: cudaErrorNoKernelImageForDevice;
    - only PTX, built by a CUDA newer than the driver's: minor-version compatibility cannot JIT it,
      cudaErrorUnsupportedPtxVersion."""
    how = kernels_for_device()
    if how is None:
        return cuda_error_text("no kernel image is available for execution on the device",
                               "cudaErrorNoKernelImageForDevice")
    drv = driver_cuda()
    if how == "ptx" and drv is not None and _ver(cuda_runtime()) > drv:
        return cuda_error_text("the provided PTX was compiled with an unsupported toolchain.",
                               "cudaErrorUnsupportedPtxVersion")
    return None


def ray_importable():
    import importlib.util
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):
        return False


def release_path():
    return os.environ.get("VLLM_SIM_RELEASE", "/etc/vllm-sim/release.json")


def release():
    data = dict(DEFAULT_RELEASE)
    try:
        with open(release_path()) as f:
            data.update(json.load(f))
    except (OSError, ValueError):
        pass
    return data


def hf_home():
    return os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")


def faults_path():
    return os.environ.get("VLLM_SIM_FAULTS") or os.path.join(hf_home(), "sim-faults.json")


def faults():
    try:
        with open(faults_path()) as f:
            data = json.load(f)
            return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def ray_dir():
    return os.environ.get("RAY_SIM_DIR", "/tmp/ray")


def node_ip(explicit=None):
    return explicit or os.environ.get("VLLM_HOST_IP") or "127.0.0.1"


def pid_alive(pid):
    try:
        pid = int(pid)
        os.kill(pid, 0)
    except (ValueError, TypeError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    # a zombie counts as dead
    try:
        with open("/proc/%d/stat" % pid) as f:
            if f.read().split(")")[-1].split()[0] == "Z":
                return False
    except OSError:
        pass
    return True


def read_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def write_json(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def version_tuple(v):
    out = []
    for part in str(v).split("+")[0].split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit())
        out.append(int(digits or 0))
    return tuple(out + [0] * (3 - len(out)))


def current_cluster_address():
    """Like Ray: RAY_ADDRESS, else /tmp/ray/ray_current_cluster."""
    env = os.environ.get("RAY_ADDRESS")
    if env and env != "auto":
        return env.replace("ray://", "").split("/")[0]
    try:
        with open(os.path.join(ray_dir(), "ray_current_cluster")) as f:
            addr = f.read().strip()
            return addr or None
    except OSError:
        return None


# ---------------------------------------------------------------- formatting

def ray_ts():
    t = time.time()
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + ",%03d" % int((t % 1) * 1000)


def vllm_ts():
    return time.strftime("%m-%d %H:%M:%S")


def out(line=""):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def err(line=""):
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def vllm_cache_root():
    """VLLM_CACHE_ROOT, default $XDG_CACHE_HOME/vllm or ~/.cache/vllm (vllm/envs.py)."""
    if os.environ.get("VLLM_CACHE_ROOT"):
        return os.path.expanduser(os.environ["VLLM_CACHE_ROOT"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "vllm")


def port_free(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _main(argv):
    """`python3 simcommon.py gpu` prints mem_get_info as JSON; `drop-caches` is the sim's stand-in for
    `sync; echo 3 > /proc/sys/vm/drop_caches` (see tests/sim/README.md)."""
    if argv[:1] == ["drop-caches"]:
        drop_caches()
        return 0
    if argv[:1] == ["gpu"]:
        m = gpu_memory()
        m.update({"capability": "%d.%d" % GPU_CAPABILITY, "driver": driver_version(), "cuda": cuda_runtime(),
                  "arch_list": cuda_arch_list(), "kernels": kernels_for_device()})
        out(json.dumps(m, sort_keys=True))
        return 0
    err("usage: simcommon.py {gpu|drop-caches}")
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
