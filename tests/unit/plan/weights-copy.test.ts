// head-then-copy (issue 13): the copy token is a generated secret that travels only on stdin, the head's server and the
// workers' copies start together and are replaced together, and nothing downstream starts before the copy ends.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { evaluateWithMocks, RecordedResource } from "../../harness/mocks";
import { clusterConfig } from "../../fixtures";
import { resourceNames } from "../../../components/plan/naming";
import { parseSpec } from "../../../components/spec/parseSpec";
import { COPY_IDLE_SECONDS } from "../../../components/plan/hostCommands";
import { planCluster } from "../../../components/plan/plan";
import { COMMAND, PASSWORD, plannedResources } from "../../../components/plan/resources";
import { workerCopyToken } from "../../../components/plan/copyToken";
import { execFileSync } from "child_process";
import * as path from "path";

const n = resourceNames();
const COPY_TOKEN = "GENERATED-COPY-TOKEN-0123456789abcdefghij"; // what the recording mocks' RandomPassword returns for it
const NS = "spark-vllm:";

function copyConfig(hosts: number): Record<string, unknown> {
    const config: Record<string, any> = clusterConfig(hosts);
    config[`${NS}model`] = { ...config[`${NS}model`], weights: "head-then-copy" };
    return config;
}
const spec = (hosts: number) => parseSpec(Object.fromEntries(Object.entries(copyConfig(hosts)).map(([k, v]) => [k.slice(NS.length), v])));
const named = (rs: RecordedResource[], name: string) => {
    const r = rs.find(x => x.name === name);
    assert.ok(r, `no resource named ${name}`);
    return r;
};

test("the copy token is generated and reaches the server and each worker's copy on stdin only", () => {
    const { resources, error } = evaluateWithMocks(copyConfig(3));
    assert.equal(error, undefined);
    assert.equal(named(resources, n.of("weights-token")).type, PASSWORD);
    for (const r of resources) {
        const { stdin, ...rest } = r.inputs;
        assert.ok(!JSON.stringify(rest).includes(COPY_TOKEN), `${r.name} carries the copy token outside stdin`);
    }
    assert.equal(named(resources, n.of("weights-source")).inputs.stdin, `${COPY_TOKEN}\n`);
    // Each worker gets only its own token (issue 30): it names that worker to the server, which derives the same.
    for (const host of ["spark-b", "spark-c"]) {
        const stdin = named(resources, n.host(host, "weights")).inputs.stdin;
        assert.equal(stdin, `${workerCopyToken(COPY_TOKEN, host)}\n`, host);
        assert.ok(!String(stdin).includes(COPY_TOKEN), `${host} receives the stack's copy token`);
    }
    assert.notEqual(workerCopyToken(COPY_TOKEN, "spark-b"), workerCopyToken(COPY_TOKEN, "spark-c"));
    assert.equal(named(resources, n.host("spark-a", "weights")).inputs.stdin, undefined, "the head downloads without it");
});

test("without head-then-copy there is no token and no server", () => {
    const { resources } = evaluateWithMocks(clusterConfig(2));
    assert.ok(!resources.some(r => r.name === n.of("weights-token") || r.name === n.of("weights-source")));
});

test("the server runs in the foreground with the token from stdin, knows its workers, and can be stopped by delete", () => {
    const plan = planCluster(spec(3));
    const source = plan.weightsSource!;
    assert.equal(source.stdin, "weightsToken");
    assert.match(source.create, /^timeout \d+ docker exec -i spark-vllm-spark-a bash -c /);
    assert.match(source.create, /exec python3 \/var\/tmp\/spark-vllm\/spark_vllm_tools\.py serve-weights /);
    assert.ok(!/setsid|&\s*$/m.test(source.create), "not detached: the command ends when the server does");
    assert.ok(source.create.includes(`"workers":["spark-b","spark-c"],"idleSeconds":${COPY_IDLE_SECONDS}`), source.create);
    assert.match(source.delete!, /weights-source\.pid/);
    for (const w of plan.hosts.slice(1)) {
        assert.equal(w.weights.stdin, "weightsToken");
        assert.match(w.weights.create, /docker exec -i spark-vllm-spark-[bc] python3 .* weights .*"strategy":"copy".*"tokenOnStdin":true/);
    }
});

test("server and copies start together, are replaced together, and compat waits for both", () => {
    const planned = plannedResources(planCluster(spec(3)));
    const entry = (name: string) => planned.find(p => p.name === name)!;
    const source = entry(n.of("weights-source"));
    const workers = [entry(n.host("spark-b", "weights")), entry(n.host("spark-c", "weights"))];
    assert.deepEqual(source.dependsOn, [n.host("spark-a", "weights")]);
    for (const w of workers) {
        assert.ok(!w.dependsOn.includes(source.name) && !w.replacedBy.includes(source.name), "a copy never waits on the server (it waits on them)");
        assert.ok(w.dependsOn.includes(n.host("spark-a", "weights")));
        assert.deepEqual(w.replacedBy, source.replacedBy);
        assert.equal(w.type, COMMAND);
        assert.equal(source.type, COMMAND);
        if (w.type === COMMAND && source.type === COMMAND) assert.deepEqual(w.inputs.triggers.slice(1), source.inputs.triggers.slice(1));
    }
    // Every container through its gate (a replaced worker container re-runs all of them), one list for any host count.
    assert.deepEqual(source.replacedBy, [n.host("spark-a", "weights"), n.of("weights-token"), n.of("containers")]);
    assert.ok(entry(n.of("compat")).dependsOn.includes(source.name));
});

test("the server derives each worker's token as the program does (weights_source.py worker_token)", () => {
    const remote = path.join(__dirname, "..", "..", "..", "components", "hostProgram");
    for (const host of ["spark-b", "spark-c", "node-07"]) {
        const py = execFileSync("python3", ["-c", "import sys; from spark_vllm.weights_source import worker_token; print(worker_token(sys.argv[1], sys.argv[2]))", COPY_TOKEN, host], { cwd: remote, encoding: "utf8" }).trim();
        assert.equal(py, workerCopyToken(COPY_TOKEN, host), host);
    }
});
