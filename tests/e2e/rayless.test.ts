// End to end (needs root: network namespaces, dockerd, sshd): a stack on a current Ray-less image with no
// `vllm.backend` plans and deploys with vLLM's own multi-node launch (components/knowledge/images.ts defaultBackend: mp for an
// image the known-images table says ships no Ray).
//
// The table recognises an image by its reference (repo:tag, digest aside), so the stack must name the image as users
// do, `vllm/vllm-openai:v0.18.0@sha256:…`. Nothing outside 198.18.0.0/15 is reachable here, so the test bed gives the
// hosts' dockerd the sim registry as its Docker Hub mirror (startSim `hubMirror`, as a pull-through mirror is set up)
// and pushes there, under that name, the sim's Ray-less vLLM (no ray package, no ray CLI: tests/sim/image.ts) as a
// 0.18.0 release. The digest is the sim image's own, not Docker Hub's: the table does not key on digests.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { completionStatus, simSuite } from "./suite";
import { destroy, up } from "../engine/engine";
import { leftovers } from "../sim/stacks";
import { DEFAULT_RELEASES } from "../sim/image";
import { parseSpec } from "../../components/spec/parseSpec";
import { planCluster } from "../../components/plan/plan";
import { lookupImage } from "../../components/knowledge/images";
import { containerName } from "../../components/plan/naming";

const HUB = "vllm/vllm-openai:v0.18.0";
const suite = simSuite("rayless", {}, {
    hubMirror: true,
    releases: { "0.18.0": { ...DEFAULT_RELEASES["no-ray"], version: "0.18.0", hubReference: HUB } },
});

test("no backend set, Ray-less vllm/vllm-openai:v0.18.0: the plan is mp, up serves with vLLM's multi-node launch, destroy cleans", async () => {
    const s = suite.sim;
    assert.equal(lookupImage(HUB)?.ray?.present, false, "the table knows v0.18.0 ships no Ray");
    const image = `${HUB}@${s.images[HUB].split("@")[1]}`;
    const stack = suite.stack("rayless", { image });
    assert.equal((stack.config["spark-vllm:vllm"] as Record<string, unknown>).backend, undefined, "no backend in the config");

    const raw = Object.fromEntries(Object.entries(stack.config).map(([k, v]) => [k.replace(/^spark-vllm:/, ""), v]));
    const plan = planCluster(parseSpec(raw));
    assert.equal(plan.backend, "mp");
    assert.match(plan.vllmLaunch.create, /--nnodes 2/);

    try {
        const r = await up(stack);
        assert.equal(r.error, undefined, r.error);
        assert.equal(await completionStatus(r), 200, "a completion with the API key answers");
        // The image really has no Ray, and nothing ran one: vLLM's own launch on both hosts.
        for (const h of s.hosts) {
            const ray = await s.exec(h.name, `docker exec ${containerName(h.name)} sh -c 'command -v ray || python3 -c "import ray"'`);
            assert.notEqual(ray.code, 0, `${h.name}: ray is in the image`);
            const ps = await s.exec(h.name, `docker exec ${containerName(h.name)} ps -eo args`);
            assert.match(ps.stdout, /vllm serve .*--nnodes 2/, `${h.name}: ${ps.stdout}`);
            assert.doesNotMatch(ps.stdout, /raylet|gcs_server/);
        }
    } finally {
        const d = await destroy(stack);
        assert.deepEqual(d.errors, []);
    }
    assert.deepEqual(await leftovers(s), []);
});
