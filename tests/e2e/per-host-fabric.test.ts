// End to end (needs root: network namespaces, dockerd, sshd): Sparks cabled differently keep their own fabric settings
// under Ray, and link-local fabric addresses (NVIDIA's two-Spark netplan) plan and deploy. spark-b is cabled on port 2
// (enP2p1s0f1np1 / roceP2p1s0f1, DESIGN.md); every host's fabric interface also carries a 169.254.100.x/16 address.
// The hosts' GID tables differ (issue 47): the RoCE v2 GID of the fabric address is at 3 on spark-a and 5 on spark-b
// (the link-local address's right after it), so each host's NCCL processes need their own NCCL_IB_GID_INDEX.
import { after, before, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Sim, startSim } from "../sim/hosts";
import { leftovers, simStack } from "../sim/stacks";
import { destroy, up } from "../engine/engine";
import { containerName } from "../../components/plan/naming";

const FABRIC_VARS = ["VLLM_HOST_IP", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "UCX_NET_DEVICES", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "OMPI_MCA_btl_tcp_if_include"];

let sim: Sim;
let work = "";
before(async () => {
    if (process.getuid?.() !== 0) throw new Error("this end-to-end file needs root (network namespaces, dockerd, sshd)");
    work = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-per-host-fabric-"));
    sim = await startSim({ hosts: 2, cluster: "auto", fabric: { "spark-a": { gidIndex: 3 }, "spark-b": { interface: "enP2p1s0f1np1", hca: "roceP2p1s0f1", gidIndex: 5 } }, linkLocal: true });
}, { timeout: 900_000 });
after(async () => {
    await sim?.stop();
    if (work) fs.rmSync(work, { recursive: true, force: true });
}, { timeout: 300_000 });

/** A stack (Ray unless BACKEND) whose hosts use their own interface and HCA, at ADDRESS (the sim's, or link-local). */
function stack(name: string, address: (h: Sim["hosts"][number]) => string, backend: "ray" | "mp" = "ray") {
    const s = simStack(sim, work, name, { vllm: { backend } });
    const hosts = s.config["spark-vllm:hosts"] as Array<{ name: string; fabric: Record<string, unknown> }>;
    for (const h of hosts) {
        const simHost = sim.hosts.find(x => x.name === h.name)!;
        h.fabric = { interface: simHost.fabricInterface, address: address(simHost), hcas: [simHost.fabricHca] };
    }
    return s;
}

/** The environment of the processes in HOST's container whose command line contains PATTERN, one map per process. */
async function environOf(host: string, pattern: string): Promise<Array<Record<string, string>>> {
    const script = [
        "for p in /proc/[0-9]*; do",
        "  c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null) || continue",
        `  case "$c" in *"${pattern}"*) ;; *) continue ;; esac`,
        "  case \"$c\" in *'/proc/['*) continue ;; esac",
        "  echo \"== ${p#/proc/}\"; tr '\\0' '\\n' < $p/environ; echo",
        "done",
    ].join("\n");
    const r = await sim.exec(host, `docker exec -i ${containerName(host)} sh`, { input: script });
    assert.equal(r.code, 0, r.stderr);
    return r.stdout.split(/^== \d+\n/m).slice(1).map(block =>
        Object.fromEntries(block.split("\n").filter(l => l.includes("=")).map(l => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)])));
}

const expected = (h: Sim["hosts"][number], address: string) => ({
    VLLM_HOST_IP: address, NCCL_SOCKET_IFNAME: h.fabricInterface, NCCL_IB_HCA: h.fabricHca, UCX_NET_DEVICES: h.fabricInterface,
    GLOO_SOCKET_IFNAME: h.fabricInterface, TP_SOCKET_IFNAME: h.fabricInterface, OMPI_MCA_btl_tcp_if_include: h.fabricInterface,
});
const pick = (env: Record<string, string>) => Object.fromEntries(FABRIC_VARS.map(k => [k, env[k]]));

/**
 * Issue 47: each host's fabric check rank reports the GID index it ran with, its own table's for ADDRESS (`up`'s fabric
 * output is the head's verdict, each host's own is its fabric-rank<i>.json), and each host's NCCL processes run with it:
 * under Ray its raylet and vLLM's worker actor (they inherit Ray's start environment), while the head's vLLM driver runs
 * no NCCL rank and has none; under mp every host's `vllm serve`.
 */
async function assertOwnGidIndexes(r: { outputs?: Record<string, unknown> }, address: (h: Sim["hosts"][number]) => string, backend: "ray" | "mp" = "ray") {
    const index = (h: Sim["hosts"][number]) => h.fabricGidIndex + (address(h) === h.address ? 0 : 1);
    const [head] = sim.hosts;
    assert.notEqual(index(sim.hosts[0]), index(sim.hosts[1]), "the hosts' tables differ");
    const output = r.outputs?.fabric as { host: string; gid: { index: number; variable: string } };
    assert.deepEqual([output.host, output.gid.variable, output.gid.index], [head.name, "NCCL_IB_GID_INDEX", index(head)]);
    for (const [rank, h] of sim.hosts.entries()) {
        const verdict = JSON.parse((await sim.exec(h.name, `cat /var/tmp/spark-vllm/fabric-rank${rank}.json`)).stdout);
        assert.equal(verdict.host, h.name);
        assert.deepEqual(verdict.gid.table, { hca: h.fabricHca, port: 1, index: index(h), type: "RoCE v2", address: address(h) }, h.name);
        assert.equal(verdict.gid.index, index(h), h.name);
        const nccl = backend === "ray"
            ? [...await environOf(h.name, "raylet"), ...await environOf(h.name, "ray::RayWorkerWrapper")]
            : await environOf(h.name, "vllm serve");
        assert.ok(nccl.length >= (backend === "ray" ? 2 : 1), `${h.name}: its ${backend === "ray" ? "raylet and vLLM's worker actor" : "vllm serve"}`);
        for (const env of nccl) assert.equal(env.NCCL_IB_GID_INDEX, String(index(h)), `${h.name}: ${JSON.stringify(pick(env))}`);
    }
    if (backend === "ray") for (const env of await environOf(head.name, "vllm serve")) assert.equal(env.NCCL_IB_GID_INDEX, undefined);
}

describe("per-host fabric settings under Ray", () => {
    test("spark-b on port 2: the head's vLLM and spark-b's Ray worker each run with their own host's NCCL/UCX/Gloo values", async () => {
        const [head, worker] = sim.hosts;
        assert.notEqual(head.fabricInterface, worker.fabricInterface, "the sim's hosts are named differently");
        const s = stack("port2", h => h.address);
        try {
            const r = await up(s);
            assert.equal(r.error, undefined, r.error);
            // The head's vllm serve (the driver) has the head's values.
            const driver = await environOf(head.name, "vllm serve");
            assert.ok(driver.length >= 1, "no vllm serve process on the head");
            for (const env of driver) assert.deepEqual(pick(env), expected(head, head.address));
            // vLLM's RayWorkerWrapper on spark-b: its own values, though vLLM copied the driver's environment to it.
            const actors = await environOf(worker.name, "ray::RayWorkerWrapper");
            assert.equal(actors.length, 1, "one vLLM Ray worker on spark-b");
            assert.deepEqual(pick(actors[0]), expected(worker, worker.address));
            // vLLM did copy the variables that are the same on both hosts (the carry-over happened at all).
            const carried = JSON.parse((await sim.exec(worker.name, `docker exec ${containerName(worker.name)} cat /tmp/ray/session_latest/logs/worker_env.json`)).stdout);
            assert.ok(carried.includes("NCCL_IB_DISABLE") && carried.includes("HF_HOME"), JSON.stringify(carried));
            for (const k of FABRIC_VARS) assert.ok(!carried.includes(k), `vLLM copied the head's ${k} to spark-b`);
            await assertOwnGidIndexes(r, h => h.address);
            const log = (await sim.exec(head.name, "cat /var/tmp/spark-vllm/vllm-serve.log")).stdout;
            for (const k of ["NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "UCX_NET_DEVICES", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "VLLM_API_KEY", "NCCL_IB_GID_INDEX"])
                assert.match(log, new RegExp(`RAY_NON_CARRY_OVER_ENV_VARS from config: \\{[^}]*'${k}'`), k);
        } finally {
            const d = await destroy(s);
            assert.deepEqual(d.errors, []);
        }
        assert.deepEqual(await leftovers(sim), []);
    });
});

describe("per-host GID index under mp", () => {
    test("every host's vllm serve runs with its own host's NCCL_IB_GID_INDEX (3 on spark-a, 5 on spark-b)", async () => {
        const s = stack("mp-gid", h => h.address, "mp");
        try {
            const r = await up(s);
            assert.equal(r.error, undefined, r.error);
            await assertOwnGidIndexes(r, h => h.address, "mp");
        } finally {
            const d = await destroy(s);
            assert.deepEqual(d.errors, []);
        }
        assert.deepEqual(await leftovers(sim), []);
    });
});

describe("link-local fabric addresses", () => {
    test("a stack on 169.254.x fabric addresses deploys and serves, with the warning on up", async () => {
        const [head, worker] = sim.hosts;
        const s = stack("link-local", h => h.linkLocalAddress!);
        try {
            const r = await up(s);
            assert.equal(r.error, undefined, r.error);
            const warned = (r.warnings ?? []).filter(w => /link-local/.test(w));
            assert.equal(warned.length, 2, JSON.stringify(r.warnings));
            assert.match(warned[0], /can change at boot unless pinned.*netplan/);
            const actors = await environOf(worker.name, "ray::RayWorkerWrapper");
            assert.equal(actors.length, 1);
            assert.deepEqual(pick(actors[0]), expected(worker, worker.linkLocalAddress!));
            const driver = await environOf(head.name, "vllm serve");
            for (const env of driver) assert.deepEqual(pick(env), expected(head, head.linkLocalAddress!));
            // spark-b's Ray node (which the head placed vLLM's worker on) is on its link-local address.
            assert.equal(actors[0].RAY_NODE_IP_ADDRESS, worker.linkLocalAddress);
            // The link-local address's GID, one past the sim address's: the index follows the configured address.
            await assertOwnGidIndexes(r, h => h.linkLocalAddress!);
        } finally {
            const d = await destroy(s);
            assert.deepEqual(d.errors, []);
        }
        assert.deepEqual(await leftovers(sim), []);
    });
});
