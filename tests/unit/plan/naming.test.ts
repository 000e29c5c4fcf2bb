// components/plan/naming.ts is the one place names are made: its shapes, and that every resource the program plans
// is named by it (no other module templates a name).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { CLUSTER_ROLES, HOST_ROLES, containerName, resourceNames } from "../../../components/plan/naming";
import { plannedResources } from "../../../components/plan/resources";
import { planCluster } from "../../../components/plan/plan";
import { parseSpec } from "../../../components/spec/parseSpec";
import { clusterConfig } from "../../fixtures";

const raw = (config: Record<string, unknown>) => Object.fromEntries(Object.entries(config).map(([k, v]) => [k.slice("spark-vllm:".length), v]));

test("shapes: <cluster>-<role>, <cluster>-<host>-<role>, the host's component <cluster>-<host>, the container spark-vllm-<host>", () => {
    const n = resourceNames("prod");
    assert.equal(n.of("vllm-launch"), "prod-vllm-launch");
    assert.equal(n.host("spark-b", "ray"), "prod-spark-b-ray");
    assert.equal(n.host("spark-b"), "prod-spark-b");
    assert.equal(resourceNames().cluster, "spark", "index.ts names its cluster spark");
    assert.equal(containerName("spark-b"), "spark-vllm-spark-b");
});

test("no cluster role ends with a host role, so no host name makes two names equal", () => {
    for (const role of CLUSTER_ROLES) {
        // A cluster name `<c>-<role>` equals a host name `<c>-<h>-<hostRole>` only if role ends with a host role.
        const last = role.split("-").pop()!;
        assert.ok(!(role.includes("-") && HOST_ROLES.includes(last as never)), `${role} ends with the host role ${last}`);
    }
    // Every name of every planned resource is unique, even with hosts named like roles.
    for (const names of [["spark-a", "spark-b"], ["ray", "vllm", "weights", "api", "endpoint", "fabric"]]) {
        const config = clusterConfig(names.length);
        (config["spark-vllm:hosts"] as Array<{ name: string }>).forEach((h, i) => (h.name = names[i]));
        (config["spark-vllm:vllm"] as Record<string, unknown>).tensorParallelSize = names.length;
        const planned = plannedResources(planCluster(parseSpec(raw(config)), "x"));
        assert.equal(new Set(planned.map(p => p.name)).size, planned.length, `duplicate names for hosts ${names}`);
    }
});

test("every planned resource is named by naming.ts: a cluster role or a host role of a planned host", () => {
    const n = resourceNames();
    for (const backend of ["ray", "mp"]) {
        const config = clusterConfig(3);
        (config["spark-vllm:vllm"] as Record<string, unknown>).backend = backend;
        (config["spark-vllm:vllm"] as Record<string, unknown>).tensorParallelSize = 3;
        const plan = planCluster(parseSpec(raw(config)), "x");
        const made = new Set([
            ...CLUSTER_ROLES.map(r => n.of(r)),
            ...plan.hosts.flatMap(h => HOST_ROLES.map(r => n.host(h.host.name, r))),
        ]);
        for (const p of plannedResources(plan)) assert.ok(made.has(p.name), `${p.name} is not a name naming.ts makes`);
    }
});
