// End to end: `spark-vllm init` reads the two simulated Sparks over real SSH and writes a stack file that `spark-vllm plan`
// takes as it is and that deploys and serves; a host whose fabric link is down, and a pair with no shared subnet, are
// refused with the reason and nothing written. Needs root (the simulated hosts).
//
// The Sparks are cabled on different ports, as real pairs can be: spark-a on port 1 (enp1s0f1np1, RoCE HCA rocep1s0f1),
// spark-b on port 2 (enP2p1s0f1np1, roceP2p1s0f1; startSim's `fabric`). Each host reaches the others and this machine on
// that one netdev (SSH address = fabric address), with its HCA in its sysfs overlay (tests/sim/README.md). To take
// spark-b's fabric away without taking SSH with it, the tests give it a second netdev (one end of a veth pair, named like
// the port-1 twin, enp1s0f1np1; with its peer down it has no carrier, as a port without its cable) and point its HCA's
// GID table at it, as ibdev2netdev would then map them: the host's only ConnectX port is then that one.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { completionStatus, esc, simSuite } from "./suite";
import { destroy, up } from "../engine/engine";
import { leftovers } from "../sim/stacks";

const ROOT = path.join(__dirname, "..", "..");
const B_PORT2 = { interface: "enP2p1s0f1np1", hca: "roceP2p1s0f1" };
const suite = simSuite("init", {}, { fabric: { "spark-b": B_PORT2 } });
const PORT = `/sys/class/infiniband/${B_PORT2.hca}/ports/1`;
/** The netdev the refusal tests move spark-b's HCA onto. */
const MOVED = "enp1s0f1np1";

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

/** Moves spark-b's HCA onto a new netdev MOVED (ADDRESS/24, with carrier or without); undo() puts it back. */
async function moveFabric(address: string, carrier: boolean): Promise<() => Promise<void>> {
    const s = suite.sim;
    const b = s.host("spark-b");
    const hex = (a: string) => a.split(".").map(n => Number(n).toString(16).padStart(2, "0"));
    const gid = (a: string) => { const h = hex(a); return `0000:0000:0000:0000:0000:ffff:${h[0]}${h[1]}:${h[2]}${h[3]}`; };
    const set = (dev: string, a: string, state: string) =>
        `echo ${dev} > ${PORT}/gid_attrs/ndevs/0 && echo ${dev} > ${PORT}/gid_attrs/ndevs/1 && echo ${gid(a)} > ${PORT}/gids/1 && echo '${state}' > ${PORT}/state`;
    const r = await s.exec("spark-b", `ip link add ${MOVED} type veth peer name init-peer && ip addr add ${address}/24 dev ${MOVED} && ` +
        `ip link set ${MOVED} up && ${carrier ? "ip link set init-peer up && " : ""}${set(MOVED, address, carrier ? "4: ACTIVE" : "1: DOWN")}`);
    assert.equal(r.code, 0, r.stderr);
    return async () => {
        const u = await s.exec("spark-b", `ip link del ${MOVED}; ${set(b.fabricInterface, b.address, "4: ACTIVE")}`);
        assert.equal(u.code, 0, u.stderr);
    };
}

test("init writes a stack from Sparks cabled on different ports (each host's own fabric, HCA, address, host key) that plans, deploys and serves", async () => {
    const s = suite.sim;
    const [a, b] = s.hosts;
    assert.deepEqual([a.fabricInterface, a.fabricHca, b.fabricInterface, b.fabricHca], ["enp1s0f1np1", "rocep1s0f1", B_PORT2.interface, B_PORT2.hca],
        "spark-b is cabled on port 2, spark-a on port 1");
    assert.notEqual(a.hostKey, b.hostKey);
    const dir = fs.mkdtempSync(path.join(path.dirname(s.sshConfigFile), "init-"));
    const r = await init(dir, "fromhosts");
    assert.equal(r.status, 0, r.stderr);
    const file = path.join(dir, "Pulumi.fromhosts.yaml");
    const config = (yaml.load(fs.readFileSync(file, "utf8")) as { config: Record<string, any> }).config;
    assert.deepEqual(config["spark-vllm:hosts"].map((h: any) => [h.name, h.ssh.host, h.ssh.user, h.ssh.hostKey, h.fabric, h.platform]),
        [
            ["spark-a", a.address, "root", a.hostKey, { interface: "enp1s0f1np1", address: a.address, hcas: ["rocep1s0f1"] }, "linux/amd64"],
            ["spark-b", b.address, "root", b.hostKey, { interface: "enP2p1s0f1np1", address: b.address, hcas: ["roceP2p1s0f1"] }, "linux/amd64"],
        ]);
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
    assert.match(plan.stdout, new RegExp(`spark-a \\(head\\) ssh root@${esc(a.address)}:22, 1 GPU, fabric enp1s0f1np1 ${esc(a.address)}, HCAs rocep1s0f1`));
    assert.match(plan.stdout, new RegExp(`spark-b \\(worker\\) ssh root@${esc(b.address)}:22, 1 GPU, fabric enP2p1s0f1np1 ${esc(b.address)}, HCAs roceP2p1s0f1`));

    // Deploy it. The one addition is a need of the test bed, not of the file: the endpoint proxy's image from the sim
    // registry (nothing outside 198.18.0.0/15 is reachable here, so the default nginx cannot be pulled from Docker Hub).
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
        assert.match(r.stderr, /nothing was written:\n {2}- spark-b: no ConnectX-7 port has a link \(enp1s0f1np1 no carrier, 10\.77\.0\.2\/24\); check the QSFP cable/);
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
        assert.match(r.stderr, /- the hosts share no fabric subnet: spark-a: enp1s0f1np1 carrier, 198\.18\.\d+\.\d+\/24 \| spark-b: enp1s0f1np1 carrier, 10\.77\.0\.2\/24; put one cabled port of each host on one subnet/);
        assert.equal(r.stdout, "");
        assert.deepEqual(fs.readdirSync(dir), []);
    } finally {
        await undo();
    }
});
