#!/usr/bin/env node
// Builds the package into dist/: the TypeScript (components, bin, policies) compiled to JavaScript
// with declarations by `tsc -p tsconfig.build.json`, plus the files the compiled code reads at run
// time: the helper program (components/hostProgram → dist/components/hostProgram, where plan/toolsProgram.js looks for it
// relative to its own __dirname) and the policy pack's PulumiPolicy.yaml. Runs on `npm run build`,
// and through `prepare` on `npm install` in a checkout, `npm pack` and `npm publish`.
"use strict";
const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");

const ROOT = path.join(__dirname, "..");
const DIST = path.join(ROOT, "dist");
/** Written last; its mtime is the build's start, so bin/spark-vllm.js can tell a stale build in a checkout. */
const STAMP = path.join(DIST, ".build-stamp");

/** Helper-program files that stay out of the package: tests and Python caches. */
function shipped(name, isDir) {
    if (isDir) return !["tests", "test", "__pycache__"].includes(name);
    return !/^test_.*\.py$|_test\.py$|\.py[co]$/.test(name) && name !== ".DS_Store";
}

function copyTree(from, to) {
    fs.mkdirSync(to, { recursive: true });
    for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
        if (!shipped(entry.name, entry.isDirectory())) continue;
        const src = path.join(from, entry.name);
        const dst = path.join(to, entry.name);
        if (entry.isDirectory()) copyTree(src, dst);
        else if (entry.isFile()) fs.copyFileSync(src, dst);
    }
}

function main() {
    const started = new Date();
    // Built beside dist/ and swapped in at the end, so a CLI started meanwhile finds the old build or the new one.
    const out = path.join(ROOT, `dist.build-${process.pid}`);
    fs.rmSync(out, { recursive: true, force: true });
    try {
        const tsc = require.resolve("typescript/bin/tsc", { paths: [ROOT] });
        const run = spawnSync(process.execPath, [tsc, "-p", path.join(ROOT, "tsconfig.build.json"), "--outDir", out], { cwd: ROOT, stdio: "inherit" });
        if (run.status !== 0) {
            console.error(`build: tsc -p tsconfig.build.json failed (exit ${run.status ?? run.signal})`);
            return 1;
        }
        copyTree(path.join(ROOT, "components", "hostProgram"), path.join(out, "components", "hostProgram"));
        // The policy pack, runnable from the installed package: pulumi preview --policy-pack node_modules/spark-vllm/dist/policies
        fs.copyFileSync(path.join(ROOT, "policies", "PulumiPolicy.yaml"), path.join(out, "policies", "PulumiPolicy.yaml"));
        fs.writeFileSync(
            path.join(out, "policies", "package.json"),
            JSON.stringify({ name: "spark-vllm-policies", private: true, description: "CrossGuard policy pack spark-vllm (compiled)", main: "index.js" }, null, 2) + "\n",
        );
        const stamp = path.join(out, path.basename(STAMP));
        fs.writeFileSync(stamp, "");
        fs.utimesSync(stamp, started, started);
        fs.rmSync(DIST, { recursive: true, force: true });
        fs.renameSync(out, DIST);
        return 0;
    } finally {
        fs.rmSync(out, { recursive: true, force: true });
    }
}

process.exitCode = main();
