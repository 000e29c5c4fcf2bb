// `spark-vllm:fabric` (issue 48): its defaults, every refusal with its key path, the hosts' fabric it fills for each
// topology, and the old shape (hosts naming an addressed fabric) unchanged.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { parseSpec } from "../../../components/spec/parseSpec";
import { readStackFile } from "../../../bin/shared";
import { rawConfig, specProblems } from "../../fixtures";

const ROOT = path.resolve(__dirname, "../../..");

/** `n` hosts with no `fabric` of their own and `spark-vllm:fabric` set to `fabric`. */
function planned(n: number, fabric: Record<string, unknown>) {
    const raw = rawConfig(n);
    raw.hosts.forEach((h: Record<string, unknown>) => delete h.fabric);
    raw.fabric = { setup: true, ...fabric };
    return raw;
}
const fabricOf = (raw: Record<string, unknown>) => parseSpec(raw).hosts.map(h => h.fabric);
/** Asserts the config is refused with exactly `expected` among its problems (each a whole problem line). */
function refusedWith(raw: Record<string, unknown>, ...expected: string[]) {
    const found = specProblems(raw);
    for (const e of expected) assert.ok(found.includes(e), `missing\n  ${e}\nin:\n  ${found.join("\n  ")}`);
}

test("no spark-vllm:fabric: setup off, and every default filled as documented", () => {
    const spec = parseSpec(rawConfig(2));
    assert.deepEqual(spec.fabric, { setup: false, topology: "direct", addressing: "static", port: 1, subnets: ["192.168.100.0/24", "192.168.101.0/24"], mtu: 9000 });
    assert.deepEqual(spec.hosts.map(h => h.fabric), rawConfig(2).hosts.map((h: { fabric: unknown }) => h.fabric));
});

test("the old shape is unchanged: every committed stack and the test fixture keep their hosts' fabric as written, setup off", () => {
    const stacks = fs.readdirSync(ROOT).flatMap(f => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1] ?? []);
    assert.ok(stacks.length >= 6, `stacks: ${stacks}`);
    for (const stack of stacks) {
        const spec = parseSpec(readStackFile(ROOT, stack));
        const written = (yaml.load(fs.readFileSync(path.join(ROOT, `Pulumi.${stack}.yaml`), "utf8")) as { config: Record<string, any> }).config["spark-vllm:hosts"];
        assert.equal(spec.fabric?.setup, false, stack);
        assert.deepEqual(spec.hosts.map(h => h.fabric), written.map((h: { fabric: Record<string, unknown> }) => ({ hcas: [], ...h.fabric })), stack);
    }
    const raw = rawConfig(4);
    assert.deepEqual(parseSpec(raw).hosts.map(h => h.fabric), raw.hosts.map((h: { fabric: unknown }) => h.fabric));
});

test("with setup off, hosts[].fabric is still required, in the words it always had", () => {
    const raw = rawConfig(2);
    delete raw.hosts[1].fabric;
    refusedWith(raw, "spark-vllm:hosts[1].fabric: missing; it is required");
    raw.fabric = { setup: false, topology: "switch" };
    refusedWith(raw, "spark-vllm:hosts[1].fabric: missing; it is required");
});

test("direct: both twins of port 1, one subnet each, hosts at .10 and .11 (NVIDIA's two-Spark netplan)", () => {
    assert.deepEqual(fabricOf(planned(2, {})), [
        { interface: "enp1s0f1np1", address: "192.168.100.10", hcas: ["rocep1s0f1", "roceP2p1s0f1"] },
        { interface: "enp1s0f1np1", address: "192.168.100.11", hcas: ["rocep1s0f1", "roceP2p1s0f1"] },
    ]);
    assert.deepEqual(fabricOf(planned(2, { port: 0, subnets: ["10.40.0.0/16", "10.41.0.0/16"] })), [
        { interface: "enp1s0f0np0", address: "10.40.0.10", hcas: ["rocep1s0f0", "roceP2p1s0f0"] },
        { interface: "enp1s0f0np0", address: "10.40.0.11", hcas: ["rocep1s0f0", "roceP2p1s0f0"] },
    ]);
});

test("ring of three: each host known by its twin-0 address on the cable it shares with hosts[0], HCAs of all four twins", () => {
    const spec = parseSpec(planned(3, { topology: "ring" }));
    assert.deepEqual(spec.fabric?.subnets, ["192.168.100.0/24", "192.168.101.0/24", "192.168.102.0/24", "192.168.103.0/24", "192.168.104.0/24", "192.168.105.0/24"]);
    assert.deepEqual(spec.hosts.map(h => h.fabric), [
        // cable 0: spark-a's Port0 to spark-b's Port1, subnets 0 and 1
        { interface: "enp1s0f0np0", address: "192.168.100.10", hcas: ["rocep1s0f0", "roceP2p1s0f0", "rocep1s0f1", "roceP2p1s0f1"] },
        { interface: "enp1s0f1np1", address: "192.168.100.11", hcas: ["rocep1s0f1", "roceP2p1s0f1", "rocep1s0f0", "roceP2p1s0f0"] },
        // cable 2: spark-c's Port0 to spark-a's Port1, subnets 4 and 5
        { interface: "enp1s0f0np0", address: "192.168.104.12", hcas: ["rocep1s0f1", "roceP2p1s0f1", "rocep1s0f0", "roceP2p1s0f0"] },
    ]);
});

test("ring of four is refused at fabric.topology: hosts two cables apart would not meet", () => {
    refusedWith(planned(4, { topology: "ring" }),
        "spark-vllm:fabric.topology: ring joins three Sparks (each one's Port0 to the next one's Port1), and the stack has 4 (in a ring of four, hosts two cables apart cannot reach each other: no routes are planned, and every host must reach the head); set switch");
});

test("switch: every host on both twins of the port, at .10 + i", () => {
    assert.deepEqual(fabricOf(planned(4, { topology: "switch", mtu: 4000 })).map(f => `${f.interface} ${f.address} ${f.hcas.join(",")}`), [
        "enp1s0f1np1 192.168.100.10 rocep1s0f1,roceP2p1s0f1",
        "enp1s0f1np1 192.168.100.11 rocep1s0f1,roceP2p1s0f1",
        "enp1s0f1np1 192.168.100.12 rocep1s0f1,roceP2p1s0f1",
        "enp1s0f1np1 192.168.100.13 rocep1s0f1,roceP2p1s0f1",
    ]);
});

test("written host fabric is held to the plan: the planned values pass, others are refused at their paths; written HCAs are kept", () => {
    const raw = planned(2, {});
    raw.hosts[0].fabric = { interface: "enp1s0f1np1", address: "192.168.100.10", hcas: ["rocep1s0f1"] };
    assert.deepEqual(parseSpec(raw).hosts[0].fabric, { interface: "enp1s0f1np1", address: "192.168.100.10", hcas: ["rocep1s0f1"] });
    raw.hosts[1].fabric = { interface: "enp1s0f0np0", address: "192.168.100.99" };
    refusedWith(raw,
        "spark-vllm:hosts[1].fabric.interface: is enp1s0f0np0, but spark-vllm:fabric (direct, port 1) sets up spark-b's fabric on enp1s0f1np1; remove hosts[1].fabric.interface (the plan fills it) or change spark-vllm:fabric",
        "spark-vllm:hosts[1].fabric.address: is 192.168.100.99, but spark-vllm:fabric gives spark-b 192.168.100.11 on enp1s0f1np1; remove hosts[1].fabric.address (the plan fills it) or change spark-vllm:fabric.subnets");
});

test("link-local addressing: no subnets, the interface filled, and the address must be given", () => {
    const raw = planned(2, { addressing: "link-local" });
    const spec = parseSpec({ ...raw, hosts: raw.hosts.map((h: object, i: number) => ({ ...h, fabric: { address: `169.254.7.${i + 1}` } })) });
    assert.deepEqual(spec.fabric?.subnets, []);
    assert.deepEqual(spec.hosts.map(h => h.fabric), [
        { interface: "enp1s0f1np1", address: "169.254.7.1", hcas: ["rocep1s0f1", "roceP2p1s0f1"] },
        { interface: "enp1s0f1np1", address: "169.254.7.2", hcas: ["rocep1s0f1", "roceP2p1s0f1"] },
    ]);
    refusedWith(raw,
        "spark-vllm:hosts[0].fabric.address: missing: with spark-vllm:fabric.addressing link-local the kernel picks spark-a's address on enp1s0f1np1 (169.254.0.0/16) when the drop-in is applied, and the stack must name it; set fabric.addressing: static (the program chooses the addresses), or give the address the host has");
});

test("values of the block's own keys are refused at their paths", () => {
    refusedWith(planned(2, { topology: "mesh", addressing: "dhcp", port: 2, mtu: 9216, subnet: [] }),
        'spark-vllm:fabric.topology: must be direct, ring or switch, got "mesh"',
        'spark-vllm:fabric.addressing: must be static or link-local, got "dhcp"',
        "spark-vllm:fabric.port: must be between 0 and 1, got 2",
        "spark-vllm:fabric.mtu: must be between 1500 and 9000, got 9216",
        "spark-vllm:fabric.subnet: unknown key; did you mean subnets?");
    refusedWith(planned(2, { mtu: 1400 }), "spark-vllm:fabric.mtu: must be between 1500 and 9000, got 1400");
    assert.ok(specProblems({ ...rawConfig(2), fabric: "yes" }).some(p => p.startsWith("spark-vllm:fabric: ")));
});

test("a topology that does not fit the hosts is refused at fabric.topology, naming the fit", () => {
    refusedWith(planned(3, {}), "spark-vllm:fabric.topology: direct joins exactly two Sparks on one cable, and the stack has 3 hosts; set ring (three Sparks, each cabled to the next two) or switch");
    refusedWith(planned(2, { topology: "ring" }), "spark-vllm:fabric.topology: ring joins three Sparks (each one's Port0 to the next one's Port1), and the stack has 2; set direct");
    refusedWith(planned(1, { topology: "switch" }), "spark-vllm:fabric.topology: switch needs two or more hosts, and the stack has 1");
    // Setup off: the block is not applied, so its topology is not held to the hosts.
    assert.equal(parseSpec({ ...rawConfig(3), fabric: { topology: "direct" } }).fabric?.topology, "direct");
});

test("link-local is refused with a ring and with subnets", () => {
    refusedWith(planned(3, { topology: "ring", addressing: "link-local" }),
        "spark-vllm:fabric.addressing: link-local puts every twin of both cables in 169.254.0.0/16, and each twin needs a subnet of its own (NVIDIA's multi-Spark guide); use static with a ring");
    refusedWith(planned(2, { addressing: "link-local", subnets: ["192.168.100.0/24", "192.168.101.0/24"] }),
        "spark-vllm:fabric.subnets: link-local addressing takes no subnets (the kernel picks addresses in 169.254.0.0/16); remove fabric.subnets or set fabric.addressing: static");
});

test("an SSH address in 169.254.0.0/16 is refused at hosts[i].ssh.host with setup on, whatever the addressing; allowed with setup off", () => {
    const message = "spark-vllm:hosts[1].ssh.host: 169.254.3.4 is link-local (169.254.0.0/16), as ConnectX-7 twins may be, and spark-vllm:fabric.setup re-addresses every fabric twin, which would take this SSH session's network; reach the host by its management address (10 GbE or Wi-Fi), or set fabric.setup: false";
    for (const addressing of ["link-local", "static"]) {
        const raw = planned(2, { addressing });
        raw.hosts[1].ssh.host = "169.254.3.4";
        refusedWith(raw, message);
    }
    const off = rawConfig(2);
    off.hosts[1].ssh.host = "169.254.3.4";
    off.fabric = { setup: false };
    assert.equal(parseSpec(off).hosts[1].ssh.host, "169.254.3.4");
});

test("subnets: count, form, prefix, room, host bits, overlaps, link-local range and the SSH addresses, each at its index", () => {
    refusedWith(planned(2, { subnets: ["192.168.100.0/24"] }),
        "spark-vllm:fabric.subnets: lists 1 subnet; direct with 2 hosts needs 2, one per twin (each twin on its own subnet); list 2 or leave it out for 192.168.100.0/24, 192.168.101.0/24, …");
    refusedWith(planned(3, { topology: "ring", subnets: ["10.0.0.0/24", "10.0.1.0/24"] }),
        "spark-vllm:fabric.subnets: lists 2 subnets; ring with 3 hosts needs 6, one per twin of every cable (each twin on its own subnet); list 6 or leave it out for 192.168.100.0/24, 192.168.101.0/24, …");
    refusedWith(planned(2, { subnets: ["10.0.0.0", "10.0.1.7/24"] }),
        'spark-vllm:fabric.subnets[0]: "10.0.0.0" is not a subnet; write it as a.b.c.d/prefix, e.g. 192.168.100.0/24',
        "spark-vllm:fabric.subnets[1]: 10.0.1.7/24 has host bits set; write the network itself, 10.0.1.0/24");
    refusedWith(planned(2, { subnets: ["10.0.0.0/29", "10.0.0.0/7"] }),
        "spark-vllm:fabric.subnets[0]: 10.0.0.0/29: the prefix must be between /8 and /28 (hosts take addresses .10 and up)",
        "spark-vllm:fabric.subnets[1]: 10.0.0.0/7: the prefix must be between /8 and /28 (hosts take addresses .10 and up)");
    // A /28 holds .1 to .14: hosts .10 to .14 fit, a sixth (.15, the broadcast address) does not.
    assert.equal(parseSpec(planned(5, { topology: "switch", subnets: ["10.0.0.0/28", "10.0.1.0/28"] })).hosts[4].fabric.address, "10.0.0.14");
    refusedWith(planned(6, { topology: "switch", subnets: ["10.0.0.0/28", "10.0.1.0/28"] }),
        "spark-vllm:fabric.subnets[0]: 10.0.0.0/28 holds 14 addresses, too few for 6 hosts at .10 and up; give a wider subnet such as /24");
    refusedWith(planned(2, { subnets: ["10.0.0.0/16", "10.0.5.0/24"] }),
        "spark-vllm:fabric.subnets[1]: 10.0.5.0/24 overlaps fabric.subnets[0] 10.0.0.0/16; every twin needs a subnet of its own (one interface per host per subnet), so give one that does not overlap");
    refusedWith(planned(2, { subnets: ["169.254.10.0/24", "127.0.0.0/8"] }),
        "spark-vllm:fabric.subnets[0]: 169.254.10.0/24 overlaps 169.254.0.0/16, the link-local range (RFC 3927) the kernel picks from itself; give a private subnet such as 192.168.100.0/24, or set fabric.addressing: link-local",
        "spark-vllm:fabric.subnets[1]: 127.0.0.0/8 is a loopback address: the other hosts cannot reach it; give a private subnet such as 192.168.100.0/24");
    // The management network: the fixture's hosts are reached at 198.18.0.2 and 198.18.0.3.
    refusedWith(planned(2, { subnets: ["198.18.0.0/24", "192.168.101.0/24"] }),
        "spark-vllm:fabric.subnets[0]: 198.18.0.0/24 contains hosts[0].ssh.host 198.18.0.2, the management address spark-vllm reaches that host at: setting up the fabric there would take the SSH session's network; give spark-vllm:fabric.subnets that leave the management network out",
        "spark-vllm:fabric.subnets[0]: 198.18.0.0/24 contains hosts[1].ssh.host 198.18.0.3, the management address spark-vllm reaches that host at: setting up the fabric there would take the SSH session's network; give spark-vllm:fabric.subnets that leave the management network out");
});

test("the default subnets are refused where the management network is in them, at fabric.subnets", () => {
    const raw = planned(2, {});
    raw.hosts[0].ssh.host = "192.168.101.5";
    refusedWith(raw, "spark-vllm:fabric.subnets: 192.168.101.0/24 contains hosts[0].ssh.host 192.168.101.5, the management address spark-vllm reaches that host at: setting up the fabric there would take the SSH session's network; give spark-vllm:fabric.subnets that leave the management network out");
});

test("every problem at once: the block's and the hosts' together", () => {
    const raw = planned(2, { mtu: 100, subnets: ["bad", "10.0.0.0/24"] });
    raw.hosts[0].fabric = { interface: "enP7s7" };
    raw.hosts[1].ssh.port = 0;
    const found = specProblems(raw);
    for (const prefix of ["spark-vllm:fabric.mtu:", "spark-vllm:fabric.subnets[0]:", "spark-vllm:hosts[1].ssh.port:"])
        assert.ok(found.some(p => p.startsWith(prefix)), `missing ${prefix} in\n${found.join("\n")}`);
});
