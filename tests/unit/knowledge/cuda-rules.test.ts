// The CUDA binary-compatibility rule lives twice: components/knowledge/images.ts (policies, at preview) and the helper
// program's spark_vllm/cuda.py (the compat check, in the image). Same cases, same verdicts.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { cudaKernelsRunOn } from "../../../components/knowledge/images";

const CASES: Array<[string[], [number, number]]> = [
    [["sm_80", "sm_90", "sm_100", "sm_120"], [12, 1]],
    [["sm_80", "sm_90"], [12, 1]],
    [["sm_90", "compute_90"], [12, 1]],
    [["sm_120a"], [12, 1]],
    [["sm_121a"], [12, 1]],
    [["sm_120f"], [12, 1]],
    [["sm_121"], [12, 0]],
    [["compute_121"], [12, 0]],
    [["sm_90a", "sm_100"], [9, 0]],
    [[], [12, 1]],
];

test("cuda.py's kernels_run_on gives images.ts's verdicts (runs, and through which target)", () => {
    const script = `import json, sys\nfrom spark_vllm.cuda import kernels_run_on\nprint(json.dumps([kernels_run_on(a, tuple(c))[:2] for a, c in json.load(sys.stdin)]))`;
    const r = spawnSync("python3", ["-c", script], {
        input: JSON.stringify(CASES), encoding: "utf8", cwd: path.join(__dirname, "..", "..", "..", "components", "hostProgram"),
    });
    assert.equal(r.status, 0, r.stderr);
    const python = JSON.parse(r.stdout) as Array<[boolean, string | null]>;
    CASES.forEach(([archs, cap], i) => {
        const ts = cudaKernelsRunOn(archs, cap);
        assert.deepEqual(python[i], [ts.runs, ts.target ?? null], `${archs.join(" ")} on ${cap.join(".")}`);
    });
});
