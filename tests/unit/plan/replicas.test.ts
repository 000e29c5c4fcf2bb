// spark-vllm:replicas (issue 39), the pure core: the hosts in order form the replica groups, each planned as its own
// cluster (its head on its first host), its resources named per replica, the rest of the cluster's as before.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { CLUSTER_ROLES, HOST_ROLES, REPLICA_ROLES, resourceNames } from "../../../components/plan/naming";
import { GATE, plannedResources } from "../../../components/plan/resources";
import { planCluster } from "../../../components/plan/plan";
import { replicaGroups } from "../../../components/plan/replicas";
import { parseSpec } from "../../../components/spec/parseSpec";
import { rawConfig } from "../../fixtures";

const ROOT = path.join(__dirname, "..", "..", "..");

function fourHostsTwoReplicas(backend: "ray" | "mp") {
    const raw = rawConfig(4, { tp: 2 });
    raw.replicas = 2;
    raw.vllm.backend = backend;
    return parseSpec(raw);
}

test("held-out style: plan of a 4-host, 2-replica stack shows two groups, each with its Ray head or mp master on its own first host", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-replicas-"));
    try {
        fs.writeFileSync(path.join(dir, "Pulumi.yaml"), "name: spark-vllm\nruntime: nodejs\n");
        for (const backend of ["ray", "mp"] as const) {
            const hosts = [10, 11, 12, 13].map((a, i) => `    - name: spark-${"abcd"[i]}\n      ssh: { host: 198.18.0.${a}, user: nvidia }\n` +
                `      fabric: { interface: enp1s0f1np1, address: 198.19.100.${a} }\n`).join("");
            fs.writeFileSync(path.join(dir, `Pulumi.${backend}.yaml`), `config:\n  spark-vllm:hosts:\n${hosts}` +
                "  spark-vllm:image: vllm/vllm-openai:v0.17.1@sha256:" + "ab".repeat(32) + "\n" +
                "  spark-vllm:model: { id: meta-llama/Llama-3.3-70B-Instruct, cacheDir: /home/nvidia/.cache/huggingface }\n" +
                `  spark-vllm:vllm: { tensorParallelSize: 2, backend: ${backend}, maxModelLen: 32768 }\n  spark-vllm:replicas: 2\n`);
            const r = spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), "plan", "--stack", backend, "--dir", dir], { encoding: "utf8" });
            assert.ok(r.stdout.includes("== replicas: 2 behind the one endpoint (the proxy on spark-a)"), r.stdout + r.stderr);
            const leader = backend === "ray" ? "Ray head on" : "mp master on";
            const port = backend === "ray" ? 6379 : 29501;
            assert.ok(r.stdout.includes(`  replica 1: spark-a, spark-b; head spark-a, ${leader} spark-a (198.19.100.10:${port})`), r.stdout);
            assert.ok(r.stdout.includes(`  replica 2: spark-c, spark-d; head spark-c, ${leader} spark-c (198.19.100.12:${port})`), r.stdout);
            assert.match(r.stdout, /rolling update: 2 replicas, one at a time in this order: .* up to 120 s \(rollout\.drainSeconds\)/);
            // The order: replica 1's drain, its relaunch, its undrain, then replica 2's drain, relaunch and undrain.
            const order = ["spark-replica.1-drain", "spark-spark-a-memory", "spark-replica.1-vllm-launch", "spark-replica.1-undrain",
                "spark-replica.2-drain", "spark-spark-c-memory", "spark-replica.2-vllm-launch", "spark-replica.2-undrain"]
                .map(name => r.stdout.indexOf(`  ${name} on `));
            assert.ok(order.every((at, i) => at > 0 && (i === 0 || at > order[i - 1])), `rolling order in the commands: ${order}`);
            assert.ok(r.stdout.includes("  spark-replica.2-drain on spark-a:"), "drains run on the front's host");
            // The launches themselves: each replica's workers join their own head.
            if (backend === "ray") {
                assert.ok(r.stdout.includes("spark-c: ray start --head --port=6379 --node-ip-address=198.19.100.12 "), r.stdout);
                assert.ok(r.stdout.includes("spark-d: ray start --address=198.19.100.12:6379 --node-ip-address=198.19.100.13 "), r.stdout);
            } else {
                assert.match(r.stdout, /spark-c: vllm serve .* --nnodes 2 --node-rank 0 --master-addr 198\.19\.100\.12 --master-port 29501/);
                assert.match(r.stdout, /spark-d: vllm serve .* --nnodes 2 --node-rank 1 --master-addr 198\.19\.100\.12 --master-port 29501 --headless/);
            }
            assert.ok(r.stdout.includes("spark-c (replica 2 head) ssh nvidia@198.18.0.12:22"), r.stdout);
            assert.equal(r.status, 0, `no mandatory policy fails: ${r.stdout.slice(r.stdout.indexOf("== policies"))}`);
        }
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

test("each replica is planned as its own cluster over its hosts: head, Ray address, fabric ranks, nnodes", () => {
    const spec = fourHostsTwoReplicas("ray");
    const groups = replicaGroups(spec);
    assert.deepEqual(groups.map(g => [g.index, g.hosts.map(h => h.name)]), [[1, ["spark-a", "spark-b"]], [2, ["spark-c", "spark-d"]]]);
    const plan = planCluster(spec, "x");
    assert.equal(plan.replicas!.length, 2);
    assert.deepEqual(plan.hosts.map(h => [h.host.name, h.role]), [["spark-a", "head"], ["spark-b", "worker"], ["spark-c", "head"], ["spark-d", "worker"]]);
    assert.equal(plan.replicas![1].head.host.name, "spark-c");
    assert.ok(plan.replicas![1].hosts[1].rayStartArgv!.includes(`--address=${spec.hosts[2].fabric.address}:6379`));
    // Its fabric check is its own: two ranks meeting at its head.
    assert.ok(plan.replicas![1].hosts[1].fabricRank!.create.includes(`"worldSize":2,`));
    assert.ok(plan.replicas![1].hosts[1].fabricRank!.create.includes(`"masterAddr":"${spec.hosts[2].fabric.address}",`));
    assert.deepEqual(plan.hosts.map(h => h.container.labels.find(([l]) => l === "spark-vllm.replica")?.[1]), ["1", "1", "2", "2"]);
});

test("names: each replica's deployment roles get replica.<k>; the key, proxy and per-host names stay; all unique and made by naming.ts", () => {
    for (const backend of ["ray", "mp"] as const) {
        const plan = planCluster(fourHostsTwoReplicas(backend), "x");
        const planned = plannedResources(plan);
        assert.equal(new Set(planned.map(p => p.name)).size, planned.length);
        const made = new Set([
            ...CLUSTER_ROLES.map(r => resourceNames().of(r)),
            ...[1, 2].flatMap(k => REPLICA_ROLES.map(r => resourceNames(undefined, k).of(r))),
            ...plan.hosts.flatMap(h => HOST_ROLES.map(r => resourceNames().host(h.host.name, r))),
        ]);
        for (const p of planned) assert.ok(made.has(p.name), `${p.name} is not made by naming.ts`);
        const names = planned.map(p => p.name);
        for (const k of [1, 2]) for (const role of ["compat", "vllm-launch", "endpoint-probe", "serving-proof", "containers", "weights"])
            assert.ok(names.includes(`spark-replica.${k}-${role}`), `spark-replica.${k}-${role} (${backend})`);
        for (const shared of ["spark-api-key", "spark-proxy", "spark-proxy-conf", "spark-images", "spark-preflights"]) assert.ok(names.includes(shared), shared);
        assert.ok(!names.includes("spark-replica.1-proxy"), "the first replica's proxy is the front");
        assert.ok(!names.includes("spark-vllm-launch") && !names.includes("spark-compat"));
        // Every entry is planned after what it waits for, and each replica's launch waits for its own memory gates only.
        const seen = new Set<string>();
        for (const p of planned) {
            for (const d of [...p.dependsOn, ...p.replacedBy]) assert.ok(seen.has(d), `${p.name} waits for ${d}, planned later`);
            seen.add(p.name);
        }
        const launch2 = planned.find(p => p.name === "spark-replica.2-vllm-launch")!;
        assert.equal(launch2.host, "spark-c");
        assert.deepEqual(launch2.dependsOn.filter(d => d.endsWith("-memory")), ["spark-spark-c-memory", "spark-spark-d-memory"]);
        const probe2 = planned.find(p => p.name === "spark-replica.2-endpoint-probe")!;
        // Replica 2's probe goes through its own proxy on its head; replica 1's through the front.
        assert.ok(probe2.dependsOn.includes("spark-replica.2-proxy") && !probe2.dependsOn.includes("spark-proxy"));
        assert.equal(planned.find(p => p.name === "spark-replica.2-proxy")!.host, "spark-c");
        assert.ok(planned.find(p => p.name === "spark-replica.1-endpoint-probe")!.dependsOn.includes("spark-proxy"));
        // A worker's container waits for its own replica's head's container.
        assert.ok(planned.find(p => p.name === "spark-spark-d-container")!.dependsOn.includes("spark-spark-c-container"));
        assert.ok(!planned.find(p => p.name === "spark-spark-c-container")!.dependsOn.includes("spark-spark-a-container"));
        assert.equal(planned.filter(p => p.type === GATE && p.name.endsWith("-containers")).length, 2);
    }
});

test("one replica: no name carries a replica part, and replicas: 1 plans byte for byte what no replicas key does", () => {
    const without = rawConfig(2);
    const with1 = { ...rawConfig(2), replicas: 1, rollout: { drainSeconds: 30 } };
    const a = plannedResources(planCluster(parseSpec(without), "x"));
    const b = plannedResources(planCluster(parseSpec(with1), "x"));
    assert.deepEqual(b, a);
    assert.ok(a.every(p => !p.name.includes("replica")));
    assert.equal(planCluster(parseSpec(without), "x").replicas, undefined);
});

test("status with several replicas: a replica head's launches are relaunched by its own replica's names and memory gates", async () => {
    const { clusterStatus } = await import("../../../components/plan/status");
    const plan = planCluster(fourHostsTwoReplicas("ray"), "x");
    const report = (host: string, role: "head" | "worker") => ({ host, role, reachable: true, container: "running", raylet: false, vllm: { state: "exited" }, health: 0 });
    const status = clusterStatus(plan, "s", [report("spark-c", "head"), report("spark-d", "worker")] as never);
    const text = status.problems.join("\n");
    assert.ok(text.includes("--replace 'urn:pulumi:s::spark-vllm::spark-vllm:index:SparkCluster$spark-vllm:index:RayCluster$command:remote:Command::spark-replica.2-ray-head'"), text);
    assert.ok(text.includes("spark-spark-c-memory") && text.includes("spark-spark-d-memory") && !text.includes("spark-spark-a-memory"), text);
});
