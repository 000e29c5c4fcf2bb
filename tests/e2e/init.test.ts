// End to end: `spark-vllm init` reads the two simulated Sparks over real SSH and writes a stack file that `spark-vllm plan`
// takes as it is and that deploys and serves; a host whose fabric link is down, and a pair with no shared subnet, are
// refused with the reason and nothing written. Needs root (the simulated hosts).
//
// The simulated hosts reach each other and this machine on one netdev, enp1s0f1np1 (SSH address = fabric address), with
// a RoCE HCA rocep1s0f1 in their sysfs overlay (tests/sim/README.md). To take a host's fabric away without taking SSH
// with it, the tests give that host a second netdev (one end of a veth pair, named like a ConnectX-7 twin, enP2p1s0f1np1;
// with its peer down it has no carrier, as a port without its cable) and point its HCA's GID table at it, as ibdev2netdev
// would then map them: the host's only ConnectX port is then that one.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { completionStatus, simSuite } from "./suite";
import { destroy, up } from "../engine/engine";
import { leftovers } from "../sim/stacks";

const ROOT = path.join(__dirname, "..", "..");
const suite = simSuite("init");
const PORT = "/sys/class/infiniband/rocep1s0f1/ports/1";

/**
 * A simulated host's sshd serves the key in its own directory (tests/sim/hosts.ts sshdConfig `HostKey`), while
 * /etc/ssh/ssh_host_ed25519_key.pub in its mount namespace is still this machine's. A real host's sshd serves that file's
 * key, which is what init reads: bind the sim sshd's public key over it, in each host's own mount namespace only.
 */
let keysBound = false;
async function bindHostKeys(): Promise<void> {
    if (keysBound) return;
    for (const h of suite.sim.hosts) {
        const r = await suite.sim.exec(h.name, `mount --bind ${path.join(h.root, "etc/ssh_host_ed25519_key.pub")} /etc/ssh/ssh_host_ed25519_key.pub`);
        assert.equal(r.code, 0, r.stderr);
    }
    keysBound = true;
}

async function init(dir: string, stack: string, extra: string[] = []) {
    await bindHostKeys();
    const s = suite.sim;
    const r = spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), "init", "--stack", stack, "--dir", dir,
        ...s.hosts.flatMap(h => ["--host", `root@${h.address}`]), "--image", s.images["0.17.1"], ...extra],
    { encoding: "utf8", env: { ...process.env, ...s.env }, timeout: 120_000 });
    console.log(`--- spark-vllm init (exit ${r.status}):\n${r.stdout}${r.stderr}---`);
    return r;
}

/** Moves spark-b's HCA onto a new netdev enP2p1s0f1np1 (ADDRESS/24, with carrier or without); undo() puts it back. */
async function moveFabric(address: string, carrier: boolean): Promise<() => Promise<void>> {
    const s = suite.sim;
    const b = s.host("spark-b");
    const hex = (a: string) => a.split(".").map(n => Number(n).toString(16).padStart(2, "0"));
    const gid = (a: string) => { const h = hex(a); return `0000:0000:0000:0000:0000:ffff:${h[0]}${h[1]}:${h[2]}${h[3]}`; };
    const set = (dev: string, a: string, state: string) =>
        `echo ${dev} > ${PORT}/gid_attrs/ndevs/0 && echo ${dev} > ${PORT}/gid_attrs/ndevs/1 && echo ${gid(a)} > ${PORT}/gids/1 && echo '${state}' > ${PORT}/state`;
    const r = await s.exec("spark-b", `ip link add enP2p1s0f1np1 type veth peer name init-peer && ip addr add ${address}/24 dev enP2p1s0f1np1 && ` +
        `ip link set enP2p1s0f1np1 up && ${carrier ? "ip link set init-peer up && " : ""}${set("enP2p1s0f1np1", address, carrier ? "4: ACTIVE" : "1: DOWN")}`);
    assert.equal(r.code, 0, r.stderr);
    return async () => {
        const u = await s.exec("spark-b", `ip link del enP2p1s0f1np1; ${set("enp1s0f1np1", b.address, "4: ACTIVE")}`);
        assert.equal(u.code, 0, u.stderr);
    };
}

test("init writes a stack from the simulated Sparks (their own fabric, HCA, host key, cached model) that plans, deploys and serves", async () => {
    const s = suite.sim;
    const dir = fs.mkdtempSync(path.join(path.dirname(s.sshConfigFile), "init-"));
    const r = await init(dir, "fromhosts");
    assert.equal(r.status, 0, r.stderr);
    const file = path.join(dir, "Pulumi.fromhosts.yaml");
    const config = (yaml.load(fs.readFileSync(file, "utf8")) as { config: Record<string, any> }).config;
    assert.deepEqual(config["spark-vllm:hosts"].map((h: any) => [h.name, h.ssh.host, h.ssh.user, h.ssh.hostKey, h.fabric, h.platform]),
        s.hosts.map(h => [h.name, h.address, "root", h.hostKey, { interface: "enp1s0f1np1", address: h.address, hcas: ["rocep1s0f1"] }, "linux/amd64"]));
    assert.equal(config["spark-vllm:image"], s.images["0.17.1"]);
    assert.deepEqual(config["spark-vllm:model"], { id: "Qwen/Qwen3.5-122B-A10B-FP8", cacheDir: "/root/.cache/huggingface", weights: "present" });
    assert.equal(config["spark-vllm:vllm"].tensorParallelSize, 2);
    // Each host key's fingerprint is printed for the owner to compare.
    for (const h of s.hosts) {
        const fp = spawnSync("ssh-keygen", ["-lf", "-"], { input: h.hostKey, encoding: "utf8" }).stdout.split(" ")[1];
        assert.ok(r.stderr.includes(`${h.name} host key: ED25519 ${fp}`), fp);
    }
    // A second init does not overwrite it.
    const again = await init(dir, "fromhosts");
    assert.equal(again.status, 3);
    assert.match(again.stderr, /exists; pass --force/);

    const plan = spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), "plan", "--stack", "fromhosts", "--dir", dir], { encoding: "utf8" });
    console.log(`--- spark-vllm plan (exit ${plan.status}):\n${plan.stdout.split("\n").slice(0, 12).join("\n")}\n${plan.stderr}---`);
    assert.equal(plan.status, 0, plan.stdout + plan.stderr);
    assert.match(plan.stdout, /spark-a \(head\) ssh root@198\.18\.0\.\d+:22, 1 GPU, fabric enp1s0f1np1 198\.18\.0\.\d+, HCAs rocep1s0f1/);

    // Deploy it. The one addition is the sim's: the endpoint proxy's image from the sim registry (nothing outside
    // 198.18.0.0/15 is reachable here, so the default nginx cannot be pulled).
    const stack = suite.stack("fromhosts");
    stack.config = { ...config, "spark-vllm:endpoint": { image: s.proxyImage } };
    try {
        const deployed = await up(stack);
        assert.equal(deployed.error, undefined, deployed.error);
        assert.equal(await completionStatus(deployed), 200);
    } finally {
        const d = await destroy(stack);
        assert.equal(d.error, undefined, d.error);
        assert.deepEqual(await leftovers(s), []);
    }
});

test("init refuses a host whose fabric link is down, naming it, and writes nothing", async () => {
    const dir = fs.mkdtempSync(path.join(path.dirname(suite.sim.sshConfigFile), "init-down-"));
    const undo = await moveFabric("10.77.0.2", false);
    try {
        const r = await init(dir, "down");
        assert.equal(r.status, 3);
        assert.match(r.stderr, /nothing was written:\n {2}- spark-b: no ConnectX-7 port has a link \(enP2p1s0f1np1 no carrier, 10\.77\.0\.2\/24\); check the QSFP cable/);
        assert.ok(r.stderr.includes("https://github.com/NVIDIA/dgx-spark-playbooks/blob/main/nvidia/connect-two-sparks/README.md"));
        assert.deepEqual(fs.readdirSync(dir), []);
    } finally {
        await undo();
    }
});

test("init refuses a pair with no shared fabric subnet and writes nothing", async () => {
    const dir = fs.mkdtempSync(path.join(path.dirname(suite.sim.sshConfigFile), "init-subnet-"));
    const undo = await moveFabric("10.77.0.2", true);
    try {
        const r = await init(dir, "apart", ["--dry-run"]);
        assert.equal(r.status, 3);
        assert.match(r.stderr, /- the hosts share no fabric subnet: spark-a: enp1s0f1np1 carrier, 198\.18\.0\.\d+\/24 \| spark-b: enP2p1s0f1np1 carrier, 10\.77\.0\.2\/24; put one cabled port of each host on one subnet/);
        assert.equal(r.stdout, "");
        assert.deepEqual(fs.readdirSync(dir), []);
    } finally {
        await undo();
    }
});
