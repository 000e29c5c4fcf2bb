// After vLLM dies while loading: what brings it back. The endpoint probe fails, but the vLLM launch's create had
// succeeded (it only starts the process) and stays in the state; the command provider has no Read, so fixing the cause
// and running a plain `pulumi up` again re-runs only the failed probe, which fails again, and the supervisor never
// relaunches a launch that was never proven (components/hostProgram/spark_vllm/supervise.py). `pulumi up --replace` of
// every host's memory gate does: each gate (delete-before-replace) stops vLLM, drops the page cache and checks memory,
// the launch lists the gates in replacedBy, the probe the launch (components/plan/resources.ts, section 8); what
// the probe's failure, `spark-vllm status` and docs/troubleshooting.md tell the user to run. A target not in the stack fails the up before
// anything runs (pulumi/pulumi deployment_executor.go checkTargets). Needs root.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { completionStatus, failure, simSuite } from "./suite";
import { changes, destroy, up } from "../engine/engine";
import { loadState } from "../engine/state";
import { leftovers } from "../sim/stacks";
import { resourceNames } from "../../components/plan/naming";

const suite = simSuite("relaunch");
const n = resourceNames();
const summary = (r: { ops: Array<{ op: string; name: string; failed?: boolean }> }) =>
    changes(r as any).map(o => `${o.op} ${o.name}${o.failed ? " (failed)" : ""}`).sort();

test("a crash while loading: a plain up again re-runs only the probe; --replace of the memory gates relaunches vLLM and serves", async () => {
    const stack = suite.stack("relaunch");
    await suite.sim.setFaults("spark-a", { load_seconds: 10, crash_after_seconds: 4 });
    try {
        const first = await up(stack);
        assert.match(failure(first), new RegExp(`${n.of("endpoint-probe")}[\\s\\S]*kind: cuda-error`));
        await suite.sim.setFaults("spark-a", null); // the cause is fixed outside the stack

        const again = await up(stack);
        assert.match(failure(again), new RegExp(n.of("endpoint-probe")));
        assert.deepEqual(summary(again), [`create ${n.of("endpoint-probe")} (failed)`], "a plain up relaunches nothing");

        const urns = Object.keys(loadState(stack.statePath).resources);
        const gates = suite.sim.hosts.map(h => urns.find(u => u.endsWith(`::${n.host(h.name, "memory")}`))!);
        assert.equal(gates.filter(Boolean).length, suite.sim.hosts.length, urns.join("\n"));
        // Both failures say so, and name the command that relaunches it, with the stack's own URNs.
        const command = `pulumi up -s ${stack.name} ${gates.map(g => `--replace '${g}'`).join(" ")}`;
        for (const r of [first, again]) assert.ok(r.error!.includes(`  ${command}`), `${r.error}\nlacks ${command}`);
        assert.match(first.error!, /vllm serve on spark-a exited \d+ s after the probe started/);
        assert.match(again.error!, /vllm serve on spark-a is not running \(pid \d+\): it had exited before this probe's first check/);

        const missing = gates[0].replace(/::[^:]+$/, "::spark-no-such-resource");
        const refused = await up(stack, { replace: [gates[0], missing] });
        assert.equal(refused.error, `Target '${missing}' could not be found in the stack.`);
        assert.deepEqual(summary(refused), [], "nothing runs when a target is not in the stack");

        const relaunched = await up(stack, { replace: gates });
        assert.equal(relaunched.error, undefined, relaunched.error);
        assert.deepEqual(summary(relaunched), [
            `create ${n.of("endpoint-probe")}`,
            ...suite.sim.hosts.map(h => `replace ${n.host(h.name, "memory")}`),
            `replace ${n.of("vllm-launch")}`,
            // What follows the probe never ran: the serving proof and each host's after-load memory reading, created now.
            `create ${n.of("serving-proof")}`,
            ...suite.sim.hosts.map(h => `create ${n.host(h.name, "loaded")}`),
        ].sort());
        assert.equal(await completionStatus(relaunched), 200);

        const quiet = await up(stack);
        assert.equal(quiet.error, undefined, quiet.error);
        assert.deepEqual(summary(quiet), [], "and then a plain up changes nothing");
    } finally {
        await suite.sim.setFaults("spark-a", null);
        await destroy(stack);
    }
    assert.deepEqual(await leftovers(suite.sim), []);
});
