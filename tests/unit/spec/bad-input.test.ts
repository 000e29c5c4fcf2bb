// Bad input (issue 13): what config may say, and how refusals read.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { LIMITS, MAX_ARG_STRLEN, SpecError, commandLengthProblem } from "../../../components/spec/spec";
import { linkLocalNotes, parseSpec } from "../../../components/spec/parseSpec";
import { show } from "../../../components/spec/showValue";
import { vllmOptionOf } from "../../../components/spec/vllmArgv";
import { rawConfig, specProblems } from "../../fixtures";

const problems = specProblems;

const withArgs = (...extraArgs: string[]) => {
    const raw = rawConfig(2);
    raw.vllm.extraArgs = extraArgs;
    return raw;
};

// ---------------------------------------------------------------- extraArgs

test("vLLM's own spelling rules: _ for -, --name=value, --json-arg.key, negative numbers are values", () => {
    assert.equal(vllmOptionOf("--api_key"), "--api-key");
    assert.equal(vllmOptionOf("--tensor_parallel_size=4"), "--tensor-parallel-size");
    assert.equal(vllmOptionOf("--compilation_config.level"), "--compilation-config");
    assert.equal(vllmOptionOf("-tp=2"), "-tp");
    assert.equal(vllmOptionOf("-1"), undefined);
    assert.equal(vllmOptionOf("value_with_underscores"), undefined);
});

test("extraArgs may not set a managed flag in any spelling vLLM accepts; the refusal names the arg and the key to set", () => {
    const args = [
        "--api_key", "sk-should-never-be-echoed", // underscores: FlexibleArgumentParser reads --api-key
        "--tensor_parallel_size=4", // --name=value
        "--Port", "9000", // case
        "--max-model", "1000", // an argparse abbreviation of --max-model-len
        "--no-trust-remote-code", // BooleanOptionalAction's negation
        "-tp=4",
        "--served_model_name=x",
        "--hf_token=hf_xyz", // a token in command text
        "--enable-prefix-caching", // fine
    ];
    const found = problems(withArgs(...args));
    const at = (i: number) => found.find(p => p.startsWith(`spark-vllm:vllm.extraArgs[${i}]: `)) ?? assert.fail(`nothing about extraArgs[${i}] in:\n${found.join("\n")}`);
    assert.equal(at(0), "spark-vllm:vllm.extraArgs[0]: --api_key (vLLM reads it as --api-key) is set by spark-vllm from the generated apiKey output (never put a key in extraArgs); remove it from extraArgs");
    assert.equal(at(2), "spark-vllm:vllm.extraArgs[2]: --tensor_parallel_size (vLLM reads it as --tensor-parallel-size) is set by spark-vllm from vllm.tensorParallelSize; remove it from extraArgs and set spark-vllm:vllm.tensorParallelSize instead");
    assert.match(at(3), /--Port \(vLLM reads it as --port\) is set by spark-vllm from vllm\.internalPort; .*set spark-vllm:vllm\.internalPort instead/);
    assert.match(at(5), /--max-model \(vLLM reads it as --max-model-len\) .*set spark-vllm:vllm\.maxModelLen instead/);
    assert.match(at(7), /--no-trust-remote-code \(vLLM reads it as --trust-remote-code\) .*set spark-vllm:model\.trustRemoteCode instead/);
    assert.match(at(8), /-tp \(vLLM reads it as -tp\)|^spark-vllm:vllm\.extraArgs\[8\]: -tp is set by spark-vllm from vllm\.tensorParallelSize/);
    assert.match(at(9), /--served_model_name .*set spark-vllm:model\.servedName instead/);
    assert.match(at(10), /--hf_token \(vLLM reads it as --hf-token\) is set by spark-vllm from hfToken, a secret/);
    assert.equal(found.filter(p => p.includes("extraArgs")).length, 8, found.join("\n"));
    for (const p of found) assert.ok(!p.includes("sk-should-never") && !p.includes("hf_xyz"), `a value leaks: ${p}`);
});

test("--config FILE is refused whatever its spelling: the file could override every flag spark-vllm sets", () => {
    for (const arg of ["--config", "--config=/etc/vllm.yaml", "--con"]) {
        const found = problems(withArgs(arg, "/etc/vllm.yaml"));
        assert.ok(found.some(p => p.startsWith("spark-vllm:vllm.extraArgs[0]: ") && p.includes("is refused: vLLM reads options from that file")), `${arg}: ${found.join("\n")}`);
    }
    // --config-format is another vLLM option (the model config's format), not the options file.
    assert.equal(parseSpec(withArgs("--config-format", "hf")).vllm.extraArgs.length, 2);
});

test("extraArgs are bounded: count, length of each, bytes in all", () => {
    assert.match(problems(withArgs(...Array(LIMITS.extraArgs + 1).fill("--enforce-eager")))[0], /^spark-vllm:vllm\.extraArgs: has 129 entries; at most 128$/);
    assert.match(problems(withArgs("x".repeat(LIMITS.extraArgChars + 1)))[0], /^spark-vllm:vllm\.extraArgs\[0\]: is 4097 characters long; at most 4096$/);
    assert.match(problems(withArgs(...Array(5).fill("y".repeat(4000))))[0], /^spark-vllm:vllm\.extraArgs: come to 20005 bytes; at most 16384/);
    assert.match(problems(withArgs(""))[0], /extraArgs\[0\]: must be a non-empty string/);
});

// ---------------------------------------------------------------- values

test("host, user, interface and HCA values may not start with - (they would read as options)", () => {
    const raw = rawConfig(2);
    raw.hosts[0].ssh.host = "-oProxyCommand=touch /tmp/pwned";
    raw.hosts[0].ssh.user = "-l";
    raw.hosts[1].fabric.interface = "-eth0";
    raw.hosts[1].fabric.hcas = ["-x"];
    raw.hosts[1].name = "-b";
    const found = problems(raw);
    for (const path of ["hosts[0].ssh.host", "hosts[0].ssh.user", "hosts[1].fabric.interface", "hosts[1].fabric.hcas[0]", "hosts[1].name"])
        assert.ok(found.some(p => p.startsWith(`spark-vllm:${path}: `) && p.includes("starts with -")), `${path}:\n${found.join("\n")}`);
});

test("cacheDir and logDir may not be /, system or shared directories, or hold . or ..", () => {
    const bad = ["/", "/etc", "/etc/spark", "/usr/lib/x", "/proc/self", "/var/lib/docker/volumes", "/home", "/tmp", "/var/tmp", "/root",
        "/home/nvidia/../../etc", "/home/nvidia/./x", "/home//nvidia", "/home/nvidia/"];
    for (const dir of bad) {
        const raw = rawConfig(1);
        raw.model.cacheDir = dir;
        raw.logDir = dir;
        const found = problems(raw);
        assert.ok(found.some(p => p.startsWith("spark-vllm:model.cacheDir: ")), `${dir}: ${found.join("\n")}`);
        assert.ok(found.some(p => p.startsWith("spark-vllm:logDir: ")), `${dir}: ${found.join("\n")}`);
    }
    const raw = rawConfig(1);
    raw.model.cacheDir = "/etc";
    assert.match(problems(raw)[0], /^spark-vllm:model\.cacheDir: "\/etc" is a system directory \(under \/etc\): spark-vllm mounts it into every container .*such as \/home\/<user>\/\.cache\/huggingface$/);
    // (Under /var/tmp is fine for logDir, checked on the host; not for cacheDir: tests/unit/spec/extra-args-boundary.test.ts.)
    for (const ok of ["/home/nvidia/.cache/huggingface", "/root/.cache/huggingface", "/data/hf", "/var/lib/spark-vllm/hf", "/mnt/nvme/hf"]) {
        const good = rawConfig(1);
        good.model.cacheDir = ok;
        good.logDir = ok + "-logs";
        assert.equal(parseSpec(good).model.cacheDir, ok);
    }
});

test("fabric addresses: no 0.0.0.0, loopback, multicast, broadcast or reserved (link-local is accepted)", () => {
    const cases: [string, RegExp][] = [
        ["0.0.0.0", /0\.0\.0\.0 means any address/],
        ["0.1.2.3", /this network/],
        ["127.0.0.1", /loopback/],
        ["224.0.0.1", /multicast/],
        ["239.255.255.250", /multicast/],
        ["255.255.255.255", /broadcast/],
        ["240.0.0.1", /reserved/],
    ];
    for (const [address, why] of cases) {
        const raw = rawConfig(2);
        raw.hosts[1].fabric.address = address;
        const found = problems(raw);
        assert.equal(found.length, 1, found.join("\n"));
        assert.match(found[0], new RegExp(`^spark-vllm:hosts\\[1\\]\\.fabric\\.address: ${address.replace(/\./g, "\\.")} is `));
        assert.match(found[0], why);
    }
});

test("link-local fabric addresses (NVIDIA's two-Spark netplan) are accepted, with a note per host", () => {
    const raw = rawConfig(3);
    raw.hosts[0].fabric.address = "169.254.3.7";
    raw.hosts[2].fabric.address = "169.254.200.9";
    const spec = parseSpec(raw);
    assert.equal(spec.hosts[0].fabric.address, "169.254.3.7");
    const notes = linkLocalNotes(spec);
    assert.equal(notes.length, 2);
    assert.match(notes[0], /^spark-vllm:hosts\[0\]\.fabric\.address 169\.254\.3\.7 \(spark-a\) is link-local/);
    assert.match(notes[1], /^spark-vllm:hosts\[2\]\.fabric\.address 169\.254\.200\.9 \(spark-c\)/);
    for (const n of notes) assert.match(n, /can change at boot unless pinned.*netplan apply/);
    assert.deepEqual(linkLocalNotes(parseSpec(rawConfig(2))), []);
    // neighbours of the range are plain addresses
    for (const a of ["169.253.1.1", "169.255.1.1"]) {
        const r = rawConfig(2);
        r.hosts[1].fabric.address = a;
        assert.deepEqual(linkLocalNotes(parseSpec(r)), []);
    }
});

test("ports may not collide with each other, SSH, or Ray's client, worker and dashboard-agent ports (Ray's defaults)", () => {
    const cases: [(raw: any) => void, string][] = [
        [raw => (raw.vllm.port = 22), "spark-vllm:vllm.port: 22 is the SSH port; pick another port for vLLM"],
        [raw => (raw.vllm.port = 10001), "spark-vllm:vllm.port: 10001 is Ray's client server port (10001); pick another port for vLLM"],
        [raw => (raw.vllm.port = 12345), "spark-vllm:vllm.port: 12345 is in Ray's worker port range (10002-19999, Ray's defaults); pick another port for vLLM"],
        [raw => (raw.ray = { dashboardPort: 52365 }), "spark-vllm:ray.dashboardPort: 52365 is Ray's dashboard agent port (52365); pick another port for Ray's dashboard"],
        [raw => (raw.ray = { port: 8000 }), "spark-vllm:ray.port: 8000 is also vllm.port; give Ray and vLLM different ports"],
        [raw => (raw.ray = { dashboardPort: 6379 }), "spark-vllm:ray.dashboardPort: 6379 is also ray.port; pick another port for Ray's dashboard"],
        [raw => ((raw.model.weights = "head-then-copy"), (raw.model.copyPort = 8265)), "spark-vllm:model.copyPort: 8265 is also ray.dashboardPort; pick a free port for the weights copy"],
        [raw => ((raw.model.weights = "head-then-copy"), (raw.model.copyPort = 18080)), "spark-vllm:model.copyPort: 18080 is in Ray's worker port range (10002-19999, Ray's defaults); pick a free port for the weights copy"],
        [raw => ((raw.hosts[1].ssh.port = 2222), (raw.vllm.port = 2222)), "spark-vllm:vllm.port: 2222 is a host's SSH port (hosts[].ssh.port); pick another port for vLLM"],
    ];
    for (const [change, expected] of cases) {
        const raw = rawConfig(2);
        change(raw);
        assert.deepEqual(problems(raw), [expected]);
    }
    const ok = rawConfig(2);
    ok.model.weights = "head-then-copy";
    const spec = parseSpec(ok);
    assert.equal(spec.model.copyPort, 20080, "the default copy port is outside Ray's worker range");
});

test("duplicates that differ only in case are duplicates", () => {
    const raw = rawConfig(2);
    raw.hosts[0].ssh.host = "Spark-A.local";
    raw.hosts[1].ssh.host = "spark-a.LOCAL.";
    assert.deepEqual(problems(raw), [
        'spark-vllm:hosts[1].ssh.host: "spark-a.LOCAL." repeats hosts[0].ssh.host ("Spark-A.local": they differ only in case); two hosts reach the same machine over SSH',
    ]);
    const hcas = rawConfig(1);
    hcas.hosts[0].fabric.hcas = ["rocep1s0f1", "rocep1s0f1"];
    assert.deepEqual(problems(hcas), ['spark-vllm:hosts[0].fabric.hcas[1]: "rocep1s0f1" repeats hcas[0]']);
});

test("NUL, newlines, escapes and invisible characters are refused anywhere, with the position", () => {
    const raw = rawConfig(2);
    raw.hosts[0].name = "spark\u0000a";
    raw.hosts[1].ssh.user = "root\nrm -rf /";
    raw.model.servedName = "qwen\u202e";
    raw.image = raw.image + "\u001b[2J";
    raw.vllm.extraArgs = ["--enforce-eager\r"];
    raw.imageSource = "head\t";
    const found = problems(raw);
    for (const [path, code] of [["hosts[0].name", "0000"], ["hosts[1].ssh.user", "000A"], ["model.servedName", "202E"], ["image", "001B"], ["vllm.extraArgs[0]", "000D"], ["imageSource", "0009"]])
        assert.ok(found.some(p => p.startsWith(`spark-vllm:${path}: contains the control character U+${code} at position`)), `${path}:\n${found.join("\n")}`);
});

test("absurd lengths are refused, and no message echoes a huge or multi-line value", () => {
    const huge = "a".repeat(1_000_000);
    const raw = rawConfig(2);
    raw.hosts[0].ssh.host = huge;
    raw.hosts[1].fabric.address = `${"9".repeat(500)}\n${"x".repeat(500)}`;
    raw.model.id = `${huge}/x`;
    raw.image = huge;
    raw.vllm.version = "1\n2";
    raw[huge] = 1;
    raw[`line1\nline2`] = 1;
    raw.hosts = [...raw.hosts, ...Array(LIMITS.hosts).fill(raw.hosts[0])];
    const tooMany = problems(raw);
    assert.ok(tooMany.includes(`spark-vllm:hosts: has ${LIMITS.hosts + 2} hosts; at most ${LIMITS.hosts}`), tooMany.join("\n"));
    raw.hosts = raw.hosts.slice(0, 2);
    const found = problems(raw);
    assert.ok(found.some(p => p === "spark-vllm:hosts[0].ssh.host: is 1000000 characters long; at most 253"), found.join("\n"));
    assert.ok(found.some(p => p.startsWith("spark-vllm:hosts[1].fabric.address: contains the control character U+000A")), found.join("\n"));
    assert.ok(found.some(p => p.startsWith("spark-vllm:model.id: is 1000002 characters long")), found.join("\n"));
    assert.ok(found.some(p => p.startsWith(`spark-vllm:"${"a".repeat(40)}…" (1000000 characters): unknown key`)), found.join("\n"));
    assert.ok(found.some(p => p.startsWith('spark-vllm:"line1\\nline2": unknown key')), found.join("\n"));
    for (const p of found) {
        assert.ok(!p.includes("\n"), `a message spans lines: ${JSON.stringify(p)}`);
        assert.ok(p.length < 400, `a message echoes too much: ${p.slice(0, 200)}…`);
    }
    assert.ok(new SpecError(found).message.split("\n").length === found.length + 1);
});

test("an object with thousands of unknown keys gives a bounded list of problems", () => {
    const raw = rawConfig(1);
    for (let i = 0; i < 5000; i++) raw.vllm[`k${i}`] = i;
    const found = problems(raw);
    assert.equal(found.length, LIMITS.unknownKeysReported + 1);
    assert.equal(found[found.length - 1], `spark-vllm:vllm: and ${5000 - LIMITS.unknownKeysReported} more unknown keys`);
});

test("show() gives one escaped, bounded line", () => {
    assert.equal(show("plain"), '"plain"');
    assert.equal(show('a"b\\c\n\u0000\u202e😀'), '"a\\"b\\\\c\\n\\u0000\\u202e\\u{1f600}"');
    assert.equal(show("x".repeat(100), 10), '"xxxxxxxxxx…" (100 characters)');
});

// ---------------------------------------------------------------- command length

test("a command text that does not fit in one exec argument (MAX_ARG_STRLEN, 128 KiB) is named", () => {
    assert.equal(MAX_ARG_STRLEN, 131072);
    assert.equal(commandLengthProblem("vllmLaunch.create", "x".repeat(MAX_ARG_STRLEN - 1)), undefined);
    assert.match(commandLengthProblem("vllmLaunch.create", "x".repeat(MAX_ARG_STRLEN)) ?? "", /^vllmLaunch\.create: its command text is 131073 bytes, and Linux runs a remote command as one argument of at most 131072 bytes \(MAX_ARG_STRLEN\)/);
    // Bytes, not characters: é is two in UTF-8.
    assert.ok(commandLengthProblem("x", "é".repeat(MAX_ARG_STRLEN / 2)));
    // What config can put into the longest command stays far below it.
    assert.ok(LIMITS.extraArgsBytes * 4 < MAX_ARG_STRLEN);
});
