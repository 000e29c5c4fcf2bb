// Runs a Pulumi program as the CLI's Node language host does (pulumi/pulumi@1b59498
// sdk/nodejs/cmd/pulumi-language-nodejs/main.go: Run, execRuntime, constructArguments, constructConfig):
//   node <@pulumi/pulumi/cmd/run> --monitor A --engine A --project P --root-directory R --stack S --pwd D
//        [--dry-run] --parallel N <main>
// with PULUMI_CONFIG (keys rewritten to `ns:config:name`), PULUMI_CONFIG_SECRET_KEYS, and
// PULUMI_NODEJS_TYPESCRIPT=true when Pulumi.yaml's runtime option typescript is on (its default,
// parseOptions). The program then type-checks through the SDK's ts-node path (cmd/run/run.js), talks to
// our Monitor over gRPC, and exits; the exit code means what execRuntime says it means.
import { spawn } from "child_process";
import * as fs from "fs";
import * as path from "path";
import * as yaml from "js-yaml";
import { LogEntry, Monitor, MonitorOptions, Registration } from "./monitor";

/** Exit code after which the language host prints nothing more (main.go nodeJSProcessExitedAfterShowingUserActionableMessage). */
export const EXIT_ALREADY_REPORTED = 32;

export interface RunOptions {
    /** Directory holding Pulumi.yaml. */
    dir: string;
    stack: string;
    /** Stack config, full keys ("spark-vllm:hosts") → value (non-strings are sent as JSON, as the CLI does). */
    config: Record<string, unknown>;
    secretKeys?: string[];
    dryRun: boolean;
    parallel?: number;
    beforeStep?: MonitorOptions["beforeStep"];
    onRegister?: MonitorOptions["onRegister"];
    /** Extra environment (PULUMI_NODEJS_TRANSPILE_ONLY, …). */
    env?: Record<string, string>;
    /** false: run without inspect-fix.js, as the real language host does (to test the program on an affected Node). */
    inspectFix?: boolean;
    /** Each line the program writes to stderr. */
    onStderr?: (line: string) => void;
    /** Node flags before the runner, which the language host does not pass: for measuring only (bench/measure-preload.mjs). */
    nodeArgs?: string[];
}

export interface RunResult {
    exitCode: number | null;
    /** What the language host answers the engine: "" on success; Bail when the program already reported. */
    error: string;
    bail: boolean;
    registrations: Registration[];
    logs: LogEntry[];
    stackOutputs?: Record<string, any>;
    featureQueries: string[];
    calls: string[];
    stdout: string;
    stderr: string;
    /** The first error the engine raised answering the program (a refused resource, a failed step). */
    engineError?: string;
}

export interface Project {
    name: string;
    main: string;
    typescript: boolean;
    /** Runtime option `tsconfig`: passed as PULUMI_NODEJS_TSCONFIG_PATH, which cmd/run reads. */
    tsconfig?: string;
    /** Runtime option `nodeargs`, split as the language host splits it: node flags before cmd/run. */
    nodeargs: string[];
}

/**
 * Splits a command line as github.com/google/shlex `Split` does, which the language host uses for `nodeargs`
 * (main.go `shlex.Split(opts.nodeargs)`): words split on blanks; '…' literal; "…" and a bare backslash escape the
 * next character; `#` at the start of a word comments out the rest of the line.
 */
export function splitArgs(line: string): string[] {
    const words: string[] = [];
    let word: string | undefined;
    for (let i = 0; i < line.length; i++) {
        const c = line[i];
        if (word === undefined) {
            if (" \t\r\n".includes(c)) continue;
            if (c === "#") {
                while (i < line.length && line[i] !== "\n") i++;
                continue;
            }
            word = "";
        }
        if (" \t\r\n".includes(c)) {
            words.push(word);
            word = undefined;
        } else if (c === "\\") {
            if (++i >= line.length) throw new Error("EOF found after escape character");
            word += line[i];
        } else if (c === "'" || c === '"') {
            for (i++; ; i++) {
                if (i >= line.length) throw new Error("EOF found when expecting closing quote");
                if (line[i] === c) break;
                if (c === '"' && line[i] === "\\") {
                    if (++i >= line.length) throw new Error("EOF found after escape character");
                }
                word += line[i];
            }
        } else {
            word += c;
        }
    }
    if (word !== undefined) words.push(word);
    return words;
}

export function readProject(dir: string): Project {
    const doc = yaml.load(fs.readFileSync(path.join(dir, "Pulumi.yaml"), "utf8")) as any;
    const runtime = doc.runtime;
    const options = typeof runtime === "object" ? runtime.options ?? {} : {};
    // parseOptions (pulumi-language-nodejs main.go): the option's type is checked, its message is the host's.
    const typed = <T>(key: string, type: "boolean" | "string", message: string): T | undefined => {
        if (options[key] !== undefined && typeof options[key] !== type) throw new Error(message);
        return options[key];
    };
    const typescript = typed<boolean>("typescript", "boolean", "typescript option must be a boolean") ?? true;
    const tsconfig = typed<string>("tsconfig", "string", "tsconfigpath option must be a string");
    const nodeargs = splitArgs(typed<string>("nodeargs", "string", "nodeargs option must be a string") ?? "");
    // getPwdMain (pkg/engine/project.go): no main → "."; a file → pwd is its directory, main its base name.
    return { name: doc.name, main: doc.main ?? ".", typescript, tsconfig, nodeargs };
}

/** PULUMI_CONFIG as constructConfig builds it: `ns:name` → `ns:config:name`, string values. */
export function configEnv(config: Record<string, unknown>): string {
    const out: Record<string, string> = {};
    for (const [key, value] of Object.entries(config)) {
        const colon = key.indexOf(":");
        out[`${key.slice(0, colon)}:config:${key.slice(colon + 1)}`] = typeof value === "string" ? value : JSON.stringify(value);
    }
    return JSON.stringify(out);
}

export async function runProgram(opts: RunOptions): Promise<RunResult> {
    const project = readProject(opts.dir);
    const monitor = new Monitor({
        project: project.name, stack: opts.stack, dryRun: opts.dryRun, beforeStep: opts.beforeStep, onRegister: opts.onRegister,
        config: Object.fromEntries(Object.entries(opts.config).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)])),
        configSecretKeys: opts.secretKeys,
    });
    const address = await monitor.start();
    // locateModule resolves the runner from the program directory, as `node -e require.resolve(...)` there would.
    const runPath = require.resolve("@pulumi/pulumi/cmd/run", { paths: [opts.dir] });
    const mainPath = path.resolve(opts.dir, project.main);
    const isDir = fs.existsSync(mainPath) && fs.statSync(mainPath).isDirectory();
    const pwd = isDir ? mainPath : path.dirname(mainPath);
    const main = isDir ? "." : path.basename(mainPath);
    // One addition to the language host's command line: inspect-fix.js (why there); the program's process is otherwise
    // the CLI's: the project's nodeargs, then cmd/run and its arguments (main.go Run: runtimeArgs before args).
    const args = [...project.nodeargs, ...(opts.nodeArgs ?? []), ...(opts.inspectFix === false ? [] : ["--require", path.join(__dirname, "inspect-fix.js")]), runPath, "--monitor", address, "--engine", address, "--project", project.name, "--root-directory", opts.dir,
        "--stack", opts.stack, "--pwd", pwd, ...(opts.dryRun ? ["--dry-run"] : []), "--parallel", String(opts.parallel ?? 16), main];
    const env: Record<string, string> = { ...(process.env as Record<string, string>), ...opts.env };
    env.PULUMI_CONFIG = configEnv(opts.config);
    env.PULUMI_CONFIG_SECRET_KEYS = JSON.stringify(opts.secretKeys ?? []);
    if (project.typescript) env.PULUMI_NODEJS_TYPESCRIPT = "true";
    else delete env.PULUMI_NODEJS_TYPESCRIPT;
    if (project.tsconfig) env.PULUMI_NODEJS_TSCONFIG_PATH = project.tsconfig;
    else delete env.PULUMI_NODEJS_TSCONFIG_PATH;
    delete env.NODE_OPTIONS; // the language host runs plain `node`: no loader of ours (tsx) in the program's process
    let stdout = "", stderr = "", partial = "";
    const exitCode = await new Promise<number | null>((resolve, reject) => {
        const child = spawn(process.execPath, args, { cwd: pwd, env, stdio: ["ignore", "pipe", "pipe"] });
        // When the engine fails it cancels the run: the language host's exec.CommandContext sends os.Interrupt and
        // kills the process 5 s later if it has not exited (main.go execRuntime: cmd.Cancel, cmd.WaitDelay).
        monitor.onFailure = () => {
            child.kill("SIGINT");
            setTimeout(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"), 5000).unref();
        };
        child.stdout.on("data", d => (stdout += d));
        child.stderr.on("data", d => {
            stderr += d;
            partial += d;
            const lines = partial.split("\n");
            partial = lines.pop()!;
            for (const l of lines) opts.onStderr?.(l);
        });
        child.on("error", reject);
        child.on("close", code => resolve(code));
    });
    monitor.stop();
    // execRuntime: 0 → success; 32 → Bail (the program already printed an actionable message); else a generic error.
    const bail = exitCode === EXIT_ALREADY_REPORTED;
    const error = exitCode === 0 ? "" : bail ? "" : `Program exited with non-zero exit code: ${exitCode}`;
    return {
        exitCode, error, bail,
        registrations: monitor.registrations, logs: monitor.logs, stackOutputs: monitor.stackOutputs,
        featureQueries: monitor.featureQueries, calls: monitor.calls, stdout, stderr, engineError: monitor.error?.message,
    };
}

/** Whether the run failed as the CLI would count it: a non-zero exit, or an error the engine raised itself. */
export const failed = (r: RunResult) => r.exitCode !== 0 || r.engineError !== undefined;
