// components/plan/fabricSetup.ts: the netplan drop-in each host gets from `spark-vllm:fabric`, and which twins carry
// which host pair, for two direct, a ring of three and a switch (a ring of four is refused: fabric-config.test.ts).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as yaml from "js-yaml";
import { parseSpec } from "../../../components/spec/parseSpec";
import { FABRIC_NETPLAN_PATH, fabricSetupNotes, planFabricSetup } from "../../../components/plan/fabricSetup";
import { rawConfig } from "../../fixtures";

function specWith(n: number, fabric: Record<string, unknown>, addresses?: string[]) {
    const raw = rawConfig(n);
    raw.hosts.forEach((h: Record<string, unknown>, i: number) => (h.fabric = addresses ? { address: addresses[i] } : undefined));
    raw.fabric = { setup: true, ...fabric };
    return parseSpec(raw);
}
const twin = (address: string, mtu = 9000) => ({ dhcp4: false, addresses: [address], mtu });

test("setup off: no drop-in at all", () => {
    assert.equal(planFabricSetup(parseSpec(rawConfig(2))), undefined);
    assert.deepEqual(fabricSetupNotes(parseSpec(rawConfig(2))), []);
});

test("two direct: each host's drop-in names exactly port 1's twins, each on its own subnet, MTU 9000, at 0600 in 60-spark-vllm-fabric.yaml", () => {
    const plan = planFabricSetup(specWith(2, {}))!;
    assert.deepEqual(plan.hosts.map(h => [h.host, h.path, h.mode]), [["spark-a", FABRIC_NETPLAN_PATH, 0o600], ["spark-b", FABRIC_NETPLAN_PATH, 0o600]]);
    assert.equal(FABRIC_NETPLAN_PATH, "/etc/netplan/60-spark-vllm-fabric.yaml");
    assert.equal(plan.hosts[1].yaml, [
        "network:",
        "  version: 2",
        "  ethernets:",
        "    enp1s0f1np1:",
        "      dhcp4: false",
        "      addresses:",
        "        - 192.168.100.11/24",
        "      mtu: 9000",
        "    enP2p1s0f1np1:",
        "      dhcp4: false",
        "      addresses:",
        "        - 192.168.101.11/24",
        "      mtu: 9000",
        "",
    ].join("\n"));
    // The text is the document: what netplan reads back is exactly the typed object, and nothing else (no routes).
    for (const h of plan.hosts) assert.deepEqual(yaml.load(h.yaml), h.document);
    assert.deepEqual(plan.hosts[0].document.network.ethernets, { enp1s0f1np1: twin("192.168.100.10/24"), enP2p1s0f1np1: twin("192.168.101.10/24") });
    assert.deepEqual(plan.pairs, [{
        hosts: ["spark-a", "spark-b"],
        twins: [
            { subnet: "192.168.100.0/24", ends: [{ host: "spark-a", interface: "enp1s0f1np1", address: "192.168.100.10" }, { host: "spark-b", interface: "enp1s0f1np1", address: "192.168.100.11" }] },
            { subnet: "192.168.101.0/24", ends: [{ host: "spark-a", interface: "enP2p1s0f1np1", address: "192.168.101.10" }, { host: "spark-b", interface: "enP2p1s0f1np1", address: "192.168.101.11" }] },
        ],
    }]);
    assert.deepEqual(plan.hosts[0].links.map(l => [l.interface, l.rdma, l.address, l.peers.join()]), [
        ["enp1s0f1np1", "rocep1s0f1", "192.168.100.10/24", "spark-b"],
        ["enP2p1s0f1np1", "roceP2p1s0f1", "192.168.101.10/24", "spark-b"],
    ]);
});

test("two direct, link-local on port 0 with MTU 1500: `link-local: [ipv4]` and no addresses (NVIDIA's first netplan)", () => {
    const plan = planFabricSetup(specWith(2, { addressing: "link-local", port: 0, mtu: 1500 }, ["169.254.1.1", "169.254.1.2"]))!;
    assert.deepEqual(plan.hosts[0].document.network.ethernets, {
        enp1s0f0np0: { "dhcp4": false, "link-local": ["ipv4"], mtu: 1500 },
        enP2p1s0f0np0: { "dhcp4": false, "link-local": ["ipv4"], mtu: 1500 },
    });
    assert.match(plan.hosts[0].yaml, /link-local:\n {8}- ipv4\n/);
    assert.equal(plan.pairs[0].twins[0].subnet, undefined);
});

test("ring of three: four twins per host, cable k from hosts[k]'s Port0 to the next one's Port1, each pair on one cable's two subnets", () => {
    const spec = specWith(3, { topology: "ring", subnets: ["10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24", "10.0.3.0/24", "10.0.4.0/24", "10.0.5.0/24"] });
    const plan = planFabricSetup(spec)!;
    assert.deepEqual(plan.hosts.map(h => h.document.network.ethernets), [
        { enp1s0f0np0: twin("10.0.0.10/24"), enP2p1s0f0np0: twin("10.0.1.10/24"), enp1s0f1np1: twin("10.0.4.10/24"), enP2p1s0f1np1: twin("10.0.5.10/24") },
        { enp1s0f1np1: twin("10.0.0.11/24"), enP2p1s0f1np1: twin("10.0.1.11/24"), enp1s0f0np0: twin("10.0.2.11/24"), enP2p1s0f0np0: twin("10.0.3.11/24") },
        { enp1s0f1np1: twin("10.0.2.12/24"), enP2p1s0f1np1: twin("10.0.3.12/24"), enp1s0f0np0: twin("10.0.4.12/24"), enP2p1s0f0np0: twin("10.0.5.12/24") },
    ]);
    assert.deepEqual(plan.pairs.map(p => `${p.hosts.join("-")}: ${p.twins.map(t => `${t.subnet} ${t.ends.map(e => `${e.host}/${e.interface}`).join("+")}`).join(", ")}`), [
        "spark-a-spark-b: 10.0.0.0/24 spark-a/enp1s0f0np0+spark-b/enp1s0f1np1, 10.0.1.0/24 spark-a/enP2p1s0f0np0+spark-b/enP2p1s0f1np1",
        "spark-a-spark-c: 10.0.4.0/24 spark-c/enp1s0f0np0+spark-a/enp1s0f1np1, 10.0.5.0/24 spark-c/enP2p1s0f0np0+spark-a/enP2p1s0f1np1",
        "spark-b-spark-c: 10.0.2.0/24 spark-b/enp1s0f0np0+spark-c/enp1s0f1np1, 10.0.3.0/24 spark-b/enP2p1s0f0np0+spark-c/enP2p1s0f1np1",
    ]);
    // spark-c is known at 10.0.4.12, on its cable to spark-a, but the head is known at 10.0.0.10: said, not hidden.
    const notes = fabricSetupNotes(spec);
    assert.equal(notes.length, 1);
    assert.match(notes[0], /^spark-vllm:fabric \(ring\): spark-c shares no subnet with spark-a's fabric address 10\.0\.0\.10 /);
});

test("switch of four: every host on both twins of the port, every pair on both subnets", () => {
    const plan = planFabricSetup(specWith(4, { topology: "switch", port: 0, mtu: 9000 }))!;
    assert.deepEqual(plan.hosts[3].document.network.ethernets, { enp1s0f0np0: twin("192.168.100.13/24"), enP2p1s0f0np0: twin("192.168.101.13/24") });
    assert.equal(plan.pairs.length, 6);
    for (const p of plan.pairs) assert.deepEqual(p.twins.map(t => t.subnet), ["192.168.100.0/24", "192.168.101.0/24"]);
    assert.deepEqual(plan.hosts[0].links[0].peers, ["spark-b", "spark-c", "spark-d"]);
    assert.deepEqual(fabricSetupNotes(specWith(4, { topology: "switch" })), []);
});
