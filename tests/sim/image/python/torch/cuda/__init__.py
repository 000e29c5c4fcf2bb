"""torch.cuda stand-in: one NVIDIA GB10 per simulated Spark.

A GPU is visible when the container was started with one (`docker run --gpus`, which sets
NVIDIA_VISIBLE_DEVICES; "void"/"none" or unset mean none, as with the NVIDIA container toolkit),
and when the driver is new enough for the image's CUDA. Memory, capability and arch list come
from the GB10 model the vLLM stand-in shares (torch/_sim_gb10.py, simcommon)."""
import os

from torch import _sim_gb10
from torch.cuda import nccl  # torch.cuda.nccl.version()

__all__ = ["nccl", "is_available", "device_count", "set_device", "current_device", "get_device_name",
           "get_device_capability", "get_device_properties", "get_arch_list", "mem_get_info", "synchronize"]

_current = 0


def _visible():
    v = (os.environ.get("NVIDIA_VISIBLE_DEVICES") or "").strip()
    if v in ("", "void", "none") or _sim_gb10.driver_too_old():
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
    return _sim_gb10.get_device_capability(device)


class _CudaDeviceProperties:
    """The fields of torch's _CudaDeviceProperties the program reads (pytorch torch/csrc/cuda/Module.cpp
    registerCudaDeviceProperties: name, major, minor, total_memory, is_integrated). The GB10 shares the host's
    memory, so CUDA reports it as integrated."""

    def __init__(self, index):
        self.name = get_device_name(index)
        self.major, self.minor = get_device_capability(index)
        self.total_memory = mem_get_info(index)[1]
        self.is_integrated = 1

    def __repr__(self):
        return "_CudaDeviceProperties(name='%s', major=%d, minor=%d, total_memory=%dMB, is_integrated=%d)" % (
            self.name, self.major, self.minor, self.total_memory // (1 << 20), self.is_integrated)


def get_device_properties(device=None):
    return _CudaDeviceProperties(_check(current_device() if device is None else device))


def get_arch_list():
    return _sim_gb10.get_arch_list()


def mem_get_info(device=None):
    return _sim_gb10.mem_get_info(device)


def synchronize(device=None):
    return None
