# CUDA facts of the image, read inside the container: does its PyTorch have kernels for this GPU, and does the
# host's driver run its CUDA runtime? The rules mirror components/knowledge/images.ts (cudaKernelsRunOn), which cites
# them; tests/unit/knowledge/images.test.ts cross-checks the two on the same cases.
import re


def parse_target(target):
    """sm_121 / sm_90a / sm_120f (SASS) and compute_90 (PTX) as (kind, major, minor, variant); None otherwise."""
    m = re.match(r"^(sm|compute)_(\d+)(\d)([af]?)$", target.strip().lower())
    if not m:
        return None
    return ("sass" if m.group(1) == "sm" else "ptx", int(m.group(2)), int(m.group(3)), m.group(4))


def kernels_run_on(arch_list, capability):
    """CUDA's binary-compatibility rule: SASS sm_XY runs on X.y for y >= Y (sm_XYa only on X.Y); PTX
    compute_XY is JIT-compiled for any capability >= X.Y. Returns (runs, target, reason)."""
    major, minor = capability
    targets = [(t, parse_target(t)) for t in arch_list]
    targets = [(raw, p) for raw, p in targets if p]
    sass = sorted([(p[2], raw) for raw, p in targets if p[0] == "sass" and p[1] == major
                   and (p[2] == minor if p[3] == "a" else p[2] <= minor)], reverse=True)
    if sass:
        return True, sass[0][1], "%s SASS runs on %d.%d" % (sass[0][1], major, minor)
    ptx = sorted([(p[1], p[2], raw) for raw, p in targets if p[0] == "ptx"
                  and ((p[1], p[2]) == (major, minor) if p[3] == "a" else (p[1], p[2]) <= (major, minor))], reverse=True)
    if ptx:
        return True, ptx[0][2], "no SASS for %d.%d; %s PTX is JIT-compiled by the driver" % (major, minor, ptx[0][2])
    return False, None, "no kernels for compute capability %d.%d: the image has %s" % (
        major, minor, " ".join(arch_list) or "(none)")


# Real PyTorch's words when the driver cannot run the image's CUDA runtime (torch/cuda/__init__.py, _check_driver:
# "The NVIDIA driver on your system is too old (found version %d)") and CUDA's for a missing kernel
# (cudaErrorNoKernelImageForDevice: "no kernel image is available for execution on the device"); a runtime newer than
# the driver's major: cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version"
# (CUDA Runtime API, cudaGetErrorString).
# A runtime newer than the driver within one major runs under minor-version compatibility, but its PTX cannot be
# JIT-compiled (CUDA Compatibility guide: cudaErrorUnsupportedPtxVersion, "the provided PTX was compiled with an
# unsupported toolchain.").
DRIVER_TOO_OLD = re.compile(r"driver on your system is too old|CUDA driver version is insufficient for CUDA runtime version"
                            r"|the provided PTX was compiled with an unsupported toolchain")
NO_KERNEL = re.compile(r"no kernel image is available for execution on the device")


def probe_gpu(torch):
    """Reads the image's CUDA build and runs one tiny kernel on device 0. Returns (facts, error text or None)."""
    facts = {"torch": getattr(torch, "__version__", None), "cuda": getattr(torch.version, "cuda", None)}
    try:
        facts["archList"] = list(torch.cuda.get_arch_list())
        facts["capability"] = "%d.%d" % tuple(torch.cuda.get_device_capability(0))
        x = torch.ones(8, device="cuda")
        x.add_(1)
        torch.cuda.synchronize()
    except Exception as e:  # the error text is the fact: driver too old, no kernel image, no GPU
        return facts, "%s: %s" % (type(e).__name__, e)
    return facts, None
