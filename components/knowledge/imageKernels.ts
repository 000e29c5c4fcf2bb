// Which known images carry vLLM's own CUTLASS kernels for a quantization on a GB10, and the plan-time problem when the
// stack's model needs one its image lacks. Pure: the known-images table (images.ts) × vLLM's CMake rules (vllmKernels.ts).
import { Quantization } from "./catalog";
import { GB10_CAPABILITY, ImageProblem, KNOWN_IMAGES, KnownImage } from "./images";
import { KERNEL_QUANTIZATIONS, KernelCarry, KernelQuantization, vllmKernelRuns } from "./vllmKernels";

const isKernelQuantization = (q: Quantization): q is KernelQuantization => (KERNEL_QUANTIZATIONS as readonly string[]).includes(q);

/** vLLM's CUTLASS kernel for `quantization` in a known image, on `capability`; undefined when the row has no build facts. */
export function imageKernelFor(image: KnownImage, quantization: KernelQuantization, capability = GB10_CAPABILITY): KernelCarry | undefined {
    if (!image.vllm || !image.vllmBuild) return undefined;
    return vllmKernelRuns({ vllm: image.vllm, ...image.vllmBuild }, quantization, capability);
}

/** Per known image, which kernel-dependent quantizations run on `capability` (true/false; absent: not known). */
export function imageQuantizationKernels(image: KnownImage, capability = GB10_CAPABILITY): Partial<Record<KernelQuantization, boolean>> {
    const out: Partial<Record<KernelQuantization, boolean>> = {};
    for (const q of KERNEL_QUANTIZATIONS) {
        const k = imageKernelFor(image, q, capability);
        if (k?.runs !== undefined) out[q] = k.runs;
    }
    return out;
}

/** Known images whose vLLM carries the kernel for `quantization` on `capability`, newest vLLM first. */
export function imagesCarrying(quantization: KernelQuantization, capability = GB10_CAPABILITY): string[] {
    return KNOWN_IMAGES.filter(i => imageKernelFor(i, quantization, capability)?.runs === true).map(i => i.reference).reverse();
}

/**
 * The image problem of serving a `quantization` model on this image: a warning, since the catalog does not say whether
 * an FP8 checkpoint is block-quantized, vLLM may pick another kernel (FlashInfer's FP8 GEMM; Marlin for NVFP4), and the
 * compatibility check on the head asks the image's vLLM and runs the kernel itself before launch
 * (components/hostProgram/spark_vllm/kernels.py, which refuses). undefined when nothing is known to be wrong.
 */
export function quantizationKernelProblem(image: KnownImage, quantization: Quantization, model: string, capability = GB10_CAPABILITY): ImageProblem | undefined {
    if (!isKernelQuantization(quantization)) return undefined;
    const k = imageKernelFor(image, quantization, capability);
    if (k?.runs !== false) return undefined;
    const carrying = imagesCarrying(quantization, capability);
    return {
        kind: "quantization-kernel", severity: "warning",
        message: `${model} is ${quantization}, but ${image.reference}: ${k.reason}. ${quantization === "fp8"
            ? "vLLM runs block-quantized FP8 checkpoints through that kernel (and per-tensor FP8 where FlashInfer is absent)"
            : "vLLM quantizes NVFP4 activations with its own kernel from that build for its CUTLASS and FlashInfer-CUTLASS GEMMs (only its Marlin fallback avoids it)"}, and the model then fails at its first forward pass, after loading` +
            `. Remediation: use an image that carries it (${carrying.join(", ") || "none in components/knowledge/images.ts"}) or ${NATIVE_12_1_BUILDS}, ` +
            `or a checkpoint of another quantization (BF16)${quantization === "fp8" ? `; ${FP8_TRITON_FALLBACK}` : ""}; \`up\` runs the kernel on the head before launch (compat)`,
    };
}

/**
 * Builds of vLLM for the GB10's 12.1 itself. eugr/spark-vllm-docker Dockerfile: CUDA 13.0.2 base, TORCH_CUDA_ARCH_LIST="12.1a"
 * for vLLM and FlashInfer; it replaces enable_sm120_only by enable_sm120_family where the release has it
 * (eugr/spark-vllm-docker#143). NVIDIA's vLLM container for the Spark: nvcr.io/nvidia/vllm, which NVIDIA's DGX Spark
 * playbook runs (NVIDIA/dgx-spark-playbooks nvidia/vllm/README.md); pypi dgx-spark-vllm calls the 25.09 one's environment
 * a "Pre-built vLLM environment for NVIDIA DGX Spark (GB10, sm_121)" with "patches for Blackwell support"
 * [images.ts ngc-25.09, playbook]. Neither publishes a per-kernel arch list, so components/knowledge/images.ts claims nothing
 * about their kernels, and the message does not say they carry this one.
 */
export const NATIVE_12_1_BUILDS = "a vLLM built for 12.1 itself (eugr/spark-vllm-docker builds it with TORCH_CUDA_ARCH_LIST=12.1a on CUDA 13.0) " +
    "or NVIDIA's nvcr.io/nvidia/vllm images, which NVIDIA's DGX Spark playbook runs (no per-kernel build facts published)";

/**
 * vllm-project/vllm#43367: VLLM_DISABLED_KERNELS=CutlassFp8BlockScaledMMKernel makes vLLM select
 * TritonFp8BlockScaledMMKernel for block FP8. The class exists in the 0.20.0 and 0.33.0 sources read, not in 0.19.0
 * (vllm/model_executor/kernels/linear/scaled_mm/cutlass.py). spark-vllm has no setting for the vLLM container's environment
 * (components/spec/configSchema.ts), so this is said as a fact about vLLM, not as a step.
 */
export const FP8_TRITON_FALLBACK = "vLLM itself (0.20.0 and later) skips that kernel for block FP8 under " +
    "VLLM_DISABLED_KERNELS=CutlassFp8BlockScaledMMKernel and uses its Triton kernel (vllm-project/vllm#43367), which spark-vllm has no setting for";
