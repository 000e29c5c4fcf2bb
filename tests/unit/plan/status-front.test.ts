// `spark-vllm status` with spark-vllm:replicas 2 reads the front proxy's replicas.conf on the first host: a replica a
// rolling update left `down` there (components/plan/rollout.ts: drain, relaunch failed, no undrain) is reported as not
// serving, with what puts it back; a missing, unreadable or foreign file is said, not crashed on. Test addresses only.
// (The CLI over a stand-in ssh: status-replicas.test.ts; one replica, byte for byte: status-one-replica.test.ts.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { ClusterPlan } from "../../../components/plan/clusterPlan";
import { REPLICAS_FILE, replicasFile } from "../../../components/plan/proxyPlan";
import { COMMAND, plannedResources } from "../../../components/plan/resources";
import { FrontReplicas, HostReport, clusterStatus, hostStatusScript, parseHostOutput, parseReplicasFile, renderStatus } from "../../../components/plan/status";
import { rawConfig } from "../../fixtures";

/** spark-a…spark-d as two TP=2 replicas (heads spark-a, spark-c); `logDir` where the proxy directory is. */
function twoReplicas(backend: "ray" | "mp" = "ray", logDir?: string): ClusterPlan {
    const raw = rawConfig(4, { tp: 2 });
    raw.replicas = 2;
    raw.vllm.backend = backend;
    if (logDir) raw.logDir = logDir;
    return planCluster(parseSpec(raw));
}

/** The front's servers as plan.ts lists them for twoReplicas: replica 1's vLLM on loopback, replica 2's proxy. */
const SERVERS = ["127.0.0.1:8001", "198.18.1.4:8000"];

test("parseReplicasFile reads exactly what replicasFile writes: every server, in order, and which one is down", () => {
    for (const servers of [SERVERS, [...SERVERS, "198.18.1.6:8000"]])
        for (const drained of [undefined, 1, 2]) {
            const text = replicasFile(servers, drained);
            assert.deepEqual(parseReplicasFile(text), servers.map((server, i) => ({ server, down: i + 1 === drained })), JSON.stringify(text));
        }
    // Anything else is not guessed at: no newline at the end, a comment, other parameters, a blank line, nothing.
    const good = replicasFile(SERVERS, 2);
    for (const text of [good.slice(0, -1), `# by hand\n${good}`, good.replace("max_fails=1", "max_fails=3"), good.replace(" down;", " backup;"),
        `${good}\n`, good.replace(";\n", "\n"), `  ${good}`, "", "\n", good.replace("server 127", "server  127")])
        assert.equal(parseReplicasFile(text), undefined, JSON.stringify(text));
});

/** Runs the first host's front line (the last of its script) under sh, as on the host, and parses what it prints. */
function frontOnHost(plan: ClusterPlan): { line: string; report: HostReport } {
    const script = hostStatusScript(plan, plan.hosts[0]).trimEnd().split("\n");
    const front = script[script.length - 1];
    assert.ok(front.includes(`${plan.spec.logDir}/proxy/${REPLICAS_FILE}`), front);
    const r = spawnSync("sh", ["-c", front], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    return { line: r.stdout, report: parseHostOutput(plan.hosts[0], 0, `spark-vllm-container running\n${r.stdout}`, r.stderr) };
}

test("the first host's script reads the front's replicas.conf, read-only, on one line: read, missing, unreadable", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "status-front-"));
    try {
        const plan = twoReplicas("ray", dir);
        // Only the first host, only with several replicas (one replica: status-one-replica.test.ts pins every script).
        for (const h of plan.hosts.slice(1)) assert.ok(!hostStatusScript(plan, h).includes("spark-vllm-front-replicas"), h.host.name);
        const file = path.join(dir, "proxy", REPLICAS_FILE);
        fs.mkdirSync(path.dirname(file), { mode: 0o700 });
        for (const drained of [undefined, 1, 2]) {
            fs.writeFileSync(file, replicasFile(SERVERS, drained), { mode: 0o600 });
            const { line, report } = frontOnHost(plan);
            assert.equal(line.split("\n").length, 2, line);
            assert.deepEqual(report.frontReplicas, { state: "read", servers: SERVERS.map((server, i) => ({ server, down: i + 1 === drained })) });
        }
        fs.writeFileSync(file, "server 10.0.0.1:80;\n");
        // The host's text made printable (issue 50: no raw control character from a host reaches status's output).
        assert.deepEqual(frontOnHost(plan).report.frontReplicas, { state: "unrecognized", text: "server 10.0.0.1:80;\\n" });
        fs.rmSync(file);
        assert.deepEqual(frontOnHost(plan).report.frontReplicas, { state: "missing" });
        // Not a file the SSH user can read (a directory: root reads any mode).
        fs.mkdirSync(file);
        const unreadable = frontOnHost(plan).report.frontReplicas as Extract<FrontReplicas, { state: "unreadable" }>;
        assert.equal(unreadable.state, "unreadable");
        assert.match(unreadable.why, /directory/i);
        // Nothing was written beside it.
        assert.deepEqual(fs.readdirSync(path.dirname(file)), [REPLICAS_FILE]);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

const memory = { availableGiB: 60.2, totalGiB: 119.7 };
/** Every host healthy; the front (spark-a) found FRONT; FAULTS on top. */
function reports(plan: ClusterPlan, front: FrontReplicas | undefined, faults: Record<string, Partial<HostReport>> = {}): HostReport[] {
    return plan.hosts.map(h => {
        const runsVllm = h.role === "head" || plan.backend === "mp";
        return {
            host: h.host.name, role: h.role, container: "running", memory, givenUp: [],
            vllm: runsVllm ? { state: "running", pid: 812, uptimeSeconds: 7300, servedModel: "qwen3.5-122b" } : { state: "no pid file", pid: null },
            ...(h.role === "head" ? { health: 200 } : {}), ...(plan.backend === "ray" ? { raylet: true } : {}),
            ...(h.host.name === "spark-a" && front ? { frontReplicas: front } : {}), ...faults[h.host.name],
        } as HostReport;
    });
}
const read = (down: number[]): FrontReplicas => ({ state: "read", servers: SERVERS.map((server, i) => ({ server, down: down.includes(i + 1) })) });
const vllmDead = { vllm: { state: "exited", pid: 812 }, health: null };

test("a replica healthy but down in the front is not serving: the endpoint serves from the other, and the hint is the plain up that ends with its undrain", () => {
    const plan = twoReplicas();
    const s = clusterStatus(plan, "s", reports(plan, read([2])));
    assert.equal(s.serving, true);
    assert.deepEqual(s.replicas?.map(r => [r.replica, r.serving, r.front, r.problems.length]), [[1, true, "in service", 0], [2, false, "down", 1]]);
    assert.deepEqual(s.problems, s.replicas?.[1].problems);
    assert.deepEqual(s.front, { host: "spark-a", config: "spark-a:/var/tmp/spark-vllm/proxy/replicas.conf", state: "read", problems: [] });
    assert.equal(renderStatus(s), [
        "stack s: serving qwen3.5-122b at http://198.18.0.2:8000/v1: 1 of 2 replicas serving (down: replica 2)",
        "  replica 1 (head spark-a): serving",
        "    spark-a (head): container running, Ray node joined, vLLM pid 812 up 2 h 1 min serving qwen3.5-122b, /health 200, 60.2 of 119.7 GiB free",
        "    spark-b (worker): container running, Ray node joined, vLLM no pid file, 60.2 of 119.7 GiB free",
        "  replica 2 (head spark-c): NOT serving (down in the front proxy)",
        "    spark-c (head): container running, Ray node joined, vLLM pid 812 up 2 h 1 min serving qwen3.5-122b, /health 200, 60.2 of 119.7 GiB free",
        "    spark-d (worker): container running, Ray node joined, vLLM no pid file, 60.2 of 119.7 GiB free",
        "",
        "replica 2 (spark-c, spark-d):",
        "- spark-a: replica 2 (198.18.1.4:8000) is down in the front proxy (replicas.conf): a rolling update took it out and did not put it back, so the endpoint sends it nothing",
        "    fix what failed, then run `pulumi up -s s` again: it runs the step that failed and what follows it, ending with spark-replica.2-undrain, " +
            "which puts replica 2 back once its endpoint probe, its hosts' free-memory checks and its serving proof pass (the roll resumes from there)",
        "",
    ].join("\n"));
    // The hint names what the program plans: the undrain follows exactly those three (components/plan/resources.ts).
    const undrain = plannedResources(plan).find(r => r.name === "spark-replica.2-undrain")!;
    assert.equal(undrain.type, COMMAND);
    assert.deepEqual([...undrain.dependsOn].sort(), ["spark-replica.2-endpoint-probe", "spark-replica.2-serving-proof", "spark-spark-c-loaded", "spark-spark-d-loaded"]);
    assert.ok(undrain.replacedBy.includes("spark-replica.2-drain") && undrain.replacedBy.includes("spark-replica.2-endpoint-probe"));
    // Replica 1 down in the front (its vLLM on the front's own host, healthy): the same.
    const first = clusterStatus(plan, "s", reports(plan, read([1])));
    assert.deepEqual([first.serving, first.replicas?.map(r => [r.serving, r.front])], [true, [[false, "down"], [true, "in service"]]]);
    assert.ok(first.problems[0].includes("spark-replica.1-undrain, which puts replica 1 back"), first.problems[0]);
});

test("every replica down in the front: not serving; a replica down in the front with vLLM dead: the relaunch first, then its undrain", () => {
    const plan = twoReplicas("mp");
    const both = clusterStatus(plan, "s", reports(plan, read([1, 2])));
    assert.equal(both.serving, false);
    assert.deepEqual(both.replicas?.map(r => [r.serving, r.front]), [[false, "down"], [false, "down"]]);
    assert.match(renderStatus(both), /^stack s: NOT serving .*: 0 of 2 replicas serving \(down: replicas 1, 2\)\n/);
    // One down in the front, the other's vLLM dead: nothing serves.
    const neither = clusterStatus(plan, "s", reports(plan, read([2]), { "spark-a": vllmDead }));
    assert.deepEqual([neither.serving, neither.replicas?.map(r => r.serving)], [false, [false, false]]);

    const dead = clusterStatus(plan, "s", reports(plan, read([2]), { "spark-c": vllmDead }));
    const [relaunch, drained] = dead.replicas![1].problems;
    assert.ok(relaunch.startsWith("spark-c: vLLM is not running (exited)") && relaunch.includes("--replace"), relaunch);
    assert.ok(drained.includes("\n    fix the problems above first: the `pulumi up` that then relaunches it runs spark-replica.2-undrain, which puts replica 2 back"), drained);
    assert.deepEqual(dead.problems, [relaunch, drained], "in ClusterStatus.problems too, after the hosts' own");
});

test("a missing, unreadable or foreign replicas.conf is said (the front proxy configuration), claims nothing about the replicas, and crashes nothing", () => {
    const plan = twoReplicas();
    const commands = new Set(plannedResources(plan).filter(r => r.type === COMMAND).map(r => r.name));
    const cases: Array<[FrontReplicas | undefined, RegExp]> = [
        [{ state: "missing" }, /^spark-a: the front proxy configuration is missing: spark-a:\/var\/tmp\/spark-vllm\/proxy\/replicas\.conf does not exist; status cannot tell/],
        [{ state: "unreadable", why: "sh: 1: cannot open /var/tmp/spark-vllm/proxy/replicas.conf: Permission denied" }, /could not be read \(sh: 1: cannot open .*Permission denied\)/],
        [{ state: "unrecognized", text: "server 10.0.0.1:80;\n" }, /is not what spark-vllm writes \("server 10\.0\.0\.1:80;\\n"\)/],
        [{ state: "read", servers: [...SERVERS, "198.18.1.6:8000"].map(server => ({ server, down: false })) }, /lists 3 servers for 2 replicas/],
        [undefined, /could not be read \(the host's script printed nothing about it\)/],
    ];
    for (const [front, said] of cases) {
        const s = clusterStatus(plan, "s", reports(plan, front));
        assert.equal(s.serving, true, "the replicas' own checks decide");
        assert.deepEqual(s.replicas?.map(r => [r.serving, r.front]), [[true, "unknown"], [true, "unknown"]]);
        assert.equal(s.front?.problems.length, 1);
        assert.notEqual(s.front?.state, "read");
        assert.match(s.front!.problems[0], said);
        assert.deepEqual(s.problems, s.front!.problems);
        const text = renderStatus(s);
        assert.ok(text.endsWith(`\n\nfront proxy (spark-a):\n- ${s.front!.problems[0]}\n`), text);
        // Its fix, when it names one, is a command the program plans.
        for (const m of s.front!.problems[0].matchAll(/--replace '([^']+)'/g)) {
            assert.ok(m[1].endsWith("::spark-vllm:index:SparkCluster$spark-vllm:index:EndpointProxy$command:remote:Command::spark-proxy-conf"), m[1]);
            assert.ok(commands.has(m[1].slice(m[1].lastIndexOf("::") + 2)), m[1]);
        }
    }
    // The front's host not answering: no file to speak of (its SSH failure is the problem).
    const silent = clusterStatus(plan, "s", reports(plan, undefined, { "spark-a": { unreachable: "timeout" } }));
    assert.deepEqual([silent.front?.state, silent.front?.problems, silent.serving], ["not asked", [], false]);
});
