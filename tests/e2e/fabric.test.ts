// End to end on simulated Sparks (needs root): the fabric proven before any launch (issue 12). The sim's hosts show a
// RoCE HCA in sysfs (tests/sim/hosts.ts), so the preflight passes; the stand-in torch prints NCCL's lines, copied from
// real NCCL 2.28 runs (tests/fixtures/nccl), with the fault switches hca_missing and iface_missing.
import { describe, test } from "node:test";
import * as assert from "node:assert/strict";
import { SimStackOptions } from "../sim/stacks";
import { failure, simSuite } from "./suite";
import { Report, destroy, up } from "../engine/engine";
import { resourceNames } from "../../components/plan/naming";

const N = resourceNames();

const suite = simSuite("e2e-fabric", { hcas: ["rocep1s0f1"] });
const simStack = (name: string, opts: SimStackOptions = {}) => suite.stack(name, opts);

const nothingLaunched = (r: Report) =>
    assert.ok(!r.ops.some(o => [N.of("ray-head"), N.of("vllm-launch")].includes(o.name) || /-memory$/.test(o.name)), "nothing after the fabric check ran");

describe("fabric check", () => {
    test("a healthy RoCE fabric passes before any launch and records transport and bus bandwidth in the fabric output", async () => {
        const stack = simStack("fabric-ok");
        try {
            const r = await up(stack);
            assert.equal(r.error, undefined, r.error);
            const fabric = r.outputs?.fabric as { transport: string; busbwGBps: Record<string, number> };
            console.log(`fabric: ${JSON.stringify({ transport: fabric.transport, busbwGBps: fabric.busbwGBps })}`);
            assert.equal(fabric.transport, "NET/IB");
            assert.ok(Object.values(fabric.busbwGBps).every(v => v > 0), JSON.stringify(fabric.busbwGBps));
            const rank = r.ops.find(o => o.name === N.host("spark-a", "fabric"))!;
            const ray = r.ops.find(o => o.name === N.of("ray-head"))!;
            assert.ok(rank.endMs <= ray.startMs, "the fabric check finished before Ray started");
            const hosts = r.outputs?.hosts as Record<string, { hcas: Array<{ roceV2Ipv4: unknown[] }> }>;
            assert.equal(hosts["spark-b"].hcas[0].roceV2Ipv4.length, 1, "RoCE facts in the hosts output");
            assert.ok(!r.warnings?.some(w => /all-reduce bus bandwidth/.test(w)), `no bandwidth warning: ${r.warnings?.join("\n")}`);
        } finally {
            await destroy(stack);
        }
    });

    test("a fabric far below its link's line rate still serves, and `up` warns naming the host and the figures", async () => {
        const stack = simStack("fabric-slow");
        // The stand-in torch's bus bandwidth follows slow_link_gbps; the sim's veth reports 10 Gb/s in sysfs.
        for (const h of ["spark-a", "spark-b"]) await suite.sim.setFaults(h, { slow_link_gbps: 1 });
        try {
            const r = await up(stack);
            assert.equal(r.error, undefined, r.error);
            const warning = r.warnings?.find(w => /all-reduce bus bandwidth/.test(w));
            assert.ok(warning, `a bandwidth warning among: ${r.warnings?.join("\n")}`);
            assert.match(warning, /^spark-[ab]: .* below 25% of the fabric link's line rate \(10 Gb\/s/);
        } finally {
            for (const h of ["spark-a", "spark-b"]) await suite.sim.setFaults(h, null);
            await destroy(stack);
        }
    });

    test("a configured HCA NCCL cannot use fails up before any launch, with NCCL's own words and the host", async () => {
        const stack = simStack("fabric-hca");
        for (const h of ["spark-a", "spark-b"]) await suite.sim.setFaults(h, { hca_missing: true });
        try {
            const r = await up(stack);
            const error = failure(r);
            nothingLaunched(r);
            assert.match(error, new RegExp(`${N.host("spark-a", "fabric")}|${N.host("spark-b", "fabric")}`));
            assert.match(error, /NET\/IB : No device found\./);
            assert.match(error, /Using network Socket/);
            assert.match(error, /spark-[ab]/);
        } finally {
            for (const h of ["spark-a", "spark-b"]) await suite.sim.setFaults(h, null);
            await destroy(stack);
        }
    });

    test("a socket interface NCCL cannot find fails with the bootstrap error's cause line", async () => {
        const stack = simStack("fabric-iface", { hcas: [], probes: { fabricTimeoutSeconds: 20 } });
        await suite.sim.setFaults("spark-a", { iface_missing: true });
        try {
            const r = await up(stack);
            failure(r);
            // Every rank fails, as `pulumi up` reports each failed resource: the head's rank says why (NCCL's bootstrap
            // line), the worker's that the master went away first.
            const head = r.errors.find(e => e.includes(N.host("spark-a", "fabric")));
            assert.ok(head, `no error from ${N.host("spark-a", "fabric")}: ${r.errors.join("\n")}`);
            assert.match(head, /Bootstrap : no socket interface found/);
            assert.match(head, /spark-a/);
            nothingLaunched(r);
        } finally {
            await suite.sim.setFaults("spark-a", null);
            await destroy(stack);
        }
    });
});
