// The order `npm run test:e2e` starts the end-to-end files in (tests/e2e/run.ts): longest first, so that no long file
// starts last and leaves the other lanes idle at the end of the run (the run lasts at least as long as its longest
// file). Seconds per file, summed over its top-level tests, from the clean-clone CI run of 201c85f on 2026-12-04 on the
// real Pulumi, three files at a time (python.test.ts: its first run alone, 88 s); a file not listed yet runs first (its duration is unknown), and tests/unit/e2e/e2e-order.test.ts names any
// file this list lacks.
import * as fs from "fs";
import * as path from "path";

export const E2E_SECONDS: Readonly<Record<string, number>> = {
    "tests/e2e/cluster.test.ts": 730,
    // With issue 46's image change under load (one more bring-up and three ups): 186 s more, measured 2026-12-07 beside
    // other work, on the real Pulumi; the file's old 353 s plus that.
    "tests/e2e/gb10.test.ts": 540,
    "tests/e2e/rotation.test.ts": 254,
    "tests/e2e/demo.test.ts": 250,
    "tests/e2e/fabric.test.ts": 248,
    "tests/e2e/real-vllm.test.ts": 242,
    "tests/e2e/status.test.ts": 237,
    "tests/e2e/ray-doors.test.ts": 234,
    "tests/e2e/proxy.test.ts": 233,
    "tests/e2e/ray-auth.test.ts": 232,
    "tests/e2e/recovery.test.ts": 220,
    "tests/e2e/engine-order.test.ts": 217,
    "tests/e2e/refresh.test.ts": 216,
    "tests/e2e/ssh-hostkey.test.ts": 216,
    "tests/e2e/shared-hosts.test.ts": 201,
    "tests/e2e/per-host-fabric.test.ts": 191,
    "tests/e2e/relaunch.test.ts": 178,
    // Measured alone on the real Pulumi (not in the CI run above), 2026-12-05, with the rolling update: 169 s; four hosts 117 s.
    // 2026-12-07 with issue 46's image roll (two more ups under load): 368 s beside another file on a loaded machine.
    "tests/e2e/replicas.test.ts": 300,
    "tests/e2e/weights-copy.test.ts": 123,
    "tests/e2e/replicas-four.test.ts": 117,
    "tests/e2e/init.test.ts": 114,
    "tests/e2e/python.test.ts": 88,
    "tests/e2e/rayless.test.ts": 83,
    "tests/sim/sim.test.ts": 48,
};

/** Every end-to-end file (repository-relative), as the runner starts them: unlisted ones first, then longest first. */
export function e2eFiles(root: string): string[] {
    const files = [
        ...fs.readdirSync(path.join(root, "tests", "e2e")).filter(f => f.endsWith(".test.ts")).map(f => `tests/e2e/${f}`),
        "tests/sim/sim.test.ts",
    ];
    const seconds = (f: string) => E2E_SECONDS[f] ?? Infinity;
    return files.sort((a, b) => seconds(b) - seconds(a) || a.localeCompare(b));
}
