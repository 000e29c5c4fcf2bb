// `spark-vllm status` with spark-vllm:replicas 2 (issue 39): each host asked about its own replica (its head's Ray
// cluster), the report grouped by replica with each one's verdict, and the endpoint serving while one replica serves
// and the front's host answers; the CLI over a stand-in `ssh`, and every URN a hint names is one the program plans.
// Test addresses only. (One replica, unchanged: status-one-replica.test.ts.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { ClusterPlan } from "../../../components/plan/clusterPlan";
import { COMMAND, plannedResources } from "../../../components/plan/resources";
import { HostReport, clusterStatus, hostStatusScript, renderStatus } from "../../../components/plan/status";
import { frontServers, replicasFile } from "../../../components/plan/proxyPlan";
import { clusterConfig, rawConfig } from "../../fixtures";

const ROOT = path.join(__dirname, "..", "..", "..");

/** spark-a…spark-d (fabric 198.18.1.2…5) as two TP=2 replicas: spark-a, spark-b (head spark-a) and spark-c, spark-d (head spark-c). */
function twoReplicas(backend: "ray" | "mp"): ClusterPlan {
    const raw = rawConfig(4, { tp: 2 });
    raw.replicas = 2;
    raw.vllm.backend = backend;
    return planCluster(parseSpec(raw));
}

/** The JSON the host script hands the helper's host-status (status.py host_status reads it). */
function hostStatusArgs(script: string): Record<string, any> {
    const m = /host-status '(\{[^']*\})'/.exec(script);
    assert.ok(m, script);
    return JSON.parse(m[1]);
}

test("each host is asked about its own replica: the Ray address is its replica head's, /health is asked on each replica's head", () => {
    const ray = twoReplicas("ray");
    const asked = Object.fromEntries(ray.hosts.map(h => [h.host.name, hostStatusArgs(hostStatusScript(ray, h))]));
    assert.deepEqual(Object.fromEntries(Object.entries(asked).map(([h, a]) => [h, a.ray])), {
        "spark-a": { address: "198.18.1.2:6379", node: "198.18.1.2" },
        "spark-b": { address: "198.18.1.2:6379", node: "198.18.1.3" },
        "spark-c": { address: "198.18.1.4:6379", node: "198.18.1.4" },
        "spark-d": { address: "198.18.1.4:6379", node: "198.18.1.5" },
    });
    assert.deepEqual(Object.fromEntries(Object.entries(asked).map(([h, a]) => [h, a.healthUrl])), {
        "spark-a": "http://127.0.0.1:8001/health", "spark-b": undefined, "spark-c": "http://127.0.0.1:8001/health", "spark-d": undefined,
    });
    const mp = twoReplicas("mp");
    for (const h of mp.hosts) assert.equal(hostStatusArgs(hostStatusScript(mp, h)).ray, undefined, h.host.name);
});

const memory = { availableGiB: 60.2, totalGiB: 119.7 };
/** The front's replicas.conf as the first host's script reads it: every replica in service (status-front.test.ts: drained). */
const inService = (plan: ClusterPlan) =>
    ({ state: "read" as const, servers: frontServers(plan.spec, plan.replicas!.map(r => r.head.host)).map(server => ({ server, down: false })) });
function healthy(plan: ClusterPlan, host: string): HostReport {
    const h = plan.hosts.find(x => x.host.name === host)!;
    const runsVllm = h.role === "head" || plan.backend === "mp";
    return {
        host, role: h.role, container: "running", memory, givenUp: [],
        vllm: runsVllm ? { state: "running", pid: 812, uptimeSeconds: 7300, servedModel: "qwen3.5-122b" } : { state: "no pid file", pid: null },
        ...(h.role === "head" ? { health: 200 } : {}), ...(plan.backend === "ray" ? { raylet: true } : {}),
        ...(host === plan.hosts[0].host.name ? { frontReplicas: inService(plan) } : {}),
    };
}
/** The line the first host's script prints for the front's replicas.conf with this text. */
const frontLine = (text: string) => `spark-vllm-front-replicas ok ${Buffer.from(text).toString("base64")}`;
const reports = (plan: ClusterPlan, faults: Record<string, Partial<HostReport>> = {}) =>
    plan.hosts.map(h => ({ ...healthy(plan, h.host.name), ...faults[h.host.name] }) as HostReport);
const vllmDead = { vllm: { state: "exited", pid: 812 }, health: null };
const urn = (component: string, name: string) => `urn:pulumi:s::spark-vllm::spark-vllm:index:SparkCluster$spark-vllm:index:${component}$command:remote:Command::${name}`;

test("one replica down: the endpoint serves from the other; the report names the replica down, groups hosts under their replica, and its relaunch names its own resources", () => {
    const plan = twoReplicas("ray");
    const s = clusterStatus(plan, "s", reports(plan, { "spark-c": vllmDead, "spark-d": { raylet: null, rayError: "ConnectionError: GCS unreachable" } }));
    assert.equal(s.serving, true);
    assert.deepEqual(s.replicas?.map(r => [r.replica, r.hosts, r.head, r.serving, r.problems.length]),
        [[1, ["spark-a", "spark-b"], "spark-a", true, 0], [2, ["spark-c", "spark-d"], "spark-c", false, 2]]);
    assert.deepEqual(s.replicas?.[1].problems, s.problems, "every problem is replica 2's");
    const gates = `--replace '${urn("ModelEndpoint", "spark-spark-c-memory")}' --replace '${urn("ModelEndpoint", "spark-spark-d-memory")}'`;
    assert.equal(renderStatus(s), [
        "stack s: serving qwen3.5-122b at http://198.18.0.2:8000/v1: 1 of 2 replicas serving (down: replica 2)",
        "  replica 1 (head spark-a): serving",
        "    spark-a (head): container running, Ray node joined, vLLM pid 812 up 2 h 1 min serving qwen3.5-122b, /health 200, 60.2 of 119.7 GiB free",
        "    spark-b (worker): container running, Ray node joined, vLLM no pid file, 60.2 of 119.7 GiB free",
        "  replica 2 (head spark-c): NOT serving",
        "    spark-c (head): container running, Ray node joined, vLLM exited, /health no answer, 60.2 of 119.7 GiB free",
        "    spark-d (worker): container running, Ray node unknown, vLLM no pid file, 60.2 of 119.7 GiB free",
        "",
        "replica 2 (spark-c, spark-d):",
        "- spark-c: vLLM is not running (exited); read spark-c:/var/tmp/spark-vllm/vllm-serve.log",
        `    the supervisor relaunches a vLLM that had served (backing off while it keeps dying); to relaunch it now (or after a failed \`up\`), run \`pulumi up -s s ${gates}\``,
        `- spark-d: the Ray cluster cannot be asked (ConnectionError: GCS unreachable); run \`pulumi up -s s --replace '${urn("RayCluster", "spark-replica.2-ray-head")}'\` to relaunch Ray and vLLM`,
        "",
    ].join("\n"));
});

test("every replica down, or the front's host not answering SSH: the endpoint is not serving, and the headline says why", () => {
    const plan = twoReplicas("mp");
    const both = clusterStatus(plan, "s", reports(plan, { "spark-a": vllmDead, "spark-d": { vllm: { state: "exited", pid: 9 } } }));
    assert.equal(both.serving, false);
    assert.deepEqual(both.replicas?.map(r => r.serving), [false, false]);
    assert.match(renderStatus(both), /^stack s: NOT serving qwen3\.5-122b at http:\/\/198\.18\.0\.2:8000\/v1: 0 of 2 replicas serving \(down: replicas 1, 2\)\n/);
    // mp: a worker runs its own headless vLLM, relaunched with its replica's memory gates.
    assert.ok(both.replicas?.[1].problems[0].startsWith("spark-d: vLLM is not running (exited)"), both.replicas?.[1].problems[0]);
    assert.ok(both.replicas?.[1].problems[0].includes("spark-spark-c-memory") && !both.replicas?.[1].problems[0].includes("spark-spark-a-memory"));

    // The front proxy on spark-a balances across the replicas: with its host silent, replica 2 serving is not enough.
    const frontSilent = clusterStatus(plan, "s", reports(plan, { "spark-a": { unreachable: "ssh: connect to host 198.18.0.2 port 22: No route to host" } }));
    assert.equal(frontSilent.serving, false);
    assert.deepEqual(frontSilent.replicas?.map(r => r.serving), [false, true]);
    assert.match(renderStatus(frontSilent), /^stack s: NOT serving .*: the front proxy's host spark-a does not answer SSH; 1 of 2 replicas serving \(down: replica 1\)\n/);
    // Another replica's host not answering leaves the endpoint serving.
    const otherSilent = clusterStatus(plan, "s", reports(plan, { "spark-c": { unreachable: "timeout" } }));
    assert.deepEqual([otherSilent.serving, otherSilent.replicas?.map(r => r.serving)], [true, [true, false]]);
    // All well.
    const well = clusterStatus(plan, "s", reports(plan));
    assert.deepEqual([well.serving, well.problems], [true, []]);
    assert.match(renderStatus(well), /^stack s: serving .*: 2 of 2 replicas serving\n  replica 1 \(head spark-a\): serving\n/);
});

test("every URN a replica's hint names is a command the program plans (ray and mp, every fault on every host)", () => {
    let named = 0;
    for (const backend of ["ray", "mp"] as const) {
        // The launches the supervisor can give up on: an mp host has no Ray launch.
        const launches = backend === "ray" ? ["vllm", "ray"] : ["vllm"];
        const faults: Array<Partial<HostReport>> = [
            vllmDead, { raylet: false }, { raylet: null, rayError: "x" }, { helperRefused: "swapped" },
            { vllm: { state: "exited", pid: 1 }, givenUp: launches.map(name => ({ name, failures: 5, diagnosis: null, log: null, markedAt: "2026-12-01T12:00:00Z" })) },
        ];
        const plan = twoReplicas(backend);
        const commands = new Set(plannedResources(plan).filter(r => r.type === COMMAND).map(r => r.name));
        for (const h of plan.hosts) for (const fault of faults) {
            const s = clusterStatus(plan, "s", reports(plan, { [h.host.name]: fault }));
            const urns = [...s.problems.join("\n").matchAll(/--replace '([^']+)'/g)].map(m => m[1]);
            for (const u of [...urns, ...s.hosts.flatMap(r => (r.givenUp ?? []).flatMap(g => g.replace ?? []))]) {
                const name = u.slice(u.lastIndexOf("::") + 2);
                assert.ok(commands.has(name), `${backend} ${h.host.name}: ${name} is not a planned command`);
                // A host's hint names its own replica's resources only.
                const other = plan.replicas!.find(r => !r.hosts.some(x => x.host.name === h.host.name))!;
                assert.ok(!other.hosts.some(x => name.includes(`-${x.host.name}-`)) && !name.includes(`replica.${plan.replicas!.indexOf(other) + 1}-`), `${h.host.name}: ${name}`);
                named++;
            }
        }
    }
    assert.ok(named > 30, `only ${named} URNs checked`);
});

/** `spark-vllm status` over a stand-in `ssh` that answers per target host from $FAKE_HOSTS, and records each host's script. */
function cli(hosts: Record<string, HostReport>, args: string[]) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "status-replicas-"));
    try {
        fs.writeFileSync(path.join(dir, "Pulumi.two.yaml"), yaml.dump({ config: { ...clusterConfig(4, { tp: 2 }), "spark-vllm:replicas": 2 } }));
        fs.writeFileSync(path.join(dir, "ssh"), `#!/usr/bin/env node
const hosts = JSON.parse(process.env.FAKE_HOSTS);
const target = process.argv.find(a => a.includes("@")).split("@")[1];
let script = "";
process.stdin.on("data", d => { script += d; });
process.stdin.on("end", () => {
    require("fs").writeFileSync(${JSON.stringify(dir)} + "/script-" + target, script);
    const h = hosts[target];
    if (h.unreachable) { process.stderr.write(h.unreachable + "\\n"); process.exit(255); }
    const { frontLine, ...report } = h;
    process.stdout.write("spark-vllm-container " + h.container + "\\n" + JSON.stringify(report) + "\\nspark-vllm-given-up []\\n" + (frontLine ? frontLine + "\\n" : ""));
});
`, { mode: 0o755 });
        const r = spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), "status", "--stack", "two", "--dir", dir, ...args], {
            cwd: ROOT, encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}`, FAKE_HOSTS: JSON.stringify(hosts) },
        });
        const scripts = Object.fromEntries(fs.readdirSync(dir).filter(f => f.startsWith("script-")).map(f => [f.slice("script-".length), fs.readFileSync(path.join(dir, f), "utf8")]));
        return { ...r, scripts };
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

test("the CLI: exit 0 while a replica serves, 5 when none does; --json carries each replica's verdict; each host's script asks its own replica's Ray head", () => {
    const plan = twoReplicas("ray");
    // The front's replicas.conf goes as the first host's script prints it (base64 of the file, status.ts FRONT_LINE).
    const byAddress = (faults: Record<string, Partial<HostReport>>) =>
        Object.fromEntries(reports(plan, faults).map(({ frontReplicas, ...r }) => [plan.hosts.find(h => h.host.name === r.host)!.host.ssh.host,
            { ...r, ...(frontReplicas?.state === "read" ? { frontLine: frontLine(replicasFile(frontReplicas.servers.map(x => x.server), frontReplicas.servers.findIndex(x => x.down) + 1 || undefined)) } : {}) }]));
    const degraded = cli(byAddress({ "spark-d": { raylet: false } }), []);
    assert.equal(degraded.status, 0, degraded.stderr + degraded.stdout);
    assert.match(degraded.stdout, /^stack two: serving qwen3\.5-122b at http:\/\/198\.18\.0\.2:8000\/v1: 1 of 2 replicas serving \(down: replica 2\)\n/);
    assert.ok(degraded.stdout.includes("\nreplica 2 (spark-c, spark-d):\n- spark-d: its Ray node is not in the cluster; run `pulumi up -s two --replace "), degraded.stdout);
    assert.deepEqual(Object.keys(degraded.scripts).sort(), ["198.18.0.2", "198.18.0.3", "198.18.0.4", "198.18.0.5"]);
    assert.equal(hostStatusArgs(degraded.scripts["198.18.0.5"]).ray.address, "198.18.1.4:6379");
    assert.equal(hostStatusArgs(degraded.scripts["198.18.0.3"]).ray.address, "198.18.1.2:6379");

    const down = cli(byAddress({ "spark-b": { raylet: false }, "spark-c": vllmDead }), ["--json"]);
    assert.equal(down.status, 5, down.stderr + down.stdout);
    const j = JSON.parse(down.stdout);
    assert.equal(j.serving, false);
    assert.deepEqual(j.replicas.map((r: { replica: number; hosts: string[]; head: string; serving: boolean }) => [r.replica, r.hosts, r.head, r.serving]),
        [[1, ["spark-a", "spark-b"], "spark-a", false], [2, ["spark-c", "spark-d"], "spark-c", false]]);
    assert.equal(j.problems.length, 2);
    assert.equal(j.front.state, "read");

    // The front's replicas.conf as its script prints it: replica 2 healthy but `down` there (a rolling update that did
    // not finish) serves nothing; with replica 1's vLLM dead too, the endpoint serves nothing.
    const drained = (faults: Record<string, Partial<HostReport>>) => {
        const hosts = byAddress(faults);
        hosts["198.18.0.2"].frontLine = frontLine(replicasFile(["127.0.0.1:8001", "198.18.1.4:8000"], 2));
        return hosts;
    };
    const out = cli(drained({}), []);
    assert.equal(out.status, 0, out.stderr + out.stdout);
    assert.match(out.stdout, /^stack two: serving .*: 1 of 2 replicas serving \(down: replica 2\)\n/);
    assert.ok(out.stdout.includes("\n  replica 2 (head spark-c): NOT serving (down in the front proxy)\n"), out.stdout);
    assert.ok(out.stdout.includes("\n- spark-a: replica 2 (198.18.1.4:8000) is down in the front proxy (replicas.conf)"), out.stdout);
    const none = cli(drained({ "spark-a": vllmDead }), ["--json"]);
    assert.equal(none.status, 5, none.stderr + none.stdout);
    assert.deepEqual(JSON.parse(none.stdout).replicas.map((r: { front: string }) => r.front), ["in service", "down"]);
    assert.ok(none.scripts["198.18.0.2"].includes("spark-vllm-front-replicas") && !none.scripts["198.18.0.4"].includes("spark-vllm-front-replicas"));
});
