// Issue 50: the vLLM container cannot write the proxy's files. The head's container mounts logDir read-write (the helper
// program, the logs and pid files of what runs there) and the proxy directory inside it read-only, at the same paths;
// the bind's source exists before the container is made (the tools install makes it); workers mount no proxy directory.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { containerInputs } from "../../../components/plan/resources";
import { proxyDir } from "../../../components/plan/proxyPlan";
import { rawConfig } from "../../fixtures";

test("the head's container mounts the proxy directory read-only over logDir's; a worker's has none", () => {
    const raw = rawConfig(4, { tp: 2 });
    raw.replicas = 2;
    const plan = planCluster(parseSpec(raw));
    const proxy = proxyDir(plan.spec);
    for (const h of plan.hosts) {
        const inputs = containerInputs(h.container, "img");
        const mounts = inputs.mounts.map(m => [m.source, m.target, (m as { readOnly?: boolean }).readOnly ?? false]);
        const head = h.role === "head";
        assert.deepEqual(mounts, [
            [plan.spec.model.cacheDir, plan.spec.model.cacheDir, false],
            [plan.spec.logDir, plan.spec.logDir, false],
            ...(head ? [[proxy, proxy, true]] : []),
        ], h.host.name);
        // Made by the tools install, which every container follows, before the container: a bind's source must exist.
        assert.equal(h.tools.create.includes(`mkdir -p ${proxy} && chmod 700 ${proxy} || exit 1`), head, h.host.name);
    }
});
