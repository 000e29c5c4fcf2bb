// What the tests on the real Pulumi CLI share (tests/real/preview.test.ts, tests/real/languages.test.ts): a project
// folder with its own file backend, the offline environment, and the CLI run in a network namespace of its own.
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as path from "path";
import * as yaml from "js-yaml";
import type { RealPulumi } from "../engine/real";

const REPO = path.join(__dirname, "..", "..");

/**
 * Offline: the file backend in `dir`, a passphrase, no update check and no plugin download (a missing plugin is an
 * error: docs/toolchain.md), the real CLI first on PATH, and the program transpiled without a type check
 * (PULUMI_NODEJS_TRANSPILE_ONLY: the Node.js language host's ts-node in transpile-only mode).
 */
export function offlineEnv(real: RealPulumi, dir: string, passphrase: string): NodeJS.ProcessEnv {
    return {
        ...process.env, PATH: `${real.dir}:${path.join(REPO, "node_modules/.bin")}:${process.env.PATH}`,
        PULUMI_BACKEND_URL: `file://${path.join(dir, "backend")}`, PULUMI_CONFIG_PASSPHRASE: passphrase,
        PULUMI_SKIP_UPDATE_CHECK: "true", PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true", PULUMI_NODEJS_TRANSPILE_ONLY: "true",
    };
}

/**
 * The CLI in `dir`. `offline` (the default): in a network namespace of its own with loopback up, so nothing but
 * loopback can be reached (the CLI talks to its plugins over loopback; the stacks name real machines). Needs root.
 */
export function runPulumi(real: RealPulumi, dir: string, env: NodeJS.ProcessEnv, args: string[], offline = true): { status: number | null; output: string } {
    const argv = [real.pulumi, "--cwd", dir, "--non-interactive", ...args];
    const options = { env, encoding: "utf8" as const, maxBuffer: 64 << 20, timeout: 300_000 };
    const r = offline
        ? spawnSync("unshare", ["--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", ...argv], options)
        : spawnSync(argv[0], argv.slice(1), options);
    return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

/**
 * Fills `dir` with a project whose Pulumi.yaml runs the repository's program (index.ts), the stack's file (the
 * committed `Pulumi.<stack>.yaml`, or one holding `config`) and an empty backend folder.
 */
export function typescriptProject(dir: string, stack: string, config?: Record<string, unknown>): void {
    const doc = yaml.load(fs.readFileSync(path.join(REPO, "Pulumi.yaml"), "utf8")) as Record<string, unknown>;
    doc.main = path.relative(dir, path.join(REPO, String(doc.main)));
    fs.writeFileSync(path.join(dir, "Pulumi.yaml"), yaml.dump(doc));
    stackFile(dir, stack, config);
}

/** The stack's file in `dir` (the committed one, or one holding `config`) and an empty backend folder. */
export function stackFile(dir: string, stack: string, config?: Record<string, unknown>): void {
    const file = path.join(dir, `Pulumi.${stack}.yaml`);
    if (config) fs.writeFileSync(file, yaml.dump({ config }));
    else fs.copyFileSync(path.join(REPO, `Pulumi.${stack}.yaml`), file);
    fs.mkdirSync(path.join(dir, "backend"));
}
