"""The simulated GB10 as torch sees it, for the torch stand-in to import (this module only adds functions; it is owned
by the vLLM/image stand-ins and delegates to simcommon, so `vllm serve` and torch agree on every figure).

    torch.cuda.mem_get_info()      -> mem_get_info(): free = total - OS - page cache - held (fault switches
                                       page_cache_gib, memory_held_gib; free_memory_gib still overrides)
    torch.cuda.get_arch_list()     -> get_arch_list(): the image's release.json cuda_arch_list
    torch.version.cuda             -> cuda_version(); torch.__version__ -> torch_version()
    the first CUDA kernel          -> check_kernels(): raises CUDA's error for an image without kernels for 12.1, or
                                       with PTX only from a CUDA newer than the driver (fault driver_version)
"""
import simcommon as sc


class AcceleratorError(RuntimeError):
    """torch.AcceleratorError (torch >= 2.8): CUDA errors from C10_CUDA_CHECK."""


def mem_get_info(device=None):
    return sc.mem_get_info()


def get_arch_list():
    return sc.cuda_arch_list()


def cuda_version():
    return sc.cuda_runtime()


def torch_version():
    return sc.torch_version()


def get_device_capability(device=None):
    return sc.GPU_CAPABILITY


def driver_too_old():
    """PyTorch's message when the driver's CUDA major is older than the runtime's (torch.cuda then has no device)."""
    return sc.cuda_init_error()


def check_kernels():
    """Raise what the first kernel launch raises on this host, if anything."""
    text = sc.cuda_kernel_error()
    if text:
        cls, _, message = text.partition(": ")
        raise (AcceleratorError if cls == "torch.AcceleratorError" else RuntimeError)(message.rstrip("\n"))
