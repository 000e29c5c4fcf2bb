// A new spark-vllm:hfToken, as far as it goes without the Hugging Face Hub (the sim has no hub stand-in): the weights
// command's real generated shell (docker exec -i … weights) runs the real helper program, which reads the token from
// stdin's first line and hands it to huggingface_hub.snapshot_download (here a stand-in that records it) only when
// the weights are missing. So a rotation re-runs the command (an update runs create again) and downloads nothing when
// the weights are present; the new token is the one the next download uses.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { TOOLS_FILE, toolsProgram } from "../../../components/plan/toolsProgram";
import { containerShell } from "../../harness/container-shell";
import { rawConfig } from "../../fixtures";

// huggingface_hub's signature (src/huggingface_hub/_snapshot_download.py): snapshot_download(repo_id, *, cache_dir, token, …);
// the stand-in records the token and lays out the cache as a download does (refs/main, snapshots/<commit>/config.json).
const HUB = `import json, os
def snapshot_download(repo_id, cache_dir=None, token=None, **kw):
    with open(os.environ["HUB_CALLS"], "a") as f:
        f.write(json.dumps({"repo_id": repo_id, "token": token}) + "\\n")
    repo = os.path.join(cache_dir, "models--" + repo_id.replace("/", "--"))
    snap = os.path.join(repo, "snapshots", "a" * 40)
    os.makedirs(snap, exist_ok=True)
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    open(os.path.join(repo, "refs", "main"), "w").write("a" * 40)
    open(os.path.join(snap, "config.json"), "w").write("{}")
    return snap
`;

test("hfToken: the weights command reads the token from stdin and downloads with it only when the weights are missing", () => {
    const shell = containerShell();
    try {
        const cacheDir = path.join(shell.root, "hf");
        const raw = rawConfig(2);
        // A model outside the catalog: no expected size, so no free-disk check against this machine's disk.
        raw.model = { id: "org/gated-model", cacheDir: "/home/nvidia/.cache/huggingface", weights: "download" };
        fs.mkdirSync(cacheDir);
        // The sandbox is under the system's temporary directory, which parseSpec refuses for cacheDir (issue 41): the
        // spec is parsed with a regular path, then pointed at the sandbox.
        const spec = parseSpec(raw);
        spec.model.cacheDir = cacheDir;
        const plan = planCluster(spec, undefined, { hfToken: true });
        const weights = plan.hosts[0].weights;
        assert.equal(weights.stdin, "hfToken");
        assert.match(weights.create, /docker exec -i /, "stdin reaches the helper program");
        fs.mkdirSync(shell.inside("/var/tmp/spark-vllm"), { recursive: true });
        fs.writeFileSync(path.join(shell.inside("/var/tmp/spark-vllm"), TOOLS_FILE), toolsProgram());
        const hubDir = path.join(shell.root, "py", "huggingface_hub");
        fs.mkdirSync(hubDir, { recursive: true });
        fs.writeFileSync(path.join(hubDir, "__init__.py"), HUB);
        const calls = path.join(shell.root, "hub-calls");
        const run = (token: string) => {
            const r = shell.run(weights.create, { stdin: `${token}\n`, realPython: true, env: { PYTHONPATH: path.join(shell.root, "py"), HUB_CALLS: calls } });
            assert.equal(r.status, 0, r.stderr + r.stdout);
            assert.ok(!r.stdout.includes(token) && !r.stderr.includes(token), "the token is never printed");
            return fs.existsSync(calls) ? fs.readFileSync(calls, "utf8").trim().split("\n").map(l => JSON.parse(l)) : [];
        };
        assert.deepEqual(run("hf_AAAA"), [{ repo_id: raw.model.id, token: "hf_AAAA" }], "missing weights: downloaded with the token");
        assert.equal(run("hf_BBBB").length, 1, "a rotation with the weights present downloads nothing");
        fs.rmSync(path.join(cacheDir, "hub"), { recursive: true });
        assert.deepEqual(run("hf_BBBB")[1], { repo_id: raw.model.id, token: "hf_BBBB" }, "the next download uses the new token");
    } finally {
        shell.remove();
    }
});
