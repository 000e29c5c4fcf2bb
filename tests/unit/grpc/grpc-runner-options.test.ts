// The test runner starts a program as the Node language host does, Pulumi.yaml's runtime options included
// (pulumi-language-nodejs main.go parseOptions, Run): `nodeargs` split by github.com/google/shlex and put before
// cmd/run, `tsconfig` passed as PULUMI_NODEJS_TSCONFIG_PATH, an option of the wrong type refused with the host's words.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { readProject, runProgram, splitArgs } from "../../grpc/runner";

const ROOT = path.join(__dirname, "..", "..", "..");

test("nodeargs split as google/shlex splits them", () => {
    assert.deepEqual(splitArgs(""), []);
    assert.deepEqual(splitArgs("  --max-old-space-size=4096\t--stack-size=2000 "), ["--max-old-space-size=4096", "--stack-size=2000"]);
    assert.deepEqual(splitArgs(`--title='a b' --x="c \\"d\\" e" f\\ g`), ["--title=a b", `--x=c "d" e`, "f g"]);
    assert.deepEqual(splitArgs("'' a#b # the rest\n--c"), ["", "a#b", "--c"]);
    assert.deepEqual(splitArgs(`'\\n' "\\n"`), ["\\n", "n"]);
    assert.throws(() => splitArgs("--x='a"), /^Error: EOF found when expecting closing quote$/);
    assert.throws(() => splitArgs("--x\\"), /^Error: EOF found after escape character$/);
});

function project(yaml: string, index = ""): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-runner-"));
    fs.writeFileSync(path.join(dir, "Pulumi.yaml"), yaml);
    fs.writeFileSync(path.join(dir, "index.js"), index);
    fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"));
    return dir;
}

test("runtime options of the wrong type are refused with the language host's messages", () => {
    for (const [option, message] of [["typescript: yes please", "typescript option must be a boolean"],
        ["tsconfig: 3", "tsconfigpath option must be a string"], ["nodeargs: [--a]", "nodeargs option must be a string"]]) {
        const dir = project(`name: p\nruntime:\n  name: nodejs\n  options:\n    ${option}\n`);
        try {
            assert.throws(() => readProject(dir), { message });
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }
});

test("the program's process gets nodeargs before cmd/run and tsconfig as PULUMI_NODEJS_TSCONFIG_PATH", async () => {
    const dir = project("name: p\nruntime:\n  name: nodejs\n  options:\n    typescript: false\n    tsconfig: tsconfig.other.json\n" +
        "    nodeargs: \"--stack-size=2000 --title='spark vllm'\"\nmain: index.js\n",
    "exports.execArgv = process.execArgv; exports.title = process.title; exports.tsconfig = process.env.PULUMI_NODEJS_TSCONFIG_PATH;\n" +
    "exports.argv1 = process.argv[1];\n");
    fs.writeFileSync(path.join(dir, "tsconfig.other.json"), "{}");
    try {
        const run = await runProgram({ dir, stack: "dev", config: {}, dryRun: false });
        assert.equal(run.exitCode, 0, run.stderr + run.logs.map(l => l.message).join("\n"));
        const out = run.stackOutputs!;
        assert.deepEqual(out.execArgv.slice(0, 2), ["--stack-size=2000", "--title=spark vllm"]);
        assert.equal(out.title, "spark vllm");
        assert.equal(out.tsconfig, "tsconfig.other.json");
        assert.match(out.argv1, /@pulumi\/pulumi\/cmd\/run/);
        // cmd/run reads the path (cmd/run/run.js): a file that is not there fails the run with its words.
        fs.rmSync(path.join(dir, "tsconfig.other.json"));
        const missing = await runProgram({ dir, stack: "dev", config: {}, dryRun: false });
        assert.equal(missing.exitCode, 32);
        assert.match(missing.logs.map(l => l.message).join("\n"), /tsconfig path was set to tsconfig\.other\.json but the file was not found/);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});
