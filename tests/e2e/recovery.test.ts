// Recovery on the simulated Sparks (issue 15): nobody runs `pulumi up` after vLLM is killed, a raylet is killed, the
// worker reboots, the head reboots; each time the endpoint answers completions again by itself (restart policy, then
// the containers' supervisor relaunching what the launches recorded). Seconds from the event (for a reboot: from the
// host being back) to serving go to the bench (SPARK_VLLM_RECOVERY_RESULT names the JSON file). Needs root.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import { simSuite, completionStatus } from "./suite";
import { Report, actionCount, changes, destroy, up } from "../engine/engine";
import { leftovers } from "../sim/stacks";

const suite = simSuite("recovery");
const PID_FILE = "/var/tmp/spark-vllm/vllm-serve.pid";


/** "PID STARTTIME" of the head's vLLM, as the launch (or a relaunch) wrote it. */
const vllmProcess = async () => (await suite.sim.exec("spark-a", `cat ${PID_FILE} 2>/dev/null`)).stdout.trim();

/** Seconds from `since` until a completion answers 200 from a vLLM other than `before`. */
async function servingAgain(r: Report, before: string, since: number, what: string, limitSeconds = 300): Promise<number> {
    for (;;) {
        const now = await vllmProcess();
        if (now !== before && now !== "" && (await completionStatus(r)) === 200) return Math.round((Date.now() - since) / 100) / 10;
        if (Date.now() - since > limitSeconds * 1000) {
            const logs = await suite.sim.exec("spark-a", "tail -n 30 /var/tmp/spark-vllm/vllm-serve.log");
            const sup = await suite.sim.docker("spark-a", ["logs", "--tail", "30", "spark-vllm-spark-a"]);
            const supB = await suite.sim.docker("spark-b", ["logs", "--tail", "30", "spark-vllm-spark-b"]);
            assert.fail(`${what}: not serving again within ${limitSeconds} s\nvLLM log:\n${logs.stdout}\nhead supervisor:\n${sup.stdout}${sup.stderr}\nworker supervisor:\n${supB.stdout}${supB.stderr}`);
        }
        await new Promise(res => setTimeout(res, 1000)); // poll interval of this wait for the condition (1 s: the figure's resolution)
    }
}

test("killed vLLM, killed raylet, rebooted worker, rebooted head: each comes back serving without `up`; destroy leaves nothing", async () => {
    const stack = suite.stack("recover");
    const seconds: Record<string, number> = {};
    try {
        const r = await up(stack);
        assert.equal(r.error, undefined, r.error);
        assert.equal(await completionStatus(r), 200);
        const again = await up(stack);
        assert.equal(again.error, undefined, again.error);
        assert.deepEqual(changes(again), [], "a healthy cluster's re-run is a no-op");
        assert.equal(actionCount(again), 0);

        let before = await vllmProcess();
        const pid = before.split(" ")[0];
        let t = Date.now();
        await suite.sim.docker("spark-a", ["exec", "spark-vllm-spark-a", "kill", "-KILL", pid]);
        seconds.vllmKilled = await servingAgain(r, before, t, "vLLM killed");

        before = await vllmProcess();
        t = Date.now();
        const pk = await suite.sim.docker("spark-b", ["exec", "spark-vllm-spark-b", "pkill", "-KILL", "-x", "raylet"]);
        assert.equal(pk.code, 0, `a raylet ran on the worker: ${pk.stderr}`);
        seconds.rayletKilled = await servingAgain(r, before, t, "raylet killed");
        const raylet = await suite.sim.docker("spark-b", ["exec", "spark-vllm-spark-b", "pgrep", "-x", "raylet"]);
        assert.equal(raylet.code, 0, "the worker's raylet runs again");

        for (const [host, key] of [["spark-b", "workerRebooted"], ["spark-a", "headRebooted"]] as const) {
            before = await vllmProcess();
            await suite.sim.reboot(host);
            t = Date.now();
            seconds[key] = await servingAgain(r, before, t, `${host} rebooted`);
            const state = await suite.sim.docker(host, ["inspect", "-f", "{{.RestartCount}} {{.State.Running}}", `spark-vllm-${host}`]);
            assert.match(state.stdout, /true/, "the same container runs again (restart policy)");
        }
        console.log(`recovery seconds: ${JSON.stringify(seconds)}`);
        if (process.env.SPARK_VLLM_RECOVERY_RESULT) fs.writeFileSync(process.env.SPARK_VLLM_RECOVERY_RESULT, JSON.stringify(seconds, null, 2));

        const after = await up(stack);
        assert.equal(after.error, undefined, after.error);
        assert.deepEqual(changes(after), [], "after recovery, up still has nothing to do");
    } finally {
        const d = await destroy(stack);
        assert.equal(d.error, undefined, d.error);
        assert.deepEqual(await leftovers(suite.sim), []);
    }
});
