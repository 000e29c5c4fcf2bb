// The test engine's scratch files (known_hosts for a pinned host key, key files, ssh wrappers) go to the folder its
// parent names and removes (tests/engine/engine.ts runChild), so an engine stopped by a signal leaves nothing in /tmp:
// Node runs no "exit" handler when SIGTERM ends it, which is how an aborted `up` (the demo's Ctrl-C) is stopped.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { ENGINE_SCRATCH_ENV } from "../../engine/operations";
import { testTempDir } from "../../tempDir";

const repo = path.join(__dirname, "..", "..", "..");
const hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH4r7bXn2pX0m8o3Qb0n9yqz3y8mG5d0ZxJ2b2QmQk9r";

/** A child that makes a scratch file the way an engine does, prints its path, then is ended by SIGTERM. */
function scratchThenSigterm(env: NodeJS.ProcessEnv): { file: string; signal: NodeJS.Signals | null } {
    const script = `const { remoteSshArgv } = require(${JSON.stringify(path.join(repo, "tests", "engine", "operations"))});
        const argv = remoteSshArgv({ host: "198.18.0.2", hostKey: ${JSON.stringify(hostKey)} }, {});
        process.stdout.write(argv.find(a => a.startsWith("UserKnownHostsFile=")));
        process.kill(process.pid, "SIGTERM");
        setTimeout(() => {}, 10_000);`;
    const r = spawnSync(process.execPath, ["--import", "tsx", "-e", script], { cwd: repo, encoding: "utf8", env: { ...process.env, ...env } });
    assert.equal(r.stderr, "");
    return { file: r.stdout.replace(/^UserKnownHostsFile=/, ""), signal: r.signal };
}

test("an engine ended by SIGTERM leaves its scratch files only in the folder its parent gave it", () => {
    const tmp = testTempDir("scratch-test");
    const given = path.join(tmp, "request", "scratch");
    const own = path.join(tmp, "tmpdir");
    fs.mkdirSync(own);
    const r = scratchThenSigterm({ [ENGINE_SCRATCH_ENV]: given, TMPDIR: own });
    assert.equal(r.signal, "SIGTERM");
    assert.ok(r.file.startsWith(given + path.sep), `${r.file} is not under ${given}`);
    assert.equal(fs.readFileSync(r.file, "utf8"), `* ${hostKey}\n`);
    // (tsx keeps its compile cache there too: tsx-<uid>.)
    assert.deepEqual(fs.readdirSync(own).filter(n => n.startsWith("spark-vllm-engine-")), [], "no scratch folder of its own");
});

test("without a folder from its parent, the engine's own temp folder outlives a SIGTERM (why the parent gives one)", () => {
    const tmp = testTempDir("scratch-test");
    const r = scratchThenSigterm({ TMPDIR: tmp, [ENGINE_SCRATCH_ENV]: "" });
    assert.equal(r.signal, "SIGTERM");
    assert.match(path.basename(path.dirname(path.dirname(r.file))), /^spark-vllm-engine-/);
    assert.equal(fs.readdirSync(tmp).filter(n => n.startsWith("spark-vllm-engine-")).length, 1);
});
