// `npm run preview -- --stack NAME [--dir DIR] [--json]`: the committed stack through the same path as
// `pulumi preview`: the program (index.ts) run by @pulumi/pulumi's cmd/run against a gRPC engine, and the
// policy pack (policies/) run by @pulumi/policy's analyzer server. Prints the steps the engine would take
// and the policy verdicts; exits 1 when the program fails or a mandatory policy is violated. No host is
// contacted: nothing runs but the program and the pack. DIR holds Pulumi.NAME.yaml (default: the
// repository) and, if present, NAME.state.json from an earlier test-engine `up`: then the steps are
// updates, replaces and deletes against it instead of creates.
import * as fs from "fs";
import * as path from "path";
import * as yaml from "js-yaml";
import { REPO, deploy, mandatory } from "../tests/grpc/deploy";
import { StepPlanner, Step } from "../tests/grpc/steps";
import { loadState } from "../tests/engine/state";
import type { Diagnostic } from "../tests/grpc/analyzer";

const USAGE = "usage: npm run preview -- --stack NAME [--dir DIR] [--json]";

/**
 * The stack's config as the CLI hands it to the program. `secure:` values cannot be decrypted offline
 * (no passphrase or service here): each becomes a placeholder that still travels as a secret
 * (PULUMI_CONFIG_SECRET_KEYS), so the program takes the same secret path it takes under `pulumi preview`.
 */
export function stackConfig(file: string): { config: Record<string, unknown>; secretKeys: string[] } {
    const doc = yaml.load(fs.readFileSync(file, "utf8")) as { config?: Record<string, unknown> } | undefined;
    const config: Record<string, unknown> = {};
    const secretKeys: string[] = [];
    for (const [key, value] of Object.entries(doc?.config ?? {})) {
        if (value && typeof value === "object" && !Array.isArray(value) && "secure" in value) {
            config[key] = `preview-placeholder-for-${key.replace(/[^A-Za-z0-9]/g, "-")}`;
            secretKeys.push(key);
        } else config[key] = value;
    }
    return { config, secretKeys };
}

const SYMBOL: Record<Step["op"], string> = { create: "+ ", update: "~ ", replace: "+-", delete: "- ", same: "  " };

export function renderPolicies(diags: Diagnostic[]): string[] {
    return diags.map(d => `  ${d.level === "mandatory" ? "FAIL" : "warn"} [${d.level}] ${d.policy}${d.urn ? ` (${d.urn.split("::").pop()})` : ""}: ${d.message.trim().split("\n").join("\n      ")}`);
}

export async function previewCommand(args: string[]): Promise<number> {
    let stack: string | undefined, dir = REPO, json = false;
    for (let i = 0; i < args.length; i++) {
        if (args[i] === "--stack" || args[i] === "-s") stack = args[++i];
        else if (args[i] === "--dir") dir = path.resolve(args[++i] ?? "");
        else if (args[i] === "--json") json = true;
        else { console.error(`unknown argument ${args[i]}\n${USAGE}`); return 2; }
    }
    if (!stack || !/^[A-Za-z0-9_.-]+$/.test(stack)) { console.error(USAGE); return 2; }
    const file = path.join(dir, `Pulumi.${stack}.yaml`);
    if (!fs.existsSync(file)) { console.error(`no stack file ${file}`); return 2; }
    const { config, secretKeys } = stackConfig(file);
    const statePath = path.join(dir, `${stack}.state.json`);
    const planner = new StepPlanner(fs.existsSync(statePath) ? loadState(statePath) : undefined);
    const result = await deploy({
        dir: REPO, stack, config, secretKeys, dryRun: true, packDir: path.join(REPO, "policies"),
        onRegister: planner.onRegister,
    });
    for (const r of result.run.registrations) planner.component(r);
    const order = new Map(result.run.registrations.map((r, i) => [r.urn, i]));
    const steps = [...planner.steps.sort((a, b) => order.get(a.urn!)! - order.get(b.urn!)!), ...planner.deletes()];
    const errors = result.run.logs.filter(l => l.severity === "error").map(l => l.message);
    const policy = [...result.diagnostics, ...(result.stackDiagnostics ?? [])];
    if (json) {
        process.stdout.write(JSON.stringify({ stack, steps, policy, errors, exitCode: result.run.exitCode, failed: result.failed }, null, 2) + "\n");
        return result.failed ? 1 : 0;
    }
    const out = [`Previewing stack ${stack} (${path.relative(process.cwd(), file) || file}${fs.existsSync(statePath) ? `, state ${statePath}` : ", no state: every resource is new"})`];
    const width = Math.max(0, ...steps.map(s => s.type.length));
    for (const s of steps.filter(s => s.op !== "same")) out.push(`  ${SYMBOL[s.op]} ${s.type.padEnd(width)}  ${s.name}  ${s.op}`);
    const count = (op: Step["op"]) => steps.filter(s => s.op === op).length;
    out.push(`Resources: ${count("create")} to create, ${count("update")} to update, ${count("replace")} to replace, ${count("delete")} to delete, ${count("same")} unchanged`);
    if (errors.length) out.push("", "Program errors:", ...errors.map(e => `  ${e.trim().split("\n").join("\n  ")}`));
    else if (result.run.exitCode !== 0) out.push("", `Program failed: ${result.run.error || `exit ${result.run.exitCode}`}`, result.run.stderr.trim());
    out.push("", "Policies (spark-vllm pack through its analyzer server):");
    out.push(...(policy.length ? renderPolicies(policy) : ["  every policy passes"]));
    if (!result.stackDiagnostics && result.run.exitCode === 0) out.push("  stack policies not run: a step failed");
    const m = mandatory(policy).length;
    out.push("", result.failed ? `preview failed${m ? `: ${m} mandatory policy violation${m === 1 ? "" : "s"}` : ""}` : "preview clean");
    process.stdout.write(out.join("\n") + "\n");
    return result.failed ? 1 : 0;
}

if (require.main === module) previewCommand(process.argv.slice(2)).then(code => process.exit(code), err => { console.error(err); process.exit(1); });
