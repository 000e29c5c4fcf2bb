// The backend when `spark-vllm:vllm.backend` is not set follows what the image is known to carry
// (components/knowledge/images.ts defaultBackend), and no committed stack on a Ray image deploys anything different:
// before this default existed every stack of two or more hosts without vllm.backend ran Ray
// (components/spec/parseSpec.ts: `chosen === "mp" ? "mp" : "ray"`), so each such stack must plan exactly as it does
// with `vllm.backend: ray` written out; `spark-vllm diff` between the two shows no change for any resource.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { diffPlans, setPath } from "../../../bin/diff-command";
import { readStackFile, stackOwner } from "../../../bin/shared";
import { lookupImage } from "../../../components/knowledge/images";

const ROOT = path.join(__dirname, "..", "..", "..");
const STACKS = fs.readdirSync(ROOT).flatMap(f => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1] ?? []).sort();
const planOf = (raw: Record<string, unknown>, stack: string) => planCluster(parseSpec(raw), undefined, { owner: stackOwner(ROOT, stack) });

for (const stack of STACKS) {
    const raw = readStackFile(ROOT, stack) as Record<string, any>;
    const hosts = (raw.hosts as unknown[]).length;
    const set = raw.vllm?.backend as string | undefined;
    const row = lookupImage(raw.image);
    if (hosts < 2 || set !== undefined) continue;
    if (row?.ray?.present === false) {
        test(`Pulumi.${stack}.yaml: no backend set, ${row.reference} ships no Ray: vLLM's own multi-node launch`, () => {
            const plan = planOf(raw, stack);
            assert.equal(plan.backend, "mp");
            assert.match(plan.vllmLaunch.create, /--nnodes 2/);
            assert.ok(diffPlans(planOf(setPath(raw, "vllm.backend", "mp"), stack), plan).every(c => c.op === "same"));
        });
        continue;
    }
    test(`Pulumi.${stack}.yaml: no backend set, ${raw.image.split("@")[0]}: plans exactly as with vllm.backend ray (no change)`, () => {
        const before = planOf(setPath(raw, "vllm.backend", "ray"), stack);
        const now = planOf(raw, stack);
        assert.equal(now.backend, "ray");
        const changed = diffPlans(before, now).filter(c => c.op !== "same");
        assert.deepEqual(changed, []);
    });
}

test("the committed stacks cover both defaults: a Ray image left on ray, a Ray-less image on mp", () => {
    const defaults = STACKS.map(s => readStackFile(ROOT, s) as Record<string, any>)
        .filter(r => (r.hosts as unknown[]).length > 1 && r.vllm?.backend === undefined)
        .map(r => parseSpec(r).vllm.backend);
    assert.ok(defaults.includes("ray") && defaults.includes("mp"), defaults.join(", "));
});

test("an image the table does not know, with no backend set, keeps ray (the compatibility check names mp if it has none)", () => {
    const raw = readStackFile(ROOT, "spark") as Record<string, any>;
    const own = setPath(raw, "image", "example.org/own/vllm:custom@sha256:" + "ab".repeat(32));
    assert.equal(parseSpec(own).vllm.backend, "ray");
    // A set backend always wins over the image.
    const noRay = setPath(raw, "image", "vllm/vllm-openai:v0.33.0@sha256:" + "ab".repeat(32));
    assert.equal(parseSpec(noRay).vllm.backend, "mp");
    assert.equal(parseSpec(setPath(noRay, "vllm.backend", "ray")).vllm.backend, "ray");
});
