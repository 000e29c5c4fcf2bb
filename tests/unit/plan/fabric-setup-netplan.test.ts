// The drop-ins of components/plan/fabricSetup.ts through the REAL netplan: `netplan generate --root-dir TMP` (Debian's
// netplan.io 0.106, /usr/sbin/netplan) on a temp tree holding only our drop-in, then what it writes for systemd-networkd
// (TMP/run/systemd/network/10-netplan-<interface>.network: `Address=`, `MTUBytes=`, `LinkLocalAddressing=`).
// Needs netplan.io installed (apt-get install netplan.io; .ci/run installs it), NOT root: with --root-dir netplan reads
// and writes only under TMP. Fails, never skips, when netplan is missing.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import { parseSpec } from "../../../components/spec/parseSpec";
import { HostFabricSetup, planFabricSetup } from "../../../components/plan/fabricSetup";
import { rawConfig } from "../../fixtures";

const NETPLAN = "/usr/sbin/netplan";

function specWith(n: number, fabric: Record<string, unknown>, addresses?: string[]) {
    const raw = rawConfig(n);
    raw.hosts.forEach((h: Record<string, unknown>, i: number) => (h.fabric = addresses ? { address: addresses[i] } : undefined));
    raw.fabric = { setup: true, ...fabric };
    return parseSpec(raw);
}

/** Runs netplan generate on a tree holding only `host`'s drop-in (at `mode`); its stderr and the .network files by name. */
function generate(host: HostFabricSetup, mode = host.mode): { status: number | null; stderr: string; networks: Record<string, string> } {
    assert.ok(fs.existsSync(NETPLAN), `${NETPLAN} is missing: apt-get install netplan.io`);
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-netplan-"));
    try {
        const file = path.join(root, host.path);
        fs.mkdirSync(path.dirname(file), { recursive: true });
        fs.writeFileSync(file, host.yaml, { mode });
        fs.chmodSync(file, mode);
        const run = spawnSync(NETPLAN, ["generate", "--root-dir", root], { encoding: "utf8", timeout: 60_000 });
        const dir = path.join(root, "run/systemd/network");
        const networks = fs.existsSync(dir)
            ? Object.fromEntries(fs.readdirSync(dir).filter(f => f.endsWith(".network")).map(f => [f, fs.readFileSync(path.join(dir, f), "utf8")]))
            : {};
        return { status: run.status, stderr: run.stderr, networks };
    } finally {
        fs.rmSync(root, { recursive: true, force: true });
    }
}

/** The lines of a .network file that say what the interface gets: its addresses, MTU, link-local, and anything routed. */
const settings = (network: string) => network.split("\n").filter(l => /^(Name|Address|MTUBytes|LinkLocalAddressing|DHCP|Gateway|Destination)=/.test(l) || /^\[Route\]/.test(l));

test("two direct: netplan accepts the drop-in silently and gives each twin its address and MTU 9000, nothing else", () => {
    const plan = planFabricSetup(specWith(2, {}))!;
    const out = generate(plan.hosts[1]);
    assert.equal(out.status, 0, out.stderr);
    assert.equal(out.stderr, "");
    assert.deepEqual(Object.keys(out.networks).sort(), ["10-netplan-enP2p1s0f1np1.network", "10-netplan-enp1s0f1np1.network"]);
    assert.deepEqual(settings(out.networks["10-netplan-enp1s0f1np1.network"]), ["Name=enp1s0f1np1", "MTUBytes=9000", "LinkLocalAddressing=ipv6", "Address=192.168.100.11/24"]);
    assert.deepEqual(settings(out.networks["10-netplan-enP2p1s0f1np1.network"]), ["Name=enP2p1s0f1np1", "MTUBytes=9000", "LinkLocalAddressing=ipv6", "Address=192.168.101.11/24"]);
});

test("link-local: netplan turns `link-local: [ipv4]` into LinkLocalAddressing=ipv4 and no Address=", () => {
    const plan = planFabricSetup(specWith(2, { addressing: "link-local", mtu: 1500 }, ["169.254.1.1", "169.254.1.2"]))!;
    const out = generate(plan.hosts[0]);
    assert.equal(out.status, 0, out.stderr);
    assert.deepEqual(settings(out.networks["10-netplan-enp1s0f1np1.network"]), ["Name=enp1s0f1np1", "MTUBytes=1500", "LinkLocalAddressing=ipv4"]);
});

test("ring of three: every host's four twins, each with its own subnet's address", () => {
    const plan = planFabricSetup(specWith(3, { topology: "ring" }))!;
    const addresses = plan.hosts.map(h => {
        const out = generate(h);
        assert.equal(out.status, 0, out.stderr);
        assert.equal(out.stderr, "");
        return Object.entries(out.networks).sort().map(([f, n]) => `${f.replace(/^10-netplan-|\.network$/g, "")} ${settings(n).filter(l => /^(Address|MTUBytes)=/.test(l)).join(" ")}`);
    });
    assert.deepEqual(addresses, [
        ["enP2p1s0f0np0 MTUBytes=9000 Address=192.168.101.10/24", "enP2p1s0f1np1 MTUBytes=9000 Address=192.168.105.10/24", "enp1s0f0np0 MTUBytes=9000 Address=192.168.100.10/24", "enp1s0f1np1 MTUBytes=9000 Address=192.168.104.10/24"],
        ["enP2p1s0f0np0 MTUBytes=9000 Address=192.168.103.11/24", "enP2p1s0f1np1 MTUBytes=9000 Address=192.168.101.11/24", "enp1s0f0np0 MTUBytes=9000 Address=192.168.102.11/24", "enp1s0f1np1 MTUBytes=9000 Address=192.168.100.11/24"],
        ["enP2p1s0f0np0 MTUBytes=9000 Address=192.168.105.12/24", "enP2p1s0f1np1 MTUBytes=9000 Address=192.168.103.12/24", "enp1s0f0np0 MTUBytes=9000 Address=192.168.104.12/24", "enp1s0f1np1 MTUBytes=9000 Address=192.168.102.12/24"],
    ]);
});

test("switch: the fourth host on port 0's twins, MTU 4000", () => {
    const plan = planFabricSetup(specWith(4, { topology: "switch", port: 0, mtu: 4000, subnets: ["10.9.0.0/16", "10.10.0.0/16"] }))!;
    const out = generate(plan.hosts[3]);
    assert.equal(out.status, 0, out.stderr);
    assert.deepEqual(Object.fromEntries(Object.entries(out.networks).map(([f, n]) => [f, settings(n)])), {
        "10-netplan-enp1s0f0np0.network": ["Name=enp1s0f0np0", "MTUBytes=4000", "LinkLocalAddressing=ipv6", "Address=10.9.0.13/16"],
        "10-netplan-enP2p1s0f0np0.network": ["Name=enP2p1s0f0np0", "MTUBytes=4000", "LinkLocalAddressing=ipv6", "Address=10.10.0.13/16"],
    });
});

test("why 0600: the same drop-in readable by others makes netplan warn that it is too open", () => {
    const host = planFabricSetup(specWith(2, {}))!.hosts[0];
    assert.equal(host.mode, 0o600);
    const open = generate(host, 0o644);
    assert.equal(open.status, 0, open.stderr);
    assert.match(open.stderr, /Permissions for .*60-spark-vllm-fabric\.yaml are too open/);
    assert.equal(generate(host).stderr, "");
});
