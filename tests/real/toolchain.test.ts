// The real Pulumi CLI built by `npm run toolchain`, run through `npm run pulumi` with the project's offline
// settings. Needs the toolchain's `pulumi` (build it first: `npm run toolchain`); no network, no host, no root.
import { after, test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

const ROOT = path.join(__dirname, "..", "..");
const PULUMI_VERSION: string = JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules/@pulumi/pulumi/package.json"), "utf8")).version;

type Env = Record<string, string | undefined>;
function run(cmd: string, args: string[], env: Env = {}) {
    const merged: Env = { ...process.env, ...env };
    for (const [k, v] of Object.entries(env)) if (v === undefined) delete merged[k];
    const r = spawnSync(cmd, args, { cwd: ROOT, env: merged as NodeJS.ProcessEnv, encoding: "utf8", timeout: 120_000 });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr, all: r.stdout + r.stderr };
}
const pulumi = (args: string[], env: Env = {}) => run("npm", ["run", "-s", "pulumi", "--", ...args], env);
const temps: string[] = [];
const tmp = (prefix: string) => { const d = fs.mkdtempSync(path.join(os.tmpdir(), `spark-vllm-${prefix}-`)); temps.push(d); return d; };
after(() => { for (const d of temps) fs.rmSync(d, { recursive: true, force: true }); });
const toolchainDir = () => run("bash", ["scripts/toolchain.sh", "--dir"]).stdout.trim();

test("npm run pulumi -- version prints the version of the installed @pulumi/pulumi", () => {
    const r = pulumi(["version"]);
    assert.equal(r.status, 0, r.all);
    assert.equal(r.stdout.trim(), `v${PULUMI_VERSION}`);
});

test("npm run pulumi defaults to a file backend in the git-ignored .pulumi-state/, and a caller's PULUMI_BACKEND_URL wins", () => {
    const home = tmp("home");
    const byDefault = pulumi(["whoami", "--verbose"], { PULUMI_BACKEND_URL: undefined, PULUMI_HOME: home });
    assert.equal(byDefault.status, 0, byDefault.all);
    assert.match(byDefault.stdout, new RegExp(`Backend URL: file://${ROOT}/\\.pulumi-state\\n`));
    assert.match(fs.readFileSync(path.join(ROOT, ".gitignore"), "utf8"), /^\.pulumi-state\/$/m);
    const state = tmp("state");
    const given = pulumi(["whoami", "--verbose"], { PULUMI_BACKEND_URL: `file://${state}`, PULUMI_HOME: home });
    assert.equal(given.status, 0, given.all);
    assert.match(given.stdout, new RegExp(`Backend URL: file://${state}\\n`));
});

test("offline: stack init with passphrase secrets, a secret config value stays out of the stack file and the state", () => {
    const project = tmp("project");
    const state = tmp("state");
    fs.copyFileSync(path.join(ROOT, "Pulumi.yaml"), path.join(project, "Pulumi.yaml"));
    const env = { PULUMI_BACKEND_URL: `file://${state}`, PULUMI_HOME: tmp("home"), PULUMI_CONFIG_PASSPHRASE: undefined };
    const secret = "not-a-key-7f0c2d";
    for (const args of [
        ["stack", "init", "offline", "--secrets-provider", "passphrase", "--non-interactive"],
        ["config", "set", "--secret", "spark-vllm:sshPrivateKey", secret, "--stack", "offline"],
    ]) {
        const r = pulumi(["--cwd", project, ...args], env);
        assert.equal(r.status, 0, r.all);
    }
    const stackFile = fs.readFileSync(path.join(project, "Pulumi.offline.yaml"), "utf8");
    assert.match(stackFile, /spark-vllm:sshPrivateKey:\n\s+secure: v1:/);
    assert.ok(!stackFile.includes(secret), stackFile);
    const files = fs.readdirSync(state, { recursive: true, withFileTypes: true }).filter(e => e.isFile());
    assert.ok(files.length > 0, "the file backend recorded the stack");
    for (const f of files) assert.ok(!fs.readFileSync(path.join(f.parentPath, f.name), "utf8").includes(secret), f.name);
    const back = pulumi(["--cwd", project, "config", "get", "spark-vllm:sshPrivateKey", "--stack", "offline"], env);
    assert.equal(back.status, 0, back.all);
    assert.equal(back.stdout.trim(), secret, "decrypted with the wrapper's local-only default passphrase");
    const wrong = pulumi(["--cwd", project, "config", "get", "spark-vllm:sshPrivateKey", "--stack", "offline"],
        { ...env, PULUMI_CONFIG_PASSPHRASE: "another passphrase" });
    assert.notEqual(wrong.status, 0, "a caller's passphrase replaces the default");
    assert.match(wrong.all, /incorrect passphrase/);
});

test("the toolchain directory: a version-keyed folder in the XDG cache by default, SPARK_VLLM_TOOLCHAIN_DIR overrides, never inside the repository", () => {
    const cache = tmp("xdg");
    const dflt = run("bash", ["scripts/toolchain.sh", "--dir"], { XDG_CACHE_HOME: cache, SPARK_VLLM_TOOLCHAIN_DIR: undefined });
    assert.equal(dflt.stdout.trim(), path.join(cache, "spark-vllm/toolchain", `pulumi-${PULUMI_VERSION}.command-1.2.1.random-4.21.1.docker-5.1.0`));
    const given = run("bash", ["scripts/toolchain.sh", "--dir"], { SPARK_VLLM_TOOLCHAIN_DIR: "/opt/elsewhere" });
    assert.equal(given.stdout.trim(), "/opt/elsewhere");
    const inside = run("bash", ["scripts/toolchain.sh"], { SPARK_VLLM_TOOLCHAIN_DIR: path.join(ROOT, "toolchain-bin") });
    assert.equal(inside.status, 1);
    assert.match(inside.stderr, /is inside the repository; choose a folder outside it/);
    assert.ok(!fs.existsSync(path.join(ROOT, "toolchain-bin")));
});

test("npm run toolchain skips a binary already built and names the module and the command the proxy refuses", () => {
    const dir = tmp("toolchain");
    const built = path.join(toolchainDir(), "pulumi");
    try { fs.linkSync(built, path.join(dir, "pulumi")); } catch { fs.copyFileSync(built, path.join(dir, "pulumi")); fs.chmodSync(path.join(dir, "pulumi"), 0o755); }
    const badCommit = "0".repeat(40);
    const r = run("bash", ["scripts/toolchain.sh"], {
        SPARK_VLLM_TOOLCHAIN_DIR: dir,
        SPARK_VLLM_TOOLCHAIN_ONLY: "pulumi pulumi-language-nodejs",
        SPARK_VLLM_LANGUAGE_HOST_REF: badCommit,
    });
    assert.equal(r.status, 1, r.all);
    assert.match(r.stdout, new RegExp(`toolchain: pulumi v${PULUMI_VERSION} already built`));
    const module = "github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3";
    assert.ok(r.stderr.includes(`the Go module proxy cannot give ${module} (at ${badCommit})`), r.stderr);
    assert.ok(r.stderr.includes(`\`go mod download -json ${module}@${badCommit}\``), r.stderr);
    assert.match(r.stderr, /1 failure\(s\)/);
    assert.equal(r.stdout.trim().split("\n").pop(), dir, "prints the directory");
    assert.ok(!fs.existsSync(path.join(dir, "pulumi-language-nodejs")));
});

test("random is pinned to the provider built here (4.21.1); the docker provider built at 5.1.0 lacks nothing the program uses from npm's 5.2.0", () => {
    // No source of pulumi-docker 5.2.0 is to be had here (the fetched repository's last tag is v5.1.0), and npm has no
    // @pulumi/docker 5.1.0: the 5.1.0 provider runs from PATH (the CLI warns it is older). 5.2.0 adds one input over
    // 5.1.0, Container.deviceCgroupRules.
    assert.equal(JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules/@pulumi/random/package.json"), "utf8")).version, "4.21.1");
    const dts = fs.readFileSync(path.join(ROOT, "node_modules/@pulumi/docker/container.d.ts"), "utf8");
    assert.match(dts, /deviceCgroupRules/, "the input the pin leaves out exists in the installed SDK");
    const sources = ["index.ts", ...fs.readdirSync(path.join(ROOT, "components")).filter(f => f.endsWith(".ts")).map(f => `components/${f}`)];
    for (const f of sources) assert.ok(!fs.readFileSync(path.join(ROOT, f), "utf8").includes("deviceCgroupRules"), f);
});

test("the policy pack needs no node_modules of its own: its runner and @pulumi/policy resolve from the repository's", () => {
    // The language host starts a Node pack by running `node -e "require.resolve('@pulumi/pulumi/cmd/run-policy-pack')"`
    // in the pack's folder (pulumi/pulumi sdk/nodejs/cmd/pulumi-language-nodejs/main.go, RunPlugin and locateModule);
    // Node walks up from policies/ to the repository's node_modules.
    const node = path.join(ROOT, "node_modules/.bin/node");
    for (const mod of ["@pulumi/pulumi/cmd/run-policy-pack", "@pulumi/policy"]) {
        const r = spawnSync(node, ["-e", `console.log(require.resolve(${JSON.stringify(mod)}))`], { cwd: path.join(ROOT, "policies"), encoding: "utf8" });
        assert.equal(r.status, 0, r.stderr);
        const resolved = fs.realpathSync(r.stdout.trim());
        assert.equal(resolved, fs.realpathSync(require.resolve(mod, { paths: [ROOT] })), mod);
    }
    assert.ok(!fs.existsSync(path.join(ROOT, "policies/node_modules")));
});
