// End to end: Ray token authentication and vLLM's environment carry-over on two simulated Sparks (needs root).
// The default sim image's Ray is 2.52.0 (token authentication); the old-ray tag's is 2.51.1 (none).
import { describe, test } from "node:test";
import * as assert from "node:assert/strict";
import { SimStackOptions, leftovers } from "../sim/stacks";
import { simSuite } from "./suite";
import { destroy, up } from "../engine/engine";
import { containerName } from "../../components/plan/naming";

const suite = simSuite("e2e-ray-auth");
const simStack = (name: string, opts: SimStackOptions = {}) => suite.stack(name, opts);

const HEAD = "spark-a", WORKER = "spark-b";
const REFUSED = "InvalidAuthToken: Authentication token is missing or incorrect";
const NO_TOKEN_AUTH = /the image's Ray 2\.51\.1 has no token authentication \(RAY_AUTH_MODE=token needs Ray >= 2\.52\.0\), so this cluster's Ray ports are open to anyone on the network.*docs\/security\.md \(section Ray\)/;

/**
 * A second Ray node joining the head from spark-b with ENV: real `ray start` in a throw-away container of the worker's
 * image (host network, so it reaches the head like the worker does; its own PID namespace, so its `ray stop` stops
 * only its own daemons; the dashboard agent on another port than the worker's). The command's result.
 */
async function intruder(env: Record<string, string>) {
    const head = suite.sim.hosts[0].address, self = suite.sim.hosts[1].address;
    const image = (await suite.sim.exec(WORKER, `docker inspect -f '{{.Config.Image}}' ${containerName(WORKER)}`)).stdout.trim();
    const e = Object.entries(env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
    const start = ["ray", "start", `--address=${head}:6379`, `--node-ip-address=${self}`, "--num-gpus=0", "--dashboard-agent-listen-port=52366"];
    const cmd = ["docker", "run", "--rm", "--network", "host", ...e, image, "bash", "-c", `${start.join(" ")}; rc=$?; ray stop --force >/dev/null 2>&1; exit $rc`];
    return suite.sim.exec(WORKER, cmd.map(a => `'${a}'`).join(" "));
}

const inContainer = (host: string, cmd: string) => suite.sim.exec(host, `docker exec ${containerName(host)} sh -c '${cmd}'`);

describe("Ray token authentication", () => {
    test("the cluster forms with the generated token; a raylet without it or with another one is refused", async () => {
        const stack = simStack("token");
        try {
            const r = await up(stack);
            assert.equal(r.error, undefined, r.error);
            assert.deepEqual((r.warnings ?? []).filter(w => /token authentication/.test(w)), [], "Ray 2.52 gives no warning");
            // The token sits root-only in the container, at the path the container's environment names.
            for (const host of [HEAD, WORKER]) {
                const f = await inContainer(host, "stat -c %a /var/lib/spark-vllm/ray /var/lib/spark-vllm/ray/auth_token; echo $RAY_AUTH_MODE $RAY_AUTH_TOKEN_PATH; env | grep -c ^RAY_AUTH_TOKEN= || true");
                assert.deepEqual(f.stdout.trim().split("\n"), ["700", "600", "token /var/lib/spark-vllm/ray/auth_token", "0"], f.stderr);
            }
            const noToken = await intruder({ RAY_AUTH_MODE: "disabled" });
            assert.notEqual(noToken.code, 0, noToken.stdout);
            assert.match(noToken.stderr, new RegExp(REFUSED));
            const wrong = await intruder({ RAY_AUTH_MODE: "token", RAY_AUTH_TOKEN: "not-the-cluster-token" });
            assert.notEqual(wrong.code, 0, wrong.stdout);
            assert.match(wrong.stderr, new RegExp(REFUSED));
            // vLLM's Ray worker on spark-b got vLLM's environment, but not the API key.
            const carried = JSON.parse((await inContainer(WORKER, "cat /tmp/ray/session_latest/logs/worker_env.json")).stdout);
            assert.ok(carried.includes("HF_HOME"), JSON.stringify(carried));
            assert.ok(!carried.includes("VLLM_API_KEY"), `VLLM_API_KEY reached the Ray worker: ${JSON.stringify(carried)}`);
            const log = (await suite.sim.exec(HEAD, "cat /var/tmp/spark-vllm/vllm-serve.log")).stdout;
            assert.match(log, /RAY_NON_CARRY_OVER_ENV_VARS from config: \{[^}]*'VLLM_API_KEY'[^}]*\}/);
        } finally {
            const d = await destroy(stack);
            assert.deepEqual(d.errors, []);
        }
        assert.deepEqual(await leftovers(suite.sim), []);
    });

    test("an image whose Ray predates token authentication serves, with a warning in the up output", async () => {
        const stack = simStack("old-ray", { tag: "old-ray" });
        try {
            const r = await up(stack);
            assert.equal(r.error, undefined, r.error);
            assert.ok((r.warnings ?? []).some(w => NO_TOKEN_AUTH.test(w)), `no Ray warning in ${JSON.stringify(r.warnings)}`);
            // The warning is true: Ray 2.51 ignores RAY_AUTH_MODE, and a raylet without any token joins.
            const open = await intruder({ RAY_AUTH_MODE: "disabled" });
            assert.equal(open.code, 0, open.stderr);
            assert.match(open.stdout, /Ray runtime started\./);
        } finally {
            const d = await destroy(stack);
            assert.deepEqual(d.errors, []);
        }
    });
});
