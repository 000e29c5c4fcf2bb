// What every spark-vllm command shares, below them all: the exit codes, and reading a stack file into its config,
// its owner and its plan (`--stack NAME [--json] [--dir DIR]`). No hosts, no Pulumi CLI, no network.
import * as fs from "fs";
import * as path from "path";
import * as yaml from "js-yaml";
import { CONFIG_NAMESPACE, rawConfigFromStack } from "../components/spec/stackConfig";
import { SpecError, commandLengthProblem } from "../components/spec/spec";
import { parseSpec } from "../components/spec/parseSpec";
import { show } from "../components/spec/showValue";
import { ClusterPlan } from "../components/plan/clusterPlan";
import { planCluster } from "../components/plan/plan";

/**
 * Exit codes of every spark-vllm command (listed in USAGE). Distinct, so a script or CI step
 * can tell a broken stack file from a policy failure from a typo on the command line.
 */
export const EXIT = {
    /** Done: the plan or diff was printed and every mandatory policy passes; diagnose found a root cause. */
    ok: 0,
    /** diagnose: no known root cause in the log. Any command: an unexpected failure (a bug; please report it). */
    failure: 1,
    /** Usage: unknown command, option or stack name, or a missing value; diagnose: the log cannot be read. */
    usage: 2,
    /** Config: the stack file is missing, unreadable, not YAML or not a stack file, the config is invalid, or a secret is in plain text; init: the hosts cannot form a cluster, or the stack file exists. */
    config: 3,
    /** A mandatory policy fails. */
    policy: 4,
    /** status: the cluster is not serving (a host unreachable, a container or process down, /health not 200). */
    notServing: 5,
} as const;

/** A stack file that cannot be read as a stack's config: missing, unreadable, not YAML, or the wrong shape. */
export class StackFileError extends Error {
    constructor(message: string) {
        super(message);
        this.name = "StackFileError";
    }
}

/** Pulumi stack names (the NAME of Pulumi.NAME.yaml): letters, digits, `-`, `_` and `.`; never a path. */
export const STACK_NAME = /^(?!\.\.?$)[A-Za-z0-9_.-]{1,100}$/;

const kind = (v: unknown) => (v === null || v === undefined ? "empty" : Array.isArray(v) ? "a list" : typeof v === "object" ? "a mapping" : `a ${typeof v}`);
const isMapping = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
/** How a stack file holds a secret: `secure: <ciphertext>` (what `pulumi config set --secret` writes). */
const encrypted = (v: unknown) => isMapping(v) && Object.keys(v).length === 1 && typeof v.secure === "string";

/**
 * The stack file's config without the namespace, as parseSpec takes it: every key of the namespace, read
 * through rawConfigFromStack as `pulumi up` reads its config (components/config.ts), so both refuse the same
 * keys in the same words. Secrets read as set (SECRET_SET) or, when not `secure:`, as SECRET_IN_PLAIN_TEXT,
 * which parseSpec refuses. Throws StackFileError, naming the file (and line), when there is no config to read.
 */
export function readStackFile(dir: string, stack: string): Record<string, unknown> {
    if (!STACK_NAME.test(stack)) throw new StackFileError(`${show(stack)} is not a stack name (letters, digits, -, _ and .)`);
    const file = path.join(dir, `Pulumi.${stack}.yaml`);
    if (!fs.existsSync(file)) {
        let stacks: string[] = [];
        try {
            stacks = fs.readdirSync(dir).flatMap(f => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1] ?? []);
        } catch {
            // the directory itself is missing or unreadable: say so below with no list
        }
        throw new StackFileError(`no stack file ${file}; stacks here: ${stacks.join(", ") || "none"}`);
    }
    let text: string;
    try {
        text = fs.readFileSync(file, "utf8");
    } catch (err) {
        throw new StackFileError(`${file}: cannot read it: ${err instanceof Error ? err.message : String(err)}`);
    }
    let doc: unknown;
    try {
        doc = yaml.load(text, { filename: file });
    } catch (err) {
        // js-yaml's YAMLException: `reason` and a 0-based `mark`. Not its `snippet`: the file may hold a plain-text secret.
        const e = err as { reason?: string; mark?: { line: number; column: number }; message?: string };
        const where = e.mark ? `${file}:${e.mark.line + 1}:${e.mark.column + 1}` : file;
        throw new StackFileError(`${where}: not valid YAML: ${e.reason ?? e.message ?? String(err)}`);
    }
    if (!isMapping(doc)) throw new StackFileError(`${file}: is ${kind(doc)}, not a stack file: expected a mapping with a config: section holding the ${CONFIG_NAMESPACE}:* keys`);
    if (!("config" in doc)) throw new StackFileError(`${file}: has no config: section; the ${CONFIG_NAMESPACE}:* keys go under config:`);
    if (!isMapping(doc.config)) throw new StackFileError(`${file}: config: is ${kind(doc.config)}, not a mapping of ${CONFIG_NAMESPACE}:* keys to values`);
    return rawConfigFromStack(doc.config, { plainText: v => !encrypted(v) });
}

/**
 * Whose resources the stack's plan describes, as the program sees it (pulumi.getProject(), pulumi.getStack()): the
 * project is the `name` of Pulumi.yaml in `dir`; without one, this repository's project, spark-vllm. The owner is in
 * container labels and commands (components/plan/ownership.ts), so an offline plan without it would differ from `up`'s.
 */
export function stackOwner(dir: string, stack: string): { project: string; stack: string } {
    let project = "spark-vllm";
    try {
        const doc = yaml.load(fs.readFileSync(path.join(dir, "Pulumi.yaml"), "utf8"));
        if (isMapping(doc) && typeof doc.name === "string" && doc.name) project = doc.name;
    } catch {
        // no Pulumi.yaml here: the default above
    }
    return { project, stack };
}

/** Every command text of a plan that would not fit in one exec argument (components/spec/spec.ts MAX_ARG_STRLEN), with where it is. */
export function commandLengthProblems(plan: unknown): string[] {
    const problems: string[] = [];
    const walk = (node: unknown, where: string, depth: number): void => {
        if (depth > 8 || typeof node !== "object" || node === null) return;
        if (Array.isArray(node)) return node.forEach((v, i) => walk(v, `${where}[${i}]`, depth + 1));
        const o = node as Record<string, unknown>;
        for (const field of ["create", "update", "delete"]) {
            const problem = typeof o[field] === "string" ? commandLengthProblem(`${where}.${field}`, o[field] as string) : undefined;
            if (problem) problems.push(problem);
        }
        for (const [k, v] of Object.entries(o)) if (k !== "spec") walk(v, where ? `${where}.${k}` : k, depth + 1);
    };
    walk(plan, "", 0);
    return problems;
}

/**
 * The `--stack NAME [--json] [--dir DIR]` arguments every stack command takes (`plan`, `status`), or the exit code
 * after printing what was wrong (or the usage, for --help).
 */
function stackCommandArgs(command: string, usage: string, args: string[]): { stack: string; json: boolean; dir: string } | number {
    let stack: string | undefined;
    let json = false;
    let dir = process.cwd();
    for (let i = 0; i < args.length; i++) {
        const a = args[i];
        if ((a === "--stack" || a === "-s" || a === "--dir") && (args[i + 1] === undefined || args[i + 1].startsWith("-"))) {
            console.error(`spark-vllm ${command}: ${a} needs a value\n${usage}`);
            return EXIT.usage;
        }
        if (a === "--stack" || a === "-s") stack = args[++i];
        else if (a === "--json") json = true;
        else if (a === "--dir") dir = args[++i];
        else if (a === "--help" || a === "-h") {
            console.log(usage);
            return EXIT.ok;
        } else {
            console.error(`spark-vllm ${command}: unknown argument ${show(a)}\n${usage}`);
            return EXIT.usage;
        }
    }
    if (!stack) {
        console.error(usage);
        return EXIT.usage;
    }
    if (!STACK_NAME.test(stack)) {
        console.error(`spark-vllm ${command}: ${show(stack)} is not a stack name (letters, digits, -, _ and .)\n${usage}`);
        return EXIT.usage;
    }
    return { stack, json, dir };
}

/** The stack file's plan, or EXIT.config after printing the problems with the file's name. */
function planFromStackFile(dir: string, stack: string): ClusterPlan | number {
    try {
        const plan = planCluster(parseSpec(readStackFile(dir, stack)), undefined, { owner: stackOwner(dir, stack) });
        const tooLong = commandLengthProblems(plan);
        if (tooLong.length) throw new SpecError(tooLong);
        return plan;
    } catch (err) {
        if (err instanceof SpecError) console.error(`Pulumi.${stack}.yaml: ${err.message}`);
        else if (err instanceof StackFileError) console.error(err.message);
        else throw err;
        return EXIT.config;
    }
}

/** A stack command's arguments and the stack file's plan, or the exit code after saying what was wrong. */
export function stackCommand(command: string, usage: string, args: string[]): { stack: string; dir: string; json: boolean; plan: ClusterPlan } | number {
    const parsed = stackCommandArgs(command, usage, args);
    if (typeof parsed === "number") return parsed;
    const plan = planFromStackFile(parsed.dir, parsed.stack);
    return typeof plan === "number" ? plan : { stack: parsed.stack, dir: parsed.dir, json: parsed.json, plan };
}
