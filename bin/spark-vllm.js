#!/usr/bin/env node
// Command-line entry: `spark-vllm plan --stack NAME`, `spark-vllm diff …`, `spark-vllm diagnose FILE|-`.
//
// Which code runs:
// - From the installed package (no TypeScript sources next to this file): the compiled JavaScript
//   in dist/, with no TypeScript loader.
// - In a checkout: dist/ when `npm run build` made it after the last change to any source it is
//   built from (components/, bin/, policies/); otherwise the TypeScript sources through tsx (a
//   devDependency), so an edit is never hidden by a stale build. SPARK_VLLM_CLI=source or =dist
//   forces one or the other.
"use strict";
const fs = require("fs");
const path = require("path");

const ROOT = path.join(__dirname, "..");
const DIST_CLI = path.join(ROOT, "dist", "bin", "cli.js");
const SOURCE_CLI = path.join(__dirname, "cli.ts");

/** Newest mtime (ms) of dir and everything under it (a deleted file shows as its folder's mtime); stops early past limit. */
function newestUnder(dir, limit) {
    let newest = 0;
    let entries;
    try {
        newest = fs.statSync(dir).mtimeMs;
        entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
        return 0;
    }
    for (const e of entries) {
        if (e.name === "node_modules" || e.name === "__pycache__") continue;
        const p = path.join(dir, e.name);
        const t = e.isDirectory() ? newestUnder(p, limit) : fs.statSync(p).mtimeMs;
        if (t > newest) newest = t;
        if (newest > limit) break;
    }
    return newest;
}

/** In a checkout: is dist/ built after the last change to its sources? */
function distIsFresh() {
    let built;
    try {
        built = fs.statSync(path.join(ROOT, "dist", ".build-stamp")).mtimeMs;
    } catch {
        return false;
    }
    if (!fs.existsSync(DIST_CLI)) return false;
    return ["components", "bin", "policies"].every(d => newestUnder(path.join(ROOT, d), built) <= built);
}

function entry() {
    const forced = process.env.SPARK_VLLM_CLI;
    if (forced === "dist") return DIST_CLI;
    if (forced !== "source" && (!fs.existsSync(SOURCE_CLI) || distIsFresh())) return DIST_CLI;
    require("tsx/cjs");
    return SOURCE_CLI;
}

require(entry())
    .main(process.argv.slice(2))
    .then(code => { process.exitCode = code; })
    .catch(err => { console.error(err instanceof Error ? err.message : String(err)); process.exitCode = 1; });
