// Every rule, passing and failing, evaluated without the Pulumi engine: policy args built by hand.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import type { ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import { COMMAND, CONTAINER, REMOTE_IMAGE, UNKNOWN, findSecret, interfaceFamily, knownVllmVersion, policies } from "../../policies/rules";
import { parseSpec } from "../../components/spec/parseSpec";
import { planCluster } from "../../components/plan/plan";
import { rawConfig } from "../fixtures";

type Res = { type: string; name: string; urn: string; props: Record<string, any> };

function policy(name: string) {
    const p = policies.find(x => x.name === name);
    assert.ok(p, `policy ${name} exists`);
    return p!;
}
/** Runs a resource policy over each resource; returns the violation messages. */
function onResources(name: string, resources: Res[], config: object = {}): string[] {
    const p = policy(name) as ResourceValidationPolicy;
    const out: string[] = [];
    for (const r of resources) {
        const fns = [p.validateResource ?? []].flat();
        for (const fn of fns) fn({ ...r, getConfig: () => config } as any, (m: string) => out.push(m));
    }
    return out;
}
function onStack(name: string, resources: Res[], config: object = {}): string[] {
    const p = policy(name) as StackValidationPolicy;
    const out: string[] = [];
    p.validateStack!({ resources, getConfig: () => config } as any, (m: string) => out.push(m));
    return out;
}

const DIGEST = `sha256:${"ab".repeat(32)}`;
const IMAGE = `vllm/vllm-openai:v0.17.1@${DIGEST}`;
const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKUcZFdnMYt1+OQnP9uJD4s1CFnLWUciKxw5B95cRYc1";
const urn = (n: string) => `urn:pulumi:spark::spark-vllm::${n}`;

function image(host: string, ref = IMAGE): Res {
    return { type: REMOTE_IMAGE, name: `${host}-image`, urn: urn(`${host}-image`), props: { name: ref, platform: "linux/arm64" } };
}
function container(host: string, ip: string, iface = "enp1s0f1np1", extra: Record<string, any> = {}, envOverride: Record<string, string> = {}): Res {
    const env: Record<string, string> = {
        VLLM_HOST_IP: ip, RAY_NODE_IP_ADDRESS: ip, NCCL_SOCKET_IFNAME: iface, GLOO_SOCKET_IFNAME: iface, TP_SOCKET_IFNAME: iface,
        UCX_NET_DEVICES: iface, OMPI_MCA_btl_tcp_if_include: iface, NCCL_IB_HCA: "rocep1s0f1,roceP2p1s0f1", HF_HOME: "/home/nvidia/.cache/huggingface",
        ...envOverride,
    };
    return {
        type: CONTAINER, name: `${host}-container`, urn: urn(`${host}-container`),
        props: {
            name: `spark-vllm-${host}`, image: UNKNOWN, networkMode: "host", ipcMode: "host", gpus: "all",
            envs: Object.entries(env).filter(([, v]) => v !== "").map(([k, v]) => `${k}=${v}`),
            labels: [{ label: "spark-vllm.host", value: host }, { label: "spark-vllm.role", value: host === "spark-a" ? "head" : "worker" }, { label: "spark-vllm.gpus", value: "1" }],
            capabilities: { adds: ["IPC_LOCK"] }, devices: [{ hostPath: "/dev/infiniband", containerPath: "/dev/infiniband" }],
            ulimits: [{ name: "memlock", soft: -1, hard: -1 }], entrypoints: ["sleep"], command: ["infinity"],
            ...extra,
        },
    };
}
function command(name: string, create: string, extra: Record<string, any> = {}): Res {
    return { type: COMMAND, name, urn: urn(name), props: { connection: { host: "spark-a.local", hostKey: HOST_KEY }, create, ...extra } };
}
const rayHead = (flags = "--dashboard-host=127.0.0.1 --dashboard-port=8265") =>
    command("ray-head-launch", `timeout 120 docker exec spark-vllm-spark-a ray start --head --port=6379 --node-ip-address=192.168.100.10 --num-gpus=1 --disable-usage-stats ${flags}`.trim());
const rayWorker = () => command("ray-worker-launch", "timeout 120 docker exec spark-vllm-spark-b ray start --address=192.168.100.10:6379 --node-ip-address=192.168.100.11 --num-gpus=1");
function serve(o: { model?: string; tp?: number; pp?: number; gmu?: number; len?: number; read?: boolean; stdin?: unknown; extra?: string } = {}): Res {
    const args = [
        `vllm serve ${o.model ?? "Qwen/Qwen3.5-122B-A10B-FP8"} --served-model-name qwen3.5-122b`,
        `--tensor-parallel-size ${o.tp ?? 2} --pipeline-parallel-size ${o.pp ?? 1} --distributed-executor-backend ray --host 0.0.0.0 --port 8000`,
        `--gpu-memory-utilization ${o.gmu ?? 0.85}${o.len === undefined ? "" : ` --max-model-len ${o.len}`}${o.extra ? ` ${o.extra}` : ""}`,
    ].join(" ");
    const body = ["set -e", ...(o.read === false ? [] : ["IFS= read -r VLLM_API_KEY", "export VLLM_API_KEY"]),
        `setsid ${args} > /var/tmp/spark-vllm/vllm-serve.log 2>&1 < /dev/null &`].join("\n");
    return command("endpoint-launch", `timeout 90 docker exec -i spark-vllm-spark-a bash -c '${body}'`, { stdin: "stdin" in o ? o.stdin : UNKNOWN });
}
const compat = (version?: string) => command("endpoint-compat",
    `timeout 120 docker exec spark-vllm-spark-a python3 /var/tmp/spark-vllm/spark_vllm_tools.py compat '{"model":"Qwen/Qwen3.5-122B-A10B-FP8","cacheDir":"/home/nvidia/.cache/huggingface","trustRemoteCode":false${version ? `,"declaredVllmVersion":"${version}"` : ""}}'`);

/** The healthy two-Spark stack the planner produces for Pulumi.spark.yaml. */
function stack(o: Parameters<typeof serve>[0] = {}, img = IMAGE, version?: string): Res[] {
    return [image("spark-a", img), image("spark-b", img), container("spark-a", "192.168.100.10"), container("spark-b", "192.168.100.11"),
        rayHead(), rayWorker(), compat(version), serve({ len: 32768, ...o })];
}

test("every rule has a name, description and enforcement level; memory rules take config", () => {
    assert.ok(policies.length >= 12);
    for (const p of policies) assert.ok(p.name && p.description && p.enforcementLevel, p.name);
    assert.equal(policy("kv-cache-and-host-headroom").enforcementLevel, "advisory");
    assert.equal(policy("model-weights-fit").enforcementLevel, "mandatory");
    assert.ok(policy("model-weights-fit").configSchema?.properties.reserveGiB);
    assert.ok(policy("kv-cache-and-host-headroom").configSchema?.properties.minHostHeadroomGiB);
});

test("the healthy stack passes every rule", () => {
    // vLLM 0.17.1's CUDA 13.0 build: its FP8 kernels run on a GB10, which the default CUDA 12.9 image's do not
    // (quantization-kernels-on-gb10 below)
    const res = stack({}, `vllm/vllm-openai:v0.17.1-cu130@${DIGEST}`, "0.17.1");
    for (const p of policies) {
        const msgs = "validateStack" in p ? onStack(p.name, res) : onResources(p.name, res);
        assert.deepEqual(msgs, [], p.name);
    }
});

test("image-pinned-by-digest", () => {
    assert.deepEqual(onResources("image-pinned-by-digest", [image("a"), image("b", `nvcr.io/nvidia/vllm@${DIGEST}`)]), []);
    const msgs = onResources("image-pinned-by-digest", [image("a", "vllm/vllm-openai:v0.17.1")]);
    assert.equal(msgs.length, 1);
    assert.match(msgs[0], /not pinned by digest.*vllm\/vllm-openai:v0\.17\.1@sha256:<digest>/);
});

test("same-image-on-every-host", () => {
    assert.deepEqual(onStack("same-image-on-every-host", stack()), []);
    const other = `vllm/vllm-openai:v0.14.0@sha256:${"cd".repeat(32)}`;
    assert.match(onStack("same-image-on-every-host", [image("spark-a"), image("spark-b", other)])[0], /different images/);
    const digests = [container("a", "10.0.0.1", undefined, { image: `vllm/vllm-openai@${DIGEST}` }), container("b", "10.0.0.2", undefined, { image: other })];
    assert.match(onStack("same-image-on-every-host", digests)[0], /different image digests/);
});

test("parallelism-matches-gpus", () => {
    assert.deepEqual(onStack("parallelism-matches-gpus", stack()), []);
    assert.match(onStack("parallelism-matches-gpus", stack({ tp: 4 }))[0], /TP × PP = 4 × 1 = 4 GPUs but the hosts have 2/);
    // gpt-oss-120b has 64 heads; TP=3 on three hosts matches the GPUs but not the heads.
    const three = [...stack({ tp: 3, model: "openai/gpt-oss-120b" }), container("spark-c", "192.168.100.12")];
    const msgs = onStack("parallelism-matches-gpus", three);
    assert.equal(msgs.length, 1);
    assert.match(msgs[0], /64 attention heads, not divisible by TP=3/);
});

test("model-weights-fit (mandatory) and kv-cache-and-host-headroom (advisory)", () => {
    assert.deepEqual(onStack("model-weights-fit", stack()), []);
    // Llama 3.1 405B FP4 (≈233 GB) on two Sparks: 108.5 GiB per GPU > 103.44 GiB share.
    const big = stack({ model: "nvidia/Llama-3.1-405B-Instruct-FP4" });
    assert.match(onStack("model-weights-fit", big)[0], /Llama-3\.1-405B-Instruct-FP4: weights need 108\.50 GiB/);
    assert.deepEqual(onStack("kv-cache-and-host-headroom", big), [], "the advisory rule stays quiet when weights do not fit");
    // Llama 3.3 70B BF16 at TP=2: 221064 KV tokens; 262144 does not fit.
    const long = stack({ model: "meta-llama/Llama-3.3-70B-Instruct", len: 262144 });
    assert.deepEqual(onStack("model-weights-fit", long), []);
    assert.match(onStack("kv-cache-and-host-headroom", long)[0], /holds 221064 tokens .* maxModelLen is 262144/);
    // 0.95 leaves 6.08 GiB of 121.69 for the host.
    assert.match(onStack("kv-cache-and-host-headroom", stack({ gmu: 0.95 }))[0], /leaves 6\.08 GiB .*\(minimum 8 GiB\); lower it to at most 0\.93/);
    // Config: a 20 GiB headroom minimum flags the default 0.85 (18.25 GiB); a huge reserve breaks the fit.
    assert.match(onStack("kv-cache-and-host-headroom", stack(), { minHostHeadroomGiB: 20 })[0], /leaves 18\.25 GiB/);
    assert.match(onStack("model-weights-fit", stack(), { reserveGiB: 50 })[0], /\+ 50 GiB reserve/);
    // Unknown models are not judged.
    assert.deepEqual(onStack("model-weights-fit", stack({ model: "someone/new-model" })), []);
});

test("model-in-catalog (advisory): a model the catalog lacks is a warning that names it, its memory unchecked, and the figures it must fit", () => {
    assert.equal(policy("model-in-catalog").enforcementLevel, "advisory");
    assert.deepEqual(onStack("model-in-catalog", stack()), [], "a catalog model says nothing");
    // 405B at FP8 is about 400 GB for 2 x 128 GB: model-weights-fit cannot judge it (no catalog entry) and passes.
    const unknown = stack({ model: "meta-llama/Llama-3.1-405B-Instruct-FP8" });
    assert.deepEqual(onStack("model-weights-fit", unknown), []);
    const [warning, ...more] = onStack("model-in-catalog", unknown);
    assert.deepEqual(more, []);
    assert.match(warning, /^meta-llama\/Llama-3\.1-405B-Instruct-FP8 is not in spark-vllm's model catalog \(components\/knowledge\/catalog\.ts\): its memory was not checked at preview/);
    assert.match(warning, /must fit 2 GPUs \(TP 2 × PP 1\) of 99\.44 GiB each \(0\.85 × 121\.69 GiB, less 4 GiB reserve\), 198\.87 GiB in all/);
    assert.match(warning, /refuses before any download or launch/);
    assert.match(onStack("model-in-catalog", unknown, { reserveGiB: 10, usableGiB: 100 })[0], /of 75\.00 GiB each \(0\.85 × 100 GiB, less 10 GiB reserve\)/);
});

test("vllm-supports-architecture: declared version, image tag, or unknown", () => {
    const old = `vllm/vllm-openai:v0.14.0@${DIGEST}`;
    assert.deepEqual(onStack("vllm-supports-architecture", stack({}, IMAGE)), []);
    const fromTag = onStack("vllm-supports-architecture", stack({}, old));
    assert.match(fromTag[0], /vLLM v0\.14\.0 \(from the image tag .*\) does not know Qwen3_5MoeForConditionalGeneration.*vLLM >= 0\.17\.0/);
    assert.match(onStack("vllm-supports-architecture", stack({}, `nvcr.io/nvidia/vllm@${DIGEST}`, "0.16.0"))[0], /vLLM 0\.16\.0 \(from the declared/);
    // The declared version wins over the tag.
    assert.deepEqual(onStack("vllm-supports-architecture", stack({}, old, "0.17.1")), []);
    // Unknown at preview: no tag version (NGC YY.MM tags are not vLLM versions) and nothing declared.
    assert.deepEqual(onStack("vllm-supports-architecture", stack({}, `nvcr.io/nvidia/vllm:25.09-py3@${DIGEST}`)), []);
    assert.equal(knownVllmVersion([image("a", `nvcr.io/nvidia/vllm:25.09-py3@${DIGEST}`)]), undefined);
    assert.equal(knownVllmVersion([image("a", `my.registry/vllm-spark:0.17.1-cu130-ray@${DIGEST}`)])?.version, "0.17.1-cu130-ray");
    assert.equal(knownVllmVersion([command("c", "echo spark-vllm:vllm.version=0.17.1")])?.version, "0.17.1");
});

test("container-host-network-and-ipc", () => {
    assert.deepEqual(onResources("container-host-network-and-ipc", [container("a", "10.0.0.1")]), []);
    const msgs = onResources("container-host-network-and-ipc", [container("a", "10.0.0.1", undefined, { networkMode: "bridge", ipcMode: undefined })]);
    assert.equal(msgs.length, 2);
    assert.match(msgs[0], /networkMode is "bridge"/);
    assert.match(msgs[1], /ipcMode is unset/);
    assert.deepEqual(onResources("container-host-network-and-ipc", [container("a", "10.0.0.1", undefined, { networkMode: UNKNOWN })]), []);
});

test("container-fabric-environment", () => {
    assert.deepEqual(onResources("container-fabric-environment", [container("a", "10.0.0.1")]), []);
    const missing = onResources("container-fabric-environment", [container("a", "", undefined, {}, { GLOO_SOCKET_IFNAME: "" })]);
    assert.deepEqual(missing.map(m => /does not set (\w+)/.exec(m)?.[1]), ["VLLM_HOST_IP", "GLOO_SOCKET_IFNAME"]);
    const mixed = onResources("container-fabric-environment", [container("a", "10.0.0.1", undefined, {}, { GLOO_SOCKET_IFNAME: "enP7s7" })]);
    assert.match(mixed[0], /mixes interfaces .*GLOO_SOCKET_IFNAME=enP7s7/);
});

test("fabric-interface-family", () => {
    assert.equal(interfaceFamily("enp1s0f1np1"), interfaceFamily("enP2p1s0f1np1"));
    assert.equal(interfaceFamily("enp1s0f0np0"), "connectx");
    assert.equal(interfaceFamily("enP7s7"), "enP7s7");
    // Twin netdevs and the other port are one family.
    const ok = [container("spark-a", "10.0.0.1", "enp1s0f1np1"), container("spark-b", "10.0.0.2", "enP2p1s0f0np0")];
    assert.deepEqual(onStack("fabric-interface-family", ok), []);
    const mixed = onStack("fabric-interface-family", [container("spark-a", "10.0.0.1", "enp1s0f1np1"), container("spark-b", "10.0.0.2", "enP7s7")]);
    assert.match(mixed[0], /different interface families .*spark-b-container=enP7s7/);
    const dup = onStack("fabric-interface-family", [container("spark-a", "10.0.0.1"), container("spark-b", "10.0.0.1")]);
    assert.match(dup[0], /share VLLM_HOST_IP=10\.0\.0\.1/);
});

test("endpoint-requires-api-key: --headless counts only as an argument of its own, not inside another's value (issue 41)", () => {
    // An mp worker (`vllm serve … --headless`) serves no API and reads no key.
    assert.deepEqual(onResources("endpoint-requires-api-key", [serve({ read: false, stdin: undefined, extra: "--headless" })]), []);
    // The API server without the key read, " --headless" inside a value: still refused.
    for (const extra of ['--chat-template "x --headless y"', "--served-model-name-x a\\ --headless", "--x='\"'\"' --headless'\"'\"'"])
        assert.match(onResources("endpoint-requires-api-key", [serve({ read: false, extra })])[0] ?? "accepted", /does not read VLLM_API_KEY from stdin/, extra);
    // Text the shell cannot split (an open quote) says nothing about --headless: the key is still required.
    assert.match(onResources("endpoint-requires-api-key", [serve({ read: false, extra: '"open --headless' })])[0] ?? "accepted", /does not read VLLM_API_KEY/);
});

test("endpoint-requires-api-key", () => {
    assert.deepEqual(onResources("endpoint-requires-api-key", [serve(), serve({ stdin: "secret-key\n" }), rayHead()]), []);
    assert.match(onResources("endpoint-requires-api-key", [serve({ read: false })])[0], /does not read VLLM_API_KEY from stdin/);
    assert.match(onResources("endpoint-requires-api-key", [serve({ stdin: undefined })])[0], /has no stdin/);
    assert.match(onResources("endpoint-requires-api-key", [serve({ stdin: "" })])[0], /has no stdin/);
});

test("ray-dashboard-loopback", () => {
    assert.deepEqual(onResources("ray-dashboard-loopback", [rayHead(), rayWorker(), rayHead("--include-dashboard=false"), serve()]), []);
    assert.match(onResources("ray-dashboard-loopback", [rayHead("--dashboard-host=0.0.0.0")])[0], /binds the dashboard to 0\.0\.0\.0/);
    assert.match(onResources("ray-dashboard-loopback", [rayHead("--dashboard-port=8265")])[0], /has no --dashboard-host/);
});

test("no-privileged-containers", () => {
    assert.deepEqual(onResources("no-privileged-containers", [container("a", "10.0.0.1"), container("b", "10.0.0.2", undefined, { privileged: false })]), []);
    assert.match(onResources("no-privileged-containers", [container("a", "10.0.0.1", undefined, { privileged: true })])[0], /is privileged.*IPC_LOCK/);
});

test("no-secrets-in-text", () => {
    const hf = `hf_${"x".repeat(34)}`;
    assert.deepEqual(onResources("no-secrets-in-text", stack()), []);
    const cases: Res[] = [
        serve({ extra: "--api-key abc123" }),
        command("dl", `HF_TOKEN=${hf} huggingface-cli download x/y`),
        command("dl2", "export HF_TOKEN=plainvalue; huggingface-cli download x/y"),
        command("k", "curl -H 'Authorization: Bearer sk-abcdefghijklmnopqrstuvwxyz'"),
        command("env", "true", { environment: { HF_TOKEN: hf } }),
        container("a", "10.0.0.1", undefined, { command: ["vllm", "serve", "m", "--api-key=topsecret"] }),
        container("b", "10.0.0.2", undefined, {}, { HF_TOKEN: hf }),
        command("ray", "RAY_AUTH_TOKEN=s3cret-token ray start --address=10.0.0.1:6379"),
    ];
    for (const c of cases) assert.equal(onResources("no-secrets-in-text", [c]).length, 1, c.name);
    // References to variables and reading from stdin are fine; the message never echoes the value.
    assert.equal(findSecret('IFS= read -r VLLM_API_KEY; export VLLM_API_KEY; HF_TOKEN="$(cat)" x; vllm serve m --api-key "$VLLM_API_KEY"'), undefined);
    assert.equal(findSecret("RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=/var/lib/spark-vllm/ray/auth_token"), undefined, "the token's path is not the token");
    assert.ok(!onResources("no-secrets-in-text", [cases[1]])[0].includes(hf));
});

test("image-runs-on-gb10: known images against a Spark and the backend; unknown images are left to the hosts' check", () => {
    const at = (tag: string) => `${tag}@sha256:${"ab".repeat(32)}`;
    assert.deepEqual(onStack("image-runs-on-gb10", stack({}, at("vllm/vllm-openai:v0.17.1"))), [], "0.17.1 ships Ray and sm_120");
    const noRay = onStack("image-runs-on-gb10", stack({}, at("vllm/vllm-openai:v0.18.0")));
    assert.equal(noRay.length, 1);
    assert.match(noRay[0], /^vllm\/vllm-openai:v0\.18\.0 on a DGX Spark \(ray backend\): ray is not importable .*\[ray-missing; sources: /);
    // The same image with vLLM's own multi-node launch (no `ray start`, --nnodes in vllm serve) passes.
    const mp = [image("spark-a", at("vllm/vllm-openai:v0.18.0")), image("spark-b", at("vllm/vllm-openai:v0.18.0")),
        container("spark-a", "192.168.100.10"), container("spark-b", "192.168.100.11"), serve({ extra: "--nnodes 2 --node-rank 0 --master-addr 192.168.100.10" })];
    assert.deepEqual(onStack("image-runs-on-gb10", mp), []);
    // An NGC image with vLLM older than the mp launch is refused for mp.
    const old = mp.map(r => r.type === REMOTE_IMAGE ? image(r.name.replace(/-image$/, ""), at("nvcr.io/nvidia/vllm:25.10-py3")) : r);
    assert.match(onStack("image-runs-on-gb10", old)[0], /vLLM 0\.10\.2 has no --nnodes.*\[mp-unsupported/);
    assert.deepEqual(onStack("image-runs-on-gb10", stack({}, at("example.org/own/vllm:custom"))), [], "unknown image: no verdict");
});

test("quantization-kernels-on-gb10: an advisory for a catalog model whose quantization's vLLM kernel the known image lacks on 12.1", () => {
    const at = (tag: string) => `${tag}@sha256:${"ab".repeat(32)}`;
    assert.equal(policy("quantization-kernels-on-gb10").enforcementLevel, "advisory");
    const fp8 = onStack("quantization-kernels-on-gb10", stack({}, at("vllm/vllm-openai:v0.17.1")));
    assert.equal(fp8.length, 1);
    assert.match(fp8[0], /^Qwen\/Qwen3\.5-122B-A10B-FP8 is fp8, but vllm\/vllm-openai:v0\.17\.1: .* sm_120a only, which does not run on 12\.1.*vllm\/vllm-openai:v0\.17\.1-cu130.*\[quantization-kernel; sources: .*release-pipeline\.yaml/);
    assert.deepEqual(onStack("quantization-kernels-on-gb10", stack({}, at("vllm/vllm-openai:v0.17.1-cu130"))), [], "the CUDA 13.0 build carries sm_120f");
    assert.deepEqual(onStack("quantization-kernels-on-gb10", stack({ model: "openai/gpt-oss-120b" }, at("vllm/vllm-openai:v0.17.1"))), [], "mxfp4: not a CUTLASS SM120 kernel");
    assert.deepEqual(onStack("quantization-kernels-on-gb10", stack({ model: "acme/unknown-FP8" }, at("vllm/vllm-openai:v0.17.1"))), [], "not in the catalog");
    assert.deepEqual(onStack("quantization-kernels-on-gb10", stack({}, at("nvcr.io/nvidia/vllm:26.05-py3"))), [], "no published build arch list");
});

test("ssh-host-keys-pinned: an advisory naming every host whose commands accept any host key, and how to get the key", () => {
    assert.equal(policy("ssh-host-keys-pinned").enforcementLevel, "advisory");
    const on = (host: string, hostKey?: unknown) => command(`${host}-preflight`, "true", { connection: { host, ...(hostKey === undefined ? {} : { hostKey }) } });
    assert.deepEqual(onStack("ssh-host-keys-pinned", [on("spark-a.local", HOST_KEY), on("spark-b.local", HOST_KEY)]), []);
    const msgs = onStack("ssh-host-keys-pinned", [on("spark-a.local", HOST_KEY), on("spark-b.local"), on("spark-b.local"), on("spark-c.local", "")]);
    assert.equal(msgs.length, 1);
    assert.match(msgs[0], /^remote commands to spark-b\.local, spark-c\.local accept any SSH host key/);
    assert.match(msgs[0], /spark-vllm:hosts\[\]\.ssh\.hostKey .*\/etc\/ssh\/ssh_host_ed25519_key\.pub.*ssh-keyscan -t ed25519 HOST/);
    // The hosts sorted, whatever order the engine registered their commands in.
    assert.deepEqual(onStack("ssh-host-keys-pinned", [on("spark-c.local"), on("spark-b.local")]), onStack("ssh-host-keys-pinned", [on("spark-b.local"), on("spark-c.local")]));
    // Not known at preview (an output, or a secret the engine hides): no verdict.
    assert.deepEqual(onStack("ssh-host-keys-pinned", [command("x", "true", { connection: UNKNOWN })]), []);
});

test("vllm-serve-arguments-confined: the extraArgs rules on the planned vllm serve, as vLLM resolves its arguments (issue 41)", () => {
    const rule = "vllm-serve-arguments-confined";
    assert.deepEqual(onResources(rule, stack()), []);
    const hostile: Array<[string, RegExp]> = [
        ["--kv-events-config.enable_kv_cache_events=1", /KV-cache event publisher on/],
        ['--kv-events-config "{\\"enable_kv_cache_events\\": \\"yes\\", \\"endpoint\\": \\"tcp://127.0.0.1:5557\\"}"', /KV-cache event publisher on/],
        ['--compilation-config "{\\"backend\\": \\"evil.f\\"}"', /backend "evil.f" is refused/],
        ["--tool-parser-plugin /tmp/p.py", /it makes vLLM import and run code/],
        ["--middleware evil.Mw", /it makes vLLM import and run code/],
        ["--data-parallel-backend ray", /without a loopback --data-parallel-address/],
        ["--h11-max-header-count 0x100", /Python's int\(\)/],
    ];
    for (const [extra, why] of hostile) {
        const msgs = onResources(rule, [serve({ extra })]);
        assert.equal(msgs.length, 1, `${extra}: ${msgs.join("\n")}`);
        assert.match(msgs[0], why);
        assert.match(msgs[0], /Remediation: remove it from spark-vllm:vllm\.extraArgs/);
    }
    // The planner's own launch (with its key-guard --middleware) passes; extraArgs that bypassed parseSpec do not.
    const spec = parseSpec(rawConfig(2));
    const own = planCluster(spec).vllmLaunch;
    assert.deepEqual(onResources(rule, [command("endpoint-launch", own.create)]), []);
    spec.vllm.extraArgs = ["--worker-extension-cls", "evil.Ext", "--kv-events-config.enable_kv_cache_events=on"];
    assert.equal(onResources(rule, [command("endpoint-launch", planCluster(spec).vllmLaunch.create)]).length, 2);
});
