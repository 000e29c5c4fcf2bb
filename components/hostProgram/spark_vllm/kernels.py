# kernels: does the image's vLLM carry its own kernels for the checkpoint's quantization on this GPU? Asked of that vLLM
# before launch. The GPU check (cuda.py) proves that PyTorch runs a kernel; vLLM's CUTLASS FP8 and NVFP4 kernels are
# compiled separately, and a build for sm_120a runs on 12.0 only, not on the Spark's 12.1 (components/knowledge/vllmKernels.ts
# derives which published images carry them; vllm-project/vllm#43367, #36835, #38484).
#
# What vLLM decides at load, in its own sources (PyPI sdists 0.10.1.1 … 0.33.0):
#   - VllmConfig._get_quantization_config (vllm/config/vllm.py; vllm/config/__init__.py in 0.10.1.1) refuses a method whose
#     QuantizationConfig.get_min_capability() is above the GPU's: "The quantization method {q} is not supported for the
#     current GPU. Minimum capability: {min}. Current capability: {cap}."
#   - vllm._custom_ops.cutlass_scaled_mm_supports_fp8 / _supports_block_fp8 (csrc/quantization/…/scaled_mm_entry.cu): from
#     the CUDA version vLLM was compiled with only (>= 12.0 on capability >= 90; block: >= 12.8 on >= 100), not from the
#     archs its kernels were built for. When they say yes, vLLM routes FP8 GEMMs to cutlass_scaled_mm (block FP8:
#     W8A8BlockFp8LinearOp / CutlassFp8BlockScaledMMKernel, first on 12.x; per-tensor FP8: after FlashInfer's where it is
#     installed, vllm/model_executor/kernels/linear/__init__.py _POSSIBLE_FP8_KERNELS from 0.17).
#   - vllm._custom_ops.cutlass_scaled_mm_supports_fp4 (csrc/quantization/fp4/nvfp4_scaled_mm_entry.cu): CUDA runtime >= 12.8
#     and capability >= 100 up to 0.19.0; from 0.20.0 also only where the SM100/SM120 NVFP4 kernel was compiled in. Every
#     NVFP4 GEMM path but Marlin quantizes activations with vLLM's own scaled_fp4_quant (nvfp4_utils.apply_nvfp4_linear),
#     built in the same list as the SM120 NVFP4 GEMM (CMakeLists.txt).
# So the answers are asked, and where vLLM would use its CUTLASS kernel, that kernel is run once on a tiny input: its
# failure is the failure the model would meet at its first forward pass, after loading.
import re

# The errors a kernel that is absent for this GPU raises: CUDA's (cudaErrorNoKernelImageForDevice), vLLM's dispatch
# (scaled_mm_entry.cu "No compiled cutlass_scaled_mm for a compute capability less than CUDA device capability: ";
# nvfp4_scaled_mm_entry.cu "No compiled nvfp4 mm kernel"; nvfp4_quant_entry.cu "No compiled nvfp4 quantization kernel"),
# the c2x fallback that takes int8 only (scaled_mm_c2x.cu TORCH_CHECK(a.dtype() == torch::kInt8)) and CUTLASS's status
# text for a kernel that cannot launch (cutlassGetStatusString(kErrorInternal) "Error Internal", via vLLM's CUTLASS_CHECK;
# vllm-project/vllm#43367 on a GB10).
KERNEL_MISSING = re.compile(r"no kernel image is available for execution on the device|No compiled cutlass_scaled_mm"
                            r"|No compiled nvfp4|a\.dtype\(\) == torch::kInt8|Error Internal")


def checkpoint_quantization(config):
    """The checkpoint's quantization from config.json: (vLLM method name, scheme) where scheme is one of fp8, fp8-block,
    nvfp4, or "other"; (None, None) when config.json has no quantization_config.
    fp8: weight_block_size makes it block FP8 (vllm/model_executor/layers/quantization/fp8.py Fp8Config.from_config).
    modelopt: quant_algo "FP8…" or "NVFP4" (modelopt.py; NVFP4 is vLLM's method modelopt_fp4).
    compressed-tensors: a config group with float weights and activations of 8 bits (fp8; strategy "block": fp8-block) or
    4 bits (nvfp4, W4A4) (compressed_tensors.py _is_fp8_w8a8 / _is_fp4a4_nvfp4)."""
    q = config.get("quantization_config")
    if not isinstance(q, dict):
        return None, None
    method = str(q.get("quant_method") or "").lower()
    if method == "fp8":
        return method, "fp8-block" if q.get("weight_block_size") else "fp8"
    if method in ("modelopt", "modelopt_fp4"):
        algo = str(q.get("quant_algo") or (q.get("quantization") or {}).get("quant_algo") or "").upper()
        if algo == "NVFP4" or method == "modelopt_fp4":
            return "modelopt_fp4", "nvfp4"
        return method, "fp8" if algo.startswith("FP8") else "other"
    if method == "compressed-tensors":
        for group in (q.get("config_groups") or {}).values():
            w, a = (group or {}).get("weights") or {}, (group or {}).get("input_activations") or {}
            if w.get("type") == "float" and a.get("type") == "float" and w.get("num_bits") == a.get("num_bits"):
                if w.get("num_bits") == 8:
                    return method, "fp8-block" if w.get("strategy") == "block" else "fp8"
                if w.get("num_bits") == 4:
                    return method, "nvfp4"
        return method, "other"
    return method or None, "other"


def kernel_verdict(model, method, scheme, vllm_version, capability, answers, images_carrying=()):
    """The pure decision. answers: what the image's vLLM said (None where it could not be asked): minCapability,
    supportsFp8, supportsBlockFp8, supportsFp4, flashinfer, and kernelRun {kernel, error} when its kernel was run.
    Returns (problem or None, [warnings])."""
    cap_int = int(capability.replace(".", ""))
    known = " (known to carry it: %s)" % ", ".join(images_carrying) if images_carrying else ""
    # Remedies that exist (cited in components/knowledge/imageKernels.ts NATIVE_12_1_BUILDS / FP8_TRITON_FALLBACK): a vLLM built for
    # 12.1 itself (eugr/spark-vllm-docker's Dockerfile: TORCH_CUDA_ARCH_LIST=12.1a on CUDA 13.0), NVIDIA's nvcr.io/nvidia/vllm
    # images (NVIDIA/dgx-spark-playbooks nvidia/vllm), or another quantization. VLLM_DISABLED_KERNELS is vLLM's own switch (vllm-project/vllm#43367),
    # which spark-vllm does not set: said as a fact, not a step.
    fix = ("Use an image whose vLLM carries the kernel for %s on compute capability %s%s, a vLLM built for %s itself "
           "(eugr/spark-vllm-docker builds it with TORCH_CUDA_ARCH_LIST=12.1a on CUDA 13.0) or NVIDIA's nvcr.io/nvidia/vllm "
           "images, which NVIDIA's DGX Spark playbook runs, or a checkpoint of another quantization (BF16)"
           % (scheme, capability, known, capability))
    if scheme == "fp8-block":
        fix += ("; vLLM itself (0.20.0 and later) skips that kernel under VLLM_DISABLED_KERNELS=CutlassFp8BlockScaledMMKernel "
                "and uses its Triton kernel (vllm-project/vllm#43367), which spark-vllm has no setting for")
    min_cap = answers.get("minCapability")
    if min_cap is not None and cap_int < min_cap:
        return ("%s is quantized with %s, which vLLM %s in this image refuses on this GPU: minimum capability %d, this GPU "
                "%d (QuantizationConfig.get_min_capability()). %s" % (model, method, vllm_version, min_cap, cap_int, fix)), []
    run = answers.get("kernelRun") or {}
    if not run.get("error"):
        return None, []
    query, answer = {"fp8": ("cutlass_scaled_mm_supports_fp8", "supportsFp8"),
                     "fp8-block": ("cutlass_scaled_mm_supports_block_fp8", "supportsBlockFp8"),
                     "nvfp4": ("cutlass_scaled_mm_supports_fp4", "supportsFp4")}[scheme]
    said = ("%s is %s (quant_method %s). vLLM %s in this image answers %s(%d) = %s and uses its own %s, which fails on "
            "this GPU (compute capability %s): %s" % (model, scheme, method, vllm_version, query, cap_int, answers.get(answer),
                                                      run["kernel"], capability, first_line(run["error"])))
    if not KERNEL_MISSING.search(run["error"]):
        return None, ["%s is %s, and running vLLM's %s here once failed for a reason that is not a missing kernel: %s"
                      % (model, scheme, run["kernel"], first_line(run["error"]))]
    if scheme == "fp8-block" or (scheme == "nvfp4" and (answers.get("supportsFp4") or answers.get("flashinfer"))):
        return "%s. The model would fail at its first forward pass, after loading. %s" % (said, fix), []
    why = ("vLLM tries FlashInfer's FP8 GEMM first where FlashInfer is installed" if scheme == "fp8"
           else "vLLM falls back to its Marlin NVFP4 kernel where neither FlashInfer nor this kernel is available")
    return None, ["%s; %s, so the model may still load. %s" % (said, why, fix)]


def first_line(text):
    return str(text).strip().split("\n")[0][:400]


def ask_vllm(torch, capability, method, scheme):
    """The thin call: vLLM's own answers for this GPU (each only where the image's vLLM has the function) and, where
    vLLM would use its CUTLASS kernel for the scheme, one run of that kernel on a tiny input."""
    cap_int = int(capability.replace(".", ""))
    answers = {}
    try:
        from vllm.model_executor.layers.quantization import get_quantization_config
        answers["minCapability"] = int(get_quantization_config(method).get_min_capability())
    except Exception:  # noqa: BLE001 - an unknown method name or an older layout: not asked
        answers["minCapability"] = None
    try:
        from vllm import _custom_ops as ops
    except Exception as e:  # noqa: BLE001 - no compiled vLLM ops: nothing more can be asked
        answers["opsError"] = "%s: %s" % (type(e).__name__, e)
        return answers
    for key, name in (("supportsFp8", "cutlass_scaled_mm_supports_fp8"), ("supportsBlockFp8", "cutlass_scaled_mm_supports_block_fp8"),
                      ("supportsFp4", "cutlass_scaled_mm_supports_fp4")):
        fn = getattr(ops, name, None)
        try:
            answers[key] = bool(fn(cap_int)) if fn else None
        except Exception:  # noqa: BLE001 - an op that exists in Python but not in the compiled library
            answers[key] = None
    try:
        from vllm.utils.flashinfer import has_flashinfer
        answers["flashinfer"] = bool(has_flashinfer())
    except Exception:  # noqa: BLE001
        answers["flashinfer"] = None
    if scheme == "fp8-block" and answers.get("supportsBlockFp8"):
        answers["kernelRun"] = run_kernel(torch, "CUTLASS block FP8 GEMM (vllm._custom_ops.cutlass_scaled_mm, block scales)",
                                          lambda: fp8_block_gemm(torch, ops))
    elif scheme == "fp8" and answers.get("supportsFp8"):
        answers["kernelRun"] = run_kernel(torch, "CUTLASS FP8 GEMM (vllm._custom_ops.cutlass_scaled_mm)", lambda: fp8_gemm(torch, ops))
    elif scheme == "nvfp4" and hasattr(ops, "scaled_fp4_quant"):
        answers["kernelRun"] = run_kernel(torch, "NVFP4 quantization kernel (vllm._custom_ops.scaled_fp4_quant)", lambda: fp4_quant(torch, ops))
    return answers


def fp8_gemm(torch, ops):
    """One 16×128×128 FP8 GEMM, B column-major as cutlass_scaled_mm requires (scaled_mm_entry.cu conformality checks:
    a.stride(1) == 1, b.stride(0) == 1, b.stride(1) % 16 == 0; its Python wrapper sends B with a dimension not a multiple
    of 16 to Triton instead); per-tensor scales. Measured with real PyTorch 2.11.0+cu130 on an H200: a is float8_e4m3fn (16, 128) stride
    (128, 1), b float8_e4m3fn (128, 128) stride (1, 128), and torch._scaled_mm of the two gives 128.0 everywhere."""
    a = torch.ones(16, 128, dtype=torch.bfloat16, device="cuda").to(torch.float8_e4m3fn)
    b = torch.ones(128, 128, dtype=torch.bfloat16, device="cuda").to(torch.float8_e4m3fn).t()
    scale = torch.ones(1, dtype=torch.float32, device="cuda")
    return ops.cutlass_scaled_mm(a, b, scale, scale, torch.bfloat16)


def fp8_block_gemm(torch, ops):
    """The block-scaled FP8 GEMM vLLM runs for a block-FP8 checkpoint, as vllm-project/vllm#43367's reproducer calls it on a
    GB10 (fails with "Error Internal" in a 120a build, passes in a 12.1 one): m, n, k = 1, 16384, 5120, B transposed,
    scale_a (m, k/128), scale_b (k/128, n/128). It is not the per-tensor kernel's twin: the two are wrapped in different
    device guards (components/knowledge/vllmKernels.ts [sm120-guard]), and scaled_mm_helper.hpp dispatches to the blockwise one only
    when the scales are neither per-tensor nor per-token/channel (numel 1, m or n), which these are."""
    m, n, k = 1, 16384, 5120
    a = torch.ones(m, k, dtype=torch.bfloat16, device="cuda").to(torch.float8_e4m3fn)
    b = torch.ones(n, k, dtype=torch.bfloat16, device="cuda").to(torch.float8_e4m3fn).t()
    scale_a = torch.ones(m, k // 128, dtype=torch.float32, device="cuda")
    scale_b = torch.ones(k // 128, n // 128, dtype=torch.float32, device="cuda")
    return ops.cutlass_scaled_mm(a, b, scale_a, scale_b, torch.bfloat16)


def fp4_quant(torch, ops):
    """One 16×128 activation quantized to NVFP4 (last dimension a multiple of the block size 16, _custom_ops.scaled_fp4_quant)."""
    return ops.scaled_fp4_quant(torch.ones(16, 128, dtype=torch.bfloat16, device="cuda"), torch.ones(1, dtype=torch.float32, device="cuda"))


def run_kernel(torch, kernel, call):
    """Runs `call`, then one PyTorch kernel and a synchronize, so a launch error the op did not check surfaces here."""
    try:
        call()
        after = torch.ones(1, device="cuda")
        after.add_(1)
        torch.cuda.synchronize()
        return {"kernel": kernel, "error": None}
    except Exception as e:  # noqa: BLE001 - the error text is the fact
        return {"kernel": kernel, "error": "%s: %s" % (type(e).__name__, e)}


def quantization_check(model, config, vllm_version, capability, images_carrying):
    """compat's call: (problem or None, warnings, facts for the JSON line). images_carrying: quantization → known images
    whose vLLM carries its kernel on the Spark (components/knowledge/imageKernels.ts, via data())."""
    method, scheme = checkpoint_quantization(config)
    facts = {"method": method, "scheme": scheme, "checked": False}
    if not method or scheme == "other" or not capability:
        return None, [], facts
    try:
        import torch
    except ImportError:
        return None, [], facts
    answers = ask_vllm(torch, capability, method, scheme)
    problem, warnings = kernel_verdict(model, method, scheme, vllm_version, capability, answers,
                                       images_carrying.get("fp8" if scheme.startswith("fp8") else scheme, []))
    facts.update(checked=True, capability=capability, answers=answers)
    return problem, warnings, facts
