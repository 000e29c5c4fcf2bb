// Shared hosts (issue 15): every container and process carries its stack; a host another stack holds is refused
// before anything of ours is written or created. The check itself runs for real here (the shipped helper program
// under the tools command's own shell, a stand-in `docker` that answers as Docker's CLI would).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { toolsPath } from "../../../components/plan/toolsProgram";
import { plannedResources } from "../../../components/plan/resources";
import { OWNER_ENV, OWNER_LABELS } from "../../../components/plan/ownership";
import { toolsProgram } from "../../../components/plan/toolsProgram";
import { PROVIDER_DEFAULT_PULL_MINUTES, pullTimeoutMinutes } from "../../../components/knowledge/imagePull";
import { evaluateWithMocks } from "../../harness/mocks";
import { clusterConfig, rawConfig } from "../../fixtures";
import { resourceNames } from "../../../components/plan/naming";

const owner = { project: "spark-vllm", stack: "qwen" };
const n = resourceNames();

test("every container carries the stack's labels, and every process in it the stack (its environment)", () => {
    const plan = planCluster(parseSpec(rawConfig(2)), "x", { owner });
    for (const h of plan.hosts) {
        const labels = Object.fromEntries(h.container.labels);
        assert.equal(labels["spark-vllm.project"], "spark-vllm");
        assert.equal(labels["spark-vllm.stack"], "qwen");
        assert.equal(labels["spark-vllm.model"], "Qwen/Qwen3.5-122B-A10B-FP8");
        // Not the served name: renaming it would replace the container and restart Ray for a name.
        assert.equal(labels["spark-vllm.served-name"], undefined);
        assert.deepEqual(h.container.env.find(([k]) => k === OWNER_ENV), [OWNER_ENV, "spark-vllm/qwen"]);
        // No time in any input: a healthy re-run must stay a no-op ("since" is Docker's own Created).
        assert.ok(!h.container.labels.some(([k]) => /since|time|date/.test(k)));
        assert.match(h.preflight.create, /"owner":\{"project":"spark-vllm","stack":"qwen"\}/);
        assert.match(h.memoryGate.create, /"labels":\{"spark-vllm.project":"spark-vllm","spark-vllm.stack":"qwen"/);
    }
    const proxy = Object.fromEntries(plan.proxy.container.labels.map(l => [l.label, l.value]));
    assert.equal(proxy["spark-vllm.role"], "proxy");
    assert.equal(proxy["spark-vllm.stack"], "qwen");
    assert.equal(proxy["spark-vllm.served-name"], "qwen3.5-122b");
    // The planned docker.Container inputs (what the components register) carry them as well.
    const planned = plannedResources(plan).filter(r => r.type === "docker:index/container:Container");
    assert.equal(planned.length, 3);
    for (const r of planned) assert.ok((r.inputs as any).labels.some((l: any) => l.label === "spark-vllm.stack" && l.value === "qwen"), r.name);
});

test("the label keys are the ones the host-side check reads", () => {
    const py = fs.readFileSync(path.join(__dirname, "../../../components/hostProgram/spark_vllm/ownership.py"), "utf8");
    const m = /^LABELS = (\{[^}]*\})/m.exec(py);
    assert.ok(m, "LABELS in ownership.py");
    assert.deepEqual(JSON.parse(m[1].replace(/\n\s*/g, " ")), OWNER_LABELS);
});

/** Runs the tools command's create as the SSH session would, with `docker` answering `containers` (JSON of inspect). */
function installTools(stack: string, containers: unknown[]) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-owner-"));
    const bin = path.join(dir, "bin");
    fs.mkdirSync(bin);
    fs.writeFileSync(path.join(dir, "inspect.json"), JSON.stringify(containers));
    // `docker ps -aq --filter label=…` prints one id per container; `docker inspect IDS` prints their JSON.
    fs.writeFileSync(path.join(bin, "docker"), `#!/bin/sh
case "$1" in
  ps) python3 -c 'import json,sys; [print(i) for i in range(len(json.load(open(sys.argv[1]))))]' ${dir}/inspect.json ;;
  inspect) cat ${dir}/inspect.json ;;
  cp) cat > /dev/null ;;
  *) exit 1 ;;
esac
`, { mode: 0o755 });
    const raw = { ...rawConfig(1), logDir: path.join(dir, "log") };
    const plan = planCluster(parseSpec(raw), toolsProgram(), { owner: { project: "spark-vllm", stack } });
    const r = spawnSync("bash", ["-c", plan.hosts[0].tools.create], {
        input: plan.hosts[0].tools.packed, encoding: "utf8", env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
    });
    const installed = fs.existsSync(toolsPath(plan.spec));
    const leftovers = fs.existsSync(raw.logDir) ? fs.readdirSync(raw.logDir) : [];
    fs.rmSync(dir, { recursive: true, force: true });
    return { ...r, installed, leftovers };
}

const heldBy = (stack: string) => [{
    Name: "/spark-vllm-spark-a", Created: "2026-12-01T04:10:07.123456789Z",
    Config: { Labels: { "spark-vllm.project": "spark-vllm", "spark-vllm.stack": stack, "spark-vllm.model": "openai/gpt-oss-120b" } },
}, {
    Name: "/spark-vllm.proxy", Created: "2026-12-01T04:12:00Z",
    Config: { Labels: { "spark-vllm.project": "spark-vllm", "spark-vllm.stack": stack, "spark-vllm.model": "openai/gpt-oss-120b", "spark-vllm.served-name": "gpt-oss" } },
}];

test("the helper program is not installed on a host another stack holds: the refusal names it, its model, since when, the fix", () => {
    const r = installTools("qwen", heldBy("gpt"));
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.equal(r.stderr.trim(), "spark-a: held by stack gpt (model openai/gpt-oss-120b, served as gpt-oss) since 2026-12-01 04:10:07 UTC " +
        "(containers spark-vllm-spark-a, spark-vllm.proxy): run `pulumi destroy -s gpt` first to switch this host to stack qwen, or give stack qwen other hosts");
    assert.equal(r.installed, false);
    assert.deepEqual(r.leftovers, [], "the temporary copy is removed");
});

test("our own stack's containers do not stop the install", () => {
    const r = installTools("gpt", heldBy("gpt"));
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.installed, true);
});

test("under the program: labels name the stack being deployed; the vLLM image pulls get customTimeouts sized from the image", () => {
    const { resources, error } = evaluateWithMocks(clusterConfig(2), { stack: "variant-b" });
    assert.equal(error, undefined);
    const containers = resources.filter(r => r.type === "docker:index/container:Container");
    assert.equal(containers.length, 3);
    for (const c of containers) assert.ok(c.inputs.labels.some((l: any) => l.label === "spark-vllm.stack" && l.value === "variant-b"), c.name);
    const pulls = resources.filter(r => r.type === "docker:index/remoteImage:RemoteImage" && r.name !== n.of("proxy-pull"));
    assert.equal(pulls.length, 2);
    for (const p of pulls) assert.deepEqual(p.customTimeouts, { create: "40m", update: "", delete: "" }, p.name);
});

test("pull timeouts: an unknown image is sized as the largest published vLLM image; never below the provider's 20 minutes", () => {
    assert.equal(pullTimeoutMinutes("198.18.0.1:5000/vllm-sim:0.17.1"), 40);
    assert.equal(pullTimeoutMinutes("vllm/vllm-openai:latest"), 39);
    assert.ok(pullTimeoutMinutes("vllm/vllm-openai:latest@sha256:" + "ab".repeat(32)) >= PROVIDER_DEFAULT_PULL_MINUTES);
});

/** Runs the tools command's delete (as destroy does, last) with `docker ps` answering `running` ids; what is left. */
function removeTools(running: string[]) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-owner-"));
    const bin = path.join(dir, "bin"), log = path.join(dir, "log");
    fs.mkdirSync(bin);
    fs.writeFileSync(path.join(bin, "docker"), `#!/bin/sh\necho "$@" >> ${dir}/calls\n${running.map(id => `echo ${id}`).join("\n")}\n`, { mode: 0o755 });
    const plan = planCluster(parseSpec({ ...rawConfig(1), logDir: log }), "x", { owner });
    fs.mkdirSync(path.join(log, "proxy"), { recursive: true });
    for (const f of ["spark_vllm_tools.py", "vllm-serve.log", "vllm-serve.log.prev", "vllm-serve.pid", "serving-proof.json", "proxy/nginx.conf"]) fs.writeFileSync(path.join(log, f), "x");
    const r = spawnSync("bash", ["-c", plan.hosts[0].tools.delete!], { encoding: "utf8", env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
    const left = fs.readdirSync(log).sort();
    const calls = fs.readFileSync(path.join(dir, "calls"), "utf8");
    fs.rmSync(dir, { recursive: true, force: true });
    return { status: r.status, left, calls };
}

test("destroy leaves nothing of the stack under logDir once its containers are gone; an upgrade of the program keeps a live vLLM's log", () => {
    const gone = removeTools([]);
    assert.equal(gone.status, 0);
    assert.deepEqual(gone.left, []);
    assert.equal(gone.calls.trim(), "ps -aq --filter label=spark-vllm.project=spark-vllm --filter label=spark-vllm.stack=qwen");
    const live = removeTools(["3f2a"]);
    assert.equal(live.status, 0);
    assert.deepEqual(live.left, ["proxy", "serving-proof.json", "vllm-serve.log", "vllm-serve.log.prev", "vllm-serve.pid"], "only the program goes");
});
