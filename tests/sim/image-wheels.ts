// Real Ray from PyPI in the simulated Sparks (issue 28). The sim image's python3 is Debian bookworm's CPython 3.11 and
// has no pip, so the host's pip installs the pinned wheels (tests/sim/wheels/ray-<version>.txt: every distribution with
// its sha256, `--require-hashes`) into a staging tree for that interpreter (`--target`, `--python-version 3.11`,
// manylinux platforms, binary wheels only), which becomes one layer per Ray version under every tag that uses it.
//
// Two caches, both outside the repository:
// - the wheels: `$SPARK_VLLM_WHEEL_CACHE`, else `${XDG_CACHE_HOME:-~/.cache}/spark-vllm/wheels` (downloaded once per
//   machine, shared by every worktree and clean clone; pip checks each file's hash on every install);
// - the installed tree: `<sim cache>/ray-<version>-<lock hash>.tar`, so a rebuild of the image after a change under
//   tests/sim/image/ does not run pip again.
// ray 2.52.0 declares Requires-Python >=3.9 and ships cp311 manylinux2014_x86_64 wheels (its METADATA, PyPI).
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { run, RunResult } from "./util";

export const WHEELS_DIR = path.join(__dirname, "wheels");
/** Debian bookworm's python3 (3.11.2): where `pip install` as root puts packages outside Debian's own. */
export const SITE_PACKAGES = "usr/local/lib/python3.11/dist-packages";
const PIP_TARGET = ["--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--abi", "abi3", "--abi", "none",
    ...["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64", "manylinux1_x86_64", "manylinux_2_5_x86_64", "linux_x86_64", "any"]
        .flatMap(p => ["--platform", p])];

export function wheelCacheDir(): string {
    if (process.env.SPARK_VLLM_WHEEL_CACHE) return process.env.SPARK_VLLM_WHEEL_CACHE;
    const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
    return path.join(base, "spark-vllm", "wheels");
}

/** The pinned requirements of a Ray version (throws naming the file when there is none). */
export function rayLock(version: string): string {
    const f = path.join(WHEELS_DIR, `ray-${version}.txt`);
    if (!fs.existsSync(f)) throw new Error(`no pinned wheels for Ray ${version}: add ${path.relative(process.cwd(), f)} (see tests/sim/image-wheels.ts)`);
    return f;
}

/** What the image's content depends on here: each lock file used (for the registry cache key). */
export function wheelsKey(rayVersions: (string | null | undefined)[]): string {
    const h = crypto.createHash("sha256");
    for (const v of [...new Set(rayVersions.filter((v): v is string => !!v))].sort()) h.update(`${v}\0${fs.readFileSync(rayLock(v))}\0`);
    return h.digest("hex").slice(0, 16);
}

/** `ray` as pip writes the console script (ray's entry_points: ray = ray.scripts.scripts:main), for the image's python3. */
const RAY_SCRIPT = "#!/usr/bin/python3\nimport sys\nfrom ray.scripts.scripts import main\nif __name__ == \"__main__\":\n    sys.exit(main())\n";

async function pip(args: string[], log: (s: string) => void): Promise<RunResult> {
    const r = await run(["python3", "-m", "pip", "--disable-pip-version-check", ...args], { timeoutMs: 15 * 60_000 });
    if (r.code !== 0) throw new Error(`pip ${args[0]} failed (exit ${r.code}):\n${(r.stderr || r.stdout).slice(-3000)}`);
    log(`pip ${args[0]}: ok`);
    return r;
}

/**
 * A directory holding `usr/local/...` with Ray `version` installed for the image's python3 (and /usr/local/bin/ray),
 * from the sim cache or built: wheels fetched into the wheel cache if missing (hash-checked), installed offline.
 */
export async function ensureRayTree(version: string, cacheDir: string, log: (s: string) => void): Promise<string> {
    const lock = rayLock(version);
    const key = crypto.createHash("sha256").update(fs.readFileSync(lock)).update(SITE_PACKAGES).update(RAY_SCRIPT).digest("hex").slice(0, 16);
    const tree = path.join(cacheDir, `ray-${version}-${key}`);
    if (fs.existsSync(path.join(tree, "usr/local/bin/ray"))) return tree;
    const wheels = wheelCacheDir();
    fs.mkdirSync(wheels, { recursive: true });
    const t0 = Date.now();
    log(`fetching Ray ${version}'s wheels into ${wheels} (once per machine) ...`);
    await pip(["download", "--no-deps", "--require-hashes", "-r", lock, "-d", wheels, ...PIP_TARGET], log);
    const work = `${tree}.build`;
    fs.rmSync(work, { recursive: true, force: true });
    try {
        const site = path.join(work, SITE_PACKAGES);
        log(`installing Ray ${version} for the image's python3 (offline) ...`);
        await pip(["install", "--no-index", "--find-links", wheels, "--no-deps", "--require-hashes", "-r", lock,
            "--no-compile", "--target", site, ...PIP_TARGET], log);
        // pip --target's console scripts name the host's interpreter: the image gets its own
        fs.rmSync(path.join(site, "bin"), { recursive: true, force: true });
        fs.mkdirSync(path.join(work, "usr/local/bin"), { recursive: true });
        fs.writeFileSync(path.join(work, "usr/local/bin/ray"), RAY_SCRIPT, { mode: 0o755 });
        fs.rmSync(tree, { recursive: true, force: true });
        fs.renameSync(work, tree);
        log(`Ray ${version} installed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    } finally {
        fs.rmSync(work, { recursive: true, force: true });
    }
    return tree;
}

/**
 * One image per Ray version on top of `base` (memoised in `made`): the Ray tree as its own layer, shared by every tag
 * with that Ray. `docker` runs the docker CLI against the build host (the CLI copies from this machine).
 */
export async function rayBase(docker: (args: string[]) => Promise<RunResult>, base: string, version: string, cacheDir: string,
    made: Map<string, string>, log: (s: string) => void): Promise<string> {
    const have = made.get(version);
    if (have) return have;
    const tree = await ensureRayTree(version, cacheDir, log);
    const ref = `${base.split(":")[0]}-ray:${version}`;
    const ctr = `sv-build-ray-${version.replace(/[^0-9a-zA-Z]/g, "_")}`;
    const ok = async (args: string[]) => {
        const r = await docker(args);
        if (r.code !== 0) throw new Error(`docker ${args.join(" ")} failed (exit ${r.code}): ${(r.stderr || r.stdout).trim()}`);
    };
    const t0 = Date.now();
    await docker(["rm", "-f", ctr]);
    await ok(["create", "--name", ctr, base, "true"]);
    try {
        await ok(["cp", `${tree}/.`, `${ctr}:/`]);
        await ok(["commit", ctr, ref]);
    } finally {
        await docker(["rm", "-f", ctr]);
    }
    log(`Ray ${version} layer committed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    made.set(version, ref);
    return ref;
}
