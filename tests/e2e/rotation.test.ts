// Secret rotations on two simulated Sparks under the faithful engine (issue 14). A new spark-vllm:sshPrivateKey is
// a new `connection.privateKey` for every remote.Command; only `triggers` replace a command (pulumi-command v1.2.1
// provider/pkg/provider/common/inputs.go: `provider:"replaceOnChanges"`), so each is updated, and an update runs
// `create` again (remote/commandController.go Update). A launch keeps the identical process it finds running
// (components/plan/launches.ts keepIfSame): vLLM's and Ray's processes, the containers and the proxy stay as they are; the
// memory gates do not measure the memory vLLM holds, and the generated certificate is kept (components/plan/hostCommands.ts,
// proxyPlan.ts `update`).
// A new spark-vllm:hfToken is the weights commands' stdin (model.weights: download): they are updated, nothing else.
import { after, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as https from "node:https";
import * as os from "node:os";
import * as path from "node:path";
import { simSuite } from "./suite";
import { leftovers } from "../sim/stacks";
import { EngineEvent, Report, changes, destroy, up } from "../engine/engine";
import { loadState } from "../engine/state";
import { COMMAND } from "../../components/plan/resources";
import { containerName, proxyContainerName, resourceNames } from "../../components/plan/naming";

const N = resourceNames();
// The HF token reaches the weights commands' stdin only when they download (components/plan/hostCommands.ts weights). The sim's
// hosts hold the model already, so the download strategy reads the token and finds nothing to fetch (weights.py).
// A generated certificate: a rotation must keep the one clients pinned, and the proxy serving it.
const suite = simSuite("rotation", { weights: "download", endpoint: { tls: "generated" } });
const SSH_KEY = "spark-vllm:sshPrivateKey", HF_TOKEN = "spark-vllm:hfToken";
const work = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-rotation-"));
after(() => fs.rmSync(work, { recursive: true, force: true }));

/** A new ed25519 key pair in the test's directory: its private text, its public line and its SHA256 fingerprint. */
function keygen(name: string): { privateKey: string; publicLine: string; fingerprint: string } {
    const file = path.join(work, name);
    const r = spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", `rotation-${name}`, "-f", file]);
    assert.equal(r.status, 0, String(r.stderr));
    return { privateKey: fs.readFileSync(file, "utf8"), publicLine: fs.readFileSync(`${file}.pub`, "utf8").trim(), fingerprint: fingerprint(`${file}.pub`) };
}

/** `ssh-keygen -lf`: "256 SHA256:… comment (ED25519)", as sshd logs the key it accepted. */
function fingerprint(pubFile: string): string {
    const r = spawnSync("ssh-keygen", ["-lf", pubFile], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.split(" ")[1];
}

const authorizedKeys = "/root/.ssh/authorized_keys";
async function authorize(line: string): Promise<void> {
    for (const h of suite.sim.hosts) {
        const r = await suite.sim.exec(h.name, `printf '%s\\n' ${JSON.stringify(line)} >> ${authorizedKeys}`);
        assert.equal(r.code, 0, r.stderr);
    }
}
async function revoke(line: string): Promise<void> {
    for (const h of suite.sim.hosts) {
        const r = await suite.sim.exec(h.name, `grep -vxF ${JSON.stringify(line)} ${authorizedKeys} > ${authorizedKeys}.new; mv -f ${authorizedKeys}.new ${authorizedKeys}`);
        assert.equal(r.code, 0, r.stderr);
    }
}

/** The keys (by fingerprint) the host's sshd accepted since the log had `from` lines: `Accepted publickey for root from … ssh2: ED25519 SHA256:…`. */
function acceptedKeys(host: string, from: number): string[] {
    const lines = fs.readFileSync(path.join(suite.sim.host(host).root, "log/sshd.log"), "utf8").split("\n").slice(from);
    return lines.map(l => /\bAccepted publickey for \S+ from .* ssh2: \S+ (SHA256:\S+)/.exec(l)?.[1]).filter((f): f is string => !!f);
}
const logLength = (host: string) => fs.readFileSync(path.join(suite.sim.host(host).root, "log/sshd.log"), "utf8").split("\n").length - 1;

/** Every vLLM and Ray process of each host (its network namespace): PID and start time (/proc/PID/stat field 22, proc(5)). */
async function processes(): Promise<Record<string, string[]>> {
    const out: Record<string, string[]> = {};
    for (const h of suite.sim.hosts) {
        const r = await suite.sim.exec(h.name, "for p in $(pgrep -f --ns $$ --nslist net '[v]llm serve'; pgrep -x --ns $$ --nslist net 'gcs_server|raylet'); do " +
            "echo \"$(cat /proc/$p/comm) $p $(sed 's/.*) //' /proc/$p/stat | cut -d' ' -f20)\"; done");
        assert.equal(r.code, 0, r.stderr);
        out[h.name] = r.stdout.trim().split("\n").filter(Boolean).sort();
    }
    return out;
}

/** Each container's docker start time: a restart (docker restart, a replaced container) changes it. */
async function containerStarts(): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    const names = [...suite.sim.hosts.map(h => [h.name, containerName(h.name)]), [suite.sim.hosts[0].name, proxyContainerName()]];
    for (const [host, name] of names) {
        const r = await suite.sim.docker(host, ["inspect", "-f", "{{.Id}} {{.State.StartedAt}}", name]);
        assert.equal(r.code, 0, r.stderr);
        out[name] = r.stdout.trim();
    }
    return out;
}

/** GET /models over https trusting only `ca`, the certificate the first `up` gave clients to pin. */
function answers(report: Report, apiKey: string, ca: string): Promise<void> {
    return new Promise((resolve, reject) => {
        const req = https.request(`${report.outputs?.endpoint}/models`, { ca, headers: { Authorization: `Bearer ${apiKey}` }, timeout: 10_000 }, res => {
            let body = "";
            res.on("data", d => (body += d));
            res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}: ${body}`))));
        });
        req.on("error", reject);
        req.end();
    });
}

const commandNames = (statePath: string) => Object.values(loadState(statePath).resources).filter(e => e.type === COMMAND).map(e => e.name).sort();

describe("secret rotations on two simulated Sparks", () => {
    test("a new SSH key updates every remote command and restarts nothing; a new HF token updates only the weights commands", async () => {
        const keyA = { privateKey: fs.readFileSync(suite.sim.sshKeyFile, "utf8"), publicLine: "", fingerprint: "" };
        const pubA = spawnSync("ssh-keygen", ["-y", "-f", suite.sim.sshKeyFile], { encoding: "utf8" });
        assert.equal(pubA.status, 0, pubA.stderr);
        keyA.publicLine = pubA.stdout.trim();
        fs.writeFileSync(path.join(work, "a.pub"), `${keyA.publicLine}\n`);
        keyA.fingerprint = fingerprint(path.join(work, "a.pub"));
        const keyB = keygen("b");

        const stack = suite.stack("rotate", { secrets: { sshPrivateKey: keyA.privateKey, hfToken: "hf_tokenAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" } });
        assert.deepEqual(stack.secretKeys, [SSH_KEY, HF_TOKEN]);
        let revoked = false;
        try {
            const first = await up(stack);
            assert.equal(first.error, undefined, first.error);
            const apiKey = first.outputs?.apiKey as string;
            const pinned = first.outputs?.endpointCertificate as string;
            assert.match(pinned, /BEGIN CERTIFICATE/);
            await answers(first, apiKey, pinned);
            const commands = commandNames(stack.statePath);
            assert.ok(commands.includes(N.of("vllm-launch")) && commands.includes(N.of("ray-head")), commands.join(", "));
            // A running vLLM holds gpuMemoryUtilization × total of a Spark's unified memory (0.85 × 121.69 GiB); the
            // stand-in does not hold it, so the fault switch says so while it runs (tests/sim/README.md, memory_held_gib).
            for (const h of suite.sim.hosts) await suite.sim.setFaults(h.name, { memory_held_gib: 103.44 });
            const pids = await processes();
            assert.equal(pids["spark-a"].filter(p => p.startsWith("gcs_server ")).length, 1, JSON.stringify(pids));
            assert.equal(pids["spark-b"].filter(p => p.startsWith("raylet ")).length, 1, JSON.stringify(pids));
            assert.ok(pids["spark-a"].some(p => !/^(gcs_server|raylet) /.test(p)), `no vllm serve on the head: ${JSON.stringify(pids)}`);
            const started = await containerStarts();

            // The SSH key: B is authorized beside A on both hosts, then the stack's secret becomes B.
            await authorize(keyB.publicLine);
            stack.config[SSH_KEY] = keyB.privateKey;
            const rotationFrom = Object.fromEntries(suite.sim.hosts.map(h => [h.name, logLength(h.name)]));
            const kept: string[] = [];
            const rotated = await up(stack, { onEvent: (e: EngineEvent) => { if (e.kind === "end" && e.stdout?.includes("already runs as this launch declares it; kept")) kept.push(e.name); } });
            assert.equal(rotated.error, undefined, rotated.error);
            // While both are authorized, every command logs in with B: the provider's Go client offers the connection's
            // key before the agent's (connection.go SSHConfig), which the engine keeps (operations.ts remoteSshAttempts).
            for (const h of suite.sim.hosts) {
                const accepted = acceptedKeys(h.name, rotationFrom[h.name]);
                assert.ok(accepted.length > 0 && accepted.every(f => f === keyB.fingerprint), `${h.name}: sshd accepted ${accepted.join(", ")} during the rotation; B is ${keyB.fingerprint}`);
            }
            const ops = changes(rotated);
            assert.deepEqual(ops.filter(o => o.op !== "update").map(o => `${o.op} ${o.name}`), [], "only updates");
            assert.deepEqual(ops.map(o => o.name).sort(), commands, "every remote command is updated, and nothing else");
            assert.ok(ops.every(o => o.type === COMMAND && o.actions === 1), "each update ran its create once");
            assert.deepEqual(kept.sort(), [N.of("ray-head"), N.host("spark-b", "ray"), N.of("vllm-launch")].sort(), "the launches kept what runs");
            assert.deepEqual(await processes(), pids, "vLLM's and Ray's processes (pid, start time) are the same");
            assert.deepEqual(await containerStarts(), started, "no container was replaced or restarted");
            assert.equal(rotated.outputs?.endpointCertificateSha256, first.outputs?.endpointCertificateSha256, "the certificate clients pinned");
            await answers(rotated, apiKey, pinned);
            const again = await up(stack);
            assert.equal(again.error, undefined, again.error);
            assert.deepEqual(changes(again), [], "a further up changes nothing");

            // Only B from now on: A is no longer authorized. A new HF token updates the weights commands, over B.
            await revoke(keyA.publicLine);
            revoked = true;
            const logFrom = Object.fromEntries(suite.sim.hosts.map(h => [h.name, logLength(h.name)]));
            stack.config[HF_TOKEN] = "hf_tokenBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";
            const token = await up(stack);
            assert.equal(token.error, undefined, token.error);
            assert.deepEqual(changes(token).map(o => `${o.op} ${o.name}`).sort(), [`update ${N.host("spark-a", "weights")}`, `update ${N.host("spark-b", "weights")}`]);
            for (const h of suite.sim.hosts) {
                const accepted = acceptedKeys(h.name, logFrom[h.name]);
                assert.ok(accepted.length > 0 && accepted.every(f => f === keyB.fingerprint), `${h.name}: sshd accepted ${accepted.join(", ")}; B is ${keyB.fingerprint}`);
            }
            assert.deepEqual(await processes(), pids, "still the same vLLM and Ray");
            await answers(token, apiKey, pinned);
        } finally {
            // The Docker provider and the sim's own clients log in with A (the agent, the sim's ssh config): back for destroy.
            if (revoked) await authorize(keyA.publicLine);
            for (const h of suite.sim.hosts) await suite.sim.setFaults(h.name, null);
        }
        assert.deepEqual((await destroy(stack)).errors, []);
        assert.deepEqual(await leftovers(suite.sim), []);
    });
});

describe("an SSH key rotation under vLLM's own multi-node launch (mp)", () => {
    test("every remote command is updated; both vllm serve (the head's and the headless worker's) keep running, and the rendezvous port they hold is not asked for again", async () => {
        const keyC = keygen("c");
        const stack = suite.stack("rotate-mp", { vllm: { backend: "mp" }, secrets: { sshPrivateKey: fs.readFileSync(suite.sim.sshKeyFile, "utf8") } });
        try {
            const first = await up(stack);
            assert.equal(first.error, undefined, first.error);
            for (const h of suite.sim.hosts) await suite.sim.setFaults(h.name, { memory_held_gib: 103.44 });
            const pids = await processes();
            for (const h of suite.sim.hosts) assert.equal(pids[h.name].length, 1, `one vllm serve, no Ray, on ${h.name}: ${JSON.stringify(pids)}`);
            const started = await containerStarts();
            await authorize(keyC.publicLine);
            stack.config[SSH_KEY] = keyC.privateKey;
            const rotated = await up(stack);
            assert.equal(rotated.error, undefined, rotated.error);
            assert.deepEqual(changes(rotated).map(o => `${o.op} ${o.name}`).sort(), commandNames(stack.statePath).map(n => `update ${n}`));
            assert.deepEqual(await processes(), pids, "the same vllm serve on both hosts");
            assert.deepEqual(await containerStarts(), started);
            assert.deepEqual(changes(await up(stack)), []);
        } finally {
            for (const h of suite.sim.hosts) await suite.sim.setFaults(h.name, null);
        }
        assert.deepEqual((await destroy(stack)).errors, []);
        assert.deepEqual(await leftovers(suite.sim), []);
    });
});
