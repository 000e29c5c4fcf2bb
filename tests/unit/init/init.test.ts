// `spark-vllm init`: the host script's output (tests/fixtures/init, see its README) → facts → choices → a stack file
// that the spec parser and the planner take as it is.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { HostResult, TWO_SPARKS_PLAYBOOK, checkStackText, chooseStack, parseHostTarget, physicalPort, subnetOf } from "../../../components/init/initChoose";
import { initHostScript, ipv4OfGid, parseGpus, parseHostFacts, splitSections, sshFingerprint } from "../../../components/init/initFacts";
import { parseSpec, unusableAddress } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { initCommand } from "../../../bin/init-command";
import { readStackFile } from "../../../bin/shared";

const FIXTURES = path.join(__dirname, "..", "..", "fixtures", "init");
const read = (file: string) => fs.readFileSync(path.join(FIXTURES, file), "utf8");
const target = (host: string) => ({ user: "nvidia", host, port: 22 });
const pair = (a: string, b: string, edit: (text: string, i: number) => string = t => t): HostResult[] =>
    [a, b].map((f, i) => ({ target: target(`spark-${"ab"[i]}.local`), facts: parseHostFacts(edit(read(f), i)) }));
/** The fixture with one section's body replaced (and its exit status). */
const withSection = (text: string, name: string, body: string, rc = 0) =>
    text.replace(new RegExp(`(@@spark-vllm-init ${name}\\n)[\\s\\S]*?(@@spark-vllm-init ${name}\\.rc )\\d+`), `$1${body}\n$2${rc}`);
const hostsOf = (yamlText: string) => parseSpec(readStack(yamlText)).hosts;
function readStack(yamlText: string) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "init-test-"));
    try {
        fs.writeFileSync(path.join(dir, "Pulumi.t.yaml"), yamlText);
        return readStackFile(dir, "t");
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

test("the host script runs here under sh and its sections parse: hostname, architecture, memory, netdevs from netlink", () => {
    const r = spawnSync("sh", ["-s"], { input: initHostScript(), encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    const sections = splitSections(r.stdout);
    for (const name of ["hostname", "arch", "gpus", "docker", "ip-addr", "net-sysfs", "ib-ports", "host-key", "hf-home", "images"])
        assert.ok(sections.has(name), `section ${name} missing`);
    const f = parseHostFacts(r.stdout);
    assert.equal(f.hostname, os.hostname());
    assert.equal(f.arch, process.arch === "x64" ? "x86_64" : "aarch64");
    assert.ok(f.memTotalBytes && Math.abs(f.memTotalBytes - os.totalmem()) < 0.05 * os.totalmem(), String(f.memTotalBytes));
    assert.ok(f.netdevs.some(n => n.name === "lo" && n.ipv4.some(a => a.address === "127.0.0.1")));
});

test("the host key's fingerprint is what ssh-keygen -l prints", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "init-key-"));
    try {
        const key = path.join(dir, "k");
        assert.equal(spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", key]).status, 0);
        const printed = spawnSync("ssh-keygen", ["-lf", `${key}.pub`], { encoding: "utf8" }).stdout.split(" ")[1];
        assert.match(printed, /^SHA256:/);
        assert.equal(sshFingerprint(fs.readFileSync(`${key}.pub`, "utf8")), printed);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

test("facts: GB10's [N/A] memory, RoCE v2 IPv4 GIDs, the HCA behind each netdev, carrier from sysfs", () => {
    assert.deepEqual(parseGpus("NVIDIA GB10, [N/A], 580.95.05, 12.1"), [{ name: "NVIDIA GB10", memoryMiB: null, driver: "580.95.05", computeCap: "12.1" }]);
    assert.equal(ipv4OfGid("0000:0000:0000:0000:0000:ffff:c0a8:640a"), "192.168.100.10");
    assert.equal(ipv4OfGid("fe80:0000:0000:0000:3e6d:66ff:fecc:b3b7"), null);
    const f = parseHostFacts(read("playbook-a.out"));
    const hca = f.hcas.find(h => h.name === "rocep1s0f1")!;
    assert.deepEqual([hca.active, hca.linkLayer, hca.netdev, hca.roceV2Ipv4], [true, "Ethernet", "enp1s0f1np1", [{ index: 3, address: "192.168.100.10", netdev: "enp1s0f1np1" }]]);
    assert.equal(f.hcas.find(h => h.name === "rocep1s0f0")!.active, false);
    const down = f.netdevs.find(n => n.name === "enp1s0f0np0")!;
    assert.deepEqual([down.carrier, down.speedMbps, down.vendor], [false, null, "0x15b3"]);
    assert.deepEqual(f.netdevs.find(n => n.name === "enp1s0f1np1")!.speedMbps, 200000);
    assert.deepEqual(f.models.map(m => m.id), ["Qwen/Qwen3.5-122B-A10B-FP8", "openai/gpt-oss-120b"]);
    assert.equal(f.hostKeyFingerprint, sshFingerprint(f.hostKey!));
    assert.deepEqual([physicalPort("enP2p1s0f1np1"), physicalPort("enp1s0f1np1"), subnetOf({ address: "169.254.37.12", prefix: 16 })], ["p1s0f1np1", "p1s0f1np1", "169.254.0.0/16"]);
});

test("NVIDIA's playbook pair: enp1s0f1np1 on the shared /24, both twins' HCAs, each host's own key; the 10 GbE LAN both share is never the fabric; it plans", () => {
    const r = chooseStack(pair("playbook-a.out", "playbook-b.out"), { stack: "t" });
    assert.deepEqual(r.problems, []);
    const hosts = hostsOf(r.yaml!);
    assert.deepEqual(hosts.map(h => [h.name, h.fabric.interface, h.fabric.address, h.fabric.hcas, h.platform, h.gpus]), [
        ["dgx-spark-1", "enp1s0f1np1", "192.168.100.10", ["rocep1s0f1", "roceP2p1s0f1"], "linux/arm64", 1],
        ["dgx-spark-2", "enp1s0f1np1", "192.168.100.11", ["rocep1s0f1", "roceP2p1s0f1"], "linux/arm64", 1],
    ]);
    assert.deepEqual(hosts.map(h => h.ssh.hostKey), ["playbook-a.out", "playbook-b.out"].map(f => parseHostFacts(read(f)).hostKey));
    assert.notEqual(hosts[0].ssh.hostKey, hosts[1].ssh.hostKey);
    // The playbook's own `ip addr show` prints mtu 1500: a warning per fabric netdev, not a refusal.
    assert.equal(r.warnings.filter(w => /MTU 1500; NVIDIA recommends 9000/.test(w)).length, 4);
    const spec = parseSpec(readStack(r.yaml!));
    assert.equal(spec.model.id, "Qwen/Qwen3.5-122B-A10B-FP8");
    assert.equal(spec.model.weights, "present");
    assert.equal(spec.image.reference, `nvcr.io/nvidia/vllm:25.11-py3@sha256:${"5c".repeat(32)}`);
    assert.deepEqual([spec.vllm.tensorParallelSize, spec.vllm.pipelineParallelSize, spec.vllm.backend], [2, 1, "ray"]);
    const plan = planCluster(spec, undefined, { owner: { project: "spark-vllm", stack: "t" } });
    assert.equal(plan.hosts.length, 2);
    // Every choice has its source beside it; no secret is in the file.
    for (const key of ["interface:", "address:", "hcas:", "hostKey:", "image:", "id:", "tensorParallelSize:"])
        assert.match(r.yaml!, new RegExp(`${key} .*  # \\S`), key);
    assert.doesNotMatch(r.yaml!, /hfToken|sshPrivateKey|secure:/);
    assert.ok(r.secretLines.some(l => l.startsWith("pulumi config set --secret spark-vllm:hfToken ")));
    assert.ok(r.summary.some(s => s.includes(parseHostFacts(read("playbook-a.out")).hostKeyFingerprint!)));
});

test("a pair cabled on different ports: spark-a on enp1s0f1np1/rocep1s0f1, spark-b on enP2p1s0f1np1/roceP2p1s0f1", () => {
    const r = chooseStack(pair("crossed-a.out", "crossed-b.out"), { stack: "t" });
    assert.deepEqual(r.problems, []);
    assert.deepEqual(hostsOf(r.yaml!).map(h => [h.name, h.fabric.interface, h.fabric.address, h.fabric.hcas]), [
        ["spark-a", "enp1s0f1np1", "192.168.100.10", ["rocep1s0f1"]],
        ["spark-b", "enP2p1s0f1np1", "192.168.100.11", ["roceP2p1s0f1"]],
    ]);
    assert.deepEqual(r.warnings, []);
});

test("link-local fabric addresses (169.254/16, NVIDIA's earlier netplan) are chosen; the spec parser decides whether they are written", () => {
    const r = chooseStack(pair("linklocal-a.out", "linklocal-b.out"), { stack: "t" });
    // Documents the state of the spec parser: today it refuses 169.254/16 fabric addresses (components/spec/parseSpec.ts
    // unusableAddress); the gb10-fabric change accepts them. Either way the choice is the link-local port.
    if (unusableAddress([169, 254, 37, 12]) === undefined) {
        assert.deepEqual(r.problems, []);
        assert.deepEqual(hostsOf(r.yaml!).map(h => [h.fabric.interface, h.fabric.address]), [["enp1s0f1np1", "169.254.37.12"], ["enp1s0f1np1", "169.254.201.7"]]);
    } else {
        assert.equal(r.yaml, undefined);
        assert.deepEqual(r.choices!.hosts.map(h => [h.fabric.interface.value, h.fabric.address.value]), [["enp1s0f1np1", "169.254.37.12"], ["enp1s0f1np1", "169.254.201.7"]]);
        assert.deepEqual(r.problems.map(p => p.replace(/hosts\[\d\]/, "hosts[i]")), Array(2).fill("the stack init would write does not parse: spark-vllm:hosts[i].fabric.address: " +
            "169.254.37.12 is a link-local address (169.254.0.0/16): not routed, and it may change at every boot; give the host's own address on the fabric").map((p, i) => i ? p.replace("169.254.37.12", "169.254.201.7") : p));
    }
});

test("refused, nothing written: a host whose fabric link is down names the host and the playbook", () => {
    const r = chooseStack(pair("playbook-a.out", "down-b.out"), { stack: "t" });
    assert.equal(r.yaml, undefined);
    assert.equal(r.problems.length, 1);
    assert.match(r.problems[0], /^spark-b: no ConnectX-7 port has a link \(enp1s0f0np0 no carrier.*enp1s0f1np1 no carrier, 192\.168\.100\.11\/24.*\); check the QSFP cable/);
    assert.ok(r.problems[0].includes(TWO_SPARKS_PLAYBOOK));
});

test("refused: no shared subnet, listing each host's ports and the playbook's addressing", () => {
    const r = chooseStack(pair("crossed-a.out", "other-subnet-b.out"), { stack: "t" });
    assert.equal(r.yaml, undefined);
    assert.equal(r.problems.length, 1);
    assert.match(r.problems[0], /^the hosts share no fabric subnet: spark-a: .*enp1s0f1np1 carrier, 192\.168\.100\.10\/24.* \| spark-b: .*enp1s0f1np1 carrier, 192\.168\.200\.11\/24/);
    assert.ok(r.problems[0].includes(TWO_SPARKS_PLAYBOOK));
});

test("twins of one port on one subnet: a warning, and only one of their HCAs", () => {
    const r = chooseStack(pair("twins-shared-a.out", "crossed-b.out"), { stack: "t" });
    assert.deepEqual(r.problems, []);
    assert.deepEqual(hostsOf(r.yaml!)[0].fabric, { interface: "enp1s0f1np1", address: "192.168.100.10", hcas: ["rocep1s0f1"] });
    assert.equal(r.warnings.length, 1);
    assert.match(r.warnings[0], /^spark-a: enP2p1s0f1np1 and enp1s0f1np1 are the twins of one port and share 192\.168\.100\.0\/24; give each twin its own subnet/);
});

test("every problem at once: different GPUs, Docker missing, no NVIDIA runtime, an unreachable host", () => {
    const r = chooseStack([
        ...pair("playbook-a.out", "playbook-b.out", (t, i) => i === 0
            ? withSection(t, "docker-runtimes", '{"runc":{"path":"runc"}}').replace(/@@spark-vllm-init nvidia-hooks\n[\s\S]*?nvidia-hooks\.rc 1/, "@@spark-vllm-init nvidia-hooks\n@@spark-vllm-init nvidia-hooks.rc 1")
            : withSection(withSection(t, "gpus", "NVIDIA H200, 143771, 580.159.04, 9.0"), "docker", "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock", 1)),
        { target: target("spark-c.local"), unreachable: "ssh: connect to host spark-c.local port 22: No route to host" },
    ], { stack: "t" });
    assert.equal(r.yaml, undefined);
    assert.deepEqual(r.problems.map(p => p.slice(0, 70)), [
        "nvidia@spark-c.local:22: unreachable (ssh: connect to host spark-c.local port 22: No ",
        "dgx-spark-1: Docker has no NVIDIA runtime; install nvidia-container-too",
        "dgx-spark-2: Docker is not reachable for nvidia (permission denied whil",
        "the hosts have different GPUs (dgx-spark-1: NVIDIA GB10 (compute 12.1), dgx-spark-2: NVIDIA H200 (compute 9.0)); one model is split evenly".slice(0, 70),
    ].map(s => s.slice(0, 70)));
});

test("image: --image pinned is used as given; unpinned is pinned from the hosts' pull; unpinned and not pulled, or none pulled, is refused", () => {
    const given = `vllm/vllm-openai:v0.17.1@sha256:${"ab".repeat(32)}`;
    const a = chooseStack(pair("playbook-a.out", "playbook-b.out"), { stack: "t", image: given });
    assert.equal(parseSpec(readStack(a.yaml!)).image.reference, given);
    assert.equal(parseSpec(readStack(a.yaml!)).vllm.version, "0.17.1");
    // vLLM 0.17.1's CUDA 12.9 image builds its FP8 kernels for sm_120a, which the GB10 does not run; its -cu130 twin does
    assert.equal(parseSpec(readStack(a.yaml!)).model.id, "Qwen/Qwen3.5-122B-A10B-FP8");
    assert.deepEqual(a.warnings.filter(w => /sm_120a only/.test(w)).map(w => w.slice(0, 120)),
        [`image ${given}: Qwen/Qwen3.5-122B-A10B-FP8 is fp8, but vllm/vllm-openai:v0.17.1: vLLM 0.17.1 built with`.slice(0, 120)]);
    const cu130 = chooseStack(pair("playbook-a.out", "playbook-b.out"), { stack: "t", image: `vllm/vllm-openai:v0.17.1-cu130@sha256:${"ab".repeat(32)}` });
    assert.deepEqual(cu130.warnings.filter(w => /fp8/.test(w)), []);
    const b = chooseStack(pair("playbook-a.out", "playbook-b.out"), { stack: "t", image: "nvcr.io/nvidia/vllm:25.11-py3" });
    assert.equal(parseSpec(readStack(b.yaml!)).image.digest, `sha256:${"5c".repeat(32)}`);
    const c = chooseStack(pair("playbook-a.out", "playbook-b.out"), { stack: "t", image: "vllm/vllm-openai:v0.20.0" });
    assert.equal(c.problems.length, 1);
    assert.match(c.problems[0], /^--image vllm\/vllm-openai:v0\.20\.0 is not pinned by digest and dgx-spark-1 has not pulled it: pin it \(`docker buildx imagetools inspect/);
    const d = chooseStack(pair("playbook-a.out", "playbook-b.out", t => withSection(t, "images", "")), { stack: "t" });
    assert.match(d.problems[0], /^no --image given and no vLLM image known to run on a GB10 is pulled on every host .*docker pull nvcr\.io\/nvidia\/vllm:26\.02-py3/);
    // An image known to have no Ray: vLLM's own multi-node launch.
    const e = chooseStack(pair("playbook-a.out", "playbook-b.out"), { stack: "t", image: `vllm/vllm-openai:v0.18.0@sha256:${"cd".repeat(32)}` });
    assert.equal(parseSpec(readStack(e.yaml!)).vllm.backend, "mp");
});

test("model: the largest cached one that fits; a given one not cached everywhere is copied from the head or downloaded; none fits → refused", () => {
    const noQwen = (t: string) => withSection(t, "hf-models", "65283340288 models--openai--gpt-oss-120b");
    const a = chooseStack(pair("playbook-a.out", "playbook-b.out", noQwen), { stack: "t" });
    assert.equal(parseSpec(readStack(a.yaml!)).model.id, "openai/gpt-oss-120b");
    const b = chooseStack(pair("playbook-a.out", "playbook-b.out", noQwen), { stack: "t", model: "Qwen/Qwen3.5-122B-A10B-FP8" });
    assert.equal(parseSpec(readStack(b.yaml!)).model.weights, "download");
    const c = chooseStack(pair("playbook-a.out", "playbook-b.out", (t, i) => (i ? noQwen(t) : t)), { stack: "t", model: "Qwen/Qwen3.5-122B-A10B-FP8" });
    assert.equal(parseSpec(readStack(c.yaml!)).model.weights, "head-then-copy");
    // One Spark cannot hold 119 GB of weights: nothing cached fits.
    const one = chooseStack([pair("playbook-a.out", "playbook-b.out", t => withSection(t, "hf-models", "125374738432 models--Qwen--Qwen3.5-122B-A10B-FP8"))[0]], { stack: "t" });
    assert.match(one.problems[0], /^no --model given and no model cached on every host is both in the catalog and fits 1 × 1 GPU/);
});

test("three Sparks: 32 attention heads do not divide by 3, so TP 1 × PP 3", () => {
    const third = read("playbook-b.out").replace(/dgx-spark-2/g, "dgx-spark-3").replace(/192\.168\.100\.11/g, "192.168.100.12").replace(/192\.168\.101\.11/g, "192.168.101.12")
        .replace(/c0a8:640b/g, "c0a8:640c").replace(/c0a8:650b/g, "c0a8:650c");
    const r = chooseStack([...pair("playbook-a.out", "playbook-b.out"), { target: target("spark-c.local"), facts: parseHostFacts(third) }], { stack: "t" });
    assert.deepEqual(r.problems, []);
    const spec = parseSpec(readStack(r.yaml!));
    assert.deepEqual([spec.vllm.tensorParallelSize, spec.vllm.pipelineParallelSize, spec.hosts[2].fabric.address], [1, 3, "192.168.100.12"]);
});

test("--host parsing; the CLI refuses an existing stack file before asking any host, and bad arguments", async () => {
    assert.deepEqual(parseHostTarget("nvidia@spark-a.local:2222", "me"), { user: "nvidia", host: "spark-a.local", port: 2222 });
    assert.deepEqual(parseHostTarget("192.168.1.20", "me"), { user: "me", host: "192.168.1.20", port: 22 });
    assert.deepEqual(parseHostTarget("[fe80::1]:22", "me"), { user: "me", host: "fe80::1", port: 22 });
    assert.ok("problem" in parseHostTarget("a b", "me"));
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "init-cli-"));
    const errors: string[] = [];
    const saved = console.error;
    console.error = (...a: unknown[]) => { errors.push(a.join(" ")); };
    try {
        fs.writeFileSync(path.join(dir, "Pulumi.t.yaml"), "config: {}\n");
        // 192.0.2.1 (TEST-NET-1) is never contacted: the refusal comes first.
        assert.equal(await initCommand(["--stack", "t", "--host", "192.0.2.1", "--dir", dir]), 3);
        assert.match(errors.pop()!, /Pulumi\.t\.yaml exists; pass --force to overwrite it/);
        assert.equal(fs.readFileSync(path.join(dir, "Pulumi.t.yaml"), "utf8"), "config: {}\n");
        assert.equal(await initCommand(["--stack", "t", "--dir", dir]), 2);
        assert.match(errors.pop()!, /at least one --host is required/);
        assert.equal(await initCommand(["--stack", "../x", "--host", "a@b", "--host", "a@b"]), 2);
        assert.match(errors.pop()!, /is not a stack name[\s\S]*--host b:22 is given twice/);
    } finally {
        console.error = saved;
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

test("checkStackText reports the spec parser's problems", () => {
    assert.deepEqual(checkStackText("config:\n  spark-vllm:image: x\n").slice(0, 1), ["spark-vllm:hosts: missing; list at least one host (the first is the Ray head)"]);
});
