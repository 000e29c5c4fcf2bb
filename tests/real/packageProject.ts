// What the tests of the component package (provider/) from other languages share: where the language hosts are, and
// a copy of an example with the package added (tests/real/languages.test.ts previews, tests/e2e/python.test.ts deploys).
import * as assert from "node:assert/strict";
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as path from "path";
import type { RealPulumi } from "../engine/real";

const REPO = path.join(__dirname, "..", "..");
export const LANGUAGES = ["python", "yaml", "go"] as const;
export type Language = (typeof LANGUAGES)[number];
/** The Python SDK from PyPI: `pulumi` 3.276.0 is not published there; 3.272.0 is the newest (`pip index versions pulumi`, 2026-12-04). */
export const PYTHON_PULUMI = "pulumi==3.272.0";

/**
 * A language host where the CLI looks for it: beside the CLI, or on PATH (pulumi/pulumi 1b5949891b3c sdk/go/common/
 * workspace/plugins.go GetPluginPath); the Python one needs its pulumi-language-python-exec beside it (same commit,
 * sdk/python/cmd/pulumi-language-python/main.go: "missing executor").
 */
export function languageHost(language: Language, real: RealPulumi | undefined): string | undefined {
    const dirs = [real?.dir, ...(process.env.PATH ?? "").split(":")].filter((d): d is string => !!d);
    for (const dir of dirs) {
        const host = path.join(dir, `pulumi-language-${language}`);
        if (fs.existsSync(host) && (language !== "python" || fs.existsSync(path.join(dir, "pulumi-language-python-exec")))) return host;
    }
    return undefined;
}

/** One line naming each language host found, or that it is not. */
export function languageHostsLine(real: RealPulumi | undefined): string {
    return `language hosts: ${LANGUAGES.map(l => `${l} ${languageHost(l, real) ?? "not found"}`).join("; ")}`;
}

/**
 * Fills `dir` with examples/<language> and adds the package: a venv with the SDK from PyPI first for Python (the
 * `virtualenv: venv` of its Pulumi.yaml; `package add` installs the generated SDK into it). Needs PyPI (Python) or
 * the Go module proxy (Go). `run` runs the CLI in `dir`.
 */
export function addPackage(language: Language, dir: string, run: (args: string[]) => { status: number | null; output: string }): void {
    fs.cpSync(path.join(REPO, "examples", language), dir, { recursive: true });
    if (language === "python") {
        const venv = spawnSync("sh", ["-c", `python3 -m venv venv && venv/bin/pip install -q '${PYTHON_PULUMI}'`], { cwd: dir, encoding: "utf8" });
        assert.equal(venv.status, 0, `${venv.stdout}${venv.stderr}`);
    }
    const add = run(["package", "add", path.join(REPO, "provider")]);
    assert.equal(add.status, 0, add.output);
    assert.match(add.output, /Added package spark-vllm/);
}

/** provider/package.json "main" is the build (../dist/provider/index.js): build what this checkout has. */
export function buildPackage(): void {
    const build = spawnSync("node", [path.join(REPO, "scripts/build.js")], { cwd: REPO, encoding: "utf8" });
    assert.equal(build.status, 0, `${build.stdout}${build.stderr}`);
}
