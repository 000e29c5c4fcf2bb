// `spark-vllm diff` on replicas (issue 39): which replicas relaunch, and whether the endpoint stays up.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { diffPlans, endpointImpact } from "../../../bin/diff-command";
import { planCluster } from "../../../components/plan/plan";
import { parseSpec } from "../../../components/spec/parseSpec";
import { rawConfig } from "../../fixtures";

function impact(before: Record<string, any>, after: Record<string, any>) {
    const [a, b] = [planCluster(parseSpec(before), "x"), planCluster(parseSpec(after), "x")];
    return endpointImpact(a, b, diffPlans(a, b));
}
const twoReplicas = (): Record<string, any> => ({ ...rawConfig(4, { tp: 2 }), replicas: 2, rollout: { drainSeconds: 45 } });

test("a vLLM flag on two replicas: both relaunch, one at a time, and the diff says the endpoint stays up", () => {
    const after = twoReplicas();
    after.vllm.extraArgs = ["--enable-prefix-caching"];
    const i = impact(twoReplicas(), after);
    assert.deepEqual([i.relaunched, i.staysUp], [[1, 2], true]);
    assert.equal(i.text, "replicas 1, 2 of 2 relaunch, one at a time (each taken out of the proxy, relaunched, proven and put back before the next); " +
        "the proxy sends requests to the other replica meanwhile, so the endpoint stays up");
});

test("a new image on two replicas is proven first, then rolls replica by replica, containers too: the diff says the endpoint stays up", () => {
    const after = twoReplicas();
    after.image = after.image.replace(/@sha256:[0-9a-f]+/, "@sha256:" + "cd".repeat(32));
    assert.notEqual(after.image, twoReplicas().image);
    const i = impact(twoReplicas(), after);
    assert.deepEqual([i.relaunched, i.staysUp], [[1, 2], true]);
    assert.equal(i.text, "the new image is first proven on every host in a throw-away container while the old version serves (a refused image fails up " +
        "and changes nothing); then replicas 1, 2 of 2 relaunch, one at a time (each taken out of the proxy, its containers replaced, relaunched, proven " +
        "and put back before the next); the proxy sends requests to the other replica meanwhile, so the endpoint stays up");
});

test("a new image on one replica: proven first, then down for the model's load, and the diff says so", () => {
    const after = rawConfig(2);
    after.image = after.image.replace(/@sha256:[0-9a-f]+/, "@sha256:" + "cd".repeat(32));
    const i = impact(rawConfig(2), after);
    assert.deepEqual([i.relaunched, i.staysUp], [[1], false]);
    assert.match(i.text, /^the new image is first proven on every host in a throw-away container while the old version serves \(a refused image fails up and changes nothing\); then vLLM relaunches: .*\(one replica: down from the old vLLM's stop for about the model's load time\)$/);
});

test("a change to one replica's host relaunches that replica only: the endpoint stays up on the other", () => {
    const after = twoReplicas();
    after.hosts[3].fabric.hcas = ["rocep1s0f1"];
    const i = impact(twoReplicas(), after);
    assert.deepEqual([i.relaunched, i.staysUp], [[2], true]);
    // Its HCAs are the container's devices and environment: replaced while replica 2 is out of the proxy.
    assert.equal(i.text, "replica 2 of 2 relaunches (taken out of the proxy, its containers replaced, relaunched, proven and put back); " +
        "the proxy sends requests to the other replica meanwhile, so the endpoint stays up");
});

test("one replica: a relaunch interrupts serving, and the diff says so; a change that relaunches nothing keeps serving", () => {
    const after = rawConfig(2);
    after.vllm.maxModelLen = 16384;
    const i = impact(rawConfig(2), after);
    assert.deepEqual([i.relaunched, i.staysUp], [[1], false]);
    assert.match(i.text, /^vLLM relaunches: the endpoint stops serving until the model has loaded again and is proven/);
    const probes = rawConfig(2);
    probes.probes = { servingRequests: 9 };
    assert.deepEqual(impact(rawConfig(2), probes), { replicas: 1, relaunched: [], staysUp: true, text: "vLLM is not relaunched: serving goes on" });
});

test("changing the number of replicas deploys every replica anew: the endpoint does not stay up", () => {
    const one = rawConfig(4, { tp: 4 });
    const i = impact(one, twoReplicas());
    assert.equal(i.staysUp, false);
    assert.match(i.text, /^the replicas change \(1 → 2\)/);
});
