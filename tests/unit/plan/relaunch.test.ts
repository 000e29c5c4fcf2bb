// The relaunch commands spark-vllm prints (components/plan/relaunch.ts): their URNs are the real program's (pinned in
// tests/unit/fixtures/stack-urns.json), and the endpoint probe carries the vLLM one, so a failed probe names it.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { launchUrn, memoryGateUrns, replaceCommand } from "../../../components/plan/relaunch";
import { readStackFile, stackOwner } from "../../../bin/shared";

const ROOT = path.join(__dirname, "..", "..", "..");
const pinned: Record<string, string[]> = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "fixtures", "stack-urns.json"), "utf8"));

test("the memory gates' and Ray launches' URNs are the program's, for every committed stack", () => {
    for (const [stack, urns] of Object.entries(pinned)) {
        const owner = { project: stackOwner(ROOT, stack).project, stack };
        const spec = parseSpec(readStackFile(ROOT, stack));
        const gates = memoryGateUrns(owner, spec.hosts.map(h => h.name));
        assert.deepEqual(gates, urns.filter(u => u.endsWith("-memory")), stack);
        const rays = spec.hosts.map((h, i) => launchUrn(owner, h.name, i === 0, "ray")!);
        if (spec.vllm.backend === "ray") for (const u of rays) assert.ok(urns.includes(u), `${stack}: ${u}`);
        else assert.ok(rays.every(u => !urns.includes(u)), `${stack}: no Ray launch without Ray`);
    }
});

test("the replace command quotes each URN for the shell, and the endpoint probe carries it", () => {
    const owner = { project: "spark-vllm", stack: "spark" };
    const urns = memoryGateUrns(owner, ["spark-a", "spark-b"]);
    assert.equal(replaceCommand(owner, urns), `pulumi up -s spark --replace '${urns[0]}' --replace '${urns[1]}'`);
    const spec = parseSpec(readStackFile(ROOT, "spark"));
    const probe = (plan: ReturnType<typeof planCluster>) => JSON.parse(/endpoint-probe '(.*)'$/.exec(plan.endpointProbe.create)![1].replace(/'"'"'/g, "'"));
    assert.equal(probe(planCluster(spec, undefined, { owner })).relaunch, replaceCommand(owner, memoryGateUrns(owner, spec.hosts.map(h => h.name))));
    assert.equal(probe(planCluster(spec)).relaunch, undefined, "no owner (the offline plan): nothing to name");
});
