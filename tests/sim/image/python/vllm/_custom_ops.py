"""Stand-in for vllm._custom_ops: the capability queries and the two kernels the compat check runs
(components/hostProgram/spark_vllm/kernels.py), answering as vLLM's C++ does for the compiled arch sets of this image
(simcommon.vllm_kernels(): release.json vllm_kernels) on the simulated GB10 (12.1). Sources, vLLM 0.10.1.1-0.33.0:

- cutlass_scaled_mm_supports_fp8 / _block_fp8: csrc/quantization/w8a8/cutlass/scaled_mm_entry.cu (cutlass_w8a8/ in
  0.10.1.1, libtorch_stable/ in 0.20-0.31): the CUDA version vLLM was compiled with only, never the archs.
- cutlass_scaled_mm_supports_fp4: csrc/quantization/fp4/nvfp4_scaled_mm_entry.cu: CUDA runtime >= 12.8 and
  capability >= 100 before 0.20.0; from 0.20.0 also ENABLE_NVFP4_SM100 (100 <= cap < 120) / _SM120 (120 <= cap < 130).
- cutlass_scaled_mm: scaled_mm_entry.cu dispatch: the SM120 kernels for capability >= 120 when built (CUTLASS_CHECK of a
  kernel that cannot launch: "Error Internal", cutlassGetStatusString(kErrorInternal)), else down to the c2x kernels,
  whose sm80 path checks TORCH_CHECK(a.dtype() == torch::kInt8) (scaled_mm_c2x.cu).
- The SM120 FP8 GEMMs' device guards (components/knowledge/vllmKernels.ts [sm120-guard]): a kernel wrapped in enable_sm120_only
  traps in a cubin not compiled for exactly 12.0 (a sm_121/sm_121a one, which a 12.1 GPU loads when the build has it):
  the block GEMM up to 0.14.0, the per-tensor one from 0.17.1 to 0.20.1 (read 0.10.1.1-0.33.0; unread releases take the
  nearest older reading). The trap is a device-side `trap` after printf, so the launch fails as cudaErrorLaunchFailure
  "unspecified launch failure" (eugr/spark-vllm-docker#143). Blockwise vs per-tensor as scaled_mm_helper.hpp
  dispatches, simplified to what the stand-in's shapeless tensors allow: scales of one element each are per-tensor.
- scaled_fp4_quant: csrc/quantization/fp4/nvfp4_quant_entry.cu: the kernel built with the SM100 or SM120 NVFP4 lists,
  else TORCH_CHECK_NOT_IMPLEMENTED "No compiled nvfp4 quantization kernel"; a build with neither target runnable here
  fails its launch: cudaErrorNoKernelImageForDevice.
"""
import simcommon as _sc
import torch

_TORCH_CHECK = "Expected %s to be true, but got false.  (Could this error message be improved?  If so, please report an enhancement request to PyTorch.)"


def _cuda():
    return _sc._ver(_sc.vllm_kernels().get("cuda") or _sc.cuda_runtime())


def _vllm():
    return _sc._ver(_sc.release().get("version", "0.0.0"), 3)


def cutlass_scaled_mm_supports_fp8(cuda_device_capability):
    if cuda_device_capability >= 90:
        return _cuda() >= (12, 0)
    if cuda_device_capability >= 89:
        return _cuda() >= (12, 4)
    return False


def cutlass_scaled_mm_supports_block_fp8(cuda_device_capability):
    if cuda_device_capability >= 100:
        return _cuda() >= (12, 8)
    if cuda_device_capability >= 90:
        return _cuda() >= (12, 0)
    return False


def cutlass_scaled_mm_supports_fp4(cuda_device_capability):
    if _cuda() < (12, 8):
        return False
    if _vllm() < (0, 20, 0):
        return cuda_device_capability >= 100
    k = _sc.vllm_kernels()
    return bool((k.get("nvfp4_sm100") and 100 <= cuda_device_capability < 120)
                or (k.get("nvfp4_sm120") and 120 <= cuda_device_capability < 130))


def _version_num():
    major, minor = _sc.GPU_CAPABILITY
    return major * 10 + minor


def cutlass_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias=None):
    assert out_dtype is torch.bfloat16 or out_dtype is torch.float16
    sm120 = _sc.vllm_kernels().get("scaled_mm_sm120") or []
    if sm120 and _version_num() >= 120:
        if not _sc._runs_on(sm120):
            raise RuntimeError("Error Internal")
        blockwise = not (scale_a.numel() == 1 and scale_b.numel() == 1)
        if _loaded_cubin_minor(sm120) != 0 and _guarded_to_exactly_120(blockwise):
            _raise_cuda_error("unspecified launch failure", "cudaErrorLaunchFailure")
        return torch.empty(1, dtype=out_dtype, device=a.device)
    if _version_num() >= 75:
        raise RuntimeError(_TORCH_CHECK % "a.dtype() == torch::kInt8")
    raise NotImplementedError("No compiled cutlass_scaled_mm for a compute capability less than CUDA device capability: %d"
                              % _version_num())


def _loaded_cubin_minor(targets):
    """The minor of the SASS target the driver loads on this GPU: the highest runnable one (an exact sm_121* first)."""
    major, minor = _sc.GPU_CAPABILITY
    runnable = [m for k, M, m, v in (x for x in (_sc._arch(t) for t in targets) if x)
                if k == "sass" and M == major and (m == minor if v == "a" else m <= minor)]
    return max(runnable) if runnable else None


def _guarded_to_exactly_120(blockwise):
    v = _vllm()
    return v < (0, 17, 0) if blockwise else (0, 17, 0) <= v < (0, 31, 0)


def _raise_cuda_error(message, name):
    text = _sc.cuda_error_text(message, name)
    cls, _, message = text.partition(": ")
    raise (torch.AcceleratorError if cls == "torch.AcceleratorError" else RuntimeError)(message.rstrip("\n"))


def scaled_fp4_quant(input, input_global_scale, *args, **kwargs):
    k = _sc.vllm_kernels()
    built = (k.get("nvfp4_sm100") or []) + (k.get("nvfp4_sm120") or [])
    if not built:
        raise NotImplementedError("No compiled nvfp4 quantization kernel")
    if not _sc._runs_on(built):
        _raise_cuda_error("no kernel image is available for execution on the device", "cudaErrorNoKernelImageForDevice")
    return torch.empty(1, dtype=torch.uint8, device=input.device), torch.empty(1, dtype=torch.float8_e4m3fn, device=input.device)
