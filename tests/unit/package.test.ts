// The package root exports what DESIGN.md promises: components, parser, planner, diagnose.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as spark from "../../components";

test("the package root exports the components, the spec parser, the planner and diagnose", () => {
    for (const name of ["SparkCluster", "SparkHost", "VllmContainer", "RayHead", "RayWorker", "ModelEndpoint", "parseSpec", "planCluster", "diagnose", "planMemory", "findModel"])
        assert.equal(typeof (spark as Record<string, unknown>)[name], "function", name);
    const d = spark.diagnose("(APIServer pid=1) OSError: [Errno 98] Address already in use\n");
    assert.deepEqual(Object.keys(d ?? {}).sort(), ["hint", "kind", "line"]);
    assert.equal(d?.kind, "port-in-use");
});
