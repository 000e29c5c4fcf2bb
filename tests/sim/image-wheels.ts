// Real Ray and real Transformers from PyPI in the simulated Sparks (issue 28). The sim image's python3 is Debian
// bookworm's CPython 3.11 and has no pip, so the host's pip installs the pinned wheels (tests/sim/wheels/<package>-<version>.txt:
// every distribution with its sha256, `--require-hashes`) into a staging tree for that interpreter (`--target`,
// `--python-version 3.11`, manylinux platforms, binary wheels only), which becomes one layer per package version:
// base → transformers (every tag declares one) → Ray (where the tag has one), shared by every tag with the same pair.
// The transformers locks pin the packages they share with the Ray locks (requests, filelock, packaging, ...) at the Ray
// locks' versions (generated with those as constraints), so the Ray layer's copy of a shared package is the same files;
// `conflictingPins` refuses a pair that disagrees.
//
// Two caches, both outside the repository:
// - the wheels: `$SPARK_VLLM_WHEEL_CACHE`, else `${XDG_CACHE_HOME:-~/.cache}/spark-vllm/wheels` (downloaded once per
//   machine, shared by every worktree and clean clone; pip checks each file's hash on every install);
// - the installed tree: `<sim cache>/<package>-<version>-<lock hash>`, so a rebuild of the image after a change under
//   tests/sim/image/ does not run pip again.
// ray 2.52.0 declares Requires-Python >=3.9 and ships cp311 manylinux2014_x86_64 wheels (its METADATA, PyPI);
// transformers 4.56.2 and 4.57.1 are pure-Python wheels (py3-none-any) declaring Requires-Python >=3.9.0 (their METADATA, PyPI).
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { run, RunResult } from "./util";

export const WHEELS_DIR = path.join(__dirname, "wheels");
/** Debian bookworm's python3 (3.11.2): where `pip install` as root puts packages outside Debian's own. */
export const SITE_PACKAGES = "usr/local/lib/python3.11/dist-packages";
/** The packages the sim image takes from PyPI, in layer order. */
export type PyPackage = "transformers" | "ray";
const PIP_TARGET = ["--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--abi", "abi3", "--abi", "none",
    ...["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64", "manylinux1_x86_64", "manylinux_2_5_x86_64", "linux_x86_64", "any"]
        .flatMap(p => ["--platform", p])];

export function wheelCacheDir(): string {
    if (process.env.SPARK_VLLM_WHEEL_CACHE) return process.env.SPARK_VLLM_WHEEL_CACHE;
    const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
    return path.join(base, "spark-vllm", "wheels");
}

/** The pinned requirements of `pkg` at `version` (throws naming the file when there is none). */
export function lockFile(pkg: PyPackage, version: string): string {
    const f = path.join(WHEELS_DIR, `${pkg}-${version}.txt`);
    if (!fs.existsSync(f)) throw new Error(`no pinned wheels for ${pkg} ${version}: add ${path.relative(process.cwd(), f)} (see tests/sim/image-wheels.ts)`);
    return f;
}

/** The pinned requirements of a Ray version (throws naming the file when there is none). */
export function rayLock(version: string): string {
    return lockFile("ray", version);
}

/** name → the whole pin line (version and hash) of a lock file. */
export function lockPins(file: string): Map<string, string> {
    const pins = new Map<string, string>();
    for (const line of fs.readFileSync(file, "utf8").split("\n")) {
        const m = /^([A-Za-z0-9._-]+)==(\S+.*)$/.exec(line.trim());
        if (m) pins.set(m[1].toLowerCase().replace(/[._]+/g, "-"), m[2].trim());
    }
    return pins;
}

/** Packages both locks pin, but differently (one layer would replace the other's copy with other files). */
export function conflictingPins(a: string, b: string): string[] {
    const pa = lockPins(a), pb = lockPins(b);
    return [...pa].filter(([name, pin]) => pb.has(name) && pb.get(name) !== pin)
        .map(([name, pin]) => `${name}: ${path.basename(a)} pins ${pin.split(" ")[0]}, ${path.basename(b)} pins ${pb.get(name)!.split(" ")[0]}`);
}

/** What the image's content depends on here: each lock file used (for the registry cache key). */
export function wheelsKey(uses: { pkg: PyPackage; version: string | null | undefined }[]): string {
    const h = crypto.createHash("sha256");
    const files = new Set(uses.filter(u => !!u.version).map(u => lockFile(u.pkg, u.version!)));
    for (const f of [...files].sort()) h.update(`${path.basename(f)}\0${fs.readFileSync(f)}\0`);
    return h.digest("hex").slice(0, 16);
}

/** `ray` as pip writes the console script (ray's entry_points: ray = ray.scripts.scripts:main), for the image's python3. */
const RAY_SCRIPT = "#!/usr/bin/python3\nimport sys\nfrom ray.scripts.scripts import main\nif __name__ == \"__main__\":\n    sys.exit(main())\n";
/** Console scripts the image gets per package (pip --target's name the host's interpreter; the others are not needed). */
const SCRIPTS: Record<PyPackage, Record<string, string>> = { ray: { ray: RAY_SCRIPT }, transformers: {} };

async function pip(args: string[], log: (s: string) => void): Promise<RunResult> {
    const r = await run(["python3", "-m", "pip", "--disable-pip-version-check", ...args], { timeoutMs: 15 * 60_000 });
    if (r.code !== 0) throw new Error(`pip ${args[0]} failed (exit ${r.code}):\n${(r.stderr || r.stdout).slice(-3000)}`);
    log(`pip ${args[0]}: ok`);
    return r;
}

/**
 * A directory holding `usr/local/...` with `pkg` `version` installed for the image's python3 (and its console scripts),
 * from the sim cache or built: wheels fetched into the wheel cache if missing (hash-checked), installed offline.
 * Its site-packages also works for the host's python3 when that is a CPython 3.11 on x86_64 (the unit tests use it so).
 */
export async function ensureTree(pkg: PyPackage, version: string, cacheDir: string, log: (s: string) => void): Promise<string> {
    const lock = lockFile(pkg, version);
    const scripts = SCRIPTS[pkg];
    const key = crypto.createHash("sha256").update(fs.readFileSync(lock)).update(SITE_PACKAGES).update(Object.values(scripts).join("")).digest("hex").slice(0, 16);
    const tree = path.join(cacheDir, `${pkg}-${version}-${key}`);
    if (fs.existsSync(tree)) return tree; // renamed into place only once complete
    const wheels = wheelCacheDir();
    fs.mkdirSync(wheels, { recursive: true });
    const t0 = Date.now();
    log(`fetching ${pkg} ${version}'s wheels into ${wheels} (once per machine) ...`);
    await pip(["download", "--no-deps", "--require-hashes", "-r", lock, "-d", wheels, ...PIP_TARGET], log);
    const work = `${tree}.build-${process.pid}`;
    fs.rmSync(work, { recursive: true, force: true });
    try {
        const site = path.join(work, SITE_PACKAGES);
        log(`installing ${pkg} ${version} for the image's python3 (offline) ...`);
        await pip(["install", "--no-index", "--find-links", wheels, "--no-deps", "--require-hashes", "-r", lock,
            "--no-compile", "--target", site, ...PIP_TARGET], log);
        // pip --target's console scripts name the host's interpreter: the image gets its own
        fs.rmSync(path.join(site, "bin"), { recursive: true, force: true });
        fs.mkdirSync(path.join(work, "usr/local/bin"), { recursive: true });
        for (const [name, text] of Object.entries(scripts)) fs.writeFileSync(path.join(work, "usr/local/bin", name), text, { mode: 0o755 });
        fs.rmSync(tree, { recursive: true, force: true });
        fs.renameSync(work, tree);
        log(`${pkg} ${version} installed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    } finally {
        fs.rmSync(work, { recursive: true, force: true });
    }
    return tree;
}

/** Where the host's unit tests keep installed trees (next to the wheel cache, outside the repository). */
export function hostTreeCacheDir(): string {
    return path.join(path.dirname(wheelCacheDir()), "trees");
}

/**
 * The site-packages of `pkg` `version` for the host's own python3, which must be a CPython 3.11 (the trees hold cp311
 * wheels): for unit tests that run the image's Python code on the host against the real package.
 */
export async function hostSitePackages(pkg: PyPackage, version: string, log: (s: string) => void = () => undefined): Promise<string> {
    const v = await run(["python3", "-c", "import sys, platform; print('%d.%d %s' % (sys.version_info[:2] + (platform.machine(),)))"]);
    if (v.stdout.trim() !== "3.11 x86_64") throw new Error(`the sim image's ${pkg} tree needs the host's python3 to be CPython 3.11 on x86_64, not ${v.stdout.trim() || v.stderr.trim()}`);
    return treeSitePackages(await ensureTree(pkg, version, hostTreeCacheDir(), log));
}

/** The Ray tree (ensureTree("ray", ...)). */
export async function ensureRayTree(version: string, cacheDir: string, log: (s: string) => void): Promise<string> {
    return ensureTree("ray", version, cacheDir, log);
}

/** `<tree>/usr/local/lib/python3.11/dist-packages`: what PYTHONPATH names to import the tree's packages. */
export function treeSitePackages(tree: string): string {
    return path.join(tree, SITE_PACKAGES);
}

/**
 * `base` plus one layer with `pkg` `version` (memoised in `made`, keyed by base and package): the tree as its own layer,
 * shared by every tag with that base. `docker` runs the docker CLI against the build host (the CLI copies from this machine).
 */
export async function pyLayer(docker: (args: string[]) => Promise<RunResult>, base: string, pkg: PyPackage, version: string, cacheDir: string,
    made: Map<string, string>, log: (s: string) => void): Promise<string> {
    const memo = `${base}|${pkg}|${version}`;
    const have = made.get(memo);
    if (have) return have;
    const tree = await ensureTree(pkg, version, cacheDir, log);
    const ref = `${base.split(":")[0]}-${pkg}:${version}-${crypto.createHash("sha256").update(base).digest("hex").slice(0, 8)}`;
    const ctr = `sv-build-${pkg}-${version.replace(/[^0-9a-zA-Z]/g, "_")}-${process.pid}`;
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
    log(`${pkg} ${version} layer committed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    made.set(memo, ref);
    return ref;
}

/**
 * `base` with the tag's Python packages from PyPI: transformers (its declared version), then Ray where it has one.
 * Throws naming the lock files when the pair pins a shared package differently.
 */
export async function pythonBase(docker: (args: string[]) => Promise<RunResult>, base: string,
    release: { transformers?: string; ray?: string | null }, cacheDir: string, made: Map<string, string>, log: (s: string) => void): Promise<string> {
    let from = base;
    if (release.transformers && release.ray) {
        const clash = conflictingPins(lockFile("transformers", release.transformers), lockFile("ray", release.ray));
        if (clash.length) throw new Error(`the sim image's transformers and Ray locks disagree (regenerate one with the other as constraints): ${clash.join("; ")}`);
    }
    if (release.transformers) from = await pyLayer(docker, from, "transformers", release.transformers, cacheDir, made, log);
    if (release.ray) from = await pyLayer(docker, from, "ray", release.ray, cacheDir, made, log);
    return from;
}
