// `spark-vllm diff --stack NAME --set key=value [...] [--rotate SECRET ...]`: what a config change or a new secret
// value would do to each resource, offline. Plans the stack as committed and with the change, and applies the
// providers' rules: remote.Command is replaced only when its `triggers` change (other inputs update it); docker.RemoteImage
// and docker.Container are replaced by any input change; a resource whose triggers hold the id of a
// replaced resource is replaced too: the wiring is components/plan/resources.ts, the same entries the components build.
// A secret's value is never typed here: --rotate names it, and the entries say what reads it (`connection`, `secretStdin`,
// a gate's `secretDigest`).
import { isDeepStrictEqual } from "util";
import { ClusterPlan, CommandPlan } from "../components/plan/clusterPlan";
import { planCluster } from "../components/plan/plan";
import { SECRET_KEYS, SECRET_SET } from "../components/spec/stackConfig";
import { SpecError } from "../components/spec/spec";
import { parseSpec } from "../components/spec/parseSpec";
import { argvLine } from "../components/plan/scripts";
import { COMMAND, CONTAINER, GATE, IMAGE, PlannedResource, plannedResources } from "../components/plan/resources";
import { KEPT } from "../components/plan/launches";
import { TLS_CERTIFICATE_KEY, TLS_PRIVATE_KEY } from "../components/spec/givenTls";
import { planResources, verdicts } from "../policies/offline";
import { EXIT, readStackFile, stackOwner } from "./shared";
import { resourceNames } from "../components/plan/naming";

const USAGE = "usage: spark-vllm diff --stack NAME [--set key=value ...] [--rotate SECRET ...] [--json] [--dir DIR]\n" +
    "  key: a config path without the namespace (vllm.maxModelLen, hosts[1].fabric.address); value: JSON, else a string\n" +
    `  SECRET: a secret given a new value (never typed here): ${SECRET_KEYS.join(", ")}; at least one --set or --rotate`;

export type Op = "same" | "update" | "replace" | "create" | "delete";

export interface ResourceChange {
    name: string;
    type: string;
    op: Op;
    /** Inputs whose values differ. */
    inputs: string[];
    /** Why it is replaced or updated. */
    reason?: string;
}

/**
 * Where each secret config key goes in the planned resources (index.ts → SparkCluster → components/wiring.ts):
 * the SSH key into every remote command's `connection.privateKey` (Wiring.command), the others onto the stdin
 * `secretStdin` names (components/modelWeights.ts, endpointProxy.ts). What reads them is the entries' own data.
 */
const SECRET_TARGETS: Record<string, "connection" | NonNullable<CommandPlan["stdin"]>> = {
    sshPrivateKey: "connection", hfToken: "hfToken", [TLS_CERTIFICATE_KEY]: "tlsFiles", [TLS_PRIVATE_KEY]: "tlsFiles",
};

/** Why a new value of SECRET reaches this resource, or undefined when it does not (its inputs and gates say). */
export function readsSecret(r: PlannedResource, secret: string): { input: string; reason: string } | undefined {
    const target = SECRET_TARGETS[secret];
    if (r.type === GATE && target !== "connection" && r.secretDigest === target)
        return { input: "value", reason: `its value is the digest of ${secret}` };
    if (r.type !== COMMAND) return undefined;
    // pulumi-command v1.2.1: only `triggers` replace (provider/pkg/provider/common/inputs.go, `provider:"replaceOnChanges"`);
    // an update runs `update`, else `create` again (provider/pkg/provider/remote/commandController.go Update).
    const runs = r.inputs.update !== undefined ? "update runs its update script" : "update runs create again";
    const kept = r.inputs.create.includes(KEPT) ? "; a running identical launch is kept (components/plan/launches.ts keepIfSame)" : "";
    if (target === "connection") return { input: "connection", reason: `connection.privateKey (secret) changes: ${runs}${kept}` };
    if (r.secretStdin === target) return { input: "stdin", reason: `stdin (secret) carries the new ${secret}: ${runs}${kept}` };
    return undefined;
}

/** Per resource: which inputs change and whether the providers would update or replace it; `rotated` secrets get new values. */
export function diffPlans(before: ClusterPlan, after: ClusterPlan, rotated: readonly string[] = []): ResourceChange[] {
    const old = new Map(plannedResources(before).map(r => [r.name, r]));
    const now = plannedResources(after);
    const changes = new Map<string, ResourceChange>();
    for (const r of now) {
        const o = old.get(r.name);
        if (!o) { changes.set(r.name, { name: r.name, type: r.type, op: "create", inputs: Object.keys(r.inputs) }); continue; }
        const [oi, ri] = [o.inputs as Record<string, unknown>, r.inputs as Record<string, unknown>];
        const inputs = [...new Set([...Object.keys(oi), ...Object.keys(ri)])].filter(k => !isDeepStrictEqual(oi[k], ri[k]));
        let op: Op = "same", reason: string | undefined;
        if (o.type !== r.type) op = "replace", reason = `was ${o.type}: deleted, and created as the new type`;
        else if (inputs.length > 0) {
            // Commands replace on triggers only; docker images and containers on any input; the provider's own config updates.
            const replaces = r.type === COMMAND ? inputs.includes("triggers") : r.type === CONTAINER || r.type === IMAGE;
            op = replaces ? "replace" : "update";
            reason = r.type === COMMAND ? (replaces ? "its triggers changed" : "triggers unchanged: updated in place, which runs create again") : replaces ? "any input change replaces it" : undefined;
        }
        changes.set(r.name, { name: r.name, type: r.type, op, inputs, reason });
    }
    for (const o of old.values()) if (!changes.has(o.name)) changes.set(o.name, { name: o.name, type: o.type, op: "delete", inputs: [] });
    // A new secret value: what reads it is updated (a gate holding its digest is replaced, and its followers with it).
    for (const r of now) {
        const c = changes.get(r.name)!;
        if (c.op === "create" || c.op === "replace") continue;
        for (const secret of rotated) {
            const read = readsSecret(r, secret);
            if (!read) continue;
            if (!c.inputs.includes(read.input)) c.inputs.push(read.input);
            const reasons = [...new Set([...(c.op === "same" ? [] : [c.reason]), read.reason])].filter(Boolean);
            Object.assign(c, { op: r.type === GATE ? "replace" : "update", reason: reasons.join("; ") });
        }
    }
    // Replacement flows downstream: the list is in dependency order, so one pass suffices; loop anyway until stable.
    for (let moved = true; moved; ) {
        moved = false;
        for (const r of now) {
            const c = changes.get(r.name)!;
            if (c.op === "replace" || c.op === "create") continue;
            const up = r.replacedBy.find(u => ["replace", "create", "delete"].includes(changes.get(u)?.op ?? "same"));
            if (!up) continue;
            const via = changes.get(up)!.type === GATE ? `${up} (${changes.get(up)!.reason})` : up;
            Object.assign(c, { op: "replace", reason: r.type === GATE ? `follows ${up}` : `follows ${via} (${r.type === CONTAINER ? "its image input" : "in its triggers"})` });
            moved = true;
        }
    }
    // Gates are wiring, not resources: they explain a replacement but are not listed.
    return [...changes.values()].filter(c => c.type !== GATE);
}

/** What the change does to serving: which replicas relaunch vLLM (their launch is replaced), in the rolling order. */
export interface EndpointImpact {
    replicas: number;
    /** 1-based, in the order a rolling update takes them. */
    relaunched: number[];
    /** Whether the endpoint keeps answering through the change. */
    staysUp: boolean;
    text: string;
}

/** From the changes: each replica relaunches when its `vllm-launch` is replaced, created or deleted (naming.ts names it). */
export function endpointImpact(before: ClusterPlan, after: ClusterPlan, changes: readonly ResourceChange[]): EndpointImpact {
    const replicas = after.spec.replicas;
    const launchOf = (k: number) => resourceNames(undefined, replicas > 1 ? k : undefined).of("vllm-launch");
    const op = (name: string) => changes.find(c => c.name === name)?.op ?? "same";
    const all = Array.from({ length: replicas }, (_, i) => i + 1);
    const relaunched = all.filter(k => ["replace", "create", "delete"].includes(op(launchOf(k))));
    // A new image is proven on every host in a throw-away container before anything stops (components/plan/hostCommands.ts
    // imageCheck): a refused one fails `up` with the old version serving as it was.
    const proven = after.hosts.some(h => ["replace", "create"].includes(op(resourceNames().host(h.host.name, "image-check"))));
    const proof = proven ? "the new image is first proven on every host in a throw-away container while the old version serves " +
        "(a refused image fails up and changes nothing); then " : "";
    if (relaunched.length === 0) return { replicas, relaunched, staysUp: true, text: `${proof}vLLM is not relaunched: serving goes on` };
    if (before.spec.replicas !== replicas)
        return { replicas, relaunched, staysUp: false, text: `${proof}the replicas change (${before.spec.replicas} → ${replicas}): every replica is deployed anew and the endpoint stops serving until the new ones are proven` };
    if (replicas === 1)
        return { replicas, relaunched, staysUp: false, text: `${proof}vLLM relaunches: the endpoint stops serving until the model has loaded again and is proven ` +
            "(one replica: down from the old vLLM's stop for about the model's load time)" };
    // Each replica's containers follow its drain (components/plan/resources.ts), so a new image or container setting rolls
    // as a relaunch does (components/plan/rollout.ts: each replica drained, replaced, relaunched, proven and put back
    // before the next's drain).
    const containerGoes = (k: number) => (after.replicas ?? [after])[k - 1].hosts.some(h => ["replace", "create", "delete"].includes(op(resourceNames().host(h.host.name, "container"))));
    const list = (ks: number[]) => `replica${ks.length === 1 ? "" : "s"} ${ks.join(", ")}`;
    const replaced = relaunched.filter(containerGoes);
    return { replicas, relaunched, staysUp: true, text: `${proof}${list(relaunched)} of ${replicas} relaunch${relaunched.length === 1 ? "es" : ""}` +
        (relaunched.length > 1 ? `, one at a time (each taken out of the proxy, ${replaced.length ? "its containers replaced, " : ""}relaunched, proven and put back before the next)` :
            replaced.length ? " (taken out of the proxy, its containers replaced, relaunched, proven and put back)" : "") +
        `; the proxy sends requests to the other replica${replicas - 1 === 1 ? "" : "s"} meanwhile, so the endpoint stays up` };
}

/** `vllm serve` / `ray start` as one flag (with its values) per line, for a readable diff. */
export function argvLines(argv: readonly string[]): string[] {
    const lines: string[][] = [];
    for (const [i, a] of argv.entries()) {
        if (i < 3 || (a.startsWith("-") && !/^-\d/.test(a))) lines.push([a]);
        else lines[lines.length - 1].push(a);
    }
    const [cmd, sub, arg] = lines.splice(0, Math.min(3, lines.length));
    return [argvLine([...cmd, ...(sub ?? []), ...(arg ?? [])]), ...lines.map(l => `  ${argvLine(l)}`)];
}

/** A unified diff (one hunk, all context) of two line lists; "" when equal. */
export function unifiedDiff(a: string[], b: string[], from: string, to: string): string {
    if (isDeepStrictEqual(a, b)) return "";
    const lcs = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
    for (let i = a.length - 1; i >= 0; i--)
        for (let j = b.length - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    const out = [`--- ${from}`, `+++ ${to}`, `@@ -1,${a.length} +1,${b.length} @@`];
    let i = 0, j = 0;
    while (i < a.length || j < b.length) {
        if (i < a.length && j < b.length && a[i] === b[j]) out.push(` ${a[i++]}`), j++;
        else if (i < a.length && (j === b.length || lcs[i + 1][j] >= lcs[i][j + 1])) out.push(`-${a[i++]}`);
        else out.push(`+${b[j++]}`);
    }
    return out.join("\n") + "\n";
}

/** Sets `path` (dots and [index]) in a copy of the raw config. */
export function setPath(raw: Record<string, unknown>, path: string, value: unknown): Record<string, unknown> {
    const keys = path.replace(/^spark-vllm:/, "").split(/\.|\[(\d+)\]/).filter(k => k !== undefined && k !== "");
    if (keys.length === 0) throw new Error(`empty config path in --set`);
    const copy = structuredClone(raw);
    let node: any = copy;
    for (const [i, k] of keys.entries()) {
        if (i === keys.length - 1) node[k] = value;
        else node = node[k] ??= /^\d+$/.test(keys[i + 1]) ? [] : {};
    }
    return copy;
}

const parseValue = (text: string): unknown => { try { return JSON.parse(text); } catch { return text; } };

export async function diffCommand(args: string[]): Promise<number> {
    let stack: string | undefined, json = false, dir = process.cwd();
    const sets: Array<[string, unknown]> = [];
    const rotated: string[] = [];
    for (let i = 0; i < args.length; i++) {
        const a = args[i];
        if (a === "--stack" || a === "-s") stack = args[++i];
        else if (a === "--json") json = true;
        else if (a === "--dir") dir = args[++i];
        else if (a === "--set" && /^[^=]+=/.test(args[i + 1] ?? "")) { const s = args[++i], eq = s.indexOf("="); sets.push([s.slice(0, eq), parseValue(s.slice(eq + 1))]); }
        else if (a === "--rotate" && args[i + 1] !== undefined) {
            const key = args[++i].replace(/^spark-vllm:/, "");
            // A value typed on the command line would land in shell history and process lists: only the key's name.
            if (!SECRET_KEYS.includes(key)) { console.error(`--rotate ${key}: not a secret of spark-vllm (${SECRET_KEYS.join(", ")}); a secret's new value is never given here\n${USAGE}`); return EXIT.usage; }
            if (!rotated.includes(key)) rotated.push(key);
        }
        else { console.error(`unknown or incomplete argument ${a}\n${USAGE}`); return EXIT.usage; }
    }
    if (!stack || sets.length + rotated.length === 0) { console.error(USAGE); return EXIT.usage; }
    let before: ClusterPlan, after: ClusterPlan;
    try {
        const raw = readStackFile(dir, stack);
        // The weights command reads the HF token from stdin only when the stack sets spark-vllm:hfToken; a rotated one is set.
        const owner = stackOwner(dir, stack);
        before = planCluster(parseSpec(raw), undefined, { hfToken: raw.hfToken !== undefined, owner });
        const changed = rotated.reduce((r, k) => ({ ...r, [k]: SECRET_SET }), sets.reduce((r, [k, v]) => setPath(r, k, v), raw));
        after = planCluster(parseSpec(changed), undefined, { hfToken: changed.hfToken !== undefined, owner });
    } catch (err) {
        console.error(err instanceof SpecError ? `Pulumi.${stack}.yaml with the change: ${err.message}` : String(err instanceof Error ? err.message : err));
        return EXIT.config;
    }
    const changes = diffPlans(before, after, rotated);
    const endpoint = endpointImpact(before, after, changes);
    const failed = verdicts(planResources(after, stack)).filter(v => v.enforcementLevel === "mandatory" && v.violations.length > 0);
    const setText = [sets.map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(" "), ...rotated.map(k => `a new ${k}`)].filter(Boolean).join(", ");
    // Per rotated secret: the planned resources that read it; none means a new value changes nothing.
    const planned = plannedResources(after);
    const readers = Object.fromEntries(rotated.map(k => [k, planned.filter(r => readsSecret(r, k)).map(r => r.name)]));
    const diffs = [
        unifiedDiff(argvLines(before.vllmServeArgv), argvLines(after.vllmServeArgv), `vllm serve (Pulumi.${stack}.yaml)`, `vllm serve (${setText})`),
        ...after.hosts.map((h, i) => unifiedDiff(argvLines(before.hosts[i]?.rayStartArgv ?? []), argvLines(h.rayStartArgv ?? []), `ray start on ${h.host.name} (Pulumi.${stack}.yaml)`, `ray start on ${h.host.name} (${setText})`)),
        ...after.hosts.map((h, i) => unifiedDiff((before.hosts[i]?.container.env ?? []).map(([k, v]) => `${k}=${v}`), h.container.env.map(([k, v]) => `${k}=${v}`), `${h.container.name} env (Pulumi.${stack}.yaml)`, `${h.container.name} env (${setText})`)),
    ].filter(Boolean);
    if (json) {
        process.stdout.write(JSON.stringify({ stack, set: Object.fromEntries(sets), rotate: readers, changes, endpoint, diffs, mandatoryFailures: failed }, null, 2) + "\n");
        return failed.length ? EXIT.policy : EXIT.ok;
    }
    const count = (op: Op) => changes.filter(c => c.op === op).length;
    const out = [`stack ${stack} with ${setText}: ${count("replace")} to replace, ${count("update")} to update, ${count("create")} to create, ${count("delete")} to delete, ${count("same")} unchanged`];
    const SYM: Record<Op, string> = { same: "  ", update: "~ ", replace: "+-", create: "+ ", delete: "- " };
    const width = Math.max(...changes.map(c => c.name.length));
    for (const c of changes.filter(c => c.op !== "same"))
        out.push(`  ${SYM[c.op]} ${c.name.padEnd(width)}  ${c.op.padEnd(7)}  ${c.inputs.length ? `inputs: ${c.inputs.join(", ")}` : "no input changes"}${c.reason ? `; ${c.reason}` : ""}`);
    out.push(`  endpoint: ${endpoint.text}`);
    for (const k of rotated) {
        if (readers[k].length === 0) out.push(`  ${k}: no resource of stack ${stack} reads it: a new value changes nothing`);
        // The Docker provider has no key input: its OpenSSH logs in with the agent or ~/.ssh/config (components/plan/connection.ts).
        else if (SECRET_TARGETS[k] === "connection") out.push(`  ${k}: read by the ${readers[k].length} remote commands only; the Docker providers log in with the agent or ~/.ssh/config: authorize the new key there too`);
    }
    for (const d of diffs) out.push("", d.trimEnd());
    out.push("", failed.length ? `mandatory policies failing with the change:\n${failed.map(v => `  FAIL ${v.policy}: ${v.violations.join("; ")}`).join("\n")}` : "every mandatory policy passes with the change");
    process.stdout.write(out.join("\n") + "\n");
    return failed.length ? EXIT.policy : EXIT.ok;
}
