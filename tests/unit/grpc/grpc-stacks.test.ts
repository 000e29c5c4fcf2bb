// Every committed stack through the CLI's path (program by cmd/run, pack by its analyzer server): it
// previews clean, and the resources the engine sees are exactly the ones `spark-vllm plan`/`diff` reason
// about (components/plan/resources.ts plannedResources), name for name and type for type.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "fs";
import * as path from "path";
import { REPO, deploy, mandatory } from "../../grpc/deploy";
import { stackConfig } from "../../../scripts/preview";
import { readStackFile } from "../../../bin/shared";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { GATE, plannedResources } from "../../../components/plan/resources";

/**
 * The URN of every resource of every committed stack. The real engine keys its state by URN (stack, project, the
 * parent's whole qualified type, type, name: pulumi/pulumi@1b59498 pkg/resource/deploy/deployment.go generateURN →
 * sdk/go/common/resource/urn/urn.go New), so a changed URN is a delete and a create of a running host process.
 * A rename or re-parenting must change this file on purpose, and bring `aliases` for existing stacks.
 */
const PINNED: Record<string, string[]> = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "fixtures", "stack-urns.json"), "utf8"));

const STACKS = fs.readdirSync(REPO).flatMap(f => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1] ?? []).sort();

describe("committed stacks through the gRPC engine and the analyzer server", () => {
    it("finds the committed stacks", () => assert.ok(STACKS.includes("spark") && STACKS.length >= 5, STACKS.join(", ")));
    it("pins the URNs of exactly the committed stacks", () => assert.deepEqual(Object.keys(PINNED).sort(), STACKS));
    for (const stack of STACKS) {
        it(`${stack}: previews clean, registering what plan/diff plan`, async () => {
            const { config, secretKeys } = stackConfig(path.join(REPO, `Pulumi.${stack}.yaml`));
            const result = await deploy({ dir: REPO, stack, config, secretKeys, dryRun: true, packDir: path.join(REPO, "policies") });
            assert.equal(result.run.exitCode, 0, result.run.stderr);
            assert.deepEqual(mandatory([...result.diagnostics, ...(result.stackDiagnostics ?? [])]), []);
            assert.ok(result.stackDiagnostics, "AnalyzeStack ran");
            assert.equal(result.failed, false);
            const raw = readStackFile(REPO, stack);
            const planned = plannedResources(planCluster(parseSpec(raw), undefined, { hfToken: raw.hfToken !== undefined }))
                .filter(r => r.type !== GATE).map(r => `${r.type} ${r.name}`).sort();
            const registered = result.run.registrations.filter(r => r.custom).map(r => `${r.type} ${r.name}`).sort();
            assert.deepEqual(registered, planned);
            assert.deepEqual(result.run.registrations.map(r => r.urn).sort(), PINNED[stack],
                "the URNs changed: a deployed stack would delete and recreate these resources unless they carry `aliases`");
        });
    }
});
