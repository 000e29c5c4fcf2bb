# The memory gate before every vLLM launch. A Spark's GPU memory is the system's (128 GB unified). vLLM's start-up
# check is free >= utilization x total (vllm/v1/worker/utils.py request_memory, called from gpu_worker.py: "Free
# memory on device ... on startup is less than desired GPU memory utilization"), and what "free" is depends on the
# image's vLLM (components/knowledge/images.ts [uma-free]): before 0.11.1 CUDA's free figure, which leaves out the page cache,
# so right after 60-120 GB of weights were read vLLM refuses; from 0.11.1 on a GB10 (and from 0.20.0 on any
# integrated GPU) MemorySnapshot takes psutil.virtual_memory().available (MemAvailable), where the page cache counts
# as available. We flush the cache first all the same, as NVIDIA's vLLM playbook does (NVIDIA/dgx-spark-playbooks
# nvidia/vllm/README.md: `sync; echo 3 > /proc/sys/vm/drop_caches`; harmless), then measure both figures and apply
# the image's rule.
import json
import os
import subprocess

from spark_vllm.common import fail, say
from spark_vllm.compat import version_tuple
from spark_vllm.data import data

GIB = 1024 ** 3
DROP = "sync; echo 3 > /proc/sys/vm/drop_caches"


def flush_argv(image, euid, sudo_ok, labels=None):
    """How to drop the page cache with the privilege at hand: as root directly; with passwordless sudo; else in a
    throw-away privileged container of the image already on the host (the SSH user is in the docker group, and
    /proc/sys is writable only in a privileged container). Our own containers stay unprivileged."""
    if euid == 0:
        return ["sh", "-c", DROP]
    if sudo_ok:
        return ["sudo", "-n", "sh", "-c", DROP]
    # It carries the stack's labels like every container of ours (ownership.py): another stack's preflight sees it.
    owner = [a for k, v in sorted((labels or {}).items()) for a in ("--label", "%s=%s" % (k, v))]
    return ["docker", "run", "--rm", "--privileged", "--network", "none"] + owner + ["--entrypoint", "sh", image, "-c", DROP]


def flush_page_cache(args):
    """On the host: drops the page cache and says how."""
    sudo_ok = os.geteuid() != 0 and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0 \
        if _have("sudo") else False
    argv = flush_argv(args["image"], os.geteuid(), sudo_ok, args.get("labels"))
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        fail(["%s: could not drop the page cache (%s): %s. Run `sync; echo 3 | sudo tee /proc/sys/vm/drop_caches` "
              "on the host, or give the SSH user passwordless sudo for it" % (args["host"], " ".join(argv[:3]), (p.stderr or p.stdout).strip())])
    say(json.dumps({"host": args["host"], "flushed": True, "how": argv[0] if argv[0] != "sh" else "root"}))


def _have(cmd):
    return any(os.access(os.path.join(d, cmd), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep) if d)


def verdict(host, free_bytes, total_bytes, utilization):
    """vLLM's own start-up arithmetic: it asks for utilization x total and refuses when less is free.
    Returns (facts, problem or None)."""
    requested = utilization * total_bytes
    facts = {"host": host, "freeGiB": round(free_bytes / GIB, 2), "totalGiB": round(total_bytes / GIB, 2),
             "requestedGiB": round(requested / GIB, 2), "gpuMemoryUtilization": utilization}
    if free_bytes >= requested:
        return facts, None
    fits = int(free_bytes / total_bytes * 100) / 100
    return facts, (
        "%s: vLLM will ask for %.2f GiB (gpuMemoryUtilization %s x %.2f GiB total) but only %.2f GiB is free "
        "after dropping the page cache: %.2f GiB is held by something else. Stop what holds it (`nvidia-smi`, "
        "`docker ps`, a leftover vLLM or Ray on %s), or lower spark-vllm:vllm.gpuMemoryUtilization to %.2f or less"
        % (host, requested / GIB, utilization, total_bytes / GIB, free_bytes / GIB,
           (total_bytes - free_bytes) / GIB, host, fits))


def startup_free_source(vllm_version, capability, integrated=None):
    """Which figure vLLM's start-up check takes as free: "mem-available" or "cuda-free" (the twin of
    components/plan/memory.ts vllmStartupFreeSource). A version that is not a release number gets CUDA's, the stricter."""
    images = data().get("images", {})
    first, query = images.get("firstVllmWithUnifiedMemoryAvailable"), images.get("firstVllmWithIntegratedGpuQuery")
    uma = [list(c) for c in images.get("umaCapabilities", [])]
    on_list = capability is not None and list(capability) in uma
    v = version_tuple(vllm_version or "")
    if len(v) < 2 or not first or v < version_tuple(first):
        return "cuda-free"
    if query and v >= version_tuple(query):
        return "mem-available" if (on_list if integrated is None else integrated) else "cuda-free"
    return "mem-available" if on_list else "cuda-free"


def mem_available_bytes():
    """MemAvailable as vLLM reads it (psutil.virtual_memory().available), else from /proc/meminfo; None if neither."""
    try:
        import psutil
        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def is_integrated_gpu(torch):
    """CUDA's integrated flag (torch.cuda.get_device_properties(0).is_integrated), or None when this torch cannot say:
    then startup_free_source falls back to the capability list."""
    try:
        return getattr(torch.cuda.get_device_properties(0), "is_integrated", None)
    except Exception:
        return None


def image_vllm_version():
    try:
        from importlib.metadata import version
        return version("vllm")
    except Exception:
        try:
            import vllm
            return getattr(vllm, "__version__", None)
        except Exception:
            return None


def memory_check(args):
    """In the container: CUDA's free figure (torch.cuda.mem_get_info) and MemAvailable, and the one this image's vLLM
    takes as free at start-up (startup_free_source)."""
    try:
        import torch
        cuda_free, total = torch.cuda.mem_get_info()
        capability = tuple(torch.cuda.get_device_capability())
        integrated = is_integrated_gpu(torch)
    except Exception as e:
        fail(["%s: cannot read GPU memory in the container (%s: %s): check the GPU with nvidia-smi there"
              % (args["host"], type(e).__name__, e)])
    available = mem_available_bytes()
    version = image_vllm_version()
    source = startup_free_source(version, capability, integrated)
    free = available if source == "mem-available" and available is not None else cuda_free
    facts, problem = verdict(args["host"], free, total, args["gpuMemoryUtilization"])
    facts.update({"cudaFreeGiB": round(cuda_free / GIB, 2), "freeSource": source, "vllmVersion": version or "unknown",
                  "memAvailableGiB": round(available / GIB, 2) if available is not None else None})
    say("%s: CUDA free %.2f GiB, MemAvailable %s of %.2f GiB; vLLM %s takes %s as free and will ask for %.2f GiB"
        % (args["host"], facts["cudaFreeGiB"], "%.2f GiB" % facts["memAvailableGiB"] if available is not None else "unknown",
           facts["totalGiB"], version or "(version unknown)", "MemAvailable" if source == "mem-available" else "CUDA's free figure",
           facts["requestedGiB"]))
    if problem:
        fail([problem])
    say(json.dumps(facts, sort_keys=True))


# After the weights load: vLLM holds its share (gpuMemoryUtilization x total) for weights and KV cache, and what is
# left is all the OS, Docker, Ray and the page cache have (owners of two Sparks report free memory falling 17-19 GiB
# right after loading, about the default headroom: issue 29). Below LOW_AFTER_LOAD_GIB a warning names the host:
# 4 GiB is the planner's per-GPU runtime reserve (components/plan/memory.ts MEMORY_DEFAULTS.reserveGiB, vLLM's profiled
# activation peak on a GB10), the swing a burst of requests or a log-heavy host can take out of unified memory
# before the kernel's OOM killer picks the largest process: vLLM (docs/memory.md).
LOW_AFTER_LOAD_GIB = 4.0


def free_now(host):
    """CUDA's free figure, MemAvailable and total, and which one this image's vLLM calls free (memory_check's rule).
    Opening CUDA here costs this process's own context, a few hundred MB at most, not counted by vLLM."""
    import torch
    cuda_free, total = torch.cuda.mem_get_info()
    capability = tuple(torch.cuda.get_device_capability())
    integrated = is_integrated_gpu(torch)
    available = mem_available_bytes()
    version = image_vllm_version()
    source = startup_free_source(version, capability, integrated)
    free = available if source == "mem-available" and available is not None else cuda_free
    return {"host": host, "cudaFreeGiB": round(cuda_free / GIB, 2), "totalGiB": round(total / GIB, 2),
            "memAvailableGiB": round(available / GIB, 2) if available is not None else None,
            "freeSource": source, "freeGiB": round(free / GIB, 2)}


def low_memory_warning(facts, threshold=LOW_AFTER_LOAD_GIB, when="after the weights loaded"):
    """The warning for FACTS (free_now's) below THRESHOLD GiB, or None."""
    if facts["freeGiB"] >= threshold:
        return None
    return ("%s: %.2f GiB free %s (CUDA free %.2f GiB, MemAvailable %s), below %.0f GiB: the OS, Docker and Ray are "
            "short of memory and the kernel may kill vLLM; lower spark-vllm:vllm.gpuMemoryUtilization, or stop what "
            "else runs on %s (docs/memory.md)"
            % (facts["host"], facts["freeGiB"], when, facts["cudaFreeGiB"],
               "%.2f GiB" % facts["memAvailableGiB"] if facts["memAvailableGiB"] is not None else "unknown",
               threshold, facts["host"]))


def memory_after_load(args):
    """In the container, once the endpoint answered: free memory now, with vLLM holding its share."""
    try:
        facts = free_now(args["host"])
    except Exception as e:
        fail(["%s: cannot read GPU memory in the container after the load (%s: %s)" % (args["host"], type(e).__name__, e)])
    threshold = float(args.get("lowGiB", LOW_AFTER_LOAD_GIB))
    warning = low_memory_warning(facts, threshold)
    facts.update({"lowGiB": threshold, "warnings": [warning] if warning else []})
    say("%s: after the weights loaded, %.2f GiB free (%s; CUDA free %.2f GiB of %.2f)"
        % (args["host"], facts["freeGiB"], facts["freeSource"], facts["cudaFreeGiB"], facts["totalGiB"]))
    say(json.dumps(facts, sort_keys=True))
