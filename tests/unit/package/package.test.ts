// The package's shape: the root exports what DESIGN.md promises; package.json points at the compiled
// JavaScript and its declarations; bin/spark-vllm.js picks the compiled CLI or the sources as its header
// says. tests/unit/package/package-consumer.test.ts installs the packed package and uses it.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as spark from "../../../components";

const ROOT = path.join(__dirname, "..", "..", "..");
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));

test("the package root exports the cluster component, the config reader, the spec parser, the planner and diagnose", () => {
    for (const name of ["SparkCluster", "readConfig", "parseSpec", "planCluster", "diagnose", "planMemory", "findModel"])
        assert.equal(typeof (spark as Record<string, unknown>)[name], "function", name);
    assert.equal(spark.CONFIG_NAMESPACE, "spark-vllm");
    const d = spark.diagnose("(APIServer pid=1) OSError: [Errno 98] Address already in use\n");
    assert.deepEqual(Object.keys(d ?? {}).sort(), ["hint", "kind", "line"]);
    assert.equal(d?.kind, "port-in-use");
});

test("package.json: main, types and exports are the compiled package root; the CLI and the files it ships", () => {
    assert.equal(pkg.main, "dist/components/index.js");
    assert.equal(pkg.types, "dist/components/index.d.ts");
    assert.deepEqual(pkg.exports["."], { types: "./dist/components/index.d.ts", default: "./dist/components/index.js" });
    assert.deepEqual(pkg.bin, { "spark-vllm": "bin/spark-vllm.js" });
    assert.ok(pkg.files.includes("dist/") && pkg.files.includes("bin/spark-vllm.js") && pkg.files.includes("docs/"));
    assert.equal(pkg.scripts.prepare, "node scripts/build.js", "npm pack, npm publish and installs from git build dist/");
    // The compiled root is components/index.ts: tsconfig.build.json compiles components/, bin/, policies/ and provider/
    // (the component package's entry, provider/package.json "main": ../dist/provider/index.js) into dist/.
    const build = JSON.parse(fs.readFileSync(path.join(ROOT, "tsconfig.build.json"), "utf8"));
    assert.equal(build.compilerOptions.outDir, "dist");
    assert.equal(build.compilerOptions.declaration, true);
    assert.deepEqual(build.include, ["components/**/*.ts", "bin/**/*.ts", "policies/**/*.ts", "provider/**/*.ts"]);
    assert.equal(JSON.parse(fs.readFileSync(path.join(ROOT, "provider", "package.json"), "utf8")).main, "../dist/provider/index.js");
    assert.ok(!("tsx" in pkg.dependencies), "no TypeScript loader at run time: tsx is a devDependency");
    assert.ok(fs.readFileSync(path.join(ROOT, ".gitignore"), "utf8").split("\n").includes("dist/"));
});

/** A checkout (or installed package) in miniature: bin/spark-vllm.js with stub CLIs that say which one ran. */
function miniature(opts: { sources: boolean; built?: boolean }): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-bin-"));
    fs.mkdirSync(path.join(dir, "bin"));
    fs.copyFileSync(path.join(ROOT, "bin", "spark-vllm.js"), path.join(dir, "bin", "spark-vllm.js"));
    const stub = (which: string) => `exports.main = async () => { console.log(${JSON.stringify(which)}); return 0; };\n`;
    if (opts.sources) {
        fs.writeFileSync(path.join(dir, "bin", "cli.ts"), `export const main = async (): Promise<number> => { console.log("source"); return 0; };\n`);
        for (const d of ["components", "policies"]) fs.mkdirSync(path.join(dir, d));
        fs.writeFileSync(path.join(dir, "components", "spec.ts"), "export {};\n");
        fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"), "dir");
    }
    if (opts.built !== false) {
        fs.mkdirSync(path.join(dir, "dist", "bin"), { recursive: true });
        fs.writeFileSync(path.join(dir, "dist", "bin", "cli.js"), stub("dist"));
        fs.writeFileSync(path.join(dir, "dist", ".build-stamp"), "");
    }
    // Everything made before the build stamp, as after `npm run build`.
    const past = new Date(Date.now() - 60_000);
    for (const f of ["bin/spark-vllm.js", "bin/cli.ts", "components/spec.ts", "components", "policies", "bin"]) if (fs.existsSync(path.join(dir, f))) fs.utimesSync(path.join(dir, f), past, past);
    return dir;
}

function which(dir: string, env: Record<string, string> = {}): string {
    const r = spawnSync(process.execPath, [path.join(dir, "bin", "spark-vllm.js")], { encoding: "utf8", env: { ...process.env, SPARK_VLLM_CLI: "", ...env } });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim();
}

test("bin/spark-vllm.js: the installed package runs dist/; a checkout runs dist/ only while it is newer than every source", () => {
    const installed = miniature({ sources: false });
    const checkout = miniature({ sources: true });
    const unbuilt = miniature({ sources: true, built: false });
    try {
        assert.equal(which(installed), "dist", "installed: the compiled CLI");
        assert.equal(which(checkout), "dist", "checkout, built after the last change: the compiled CLI");
        assert.equal(which(unbuilt), "source", "checkout before any build: the sources through tsx");
        assert.equal(which(checkout, { SPARK_VLLM_CLI: "source" }), "source", "forced");
        fs.writeFileSync(path.join(checkout, "components", "spec.ts"), "export const changed = 1;\n");
        assert.equal(which(checkout), "source", "a source changed after the build: the sources, not the stale build");
        assert.equal(which(checkout, { SPARK_VLLM_CLI: "dist" }), "dist", "forced");
        // A source deleted after the build: its folder's mtime says so.
        const deleted = miniature({ sources: true });
        const built = new Date(Date.now() - 10_000);
        fs.utimesSync(path.join(deleted, "dist", ".build-stamp"), built, built);
        try {
            assert.equal(which(deleted), "dist");
            fs.rmSync(path.join(deleted, "components", "spec.ts"));
            assert.equal(which(deleted), "source", "a source deleted after the build: the sources");
        } finally {
            fs.rmSync(deleted, { recursive: true, force: true });
        }
    } finally {
        for (const d of [installed, checkout, unbuilt]) fs.rmSync(d, { recursive: true, force: true });
    }
});
