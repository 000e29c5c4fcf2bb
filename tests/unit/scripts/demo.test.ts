// `npm run demo`'s pure parts: the command line, the package check, the progress display, the curl lines.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { parseDemoArgs } from "../../../scripts/demo/options";
import { DEMO_PACKAGES, prerequisiteProblems } from "../../../scripts/demo/prereqs";
import { displayType, renderError, renderEvent } from "../../../scripts/demo/display";
import { chatCurl, noKeyCurl, exportLine, answerOf } from "../../../scripts/demo/talk";

const ROOT = path.join(__dirname, "..", "..", "..");

test("options: defaults, --keep, --fault, --hosts 4, --down; bad input names the problem", () => {
    assert.deepEqual(parseDemoArgs([]), { down: false, keep: false, hosts: 2 });
    assert.deepEqual(parseDemoArgs(["--keep", "--hosts", "4"]), { down: false, keep: true, hosts: 4 });
    assert.deepEqual(parseDemoArgs(["--fault", "crash"]), { down: false, keep: false, hosts: 2, fault: "crash" });
    assert.deepEqual(parseDemoArgs(["--fault", "oom"]), { error: '--fault needs one of old-image, crash, hang, worker-down, not "oom"' });
    assert.deepEqual(parseDemoArgs(["--hosts", "3"]), { error: '--hosts is 2 or 4, not "3"' });
    assert.deepEqual(parseDemoArgs(["--down", "--keep"]), { error: "--down takes no other option" });
    assert.match((parseDemoArgs(["--keep", "--fault", "hang"]) as { error: string }).error, /do not go together/);
});

test("the demo's packages for the simulated hosts are the ones .ci/run installs, plus curl", () => {
    const ci = fs.readFileSync(path.join(ROOT, ".ci", "run"), "utf8");
    const aptLine = /apt-get install[^\n]*\\\n([^\n]*)/.exec(ci)?.[1] ?? "";
    const ciPackages = new Set(aptLine.replace(/>.*$/, "").trim().split(/\s+/));
    for (const pkg of Object.keys(DEMO_PACKAGES)) assert.ok(ciPackages.has(pkg), `${pkg} is not in .ci/run's apt line: ${aptLine}`);
});

test("missing packages are named with the one command that installs them; root is asked for", () => {
    const have = new Set(["docker.io", "openssh-client", "iproute2", "iptables", "procps", "python3", "python3-pip", "curl"]);
    const problems = prerequisiteProblems(1000, pkg => have.has(pkg));
    assert.match(problems[0], /needs root.*sudo npm run demo/);
    assert.equal(problems[1], "missing packages: openssh-server, docker-registry, debootstrap");
    assert.equal(problems.at(-1), "  sudo apt-get install --no-install-recommends openssh-server docker-registry debootstrap");
    assert.deepEqual(prerequisiteProblems(0, () => true), []);
    assert.match(prerequisiteProblems(0, () => undefined)[0], /Debian or Ubuntu/);
});

test("progress: pulumi's step prefixes and simplified type names; command lines streamed; JSON results summarised", () => {
    assert.equal(displayType("random:index/randomPassword:RandomPassword"), "random:index:RandomPassword");
    assert.equal(displayType("command:remote:Command"), "command:remote:Command");
    assert.equal(displayType("docker:index/remoteImage:RemoteImage"), "docker:index:RemoteImage");
    assert.deepEqual(renderEvent({ kind: "start", op: "create", type: "command:remote:Command", name: "spark-ray-probe" }),
        [" +  command:remote:Command spark-ray-probe creating"]);
    assert.deepEqual(renderEvent({ kind: "start", op: "same", type: "command:remote:Command", name: "spark-ray-probe" }), []);
    assert.deepEqual(renderEvent({ kind: "line", name: "spark-endpoint-probe", line: "waiting for vLLM /health on spark-a:8000, 10 s; last progress: Loading weights took 3.01 seconds" }),
        ["      spark-endpoint-probe: waiting for vLLM /health on spark-a:8000, 10 s; last progress: Loading weights took 3.01 seconds"]);
    assert.deepEqual(renderEvent({ kind: "line", name: "spark-ray-probe", line: '{"nodes": 2}' }), []);
    assert.deepEqual(renderEvent({ kind: "end", op: "create", type: "command:remote:Command", name: "spark-ray-probe", ms: 2345, stdout: 'x\n{"nodes": 2, "gpus": 2.0, "seconds": 1.3}' }),
        [" +  command:remote:Command spark-ray-probe created (2.3s)", "      Ray formed: 2 nodes, 2 GPUs joined the head in 1.3s"]);
    const compat = { architectures: ["Qwen3_5MoeForConditionalGeneration"], backend: "ray", model: "Qwen/Qwen3.5-122B-A10B-FP8", modelType: "qwen3_5_moe", ray: "2.52.0", seconds: 1.2, vllmVersion: "0.17.1", torch: "2.9.0", cuda: "13.0", kernels: "sm_120" };
    assert.match(renderEvent({ kind: "end", op: "create", type: "command:remote:Command", name: "spark-compat", ms: 1200, stdout: JSON.stringify(compat) })[1],
        /compatible: vLLM 0\.17\.1 knows Qwen3_5MoeForConditionalGeneration \(qwen3_5_moe\) of Qwen\/Qwen3\.5-122B-A10B-FP8; PyTorch 2\.9\.0, CUDA 13\.0, kernels sm_120; Ray 2\.52\.0/);
    assert.deepEqual(renderEvent({ kind: "end", op: "delete", type: "docker:index/container:Container", name: "spark-spark-a-container", ms: 12_400 }),
        [" -  docker:index:Container spark-spark-a-container deleted (12s)"]);
    assert.deepEqual(renderEvent({ kind: "end", op: "create", type: "command:remote:Command", name: "spark-compat", ms: 900, error: "boom" }),
        [" +  command:remote:Command spark-compat creating failed (0.9s)"]);
});

test("an error is shown under Diagnostics with its resource, the generated command text cut short, every output line kept", () => {
    const command = "x".repeat(400);
    const lines = renderError(`command:remote:Command spark-compat: Process exited with status 1: running ${JSON.stringify(command)}:\nspark-vllm: Model architectures ['Qwen3_5MoeForConditionalGeneration'] are not supported\nhint: h`);
    assert.equal(lines[0], "Diagnostics:");
    assert.equal(lines[1], "  command:remote:Command (spark-compat):");
    assert.equal(lines[2], `    error: Process exited with status 1: running "${"x".repeat(160)}…":`);
    assert.deepEqual(lines.slice(3), ["    spark-vllm: Model architectures ['Qwen3_5MoeForConditionalGeneration'] are not supported", "    hint: h"]);
});

test("curl lines: the key and endpoint come from the exported variables; the body is shell-quoted JSON", () => {
    assert.equal(exportLine("http://198.18.0.2:8000/v1", "k'ey"), `export SPARK_VLLM_ENDPOINT=http://198.18.0.2:8000/v1 SPARK_VLLM_API_KEY='k'"'"'ey'`);
    const chat = chatCurl("qwen3.5-122b");
    assert.ok(chat.startsWith(`curl -sS "$SPARK_VLLM_ENDPOINT/chat/completions" -H "Authorization: Bearer $SPARK_VLLM_API_KEY"`), chat);
    const body = /-d '(.*)'$/.exec(chat)?.[1];
    assert.equal(JSON.parse(body!).model, "qwen3.5-122b");
    assert.ok(!noKeyCurl().includes("Authorization"));
    assert.deepEqual(answerOf('{"choices":[{"message":{"role":"assistant","content":"hi"}}]}'), { answer: "hi" });
    assert.match(answerOf('{"error":"Unauthorized"}').problem!, /no choices/);
});
