// `spark-vllm plan --stack NAME [--json]`: what a stack would do, from its stack file alone.
// No hosts, no Pulumi CLI, no network.
import * as fs from "fs";
import * as path from "path";
import * as yaml from "js-yaml";
import { CONFIG_NAMESPACE, SpecError, parseSpec } from "../components/spec";
import { ClusterPlan, CommandPlan, planCluster } from "../components/plan";
import { argvLine } from "../components/scripts";
import { findModel } from "../components/catalog";
import { planMemory, renderMemoryPlan } from "../components/memory";
import { planResources, verdicts } from "../policies/offline";

const USAGE = "usage: spark-vllm plan --stack NAME [--json] [--dir DIR]";

/** The stack file's config without the namespace, as parseSpec takes it. */
export function readStackFile(dir: string, stack: string): Record<string, unknown> {
    const file = path.join(dir, `Pulumi.${stack}.yaml`);
    if (!fs.existsSync(file)) {
        const stacks = fs.readdirSync(dir).map(f => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1]).filter(Boolean);
        throw new Error(`no stack file ${file}; stacks here: ${stacks.join(", ") || "none"}`);
    }
    const doc = (yaml.load(fs.readFileSync(file, "utf8")) ?? {}) as { config?: Record<string, unknown> };
    const raw: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(doc.config ?? {}))
        if (key.startsWith(`${CONFIG_NAMESPACE}:`)) raw[key.slice(CONFIG_NAMESPACE.length + 1)] = value;
    return raw;
}

export function planReport(plan: ClusterPlan, stack: string) {
    const spec = plan.spec;
    const memory = planMemory(spec, findModel(spec.model.id));
    return {
        stack,
        endpoint: plan.endpoint,
        model: spec.model,
        image: spec.image.reference,
        hosts: plan.hosts.map(h => ({
            name: h.host.name,
            role: h.role,
            ssh: `${h.host.ssh.user}@${h.host.ssh.host}:${h.host.ssh.port}`,
            fabric: h.host.fabric,
            gpus: h.host.gpus,
            container: h.container,
            rayStart: argvLine(h.rayStartArgv),
            commands: { preflight: h.preflight, rayLaunch: h.rayLaunch },
        })),
        vllmServe: argvLine(plan.vllmServeArgv),
        commands: { compat: plan.compat, rayProbe: plan.rayProbe, vllmLaunch: plan.vllmLaunch, endpointProbe: plan.endpointProbe },
        probes: spec.probes,
        memory,
        policies: verdicts(planResources(plan, stack)),
    };
}

function renderText(r: ReturnType<typeof planReport>, memoryTable: string): string {
    const out: string[] = [];
    const section = (title: string) => out.push("", `== ${title}`);
    const command = (label: string, c: CommandPlan) => {
        out.push(`  ${label} (timeout ${c.timeoutSeconds} s${c.stdin ? `, ${c.stdin} on stdin` : ""}):`);
        out.push(...c.create.split("\n").map(l => `    ${l}`));
        if (c.delete) out.push("    on delete:", ...c.delete.split("\n").map(l => `      ${l}`));
    };
    out.push(`stack ${r.stack}: ${r.model.id} as "${r.model.servedName}" on ${r.hosts.length} Spark${r.hosts.length === 1 ? "" : "s"}`);
    out.push(`endpoint ${r.endpoint} (API key generated, secret)`, `image ${r.image}`);
    section("hosts");
    for (const h of r.hosts)
        out.push(`  ${h.name} (${h.role}) ssh ${h.ssh}, ${h.gpus} GPU, fabric ${h.fabric.interface} ${h.fabric.address}, HCAs ${h.fabric.hcas.join(", ") || "none (TCP)"}`);
    section("containers");
    for (const h of r.hosts) {
        const c = h.container;
        out.push(`  ${c.name} on ${h.name}: ${c.image} (${c.platform}), network ${c.networkMode}, ipc ${c.ipcMode}, gpus ${c.gpus}, shm ${c.shmSizeMb} MiB`);
        out.push(`    env: ${c.env.map(([k, v]) => `${k}=${v}`).join(" ")}`);
        out.push(`    mounts: ${c.mounts.map(m => m.hostPath).join(", ")}; devices: ${c.devices.map(d => d.hostPath).join(", ") || "none"}`);
        out.push(`    ulimits: ${c.ulimits.map(u => `${u.name}=${u.soft}`).join(", ")}; caps: ${c.capabilities.join(", ")}`);
    }
    section("ray");
    for (const h of r.hosts) out.push(`  ${h.name}: ${h.rayStart}`);
    section("vllm");
    out.push(`  ${r.vllmServe}`);
    section("commands, in order");
    for (const h of r.hosts) command(`${h.name} preflight`, h.commands.preflight);
    command("compatibility check", r.commands.compat);
    for (const h of r.hosts) command(`${h.name} ray launch`, h.commands.rayLaunch);
    command("ray formation probe", r.commands.rayProbe);
    command("vllm launch", r.commands.vllmLaunch);
    command("endpoint probe", r.commands.endpointProbe);
    section("probes");
    out.push(`  poll every ${r.probes.intervalSeconds} s; Ray within ${r.probes.rayTimeoutSeconds} s; endpoint within ${r.probes.endpointTimeoutSeconds} s`);
    section("memory per rank");
    out.push(...memoryTable.trimEnd().split("\n").map(l => `  ${l}`));
    section("policies");
    for (const v of r.policies)
        out.push(`  ${v.violations.length ? "FAIL" : "pass"}  ${v.policy} (${v.enforcementLevel})`, ...v.violations.map(m => `        ${m}`));
    return out.join("\n") + "\n";
}

export async function planCommand(args: string[]): Promise<number> {
    let stack: string | undefined;
    let json = false;
    let dir = process.cwd();
    for (let i = 0; i < args.length; i++) {
        if (args[i] === "--stack" || args[i] === "-s") stack = args[++i];
        else if (args[i] === "--json") json = true;
        else if (args[i] === "--dir") dir = args[++i];
        else {
            console.error(`unknown argument ${args[i]}\n${USAGE}`);
            return 2;
        }
    }
    if (!stack) {
        console.error(USAGE);
        return 2;
    }
    let plan: ClusterPlan;
    try {
        plan = planCluster(parseSpec(readStackFile(dir, stack)));
    } catch (err) {
        console.error(err instanceof SpecError ? `Pulumi.${stack}.yaml: ${err.message}` : String(err instanceof Error ? err.message : err));
        return 1;
    }
    const report = planReport(plan, stack);
    if (json) process.stdout.write(JSON.stringify(report, null, 2) + "\n");
    else process.stdout.write(renderText(report, renderMemoryPlan(report.memory)));
    const mandatoryFailed = report.policies.some(v => v.violations.length > 0 && v.enforcementLevel === "mandatory");
    return mandatoryFailed ? 1 : 0;
}
