import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parseSpec } from "../../../components/spec/parseSpec";
import { packTools } from "../../../components/plan/hostCommands";
import { planCluster } from "../../../components/plan/plan";
import { toolsProgram } from "../../../components/plan/toolsProgram";
import { installRayToken } from "../../../components/plan/rayAuth";
import { rawConfig } from "../../fixtures";

const plan = (n: number, mutate: (raw: Record<string, any>) => void = () => {}) => {
    const raw = rawConfig(n);
    mutate(raw);
    return planCluster(parseSpec(raw));
};
const env = (p: ReturnType<typeof plan>, i: number) => Object.fromEntries(p.hosts[i].container.env);

test("each container carries its own fabric address and the fabric interface everywhere", () => {
    const p = plan(4);
    p.hosts.forEach((h, i) => {
        const e = env(p, i);
        assert.equal(e.VLLM_HOST_IP, `198.18.1.${i + 2}`);
        assert.equal(e.RAY_NODE_IP_ADDRESS, `198.18.1.${i + 2}`);
        for (const k of ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES", "OMPI_MCA_btl_tcp_if_include"])
            assert.equal(e[k], "enp1s0f1np1", k);
        assert.equal(e.NCCL_IB_HCA, "rocep1s0f1,roceP2p1s0f1");
        assert.equal(e.HF_HOME, "/root/.cache/huggingface");
        assert.deepEqual(h.container.devices, [{ hostPath: "/dev/infiniband", containerPath: "/dev/infiniband" }]);
        assert.deepEqual(h.container.ulimits.find(u => u.name === "memlock"), { name: "memlock", soft: -1, hard: -1 });
        assert.equal(h.container.networkMode, "host");
        assert.equal(h.container.ipcMode, "host");
        assert.equal(h.container.name, `spark-vllm-spark-${"abcd"[i]}`);
    });
});

test("TCP-only hosts disable IB and get no /dev/infiniband", () => {
    const p = plan(2, raw => raw.hosts.forEach((h: any) => (h.fabric.hcas = [])));
    assert.equal(env(p, 1).NCCL_IB_DISABLE, "1");
    assert.equal(env(p, 1).NCCL_IB_HCA, undefined);
    assert.deepEqual(p.hosts[1].container.devices, []);
});

test("ray start lines: the head binds its own address, workers point at the head's fabric address", () => {
    const p = plan(3);
    assert.ok(!p.hosts[0].rayLaunch!.create.includes("/dev/tcp/"), "the head checks no GCS but its own");
    assert.deepEqual(p.hosts[0].rayStartArgv, ["ray", "start", "--head", "--port=6379", "--node-ip-address=198.18.1.2", "--num-gpus=1",
        "--disable-usage-stats", "--dashboard-host=127.0.0.1", "--dashboard-port=8265"]);
    for (const i of [1, 2]) {
        assert.deepEqual(p.hosts[i].rayStartArgv, ["ray", "start", "--address=198.18.1.2:6379", `--node-ip-address=198.18.1.${i + 2}`, "--num-gpus=1", "--disable-usage-stats"]);
        assert.match(p.hosts[i].rayLaunch!.create, /timeout 180 docker exec -i spark-vllm-spark-[bc] bash -c '[^]*\npython3 -c [^]*'"'"' ray start --address=198\.18\.1\.2:6379 /);
        // a worker that cannot reach the head's GCS fails in seconds, naming it (Ray itself retries for minutes)
        assert.match(p.hosts[i].rayLaunch!.create, /timeout 10 bash -c [^\n]*exec 3<>\/dev\/tcp\/198\.18\.1\.2\/6379[^\n]*Ray GCS at 198\.18\.1\.2:6379 from this host within 10 s[^\n]*\npython3 -c [^]*'"'"' ray start /);
    }
});

test("the vllm serve line carries every configured flag, extra args quoted", () => {
    const p = plan(2, raw => {
        raw.vllm.extraArgs = ["--enable-prefix-caching", "--chat-template-content-format", "it's"];
        raw.model.trustRemoteCode = true;
    });
    assert.deepEqual(p.vllmServeArgv, ["vllm", "serve", "Qwen/Qwen3.5-122B-A10B-FP8", "--served-model-name", "qwen3.5-122b",
        "--tensor-parallel-size", "2", "--pipeline-parallel-size", "1", "--distributed-executor-backend", "ray",
        "--host", "127.0.0.1", "--port", "8001", "--middleware", "spark_vllm_tools.SparkVllmKeyGuard",
        "--gpu-memory-utilization", "0.85", "--max-model-len", "32768", "--trust-remote-code", "--enable-prefix-caching", "--chat-template-content-format", "it's"]);
    assert.ok(p.vllmLaunch.create.includes(`it'"'"'"'"'"'"'"'"'s`), "nested quoting of a quote inside bash -c");
    assert.equal(p.vllmLaunch.stdin, "apiKey");
    assert.equal(p.endpointProbe.stdin, "apiKey");
    assert.equal(p.endpoint, "http://198.18.0.2:8000/v1");
});

test("launches are detached, time-limited and have a delete", () => {
    const p = plan(2);
    const launches = [...p.hosts.map(h => h.rayLaunch!), p.vllmLaunch];
    for (const l of launches) {
        assert.ok(l.delete, "every launch has a delete");
        assert.match(l.create, /timeout \d+ /);
    }
    assert.match(p.vllmLaunch.create, /setsid sh -c .*PYTHONPATH=.* \/var\/tmp\/spark-vllm vllm serve .* > \/var\/tmp\/spark-vllm\/vllm-serve\.log 2>&1 < \/dev\/null 9>&- &/);
    for (const c of [p.rayProbe!, p.compat, p.endpointProbe, ...p.hosts.map(h => h.preflight)]) assert.match(c.create, /^timeout \d+ /);
});

test("the plan is deterministic and independent of object key order", () => {
    const a = plan(3);
    const b = plan(3, raw => {
        raw.vllm = Object.fromEntries(Object.entries(raw.vllm).reverse());
        raw.hosts = raw.hosts.map((h: object) => Object.fromEntries(Object.entries(h).reverse()));
    });
    assert.deepEqual(a, b);
});

test("the tools program holds the diagnosis catalog and compiles as Python", async () => {
    const { execFileSync } = await import("node:child_process");
    const program = toolsProgram();
    assert.match(program, /def diagnose\(/);
    assert.match(program, /^SPARK_VLLM_DATA = json\.loads\(".*"\)$/m);
    execFileSync("python3", ["-c", "import ast,sys; ast.parse(sys.stdin.read())"], { input: program });
});

test("backend mp: one vllm serve per host with vLLM's multi-node flags, --headless on workers, no Ray at all", () => {
    const p = plan(3, raw => { raw.vllm.backend = "mp"; raw.vllm.tensorParallelSize = 3; });
    assert.equal(p.backend, "mp");
    assert.equal(p.rayProbe, undefined);
    const multi = (rank: number) => ["--nnodes", "3", "--node-rank", String(rank), "--master-addr", "198.18.1.2", "--master-port", "29501"];
    assert.deepEqual(p.vllmServeArgv.slice(p.vllmServeArgv.indexOf("--nnodes"), p.vllmServeArgv.indexOf("--nnodes") + 8), multi(0));
    assert.ok(!p.vllmServeArgv.includes("--headless") && !p.vllmServeArgv.includes("--distributed-executor-backend"));
    for (const i of [1, 2]) {
        const argv = p.hosts[i].vllmServeArgv!;
        assert.deepEqual(argv.slice(argv.indexOf("--nnodes"), argv.indexOf("--nnodes") + 9), [...multi(i), "--headless"]);
        assert.equal(p.hosts[i].rayLaunch, undefined);
        assert.equal(p.hosts[i].vllmLaunch!.stdin, undefined, "a headless worker serves no API and reads no key");
        assert.match(p.hosts[i].vllmLaunch!.create, new RegExp(`docker exec spark-vllm-spark-${"abc"[i]} bash -c`));
    }
    const all = JSON.stringify(p);
    assert.ok(!all.includes("ray start"), "no ray start anywhere");
});

test("one host: plain vllm serve, no Ray, no executor flag, no multi-node flags", () => {
    const p = plan(1);
    assert.equal(p.backend, "single");
    assert.equal(p.rayProbe, undefined);
    assert.equal(p.hosts[0].rayLaunch, undefined);
    for (const flag of ["--distributed-executor-backend", "--nnodes", "--headless"]) assert.ok(!p.vllmServeArgv.includes(flag), flag);
    assert.ok(!JSON.stringify(p).includes("ray start"));
});

test("memory gate per host: drops the page cache on the host, then checks CUDA's free memory in its container", () => {
    const p = plan(2);
    for (const h of p.hosts) {
        const [flush, check] = h.memoryGate.create.split("\n");
        assert.match(flush, /^timeout 150 python3 \/var\/tmp\/spark-vllm\/spark_vllm_tools\.py flush-page-cache /);
        assert.match(check, new RegExp(`^timeout 60 docker exec ${h.container.name} python3 /var/tmp/spark-vllm/spark_vllm_tools.py memory-check .*"gpuMemoryUtilization":0.85`));
    }
});

test("compile caches live on the host, inside the mounted HF cache, so a relaunch does not compile again", () => {
    const p = plan(2);
    for (const h of p.hosts) {
        const env = Object.fromEntries(h.container.env);
        assert.equal(env.VLLM_CACHE_ROOT, "/root/.cache/huggingface/spark-vllm-compile/vllm");
        assert.ok(h.container.mounts.some(m => env.VLLM_CACHE_ROOT.startsWith(m.hostPath + "/")), "under a mounted host directory");
        assert.match(env.TRITON_CACHE_DIR, /spark-vllm-compile\/triton$/);
    }
});

test("the helper program goes into a private logDir under a mktemp name; a logDir others can write is refused", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-logdir-"));
    try {
        const logDir = path.join(dir, "logs");
        const p = plan(2, raw => { raw.logDir = logDir; });
        const run = () => spawnSync("bash", ["-c", p.hosts[0].tools.create], { input: packTools("print('helper')\n"), encoding: "utf8" });
        const ok = run();
        assert.equal(ok.status, 0, ok.stderr);
        assert.equal(fs.statSync(logDir).mode & 0o777, 0o700, "logDir is private");
        assert.equal(fs.readFileSync(path.join(logDir, "spark_vllm_tools.py"), "utf8"), "print('helper')\n");
        // The head's proxy directory too, private: the head's container mounts it read-only (issue 50).
        assert.deepEqual(fs.readdirSync(logDir), ["proxy", "spark_vllm_tools.py"], "no temporary file left");
        assert.equal(fs.statSync(path.join(logDir, "proxy")).mode & 0o777, 0o700, "the proxy directory is private");
        fs.chmodSync(logDir, 0o777);
        const open = run();
        assert.equal(open.status, 1);
        assert.match(open.stderr, new RegExp(`spark-vllm: ${logDir} is writable by others \\(drwxrwxrwx\\): files in it could have been planted; remove it or set spark-vllm:logDir`));
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

test("the helper program travels packed (a third of its size in every host's registration and state) and lands byte for byte", async () => {
    const { plannedResources } = await import("../../../components/plan/resources");
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-logdir-"));
    try {
        const logDir = path.join(dir, "logs");
        const p = plan(2, raw => { raw.logDir = logDir; });
        const entry = plannedResources(p).find(r => r.name === "spark-spark-a-tools")!;
        const stdin = (entry.inputs as { stdin: string }).stdin;
        const program = toolsProgram();
        assert.ok(stdin.length < program.length / 2, `stdin ${stdin.length} bytes for a ${program.length}-byte program`);
        const run = spawnSync("bash", ["-c", p.hosts[0].tools.create], { input: stdin, encoding: "utf8" });
        assert.equal(run.status, 0, run.stderr);
        assert.equal(fs.readFileSync(path.join(logDir, "spark_vllm_tools.py"), "utf8"), program);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

test("the serving proof: on the head after the endpoint probe, key on stdin, its load from probes.serving*; skippable", async () => {
    const { plannedResources } = await import("../../../components/plan/resources");
    const p = plan(2, raw => { raw.probes = { servingConcurrency: 8, servingRequests: 16, servingMaxTokens: 32, servingDropWarnPercent: 30 }; });
    const proof = p.servingProof!;
    assert.equal(proof.stdin, "apiKey");
    assert.match(proof.create, /^timeout 900 docker exec -i spark-vllm-spark-a python3 \/var\/tmp\/spark-vllm\/spark_vllm_tools\.py serving-proof /);
    const args = JSON.parse(proof.create.slice(proof.create.indexOf("{"), proof.create.lastIndexOf("}") + 1));
    assert.deepEqual([args.concurrency, args.requests, args.maxTokens, args.warnDropFraction, args.resultFile],
        [8, 16, 32, 0.3, "/var/tmp/spark-vllm/serving-proof.json"]);
    const entry = plannedResources(p).find(r => r.name === "spark-serving-proof")!;
    assert.deepEqual([entry.dependsOn, entry.replacedBy], [["spark-endpoint-probe"], ["spark-endpoint-probe"]]);
    const skipped = plan(2, raw => { raw.probes = { serving: false }; });
    assert.equal(skipped.servingProof, undefined);
    assert.ok(!plannedResources(skipped).some(r => r.name === "spark-serving-proof"));
});

test("Ray token: only on the Ray launches' stdin, never in argv or environment; token mode only with Ray", () => {
    const p = plan(3);
    for (const h of p.hosts) {
        const launch = h.rayLaunch!;
        assert.equal(launch.stdin, "rayToken");
        // docker exec -i with the script: no -e/--env, no RAY_AUTH_TOKEN= assignment anywhere
        assert.match(launch.create, /docker exec -i spark-vllm-spark-[abc] bash -c /);
        // every docker exec takes no option but -i (no -e/--env), and no RAY_AUTH_TOKEN= assignment anywhere
        assert.deepEqual([...launch.create.matchAll(/docker exec ((?:-\S+ )*)spark-vllm/g)].map(m => m[1]).sort(), ["-i "]);
        assert.doesNotMatch(launch.create, /RAY_AUTH_TOKEN=/);
        assert.match(launch.create, /IFS= read -r token/);
        assert.match(launch.create, /'"'"' ray start [^\n]*< \/dev\/null 9>&-\n/);
        assert.match(launch.delete!, /ray\.json[^\n]*\nray stop --force\nrm -f \/var\/lib\/spark-vllm\/ray\/auth_token/);
        assert.deepEqual([env(p, p.hosts.indexOf(h)).RAY_AUTH_MODE, env(p, p.hosts.indexOf(h)).RAY_AUTH_TOKEN_PATH],
            ["token", "/var/lib/spark-vllm/ray/auth_token"]);
    }
    for (const c of [p.compat, p.vllmLaunch, p.endpointProbe, p.rayProbe!]) assert.notEqual(c.stdin, "rayToken");
    const mp = plan(2, raw => { raw.vllm.backend = "mp"; });
    assert.equal(mp.hosts.some(h => h.rayLaunch), false);
    assert.equal(env(mp, 0).RAY_AUTH_MODE, undefined);
    assert.equal(env(plan(1), 0).RAY_AUTH_MODE, undefined);
});

test("the Ray token script writes the token 0600 in a 0700 directory, and refuses an empty stdin", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "raytoken-"));
    const file = path.join(dir, "ray", "auth_token");
    const body = ["set -e", ...installRayToken(file), "echo done"].join("\n");
    const ok = spawnSync("bash", ["-c", body], { input: "s3cret-token\n", encoding: "utf8" });
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(fs.readFileSync(file, "utf8"), "s3cret-token\n");
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.equal(fs.statSync(path.dirname(file)).mode & 0o777, 0o700);
    assert.deepEqual(fs.readdirSync(path.dirname(file)), ["auth_token"]);
    const empty = spawnSync("bash", ["-c", body], { input: "", encoding: "utf8" });
    assert.equal(empty.status, 1);
    assert.match(empty.stderr, /no Ray token on stdin/);
    fs.rmSync(dir, { recursive: true, force: true });
});

/** The names the head's launch lists in vLLM's ray_non_carry_over_env_vars.json (its ray-env line), or undefined. */
const listed = (p: ReturnType<typeof plan>): string[] | undefined => {
    // The line is quoted twice (argvLine, then the docker exec script): its JSON is the first {...} after ray-env.
    const m = /spark_vllm_tools\.py ray-env \S*?(\{"nonCarryOver":\[[^\]]*\]\})/.exec(p.vllmLaunch.create);
    return m ? JSON.parse(m[1]).nonCarryOver : undefined;
};

test("with Ray, the head's vLLM launch lists VLLM_API_KEY and the per-host names in vLLM's non-carry-over file before vllm serve", () => {
    const p = plan(2);
    assert.deepEqual(listed(p), ["NCCL_IB_GID_INDEX", "RAY_NODE_IP_ADDRESS", "SPARK_VLLM_HOST", "VLLM_API_KEY", "VLLM_HOST_IP"]);
    const ray = p.vllmLaunch.create;
    assert.ok(ray.indexOf("ray-env") < ray.indexOf("setsid sh -c"), "before vllm serve starts");
    assert.equal(listed(plan(2, raw => { raw.vllm.backend = "mp"; })), undefined);
});

test("hosts cabled on different ports keep their own NCCL/UCX/Gloo/TP settings: every variable that differs per host is listed", () => {
    const shapes: Array<(raw: Record<string, any>) => void> = [
        // spark-b on port 2 (DESIGN.md: enp1s0f1np1 / enP2p1s0f1np1, rocep1s0f1 / roceP2p1s0f1)
        raw => { raw.hosts[1].fabric.interface = "enP2p1s0f1np1"; raw.hosts[1].fabric.hcas = ["roceP2p1s0f1"]; },
        // one host TCP only: its NCCL_IB_DISABLE=1 and no NCCL_IB_HCA must not be replaced by the head's
        raw => { raw.hosts[2].fabric.hcas = []; },
        raw => { raw.hosts[0].fabric.interface = "enp1s0f0np0"; raw.hosts[3].fabric.hcas = ["rocep1s0f0"]; },
        () => {},
    ];
    for (const shape of shapes) {
        const p = plan(4, shape);
        const names = listed(p)!;
        const differing = new Set<string>();
        for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) {
            const a = env(p, i), b = env(p, j);
            for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) if (a[k] !== b[k]) differing.add(k);
        }
        for (const k of differing) assert.ok(names.includes(k), `${k} differs per host but vLLM would copy the head's value: ${names}`);
        assert.ok(names.includes("VLLM_API_KEY"));
    }
    const port2 = listed(plan(2, shapes[0]))!;
    for (const k of ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES", "OMPI_MCA_btl_tcp_if_include", "NCCL_IB_HCA", "VLLM_HOST_IP"])
        assert.ok(port2.includes(k), `${k} missing from ${port2}`);
    // the same on every host: vLLM may copy it (same value), and the list stays as it was for such stacks
    assert.ok(!listed(plan(2))!.includes("NCCL_SOCKET_IFNAME"));
    assert.ok(!listed(plan(2))!.includes("HF_HOME"));
});
