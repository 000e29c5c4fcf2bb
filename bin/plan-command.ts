// `spark-vllm plan --stack NAME [--json]`: what a stack would do, from its stack file alone.
// No hosts, no Pulumi CLI, no network.
import { linkLocalNotes } from "../components/spec/parseSpec";
import { EXIT, stackCommand } from "./shared";
import { ClusterPlan } from "../components/plan/clusterPlan";
import { cpuVllmSkips } from "../components/plan/hostCommands";
import { argvLine } from "../components/plan/scripts";
import { findModel } from "../components/knowledge/catalog";
import { planMemory, renderMemoryPlan } from "../components/plan/memory";
import { planResources, verdicts } from "../policies/offline";
import { COMMAND, plannedResources } from "../components/plan/resources";
import { replicaOf, replicaSummaries, rollingUpdateText } from "../components/plan/replicas";
import { fabricSetupNotes, planFabricSetup } from "../components/plan/fabricSetup";

const USAGE = "usage: spark-vllm plan --stack NAME [--json] [--dir DIR]";


export function planReport(plan: ClusterPlan, stack: string) {
    const spec = plan.spec;
    const memory = planMemory(spec, findModel(spec.model.id));
    return {
        stack,
        endpoint: plan.endpoint,
        model: spec.model,
        image: spec.image.reference,
        // What `up` warns about too: link-local fabric addresses (components/spec/parseSpec.ts linkLocalNotes).
        warnings: [...linkLocalNotes(spec), ...fabricSetupNotes(spec)],
        // spark-vllm:fabric.setup: each host's netplan drop-in (components/plan/fabricSetup.ts). Nothing writes or applies
        // it yet: it is shown for the owner to apply by hand (docs/deploy.md#the-fabric-declared-in-the-stack).
        fabricSetup: fabricSetupReport(spec),
        // testBed.cpuVllm only (a CPU vLLM test bed): the GPU steps the plan leaves out, and why.
        skipped: cpuVllmSkips(spec),
        hosts: plan.hosts.map(h => ({
            name: h.host.name,
            // Several replicas: the role is within the host's replica (each replica's first host is its head).
            ...(spec.replicas > 1 ? { replica: replicaOf(spec, h.host.name) } : {}),
            role: h.role,
            ssh: `${h.host.ssh.user}@${h.host.ssh.host}:${h.host.ssh.port}`,
            fabric: h.host.fabric,
            gpus: h.host.gpus,
            container: h.container,
            ...(h.rayStartArgv ? { rayStart: argvLine(h.rayStartArgv) } : {}),
            // The head's `vllm serve` serves the API; an mp worker runs its own, headless.
            vllmServe: argvLine(h.role === "head" ? replicaPlanOf(plan, h.host.name).vllmServeArgv : h.vllmServeArgv ?? []) || undefined,
        })),
        backend: plan.backend,
        // The replica groups (components/plan/replicas.ts), in the order a rolling update takes them, and what a relaunch does.
        replicas: replicaSummaries(plan),
        rollingUpdate: rollingUpdateText(replicaSummaries(plan), spec.rollout.drainSeconds),
        vllmServe: argvLine(plan.vllmServeArgv),
        // Every remote command, in the order they run (components/plan/resources.ts, the components' own entries).
        commands: plannedResources(plan).flatMap(r => r.type === COMMAND
            ? [{ name: r.name, host: r.host, ...(r.secretStdin ? { stdin: r.secretStdin } : {}), create: r.inputs.create, ...(r.inputs.delete ? { delete: r.inputs.delete } : {}) }] : []),
        probes: spec.probes,
        memory,
        policies: verdicts(planResources(plan, stack)),
    };
}

/** The drop-in per host and the twins of each host pair, or undefined with spark-vllm:fabric.setup off. */
function fabricSetupReport(spec: ClusterPlan["spec"]) {
    const plan = planFabricSetup(spec);
    if (!plan) return undefined;
    return {
        applied: false as const,
        hosts: plan.hosts.map(h => ({ host: h.host, path: h.path, mode: `0${h.mode.toString(8)}`, yaml: h.yaml, links: h.links })),
        pairs: plan.pairs,
    };
}

/** The plan of the replica a host serves in (the plan itself with one replica). */
function replicaPlanOf(plan: ClusterPlan, host: string): ClusterPlan {
    return (plan.replicas ?? [plan]).find(r => r.hosts.some(h => h.host.name === host)) ?? plan;
}

function renderText(r: ReturnType<typeof planReport>, memoryTable: string): string {
    const out: string[] = [];
    const section = (title: string) => out.push("", `== ${title}`);
    const command = (label: string, c: { create: string; delete?: string; stdin?: string }) => {
        out.push(`  ${label}${c.stdin ? ` (${c.stdin} on stdin)` : ""}:`);
        out.push(...c.create.split("\n").map(l => `    ${l}`));
        if (c.delete) out.push("    on delete:", ...c.delete.split("\n").map(l => `      ${l}`));
    };
    out.push(`stack ${r.stack}: ${r.model.id} as "${r.model.servedName}" on ${r.hosts.length} Spark${r.hosts.length === 1 ? "" : "s"}`);
    out.push(`endpoint ${r.endpoint} (API key generated, secret)`, `image ${r.image}`);
    section("hosts");
    for (const h of r.hosts)
        out.push(`  ${h.name} (${h.replica ? `replica ${h.replica} ` : ""}${h.role}) ssh ${h.ssh}, ${h.gpus} GPU, fabric ${h.fabric.interface} ${h.fabric.address}, HCAs ${h.fabric.hcas.join(", ") || "none (TCP)"}`);
    for (const w of r.warnings) out.push(`  warning: ${w}`);
    if (r.skipped.length) {
        section("skipped: spark-vllm:testBed.cpuVllm (a CPU vLLM test bed, not a Spark)");
        for (const s of r.skipped) out.push(`  ${s.step}: ${s.why}`);
    }
    if (r.fabricSetup) {
        section("fabric setup (spark-vllm:fabric.setup): NOT applied by spark-vllm yet; apply each drop-in by hand (docs/deploy.md)");
        for (const h of r.fabricSetup.hosts) {
            out.push(`  ${h.host}: ${h.path} (mode ${h.mode}), then \`sudo netplan apply\``);
            out.push(...h.yaml.trimEnd().split("\n").map(l => `    ${l}`));
        }
        for (const p of r.fabricSetup.pairs)
            out.push(`  ${p.hosts.join(" <-> ")}: ${p.twins.map(t => `${t.subnet ?? "link-local"} (${t.ends.map(e => `${e.host} ${e.interface}${e.address ? ` ${e.address}` : ""}`).join(", ")})`).join("; ")}`);
    }
    section("containers");
    for (const h of r.hosts) {
        const c = h.container;
        out.push(`  ${c.name} on ${h.name}: ${c.image} (${c.platform}), network ${c.networkMode}, ipc ${c.ipcMode}, gpus ${c.gpus}, shm ${c.shmSizeMb} MiB`);
        out.push(`    env: ${c.env.map(([k, v]) => `${k}=${v}`).join(" ")}`);
        out.push(`    mounts: ${c.mounts.map(m => m.hostPath).join(", ")}; devices: ${c.devices.map(d => d.hostPath).join(", ") || "none"}`);
        out.push(`    ulimits: ${c.ulimits.map(u => `${u.name}=${u.soft}`).join(", ")}; caps: ${c.capabilities.join(", ")}`);
    }
    section(`backend: ${r.backend === "ray" ? "Ray" : r.backend === "mp" ? "vLLM's multi-node launch (mp), no Ray" : "one host, no Ray"}`);
    for (const h of r.hosts) {
        if (h.rayStart) out.push(`  ${h.name}: ${h.rayStart}`);
        if (h.vllmServe) out.push(`  ${h.name}: ${h.vllmServe}`);
    }
    section(r.replicas.length > 1 ? `replicas: ${r.replicas.length} behind the one endpoint (the proxy on ${r.replicas[0].head})` : "replicas: 1");
    for (const g of r.replicas) out.push(`  replica ${g.replica}: ${g.hosts.join(", ")}; head ${g.head}, ${g.leader}`);
    out.push(`  rolling update: ${r.rollingUpdate}`);
    section("commands, in order");
    for (const c of r.commands) command(`${c.name} on ${c.host}`, c);
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
    const loaded = stackCommand("plan", USAGE, args);
    if (typeof loaded === "number") return loaded;
    const { stack, json, plan } = loaded;
    const report = planReport(plan, stack);
    if (json) process.stdout.write(JSON.stringify(report, null, 2) + "\n");
    else process.stdout.write(renderText(report, renderMemoryPlan(report.memory)));
    const mandatoryFailed = report.policies.some(v => v.violations.length > 0 && v.enforcementLevel === "mandatory");
    return mandatoryFailed ? EXIT.policy : EXIT.ok;
}
