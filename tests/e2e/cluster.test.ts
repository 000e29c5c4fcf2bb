// End to end: the real program on simulated Sparks (needs root: network namespaces, dockerd, sshd).
// Each scenario runs `up`/`destroy` through the test engine against real sshd and dockerd.
import { describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import * as yaml from "js-yaml";
import { SimStackOptions, leftovers as simLeftovers } from "../sim/stacks";
import { completionStatus, esc, failure, simSuite } from "./suite";
import { Stack, actionCount, changes, destroy, up, Report } from "../engine/engine";
import { stateFileText, usesRealPulumi } from "../engine/real";
import { resourceNames } from "../../components/plan/naming";
import { diffPlans } from "../../bin/diff-command";
import { planCluster } from "../../components/plan/plan";
import { parseSpec } from "../../components/spec/parseSpec";
import { rawConfigFromStack } from "../../components/spec/stackConfig";

const N = resourceNames();
/** Commands that start a process: the Ray head, a Ray worker, vLLM. */
const isLaunch = (name: string) => name === N.of("ray-head") || name === N.of("vllm-launch") || name.endsWith("-ray");

const suite = simSuite("e2e");
const simStack = (name: string, opts: SimStackOptions = {}) => suite.stack(name, opts);
const leftovers = () => simLeftovers(suite.sim);

/** The plan `spark-vllm diff` compares, from a stack's config (the same owner for both sides: it changes no resource's fate). */
const planOf = (config: Record<string, unknown>) => planCluster(parseSpec(rawConfigFromStack(structuredClone(config))));
const names = (r: Report, kind?: string) => changes(r).filter(o => !kind || o.op === kind).map(o => o.name).sort();

async function http(url: string, init: RequestInit = {}): Promise<{ status: number; body: string }> {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
    return { status: res.status, body: await res.text() };
}

describe("up, update and destroy on two simulated Sparks", () => {
    let stack: Stack;
    let apiKey: string;

    test("a fresh up reaches an endpoint that answers with the API key and refuses without it", async () => {
        stack = simStack("main");
        const r = await up(stack);
        assert.equal(r.error, undefined, r.error);
        apiKey = r.outputs?.apiKey as string;
        assert.equal(r.outputs?.endpoint, `http://${suite.sim.hosts[0].address}:8000/v1`);
        assert.equal(r.outputs?.modelName, "qwen3.5-122b");
        const facts = r.outputs?.hosts as Record<string, any>;
        assert.equal(facts["spark-b"].fabric.hasAddress, true);
        const chat = await http(`${r.outputs?.endpoint}/chat/completions`, {
            method: "POST",
            headers: { "Content-Type": "application/json", Authorization: `Bearer ${apiKey}` },
            body: JSON.stringify({ model: "qwen3.5-122b", messages: [{ role: "user", content: "hello" }], max_tokens: 4 }),
        });
        assert.equal(chat.status, 200, chat.body);
        assert.equal(JSON.parse(chat.body).choices[0].message.role, "assistant");
        const denied = await http(`${r.outputs?.endpoint}/models`);
        assert.equal(denied.status, 401);
    });

    test("no secret is in clear in the stack's state (the real Pulumi's state file; the test engine keeps plain values)", { skip: usesRealPulumi() ? false : "the test engine's state file is its own, in plain text" }, async () => {
        const text = stateFileText(stack);
        assert.ok(apiKey.length >= 40 && !text.includes(apiKey), "the API key in clear in the state");
        const ray = JSON.parse(text).checkpoint.latest.resources.filter((r: any) => r.type === "random:index/randomPassword:RandomPassword");
        assert.ok(ray.length >= 2, "the API key and the Ray token are generated");
        for (const r of ray) assert.ok(r.outputs.result?.ciphertext, `${r.urn}: its result is encrypted`);
    });

    test("a second up with no change runs no remote command and replaces nothing", async () => {
        const r = await up(stack);
        assert.equal(r.error, undefined, r.error);
        assert.deepEqual(changes(r), []);
        assert.equal(actionCount(r), 0);
    });

    test("changing one vLLM flag relaunches only vLLM, the memory check before it, its probe and the after-load reading: what spark-vllm diff predicts", async () => {
        const before = planOf(stack.config);
        stack.config["spark-vllm:vllm"] = { ...(stack.config["spark-vllm:vllm"] as object), extraArgs: ["--enable-prefix-caching"] };
        const predicted = diffPlans(before, planOf(stack.config)).filter(c => c.op !== "same").map(c => `${c.op} ${c.name}`).sort();
        // Succeeds the first time: every host's memory gate measured after the old vLLM had stopped (on the real engine
        // a second host's gate used to measure while it was still stopping: "held by something else", issue 37).
        const r = await up(stack);
        assert.equal(r.error, undefined, r.error);
        assert.deepEqual(names(r), [N.of("endpoint-probe"), N.of("serving-proof"), N.host("spark-a", "memory"), N.host("spark-b", "memory"),
            N.host("spark-a", "loaded"), N.host("spark-b", "loaded"), N.of("vllm-launch")].sort());
        assert.deepEqual(changes(r).map(o => `${o.op} ${o.name}`).sort(), predicted, "the replacements spark-vllm diff predicts");
        const log = await suite.sim.exec("spark-a", "cat /var/tmp/spark-vllm/vllm-serve.log; pgrep -af 'vllm serve'");
        assert.match(log.stdout, /--enable-prefix-caching/);
        // The relaunch found the first launch's torch.compile cache on the host (VLLM_CACHE_ROOT in the HF cache).
        assert.match(log.stdout, /Directly load the compiled graph/);
        const models = await http(`http://${suite.sim.hosts[0].address}:8000/v1/models`, { headers: { Authorization: `Bearer ${apiKey}` } });
        assert.equal(models.status, 200, "the relaunched server keeps the same API key");
    });

    test("destroy leaves no container, process or port behind on any host", async () => {
        // Destroy removes the stack's files, vLLM's log too: a second link to it keeps what vLLM writes until it stops.
        const kept = "/var/tmp/spark-vllm/test-kept-vllm-serve.log";
        await suite.sim.exec("spark-a", `ln -f /var/tmp/spark-vllm/vllm-serve.log ${kept}`);
        const r = await destroy(stack);
        assert.deepEqual(r.errors, []);
        const stop = r.ops.find(o => o.op === "delete" && o.name === N.of("vllm-launch"));
        assert.ok(stop && stop.actions === 1, "the vLLM launch's delete ran");
        // vLLM was stopped by its delete (SIGTERM, clean shutdown), not killed with its container.
        const log = (await suite.sim.exec("spark-a", `cat ${kept}; rm -f ${kept}`)).stdout;
        assert.match(log, /Shutting down/);
        assert.equal((await suite.sim.exec("spark-a", "ls -A /var/tmp/spark-vllm")).stdout.trim(), "", "destroy left no file of the stack in logDir");
        assert.deepEqual(await leftovers(), []);
        assert.deepEqual(JSON.parse(fs.readFileSync(stack.statePath, "utf8")).resources, {});
    });
});

describe("an interrupted up", () => {
    test("Ctrl-C while vLLM launches leaves a state the next up finishes from, and it serves", async () => {
        const stack = simStack("interrupted");
        try {
            const abort = new AbortController();
            // The real CLI takes SIGINT as Ctrl-C (cancels, lets running steps finish, records them) and reports; the
            // test engine's process group is stopped (SIGTERM) and leaves no report, only its state file.
            const first = await up(stack, { signal: abort.signal, onEvent: e => { if (e.kind === "start" && e.name === N.of("vllm-launch")) abort.abort(); } })
                .catch((err: Error) => ({ error: err.message }));
            assert.ok(abort.signal.aborted, "the up reached the vLLM launch");
            assert.ok(first.error, "the interrupted up did not finish");
            const again = await up(stack);
            assert.equal(again.error, undefined, again.error);
            assert.equal(await completionStatus(again), 200);
            assert.deepEqual(changes(await up(stack)), [], "and then nothing is left to do");
        } finally {
            assert.deepEqual((await destroy(stack)).errors, []);
        }
        assert.deepEqual(await leftovers(), []);
    });
});

describe("failures stop up with the cause", () => {
    test("the 0.14.0 image is refused before any launch, naming the architecture and both versions", async () => {
        const stack = simStack("old-vllm", { tag: "0.14.0" });
        const started = Date.now();
        try {
            const r = await up(stack);
            const error = failure(r);
            // Refused by the image proof on the hosts (a throw-away container of the pulled image: the weights are there),
            // before any container of the cluster is created (issue 46).
            assert.match(error, new RegExp(`${N.host("spark-a", "image-check")}|${N.host("spark-b", "image-check")}`));
            assert.match(error, /Qwen3_5MoeForConditionalGeneration/);
            assert.match(error, /vLLM 0\.14\.0/);
            assert.match(error, /supported from vLLM 0\.17\.0/);
            assert.match(error, /Copying model files between vLLM versions does not work/);
            // the image's real transformers 4.56.2 (tests/sim/wheels) does not know qwen3_5_moe, nor does vLLM 0.14.0's registry
            assert.match(error, /transformers 4\.56\.2 in this image does not recognize model_type 'qwen3_5_moe' of Qwen\/Qwen3\.5-122B-A10B-FP8, and vLLM 0\.14\.0 has no config of its own for it either/);
            assert.match(error, /transformers said: The checkpoint you are trying to load has model type `qwen3_5_moe` but Transformers does not recognize this architecture/);
            assert.ok(!r.ops.some(o => isLaunch(o.name)), "nothing launched");
            assert.ok(!r.ops.some(o => o.name.endsWith("-container") && o.op !== "same"), "no container was created");
            const verdict = r.ops.find(o => o.name.endsWith("-image-check") && o.failed)!;
            console.log(`compatibility verdict ${(verdict.endMs / 1000).toFixed(1)} s after up started (wall ${(Date.now() - started) / 1000} s incl. process start)`);
            // A throw-away container's start and the image's Python imports (real transformers) on each host at once, on
            // the 2-core machine beside the other end-to-end files.
            const took = verdict.endMs - verdict.startMs;
            console.log(`the image proof took ${(took / 1000).toFixed(1)} s`);
            assert.ok(took < 30_000, `the check itself takes seconds: ${took} ms`);
        } finally {
            await destroy(stack);
        }
    });

    test("a crash during load fails up within seconds of the crash, with the root-cause line", async () => {
        const stack = simStack("crash");
        await suite.sim.setFaults("spark-a", { load_seconds: 30, crash_after_seconds: 6 });
        try {
            const r = await up(stack);
            const error = failure(r);
            assert.match(error, new RegExp(N.of("endpoint-probe")));
            assert.match(error, /kind: cuda-error/);
            assert.match(error, /root cause: RuntimeError: CUDA error: an illegal memory access was encountered/);
            assert.match(error, /full log: spark-a:\/var\/tmp\/spark-vllm\/vllm-serve\.log/);
            const log = (await suite.sim.exec("spark-a", "cat /var/tmp/spark-vllm/vllm-serve.log")).stdout;
            const crashAt = Number(/SIM_CRASH_AT (\d+\.\d+)/.exec(log)?.[1]) * 1000;
            const probe = r.ops.find(o => o.name === N.of("endpoint-probe") && o.failed)!;
            const delay = (r.startedAt + probe.endMs - crashAt) / 1000;
            console.log(`crash reported ${delay.toFixed(2)} s after the crash`);
            assert.ok(delay >= 0 && delay < 3, `reported ${delay} s after the crash`);
            // `spark-vllm diagnose --stack` reads every host's logs over SSH from the stack file alone, and names the
            // host and the log that hold the cause (issue 47).
            const dir = path.dirname(stack.statePath);
            fs.writeFileSync(path.join(dir, `Pulumi.${stack.name}.yaml`), yaml.dump({ config: stack.config }));
            const diagnosed = spawnSync(process.execPath, [path.join(__dirname, "..", "..", "bin", "spark-vllm.js"), "diagnose", "--stack", stack.name, "--dir", dir, "--json"],
                { encoding: "utf8", env: { ...process.env, ...stack.transport.env } });
            assert.equal(diagnosed.status, 0, diagnosed.stdout + diagnosed.stderr);
            const report = JSON.parse(diagnosed.stdout) as { rootCause: { host: string; source: string; where: string; diagnosis: { kind: string; line: string } };
                hosts: Array<{ host: string; error?: string; sources: Array<{ source: string; state: string }> }> };
            assert.deepEqual([report.rootCause.host, report.rootCause.source, report.rootCause.where, report.rootCause.diagnosis.kind, report.rootCause.diagnosis.line],
                ["spark-a", "vllm-serve.log", "/var/tmp/spark-vllm/vllm-serve.log", "cuda-error", "RuntimeError: CUDA error: an illegal memory access was encountered"]);
            assert.deepEqual(report.hosts.map(h => [h.host, h.error, h.sources.map(x => x.source)]),
                [["spark-a", undefined, ["vllm-serve.log", "ray-start.log", "kernel"]], ["spark-b", undefined, ["vllm-serve.log", "ray-start.log", "kernel"]]]);
        } finally {
            await suite.sim.setFaults("spark-a", null);
            await destroy(stack);
        }
    });

    test("a hang is reported at the timeout with context from the log", async () => {
        const stack = simStack("hang", { probes: { endpointTimeoutSeconds: 8 } });
        await suite.sim.setFaults("spark-a", { nccl_hang: true });
        try {
            const r = await up(stack);
            const error = failure(r);
            assert.match(error, /did not become healthy within 8 s/);
            assert.match(error, /full log: spark-a:\/var\/tmp\/spark-vllm\/vllm-serve\.log|last lines:/);
        } finally {
            await suite.sim.setFaults("spark-a", null);
            await destroy(stack);
        }
    });

    test("a worker host that is down fails up with an error naming that host", async () => {
        const stack = simStack("host-down");
        await suite.sim.setHostDown("spark-b", true);
        try {
            const r = await up(stack);
            const error = failure(r);
            assert.match(error, /spark-b/);
            assert.ok(!r.ops.some(o => o.name === N.of("vllm-launch")), "vLLM never launched");
            // The engine starts no step after the first failure; steps already running finish (tests/engine/README.md).
            const firstFailure = Math.min(...r.ops.filter(o => o.failed).map(o => o.endMs));
            const late = r.ops.filter(o => o.startMs > firstFailure).map(o => o.name);
            assert.deepEqual(late, [], "steps started after the first failure");
        } finally {
            await suite.sim.setHostDown("spark-b", false);
            await destroy(stack);
        }
        assert.deepEqual(await leftovers(), []);
    });

    test("a worker that cannot reach the head's GCS is named in the error, in seconds", async () => {
        const stack = simStack("no-join");
        // spark-b's TCP to the head's GCS port is reset (the host's own firewall, in its network namespace): real Ray's
        // `ray start` would retry for minutes; the worker's launch checks the port first (components/plan/hostCommands.ts gcsReachable)
        const rule = `OUTPUT -p tcp -d ${suite.sim.host("spark-a").address} --dport 6379 -j REJECT --reject-with tcp-reset`;
        assert.equal((await suite.sim.exec("spark-b", `iptables -I ${rule}`)).code, 0);
        try {
            const r = await up(stack);
            const error = failure(r);
            assert.match(error, new RegExp(N.host("spark-b", "ray")));
            assert.match(error, new RegExp(`cannot reach the head's Ray GCS at ${esc(suite.sim.host("spark-a").address)}:6379 from this host within 10 s`));
        } finally {
            await suite.sim.exec("spark-b", `iptables -D ${rule}`);
            await destroy(stack);
        }
    });

    test("a fabric interface that is down fails preflight naming the host and the fix", async () => {
        // A second fabric netdev on each host (a veth whose peer stays in the host); spark-b's stays down.
        const addNetdev = (host: string, address: string, up: boolean) => suite.sim.exec(host,
            `ip link add enP2p1s0f1np1 type veth peer name fabric-peer && ip addr add ${address}/24 dev enP2p1s0f1np1` +
            (up ? " && ip link set fabric-peer up && ip link set enP2p1s0f1np1 up" : ""));
        await addNetdev("spark-a", "198.19.0.2", true);
        await addNetdev("spark-b", "198.19.0.3", false);
        const stack = simStack("fabric-down", { fabricInterface: "enP2p1s0f1np1" });
        (stack.config["spark-vllm:hosts"] as any[]).forEach((h, i) => (h.fabric.address = `198.19.0.${i + 2}`));
        try {
            const r = await up(stack);
            const error = failure(r);
            assert.match(error, /spark-b: interface enP2p1s0f1np1 is down/);
            assert.ok(!r.ops.some(o => o.type === "docker:index/container:Container"), "no container started");
        } finally {
            await destroy(stack);
            for (const h of ["spark-a", "spark-b"]) await suite.sim.exec(h, "ip link del enP2p1s0f1np1 || true");
        }
    });

    test("a logDir another local user created first is refused before anything runs there, naming the owner and the fix", async () => {
        const stack = simStack("logdir");
        // What an attacker on the host does: make /var/tmp/spark-vllm first, to plant the helper program there.
        await suite.sim.exec("spark-b", "chown 4242 /var/tmp/spark-vllm");
        try {
            const r = await up(stack);
            const error = failure(r);
            assert.match(error, new RegExp(N.host("spark-b", "tools")));
            assert.match(error, /spark-vllm: \/var\/tmp\/spark-vllm is owned by uid 4242, not by root: another user could replace the programs spark-vllm runs there; remove it or set spark-vllm:logDir/);
            assert.ok(!r.ops.some(o => o.name === N.host("spark-b", "preflight")), "nothing ran from that directory");
            assert.equal((await suite.sim.exec("spark-b", "ls -A /var/tmp/spark-vllm | grep spark_vllm_tools || true")).stdout.trim(), "", "the helper program was not written into it");
        } finally {
            await suite.sim.exec("spark-b", "chown 0 /var/tmp/spark-vllm");
            await destroy(stack);
        }
    });
});

describe("one image everywhere", () => {
    test("a host holding a stale image under the configured tag stops every container, naming both digests", async () => {
        const tagRef = `${suite.sim.registry}/vllm-sim:0.17.1`;
        // spark-b built or pulled an older image under the same tag earlier; the tag is not pinned by digest.
        await suite.sim.docker("spark-b", ["pull", suite.sim.images["0.14.0"]]);
        await suite.sim.docker("spark-b", ["tag", suite.sim.images["0.14.0"], tagRef]);
        const stack = simStack("stale-image", { image: tagRef });
        try {
            // With the policy pack (`pulumi up --policy-pack policies`), image-pinned-by-digest refuses the pull first.
            const refused = await up(stack);
            assert.match(failure(refused), /image-pinned-by-digest/);
            // The proxy's own image follows the preflights, not the vLLM image's policy verdict.
            assert.ok(!refused.ops.some(o => o.type === "docker:index/remoteImage:RemoteImage" && o.name !== N.of("proxy-pull")), "no vLLM image was pulled");
            // Without it, the program's own check after the pulls stops the update.
            stack.policyPack = false;
            const r = await up(stack);
            const error = failure(r);
            assert.match(error, new RegExp(`the hosts pulled different images for ${esc(suite.sim.registry)}/vllm-sim:0\\.17\\.1`));
            assert.ok(error.includes(`spark-a: ${suite.sim.images["0.17.1"]}`), "names spark-a's digest");
            assert.ok(error.includes(`spark-b: ${suite.sim.images["0.14.0"]}`), "names spark-b's digest");
            // The endpoint proxy's own container follows the preflights, not the vLLM image.
            assert.ok(!r.ops.some(o => o.type === "docker:index/container:Container" && o.name !== N.of("proxy")), "no vLLM container started");
        } finally {
            await destroy(stack);
            await suite.sim.docker("spark-b", ["rmi", tagRef, suite.sim.images["0.14.0"]]);
        }
    });

    test("imageSource head: an image built only on the head reaches the worker over the fabric and serves", async () => {
        const local = "spark-vllm-local/vllm:dev";
        await suite.sim.docker("spark-a", ["pull", suite.sim.images["0.17.1"]]);
        await suite.sim.docker("spark-a", ["tag", suite.sim.images["0.17.1"], local]);
        // The head reaches the workers over SSH with a key, as a Spark pair set up for NCCL does.
        await suite.sim.exec("spark-a", `mkdir -p /root/.ssh && cp ${suite.sim.sshKeyFile} /root/.ssh/id_ed25519 && chmod 600 /root/.ssh/id_ed25519 && cp ${suite.sim.knownHostsFile} /root/.ssh/known_hosts`);
        const stack = simStack("from-head", { image: local });
        stack.config["spark-vllm:imageSource"] = "head";
        try {
            const r = await up(stack);
            assert.equal(r.error, undefined, r.error);
            const ids = await Promise.all(["spark-a", "spark-b"].map(h => suite.sim.docker(h, ["image", "inspect", "--format", "{{.Id}}", local])));
            assert.equal(ids[1].stdout.trim(), ids[0].stdout.trim(), "the worker holds the head's image");
            assert.ok(!r.ops.some(o => o.type === "docker:index/remoteImage:RemoteImage" && o.name !== N.of("proxy-pull")), "no registry pull of the vLLM image");
        } finally {
            await destroy(stack);
            for (const h of ["spark-a", "spark-b"]) await suite.sim.docker(h, ["rmi", local]);
            await suite.sim.exec("spark-a", "rm -rf /root/.ssh/id_ed25519");
        }
    });
});

describe("model weights on every host", () => {
    const MODEL = "Qwen/Qwen3.5-122B-A10B-FP8";
    const SHARD = "model-00001-of-00001.safetensors";

    test("a host missing a weights file fails before any launch, naming the host and the file", async () => {
        const stack = simStack("missing-weights");
        await suite.sim.removeModelFile("spark-b", MODEL, SHARD);
        try {
            const r = await up(stack);
            const error = failure(r);
            assert.match(error, /^the hosts do not hold the same weights of Qwen\/Qwen3\.5-122B-A10B-FP8/, "the check's words first");
            assert.match(error, new RegExp(`spark-b: missing ${SHARD.replace(/[.]/g, "\\.")}`));
            assert.ok(!r.ops.some(o => isLaunch(o.name) || o.name === N.of("compat")), "nothing launched");
        } finally {
            await destroy(stack);
            await suite.sim.writeModel("spark-b", suite.sim.models[0]);
        }
    });

    test("head-then-copy copies the head's weights to a worker that lacks them, then serves", async () => {
        const stack = simStack("copy", { weights: "head-then-copy" });
        await suite.sim.exec("spark-b", `rm -rf /root/.cache/huggingface/hub/models--Qwen--Qwen3.5-122B-A10B-FP8`);
        try {
            const r = await up(stack);
            assert.equal(r.error, undefined, r.error);
            const worker = (await suite.sim.exec("spark-b", "find /root/.cache/huggingface/hub/models--Qwen--Qwen3.5-122B-A10B-FP8/snapshots -name '*.safetensors' -xtype f | wc -l")).stdout.trim();
            assert.equal(worker, "1");
            assert.ok(r.ops.some(o => o.name === "spark-weights-source"), "the head served its weights");
        } finally {
            await destroy(stack);
            await suite.sim.writeModel("spark-b", suite.sim.models[0]);
        }
        assert.deepEqual(await leftovers(), []);
    });
});
