// The GitHub workflows: CI installs and tests; the preview runs `pulumi preview` through pulumi/actions for
// exactly the committed stacks, with the policy pack, commenting on the pull request. And the
// troubleshooting table (docs/troubleshooting.md) covers every diagnosis kind.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { DIAGNOSIS_CATALOG } from "../../../components/knowledge/diagnosis";

const ROOT = path.join(__dirname, "..", "..", "..");
const load = (name: string) => yaml.load(fs.readFileSync(path.join(ROOT, ".github", "workflows", name), "utf8")) as any;
const STACKS = fs.readdirSync(ROOT).map(f => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1]).filter((s): s is string => !!s).sort();
const uses = (steps: any[], action: string) => steps.find(s => typeof s.uses === "string" && s.uses.startsWith(`${action}@`));
const runs = (steps: any[]) => steps.map(s => s.run).filter(Boolean);

test("ci.yml: on push and pull_request, checkout, Node 22, npm ci, npm test; e2e through .ci/run", () => {
    const ci = load("ci.yml");
    assert.ok("push" in ci.on && "pull_request" in ci.on);
    const steps = ci.jobs.test.steps;
    assert.ok(uses(steps, "actions/checkout"));
    assert.equal(String(uses(steps, "actions/setup-node")?.with?.["node-version"]), "22");
    assert.deepEqual(runs(steps).map((r: string) => r.split(" ").slice(0, 2).join(" ")), ["sudo apt-get", "npm ci", "npm test"]);
    assert.match(runs(steps)[0], /apt-get install .*pyflakes3/, "npm test lints the helper program with pyflakes3");
    assert.ok(runs(ci.jobs.e2e.steps).some((r: string) => /\.ci\/run/.test(r)));
});

test("preview.yml: a matrix over exactly the committed stacks, pulumi/actions preview with the pack, PR comment, diff", () => {
    const wf = load("preview.yml");
    assert.ok("pull_request" in wf.on);
    const job = wf.jobs.preview;
    assert.deepEqual([...job.strategy.matrix.stack].sort(), STACKS);
    assert.ok(runs(job.steps).some((r: string) => r.startsWith("npm ci")));
    const pulumi = uses(job.steps, "pulumi/actions");
    assert.ok(pulumi, "uses pulumi/actions");
    assert.match(pulumi.uses, /@v\d+$/);
    assert.equal(pulumi.with.command, "preview");
    assert.equal(pulumi.with["stack-name"], "${{ vars.PULUMI_ORG }}/${{ matrix.stack }}");
    assert.equal(pulumi.with["comment-on-pr"], true);
    assert.equal(pulumi.with.diff, true);
    assert.equal(pulumi.with.policyPacks, "policies");
    assert.ok(fs.existsSync(path.join(ROOT, pulumi.with.policyPacks, "PulumiPolicy.yaml")), "the pack the preview applies exists");
    assert.equal(pulumi.env.PULUMI_ACCESS_TOKEN, "${{ secrets.PULUMI_ACCESS_TOKEN }}");
    assert.ok(!JSON.stringify(wf).includes("sshPrivateKey"), "previews need no SSH key");
    assert.equal(wf.permissions["pull-requests"], "write");
});

test("docs/troubleshooting.md: the table of diagnosis kinds has one row per kind", () => {
    const doc = fs.readFileSync(path.join(ROOT, "docs", "troubleshooting.md"), "utf8");
    const section = /\n## Diagnosis kinds\n([\s\S]*?)\n## /.exec(doc)?.[1] ?? "";
    const rows = [...section.matchAll(/^\| `([a-z0-9-]+)` \|/gm)].map(m => m[1]);
    assert.deepEqual([...rows].sort(), DIAGNOSIS_CATALOG.map(e => e.kind).sort());
});
