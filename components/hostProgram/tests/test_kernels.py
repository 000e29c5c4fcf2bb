import sys
import types
import unittest
from unittest import mock

from spark_vllm.kernels import ask_vllm, checkpoint_quantization, kernel_verdict, quantization_check

QWEN = "Qwen/Qwen3.5-122B-A10B-FP8"
# Qwen/Qwen3.5-122B-A10B-FP8's quantization_config (as the sim model, tests/sim/models.ts, copies it)
BLOCK_FP8 = {"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}}
# CUTLASS's status text for a kernel that cannot launch, through vLLM's CUTLASS_CHECK (vllm-project/vllm#43367 on a GB10)
CUTLASS_FAILED = "RuntimeError: Error Internal"
NO_IMAGE = "AcceleratorError: CUDA error: no kernel image is available for execution on the device"


class CheckpointQuantization(unittest.TestCase):
    def test_fp8_with_blocks_is_block_fp8_and_without_is_per_tensor(self):
        self.assertEqual(checkpoint_quantization(BLOCK_FP8), ("fp8", "fp8-block"))
        self.assertEqual(checkpoint_quantization({"quantization_config": {"quant_method": "fp8", "activation_scheme": "static"}}), ("fp8", "fp8"))

    def test_modelopt_fp8_and_nvfp4(self):
        # nvidia/Llama-3.3-70B-Instruct-FP8 / nvidia/Llama-3.1-405B-Instruct-FP4 style configs
        self.assertEqual(checkpoint_quantization({"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}}), ("modelopt", "fp8"))
        self.assertEqual(checkpoint_quantization({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}), ("modelopt_fp4", "nvfp4"))
        self.assertEqual(checkpoint_quantization({"quantization_config": {"quant_method": "modelopt", "quantization": {"quant_algo": "NVFP4"}}}),
                         ("modelopt_fp4", "nvfp4"))

    def test_compressed_tensors_schemes_from_the_config_groups(self):
        def ct(weights, acts):
            return {"quantization_config": {"quant_method": "compressed-tensors",
                                            "config_groups": {"group_0": {"weights": weights, "input_activations": acts}}}}
        fp8 = {"type": "float", "num_bits": 8, "strategy": "channel"}
        self.assertEqual(checkpoint_quantization(ct(fp8, {"type": "float", "num_bits": 8})), ("compressed-tensors", "fp8"))
        self.assertEqual(checkpoint_quantization(ct(dict(fp8, strategy="block"), {"type": "float", "num_bits": 8})), ("compressed-tensors", "fp8-block"))
        self.assertEqual(checkpoint_quantization(ct({"type": "float", "num_bits": 4, "group_size": 16}, {"type": "float", "num_bits": 4})),
                         ("compressed-tensors", "nvfp4"))
        self.assertEqual(checkpoint_quantization(ct({"type": "int", "num_bits": 4}, None)), ("compressed-tensors", "other"))

    def test_other_methods_and_unquantized_models(self):
        self.assertEqual(checkpoint_quantization({"quantization_config": {"quant_method": "mxfp4"}}), ("mxfp4", "other"))
        self.assertEqual(checkpoint_quantization({"quantization_config": {"quant_method": "gptq", "bits": 4}}), ("gptq", "other"))
        self.assertEqual(checkpoint_quantization({"architectures": ["LlamaForCausalLM"]}), (None, None))


class KernelVerdict(unittest.TestCase):
    def verdict(self, scheme, answers, method="fp8", carrying=("vllm/vllm-openai:v0.33.0",)):
        return kernel_verdict(QWEN, method, scheme, "0.17.1", "12.1", answers, list(carrying))

    def test_block_fp8_whose_cutlass_kernel_fails_is_refused_with_everything_named(self):
        problem, warnings = self.verdict("fp8-block", {"supportsBlockFp8": True, "kernelRun": {"kernel": "CUTLASS FP8 GEMM", "error": CUTLASS_FAILED}})
        self.assertEqual(warnings, [])
        for part in (QWEN, "fp8-block", "quant_method fp8", "vLLM 0.17.1 in this image", "cutlass_scaled_mm_supports_block_fp8(121) = True",
                     "CUTLASS FP8 GEMM", "compute capability 12.1", "Error Internal", "first forward pass",
                     "known to carry it: vllm/vllm-openai:v0.33.0", "a checkpoint of another quantization"):
            self.assertIn(part, problem)
        # remedies that exist: a 12.1-native build, BF16, and vLLM's own switch said as a fact spark-vllm cannot set
        for part in ("a vLLM built for 12.1 itself", "TORCH_CUDA_ARCH_LIST=12.1a", "eugr/spark-vllm-docker", "nvcr.io/nvidia/vllm",
                     "(BF16)", "VLLM_DISABLED_KERNELS=CutlassFp8BlockScaledMMKernel", "0.20.0 and later", "spark-vllm has no setting for"):
            self.assertIn(part, problem)

    def test_the_triton_switch_is_named_for_block_fp8_only(self):
        run = {"kernel": "NVFP4 quantization kernel", "error": NO_IMAGE}
        problem, _ = self.verdict("nvfp4", {"supportsFp4": True, "kernelRun": run}, method="modelopt_fp4")
        self.assertIn("a vLLM built for 12.1 itself", problem)
        self.assertNotIn("VLLM_DISABLED_KERNELS", problem, "the switch is about the block-FP8 kernel class")

    def test_a_kernel_that_runs_or_was_not_run_passes(self):
        self.assertEqual(self.verdict("fp8-block", {"supportsBlockFp8": True, "kernelRun": {"kernel": "k", "error": None}}), (None, []))
        # vLLM says no: it uses Triton for block FP8 and never calls the CUTLASS kernel
        self.assertEqual(self.verdict("fp8-block", {"supportsBlockFp8": False}), (None, []))

    def test_per_tensor_fp8_is_a_warning_since_flashinfer_may_come_first(self):
        problem, warnings = self.verdict("fp8", {"supportsFp8": True, "kernelRun": {"kernel": "CUTLASS FP8 GEMM", "error": CUTLASS_FAILED}})
        self.assertIsNone(problem)
        self.assertEqual(len(warnings), 1)
        self.assertIn("cutlass_scaled_mm_supports_fp8(121) = True", warnings[0])
        self.assertIn("FlashInfer's FP8 GEMM first", warnings[0])

    def test_nvfp4_is_refused_when_vllm_uses_its_own_quantization_kernel_and_warned_when_marlin_remains(self):
        run = {"kernel": "NVFP4 quantization kernel", "error": NO_IMAGE}
        problem, _ = self.verdict("nvfp4", {"supportsFp4": True, "flashinfer": False, "kernelRun": run}, method="modelopt_fp4")
        self.assertIn("cutlass_scaled_mm_supports_fp4(121) = True", problem)
        self.assertIn("no kernel image is available", problem)
        problem, _ = self.verdict("nvfp4", {"supportsFp4": False, "flashinfer": True, "kernelRun": run}, method="modelopt_fp4")
        self.assertIsNotNone(problem, "FlashInfer's CUTLASS NVFP4 GEMM quantizes activations with vLLM's kernel too")
        problem, warnings = self.verdict("nvfp4", {"supportsFp4": False, "flashinfer": False, "kernelRun": run}, method="modelopt_fp4")
        self.assertIsNone(problem)
        self.assertIn("Marlin", warnings[0])

    def test_an_error_that_is_not_a_missing_kernel_is_only_a_warning(self):
        problem, warnings = self.verdict("fp8-block", {"supportsBlockFp8": True, "kernelRun": {"kernel": "k", "error": "RuntimeError: CUDA out of memory"}})
        self.assertIsNone(problem)
        self.assertIn("not a missing kernel: RuntimeError: CUDA out of memory", warnings[0])

    def test_vllms_minimum_capability_refuses_first(self):
        problem, _ = kernel_verdict("m", "modelopt", "fp8", "0.17.1", "8.6", {"minCapability": 89}, [])
        self.assertIn("modelopt, which vLLM 0.17.1 in this image refuses on this GPU: minimum capability 89, this GPU 86", problem)
        self.assertEqual(kernel_verdict("m", "modelopt", "fp8", "0.17.1", "12.1", {"minCapability": 89}, []), (None, []))

    def test_the_missing_kernel_texts_of_vllm_and_cuda_are_recognized(self):
        for text in ("NotImplementedError: No compiled cutlass_scaled_mm for a compute capability less than CUDA device capability: 121",
                     "RuntimeError: Expected a.dtype() == torch::kInt8 to be true, but got false.  (Could this error message be improved?  "
                     "If so, please report an enhancement request to PyTorch.)",
                     "NotImplementedError: No compiled nvfp4 quantization kernel", NO_IMAGE, CUTLASS_FAILED):
            problem, _ = self.verdict("fp8-block", {"supportsBlockFp8": True, "kernelRun": {"kernel": "k", "error": text}})
            self.assertIsNotNone(problem, text)


class FakeTensor:
    def __init__(self, log):
        self.log = log

    def to(self, dtype):
        self.log.append(("to", dtype))
        return self

    def t(self):
        return self

    def add_(self, value):
        return self


def fake_torch(log):
    torch = types.ModuleType("torch")
    torch.bfloat16, torch.float32, torch.float8_e4m3fn = "bf16", "f32", "fp8"
    torch.ones = lambda *size, dtype=None, device=None: log.append(("ones", size, dtype, device)) or FakeTensor(log)
    torch.cuda = types.SimpleNamespace(synchronize=lambda: log.append("sync"))
    return torch


def fake_vllm_ops(supports_fp8=True, supports_block=True, gemm_error=None, min_capability=75, missing=()):
    """sys.modules for vllm._custom_ops and the quantization registry, as the image's vLLM would have them."""
    calls = []
    ops = types.ModuleType("vllm._custom_ops")
    queries = {"cutlass_scaled_mm_supports_fp8": supports_fp8, "cutlass_scaled_mm_supports_block_fp8": supports_block,
               "cutlass_scaled_mm_supports_fp4": False}
    for name, answer in queries.items():
        if name not in missing:
            setattr(ops, name, lambda cap, name=name, answer=answer: calls.append((name, cap)) or answer)

    def cutlass_scaled_mm(a, b, sa, sb, out_dtype):
        calls.append(("cutlass_scaled_mm", out_dtype))
        if gemm_error:
            raise RuntimeError(gemm_error)
    ops.cutlass_scaled_mm = cutlass_scaled_mm
    vllm = types.ModuleType("vllm")
    vllm.__path__ = []
    vllm._custom_ops = ops
    quant = types.ModuleType("vllm.model_executor.layers.quantization")
    quant.get_quantization_config = lambda m: types.SimpleNamespace(get_min_capability=lambda: min_capability)
    mods = {"vllm": vllm, "vllm._custom_ops": ops, "vllm.model_executor.layers.quantization": quant,
            "vllm.utils.flashinfer": None}
    for name in ("vllm.model_executor", "vllm.model_executor.layers"):
        mods[name] = types.ModuleType(name)
        mods[name].__path__ = []
    return mods, calls


class AskVllm(unittest.TestCase):
    def test_asks_the_queries_with_the_capability_as_vllm_does_and_runs_the_gemm_only_when_cutlass_is_chosen(self):
        log = []
        mods, calls = fake_vllm_ops(gemm_error="Error Internal")
        with mock.patch.dict(sys.modules, mods):
            answers = ask_vllm(fake_torch(log), "12.1", "fp8", "fp8-block")
        self.assertIn(("cutlass_scaled_mm_supports_block_fp8", 121), calls)
        self.assertIn(("cutlass_scaled_mm", "bf16"), calls)
        self.assertEqual((answers["minCapability"], answers["supportsBlockFp8"], answers["flashinfer"]), (75, True, None))
        self.assertEqual(answers["kernelRun"]["error"], "RuntimeError: Error Internal")
        # block FP8 runs the block-scaled GEMM as vllm-project/vllm#43367's GB10 reproducer does: scales (m, k/128), (k/128, n/128)
        for shape in ((1, 5120), (16384, 5120)):
            self.assertIn(("ones", shape, "bf16", "cuda"), log, shape)
        for shape in ((1, 40), (40, 128)):
            self.assertIn(("ones", shape, "f32", "cuda"), log, shape)
        self.assertIn("block scales", answers["kernelRun"]["kernel"])
        # per-tensor FP8 runs the per-tensor GEMM: B 128×128 (cutlass_scaled_mm needs 16-aligned B), scales of one element
        log = []
        mods, calls = fake_vllm_ops()
        with mock.patch.dict(sys.modules, mods):
            answers = ask_vllm(fake_torch(log), "12.1", "fp8", "fp8")
        self.assertIn(("cutlass_scaled_mm_supports_fp8", 121), calls)
        self.assertIn(("ones", (128, 128), "bf16", "cuda"), log)
        self.assertIn(("ones", (1,), "f32", "cuda"), log)
        self.assertNotIn(("ones", (16384, 5120), "bf16", "cuda"), log)
        self.assertEqual(answers["kernelRun"], {"kernel": "CUTLASS FP8 GEMM (vllm._custom_ops.cutlass_scaled_mm)", "error": None})
        # vLLM answers no: it picks Triton, so its CUTLASS kernel is not run
        mods, calls = fake_vllm_ops(supports_block=False)
        with mock.patch.dict(sys.modules, mods):
            answers = ask_vllm(fake_torch([]), "12.1", "fp8", "fp8-block")
        self.assertNotIn("kernelRun", answers)
        self.assertFalse(any(c[0] == "cutlass_scaled_mm" for c in calls))

    def test_a_vllm_without_a_query_or_without_compiled_ops_is_asked_nothing_more(self):
        mods, _ = fake_vllm_ops(missing=("cutlass_scaled_mm_supports_fp4",))
        with mock.patch.dict(sys.modules, mods):
            self.assertIsNone(ask_vllm(fake_torch([]), "12.1", "fp8", "fp8")["supportsFp4"])
        mods["vllm._custom_ops"] = None  # `import vllm._custom_ops` raises ImportError, as without vLLM's compiled library
        del mods["vllm"]._custom_ops
        with mock.patch.dict(sys.modules, mods):
            answers = ask_vllm(fake_torch([]), "12.1", "fp8", "fp8")
        self.assertIn("opsError", answers)
        self.assertNotIn("kernelRun", answers)

    def test_quantization_check_reports_what_it_checked(self):
        mods, _ = fake_vllm_ops(gemm_error="Error Internal")
        mods["torch"] = fake_torch([])
        with mock.patch.dict(sys.modules, mods):
            problem, warnings, facts = quantization_check(QWEN, BLOCK_FP8, "0.17.1", "12.1", {"fp8": ["vllm/vllm-openai:v0.33.0"]})
        self.assertIn("known to carry it: vllm/vllm-openai:v0.33.0", problem)
        self.assertEqual((facts["method"], facts["scheme"], facts["checked"], facts["answers"]["supportsBlockFp8"]), ("fp8", "fp8-block", True, True))
        self.assertEqual(quantization_check(QWEN, {}, "0.17.1", "12.1", {}), (None, [], {"method": None, "scheme": None, "checked": False}))


if __name__ == "__main__":
    unittest.main()
