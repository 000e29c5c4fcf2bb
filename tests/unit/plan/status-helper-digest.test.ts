// Issue 30: `spark-vllm status` runs only the helper program whose sha256 it expects (the one the plan places), as
// container root and as the SSH user; a swapped program is never run, and the report says why, naming the path.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as crypto from "crypto";
import { spawnSync } from "child_process";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { toolsProgram } from "../../../components/plan/toolsProgram";
import { TOOLS_FILE } from "../../../components/plan/toolsProgram";
import { VERIFIED_RUN, clusterStatus, helperDigest, hostStatusScript, parseHostOutput, renderStatus } from "../../../components/plan/status";
import { rawConfig } from "../../fixtures";

function sandbox(fn: (dir: string) => void) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "status-digest-"));
    try {
        fn(dir);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

test("the expected digest is the sha256 of the program the plan places", () => {
    const plan = planCluster(parseSpec(rawConfig(2)));
    const expected = crypto.createHash("sha256").update(toolsProgram()).digest("hex");
    assert.equal(helperDigest(plan.hosts[0].tools.content), expected);
    assert.ok(hostStatusScript(plan, plan.hosts[0]).includes(expected));
});

test("a swapped helper program is not run, by the host script or in the container; the report names it and the fix", () => sandbox(dir => {
    const plan = planCluster(parseSpec({ ...rawConfig(2), logDir: dir }));
    const marker = path.join(dir, "ran-as-root");
    const planted = `open(${JSON.stringify(marker)}, "w").write("pwned")\nprint("spark-vllm-given-up []")\n`;
    const tools = path.join(dir, TOOLS_FILE);
    fs.writeFileSync(tools, planted);
    fs.mkdirSync(path.join(dir, "bin"));
    // `docker`: the container runs; exec runs its command here; cp streams an empty tar.
    fs.writeFileSync(path.join(dir, "bin", "docker"), '#!/bin/sh\ncase "$1" in inspect) echo running ;; exec) shift 2; exec "$@" ;; cp) tar -cf - -T /dev/null ;; esac\n', { mode: 0o755 });
    const r = spawnSync("sh", ["-s"], { input: hostStatusScript(plan, plan.hosts[0]), encoding: "utf8", env: { ...process.env, PATH: `${path.join(dir, "bin")}:${process.env.PATH}` } });
    assert.equal(r.status, 0, r.stderr);
    assert.ok(!fs.existsSync(marker), "the planted program ran");
    const report = parseHostOutput(plan.hosts[0], r.status, r.stdout, r.stderr);
    const got = crypto.createHash("sha256").update(planted).digest("hex");
    assert.match(report.helperRefused ?? "", new RegExp(`^spark-vllm: refusing to run ${tools}: its sha256 is ${got}, not ${helperDigest(plan.hosts[0].tools.content)}, the helper program this spark-vllm places; .*then install it again \\(spark-vllm status prints the command\\)$`));
    const status = clusterStatus(plan, "two", [report]);
    assert.equal(status.serving, false);
    assert.match(renderStatus(status), /- spark-a: nothing was asked of the host's helper program: spark-vllm: refusing to run /);
    // A plain `up` would not install it again (the tools command's inputs are unchanged): the host's tools command is replaced.
    assert.ok(status.problems[0].endsWith("\n    to install it again (and pin it in the container): run `pulumi up -s two --replace " +
        "'urn:pulumi:two::spark-vllm::spark-vllm:index:SparkCluster$spark-vllm:index:SparkHost$command:remote:Command::spark-spark-a-tools'`"), status.problems[0]);
    // The real program passes and runs.
    fs.writeFileSync(tools, toolsProgram());
    const ok = spawnSync("sh", ["-s"], { input: hostStatusScript(plan, plan.hosts[0]), encoding: "utf8", env: { ...process.env, PATH: `${path.join(dir, "bin")}:${process.env.PATH}` } });
    const okReport = parseHostOutput(plan.hosts[0], ok.status, ok.stdout, ok.stderr);
    assert.equal(okReport.helperRefused, undefined, ok.stdout + ok.stderr);
    assert.ok(okReport.vllm, JSON.stringify(okReport));
}));

test("the verified run hashes and runs the same bytes: a program swapped after the check is not run", () => sandbox(dir => {
    const file = path.join(dir, "prog.py");
    fs.writeFileSync(file, "import sys\nprint('real', sys.argv[1:], __name__)\n");
    const digest = crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex");
    const run = () => spawnSync("python3", ["-c", VERIFIED_RUN, file, digest, "a", "b"], { encoding: "utf8" });
    assert.equal(run().stdout, "real ['a', 'b'] __main__\n");
    fs.writeFileSync(file, "print('planted')\n");
    const swapped = run();
    assert.equal(swapped.status, 97);
    assert.equal(swapped.stdout, "");
    fs.rmSync(file);
    assert.match(run().stderr, /cannot read the helper program .*prog\.py \(No such file or directory\): install it again \(spark-vllm status prints the command\)/);
}));
