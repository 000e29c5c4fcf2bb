// The simulated Spark hosts themselves (needs root):
//   node_modules/.bin/node --import tsx --test tests/sim/sim.test.ts
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { QWEN35_122B_FP8, SIM_FABRIC_INTERFACE, SIM_MEMLOCK_BYTES, Sim, simCluster, simStatus, startSim } from "./hosts";
import { alive, run } from "./util";

const isRoot = process.getuid?.() === 0;

/** The stand-ins come from tests/sim/image/; until they exist, a placeholder of our own. */
function imageDirForTest(): string | undefined {
    if (fs.existsSync(path.join(__dirname, "image", "bin", "vllm"))) return undefined;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-sim-placeholder-"));
    fs.mkdirSync(path.join(dir, "bin"));
    fs.mkdirSync(path.join(dir, "python", "vllm"), { recursive: true });
    fs.writeFileSync(path.join(dir, "bin", "vllm"), "#!/bin/sh\necho placeholder vllm\n", { mode: 0o755 });
    fs.writeFileSync(path.join(dir, "python", "vllm", "__init__.py"), "__version__ = '0.0.0'\n");
    return dir;
}

describe("simulated Spark hosts", { skip: isRoot ? false : "needs root", timeout: 15 * 60_000 }, () => {
    let sim: Sim;
    let pids: number[] = [];

    before(async () => {
        // A cluster of its own, like every end-to-end file, so it runs beside them (and beside the demo's cluster 0).
        sim = await startSim({ hosts: 2, imageDir: imageDirForTest(), cluster: "auto" });
        pids = sim.hosts.flatMap(h => [h.pids.sshd, h.pids.dockerd]);
        process.stderr.write(`# sim bring-up (ms): ${JSON.stringify(sim.timings)}\n`);
    });

    after(async () => {
        if (!sim) return;
        const c = sim.cluster;
        await sim.stop();
        // nothing of the sim is left
        const st = await simStatus(c.id);
        assert.deepEqual(st.netns, []);
        assert.equal(st.bridge, false);
        assert.deepEqual(st.mounts, []);
        assert.equal(fs.existsSync(c.stateDir), false);
        assert.equal(fs.existsSync(c.runDir), false);
        for (const p of pids) assert.equal(alive(p), false, `pid ${p} still alive`);
        const procs = (await run(["ps", "-eo", "args"])).stdout;
        assert.ok(!procs.includes(`dockerd --data-root ${c.runDir}/`), procs);
        assert.ok(!procs.includes(`sshd -D -e -f ${c.runDir}/`), procs);
    });

    it("ssh with key auth reaches each host as root, with its own hostname and fabric netdev", async () => {
        for (const h of sim.hosts) {
            const r = await sim.ssh(h.name, `hostname; ip -o -4 addr show ${SIM_FABRIC_INTERFACE}`);
            assert.equal(r.code, 0, r.stderr);
            const [name, addr] = r.stdout.split("\n");
            assert.equal(name, h.name);
            assert.match(addr, new RegExp(`${SIM_FABRIC_INTERFACE}\\s+inet ${h.address.replace(/\./g, "\\.")}/24`));
        }
        // the same through the agent alone (no IdentityFile, no sim ssh config)
        const h = sim.hosts[0];
        const r = await run(["/usr/bin/ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", `UserKnownHostsFile=${sim.knownHostsFile}`, "-o", `IdentityAgent=${sim.sshAuthSock}`, `root@${h.address}`, "echo agent-ok"],
        { env: sim.env, timeoutMs: 20_000 });
        assert.equal(r.stdout.trim(), "agent-ok", r.stderr);
        // fabric: host to host over the bridge
        const b = sim.hosts[1];
        const t = await sim.exec(h.name, `timeout 5 bash -c 'exec 3<>/dev/tcp/${b.address}/22 && head -c 7 <&3'`);
        assert.equal(t.stdout, "SSH-2.0");
    });

    it("sshd refuses SetEnv of an arbitrary variable (AcceptEnv is Debian's default)", async () => {
        const r = await run(["ssh", "-o", "SetEnv=SPARK_SIM_PROBE=1", sim.hosts[0].address, "echo ${SPARK_SIM_PROBE:-unset}"],
            { env: sim.env, timeoutMs: 20_000 });
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stdout.trim(), "unset");
    });

    it("DOCKER_HOST=ssh://root@<host> answers from that host's own daemon", async () => {
        const ids = new Set<string>();
        for (const h of sim.hosts) {
            const r = await run(["docker", "info", "--format", "{{.ID}} {{.Name}} {{.DockerRootDir}} {{.Driver}}"],
                { env: { ...sim.env, DOCKER_HOST: `ssh://root@${h.address}` }, timeoutMs: 30_000 });
            assert.equal(r.code, 0, r.stderr);
            const [id, name, rootDir, driver] = r.stdout.trim().split(" ");
            assert.equal(name, h.name);
            assert.equal(rootDir, path.join(h.root, "docker"));
            assert.equal(driver, h.storageDriver);
            ids.add(id);
        }
        assert.equal(ids.size, sim.hosts.length, "daemon IDs must differ per host");
    });

    it("every host pulls the image by digest and reports the same RepoDigest", async () => {
        const ref = sim.images["0.17.1"];
        const registry = sim.cluster.registry.replace(/\./g, "\\.");
        assert.match(ref, new RegExp(`^${registry}/vllm-sim@sha256:[0-9a-f]{64}$`));
        assert.match(sim.images["0.14.0"], new RegExp(`^${registry}/vllm-sim@sha256:[0-9a-f]{64}$`));
        const digests: string[] = [];
        for (const h of sim.hosts) {
            const before = await sim.docker(h.name, ["image", "inspect", ref]);
            assert.notEqual(before.code, 0, `${h.name} must not have the image before pulling`);
            // Preloaded (tests/sim/preload.ts): the stand-ins' layers, no image names; the pull still fetches the
            // manifest by digest from this cluster's registry, then finds the image it names in the store.
            // A bring-up that built the images (nothing cached yet) starts with empty image stores.
            assert.equal(h.preloaded, !sim.imagesBuilt, `${h.name}: a sim on a cached registry starts with its layers`);
            const names = await sim.docker(h.name, ["images", "--format", "{{.Repository}}:{{.Tag}}"]);
            assert.deepEqual(names.stdout.trim().split("\n").filter(n => n !== "<none>:<none>" && n !== ""), [], names.stdout);
            const p = await sim.docker(h.name, ["pull", ref], { timeoutMs: 120_000 });
            assert.equal(p.code, 0, p.stderr);
            if (h.preloaded) assert.doesNotMatch(p.stdout, /Pulling fs layer|Pull complete/, p.stdout);
            else assert.match(p.stdout, /: Pull complete$/m, p.stdout);
            assert.ok(p.stdout.includes(`\nDigest: ${ref.split("@")[1]}\nStatus: Downloaded newer image for ${ref}\n`), p.stdout);
            const r = await sim.docker(h.name, ["image", "inspect", "--format", "{{json .RepoDigests}}", ref]);
            assert.equal(r.code, 0, r.stderr);
            digests.push(r.stdout.trim());
        }
        assert.equal(digests[0], digests[1]);
        assert.deepEqual(JSON.parse(digests[0]), [ref]);
    });

    it("docker run --gpus all --network host --ipc host --device /dev/infiniband works; memlock -1 is capped", async () => {
        const h = sim.hosts[1];
        const ref = sim.images["0.17.1"];
        const r = await sim.docker(h.name, ["run", "--rm", "--gpus", "all", "--network", "host", "--ipc", "host",
            "--device", "/dev/infiniband", "--ulimit", "memlock=-1:-1", "--shm-size", "1g",
            "-v", "/root/.cache/huggingface:/root/.cache/huggingface", "-e", "HF_HOME=/root/.cache/huggingface",
            ref, "bash", "-c",
            "python3 -c 'print(1)'; ulimit -l; ls /dev/infiniband; echo $NVIDIA_VISIBLE_DEVICES; " +
            `ip -o -4 addr show ${SIM_FABRIC_INTERFACE} | wc -l; python3 -c 'import json; print(json.load(open("/etc/vllm-sim/release.json"))["version"])'; ` +
            "cat /root/.cache/huggingface/hub/models--Qwen--Qwen3.5-122B-A10B-FP8/refs/main; echo; " +
            "cat $HF_HOME/sim-faults.json 2>/dev/null || echo no-faults"], { timeoutMs: 120_000 });
        assert.equal(r.code, 0, r.stderr);
        const lines = r.stdout.trim().split("\n");
        assert.deepEqual(lines.slice(0, 6), ["1", String(SIM_MEMLOCK_BYTES / 1024), "uverbs0", "all", "1", "0.17.1"]);
        assert.match(lines[6], /^[0-9a-f]{40}$/);
        assert.equal(lines[7], "no-faults");
    });

    it("nvidia-smi on each host reports one GB10", async () => {
        for (const h of sim.hosts) {
            const r = await sim.ssh(h.name, "nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader,nounits && nvidia-smi -L && nvidia-smi | grep -c GB10");
            assert.equal(r.code, 0, r.stderr);
            const [csv, list, count] = r.stdout.trim().split("\n");
            assert.equal(csv, `NVIDIA GB10, ${Math.round(119.7 * 1024)}, 580.95.05, 12.1`);
            assert.match(list, /^GPU 0: NVIDIA GB10 \(UUID: GPU-[0-9a-f-]+\)$/);
            assert.equal(count, "1");
        }
    });

    it("setFaults and removeModelFile change exactly one host", async () => {
        const [a, b] = sim.hosts;
        await sim.setFaults(a.name, { serve: { exitWith: "boom" } });
        const fa = await sim.ssh(a.name, "cat /root/.cache/huggingface/sim-faults.json");
        assert.deepEqual(JSON.parse(fa.stdout), { serve: { exitWith: "boom" } });
        const fb = await sim.ssh(b.name, "test -e /root/.cache/huggingface/sim-faults.json; echo $?");
        assert.equal(fb.stdout.trim(), "1");
        await sim.setFaults(a.name, null);
        assert.equal((await sim.ssh(a.name, "test -e /root/.cache/huggingface/sim-faults.json; echo $?")).stdout.trim(), "1");

        const w = "model-00001-of-00001.safetensors";
        await sim.removeModelFile(b.name, QWEN35_122B_FP8.id, w);
        const snap = "/root/.cache/huggingface/hub/models--Qwen--Qwen3.5-122B-A10B-FP8/snapshots/*";
        assert.equal((await sim.ssh(b.name, `ls ${snap}/${w} >/dev/null 2>&1; echo $?`)).stdout.trim(), "2");
        assert.equal((await sim.ssh(a.name, `ls ${snap}/${w} >/dev/null 2>&1; echo $?`)).stdout.trim(), "0");
        await sim.writeModel(b.name, QWEN35_122B_FP8);
        assert.equal((await sim.ssh(b.name, `ls ${snap}/${w} >/dev/null 2>&1; echo $?`)).stdout.trim(), "0");
    });

    it("setHostDown makes ssh fail and restoring fixes it", async () => {
        const h = sim.hosts[1];
        await sim.setHostDown(h.name, true);
        const down = await sim.ssh(h.name, "true", { timeoutMs: 30_000 });
        assert.notEqual(down.code, 0);
        const dockerDown = await sim.docker(h.name, ["version", "--format", "{{.Server.Version}}"], { timeoutMs: 30_000 });
        assert.notEqual(dockerDown.code, 0);
        // the console still works, and the host's daemons are still running
        assert.equal((await sim.exec(h.name, "hostname")).stdout.trim(), h.name);
        await sim.setHostDown(h.name, false);
        const up = await sim.ssh(h.name, "echo back", { timeoutMs: 30_000 });
        assert.equal(up.stdout.trim(), "back", up.stderr);
    });

    it("a second cluster runs beside it with its own names, and its teardown leaves this one untouched", async () => {
        const other = await startSim({ hosts: 2, cluster: "auto" });
        let stopped = false;
        try {
            const [c, o] = [sim.cluster, other.cluster];
            assert.notEqual(o.id, c.id);
            for (const k of ["bridge", "bridgeAddress", "registry", "stateDir", "runDir", "netnsPrefix", "cgroupPrefix", "firewallComment"] as const) {
                assert.notEqual(o[k], c[k], k);
                assert.ok(!o[k].startsWith(c[k]) && !c[k].startsWith(o[k]), `${k}: ${o[k]} vs ${c[k]}: one a prefix of the other`);
            }
            assert.ok(other.hosts.every(h => h.address.startsWith(`${o.subnetPrefix}.`)));
            // the same host names answer, each from its own cluster's daemon
            const here = await sim.ssh("spark-a", "hostname -I");
            const there = await other.ssh("spark-a", "hostname -I");
            assert.equal(here.stdout.trim(), sim.host("spark-a").address);
            assert.equal(there.stdout.trim(), other.host("spark-a").address);
            // the other cluster's hosts are not on this one's bridge
            const cross = await sim.exec("spark-a", `timeout 3 bash -c 'exec 3<>/dev/tcp/${other.host("spark-b").address}/22' 2>&1; echo $?`);
            assert.notEqual(cross.stdout.trim().split("\n").pop(), "0");
            await other.stop();
            stopped = true;
            assert.deepEqual((await simStatus(o.id)).netns, []);
            assert.equal(fs.existsSync(o.stateDir), false);
            assert.equal((await sim.ssh("spark-b", "echo still-here")).stdout.trim(), "still-here");
            assert.deepEqual((await simStatus(c.id)).netns.sort(), sim.hosts.map(h => h.netns).sort());
        } finally {
            if (!stopped) await other.stop();
        }
    });

    it("cluster names: 0 is the default (svbr0, 198.18.0.0/24); N has its own /24 inside 198.18.0.0/15", () => {
        assert.deepEqual([simCluster(0).bridge, simCluster(0).registry, simCluster(0).netnsPrefix], ["svbr0", "198.18.0.1:5000", "sv-"]);
        const c = simCluster(7);
        assert.deepEqual([c.bridge, c.registry, c.netnsPrefix, c.subnetPrefix], ["svbr7", "198.18.7.1:5000", "sv7-", "198.18.7"]);
        assert.ok(`${c.netnsPrefix}spark-d`.length <= 15 && `${simCluster(200).netnsPrefix}spark-d`.length <= 15, "veth names fit IFNAMSIZ");
        assert.throws(() => simCluster(201), /cluster must be 0\.\.200/);
    });
});
