// vLLM's own CUTLASS kernels for the GB10 (compute capability 12.1): which of them a vLLM build carries in a form that
// runs there, derived from the TORCH_CUDA_ARCH_LIST and CUDA it was built with and its release's CMake rules. Pure.
//
// Why: PyTorch running a kernel (components/knowledge/images.ts cudaKernelsRunOn) says nothing about vLLM's own CUTLASS kernels.
// Those are compiled per kernel family for the arch list CMake computes, and for compute capability 12.x that list can
// be arch-specific (sm_120a), which CUDA runs on exactly 12.0, never on the Spark's 12.1 [cuda-cc in images.ts].
//
// Sources (read in the PyPI sdists vllm-X.Y.Z.tar.gz of 0.10.1.1, 0.11.1, 0.14.0, 0.17.1, 0.18.0, 0.19.0, 0.20.0,
// 0.20.1, 0.31.0 and 0.33.0; every rule below names the releases it was read in):
//   [supported]  CMakeLists.txt CUDA_SUPPORTED_ARCHS, by CMAKE_CUDA_COMPILER_VERSION: the list the build's CUDA_ARCHS is
//                first intersected with. 12.1 is in it only in 0.19.0 (both branches) and, from 0.20.0, in the 12.8 branch;
//                the 13.0 branch has 12.0 alone (vllm-project/vllm#36835: "cuda_archs_loose_intersection drops 12.1").
//   [cuda-archs] CMakeLists.txt: CUDA_ARCHS = extract_unique_cuda_archs_ascending(torch's -gencode flags) = the X.Y of every
//                TORCH_CUDA_ARCH_LIST entry (its +PTX dropped), then cuda_archs_loose_intersection(CUDA_SUPPORTED_ARCHS, …).
//   [loose]      cmake/utils.cmake cuda_archs_loose_intersection(OUT, SRC, TGT): an SRC entry X.Ya/X.Yf is kept as is when
//                TGT holds X.Y; every other TGT entry takes the highest plain SRC entry <= it of the same major (0.10.x knows
//                the `a` suffix only). vllm-project/vllm#38126 "[NVIDIA] Fix DGX Spark logic" (in 0.19.0, as
//                vllm-project/vllm#56548 dates it) added cross-suffix matches, the symmetric handling of a suffixed TGT, and
//                the "family" fallback: an SRC X.Yf whose X.Y is not in TGT takes the first TGT entry of the same major.
//                Later changes (0.31.0: exact matches first; 0.33.0: keep a plain arch TGT requests alongside its a/f
//                variant, the fix vllm-project/vllm#56548 asks for) differ only for TGT entries with a/f suffixes, which a
//                plain TORCH_CUDA_ARCH_LIST never yields (suffixed lists are not modelled here). Checked: the real function
//                (cmake -P on each release's utils.cmake) and looseIntersection agree on 1950 cases (15 SRC × 13 TGT lists
//                × the 10 releases read); tests/unit/knowledge/vllm-kernels.test.ts keeps a selection with the real outputs.
//   [gencode]    cmake/utils.cmake set_gencode_flags_for_srcs: "12.0a" → -gencode arch=compute_120a,code=sm_120a (SASS only;
//                PTX only for an entry with +PTX, which none of these kernel lists has).
//   [sm120-mm]   CMakeLists.txt, the SM120 CUTLASS FP8 GEMMs (scaled_mm_c3x_sm120.cu, c3x/scaled_mm_sm120_fp8.cu and
//                c3x/scaled_mm_blockwise_sm120_fp8.cu, one SRCS list: per-tensor/channel and block FP8 alike), built when
//                CUDA >= 12.8 and the list is not empty, defining ENABLE_SCALED_MM_SM120: 0.10.1.1 "12.0;12.0a";
//                0.11.1–0.18.0 "12.0f" (CUDA >= 13.0) else "12.0a"; 0.19.0–0.33.0 "12.0f" else "12.0a;12.1a".
//   [sm120-fp4]  CMakeLists.txt, the SM120 NVFP4 kernels (ENABLE_NVFP4_SM120): the same lists as [sm120-mm] in every
//                release read. The SM100 NVFP4 list (ENABLE_NVFP4_SM100): 0.10.1.1 "10.0a"; 0.11.1 "10.0f;11.0f;12.0f"
//                (CUDA >= 13.0) else "10.0a;10.1a;12.0a;12.1a".
//   [fp4-order]  csrc/quantization/fp4/nvfp4_scaled_mm_entry.cu cutlass_scaled_fp4_mm: 0.10.1.1 and 0.11.1 call the SM100
//                kernel whenever ENABLE_NVFP4_SM100 is built (`#if … sm100a #elif … sm120a`), whatever the GPU; 0.14.0 on
//                dispatch by the GPU (`sm >= 120 && sm < 130` → sm120a).
//   [mm-order]   csrc/quantization/…/scaled_mm_entry.cu cutlass_scaled_mm: SM120 first for `version_num >= 120` when
//                ENABLE_SCALED_MM_SM120, else down to the c2x kernels, which take int8 only; none left: "No compiled
//                cutlass_scaled_mm for a compute capability less than CUDA device capability: 121" (every release read).
//   [sm120-guard] The device-side guard each SM120 FP8 GEMM's kernel is wrapped in (csrc/cutlass_extensions/common.hpp):
//                enable_sm120_only runs the kernel body only where it was compiled with __CUDA_ARCH__ == 1200 and traps
//                otherwise ("This kernel only supports sm120"); enable_sm120_family for 1200 <= __CUDA_ARCH__ < 1300. A
//                sm_120a or sm_120f cubin is compiled with 1200, a sm_121a one with 1210. Read per release:
//                c3x/scaled_mm_blockwise_sm120_fp8_dispatch.cuh (block FP8) enable_sm120_only in 0.10.1.1, 0.11.1, 0.14.0,
//                enable_sm120_family from 0.17.1; c3x/scaled_mm.cuh and scaled_mm_sm120_fp8_dispatch.cuh (per-tensor/channel
//                FP8) unguarded in 0.10.1.1–0.14.0, enable_sm120_only in 0.17.1–0.20.1, enable_sm120_family in 0.31.0 and
//                0.33.0 (vllm-project/vllm#41215). A 12.1 build of the per-tensor kernel traps on the GB10 where it is
//                enable_sm120_only: eugr/spark-vllm-docker#143 (12.1f build, "This kernel only supports sm120").
//   [on-gb10]    What real GB10s report (GitHub threads, read through their search excerpts):
//                vllm-project/vllm#43367 (vLLM 0.21.1rc1 nightly, PyTorch 2.11.0+cu129, CUDA 12.9): the blockwise FP8 GEMM
//                built for 120a passes can_implement() and fails in run() with "Error Internal" (cutlass_gemm_caller.cuh:61);
//                rebuilt with TORCH_CUDA_ARCH_LIST=12.1 (sm_121/sm_121a cubins) it runs; VLLM_DISABLED_KERNELS=
//                CutlassFp8BlockScaledMMKernel makes vLLM pick TritonFp8BlockScaledMMKernel instead.
//                vllm-project/vllm#40758 (image vllm/vllm-openai:nightly, vLLM 0.19.2rc1.dev134, April 2026) and
//                vllm-project/vllm#40934 (vLLM 0.18.0 run beside PyTorch 2.10.0+cu130 with a "cuda12-compat" library path
//                for legacy sonames): cutlass_scaled_mm "Error Internal" on GB10 FP8 models. Both are CUDA 12.9 builds as
//                far as the threads show: before v0.20.0 the plain `nightly` tag was the CUDA 12.9 build and
//                `cu130-nightly` the CUDA 13.0 one (vllm-project/vllm#42738: "After v0.20.0, default wheel/docker nightly
//                version is cu130"), and a vLLM that needs CUDA 12 sonames was compiled with CUDA 12 — so sm_120a, which
//                these rules already say does not run on 12.1. vllm-project/vllm#52708 (description and comments): the
//                12.0f family build of the scaled-mm and NVFP4 kernels runs on a real GB10 (a claimed launch failure of
//                12.0f did not hold up on the hardware). No thread found reports a 12.0f build failing. vllm-project/vllm#38484
//                (open): add 12.1 to the published TORCH_CUDA_ARCH_LIST.
import { compareVersions, parseVersion, Quantization } from "./catalog";
import { cudaKernelsRunOn } from "./images";

/** The CMake rules of one span of releases, restricted to what decides the SM12x CUTLASS kernels. */
interface ReleaseRules {
    /** The releases these rules were read in, oldest first: versions from the first to the last take them. */
    read: string[];
    /** CUDA_SUPPORTED_ARCHS for CUDA >= 13.0 and for 12.8 <= CUDA < 13.0 (undefined: no separate 13.0 branch) [supported]. */
    supported13?: string[];
    supported128: string[];
    /** SRC lists of the SM120 CUTLASS kernels, FP8 GEMMs and NVFP4 alike [sm120-mm][sm120-fp4]. */
    sm120Cuda13?: string[];
    sm120Cuda128: string[];
    /** SM100 NVFP4 list, where its kernel is called on any GPU once built [fp4-order]; undefined: dispatch by GPU. */
    fp4Sm100FirstCuda13?: string[];
    fp4Sm100FirstCuda128?: string[];
    /** cuda_archs_loose_intersection's family fallback for X.Yf [loose]. */
    familyFallback: boolean;
    /** 0.10.x: cuda_archs_loose_intersection knows the `a` suffix only (`_arch MATCHES "\\a$"`) [loose]. */
    aSuffixOnly?: boolean;
    /** The SM120 FP8 GEMMs wrapped in enable_sm120_only, which traps in a cubin not compiled for exactly 12.0 [sm120-guard]. */
    sm120OnlyGuard: { blockFp8: boolean; perTensorFp8: boolean };
}

const SUPPORTED_12_8_OLD = ["7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "12.0"];
const SUPPORTED_13_0 = ["7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "11.0", "12.0"];
const SUPPORTED_12_8_020 = ["7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "10.3", "12.0", "12.1"];
/** [sm120-guard]: which SM120 FP8 GEMMs trap in a cubin not compiled for exactly 12.0. */
const OLD_GUARD = { blockFp8: true, perTensorFp8: false };
const NEW_GUARD = { blockFp8: false, perTensorFp8: true };
const FAMILY_GUARDS = { blockFp8: false, perTensorFp8: false };

/** Release spans, oldest first. Between two spans (a release not read, with rules that changed) nothing is claimed. */
export const VLLM_KERNEL_RULES: readonly ReleaseRules[] = [
    {
        read: ["0.10.1.1"], supported128: SUPPORTED_12_8_OLD,
        sm120Cuda128: ["12.0", "12.0a"], fp4Sm100FirstCuda128: ["10.0a"], familyFallback: false, aSuffixOnly: true, sm120OnlyGuard: OLD_GUARD,
    },
    {
        read: ["0.11.1"], supported13: SUPPORTED_13_0, supported128: SUPPORTED_12_8_OLD,
        sm120Cuda13: ["12.0f"], sm120Cuda128: ["12.0a"],
        fp4Sm100FirstCuda13: ["10.0f", "11.0f", "12.0f"], fp4Sm100FirstCuda128: ["10.0a", "10.1a", "12.0a", "12.1a"], familyFallback: false, sm120OnlyGuard: OLD_GUARD,
    },
    {
        read: ["0.14.0"], supported13: SUPPORTED_13_0, supported128: SUPPORTED_12_8_OLD,
        sm120Cuda13: ["12.0f"], sm120Cuda128: ["12.0a"], familyFallback: false, sm120OnlyGuard: OLD_GUARD,
    },
    {
        read: ["0.17.1", "0.18.0"], supported13: SUPPORTED_13_0, supported128: SUPPORTED_12_8_OLD,
        sm120Cuda13: ["12.0f"], sm120Cuda128: ["12.0a"], familyFallback: false, sm120OnlyGuard: NEW_GUARD,
    },
    {
        read: ["0.19.0"], supported13: [...SUPPORTED_13_0, "12.1"], supported128: [...SUPPORTED_12_8_OLD, "12.1"],
        sm120Cuda13: ["12.0f"], sm120Cuda128: ["12.0a", "12.1a"], familyFallback: true, sm120OnlyGuard: NEW_GUARD,
    },
    {
        read: ["0.20.0", "0.20.1"], supported13: SUPPORTED_13_0, supported128: SUPPORTED_12_8_020,
        sm120Cuda13: ["12.0f"], sm120Cuda128: ["12.0a", "12.1a"], familyFallback: true, sm120OnlyGuard: NEW_GUARD,
    },
    {
        read: ["0.31.0", "0.33.0"], supported13: SUPPORTED_13_0, supported128: SUPPORTED_12_8_020,
        sm120Cuda13: ["12.0f"], sm120Cuda128: ["12.0a", "12.1a"], familyFallback: true, sm120OnlyGuard: FAMILY_GUARDS,
    },
];

/** The rules for a vLLM version, or undefined when no span read covers it. */
export function rulesFor(vllmVersion: string): ReleaseRules | undefined {
    if (!parseVersion(vllmVersion)) return undefined;
    return VLLM_KERNEL_RULES.find(r => compareVersions(vllmVersion, r.read[0]) >= 0 && compareVersions(vllmVersion, r.read[r.read.length - 1]) <= 0);
}

const ARCH = /^(\d+)\.(\d+)([af]?)$/;
const archKey = (a: string): [number, number] => { const m = ARCH.exec(a)!; return [Number(m[1]), Number(m[2])]; };
const lessOrEqual = (a: string, b: string) => { const [x, y] = archKey(a), [u, v] = archKey(b); return x < u || (x === u && y <= v); };

/**
 * cmake/utils.cmake cuda_archs_loose_intersection for SRC entries X.Y / X.Ya / X.Yf (no +PTX) and plain X.Y TGT
 * entries, the inputs a plain TORCH_CUDA_ARCH_LIST gives [loose].
 */
export function looseIntersection(src: readonly string[], tgt: readonly string[], familyFallback: boolean, aSuffixOnly = false): string[] {
    let plainSrc = [...new Set(src)];
    let restTgt = [...tgt];
    const out: string[] = [];
    for (const arch of [...plainSrc]) {
        const m = ARCH.exec(arch);
        if (!m || !m[3] || (aSuffixOnly && m[3] !== "a")) continue;
        plainSrc = plainSrc.filter(a => a !== arch);
        const base = `${m[1]}.${m[2]}`;
        if (tgt.includes(base)) {
            restTgt = restTgt.filter(t => t !== base);
            out.push(arch);
        } else if (familyFallback && m[3] === "f") {
            const same = restTgt.find(t => archKey(t)[0] === Number(m[1]));
            if (same) {
                restTgt = restTgt.filter(t => t !== same);
                out.push(same);
            }
        }
    }
    plainSrc.sort((a, b) => (lessOrEqual(a, b) ? (lessOrEqual(b, a) ? 0 : -1) : 1));
    for (const t of restTgt) {
        let pick: string | undefined;
        for (const s of plainSrc) {
            if (!lessOrEqual(s, t)) break;
            if (archKey(s)[0] === archKey(t)[0]) pick = s;
        }
        if (pick) out.push(pick);
    }
    return [...new Set(out)];
}

/** CMake's X.Y[a|f] as the SASS target nvcc emits for it [gencode]. */
export const sassTarget = (arch: string) => `sm_${arch.replace(".", "")}`;

export interface VllmBuild {
    vllm: string;
    /** CUDA the kernels were compiled with (CMAKE_CUDA_COMPILER_VERSION), e.g. "12.9.1". */
    cuda: string;
    /** TORCH_CUDA_ARCH_LIST of the build, e.g. "8.7 8.9 9.0 10.0+PTX 12.0". */
    torchCudaArchList: string;
}

export interface KernelCarry {
    /** true: the kernel is built for a target that runs on the capability; false: it is not; undefined: not known. */
    runs: boolean | undefined;
    /** SASS targets of the kernel in this build ([] when not built). */
    targets: string[];
    reason: string;
}

/** The kernel families the catalog's quantizations rely on, by quantization; the rest use no SM12x CUTLASS kernel of vLLM's. */
export type KernelQuantization = Extract<Quantization, "fp8" | "nvfp4">;
export const KERNEL_QUANTIZATIONS: readonly KernelQuantization[] = ["fp8", "nvfp4"];

const cudaAtLeast = (cuda: string, min: string) => compareVersions(cuda, min) >= 0;

/**
 * Does vLLM's own CUTLASS kernel for `quantization` (FP8: the SM120 scaled_mm and blockwise GEMMs; NVFP4: the FP4
 * GEMM) run on a GPU of `capability` in this build? [sm120-mm][sm120-fp4][fp4-order]
 */
export function vllmKernelRuns(build: VllmBuild, quantization: KernelQuantization, capability = "12.1"): KernelCarry {
    const rules = rulesFor(build.vllm);
    if (!rules) return { runs: undefined, targets: [], reason: `vLLM ${build.vllm}'s CMake rules were not read (read: ${VLLM_KERNEL_RULES.flatMap(r => r.read).join(", ")})` };
    const items = build.torchCudaArchList.trim().split(/[\s;]+/).filter(Boolean);
    if (items.some(i => !/^\d+\.\d+(\+PTX)?$/i.test(i)))
        return { runs: undefined, targets: [], reason: `TORCH_CUDA_ARCH_LIST '${build.torchCudaArchList}' has a/f targets, which this model of vLLM's CMake does not cover` };
    if (!parseVersion(build.cuda) || !cudaAtLeast(build.cuda, "12.8"))
        return { runs: false, targets: [], reason: `CUDA ${build.cuda} builds no SM12x CUTLASS kernels (vLLM builds them from CUDA 12.8)` };
    const cuda13 = cudaAtLeast(build.cuda, "13.0") && rules.supported13 !== undefined;
    const requested = [...new Set(items.map(i => i.replace(/\+PTX$/i, "")))].sort((a, b) => (lessOrEqual(a, b) ? -1 : 1));
    const loose = (src: readonly string[], tgt: readonly string[]) => looseIntersection(src, tgt, rules.familyFallback, rules.aSuffixOnly);
    const cudaArchs = loose(cuda13 ? rules.supported13! : rules.supported128, requested);
    const sm120 = loose(cuda13 ? rules.sm120Cuda13! : rules.sm120Cuda128, cudaArchs);
    const targets = sm120.map(sassTarget);
    const kernel = quantization === "fp8" ? "FP8 GEMMs (scaled_mm_sm120, blockwise included)" : "NVFP4 GEMM (nvfp4 sm120)";
    const built = `vLLM ${build.vllm} built with CUDA ${build.cuda} for '${build.torchCudaArchList}' compiles its SM120 CUTLASS ${kernel}`;
    if (!targets.length) return { runs: false, targets, reason: `${built.replace(/compiles .*/, "compiles")} no SM120 CUTLASS ${kernel}: no 12.x in its CUDA_ARCHS (${cudaArchs.join(" ")})` };
    if (quantization === "nvfp4") {
        const sm100 = cuda13 ? rules.fp4Sm100FirstCuda13 : rules.fp4Sm100FirstCuda128;
        const sm100Built = sm100 ? loose(sm100, cudaArchs) : [];
        if (sm100Built.length)
            return { runs: false, targets, reason: `${built} for ${targets.join(" ")}, but also builds the SM100 one (${sm100Built.map(sassTarget).join(" ")}), which vLLM ${build.vllm} calls on every GPU (cutlass_scaled_fp4_mm: #if ENABLE_NVFP4_SM100 … #elif)` };
    }
    const verdict = cudaKernelsRunOn(targets, capability);
    if (!verdict.runs)
        return { runs: false, targets, reason: `${built} for ${targets.join(" ")} only, which does not run on ${capability} (an arch-specific sm_XYa target runs on exactly X.Y; on a GB10 a 120a build fails with "Error Internal", vllm-project/vllm#43367)` };
    const runs = `${built} for ${targets.join(" ")}: ${verdict.reason}`;
    if (quantization !== "fp8" || !verdict.target || compiledForExactly120(verdict.target)) return { runs: true, targets, reason: runs };
    const traps = `a ${verdict.target} cubin is compiled with __CUDA_ARCH__ != 1200, and vLLM ${build.vllm} wraps its SM120`;
    if (rules.sm120OnlyGuard.blockFp8)
        return { runs: false, targets, reason: `${runs}, but ${traps} block FP8 GEMM in enable_sm120_only, which traps there ("This kernel only supports sm120")` };
    return rules.sm120OnlyGuard.perTensorFp8
        ? { runs: true, targets, reason: `${runs}; block FP8 runs, but ${traps} per-tensor FP8 GEMM in enable_sm120_only, which traps there (eugr/spark-vllm-docker#143, fixed by vllm-project/vllm#41215)` }
        : { runs: true, targets, reason: runs };
}

/** Whether the SASS target nvcc compiled with __CUDA_ARCH__ == 1200 (sm_120, sm_120a, sm_120f) [sm120-guard]. */
const compiledForExactly120 = (sassTarget: string) => /^sm_120[af]?$/.test(sassTarget);

/** Every kernel-dependent quantization of the catalog, for one build. */
export function vllmKernelsFor(build: VllmBuild, capability = "12.1"): Record<KernelQuantization, KernelCarry> {
    return { fp8: vllmKernelRuns(build, "fp8", capability), nvfp4: vllmKernelRuns(build, "nvfp4", capability) };
}
