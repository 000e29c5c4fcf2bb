// `up`, `destroy` and `preview` through the real Pulumi CLI, its Node.js language host and the real providers, when
// they are installed (realPulumi): the CLI with its offline settings and a file backend per stack, the stack's config in
// a stack file of its own, the engine's events read from `--event-log` as they are written, and the same Report as the
// test engine's (tests/engine/run.ts), so an end-to-end file runs unchanged on either.
//
// What a Report holds here, and where it comes from (pulumi/pulumi sdk/go/common/apitype/events.go):
// - ops: one per resource of the update (after the preview `pulumi up` runs first, whose events are `planning` or end
//   with a summary that `isPreview`): resourcePreEvent starts it, resOutputsEvent ends it, resOpFailedEvent fails it.
//   A replacement's steps (delete-replaced, replace, create-replacement) are one "replace"; a refresh's steps go to
//   `refresh`. Times are when this process read each event (the log's own `timestamp` is in whole seconds).
// - actions: what the CLI does not report, derived from the step: 1 for a create, update or delete of a remote command
//   or a docker resource (0 for the delete of a command with no `delete`, whose provider runs nothing: pulumi-command
//   v1.2.1 remote/commandController.go Delete), 2 for a replacement that runs both; 0 for RandomPassword and providers.
// - outputs: `pulumi stack output --json --show-secrets`; error/errors: the error diagnostics, a resource's prefixed
//   `<type> <name>: ` as the test engine prints them; warnings: the program's warning diagnostics; policy: the policy
//   events as `[level] policy (resource name): message`.
// - statePath: after each run, the stack's state (`pulumi stack export --show-secrets`) as the test engine's state file
//   (tests/engine/state.ts), for the files that read it.
import { spawn, spawnSync } from "child_process";
import * as fs from "fs";
import * as net from "net";
import * as os from "os";
import * as path from "path";
import * as yaml from "js-yaml";
import type { Report, UpOptions, RunOptions, Stack } from "./engine";
import type { Op, OpKind, State } from "./state";
import type { RefreshStep } from "./refresh";

const REPO = path.join(__dirname, "..", "..");
const PASSPHRASE = "spark-vllm-tests-not-a-secret";
/** The providers the program uses, at the versions the npm SDKs ask for (node_modules/@pulumi/<name>/package.json). */
const PROVIDERS = ["command", "random", "docker"];

export interface RealPulumi {
    /** The directory of the CLI, with pulumi-language-nodejs beside it or on PATH. */
    dir: string;
    pulumi: string;
    /** Where each provider was found: the plugin cache (name-version) or PATH. */
    providers: Record<string, string>;
    /** `pulumi version`. */
    version: string;
}

const sdkVersion = (name: string) => JSON.parse(fs.readFileSync(path.join(REPO, "node_modules", "@pulumi", name, "package.json"), "utf8")).version as string;
const onPath = (file: string, extra: string[] = []) =>
    [...extra, ...(process.env.PATH ?? "").split(":")].map(d => path.join(d, file)).find(f => { try { fs.accessSync(f, fs.constants.X_OK); return true; } catch { return false; } });

/**
 * The real Pulumi, when every part is installed where the CLI looks (pulumi/pulumi sdk/go/common/workspace/plugins.go
 * GetPluginPath): the CLI built by `npm run toolchain`; the language host beside it or on PATH; each provider on PATH
 * or in the plugin cache under PULUMI_HOME at the version its SDK asks for (SelectCompatiblePlugin: an exact version).
 * Otherwise what is missing.
 */
export function findRealPulumi(): { found?: RealPulumi; missing: string[] } {
    const dir = spawnSync("bash", [path.join(REPO, "scripts/toolchain.sh"), "--dir"], { encoding: "utf8" }).stdout.trim();
    const missing: string[] = [];
    const pulumi = path.join(dir, "pulumi");
    if (!fs.existsSync(pulumi)) missing.push(`the Pulumi CLI (${pulumi}: npm run toolchain)`);
    if (!onPath("pulumi-language-nodejs", [dir])) missing.push(`pulumi-language-nodejs (beside ${pulumi} or on PATH)`);
    const home = process.env.PULUMI_HOME ?? path.join(os.homedir(), ".pulumi");
    const providers: Record<string, string> = {};
    for (const name of PROVIDERS) {
        const version = sdkVersion(name);
        const cached = path.join(home, "plugins", `resource-${name}-v${version}`);
        const ambient = onPath(`pulumi-resource-${name}`, [dir]);
        if (ambient) providers[name] = ambient;
        else if (fs.existsSync(cached)) providers[name] = cached;
        else missing.push(`pulumi-resource-${name} (on PATH, or \`pulumi plugin install resource ${name} ${version}\`)`);
    }
    if (missing.length) return { missing };
    const version = spawnSync(pulumi, ["version"], { encoding: "utf8", env: { ...process.env, PULUMI_SKIP_UPDATE_CHECK: "true" } }).stdout.trim();
    return { found: { dir, pulumi, providers, version }, missing };
}

let installed: boolean | undefined;
/**
 * Whether `up`/`destroy` (tests/engine/engine.ts: the end-to-end files, `npm run demo`, `npm run bench`) run on the real
 * Pulumi: SPARK_VLLM_ENGINE=real, or unset and the real Pulumi installed; SPARK_VLLM_ENGINE=grpc or mocks: the test engine.
 */
export function usesRealPulumi(env: NodeJS.ProcessEnv = process.env): boolean {
    if (env.SPARK_VLLM_ENGINE !== undefined) return env.SPARK_VLLM_ENGINE === "real";
    return (installed ??= findRealPulumi().found !== undefined);
}

/** One line naming what the end-to-end files run on. */
export function engineLine(env: NodeJS.ProcessEnv = process.env): string {
    if (!usesRealPulumi(env)) return `the test engine (tests/engine, SPARK_VLLM_ENGINE=${env.SPARK_VLLM_ENGINE ?? "grpc"})`;
    const { found } = findRealPulumi();
    return found
        ? `the real Pulumi: CLI ${found.version} in ${found.dir}; providers ${Object.entries(found.providers).map(([n, p]) => `${n} ${p}`).join(", ")}`
        : "the real Pulumi (not found)";
}

interface Workspace {
    dir: string;
    env: NodeJS.ProcessEnv;
    stack: string;
}

/** A project folder per stack beside its state path: Pulumi.yaml whose `main` is the repository, a file backend. */
function workspace(stack: Stack, real: RealPulumi): Workspace {
    const dir = stack.statePath.replace(/\.state\.json$/, "") + ".pulumi";
    const backend = path.join(dir, "backend");
    fs.mkdirSync(backend, { recursive: true });
    const project = yaml.load(fs.readFileSync(path.join(REPO, "Pulumi.yaml"), "utf8")) as Record<string, unknown>;
    // `main` is relative to the project folder (sdk/go/common/workspace/project.go); the program runs from there.
    project.main = path.relative(dir, path.join(REPO, String(project.main ?? ".")));
    fs.writeFileSync(path.join(dir, "Pulumi.yaml"), yaml.dump(project));
    const env: NodeJS.ProcessEnv = {
        ...process.env,
        ...stack.transport.env,
        PATH: `${real.dir}:${path.join(REPO, "node_modules", ".bin")}:${stack.transport.env.PATH ?? process.env.PATH}`,
        PULUMI_BACKEND_URL: `file://${backend}`,
        PULUMI_CONFIG_PASSPHRASE: PASSPHRASE,
        PULUMI_SKIP_UPDATE_CHECK: "true",
        PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
        // `--event-log` exists only with it (pulumi/pulumi pkg/cmd/pulumi/operations/up.go: env.DebugCommands); the
        // Automation API sets it the same way (@pulumi/pulumi 3.276.0 automation/stack.js).
        PULUMI_DEBUG_COMMANDS: "true",
        // As the test engine's runs: transpile only; npm test type-checks the program (tests/engine/run.ts runGrpc).
        PULUMI_NODEJS_TRANSPILE_ONLY: process.env.PULUMI_NODEJS_TRANSPILE_ONLY ?? "true",
    };
    delete env.PULUMI_CONFIG_PASSPHRASE_FILE;
    return { dir, env, stack: stack.name };
}

function cli(real: RealPulumi, ws: Workspace, args: string[], input?: string) {
    return spawnSync(real.pulumi, ["--cwd", ws.dir, "--non-interactive", ...args], { env: ws.env, encoding: "utf8", input, maxBuffer: 256 << 20 });
}
function mustCli(real: RealPulumi, ws: Workspace, args: string[], input?: string): string {
    const r = cli(real, ws, args, input);
    if (r.status !== 0) throw new Error(`pulumi ${args.join(" ")} failed (exit ${r.status}):\n${r.stdout}${r.stderr}`);
    return r.stdout;
}

/** Creates the stack once (passphrase secrets), then writes the stack's config: plain values as they are, secrets encrypted by the CLI. */
function configure(real: RealPulumi, ws: Workspace, stack: Stack): void {
    const file = path.join(ws.dir, `Pulumi.${ws.stack}.yaml`);
    if (!fs.existsSync(path.join(ws.dir, "backend", ".pulumi", "stacks", "spark-vllm", `${ws.stack}.json`)) && !fs.existsSync(file))
        mustCli(real, ws, ["stack", "init", ws.stack, "--secrets-provider", "passphrase"]);
    const settings = (fs.existsSync(file) ? yaml.load(fs.readFileSync(file, "utf8")) : {}) as Record<string, unknown> ?? {};
    const secret = new Set(stack.secretKeys ?? []);
    settings.config = Object.fromEntries(Object.entries(stack.config).filter(([k]) => !secret.has(k)));
    fs.writeFileSync(file, yaml.dump(settings, { lineWidth: -1 }));
    for (const key of secret) mustCli(real, ws, ["config", "set", "--secret", "--stack", ws.stack, key], String(stack.config[key]));
}

interface Event {
    at: number;
    e: Record<string, any>;
}

/** Runs the CLI, reading its event log as it grows; progress as the test engine's (`onEvent`), abort by SIGINT. */
function runLogged(real: RealPulumi, ws: Workspace, args: string[], opts: RunOptions): Promise<{ code: number; output: string; events: Event[] }> {
    // A FIFO, not a file: the CLI opens the log with O_TRUNC once for the preview `up` runs first and again for the
    // update (pulumi/pulumi pkg/backend/display/display.go startEventLogger), which rewrites a file under its reader.
    // Opened read-write here, so the pipe has a writer between the two and never reads as ended; and non-blocking, read
    // through the event loop (a net.Socket on the FIFO: libuv's pipe handle): fs.createReadStream reads it in the
    // thread pool, where a read no writer ever answers again stays blocked after destroy(), so every run took one of
    // its four threads until the CLI's writes to a later FIFO blocked it for good.
    const log = path.join(ws.dir, `events-${process.pid}-${Date.now()}.fifo`);
    const made = spawnSync("mkfifo", ["-m", "600", log]);
    if (made.status !== 0) throw new Error(`mkfifo ${log} failed: ${made.stderr}`);
    return new Promise(resolve => {
        const events: Event[] = [];
        const progress = progressOf(opts);
        let pending = Buffer.alloc(0), lastData = Date.now();
        const reader = new net.Socket({ fd: fs.openSync(log, fs.constants.O_RDWR | fs.constants.O_NONBLOCK), readable: true, writable: false });
        reader.on("data", (chunk: Buffer | string) => {
            lastData = Date.now();
            pending = Buffer.concat([pending, Buffer.from(chunk)]);
            // Whole lines only; a UTF-8 character split across chunks stays in `pending`.
            const end = pending.lastIndexOf(0x0a);
            if (end === -1) return;
            const lines = pending.subarray(0, end).toString("utf8").split("\n");
            pending = pending.subarray(end + 1);
            for (const line of lines.filter(l => l.trim())) {
                const e = JSON.parse(line);
                events.push({ at: lastData, e });
                progress(e);
            }
        });
        const child = spawn(real.pulumi, ["--cwd", ws.dir, "--non-interactive", ...args, "--event-log", log], { env: ws.env, stdio: ["ignore", "pipe", "pipe"] });
        let output = "";
        // The CLI's own output, also kept in the stack's folder (the last run of each command) for a failure's reader.
        const kept = fs.createWriteStream(path.join(ws.dir, `last-${args[0]}.log`));
        child.stdout.on("data", d => { output += d; kept.write(d); });
        child.stderr.on("data", d => { output += d; kept.write(d); });
        child.on("close", () => kept.end());
        // SIGINT, as Ctrl-C: the CLI cancels, lets running steps finish and records what they did.
        const stop = () => child.kill("SIGINT");
        if (opts.signal?.aborted) stop();
        opts.signal?.addEventListener("abort", stop, { once: true });
        child.on("close", code => {
            opts.signal?.removeEventListener("abort", stop);
            // What the CLI wrote before it exited is in the pipe: read until it has been quiet a moment.
            const drained = setInterval(() => {
                if (Date.now() - lastData < 300) return;
                clearInterval(drained);
                reader.destroy();
                fs.rmSync(log, { force: true });
                resolve({ code: code ?? 128, output, events });
            }, 100);
        });
    });
}

const nameOf = (urn: string) => urn.split("::").pop()!;
const typeOf = (urn: string) => urn.split("::").slice(-2, -1)[0].split("$").pop()!;

/**
 * The test engine's progress events from the CLI's: a step's start and end (with the command's `stdout` from its
 * outputs, and its error), and each line a command prints while it runs (pulumi-command logs them as info
 * diagnostics of the resource).
 */
function progressOf(opts: RunOptions): (e: Record<string, any>) => void {
    const started = new Map<string, number>();
    const errors = new Map<string, string>();
    return e => {
        if (!opts.onEvent) return;
        const d = e.diagnosticEvent;
        if (d?.urn && !d.urn.includes("::pulumi:pulumi:Stack::")) {
            const text = String(d.message).replace(/\u001b\[[0-9;]*m/g, "").replace(/\n$/, "");
            if (d.severity === "error") errors.set(d.urn, text);
            else if (d.severity === "info" || d.severity === "info#err")
                for (const line of text.split("\n")) opts.onEvent({ kind: "line", name: nameOf(d.urn), line });
            return;
        }
        const pre = e.resourcePreEvent, out = e.resOutputsEvent, failed = e.resOpFailedEvent;
        const m = (pre ?? out ?? failed)?.metadata;
        if (!m || pre?.planning || out?.planning || !m.type || m.type.startsWith("pulumi:")) return;
        // As the test engine emits them: the old copy's delete in a replacement is a delete (run.ts replaceOld), the new
        // copy's create the replacement; the engine's logical `replace` step between them runs nothing.
        const op: OpKind | undefined = m.op === "delete-replaced" ? "delete" : m.op === "replace" ? undefined : opKind(m.op);
        if (!op) return;
        const name = nameOf(m.urn);
        if (pre) {
            if (!started.has(m.urn)) started.set(m.urn, Date.now());
            opts.onEvent({ kind: "start", op, type: m.type, name });
            return;
        }
        const stdout = typeof m.new?.outputs?.stdout === "string" ? m.new.outputs.stdout : undefined;
        opts.onEvent({ kind: "end", op, type: m.type, name, ms: Date.now() - (started.get(m.urn) ?? Date.now()),
            ...(stdout !== undefined ? { stdout } : {}), ...(failed ? { error: errors.get(m.urn) ?? "failed" } : {}) });
    };
}

/** The engine's step kinds (sdk/go/common/display OpType) as the test engine's. */
function opKind(op: string): OpKind | undefined {
    switch (op) {
        case "same": case "create": case "update": case "delete": return op;
        case "replace": case "create-replacement": case "delete-replaced": return "replace";
        default: return undefined;
    }
}

/** What a step ran on the hosts (see the file's comment). */
function actionsOf(op: string, m: Record<string, any>): number {
    if (m.type === "random:index/randomPassword:RandomPassword" || m.type.startsWith("pulumi:providers:")) return 0;
    switch (op) {
        case "create": case "update": case "create-replacement": return 1;
        case "delete": case "delete-replaced":
            return m.type === "command:remote:Command" && !m.old?.inputs?.delete ? 0 : 1;
        default: return 0;
    }
}

/**
 * The update's events: those after the preview `pulumi up` runs first (its summary says isPreview). When no update
 * followed (the preview failed: a --replace target not in the stack, a mandatory policy), the preview's, whose errors
 * and policy verdicts are then the run's.
 */
function updateEvents(events: Event[]): Event[] {
    const previewEnd = events.findIndex(({ e }) => e.summaryEvent?.isPreview === true);
    if (previewEnd === -1) return events;
    const update = events.slice(previewEnd + 1);
    return update.some(({ e }) => e.preludeEvent || e.resourcePreEvent || e.diagnosticEvent) ? update : events.slice(0, previewEnd + 1);
}

/**
 * The CLI's own warnings about the docker provider it runs from PATH (5.1.0, built here, for @pulumi/docker 5.2.0:
 * tests/real/toolchain.test.ts says why), not the program's: "using pulumi-resource-docker from $PATH at …"
 * (pulumi/pulumi sdk/go/common/workspace/plugins.go GetPluginPath) and "resource plugin docker is expected to have
 * version >=5.2.0, but has 5.1.0; …" (pkg/host/host.go). Report.warnings holds the program's.
 */
const CLI_PLUGIN_WARNING = /^using pulumi-(resource|language)-\S+ from \$PATH at |^resource plugin \S+ is expected to have version /;

function toReport(events: Event[], t0: number, code: number, output: string): Report {
    const ops = new Map<string, Op>();
    const refresh: RefreshStep[] = [];
    const errors: string[] = [];
    const warnings: string[] = [];
    const policy: string[] = [];
    const violations: string[] = [];
    for (const { at, e } of updateEvents(events)) {
        const pre = e.resourcePreEvent, out = e.resOutputsEvent, failed = e.resOpFailedEvent;
        const m = (pre ?? out ?? failed)?.metadata;
        if (m && !pre?.planning && !out?.planning && m.type !== "pulumi:pulumi:Stack") {
            if (m.op === "refresh") {
                // Components and providers are not read (the test engine lists none: tests/engine/refresh.ts).
                if (out && (m.old?.custom || m.new?.custom) && !m.type.startsWith("pulumi:")) refresh.push({ urn: m.urn, type: m.type, name: nameOf(m.urn), op: refreshResult(m) });
                continue;
            }
            const kind = opKind(m.op);
            // Components have no step of their own (the test engine keys custom resources and providers only).
            if (!kind || !(m.new?.custom || m.old?.custom)) continue;
            const op: Op = ops.get(m.urn) ?? { op: kind, urn: m.urn, type: m.type, name: nameOf(m.urn), actions: 0, startMs: at - t0, endMs: at - t0 };
            if (kind === "replace" || op.op === "same") op.op = kind;
            if (pre) op.actions += actionsOf(m.op, m);
            op.endMs = at - t0;
            if (failed) op.failed = true;
            ops.set(m.urn, op);
        }
        const d = e.diagnosticEvent;
        if (d && !d.ephemeral) {
            const text = String(d.message).replace(/\u001b\[[0-9;]*m/g, "").trim();
            const who = d.urn ? `${typeOf(d.urn)} ${nameOf(d.urn)}: ` : "";
            if (d.severity === "error") errors.push(who + text);
            else if (d.severity === "warning" && !CLI_PLUGIN_WARNING.test(text)) warnings.push(text);
        }
        const p = e.policyEvent;
        if (p) policy.push(`[${p.enforcementLevel}] ${p.policyName}${p.resourceUrn ? ` (${nameOf(p.resourceUrn)})` : ""}: ${String(p.message).trim()}`);
        if (p?.enforcementLevel === "mandatory") violations.push(`${p.policyName}: ${String(p.message).trim()}`);
    }
    // The CLI's error for a mandatory violation is only "preview failed" (the verdicts are policy events); as the test
    // engine's error, the first error names them (tests/engine/run.ts: the engine's error, then the violations).
    if (code !== 0 && errors.length === 0) errors.push(`pulumi exited ${code}:\n${output.split("\n").slice(-40).join("\n")}`);
    if (violations.length && errors.length) errors[0] = [errors[0], ...violations].join("\n");
    return { ops: [...ops.values()], errors, error: errors[0], warnings, policy, ...(refresh.length ? { refresh } : {}), wallMs: Date.now() - t0, startedAt: t0 };
}

/**
 * A refresh step's result as the real engine judges it (pulumi/pulumi pkg/resource/deploy/step.go RefreshStep.ResultOp):
 * gone when the read found nothing, else changed when the provider's diff of the read state against the program's
 * inputs has changes (the step's `diffs`/`detailedDiff`; a non-external resource without UseLegacyRefreshDiff), else the same.
 */
function refreshResult(m: Record<string, any>): RefreshStep["op"] {
    if (!m.new || !m.new.id) return "delete";
    return (m.diffs?.length || Object.keys(m.detailedDiff ?? {}).length) ? "update" : "same";
}

/** The stack's state as the test engine's state file, for the files that read it (tests/engine/state.ts). */
/**
 * Mirrors the stack's state into the test engine's file at statePath, and returns the stack's outputs (secrets shown),
 * undefined when the export fails. The outputs are what `pulumi stack output --json --show-secrets` prints, read from
 * the same snapshot: the root `pulumi:pulumi:Stack` resource's outputs (pulumi/pulumi v3.276.0
 * pkg/cmd/pulumi/stack/stack_output.go getStackOutputs, pkg/resource/stack/checkpoint.go GetRootStackResource), so an
 * `up` starts one CLI less (each start about 0.45 CPU-s: issue 51).
 */
function mirrorState(real: RealPulumi, ws: Workspace, statePath: string): Record<string, unknown> | undefined {
    const r = cli(real, ws, ["stack", "export", "--show-secrets", "--stack", ws.stack]);
    if (r.status !== 0) return undefined;
    const resources = (JSON.parse(r.stdout).deployment?.resources ?? []) as Array<Record<string, any>>;
    const state: State = { resources: {} };
    // Custom resources and providers, as the test engine keys them; a docker resource with the host and sshOpts of
    // the provider it was created through (its `provider` reference, `<urn>::<id>`).
    const byUrn = new Map(resources.map(res => [res.urn as string, res]));
    resources.filter(res => res.custom).forEach((res, seq) => {
        const provider = res.provider ? byUrn.get(String(res.provider).split("::").slice(0, -1).join("::")) : undefined;
        const docker = provider?.type === "pulumi:providers:docker" ? unwrap(provider.inputs ?? {}) : undefined;
        const sshOpts = typeof docker?.sshOpts === "string" ? JSON.parse(docker.sshOpts) : docker?.sshOpts;
        state.resources[res.urn] = { urn: res.urn, type: res.type, name: nameOf(res.urn), id: res.id, inputs: unwrap(res.inputs ?? {}), outputs: unwrap(res.outputs ?? {}),
            dependencies: res.dependencies ?? [], provider: res.provider, ...(docker ? { dockerHost: docker.host, dockerSshOpts: sshOpts } : {}), seq } as State["resources"][string];
    });
    fs.writeFileSync(statePath, JSON.stringify(state, null, 1));
    const root = resources.find(res => res.type === "pulumi:pulumi:Stack" && !res.parent);
    return unwrap(root?.outputs ?? {});
}

const SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270";
function unwrap(v: any): any {
    if (Array.isArray(v)) return v.map(unwrap);
    if (v && typeof v === "object") {
        if (v["4dabf18193072939515e22adb298388d"] === SECRET_SIG) return unwrap(v.plaintext !== undefined ? JSON.parse(v.plaintext) : v.value);
        return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, unwrap(x)]));
    }
    return v;
}

let foundReal: RealPulumi | undefined;
/**
 * The real Pulumi, looked up once per process: each lookup runs scripts/toolchain.sh and `pulumi version` (about
 * 0.2 CPU-s), and a test process ran it before every `up` and `destroy` (issue 51).
 */
function requireReal(): RealPulumi {
    if (foundReal) return foundReal;
    const { found, missing } = findRealPulumi();
    if (!found) throw new Error(`SPARK_VLLM_ENGINE=real, but the real Pulumi is not installed: ${missing.join("; ")}`);
    return (foundReal = found);
}

/** The stack's state file as the file backend keeps it on disk (secrets encrypted). */
export function stateFileText(stack: Stack): string {
    const dir = stack.statePath.replace(/\.state\.json$/, "") + ".pulumi";
    return fs.readFileSync(path.join(dir, "backend", ".pulumi", "stacks", "spark-vllm", `${stack.name}.json`), "utf8");
}

export async function realUp(stack: Stack, opts: UpOptions = {}): Promise<Report> {
    const real = requireReal();
    const ws = workspace(stack, real);
    configure(real, ws, stack);
    const args = ["up", "--yes", "--stack", ws.stack,
        ...(stack.policyPack === false ? [] : ["--policy-pack", path.join(REPO, "policies")]),
        ...(opts.refresh ? ["--refresh"] : []), ...(opts.replace ?? []).flatMap(u => ["--replace", u])];
    const t0 = Date.now();
    const run = await runLogged(real, ws, args, opts);
    const report = toReport(run.events, t0, run.code, run.output);
    const outputs = mirrorState(real, ws, stack.statePath);
    if ((run.code === 0 || report.ops.length) && outputs) report.outputs = outputs;
    return report;
}

export async function realDestroy(stack: Stack, opts: RunOptions = {}): Promise<Report> {
    const real = requireReal();
    const ws = workspace(stack, real);
    configure(real, ws, stack);
    const t0 = Date.now();
    const run = await runLogged(real, ws, ["destroy", "--yes", "--stack", ws.stack], opts);
    const report = toReport(run.events, t0, run.code, run.output);
    mirrorState(real, ws, stack.statePath);
    return report;
}
