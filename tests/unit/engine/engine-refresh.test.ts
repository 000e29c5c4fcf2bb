// `up --refresh`'s rules (tests/engine/refresh.ts) and the container update they lead to (tests/engine/state.ts diff),
// each as its provider's source has it (tests/engine/README.md).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readContainer, readImage, readKind, refreshOp, repoDigestOf } from "../../engine/refresh";
import { CONTAINER_IN_PLACE, Entry, diff } from "../../engine/state";

const CONTAINER = "docker:index/container:Container", IMAGE = "docker:index/remoteImage:RemoteImage", CMD = "command:remote:Command";

const entry = (type: string, inputs: Record<string, any>, outputs: Record<string, any> = { ...inputs }, id = "c0ffee"): Entry =>
    ({ urn: `urn:pulumi:s::p::${type}::x`, type, name: "x", dependencies: [], id, inputs, outputs, seq: 0 });

describe("what each provider's Read makes of an entry", () => {
    it("reads containers and images from the host; commands, passwords and providers are not read", () => {
        assert.equal(readKind(entry(CONTAINER, {})), "container");
        assert.equal(readKind(entry(IMAGE, {})), "image");
        for (const t of [CMD, "random:index/randomPassword:RandomPassword", "pulumi:providers:docker"]) assert.equal(readKind(entry(t, {})), undefined, t);
    });

    it("a container that is gone leaves the state", () => {
        const c = entry(CONTAINER, { name: "spark-vllm-a", mustRun: true });
        assert.equal(readContainer(c, undefined), undefined);
        assert.equal(refreshOp(c, undefined), "delete");
    });

    it("a stopped container that must run is read back with mustRun false (its id kept), and the program's mustRun: true is then an update", () => {
        const c = entry(CONTAINER, { name: "spark-vllm-a", image: "r@sha256:1", mustRun: true });
        const read = readContainer(c, { id: "c0ffee", running: false, exitCode: 137, capAdd: [] })!;
        assert.equal(read.id, "c0ffee");
        assert.equal(read.inputs.mustRun, false);
        assert.equal(read.outputs.mustRun, false);
        assert.equal(read.outputs.exitCode, 137);
        assert.equal(refreshOp(c, read), "update");
        assert.equal(diff(CONTAINER, read, c.inputs), "update", "started in place, not replaced");
    });

    it("a running container, or a stopped one that need not run, reads as it is", () => {
        const c = entry(CONTAINER, { name: "a", mustRun: true });
        assert.equal(readContainer(c, { id: "c0ffee", running: true, exitCode: 0, capAdd: [] }), c);
        const idle = entry(CONTAINER, { name: "a", mustRun: false });
        assert.equal(readContainer(idle, { id: "c0ffee", running: false, exitCode: 0, capAdd: [] }), idle);
        assert.equal(refreshOp(c, c), "same");
    });

    it("capabilities read back as dockerd stores them: an input IPC_LOCK refreshes to CAP_IPC_LOCK and the next up replaces the container; the program's CAP_IPC_LOCK reads back the same", () => {
        const legacy = entry(CONTAINER, { name: "a", mustRun: true, capabilities: { adds: ["IPC_LOCK"] } });
        const read = readContainer(legacy, { id: "c0ffee", running: true, exitCode: 0, capAdd: ["CAP_IPC_LOCK"] })!;
        assert.deepEqual(read.inputs.capabilities, { adds: ["CAP_IPC_LOCK"] });
        assert.equal(refreshOp(legacy, read), "update");
        assert.equal(diff(CONTAINER, read, legacy.inputs), "replace");
        const current = entry(CONTAINER, { name: "a", mustRun: true, capabilities: { adds: ["CAP_IPC_LOCK"] } });
        const again = readContainer(current, { id: "c0ffee", running: true, exitCode: 0, capAdd: ["CAP_IPC_LOCK"] })!;
        assert.equal(refreshOp(current, again), "same");
        assert.equal(diff(CONTAINER, again, current.inputs), "same");
    });

    it("an image not on the host leaves the state; one there is read with its id and repo digest, which alone is no change", () => {
        const img = entry(IMAGE, { name: "198.18.0.1:5000/vllm:t@sha256:aa", keepLocally: true }, { name: "198.18.0.1:5000/vllm:t@sha256:aa", imageId: "sha256:old", repoDigest: "x" }, "sha256:old198.18.0.1:5000/vllm:t@sha256:aa");
        assert.equal(readImage(img, undefined), undefined);
        const read = readImage(img, { id: "sha256:new", repoDigests: ["198.18.0.1:5000/vllm@sha256:aa"] })!;
        assert.equal(read.id, "sha256:new198.18.0.1:5000/vllm:t@sha256:aa");
        assert.equal(read.outputs.imageId, "sha256:new");
        assert.equal(read.outputs.repoDigest, "198.18.0.1:5000/vllm@sha256:aa");
        assert.equal(refreshOp(img, read), "same");
    });

    it("repo digest as determineRepoDigest picks it: none, one, the one matching the name cut at its first colon, else the first", () => {
        assert.equal(repoDigestOf("nginx:1", []), "");
        assert.equal(repoDigestOf("nginx:1", ["other@sha256:1"]), "other@sha256:1");
        assert.equal(repoDigestOf("nginx:1", ["a/nginx@sha256:1", "nginx@sha256:2"]), "nginx@sha256:2");
        assert.equal(repoDigestOf("zzz:1", ["a@sha256:1", "b@sha256:2"]), "a@sha256:1");
        // The first colon, even a registry's port: every digest of that registry matches, so the first wins.
        assert.equal(repoDigestOf("198.18.0.1:5000/b:t", ["198.18.0.1:5000/a@sha256:1", "198.18.0.1:5000/b@sha256:2"]), "198.18.0.1:5000/a@sha256:1");
    });
});

describe("a container's update versus replace", () => {
    it("only inputs without ForceNew update in place; anything else replaces", () => {
        const old = entry(CONTAINER, { name: "a", image: "i", restart: "unless-stopped", mustRun: true, destroyGraceSeconds: 30, init: true });
        assert.equal(diff(CONTAINER, old, { ...old.inputs, restart: "always" }), "update");
        assert.equal(diff(CONTAINER, old, { ...old.inputs, destroyGraceSeconds: 10, mustRun: false }), "update");
        assert.equal(diff(CONTAINER, old, { ...old.inputs, image: "j" }), "replace");
        assert.equal(diff(CONTAINER, old, { ...old.inputs, shmSize: 1024 }), "replace", "an input that was absent");
        assert.equal(diff(CONTAINER, old, { ...old.inputs, mustRun: false, envs: ["A=1"] }), "replace");
        for (const k of ["image", "envs", "mounts", "devices", "command", "entrypoints", "shmSize", "networkMode", "ipcMode", "gpus", "ulimits", "name"])
            assert.ok(!CONTAINER_IN_PLACE.has(k), `${k} forces a new container`);
    });
});
