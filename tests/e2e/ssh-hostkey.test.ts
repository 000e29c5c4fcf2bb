// End to end: pinned SSH host keys (hosts[].ssh.hostKey) on two simulated Sparks. With each sshd's real key the
// cluster deploys; with another key pinned for the worker (an impostor at its address), `up` fails on that host's
// first connection, before any session opens there, for remote commands and for the Docker provider's ssh alike.
import { describe, test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { failure, simSuite } from "./suite";
import { leftovers } from "../sim/stacks";
import { Stack, changes, destroy, up } from "../engine/engine";
import { loadState } from "../engine/state";
import { pullImage } from "../engine/operations";
import { resourceNames } from "../../components/plan/naming";

const N = resourceNames();
const suite = simSuite("hostkey");

/** A stack whose hosts pin KEYS (host name → key line). */
function pinned(name: string, keys: Record<string, string>): Stack {
    const stack = suite.stack(name, { probes: { endpointTimeoutSeconds: 60 } });
    for (const h of stack.config["spark-vllm:hosts"] as any[]) h.ssh.hostKey = keys[h.name];
    return stack;
}
const realKeys = () => Object.fromEntries(suite.sim.hosts.map(h => [h.name, h.hostKey]));

/** Sessions the host's sshd authenticated so far (its log: `Accepted publickey for root from …`). */
function sessions(host: string): number {
    const log = fs.readFileSync(path.join(suite.sim.host(host).root, "log/sshd.log"), "utf8");
    return log.split("\n").filter(l => /\bAccepted \S+ for /.test(l)).length;
}

/** A key no sim host holds: what an impostor at the worker's address would present instead of the pinned one. */
function otherKey(): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-impostor-"));
    try {
        const r = spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "impostor", "-f", path.join(dir, "key")]);
        assert.equal(r.status, 0, String(r.stderr));
        return fs.readFileSync(path.join(dir, "key.pub"), "utf8").trim().split(" ").slice(0, 2).join(" ");
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

describe("pinned SSH host keys on two simulated Sparks", () => {
    test("pinning every sshd's real key on a deployed stack replaces its commands (no launch beside a running one); then destroy", async () => {
        const stack = suite.stack("pinned", { probes: { endpointTimeoutSeconds: 60 } });
        const first = await up(stack);
        assert.equal(first.error, undefined, first.error);
        for (const h of stack.config["spark-vllm:hosts"] as any[]) h.ssh.hostKey = suite.sim.host(h.name).hostKey;
        const before = sessions("spark-b");
        const r = await up(stack);
        assert.equal(r.error, undefined, r.error);
        assert.equal(r.outputs?.endpoint, `http://${suite.sim.hosts[0].address}:8000/v1`);
        assert.ok(sessions("spark-b") > before, "the worker's sshd logged the sessions (the impostor tests count on it)");
        const commands = changes(r).filter(o => o.type === "command:remote:Command");
        assert.deepEqual(commands.filter(o => o.op === "update").map(o => o.name), [], "a command ran its create again in place");
        for (const n of [N.of("ray-head"), N.host("spark-b", "ray"), N.of("vllm-launch")])
            assert.ok(commands.some(o => o.name === n && o.op === "replace"), `${n} was not replaced`);
        const serving = await suite.sim.exec("spark-a", "pgrep -fc --ns $$ --nslist net '[v]llm serve' || true");
        assert.equal(serving.stdout.trim(), "1", "one vllm serve on the head");
        const again = await up(stack);
        assert.equal(again.error, undefined, again.error);
        assert.deepEqual(changes(again), []);
        // The Docker providers were registered with the pinned-key options, and ran the containers through them.
        const state = loadState(stack.statePath);
        const provider = Object.values(state.resources).find(e => e.name === N.host("spark-b", "docker"))!;
        assert.match(String(provider.inputs.sshOpts), /KnownHostsCommand=\/bin\/echo \* ssh-ed25519 /);
        assert.ok(Object.values(state.resources).some(e => e.name === N.host("spark-b", "container") && e.dockerSshOpts?.includes(`KnownHostsCommand=/bin/echo * ${suite.sim.host("spark-b").hostKey}`)));
        const d = await destroy(stack);
        assert.deepEqual(d.errors, []);
        assert.deepEqual(await leftovers(suite.sim), []);
    });

    test("an impostor worker: up fails on its host key, names it, and no session (no secret) ever reaches it", async () => {
        const stack = pinned("impostor", { ...realKeys(), "spark-b": otherKey() });
        const before = sessions("spark-b");
        const r = await up(stack);
        const error = failure(r);
        assert.match(error, new RegExp(`${N.host("spark-b")}-\\S+: after 3 failed attempts: ssh: handshake failed: ssh: host key mismatch`));
        assert.equal(sessions("spark-b"), before, "the impostor's sshd authenticated a session");
        // Nothing ran on the worker, and nothing that carries a secret (weights, launches) started anywhere.
        const ran = changes(r).filter(o => !o.failed && o.actions > 0).map(o => o.name);
        assert.deepEqual(ran.filter(n => n.includes("spark-b")), []);
        for (const n of [N.host("spark-a", "weights"), N.of("vllm-launch"), N.of("ray-head")]) assert.ok(!ran.includes(n), `${n} ran`);
        assert.deepEqual((await destroy(stack)).errors, []);
    });

    test("an impostor worker: the Docker provider's ssh refuses it too, with the program's own sshOpts", async () => {
        const stack = pinned("impostor-docker", { ...realKeys(), "spark-b": otherKey() });
        const r = await up(stack);
        failure(r);
        // The providers as the program registered them (first of each host's resources), used as the provider uses them.
        const state = loadState(stack.statePath);
        const target = (host: string) => {
            const p = Object.values(state.resources).find(e => e.name === N.host(host, "docker"));
            assert.ok(p, `no Docker provider for ${host}`);
            const sshOpts = typeof p.inputs.sshOpts === "string" ? JSON.parse(p.inputs.sshOpts) : p.inputs.sshOpts;
            return { host: p.inputs.host as string, sshOpts: sshOpts as string[] };
        };
        const image = { name: stack.config["spark-vllm:image"] as string, platform: "linux/amd64" };
        const before = sessions("spark-b");
        await assert.rejects(pullImage(stack.transport, target("spark-b"), image), (e: Error) => {
            console.log(`--- the Docker provider's ssh to the impostor:\n${e.message}\n---`);
            assert.match(e.message, new RegExp(`on ssh://root@${suite.sim.host("spark-b").address.replace(/\./g, "\\.")}:22 failed`));
            assert.match(e.message, /Host key verification failed\./);
            return true;
        });
        assert.equal(sessions("spark-b"), before, "the impostor's sshd authenticated a session");
        // The same options with the real key get through (the head's provider, pinned to its real key).
        const pulled = await pullImage(stack.transport, target("spark-a"), image);
        assert.ok(pulled.repoDigest);
        assert.deepEqual((await destroy(stack)).errors, []);
    });
});
