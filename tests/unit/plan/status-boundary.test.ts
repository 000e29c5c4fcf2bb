// Issue 50, findings 2 and 3: `spark-vllm status` checks every server of the front's replicas.conf against the plan, and
// prints no text from a host raw (terminal escapes, forged lines). Test addresses only.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { ClusterPlan } from "../../../components/plan/clusterPlan";
import { frontServers, replicasFile } from "../../../components/plan/proxyPlan";
import { HostReport, clusterStatus, parseHostOutput, printable, renderStatus } from "../../../components/plan/status";
import { rawConfig } from "../../fixtures";

function twoReplicas(): ClusterPlan {
    const raw = rawConfig(4, { tp: 2 });
    raw.replicas = 2;
    return planCluster(parseSpec(raw));
}
const SERVERS = ["127.0.0.1:8001", "198.18.1.4:8000"];

/** One host's script output as the host would print it: the container line, the helper's JSON, the front's line. */
function output(json: object, front?: string): string {
    return [
        "spark-vllm-container running",
        JSON.stringify(json),
        "spark-vllm-given-up []",
        ...(front !== undefined ? [`spark-vllm-front-replicas ok ${Buffer.from(front).toString("base64")}`] : []),
        "",
    ].join("\n");
}
const healthy = (plan: ClusterPlan, host: string) => ({
    host, vllm: { state: "running", pid: 812, uptimeSeconds: 60, servedModel: "m" }, memory: { availableGiB: 60, totalGiB: 119 },
    ...(plan.hosts.find(h => h.host.name === host)!.role === "head" ? { health: 200 } : {}), raylet: true,
});
function reports(plan: ClusterPlan, front: string, over: Record<string, object> = {}): HostReport[] {
    return plan.hosts.map((h, i) => parseHostOutput(h, 0, output({ ...healthy(plan, h.host.name), ...over[h.host.name] }, i === 0 ? front : undefined), ""));
}

test("the plan's front servers are the ones proxy-conf writes", () => {
    const plan = twoReplicas();
    assert.deepEqual(frontServers(plan.spec, plan.replicas!.map(r => r.head.host)), SERVERS);
    assert.ok(plan.proxy.config.create.includes(replicasFile(SERVERS)), "proxy-conf writes replicasFile(frontServers)");
});

test("a replicas.conf whose servers are not the plan's is a problem, named, and claims nothing about the replicas (finding 2)", () => {
    const plan = twoReplicas();
    assert.deepEqual(clusterStatus(plan, "s", reports(plan, replicasFile(SERVERS))).problems, [], "the plan's own file: no problem");
    for (const [servers, said] of [
        [["127.0.0.1:9999", SERVERS[1]], /names "127\.0\.0\.1:9999" as replica 1, which the plan has at 127\.0\.0\.1:8001: the front sends requests, with the API key, to a server that is not the plan's replica/],
        [[SERVERS[1], SERVERS[0]], /names "198\.18\.1\.4:8000" as replica 1, .*, and "127\.0\.0\.1:8001" as replica 2, which the plan has at 198\.18\.1\.4:8000/],
        [[SERVERS[0], "198.18.1.4:8080"], /names "198\.18\.1\.4:8080" as replica 2/],
    ] as const) {
        const s = clusterStatus(plan, "s", reports(plan, replicasFile(servers)));
        assert.equal(s.front?.state, "unrecognized");
        assert.equal(s.front?.problems.length, 1);
        assert.match(s.front!.problems[0], said);
        assert.match(s.front!.problems[0], /--replace '.*::spark-proxy-conf'/, "the fix: write it again");
        assert.deepEqual(s.replicas?.map(r => r.front), ["unknown", "unknown"]);
        assert.deepEqual(s.problems, s.front!.problems);
        assert.match(renderStatus(s), /\n\nfront proxy \(spark-a\):\n- spark-a: the front proxy configuration .* names "/);
    }
});

/** Every character a terminal acts on, but the report's own newlines. */
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

test("no text from a host reaches status's output raw: escapes, C1 controls, forged lines and bidi overrides are written out (finding 3)", () => {
    const plan = twoReplicas();
    const evil = "\x1b[2J\x1b[H\x1b[8m";
    // The front's file with replica 1 `down` and an escape before its address: "replica 1 (…) is down" prints it.
    const front = `server ${evil}127.0.0.1:8001 max_fails=1 fail_timeout=10s down;\nserver ${SERVERS[1]} max_fails=1 fail_timeout=10s;\n`;
    const s = clusterStatus(plan, "s", reports(plan, front, {
        "spark-a": { vllm: { state: `exited${evil}`, pid: 812, diagnosis: { kind: "oom\x9b31m", line: "CUDA out of memory\nstack s: serving everything", hint: "\u202eesrever" } } },
        "spark-b": { raylet: null, rayError: "\x1b]0;pwned\x07gcs down" },
        "spark-c": { memory: { availableGiB: 1, totalGiB: 119, warning: "low\rmemory" } },
    }));
    const text = renderStatus(s);
    const raw: string[] = [];
    JSON.stringify(s, (_, v) => { if (typeof v === "string" && CONTROL.test(v)) raw.push(v); return v; });
    assert.deepEqual(raw, [], "no raw control character in the report's strings (its JSON)");
    assert.ok(!CONTROL.test(text), JSON.stringify(text.match(new RegExp(CONTROL, "g"))));
    assert.ok(!text.split("\n").includes("stack s: serving everything"), "a host cannot forge a line of the report");
    assert.ok(text.includes("\\x1b[2J\\x1b[H\\x1b[8m127.0.0.1:8001"), text);
    assert.ok(text.includes("CUDA out of memory\\nstack s: serving everything"), text);
    assert.ok(text.includes("\\u202eesrever") && text.includes("oom\\x9b31m") && text.includes("\\x1b]0;pwned\\x07gcs down"), text);
    // An SSH failure's words too.
    const gone = parseHostOutput(plan.hosts[1], 255, "", "ssh: connect to host spark-b: \x1b[31mConnection refused\x1b[0m\n");
    assert.equal(gone.unreachable, "ssh: connect to host spark-b: \\x1b[31mConnection refused\\x1b[0m");
    assert.equal(printable("plain text, é and 中文 stay"), "plain text, é and 中文 stay");
});
