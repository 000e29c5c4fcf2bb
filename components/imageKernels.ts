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
 * (components/remote/spark_vllm/kernels.py, which refuses). undefined when nothing is known to be wrong.
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
            `. Remediation: use an image that carries it (${carrying.join(", ") || "none in components/images.ts"}) or a checkpoint of another quantization; \`up\` runs the kernel on the head before launch (compat)`,
    };
}
