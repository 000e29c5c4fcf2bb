// `spark-vllm status` with one replica is byte for byte what it was before status learned replicas (issue 39): for every
// committed stack, each host's script and the text and --json reports of a healthy cluster and of each kind of fault,
// against tests/unit/fixtures/status-one-replica.json, written by the status.ts of commit 414ddd4.
// A deliberate change to status's output rewrites the pin: STATUS_PIN=write node --import tsx --test THIS_FILE.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { ClusterPlan, HostPlan } from "../../../components/plan/clusterPlan";
import { VERIFIED_RUN, clusterStatus, hostStatusScript, parseHostOutput, renderStatus } from "../../../components/plan/status";
import { shq } from "../../../components/plan/scripts";
import { readStackFile, stackOwner } from "../../../bin/shared";

const ROOT = path.join(__dirname, "..", "..", "..");
const PIN = path.join(__dirname, "..", "fixtures", "status-one-replica.json");
const STACKS = fs.readdirSync(ROOT).flatMap(f => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1] ?? []).sort();

const memory = { availableGiB: 60.2, totalGiB: 119.7 };
const runningVllm = { state: "running", pid: 812, uptimeSeconds: 7300, servedModel: "served" };
const diagnosis = { kind: "cuda-oom", line: "torch.OutOfMemoryError: CUDA out of memory.", hint: "Lower gpuMemoryUtilization." };

/** What a healthy host's script prints (status.py host_status's JSON between the container and given-up lines). */
function healthy(plan: ClusterPlan, h: HostPlan): Record<string, unknown> {
    const runsVllm = h.role === "head" || plan.backend === "mp";
    return {
        host: h.host.name, vllm: runsVllm ? runningVllm : { state: "no pid file", pid: null }, memory,
        ...(h.role === "head" ? { health: 200 } : {}), ...(plan.backend === "ray" ? { raylet: true } : {}),
    };
}

type Output = { code: number | null; stdout: string; stderr: string };
const ok = (report: Record<string, unknown>, givenUp: unknown[] = []): Output =>
    ({ code: 0, stdout: `spark-vllm-container running\n${JSON.stringify(report)}\nspark-vllm-given-up ${JSON.stringify(givenUp)}\n`, stderr: "" });

/** Each kind of fault a host can show, as its script's output (what parseHostOutput reads). */
const FAULTS: Record<string, (plan: ClusterPlan, h: HostPlan) => Output> = {
    "vllm exited, diagnosed": (p, h) => ok({ ...healthy(p, h), vllm: { state: "exited", pid: 812, diagnosis }, ...(h.role === "head" ? { health: null } : {}) }),
    "vllm exited, no diagnosis": (p, h) => ok({ ...healthy(p, h), vllm: { state: "exited", pid: 812 } }),
    "health 503": (p, h) => ok({ ...healthy(p, h), health: 503 }),
    "gave up on vllm": (p, h) => ok({ ...healthy(p, h), vllm: { state: "exited", pid: 812 } },
        [{ name: "vllm", failures: 5, log: "/var/tmp/spark-vllm/vllm-serve.log", markedAt: "2026-12-01T12:00:00Z", diagnosis }]),
    "gave up on ray": (p, h) => ok({ ...healthy(p, h), raylet: false }, [{ name: "ray", failures: null, log: null, markedAt: "2026-12-01T12:00:00Z", diagnosis: null }]),
    "unreachable": () => ({ code: 255, stdout: "", stderr: "ssh: connect to host port 22: No route to host\n" }),
    "container exited": () => ({ code: 0, stdout: "spark-vllm-container exited\nspark-vllm-given-up []\n", stderr: "" }),
    "container absent": () => ({ code: 0, stdout: "spark-vllm-container absent\n", stderr: "" }),
    "ray node absent": (p, h) => ok({ ...healthy(p, h), raylet: false }),
    "ray cannot be asked": (p, h) => ok({ ...healthy(p, h), raylet: null, rayError: "ConnectionError: GCS unreachable" }),
    "helper refused": () => ({ code: 0, stdout: "spark-vllm-container running\nspark-vllm-helper-refused spark-vllm: refusing to run /var/tmp/spark-vllm/spark_vllm_tools.py \n", stderr: "" }),
    "low memory": (p, h) => ok({ ...healthy(p, h), memory: { ...memory, cudaFreeGiB: 2.1, freeGiB: 2.1, freeSource: "cuda", warning: `${h.host.name}: only 2.1 GiB free with vLLM running` } }),
};

/** Healthy; each fault on the head, then on the last host; then every host a different fault at once. */
function scenarios(plan: ClusterPlan): Array<[string, Output[]]> {
    const all = (f: (h: HostPlan, i: number) => Output): Output[] => plan.hosts.map(f);
    const names = Object.keys(FAULTS);
    return [
        ["healthy", all(h => ok(healthy(plan, h)))],
        ...names.flatMap(name => [0, plan.hosts.length - 1].map(at =>
            [`${name} on ${plan.hosts[at].host.name}`, all((h, i) => (i === at ? FAULTS[name](plan, h) : ok(healthy(plan, h))))] as [string, Output[]])),
        ["a fault on every host", all((h, i) => FAULTS[names[(i * 5) % names.length]](plan, h))],
    ];
}

/** The script without the parts other modules own: the helper's digest and the verifier's Python text. */
const scriptShape = (script: string) => script.split(shq(VERIFIED_RUN)).join("<VERIFIED_RUN>").replace(/\b[0-9a-f]{64}\b/g, "<digest>");

function renderings(stack: string): Record<string, string> {
    const owner = stackOwner(ROOT, stack);
    const plan = planCluster(parseSpec(readStackFile(ROOT, stack)), undefined, { owner });
    const out: Record<string, string> = {};
    for (const h of plan.hosts) out[`script ${h.host.name}`] = scriptShape(hostStatusScript(plan, h));
    for (const [name, outputs] of scenarios(plan)) {
        const status = clusterStatus(plan, stack, plan.hosts.map((h, i) => parseHostOutput(h, outputs[i].code, outputs[i].stdout, outputs[i].stderr)), owner.project);
        // What bin/status-command.ts prints; --json as its sha256 (the text holds every problem in full, and keeps the pin small).
        out[`text ${name}`] = renderStatus(status);
        out[`json sha256 ${name}`] = crypto.createHash("sha256").update(JSON.stringify(status, null, 2) + "\n").digest("hex");
    }
    return out;
}

test("status with one replica: every committed stack's host scripts and reports are the ones pinned before replicas", () => {
    assert.ok(STACKS.includes("spark") && STACKS.length >= 5, STACKS.join(", "));
    const now = Object.fromEntries(STACKS.map(s => [s, renderings(s)]));
    // A plan without replicas: these are the one-replica path, not a replica plan rendered alike.
    for (const s of STACKS) assert.equal(planCluster(parseSpec(readStackFile(ROOT, s))).replicas, undefined, s);
    if (process.env.STATUS_PIN === "write") fs.writeFileSync(PIN, JSON.stringify(now, null, 1) + "\n");
    const pinned: Record<string, Record<string, string>> = JSON.parse(fs.readFileSync(PIN, "utf8"));
    assert.deepEqual(Object.keys(now), Object.keys(pinned), "the pin covers exactly the committed stacks");
    let compared = 0;
    for (const s of STACKS) {
        assert.deepEqual(Object.keys(now[s]), Object.keys(pinned[s]), s);
        for (const [k, v] of Object.entries(now[s])) {
            // One at a time, so a difference names its stack and scenario.
            assert.equal(v, pinned[s][k], `${s}: ${k}`);
            compared++;
        }
    }
    assert.ok(compared > 100, `only ${compared} renderings compared`);
});
