"""torch.cuda stand-in: one NVIDIA GB10 (compute capability 12.1) per simulated Spark.

A GPU is visible when the container was started with one (`docker run --gpus`, which sets
NVIDIA_VISIBLE_DEVICES; "void"/"none" or unset mean none, as with the NVIDIA container toolkit).
Memory: CUDA reports 121.69 GiB total on a Spark (DESIGN.md, facts learned); free memory is the
fault switch `free_memory_gib` (default 112.0, as the vLLM stand-in's)."""
import os

import simcommon as sc

from torch.cuda import nccl  # torch.cuda.nccl.version()

__all__ = ["nccl", "is_available", "device_count", "set_device", "current_device", "get_device_name",
           "get_device_capability", "mem_get_info", "synchronize"]

TOTAL_BYTES = int(121.69 * (1 << 30))
_current = 0


def _visible():
    v = (os.environ.get("NVIDIA_VISIBLE_DEVICES") or "").strip()
    if v in ("", "void", "none"):
        return 0
    if v == "all":
        return 1
    return len([d for d in v.split(",") if d.strip()])


def is_available():
    return _visible() > 0


def device_count():
    return _visible()


def _check(device):
    index = device if isinstance(device, int) else int(str(device).rpartition(":")[2] or 0)
    if not 0 <= index < _visible():
        raise RuntimeError("CUDA error: invalid device ordinal")
    return index


def set_device(device):
    global _current
    _current = _check(device)


def current_device():
    return _current


def get_device_name(device=None):
    return "NVIDIA GB10"


def get_device_capability(device=None):
    return (12, 1)


def mem_get_info(device=None):
    free = float(sc.faults().get("free_memory_gib", 112.0)) * (1 << 30)
    return int(min(free, TOTAL_BYTES)), TOTAL_BYTES


def synchronize(device=None):
    return None
