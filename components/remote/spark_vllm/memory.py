# The memory gate before every vLLM launch. A Spark's GPU memory is the system's (128 GB unified): right after
# 60-120 GB of weights were read, the page cache holds most of it and vLLM's start-up check (free >= utilization
# x total, vllm/v1/worker/utils.py request_memory, called from gpu_worker.py: "Free memory on device ... on startup is less than desired GPU memory
# utilization") refuses to start. NVIDIA's vLLM playbook flushes the cache first (NVIDIA/dgx-spark-playbooks
# nvidia/vllm/README.md: `sync; echo 3 > /proc/sys/vm/drop_caches`); so do we, then measure as CUDA sees it.
import json
import os
import subprocess

from spark_vllm.common import fail, say

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


def memory_check(args):
    """In the container: free and total memory as CUDA reports them (torch.cuda.mem_get_info)."""
    try:
        import torch
        free, total = torch.cuda.mem_get_info()
    except Exception as e:
        fail(["%s: cannot read GPU memory in the container (%s: %s): check the GPU with nvidia-smi there"
              % (args["host"], type(e).__name__, e)])
    facts, problem = verdict(args["host"], free, total, args["gpuMemoryUtilization"])
    say("%s: %.2f of %.2f GiB free, vLLM will ask for %.2f GiB" % (args["host"], facts["freeGiB"], facts["totalGiB"], facts["requestedGiB"]))
    if problem:
        fail([problem])
    say(json.dumps(facts, sort_keys=True))
