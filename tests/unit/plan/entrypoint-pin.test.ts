// Issue 30: the container's entrypoint (the supervisor's loop) runs the helper program in logDir only when its sha256
// is the one pinned inside the container; the install pins each new program; a new program leaves the container as it is.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as crypto from "crypto";
import { spawn, spawnSync } from "child_process";
import { parseSpec } from "../../../components/spec/parseSpec";
import { packTools } from "../../../components/plan/hostCommands";
import { planCluster } from "../../../components/plan/plan";
import { supervisorEntrypoint } from "../../../components/plan/launches";
import { TOOLS_PIN_FILE, VERIFIED_RUN } from "../../../components/plan/verifiedRun";
import { rawConfig } from "../../fixtures";

const sha256 = (text: string | Buffer) => crypto.createHash("sha256").update(text).digest("hex");

function sandbox(fn: (dir: string) => void | Promise<void>) {
    return async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "entrypoint-pin-"));
        try {
            await fn(dir);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    };
}

test("with a pin file: the first run pins the program (0600 in a 0700 directory), the same program runs again, a swapped one is refused", sandbox(dir => {
    const prog = path.join(dir, "prog.py");
    const pin = path.join(dir, "state", "tools.sha256");
    const genuine = "import os, sys\nprint('genuine', sys.argv[1:], oct(os.umask(0)))\n";
    fs.writeFileSync(prog, genuine);
    const run = () => spawnSync("sh", ["-c", `umask 022; exec python3 -c "$0" "$@"`, VERIFIED_RUN, prog, pin, "supervise", "{}"], { encoding: "utf8" });
    const first = run();
    assert.equal(first.status, 0, first.stderr);
    assert.equal(first.stdout, "genuine ['supervise', '{}'] 0o22\n", "the program runs with the caller's umask");
    assert.equal(fs.readFileSync(pin, "utf8"), `${sha256(genuine)}\n`);
    assert.equal(fs.statSync(pin).mode & 0o777, 0o600);
    assert.equal(fs.statSync(path.dirname(pin)).mode & 0o777, 0o700);
    assert.equal(run().stdout, "genuine ['supervise', '{}'] 0o22\n");

    const planted = "open(__file__ + '.ran', 'w').write('ran')\n";
    fs.writeFileSync(prog, planted);
    const refused = run();
    assert.equal(refused.status, 97);
    assert.equal(refused.stdout, "");
    assert.ok(!fs.existsSync(`${prog}.ran`), "the planted program ran");
    assert.equal(refused.stderr, `spark-vllm: refusing to run ${prog}: its sha256 is ${sha256(planted)}, not ${sha256(genuine)}, the one the last install pinned in ${pin}; ` +
        "it was changed on the host, or the stack was deployed by another spark-vllm version: check who can write it, then install it again (spark-vllm status prints the command)\n");
    assert.equal(fs.readFileSync(pin, "utf8"), `${sha256(genuine)}\n`, "a refused program never changes the pin");
}));

/** Runs the entrypoint's loop until DONE says its first turn is over (it then sleeps 5 s), then ends it; its output. */
async function entrypointTurn(tools: string, pin: string, done: (stderr: string) => boolean): Promise<{ stdout: string; stderr: string }> {
    const { entrypoint, command } = supervisorEntrypoint(tools, pin);
    const child = spawn(entrypoint[0], [...entrypoint.slice(1), ...command], { detached: true });
    let stdout = "", stderr = "";
    child.stdout.on("data", d => stdout += d);
    child.stderr.on("data", d => stderr += d);
    for (const until = Date.now() + 30_000; !done(stderr) && Date.now() < until;) await new Promise(res => setTimeout(res, 100));
    // The rest of the turn's output (DONE may see its effect before the program exits); the loop then sleeps 5 s, so
    // 300 ms ends it in that sleep, before a second turn.
    await new Promise(res => setTimeout(res, 300));
    process.kill(-child.pid!, "SIGKILL");
    await new Promise(res => child.on("close", res));
    return { stdout, stderr };
}

test("the container's entrypoint runs the pinned program, and not a program planted in its place in logDir", sandbox(async dir => {
    const tools = path.join(dir, "spark_vllm_tools.py");
    const pin = path.join(dir, "pin", "tools.sha256");
    const marker = path.join(dir, "ran");
    const genuine = `import sys\nopen(${JSON.stringify(marker)}, "a").write("genuine %s\\n" % sys.argv[1:])\n`;
    fs.writeFileSync(tools, genuine);
    await entrypointTurn(tools, pin, () => fs.existsSync(marker));
    assert.equal(fs.readFileSync(marker, "utf8"), `genuine ['supervise', '{"dir":"/var/lib/spark-vllm/launches"}']\n`);
    assert.equal(fs.readFileSync(pin, "utf8"), `${sha256(genuine)}\n`);
    fs.rmSync(marker);

    const planted = `open(${JSON.stringify(marker)}, "a").write("planted\\n")\n`;
    fs.writeFileSync(tools, planted);
    const turn = await entrypointTurn(tools, pin, stderr => stderr.includes("refusing"));
    assert.ok(!fs.existsSync(marker), "the planted program ran");
    assert.match(turn.stderr, new RegExp(`^spark-vllm: refusing to run ${tools}: its sha256 is ${sha256(planted)}, not ${sha256(genuine)}, the one the last install pinned in ${pin};`));
}));

test("the entrypoint pins inside the container, never names the program's digest: a new program leaves the container as it is", () => {
    const spec = parseSpec(rawConfig(2));
    const a = planCluster(spec, "print('a')\n"), b = planCluster(spec, "print('b')\n");
    assert.deepEqual(a.hosts.map(h => h.container), b.hosts.map(h => h.container));
    const loop = a.hosts[0].container.entrypoint.join(" ");
    assert.ok(loop.includes(TOOLS_PIN_FILE) && loop.includes("hashlib.sha256(src)"), loop);
    assert.ok(!loop.includes(sha256("print('a')\n")));
});

/** The tools command's create with a `docker` that answers inspect as told and extracts `cp - NAME:/` into ROOT. */
function install(dir: string, docker: { exists: boolean; cpFails?: boolean }) {
    const bin = path.join(dir, "bin"), root = path.join(dir, "container");
    fs.mkdirSync(bin, { recursive: true });
    fs.mkdirSync(root, { recursive: true });
    fs.writeFileSync(path.join(bin, "docker"), `#!/bin/sh
echo "$*" >> ${dir}/calls
case "$1" in
  inspect) ${docker.exists ? "exit 0" : "echo 'Error: No such container' >&2; exit 1"} ;;
  cp) ${docker.cpFails ? "exit 1" : `[ "$2" = - ] && [ "$3" = spark-vllm-spark-a:/ ] && tar -x --no-same-owner -C ${root}`} ;;
  *) exit 1 ;;
esac
`, { mode: 0o755 });
    const logDir = path.join(dir, "logs");
    const program = "print('helper')\n";
    const create = planCluster(parseSpec({ ...rawConfig(2), logDir })).hosts[0].tools.create;
    const r = spawnSync("bash", ["-c", create], { input: packTools(program), encoding: "utf8", env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
    const calls = fs.existsSync(path.join(dir, "calls")) ? fs.readFileSync(path.join(dir, "calls"), "utf8") : "";
    return { ...r, root, calls, digest: sha256(program), installed: fs.existsSync(path.join(logDir, "spark_vllm_tools.py")) };
}

test("the install pins the new program's sha256 in the host's container (root-only file), when there is one", sandbox(dir => {
    const r = install(dir, { exists: true });
    assert.equal(r.status, 0, r.stderr);
    const pin = path.join(r.root, TOOLS_PIN_FILE);
    assert.equal(fs.readFileSync(pin, "utf8"), `${r.digest}\n`);
    assert.equal(fs.statSync(pin).mode & 0o777, 0o600);
    assert.equal(fs.statSync(path.dirname(pin)).mode & 0o777, 0o700);
    assert.match(r.calls, /^inspect --type container spark-vllm-spark-a\ncp - spark-vllm-spark-a:\/\n$/);
}));

test("no container yet: nothing is pinned by the install (the container's first start pins)", sandbox(dir => {
    const r = install(dir, { exists: false });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.calls, "inspect --type container spark-vllm-spark-a\n");
    assert.deepEqual(fs.readdirSync(r.root), []);
}));

test("a pin that cannot be written fails the install, naming the container and the fix", sandbox(dir => {
    const r = install(dir, { exists: true, cpFails: true });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /spark-vllm: could not record the new helper program's sha256 in container spark-vllm-spark-a \(\/var\/lib\/spark-vllm\/tools\.sha256\); its supervisor would refuse the program: remove the container \(docker rm -f spark-vllm-spark-a\) and run pulumi up --refresh/);
}));
