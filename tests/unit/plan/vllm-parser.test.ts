// Real vLLM's argument parser judges every `vllm serve` argv the planner produces: each committed stack with each
// backend (ray, mp head, mp headless workers, one host), with extraArgs, for the oldest and the newest vLLM of the
// known-images table that PyPI carries (scripts/vllm-parsers.sh). And where vLLM and the extraArgs normaliser
// (components/spec/extraArgs.ts) disagree on which options set something spark-vllm manages, vLLM wins.
//
// NEEDS the venvs of scripts/vllm-parsers.sh (run it first; CI does): without them every test here fails and says so.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { MANAGED_VLLM_FLAGS, REFUSED_VLLM_FLAGS } from "../../../components/spec/extraArgs";
import { SpecError } from "../../../components/spec/spec";
import { parseSpec } from "../../../components/spec/parseSpec";
import { rawConfigFromStack } from "../../../components/spec/stackConfig";
import { planCluster } from "../../../components/plan/plan";
import { supportsMultiNodeMp } from "../../../components/knowledge/images";
import { stackConfig } from "../../harness/mocks";
import { rawConfig } from "../../fixtures";

const ROOT = path.join(__dirname, "..", "..", "..");
const SCRIPT = fs.readFileSync(path.join(ROOT, "scripts", "vllm-parsers.sh"), "utf8");
const VERSIONS = /^VERSIONS=\(([^)]*)\)/m.exec(SCRIPT)![1].trim().split(/\s+/);
const PARSERS = process.env.SPARK_VLLM_PARSERS_DIR ??
    path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "spark-vllm", "vllm-parsers");

interface Verdict { ok: boolean; error?: string; set?: string[] }
interface Judgement { vllm: string; results: Verdict[]; dests: Record<string, string | null>; optionsOf: Record<string, string[]> }

/** One run of scripts/vllm-parsers.py in vLLM `version`'s venv. */
function judge(version: string, argvs: string[][], options: string[] = []): Judgement {
    const python = path.join(PARSERS, version, "bin", "python");
    assert.ok(fs.existsSync(python), `no vLLM ${version} parser venv at ${path.dirname(path.dirname(python))}: run scripts/vllm-parsers.sh first`);
    const r = spawnSync(python, [path.join(ROOT, "scripts", "vllm-parsers.py")], {
        input: JSON.stringify({ argvs, options }), encoding: "utf8", maxBuffer: 64 << 20, timeout: 300_000,
    });
    assert.equal(r.status, 0, `scripts/vllm-parsers.py under vLLM ${version} failed:\n${r.stderr.slice(-3000)}`);
    const out = JSON.parse(r.stdout) as Judgement;
    assert.equal(out.vllm, version);
    assert.equal(out.results.length, argvs.length);
    return out;
}

// ---------------------------------------------------------------- every planned argv

/** extraArgs the docs show (docs/configuration.md, docs/memory.md, docs/troubleshooting.md) and common tuning. */
const EXTRA_ARGS: string[][] = [
    [],
    ["--enable-prefix-caching"],
    ["--load-format", "fastsafetensors"],
    ["--enforce-eager"],
    ["--kv-cache-dtype", "fp8"],
    ["--max-num-seqs=64", "--max-num-batched-tokens", "8192"],
    ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"],
];

interface Planned { label: string; argv: string[]; multiNodeMp: boolean }

function plannedArgvs(label: string, raw: Record<string, any>): Planned[] {
    const plan = planCluster(parseSpec(raw));
    const out: Planned[] = [{ label: `${label} head`, argv: plan.vllmServeArgv, multiNodeMp: plan.vllmServeArgv.includes("--nnodes") }];
    plan.hosts.forEach((h, i) => h.vllmServeArgv && out.push({ label: `${label} host ${i} (headless)`, argv: h.vllmServeArgv, multiNodeMp: true }));
    return out;
}

function allPlanned(): Planned[] {
    const out: Planned[] = [];
    const stacks = fs.readdirSync(ROOT).map(f => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1]).filter((s): s is string => !!s).sort();
    for (const stack of stacks) {
        const base = rawConfigFromStack(stackConfig(stack)) as Record<string, any>;
        const multi = base.hosts.length > 1;
        for (const backend of multi ? ["ray", "mp"] : [undefined]) {
            for (const extra of EXTRA_ARGS) {
                const raw = structuredClone(base);
                raw.vllm = { ...raw.vllm, extraArgs: extra, ...(backend ? { backend } : {}) };
                out.push(...plannedArgvs(`Pulumi.${stack}.yaml backend ${backend ?? "single"} extraArgs ${JSON.stringify(extra)}`, raw));
            }
        }
    }
    // One host (plain `vllm serve`, no executor flag), and trust_remote_code, from the test fixtures.
    const single = rawConfig(1);
    single.model.trustRemoteCode = true;
    out.push(...plannedArgvs("one host, trustRemoteCode", single));
    const four = rawConfig(4, { tp: 2, pp: 2 });
    four.vllm.backend = "mp";
    out.push(...plannedArgvs("four hosts mp TP 2 PP 2", four));
    return out;
}

const PLANNED = allPlanned();

test("the planned argvs cover every committed stack, every backend and the headless mp workers", () => {
    assert.ok(PLANNED.some(p => p.argv.includes("--distributed-executor-backend")));
    assert.ok(PLANNED.some(p => p.argv.includes("--headless")));
    assert.ok(PLANNED.some(p => p.multiNodeMp && !p.argv.includes("--headless")));
    assert.ok(PLANNED.some(p => !p.multiNodeMp && !p.argv.includes("--distributed-executor-backend")));
    assert.ok(VERSIONS.length >= 2, `scripts/vllm-parsers.sh pins ${VERSIONS.join(", ")}`);
});

/** The managed and refused flags, whose every option string vLLM has joins the probes below. */
const FLAGS = [...Object.keys(MANAGED_VLLM_FLAGS), ...Object.keys(REFUSED_VLLM_FLAGS)];
const NEWEST = VERSIONS[VERSIONS.length - 1];
/** What the newest vLLM must refuse, after the planned argvs in its first run. */
const REFUSALS = [["--no-such-flag"], ["--kv-cache-dtype", "fp7"], ["--enable-auto-tool-choice"]].map(extra => [...PLANNED[0].argv, ...extra]);
const firstRuns = new Map<string, Judgement>();
/**
 * One parser run per version for the planned argvs (the newest's also for REFUSALS) and FLAGS' option strings: each
 * run imports vLLM, about 8 CPU-s, and these three asks took three runs (issue 51).
 */
function firstRun(version: string): Judgement {
    let run = firstRuns.get(version);
    if (!run) firstRuns.set(version, run = judge(version, [...PLANNED.map(p => p.argv), ...(version === NEWEST ? REFUSALS : [])], FLAGS));
    return run;
}

for (const version of VERSIONS) {
    test(`vLLM ${version}'s own parser accepts every planned vllm serve argv`, () => {
        const results = firstRun(version).results.slice(0, PLANNED.length);
        const refused: string[] = [];
        PLANNED.forEach((p, i) => {
            const v = results[i];
            if (p.multiNodeMp && supportsMultiNodeMp(version) === false) {
                // components/knowledge/images.ts: no --nnodes before 0.11.0 (the compat check refuses such an image for mp).
                // The real parser must agree, and name the multi-node flags.
                if (v.ok || !/unrecognized arguments: .*--nnodes/.test(v.error ?? ""))
                    refused.push(`${p.label}: expected vLLM ${version} to refuse --nnodes, got ${JSON.stringify(v)}`);
            } else if (!v.ok) refused.push(`${p.label}: vLLM ${version} refuses \`${p.argv.join(" ")}\`: ${v.error}`);
        });
        assert.deepEqual(refused, []);
    });
}

test("the real parser refuses what vLLM refuses (the check can fail)", () => {
    const results = firstRun(NEWEST).results.slice(PLANNED.length);
    assert.equal(results.length, REFUSALS.length);
    assert.match(results[0].error!, /unrecognized arguments: --no-such-flag/);
    assert.match(results[1].error!, /argument --kv-cache-dtype: invalid choice: 'fp7'/);
    assert.match(results[2].error!, /--enable-auto-tool-choice requires --tool-call-parser/);
});

// ---------------------------------------------------------------- the extraArgs normaliser against vLLM

/** Problems parseSpec reports for vllm.extraArgs, or [] when it accepts them. */
function normaliserProblems(extra: string[]): string[] {
    const raw = rawConfig(2);
    raw.vllm.extraArgs = extra;
    try {
        parseSpec(raw);
        return [];
    } catch (e) {
        assert.ok(e instanceof SpecError, String(e));
        return e.problems.filter(p => p.includes("vllm.extraArgs"));
    }
}

/** extraArgs that name an option in ways vLLM might read: spellings, abbreviations, negations, `=` forms, cases. */
const PROBES: string[][] = [
    ["--port=9000"], ["--port", "9000"], ["--po=9000"], ["--Port=9000"], ["--PORT", "9000"],
    ["--host=0.0.0.0"], ["--ho", "0.0.0.0"], ["--tensor_parallel_size=4"], ["--tensor-parallel", "4"], ["--tensor", "4"],
    ["-tp=4"], ["-tp", "4"], ["-t", "4"], ["-TP", "4"], ["--pipeline-parallel-size=2"], ["-pp=2"], ["--pipeline", "2"],
    ["--gpu-memory-utilization=0.5"], ["--gpu-memory", "0.5"], ["--gpu_memory_utilization", "0.5"],
    ["--max-model-len=1k"], ["--max-model", "4096"], ["--served-model-name=x"], ["--served", "x"],
    ["--api-key=k"], ["--api_key", "k"], ["--api-k", "k"], ["--hf-token=t"], ["--distributed-executor-backend=mp"],
    ["--distributed_executor_backend", "mp"], ["--trust-remote-code"], ["--no-trust-remote-code"], ["--trust-remote"],
    ["--nnodes=2"], ["--node-rank=1"], ["--master-addr=1.2.3.4"], ["--master-port=1"], ["--headless"], ["--head"],
    ["--model=x/y"], ["--mod", "x/y"], ["--config=/tmp/none.yaml"],
    // Issue 41: short aliases (-n, -r, -r1 with its value attached), single-dash dotted keys, and an exact option
    // whose name starts a refused one (--reasoning-parser, not an abbreviation of --reasoning-parser-plugin).
    ["-n", "2"], ["-r", "1"], ["-r1"], ["-n=2"], ["-tp.x=4"], ["-dpm"], ["--reasoning-parser", "deepseek_r1"],
    // Options spark-vllm does not set: the normaliser must let them through.
    ["--enable-prefix-caching"], ["--no-enable-prefix-caching"], ["--max-num-seqs=8"], ["--kv-cache-dtype=fp8"],
    ["--enforce-eager"], ["--load-format", "safetensors"], ["--model-impl", "auto"], ["--max-num-batched-tokens", "4096"],
    ["--compilation-config.cudagraph_mode=PIECEWISE"], ["-O3"], ["--seed=1"], ["--port-range=1"],
];

for (const version of VERSIONS) {
    test(`vLLM ${version}: extraArgs that set an option spark-vllm manages are refused, and only those`, () => {
        // Every option string vLLM has for a managed destination (aliases and --no- forms too) joins the probes.
        const first = firstRun(version);
        const managedDests = new Set(Object.values(first.dests).filter((d): d is string => !!d));
        const aliases = Object.values(first.optionsOf).flat().filter(o => !FLAGS.includes(o));
        const probes = [...PROBES, ...aliases.map(o => [o])];
        const base = ["vllm", "serve", "Qwen/Qwen3.5-122B-A10B-FP8"];
        const { results } = judge(version, probes.map(p => [...base, ...p]));
        const disagree: string[] = [];
        probes.forEach((probe, i) => {
            const v = results[i];
            const problems = normaliserProblems(probe);
            if (!v.ok) return; // vLLM refuses it anyway (unknown, ambiguous, a bad value): either answer is safe.
            const managed = (v.set ?? []).filter(d => managedDests.has(d));
            if (managed.length && !problems.length)
                disagree.push(`${JSON.stringify(probe)}: vLLM ${version} reads it as ${managed.join(", ")}, which spark-vllm sets; the normaliser accepts it`);
            if (!managed.length && problems.length)
                disagree.push(`${JSON.stringify(probe)}: vLLM ${version} sets ${(v.set ?? []).join(", ") || "nothing managed"}; the normaliser refuses it: ${problems.join("; ")}`);
        });
        assert.deepEqual(disagree, []);
    });
}
