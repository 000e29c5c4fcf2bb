// The engine's events as lines, the way `pulumi up` shows a deployment without a terminal UI: one line when a
// resource's step starts and one when it ends, what its command prints while it runs, and for the steps a
// newcomer asks about (the preflight facts, the compatibility verdict, Ray forming, vLLM ready) the result.
// No I/O of its own: lines go to the `print` it is given.
import type { EngineEvent } from "../../tests/engine/engine";
import type { OpKind } from "../../tests/engine/state";
import { resourceNames } from "../../components/plan/naming";

const N = resourceNames();

export type Print = (line?: string) => void;

// The step prefixes and tenses of the Pulumi engine (pulumi/pulumi pkg/resource/deploy/step.go: StepOp.RawPrefix
// "+ ", "~ ", "+-", "- "; PastTense: op + "d").
const PREFIX: Record<OpKind, string> = { create: "+ ", update: "~ ", replace: "+-", delete: "- ", same: "  " };
const ING: Record<OpKind, string> = { create: "creating", update: "updating", replace: "replacing", delete: "deleting", same: "same" };

/**
 * A type token as Pulumi displays it: `pkg:module/file:Name` becomes `pkg:module:Name` when `file` is `Name` in
 * camelCase (pulumi/pulumi pkg/backend/display/progress.go simplifyTypeName), e.g. random:index:RandomPassword.
 */
export function displayType(type: string): string {
    const parts = type.split(":");
    if (parts.length !== 3 || !parts[2]) return type;
    const [pkg, module, name] = parts;
    const slash = module.lastIndexOf("/");
    if (slash < 0 || module.slice(slash + 1) !== name[0].toLowerCase() + name.slice(1)) return type;
    return `${pkg}:${module.slice(0, slash)}:${name}`;
}

const seconds = (ms: number) => `${ms < 10_000 ? (ms / 1000).toFixed(1) : Math.round(ms / 1000)}s`;

/** The last line of a command's stdout that is a JSON object (what the helper program ends with), or undefined. */
export function lastJson(stdout: string | undefined): Record<string, any> | undefined {
    for (const line of (stdout ?? "").split("\n").reverse()) {
        if (!line.trim().startsWith("{")) continue;
        try {
            return JSON.parse(line);
        } catch {
            return undefined;
        }
    }
    return undefined;
}

const gib = (bytes: unknown) => (typeof bytes === "number" ? `${(bytes / 2 ** 30).toFixed(0)} GiB` : "?");

function preflightSummary(f: Record<string, any>): string[] {
    const gpu = f.gpus?.[0];
    const fabric = f.fabric;
    return [
        `facts: ${f.arch}, ${f.gpus?.length ?? 0} GPU${f.gpus?.length === 1 ? "" : "s"}` +
        (gpu ? ` (${gpu.name}, compute capability ${gpu.computeCap}, driver ${gpu.driver})` : "") +
        `, Docker ${f.docker}, NVIDIA runtime ${f.nvidiaRuntime ? "present" : "missing"}`,
        `       fabric ${fabric?.name} ${fabric?.up ? "up" : "DOWN"} with ${(fabric?.addresses ?? []).join(", ") || "no address"}` +
        `; ${f.hcas?.length ? `HCAs ${f.hcas.map((h: any) => h.name).join(", ")}` : "TCP (no HCAs)"}` +
        (f.disk ? `; ${gib(f.disk.freeBytes)} free in ${f.disk.path}` : ""),
        ...(f.warnings ?? []).map((w: string) => `       warning: ${w}`),
    ];
}

function compatSummary(c: Record<string, any>): string[] {
    return [`compatible: vLLM ${c.vllmVersion} knows ${(c.architectures ?? []).join(", ")} (${c.modelType}) of ${c.model}` +
        `; PyTorch ${c.torch ?? "?"}, CUDA ${c.cuda ?? "?"}, kernels ${c.kernels ?? "?"}` +
        (c.backend === "ray" ? `; Ray ${c.ray}` : "") + ` — checked in ${c.seconds}s`];
}

/** What to say under a finished step, by the resource's role (names from components/plan/naming.ts). */
function resultLines(name: string, stdout: string | undefined): string[] {
    const json = lastJson(stdout);
    if (!json) return [];
    if (name.endsWith("-preflight")) return preflightSummary(json);
    if (name === N.of("compat")) return compatSummary(json);
    if (name === N.of("ray-probe")) return [`Ray formed: ${json.nodes} nodes, ${json.gpus} GPUs joined the head in ${json.seconds}s`];
    if (name === N.of("endpoint-probe"))
        return [`vLLM ${json.vllmVersion} ready ${json.secondsToReady}s after launch: /health, /v1/models lists ${json.model}, ${json.completions} completion${json.completions === 1 ? "" : "s at once"} answered`];
    return [];
}

/** Lines for one engine event; `same` steps (nothing to do) print nothing, as in `pulumi up`'s default view. */
export function renderEvent(e: EngineEvent): string[] {
    switch (e.kind) {
        case "start":
            return e.op === "same" ? [] : [` ${PREFIX[e.op]} ${displayType(e.type)} ${e.name} ${ING[e.op]}`];
        case "line":
            // The helper program's last JSON line is the step's result: shown once, summarised, at the end.
            return e.line.trim() && !e.line.trim().startsWith("{") ? [`      ${e.name}: ${e.line}`] : [];
        case "end":
            if (e.op === "same") return [];
            if (e.error) return [` ${PREFIX[e.op]} ${displayType(e.type)} ${e.name} ${ING[e.op]} failed (${seconds(e.ms)})`];
            return [` ${PREFIX[e.op]} ${displayType(e.type)} ${e.name} ${e.op}d (${seconds(e.ms)})`, ...resultLines(e.name, e.stdout).map(l => `      ${l}`)];
    }
}

/** `up`'s error as Pulumi prints it under "Diagnostics:", with the (long, generated) command text cut short. */
export function renderError(error: string): string[] {
    const shortened = error.replace(/running "((?:[^"\\]|\\.){160})(?:[^"\\]|\\.)+"/, (_m, head) => `running "${head}…"`);
    const [first, ...rest] = shortened.split("\n");
    const colon = first.indexOf(": ");
    const [resource, message] = colon > 0 ? [first.slice(0, colon), first.slice(colon + 2)] : ["", first];
    const [type, name] = resource.split(" ");
    // Pulumi's Diagnostics heading: `  <type> (<name>):`.
    return ["Diagnostics:", `  ${name ? `${displayType(type)} (${name})` : type || "pulumi:pulumi:Stack"}:`, `    error: ${message}`, ...rest.map(l => `    ${l}`)];
}

/** An engine event handler that prints each event's lines. */
export function printEvents(print: Print): (e: EngineEvent) => void {
    return e => renderEvent(e).forEach(l => print(l));
}
