import * as crypto from "node:crypto";
// The real program (index.ts) under pulumi.runtime.setMocks.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { evaluateWithMocks, RecordedResource, stackConfig } from "../harness/mocks";
import { clusterConfig } from "../fixtures";
import { resourceNames } from "../../components/plan/naming";

const n = resourceNames();

const API_KEY = "GENERATED-API-KEY-0123456789abcdefghijklmn"; // what the recording mocks' RandomPassword returns
const byType = (rs: RecordedResource[], type: string) => rs.filter(r => r.type === type);
/** The vLLM hosts' containers and image pulls: not the endpoint proxy's (its own tests are below). */
const vllmOnly = (rs: RecordedResource[]) => rs.filter(r => r.name !== n.of("proxy") && r.name !== n.of("proxy-pull"));
const named = (rs: RecordedResource[], name: string) => {
    const r = rs.find(x => x.name === name);
    assert.ok(r, `no resource named ${name}; have ${rs.map(x => x.name).join(", ")}`);
    return r;
};

for (const [hosts, tp, pp] of [[1, 1, 1], [2, 2, 1], [4, 4, 1], [4, 2, 2]] as const) {
    test(`${hosts} host(s), TP=${tp} PP=${pp}: the full resource set`, () => {
        const { resources, error } = evaluateWithMocks(clusterConfig(hosts, { tp, pp }));
        assert.equal(error, undefined);
        const count = (type: string) => byType(resources, type).length;
        assert.equal(count("spark-vllm:index:SparkCluster"), 1);
        assert.equal(count("spark-vllm:index:SparkHost"), hosts);
        assert.equal(count("spark-vllm:index:ClusterImage"), 1);
        assert.equal(count("spark-vllm:index:VllmContainer"), hosts);
        assert.equal(count("spark-vllm:index:ModelWeights"), 1);
        assert.equal(count("spark-vllm:index:RayCluster"), hosts > 1 ? 1 : 0, "one host runs without Ray");
        assert.equal(count("spark-vllm:index:ModelEndpoint"), 1);
        assert.equal(count("pulumi:providers:docker"), hosts);
        // One per host, and the endpoint proxy's on the head.
        assert.equal(count("docker:index/remoteImage:RemoteImage"), hosts + 1);
        assert.equal(count("docker:index/container:Container"), hosts + 1);
        assert.equal(count("spark-vllm:index:EndpointProxy"), 1);
        // the API key; with Ray, the cluster's Ray token too
        assert.equal(count("random:index/randomPassword:RandomPassword"), hosts > 1 ? 2 : 1);
        // per host: tools + preflight + image proof + weights + memory gate + memory after the load; compat, vllm launch, endpoint probe, serving
        // proof, the proxy's configuration; two or more hosts: a fabric rank per host, and Ray's head launch, probe and one launch per worker
        assert.equal(count("command:remote:Command"), 6 * hosts + 5 + (hosts > 1 ? hosts + 2 + (hosts - 1) : 0));
        assert.equal(count("spark-vllm:index:FabricCheck"), hosts > 1 ? 1 : 0);
        const serve = named(resources, n.of("vllm-launch")).inputs.create as string;
        assert.match(serve, new RegExp(`--tensor-parallel-size ${tp} --pipeline-parallel-size ${pp} `));
        // Components parent their children: a child's URN type chain names the component.
        for (const r of byType(resources, "docker:index/container:Container")) assert.ok(r.provider?.includes("pulumi:providers:docker"), "container uses its host's provider");
    });
}

test("each container's environment carries its own fabric address and interface", () => {
    const { resources } = evaluateWithMocks(clusterConfig(4));
    const containers = vllmOnly(byType(resources, "docker:index/container:Container"));
    containers.forEach(c => {
        const i = "abcd".indexOf(c.name.replace("spark-spark-", "").replace("-container", ""));
        assert.ok(i >= 0);
        assert.ok(c.inputs.envs.includes(`VLLM_HOST_IP=198.18.1.${i + 2}`), `${c.name}: ${c.inputs.envs}`);
        assert.ok(c.inputs.envs.includes("NCCL_SOCKET_IFNAME=enp1s0f1np1"));
        assert.equal(c.inputs.networkMode, "host");
        assert.equal(c.inputs.ipcMode, "host");
        assert.equal(c.inputs.gpus, "all");
        assert.deepEqual(c.inputs.devices, [{ hostPath: "/dev/infiniband", containerPath: "/dev/infiniband" }]);
        assert.ok(c.inputs.mounts.some((m: any) => m.source === "/root/.cache/huggingface" && m.target === "/root/.cache/huggingface"));
        assert.ok(c.provider?.includes(`spark-spark-${"abcd"[i]}-docker`), "the container uses its own host's Docker provider");
    });
});

test("worker launches point at the head's fabric address", () => {
    const { resources } = evaluateWithMocks(clusterConfig(3));
    for (const w of [n.host("spark-b", "ray"), n.host("spark-c", "ray")]) {
        const r = named(resources, w);
        assert.match(r.inputs.create, /ray start --address=198\.18\.1\.2:6379 /);
        assert.equal(r.inputs.connection.host, w.includes("-b-") ? "198.18.0.3" : "198.18.0.4");
    }
    assert.match(named(resources, n.of("ray-head")).inputs.create, /ray start --head --port=6379 --node-ip-address=198\.18\.1\.2 /);
});

test("the generated API key appears in no command text or container field, only in stdin", () => {
    const { resources, outputs } = evaluateWithMocks(clusterConfig(2));
    assert.equal(outputs?.apiKey, API_KEY);
    for (const r of resources) {
        const { stdin, ...rest } = r.inputs;
        assert.ok(!JSON.stringify(rest).includes(API_KEY), `${r.name} leaks the API key outside stdin`);
    }
    assert.equal(named(resources, n.of("vllm-launch")).inputs.stdin, `${API_KEY}\n`);
    assert.equal(named(resources, n.of("endpoint-probe")).inputs.stdin, `${API_KEY}\n`);
    assert.equal(named(resources, n.of("serving-proof")).inputs.stdin, `${API_KEY}\n`, "the serving proof's key only on stdin too");
});

test("the generated Ray token travels only on the Ray launches' stdin; the containers say where it is, not what", () => {
    const RAY_TOKEN = "GENERATED-RAY-TOKEN-0123456789abcdefghijk"; // the recording mocks' RandomPassword for *-ray-token
    const { resources } = evaluateWithMocks(clusterConfig(3));
    assert.deepEqual(named(resources, n.of("ray-token")).inputs, { length: 40, special: false });
    const launches = [n.of("ray-head"), n.host("spark-b", "ray"), n.host("spark-c", "ray")];
    for (const r of resources) {
        const { stdin, ...rest } = r.inputs;
        assert.ok(!JSON.stringify(rest).includes(RAY_TOKEN), `${r.name} leaks the Ray token outside stdin`);
        if (launches.includes(r.name)) assert.equal(stdin, `${RAY_TOKEN}\n`, r.name);
        else assert.ok(!String(stdin ?? "").includes(RAY_TOKEN), `${r.name} gets the Ray token`);
    }
    // The vLLM containers (the endpoint proxy's runs no Ray).
    for (const c of byType(resources, "docker:index/container:Container").filter(c => c.name.endsWith("-container"))) {
        assert.ok(c.inputs.envs.includes("RAY_AUTH_MODE=token"), c.name);
        assert.ok(c.inputs.envs.includes("RAY_AUTH_TOKEN_PATH=/var/lib/spark-vllm/ray/auth_token"), c.name);
        assert.ok(!c.inputs.envs.some((e: string) => e.startsWith("RAY_AUTH_TOKEN=")), c.name);
    }
    // A new token restarts Ray everywhere: every Ray launch follows it (its digest, never the token, in the triggers):
    // an HMAC salted with the project, stack and name (components/wiring.ts secretDigest), not the bare sha256 (issue 50).
    const salted = crypto.createHmac("sha256", `spark-vllm trigger digest\0spark-vllm\0test\0${n.of("ray-token")}`).update(RAY_TOKEN).digest("hex").slice(0, 16);
    const bare = crypto.createHash("sha256").update(RAY_TOKEN).digest("hex").slice(0, 16);
    for (const name of launches) {
        const triggers = JSON.stringify(named(resources, name).inputs.triggers);
        assert.ok(triggers.includes(salted) && !triggers.includes(bare), name);
    }
});

test("without Ray (mp backend, one host) there is no Ray token and no token mode", () => {
    const mp = clusterConfig(2);
    mp["spark-vllm:vllm"] = { ...(mp["spark-vllm:vllm"] as object), backend: "mp" };
    for (const config of [clusterConfig(1), mp]) {
        const { resources, error } = evaluateWithMocks(config);
        assert.equal(error, undefined);
        assert.equal(resources.filter(r => r.name === n.of("ray-token")).length, 0);
        for (const c of byType(resources, "docker:index/container:Container"))
            assert.ok(!(c.inputs.envs ?? []).some((e: string) => e.startsWith("RAY_AUTH")), c.name);
    }
});

test("every launch has a delete that stops what it started", () => {
    const { resources } = evaluateWithMocks(clusterConfig(3));
    const launches = [n.of("ray-head"), n.host("spark-b", "ray"), n.host("spark-c", "ray"), n.of("vllm-launch")].map(name => named(resources, name));
    for (const l of launches) {
        assert.ok(l.inputs.delete, `${l.name} has no delete`);
        assert.match(l.inputs.delete, l.name === n.of("vllm-launch") ? /kill -TERM/ : /ray stop --force/);
    }
});

test("triggers: a vLLM flag changes the vLLM launch and the memory gates before it; the image changes containers and everything on them", () => {
    const base = clusterConfig(2);
    const flag = { ...base, "spark-vllm:vllm": { ...(base["spark-vllm:vllm"] as object), extraArgs: ["--enable-prefix-caching"] } };
    const image = { ...base, "spark-vllm:image": "198.18.0.1:5000/vllm-sim:0.17.2@sha256:" + "cd".repeat(32) };
    const a = evaluateWithMocks(base).resources;
    const changed = (other: RecordedResource[]) =>
        other.filter(r => JSON.stringify(r.inputs) !== JSON.stringify(a.find(x => x.name === r.name)?.inputs)).map(r => r.name).sort();
    // The gates carry the launch text's digest in their triggers: every new launch is preceded by a fresh memory check.
    assert.deepEqual(changed(evaluateWithMocks(flag).resources), [n.host("spark-a", "memory"), n.host("spark-b", "memory"), n.of("vllm-launch")]);
    assert.deepEqual(changed(evaluateWithMocks(image).resources),
        // The memory gates' flush can fall back to a throw-away container of the image: it names the image.
        // The image proof on each host runs the new image in a throw-away container: it names the image too.
        ["spark-spark-a-container", "spark-spark-a-image", "spark-spark-a-image-check", "spark-spark-a-memory",
            "spark-spark-b-container", "spark-spark-b-image", "spark-spark-b-image-check", "spark-spark-b-memory"]);
    // Under mocks ids do not change; what carries a replacement downstream is the trigger on the container id:
    for (const name of [n.of("ray-head"), n.of("compat")])
        assert.ok(named(a, name).inputs.triggers.includes("spark-spark-a-container-id"), `${name} is triggered by the head container`);
    assert.ok(named(a, n.host("spark-b", "ray")).inputs.triggers.includes("spark-spark-b-container-id"));
    assert.ok(named(a, n.host("spark-b", "ray")).inputs.triggers.includes(`${n.of("ray-head")}-id`));
    assert.ok(named(a, n.of("vllm-launch")).inputs.triggers.includes(`${n.of("ray-probe")}-id`));
    assert.ok(named(a, n.of("endpoint-probe")).inputs.triggers.includes(`${n.of("vllm-launch")}-id`));
});

test("a no-change re-evaluation yields identical inputs", () => {
    const config = clusterConfig(4, { tp: 2, pp: 2 });
    const first = evaluateWithMocks(config);
    const second = evaluateWithMocks(config);
    assert.deepEqual(second.resources, first.resources);
    assert.deepEqual(second.outputs, first.outputs);
});

test("config errors name their key paths and no resource is created", () => {
    const bad = clusterConfig(2);
    (bad["spark-vllm:hosts"] as any[])[1].fabric.address = "not-an-ip";
    bad["spark-vllm:vllm"] = { tensorParallelSize: 3 };
    const { error, resources } = evaluateWithMocks(bad);
    assert.match(error ?? "", /spark-vllm:hosts\[1\]\.fabric\.address: not an IPv4 address: "not-an-ip"/);
    assert.match(error ?? "", /spark-vllm:vllm\.tensorParallelSize: TP × PP = 3 × 1 = 3, but the hosts have 2 GPUs/);
    assert.deepEqual(resources.filter(r => r.type !== "pulumi:pulumi:Stack"), []);
});

test("preview: the Docker providers skip the daemon check, and every command text is known", () => {
    const { resources, error } = evaluateWithMocks(clusterConfig(2), { preview: true });
    assert.equal(error, undefined);
    for (const p of byType(resources, "pulumi:providers:docker")) {
        assert.equal(p.inputs.disableDockerDaemonCheck, "true");
        assert.match(p.inputs.host, /^ssh:\/\/root@198\.18\.0\.\d:22$/);
    }
    for (const c of byType(resources, "command:remote:Command")) assert.equal(typeof c.inputs.create, "string", `${c.name} create is known at preview`);
    const up = evaluateWithMocks(clusterConfig(2));
    // The same in update: a value that flipped between preview and update would show in every preview.
    for (const p of byType(up.resources, "pulumi:providers:docker")) assert.equal(p.inputs.disableDockerDaemonCheck, "true");
});

test("the committed spark stack evaluates: two Sparks, TP=2, the ConnectX-7 fabric", () => {
    const { resources, outputs, error } = evaluateWithMocks(stackConfig("spark"), { preview: true });
    assert.equal(error, undefined);
    assert.equal(vllmOnly(byType(resources, "docker:index/container:Container")).length, 2);
    assert.match(named(resources, n.of("vllm-launch")).inputs.create, /vllm serve Qwen\/Qwen3\.5-122B-A10B-FP8 .*--tensor-parallel-size 2 /);
    assert.ok(named(resources, "spark-spark-b-container").inputs.envs.includes("NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1"));
    assert.ok(outputs);
});

test("hosts that pulled different images stop every container, naming each host's digest", () => {
    const other = "198.18.0.1:5000/vllm-sim@sha256:" + "ef".repeat(32);
    const { error, resources } = evaluateWithMocks(clusterConfig(2), { digestOverrides: { "spark-spark-b-image": other } });
    assert.match(error ?? "", /the hosts pulled different images for 198\.18\.0\.1:5000\/vllm-sim:0\.17\.1@sha256:abab/);
    assert.match(error ?? "", new RegExp(`spark-b: ${other.replace(/[.]/g, "\\.")}`));
    assert.match(error ?? "", /pin spark-vllm:image by digest/);
    assert.deepEqual(vllmOnly(byType(resources, "docker:index/container:Container")), []);
    assert.ok(!resources.some(r => r.inputs.create?.includes("ray start") || r.inputs.create?.includes("vllm serve")), "nothing launches");
});

test("a host missing weight files stops the launch, naming the host and the files", () => {
    const { error, resources } = evaluateWithMocks(clusterConfig(3), {
        manifestOverrides: { "spark-spark-c-weights": { "config.json": 100 } },
    });
    assert.match(error ?? "", /the hosts do not hold the same weights of Qwen\/Qwen3\.5-122B-A10B-FP8/);
    assert.match(error ?? "", /spark-spark-c: missing model-00001-of-00001\.safetensors/);
    assert.ok(!resources.some(r => r.name === n.of("compat") || r.inputs.create?.includes("ray start")), "nothing after the check runs");
});

test("the HF token travels only on the weights commands' stdin when downloading", () => {
    const config: Record<string, any> = { ...clusterConfig(2), "spark-vllm:hfToken": "hf_SECRETTOKEN123" };
    (config["spark-vllm:model"] as any).weights = "download";
    const { resources, error } = evaluateWithMocks(config);
    assert.equal(error, undefined);
    for (const r of resources) {
        const { stdin, ...rest } = r.inputs;
        assert.ok(!JSON.stringify(rest).includes("hf_SECRETTOKEN123"), `${r.name} leaks the token`);
        if (r.type === "command:remote:Command" && r.name.endsWith("-weights")) assert.equal(stdin, "hf_SECRETTOKEN123\n", r.name);
    }
});

test("imageSource head: the head copies its image to each worker over the fabric; no registry pull anywhere", () => {
    const config = { ...clusterConfig(3), "spark-vllm:imageSource": "head" };
    const { resources, error } = evaluateWithMocks(config);
    assert.equal(error, undefined);
    // The vLLM image is copied; only the endpoint proxy's (nginx) is pulled on the head, or found there if loaded beforehand.
    assert.deepEqual(byType(resources, "docker:index/remoteImage:RemoteImage").map(r => r.name), [n.of("proxy-pull")]);
    const head = named(resources, "spark-spark-a-image");
    assert.match(head.inputs.create, /^timeout 60 docker image inspect --format/);
    for (const w of ["b", "c"]) {
        const copy = named(resources, `spark-spark-${w}-image`);
        assert.equal(copy.inputs.connection.host, "198.18.0.2", "the copy runs on the head");
        assert.match(copy.inputs.create, new RegExp(`image-transfer .*"target":\\{"name":"spark-${w}","user":"root","address":"198\\.18\\.1\\.${"abc".indexOf(w) + 2}"\\}`));
        assert.equal(named(resources, `spark-spark-${w}-container`).inputs.image, clusterConfig(1)["spark-vllm:image"]);
    }
});
