// Issue 30: logDir and every directory above it must be owned by root or the SSH user and writable by no one else
// (a sticky world-writable one such as /tmp aside), checked by the helper program's install before it writes anything.
// Needs root (it chowns directories to another user); CI runs it as root.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { spawnSync } from "child_process";
import { parseSpec } from "../../../components/spec/parseSpec";
import { packTools } from "../../../components/plan/hostCommands";
import { planCluster } from "../../../components/plan/plan";
import { rawConfig } from "../../fixtures";

const ROOT = { skip: process.getuid?.() !== 0 ? "needs root: chowns directories to another user" : undefined };
const NOBODY = 65534;

/** The helper install of a stack whose logDir is `logDir`, run by bash as root, or as `asUid` through setpriv. */
function install(logDir: string, asUid?: number) {
    const raw = rawConfig(2);
    raw.logDir = logDir;
    const create = planCluster(parseSpec(raw)).hosts[0].tools.create;
    const as = asUid === undefined ? [] : ["setpriv", "--reuid", String(asUid), "--regid", String(asUid), "--clear-groups"];
    const argv = [...as, "bash", "-c", create];
    return spawnSync(argv[0], argv.slice(1), { input: packTools("print('helper')\n"), encoding: "utf8" });
}

function sandbox(fn: (dir: string) => void) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-chain-"));
    try {
        fn(dir);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

test("a parent of logDir owned by another user is refused, naming it, its owner and mode, and the fix; nothing is written (root)", ROOT, () => sandbox(dir => {
    const parent = path.join(dir, "sv");
    fs.mkdirSync(path.join(parent, "spark"), { recursive: true });
    fs.chownSync(parent, NOBODY, NOBODY);
    const logDir = path.join(parent, "spark", "logs");
    const r = install(logDir);
    assert.equal(r.status, 1, r.stderr);
    assert.ok(r.stderr.includes(`spark-vllm: ${parent} (above logDir ${logDir}) is owned by uid ${NOBODY} (nobody), mode drwxr-xr-x: only root may own logDir`), r.stderr);
    assert.ok(r.stderr.includes(`fix: sudo chown root ${parent} && sudo chmod go-w ${parent},`), r.stderr);
    assert.ok(!fs.existsSync(path.join(logDir, "spark_vllm_tools.py")), "the helper program was written");
    assert.deepEqual(fs.readdirSync(logDir), []);
}));

test("as an SSH user other than root, the refusal names that user beside root as an allowed owner (root, runs as nobody)", ROOT, () => sandbox(dir => {
    fs.chmodSync(dir, 0o755);
    const OTHER = 65533;
    const parent = path.join(dir, "sv");
    fs.mkdirSync(path.join(parent, "spark"), { recursive: true });
    fs.chownSync(parent, OTHER, OTHER);
    fs.chownSync(path.join(parent, "spark"), NOBODY, NOBODY);
    const logDir = path.join(parent, "spark", "logs");
    const r = install(logDir, NOBODY);
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`spark-vllm: ${parent} \\(above logDir ${logDir}\\) is owned by uid ${OTHER} \\(\\S+\\), mode drwxr-xr-x: only root or nobody may own logDir`));
    assert.ok(!fs.existsSync(path.join(logDir, "spark_vllm_tools.py")), "the helper program was written");
}));

test("a group- or world-writable parent without the sticky bit is refused; with it (/tmp) it is accepted (root)", ROOT, () => sandbox(dir => {
    const parent = path.join(dir, "shared");
    fs.mkdirSync(parent);
    const logDir = path.join(parent, "logs");
    for (const mode of [0o775, 0o757]) {
        fs.chmodSync(parent, mode);
        const r = install(logDir);
        assert.equal(r.status, 1, `${mode.toString(8)}: ${r.stderr}`);
        assert.match(r.stderr, new RegExp(`spark-vllm: ${parent} \\(above logDir ${logDir}\\) is writable by others \\(owner root, mode d[rwx-]{9}\\) without the sticky bit: .*fix: sudo chmod go-w ${parent},`));
    }
    fs.chmodSync(parent, 0o1777);
    const ok = install(logDir);
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(fs.readFileSync(path.join(logDir, "spark_vllm_tools.py"), "utf8"), "print('helper')\n");
}));

test("a link on the way counts where it sits: a link in another user's directory is refused though its target is sound (root)", ROOT, () => sandbox(dir => {
    const good = path.join(dir, "good");
    const evil = path.join(dir, "evil");
    fs.mkdirSync(good);
    fs.mkdirSync(evil);
    fs.symlinkSync(good, path.join(evil, "l"));
    fs.chownSync(evil, NOBODY, NOBODY);
    const r = install(path.join(evil, "l", "logs"));
    assert.equal(r.status, 1, r.stderr);
    assert.ok(r.stderr.includes(`spark-vllm: ${evil} (above logDir ${path.join(evil, "l", "logs")}) is owned by uid ${NOBODY}`), r.stderr);
    assert.ok(!fs.existsSync(path.join(good, "logs", "spark_vllm_tools.py")));
    // And the other way round: a sound link to a directory another user owns.
    const theirs = path.join(dir, "theirs");
    fs.mkdirSync(theirs);
    fs.chownSync(theirs, NOBODY, NOBODY);
    fs.symlinkSync(theirs, path.join(good, "to-theirs"));
    const r2 = install(path.join(good, "to-theirs", "logs"));
    assert.equal(r2.status, 1, r2.stderr);
    assert.ok(r2.stderr.includes(`spark-vllm: ${theirs} (above logDir ${path.join(theirs, "logs")}) is owned by uid ${NOBODY}`), r2.stderr);
}));
