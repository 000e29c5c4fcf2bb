// Known vLLM images and the pure checks that decide whether an image can run on a host. No Pulumi.
//
// Sources, by the short names used below (every fact in this file cites one):
//   [cuda-cc]      CUDA C++ Programming Guide, "Compute Capability and Streaming Multiprocessor Versions" and
//                  "Binary compatibility": a cubin (SASS) for sm_XY runs on any GPU of compute capability X.y with
//                  y >= Y (same major, same or higher minor), never across majors; PTX for compute_XY is JIT-compiled
//                  by the driver for any GPU of capability >= X.Y. https://docs.nvidia.com/cuda/cuda-programming-guide/01-introduction/cuda-platform.html
//                  Architecture-specific targets (sm_90a, sm_120a) run only on exactly that capability; family targets
//                  (sm_120f, CUDA 12.9+) run on the family (same major, minor >= Y).
//   [pt-spark]     pytorch/pytorch#164590: "pytorch binary compiled with 12.0 can directly run on 12.1 (Spark)";
//                  pytorch/pytorch#172629 (GB10 is "cuda capability 12.1").
//   [cuda-minor]   CUDA Compatibility guide, Minor Version Compatibility, Table 1: CUDA 13.x needs driver >= 580,
//                  12.x >= 525, 11.x >= 450 (450.80.02); within a major release family a newer runtime runs on the
//                  family's minimum driver "with limited feature-set": PTX produced by a newer toolkit than the driver
//                  cannot be JIT-compiled (cudaErrorUnsupportedPtxVersion, "the provided PTX was compiled with an
//                  unsupported toolchain."). https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html
//   [cuda-rn]      CUDA Toolkit release notes, Table 3 "CUDA Toolkit and Corresponding Driver Versions": the driver branch that
//                  ships with each toolkit (525 → 12.0, 530 → 12.1, 535 → 12.2, 545 → 12.3, 550 → 12.4, 555 → 12.5,
//                  560 → 12.6, 570 → 12.8, 575 → 12.9, 580 → 13.0, 590 → 13.1 (590.44.01), 595 → 13.2 (GA >= 595.45.04,
//                  Update 1 >= 595.58.03), 610 → 13.3 (>= 610.43.02)). https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/,
//                  https://docs.nvidia.com/cuda/archive/13.2.0/cuda-toolkit-release-notes/index.html (the 13.2 and 13.3 rows as
//                  quoted from that table by several public repositories). 615 → 13.4: NVIDIA/cutlass v4.8.0dev release notes
//                  ("R615 driver, released with CUDA 13.4 GA").
//   [eugr-266]     eugr/spark-vllm-docker#266: a CUDA 13.1 NGC-based container on a Spark with driver 580.159.03 prints
//                  "ERROR: This container was built for NVIDIA Driver Release 590.48 or later, but version 580.159.03
//                  was detected and compatibility mode is UNAVAILABLE." (forward compatibility is not offered on GB10).
//   [mp-pr]        vllm-project/vllm#23691 "[V1] Support MP Executor for multi node distributed inference": `vllm serve
//                  ... --nnodes N --node-rank i --master-addr A [--master-port P] [--headless]`. First released in vLLM 0.11.1,
//                  not 0.11.0 (the PR was still in review when 0.11.0 shipped): the PyPI sdists show it. vllm-0.11.0
//                  vllm/v1/executor/multiproc_executor.py still says "Multiprocessing-based executor does not support
//                  multi-node setting" and vllm/config/parallel.py has no nnodes; vllm-0.11.1 vllm/config/parallel.py has
//                  `master_addr: str = "127.0.0.1"`, `nnodes: int = 1` and multiproc_executor.py checks `nnodes_within_dp`.
//                  xorbitsai/inference#4252 ("vLLM 0.11.1+ compatibility with v1 executor support") agrees. Flags and defaults:
//                  vllm/config/parallel.py (master_addr "127.0.0.1", master_port 29501, node_rank 0, nnodes 1);
//                  docs/serving/parallelism_scaling.md "Running vLLM with MultiProcessing".
//   [no-ray]       vLLM's own images lost Ray with its default dependencies. The images install requirements/cuda.txt and
//                  nothing else Ray (docker/Dockerfile has no `ray`): that file has `ray[cgraph]>=2.48.0` up to vllm-0.17.1
//                  and none from vllm-0.18.0 (PyPI sdists; RFC vllm-project/vllm#33445, vllm-project/vllm#33351). Sources
//                  disagree on the release: gpustack/gpustack#5430 ("From version v0.18, the vLLM community has removed ray
//                  dependency from the official image") and GPUStack docs "Starting from 0.18.0, vLLM no longer depends on Ray
//                  by default" (https://docs.gpustack.ai/2.2/tutorials/running-distributed-vllm-with-multiprocessing/) say
//                  0.18; ai-dynamo/dynamo#8515 reports it for 0.19.1 ("no ray extra, not in common.txt/cuda.txt"). The
//                  sdists settle it: 0.18.0.
//   [vllm-cuda]    vllm-project/vllm#39878 (April 2026): the default CUDA of vLLM wheels and vllm/vllm-openai images
//                  switched from 12.9 to 13.0 (first release: 0.20.0, vllm-project/router#154).
//   [vllm-docker]  vLLM's docker/Dockerfile of each release (read from the release's PyPI sdist, vllm-X.Y.Z.tar.gz):
//                  `ARG CUDA_VERSION=…` and `ARG torch_cuda_arch_list='…'` (the TORCH_CUDA_ARCH_LIST vLLM's kernels are built
//                  for). 0.11.1–0.19.0: CUDA 12.9.1, '7.0 7.5 8.0 8.9 9.0 10.0 12.0'; 0.20.0: CUDA 13.0.2,
//                  '7.5 8.0 8.6 8.9 9.0 10.0 11.0 12.0+PTX'; 0.33.0: CUDA 13.0.3, '7.5 8.0 8.6 8.9 9.0 10.0 11.0 12.0'. No
//                  12.1 anywhere (vllm-project/vllm#36835): sm_120 SASS runs on the Spark per [cuda-cc]. (An earlier version
//                  of this table took "8.0 8.9 9.0 10.0 10.3 12.0" from vllm-project/vllm#23469, a closed, unmerged proposal.)
//   [vllm-release] How vLLM's own kernels are compiled in the arm64 image a Spark pulls: each release's
//                  .buildkite/release-pipeline.yaml (PyPI sdist) builds the aarch64 release image with its own
//                  `--build-arg CUDA_VERSION=… --build-arg torch_cuda_arch_list='…'`, not the Dockerfile's defaults [vllm-docker]:
//                  0.11.1–0.19.0 CUDA 12.9.1 '8.7 8.9 9.0 10.0+PTX 12.0'; 0.17.1–0.19.0 also a CUDA 13.0.1 image
//                  '8.7 8.9 9.0 10.0+PTX 12.0 12.1' ("12.1 for DGX Spark", the 0.17.1 pipeline's comment); 0.20.0/0.20.1
//                  CUDA 13.0.2 CUDA_ARCH_AARCH64 '8.0 8.7 8.9 9.0 10.0 11.0 12.0+PTX'; 0.31.0/0.33.0 CUDA 13.0.2
//                  '8.0 8.7 8.9 9.0 10.0 11.0 12.0'. .buildkite/scripts/annotate-release.sh (0.17.1–0.20.0; 0.33.0
//                  publish-release-images.sh): vllm/vllm-openai:vX is the manifest of vX-x86_64 and vX-aarch64, and
//                  vX-cu130 (0.17.1–0.19.0) the one of the CUDA 13.0 builds. What vLLM's CUTLASS kernels for 12.x then are
//                  is components/knowledge/vllmKernels.ts (sm_120a from a CUDA 12.9 build: not on 12.1; sm_120f from CUDA 13: on 12.1).
//   [uma-free]     vLLM's start-up free memory on an integrated GPU: MemorySnapshot.measure (vllm/utils/mem_utils.py) replaces
//                  torch.cuda.mem_get_info()'s free figure by psutil.virtual_memory().available (MemAvailable) on
//                  compute capability (8,7), (11,0), (12,1) from vllm-0.11.1 (vllm-0.11.0's MemorySnapshot in
//                  vllm/utils/__init__.py has only mem_get_info), and on any GPU with `is_integrated` from vllm-0.20.0
//                  (`current_platform.is_integrated_gpu`, vllm-project/vllm#35356; vllm-0.19.0 still has the tuple).
//                  vllm-project/vllm#48140 (closed): the reporter confirmed on a GB10 with 0.24.0 that the check reads MemAvailable.
//   [ngc-RR.MM]    NVIDIA vLLM container release notes, https://docs.nvidia.com/deeplearning/frameworks/vllm-release-notes/rel-RR-MM.html
//   [ngc-25.09]    pypi dgx-spark-vllm (environment extracted from nvcr.io/nvidia/vllm:25.09-py3, "configured for DGX Spark
//                  (GB10, sm_121)"): vLLM 0.10.1.1+381074ae.nv25.09, PyTorch 2.9.0a0+50eac811a6.nv25.09, CUDA 13.0.
//   [playbook]     NVIDIA/dgx-spark-playbooks nvidia/vllm/README.md (12/22/2025) runs nvcr.io/nvidia/vllm:25.11-py3 on two
//                  Sparks with vLLM's run_cluster.sh (`ray start`); build.nvidia.com/spark/vllm/multi-sparks-through-switch
//                  does the same with nvcr.io/nvidia/vllm:26.02-py3.
//   [ngc-no-ray]   makiisthenes/dgx-spark-multinode-vllm-ray: "The newer NVIDIA vLLM container [26.04-py3] no longer
//                  exposes the ray command by default".
//   [ray-auth]     Ray token authentication, "available in Ray 2.52.0 or later", enabled by RAY_AUTH_MODE=token on every
//                  node (https://docs.ray.io/en/latest/ray-security/token-auth.html).
//   [ray-agent]    The dashboard agent's HTTP server (port 52365 on every node; it serves the job API, POST
//                  /api/job_agent/jobs/ runs a shell command) checks the token from Ray 2.54.0: the wheel's
//                  ray/dashboard/http_server_agent.py adds get_token_auth_middleware there in 2.54.0, not in 2.52.0,
//                  2.52.1 or 2.53.0 (ray-project/ray#58819 left it out). Measured on real Ray by tests/e2e/ray-doors.test.ts.

import { compareVersions, parseVersion } from "./catalog";

/** GB10 (DGX Spark) compute capability [pt-spark]. */
export const GB10_CAPABILITY = "12.1";

/** First vLLM release with `vllm serve --nnodes/--node-rank/--master-addr/--master-port/--headless` [mp-pr]. */
export const firstVllmWithMultiNodeMp = "0.11.1";

/** First vLLM release whose start-up check takes MemAvailable as free memory on a GB10 (capability 12.1) [uma-free]. */
export const firstVllmWithUnifiedMemoryAvailable = "0.11.1";

/** First vLLM release that asks CUDA whether the GPU is integrated (any capability) instead of a capability list [uma-free]. */
export const firstVllmWithIntegratedGpuQuery = "0.20.0";

/** Capabilities vLLM 0.11.1–0.19.x treats as unified memory: Orin, Thor, Spark (vllm/utils/mem_utils.py) [uma-free]. */
export const UMA_CAPABILITIES_BEFORE_INTEGRATED_QUERY: ReadonlyArray<readonly [number, number]> = [[8, 7], [11, 0], [12, 1]];

/** First vLLM release whose official image and default dependencies have no Ray [no-ray]. */
export const firstVllmWithoutRay = "0.18.0";

/** First Ray release with token authentication (RAY_AUTH_MODE=token) [ray-auth]. */
export const firstRayWithTokenAuth = "2.52.0";

/** First Ray release whose dashboard agent HTTP server (its job API) checks the token [ray-agent]. */
export const firstRayWithAgentTokenAuth = "2.54.0";

/** vLLM's defaults for the mp multi-node rendezvous (vllm/config/parallel.py) [mp-pr]. */
export const MP_DEFAULT_MASTER_PORT = 29501;

export interface KnownImage {
    /** repository:tag as people write it (no registry default, no digest). */
    reference: string;
    vllm?: string;
    torch?: string;
    /** CUDA runtime the image was built with (major.minor[.patch]). */
    cuda?: string;
    /** `torch.cuda.get_arch_list()`-style targets (sm_XY[a|f] = SASS, compute_XY = PTX); undefined = not published. */
    archList?: string[];
    /**
     * How vLLM's own CUDA kernels were compiled in the arm64 image (CUDA and TORCH_CUDA_ARCH_LIST of the build) [vllm-release]:
     * what decides its CUTLASS kernels for 12.x (components/knowledge/vllmKernels.ts). undefined: not published.
     */
    vllmBuild?: { cuda: string; torchCudaArchList: string };
    /** Ray: present (with version when known), absent, or undefined when no source says. */
    ray?: { present: boolean; version?: string };
    /** Runs on a Spark according to a public source (NVIDIA's playbook, a release note, an issue). */
    runsOnGb10?: string;
    /** Some field is inferred rather than read; `notes` says which and how. */
    estimate?: boolean;
    notes?: string;
    sources: string[];
}

const NGC_RN = (rr: string) => `https://docs.nvidia.com/deeplearning/frameworks/vllm-release-notes/rel-${rr}.html`;
const SDIST = (v: string) => `pypi vllm-${v}.tar.gz: docker/Dockerfile, requirements/cuda.txt`;

/** TORCH_CUDA_ARCH_LIST ('7.5 8.0 12.0+PTX') as targets: X.Y → sm_XY; X.Y+PTX → sm_XY and compute_XY. */
export function torchArchList(list: string): string[] {
    return list.trim().split(/[\s;]+/).flatMap(item => {
        const m = /^(\d+)\.(\d)([af]?)(\+PTX)?$/i.exec(item);
        if (!m) return [];
        const sm = `sm_${m[1]}${m[2]}${m[3].toLowerCase()}`;
        return m[4] ? [sm, `compute_${m[1]}${m[2]}`] : [sm];
    });
}

const PIPELINE = (v: string) => `pypi vllm-${v}.tar.gz: .buildkite/release-pipeline.yaml (the aarch64 release image's CUDA_VERSION and torch_cuda_arch_list)`;

/**
 * vLLM's own image of `version`: CUDA, kernel targets and Ray as its release's docker/Dockerfile and requirements say
 * [vllm-docker][no-ray], and how the arm64 image's vLLM kernels were built (`build`, [vllm-release]).
 */
function vllmImage(version: string, cuda: string, archList: string, ray: boolean, build: KnownImage["vllmBuild"], extra: Partial<KnownImage> = {}): KnownImage {
    return {
        reference: `vllm/vllm-openai:v${version}`, vllm: version, cuda, archList: torchArchList(archList), ray: { present: ray }, vllmBuild: build,
        notes: `docker/Dockerfile: CUDA_VERSION=${cuda}, torch_cuda_arch_list='${archList}'; requirements/cuda.txt ${ray ? "has ray[cgraph]>=2.48.0" : "has no ray"}` +
            (build ? `; arm64 release image: CUDA ${build.cuda}, torch_cuda_arch_list='${build.torchCudaArchList}'` : "") + (extra.notes ? `; ${extra.notes}` : ""),
        sources: [SDIST(version), ...(build ? [PIPELINE(version)] : []), ...(extra.sources ?? [])],
        ...(extra.runsOnGb10 ? { runsOnGb10: extra.runsOnGb10 } : {}),
    };
}

/** The CUDA 13.0 variant vX-cu130 that 0.17.1–0.19.0 publish beside the default CUDA 12.9 image [vllm-release]. */
function vllmCu130Image(version: string, ray: boolean): KnownImage {
    const build = { cuda: "13.0.1", torchCudaArchList: "8.7 8.9 9.0 10.0+PTX 12.0 12.1" };
    return {
        reference: `vllm/vllm-openai:v${version}-cu130`, vllm: version, cuda: build.cuda, archList: torchArchList(build.torchCudaArchList),
        ray: { present: ray }, vllmBuild: build,
        notes: `the CUDA 13.0 build of vLLM ${version} (arm64: torch_cuda_arch_list='${build.torchCudaArchList}', "12.1 for DGX Spark"); ` +
            `requirements/cuda.txt ${ray ? "has ray[cgraph]>=2.48.0" : "has no ray"}`,
        sources: [PIPELINE(version), `pypi vllm-${version}.tar.gz: .buildkite/scripts/annotate-release.sh (vllm/vllm-openai:v${version}-cu130)`],
    };
}

const ARM64_CU129 = { cuda: "12.9.1", torchCudaArchList: "8.7 8.9 9.0 10.0+PTX 12.0" };

const ARCH_0_11 = "7.0 7.5 8.0 8.9 9.0 10.0 12.0";

/** Known images. Unknown fields stay undefined: the checks then say "unknown" rather than guess. */
export const KNOWN_IMAGES: KnownImage[] = [
    vllmImage("0.11.1", "12.9.1", ARCH_0_11, true, ARM64_CU129, { notes: "first release with the multi-node mp launch [mp-pr] and MemAvailable as free memory on a GB10 [uma-free]" }),
    vllmImage("0.14.0", "12.9.1", ARCH_0_11, true, ARM64_CU129),
    vllmImage("0.17.1", "12.9.1", ARCH_0_11, true, ARM64_CU129, { notes: "the last release with Ray [no-ray]", sources: ["gpustack/gpustack#5430"] }),
    vllmCu130Image("0.17.1", true),
    vllmImage("0.18.0", "12.9.1", ARCH_0_11, false, ARM64_CU129, {
        notes: "the first release without Ray [no-ray]",
        sources: ["gpustack/gpustack#5430", "https://docs.gpustack.ai/2.2/tutorials/running-distributed-vllm-with-multiprocessing/"],
    }),
    vllmCu130Image("0.18.0", false),
    vllmImage("0.19.0", "12.9.1", ARCH_0_11, false, ARM64_CU129, { sources: ["ai-dynamo/dynamo#8515"] }),
    vllmCu130Image("0.19.0", false),
    vllmImage("0.20.0", "13.0.2", "7.5 8.0 8.6 8.9 9.0 10.0 11.0 12.0+PTX", false, { cuda: "13.0.2", torchCudaArchList: "8.0 8.7 8.9 9.0 10.0 11.0 12.0+PTX" }, {
        notes: "first release with CUDA 13.0 as the image default [vllm-cuda]; first to ask CUDA whether the GPU is integrated [uma-free]",
        sources: ["vllm-project/vllm#39878", "vllm-project/vllm#35356"],
    }),
    vllmImage("0.33.0", "13.0.3", "7.5 8.0 8.6 8.9 9.0 10.0 11.0 12.0", false, { cuda: "13.0.2", torchCudaArchList: "8.0 8.7 8.9 9.0 10.0 11.0 12.0" }, {
        notes: "the newest release on PyPI (`pip index versions vllm`, November 2026); CUDA 13.0 runs natively on the Spark's 580 driver, sm_120 SASS on 12.1",
    }),
    {
        reference: "nvcr.io/nvidia/vllm:25.09-py3", vllm: "0.10.1.1", torch: "2.9.0a0", cuda: "13.0",
        runsOnGb10: "pypi dgx-spark-vllm: extracted from this image 'configured for DGX Spark (GB10, sm_121)'",
        sources: ["https://pypi.org/project/dgx-spark-vllm"],
    },
    {
        reference: "nvcr.io/nvidia/vllm:25.10-py3", vllm: "0.10.2", torch: "NVIDIA PyTorch 25.09", cuda: "13.0.2",
        notes: "release notes list DGX Spark's unified memory as a known issue of the default --gpu-memory-utilization",
        sources: [NGC_RN("25-10")],
    },
    {
        reference: "nvcr.io/nvidia/vllm:25.11-py3", cuda: "13.0", ray: { present: true }, estimate: true,
        runsOnGb10: "NVIDIA dgx-spark-playbooks nvidia/vllm (two Sparks over Ray with run_cluster.sh)",
        notes: "Ray: the playbook runs `ray start` in it; CUDA 13.0 inferred from 25.10/26.01 around it; vLLM version not in our sources",
        sources: ["NVIDIA/dgx-spark-playbooks nvidia/vllm/README.md"],
    },
    {
        reference: "nvcr.io/nvidia/vllm:26.01-py3", vllm: "0.11.1", torch: "2.10.0a0+a36e1d39eb", cuda: "13.1.1",
        notes: "CUDA 13.1 on the Spark's 580 driver runs only under minor-version compatibility (no PTX JIT of 13.1 PTX) [cuda-minor][eugr-266]",
        sources: [NGC_RN("26-01"), "eugr/spark-vllm-docker#266"],
    },
    {
        reference: "nvcr.io/nvidia/vllm:26.02-py3", ray: { present: true },
        runsOnGb10: "build.nvidia.com/spark/vllm/multi-sparks-through-switch (Ray via run_cluster.sh)",
        notes: "vLLM/CUDA versions not in our sources",
        sources: ["https://build.nvidia.com/spark/vllm/multi-sparks-through-switch"],
    },
    {
        reference: "nvcr.io/nvidia/vllm:26.03-py3", vllm: "0.17.1", torch: "2.11.0a0+a6c236b9fd1", cuda: "13.2.0",
        notes: "CUDA 13.2 on the Spark's 580 driver runs only under minor-version compatibility [cuda-minor]",
        sources: [NGC_RN("26-03")],
    },
    {
        reference: "nvcr.io/nvidia/vllm:26.04-py3", ray: { present: false },
        notes: "no `ray` command any more [ngc-no-ray]",
        sources: ["makiisthenes/dgx-spark-multinode-vllm-ray"],
    },
    {
        reference: "nvcr.io/nvidia/vllm:26.05-py3", vllm: "0.20.1", torch: "2.12.0a0+5aff3928d8", cuda: "13.2.1", ray: { present: false },
        notes: "no Ray: NVIDIA's vLLM playbook for Spark (as issue 29 cites it) and [ngc-no-ray] for 26.04 before it; CUDA 13.2 on the 580 driver: minor-version compatibility [cuda-minor]",
        sources: [NGC_RN("26-05"), "NVIDIA dgx-spark-playbooks nvidia/vllm", "makiisthenes/dgx-spark-multinode-vllm-ray"],
    },
    {
        reference: "nvcr.io/nvidia/vllm:26.10-py3", vllm: "0.31.0", torch: "2.15.0a0+875d815502", cuda: "13.4.3", ray: { present: false }, estimate: true,
        notes: "Ray absent inferred from 26.04 and 26.05 (the release notes do not list it); CUDA 13.4 on the 580 driver: minor-version compatibility [cuda-minor]",
        sources: [NGC_RN("26-10")],
    },
];

/** repo:tag of a reference: drops a digest, `docker.io/` and `library/`. */
export function normalizeReference(reference: string): string {
    let r = reference.trim().replace(/@sha256:[0-9a-f]+$/i, "");
    r = r.replace(/^(docker\.io|index\.docker\.io|registry-1\.docker\.io)\//, "").replace(/^library\//, "");
    return r;
}

const BY_REF = new Map(KNOWN_IMAGES.map(i => [i.reference.toLowerCase(), i]));

/** The table row for an image reference (`repo:tag[@sha256:…]`), or undefined (unknown image or digest-only). */
export function lookupImage(reference: string): KnownImage | undefined {
    return BY_REF.get(normalizeReference(reference).toLowerCase());
}

// ---------------------------------------------------------------- CUDA architectures

export interface ArchTarget {
    raw: string;
    kind: "sass" | "ptx";
    major: number;
    minor: number;
    /** "" plain, "a" architecture-specific, "f" family-specific [cuda-cc]. */
    variant: "" | "a" | "f";
}

/** Parses `sm_121`, `sm_90a`, `sm_120f`, `compute_120`, `12.0`, `12.0+PTX`-less forms; undefined if not a target. */
export function parseArchTarget(target: string): ArchTarget | undefined {
    const t = target.trim().toLowerCase();
    const m = /^(sm|compute)_(\d+)(\d)([af]?)$/.exec(t);
    if (m) return { raw: target, kind: m[1] === "sm" ? "sass" : "ptx", major: Number(m[2]), minor: Number(m[3]), variant: m[4] as "" | "a" | "f" };
    const d = /^(\d+)\.(\d)([af]?)$/.exec(t); // TORCH_CUDA_ARCH_LIST style
    if (d) return { raw: target, kind: "sass", major: Number(d[1]), minor: Number(d[2]), variant: d[3] as "" | "a" | "f" };
    return undefined;
}

export function parseCapability(capability: string | [number, number]): [number, number] | undefined {
    if (Array.isArray(capability)) return capability;
    const m = /^(\d+)\.(\d+)$/.exec(capability.trim());
    return m ? [Number(m[1]), Number(m[2])] : undefined;
}

export interface KernelVerdict {
    runs: boolean;
    /** How: native SASS, or the driver JIT-compiling PTX. */
    via?: "sass" | "ptx";
    /** The target that makes it run. */
    target?: string;
    reason: string;
}

/**
 * Does code built for `archList` run on a GPU of `capability`? CUDA's binary-compatibility rule [cuda-cc]:
 * SASS sm_XY (or sm_XYf) runs on X.y for y >= Y; sm_XYa only on exactly X.Y; PTX compute_XY JIT-compiles for any
 * capability >= X.Y (compute_XYa only for exactly X.Y). SASS is preferred over PTX.
 */
export function cudaKernelsRunOn(archList: string[], capability: string | [number, number]): KernelVerdict {
    const cap = parseCapability(capability);
    if (!cap) return { runs: false, reason: `not a compute capability: ${String(capability)}` };
    const [M, m] = cap;
    const targets = archList.map(parseArchTarget).filter((t): t is ArchTarget => !!t);
    const sass = targets.filter(t => t.kind === "sass" && t.major === M && (t.variant === "a" ? t.minor === m : t.minor <= m))
        .sort((a, b) => b.minor - a.minor);
    if (sass.length) return { runs: true, via: "sass", target: sass[0].raw, reason: `${sass[0].raw} SASS runs on ${M}.${m} (same major, minor ${sass[0].minor} <= ${m})` };
    const ptx = targets.filter(t => t.kind === "ptx" && (t.variant === "a" ? t.major === M && t.minor === m : t.major < M || (t.major === M && t.minor <= m)))
        .sort((a, b) => b.major - a.major || b.minor - a.minor);
    if (ptx.length) return { runs: true, via: "ptx", target: ptx[0].raw, reason: `no SASS for ${M}.${m}; ${ptx[0].raw} PTX is JIT-compiled by the driver` };
    return {
        runs: false,
        reason: `no kernels for compute capability ${M}.${m}: needs sm_${M}x SASS with x <= ${m} or PTX compute_XY <= ${M}${m}; the image has ${archList.join(" ") || "(none)"}`,
    };
}

// ---------------------------------------------------------------- driver vs CUDA runtime

/** Minimum driver per CUDA major under minor-version compatibility [cuda-minor]. */
export const CUDA_MAJOR_MIN_DRIVER: Record<number, string> = { 11: "450.80.02", 12: "525.60.13", 13: "580" };

/** Driver branch → the CUDA version it ships with (what nvidia-smi prints as "CUDA Version") [cuda-rn]. */
export const DRIVER_BRANCH_CUDA: Array<[number, string]> = [
    [525, "12.0"], [530, "12.1"], [535, "12.2"], [545, "12.3"], [550, "12.4"], [555, "12.5"], [560, "12.6"],
    [570, "12.8"], [575, "12.9"], [580, "13.0"], [590, "13.1"], [595, "13.2"], [610, "13.3"], [615, "13.4"],
];

/** The CUDA version a driver supports natively (by branch), or undefined for branches not in the table. */
export function driverCudaVersion(driverVersion: string): string | undefined {
    const branch = Number(/^(\d+)/.exec(driverVersion.trim())?.[1]);
    if (!Number.isFinite(branch)) return undefined;
    let best: string | undefined;
    for (const [b, cuda] of DRIVER_BRANCH_CUDA) if (branch >= b) best = cuda;
    return best;
}

function cmpDotted(a: string, b: string): number {
    const pa = a.split(".").map(Number), pb = b.split(".").map(Number);
    for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
        const d = (pa[i] ?? 0) - (pb[i] ?? 0);
        if (d) return d;
    }
    return 0;
}

export interface DriverVerdict {
    ok: boolean;
    /** native: the driver's CUDA >= the runtime's; minor-version: same major, driver >= the family minimum (no PTX JIT of newer PTX). */
    mode: "native" | "minor-version" | "unsupported" | "unknown";
    driverCuda?: string;
    minimumDriver?: string;
    reason: string;
}

/**
 * Does a host driver (e.g. "580.95.05") run a CUDA runtime (e.g. "13.1")? [cuda-minor][cuda-rn]
 * ok is true for native and minor-version compatibility; the latter cannot JIT-compile PTX produced by the newer
 * toolkit, so an image whose kernels for the GPU are PTX only fails there (see imageRunsOnHost).
 */
export function driverSupportsCuda(driverVersion: string, cudaVersion: string): DriverVerdict {
    const cuda = /^(\d+)\.(\d+)/.exec(cudaVersion.trim());
    const driverCuda = driverCudaVersion(driverVersion);
    if (!cuda || !/^\d+(\.\d+)*$/.test(driverVersion.trim())) return { ok: false, mode: "unknown", reason: `cannot compare driver "${driverVersion}" with CUDA "${cudaVersion}"` };
    const major = Number(cuda[1]);
    const minimumDriver = CUDA_MAJOR_MIN_DRIVER[major];
    const rt = `${cuda[1]}.${cuda[2]}`;
    if (driverCuda && cmpDotted(driverCuda, rt) >= 0) return { ok: true, mode: "native", driverCuda, minimumDriver, reason: `driver ${driverVersion} supports CUDA ${driverCuda} >= ${rt}` };
    if (minimumDriver && cmpDotted(driverVersion, minimumDriver) >= 0 && driverCuda && Number(driverCuda.split(".")[0]) === major) {
        return {
            ok: true, mode: "minor-version", driverCuda, minimumDriver,
            reason: `CUDA ${rt} runs on driver ${driverVersion} (CUDA ${driverCuda}) only under minor-version compatibility: PTX built by CUDA ${rt} cannot be JIT-compiled ("the provided PTX was compiled with an unsupported toolchain.")`,
        };
    }
    if (!driverCuda) return { ok: false, mode: "unknown", minimumDriver, reason: `driver ${driverVersion} is not in the driver/CUDA table` };
    return {
        ok: false, mode: "unsupported", driverCuda, minimumDriver,
        reason: `CUDA ${rt} needs driver >= ${minimumDriver ?? "(a newer branch)"}; driver ${driverVersion} supports CUDA ${driverCuda}`,
    };
}

// ---------------------------------------------------------------- the whole verdict

export interface HostFacts {
    /** "12.1" on a GB10. */
    capability: string;
    /** "580.95.05" on DGX OS. */
    driver: string;
}

export interface ImageFacts {
    vllm?: string;
    cuda?: string;
    archList?: string[];
    ray?: { present: boolean; version?: string };
}

export type Backend = "ray" | "mp" | "single";

export interface ImageProblem {
    /** Stable slugs: cuda-kernel-image, cuda-driver, ray-missing, ray-no-token-auth, ray-agent-open, mp-unsupported, quantization-kernel (components/knowledge/imageKernels.ts). */
    kind: "cuda-kernel-image" | "cuda-driver" | "ray-missing" | "ray-no-token-auth" | "ray-agent-open" | "mp-unsupported" | "quantization-kernel";
    /** error: it will not serve; warning: it serves, but insecurely or degraded. */
    severity: "error" | "warning";
    message: string;
}

/**
 * Everything that makes an image unable to serve on a host with a given backend, each as one sentence; [] when
 * nothing is known to be wrong (unknown facts are skipped, not guessed).
 */
export function imageProblems(image: ImageFacts, host: HostFacts, backend: Backend, hosts = 1): ImageProblem[] {
    const out: ImageProblem[] = [];
    let kernels: KernelVerdict | undefined;
    if (image.archList) {
        kernels = cudaKernelsRunOn(image.archList, host.capability);
        if (!kernels.runs) out.push({ kind: "cuda-kernel-image", severity: "error", message: `the image's PyTorch has ${kernels.reason}` });
    }
    if (image.cuda) {
        const d = driverSupportsCuda(host.driver, image.cuda);
        if (!d.ok && d.mode !== "unknown") out.push({ kind: "cuda-driver", severity: "error", message: d.reason });
        else if (d.mode === "minor-version" && kernels?.via === "ptx")
            out.push({ kind: "cuda-driver", severity: "error", message: `${d.reason}, and the image has only PTX (${kernels.target}) for compute capability ${host.capability}` });
    }
    if (backend === "ray" && hosts > 1) {
        if (image.ray && !image.ray.present) out.push({ kind: "ray-missing", severity: "error", message: "ray is not importable in the image (vLLM images dropped Ray from 0.18); use backend: mp or an image with Ray" });
        else if (image.ray?.version && parseVersion(image.ray.version) && compareVersions(image.ray.version, firstRayWithTokenAuth) < 0)
            out.push({ kind: "ray-no-token-auth", severity: "warning", message: `Ray ${image.ray.version} has no token authentication (RAY_AUTH_MODE=token needs Ray >= ${firstRayWithTokenAuth}): any peer that reaches the GCS port can run code` });
        else if (image.ray?.version && parseVersion(image.ray.version) && compareVersions(image.ray.version, firstRayWithAgentTokenAuth) < 0)
            out.push({ kind: "ray-agent-open", severity: "warning", message: `Ray ${image.ray.version}'s dashboard agent serves its job API without the token (Ray checks it there from ${firstRayWithAgentTokenAuth}): any peer that reaches port 52365 can run commands` });
    }
    if (backend === "mp" && hosts > 1 && image.vllm && parseVersion(image.vllm) && compareVersions(image.vllm, firstVllmWithMultiNodeMp) < 0)
        out.push({ kind: "mp-unsupported", severity: "error", message: `vLLM ${image.vllm} has no --nnodes/--node-rank/--master-addr/--headless (first in ${firstVllmWithMultiNodeMp})` });
    return out;
}

/** The backend two or more hosts run when `spark-vllm:vllm.backend` is not set, and why. */
export interface BackendChoice {
    backend: "ray" | "mp";
    reason: string;
}

/**
 * Chooses the backend from what the image is known to carry: `mp` (vLLM's own multi-node launch) for a known image
 * without Ray; `ray` for a known image with Ray, and for an image the table does not know or whose Ray no source
 * states. Ray is what every stack deployed before this choice existed, so no stack on a Ray image changes; on an
 * unknown image without Ray the compatibility check in the head's container refuses before launch, naming
 * `vllm.backend: mp` as the fix.
 */
export function defaultBackend(reference: string | undefined): BackendChoice {
    const row = reference ? lookupImage(reference) : undefined;
    if (!row) return { backend: "ray", reason: "not set; the image is not in the known-images table (components/knowledge/images.ts): ray, the default before images dropped it" };
    if (row.ray?.present === false)
        return { backend: "mp", reason: `not set; ${row.reference} ships no Ray (${row.sources[0]}): vLLM's own multi-node launch` };
    if (row.ray?.present) return { backend: "ray", reason: `not set; ${row.reference} ships Ray` };
    return { backend: "ray", reason: `not set; no source says whether ${row.reference} ships Ray: ray, the default before images dropped it` };
}

/** Does vLLM `version` have the Ray-free multi-node launch? undefined when the version is not a release number. */
export function supportsMultiNodeMp(version: string): boolean | undefined {
    return parseVersion(version) ? compareVersions(version, firstVllmWithMultiNodeMp) >= 0 : undefined;
}
