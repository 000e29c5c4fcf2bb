// `spark-vllm status` with spark-vllm:replicas 2 (issue 39): each host asked about its own replica (its head's Ray
// cluster). Test addresses only. (One replica, unchanged: status-one-replica.test.ts.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { ClusterPlan } from "../../../components/plan/clusterPlan";
import { hostStatusScript } from "../../../components/plan/status";
import { rawConfig } from "../../fixtures";

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
