// The pack without the engine: a plan as the resources the components would register, and every
// rule's verdict on them. Used by `spark-vllm plan` and by the stack tests.
import { ClusterPlan } from "../components/plan";
import { COMMAND, CONTAINER, REMOTE_IMAGE, UNKNOWN, policies } from "./rules";

export interface OfflineResource {
    type: string;
    name: string;
    urn: string;
    props: Record<string, any>;
}

export interface Verdict {
    policy: string;
    enforcementLevel: string;
    violations: string[];
}

/** The provider resources of a plan, with preview's unknowns where outputs feed inputs. */
export function planResources(plan: ClusterPlan, stack = "stack"): OfflineResource[] {
    const res = (type: string, name: string, props: Record<string, any>): OfflineResource =>
        ({ type, name, urn: `urn:pulumi:${stack}::spark-vllm::${type}::${name}`, props });
    const cmd = (name: string, c: { create: string; delete?: string; stdin?: string }) =>
        res(COMMAND, name, { create: c.create, ...(c.delete ? { delete: c.delete } : {}), ...(c.stdin ? { stdin: UNKNOWN } : {}) });
    return [
        ...plan.hosts.flatMap(h => [
            res(REMOTE_IMAGE, `${h.host.name}-image`, { name: h.container.image, platform: h.container.platform }),
            res(CONTAINER, `${h.host.name}-container`, {
                name: h.container.name, image: UNKNOWN, entrypoints: h.container.entrypoint, command: h.container.command,
                envs: h.container.env.map(([k, v]) => `${k}=${v}`), networkMode: h.container.networkMode, ipcMode: h.container.ipcMode,
                gpus: h.container.gpus, capabilities: { adds: h.container.capabilities }, devices: h.container.devices, ulimits: h.container.ulimits,
                labels: h.container.labels.map(([label, value]) => ({ label, value })),
            }),
            cmd(`${h.host.name}-preflight`, h.preflight),
            cmd(`${h.host.name}-ray`, h.rayLaunch),
        ]),
        cmd("ray-probe", plan.rayProbe), cmd("compat", plan.compat), cmd("launch", plan.vllmLaunch), cmd("probe", plan.endpointProbe),
    ];
}

/** Every rule's verdict on the resources, with the pack's default config. */
export function verdicts(resources: OfflineResource[]): Verdict[] {
    return policies.map(p => {
        const violations: string[] = [];
        const report = (m: string) => violations.push(m);
        if ("validateStack" in p && p.validateStack) p.validateStack({ resources, getConfig: () => ({}) } as any, report);
        else if ("validateResource" in p)
            for (const r of resources) for (const fn of [p.validateResource ?? []].flat()) fn({ ...r, getConfig: () => ({}) } as any, report);
        return { policy: p.name, enforcementLevel: p.enforcementLevel ?? "advisory", violations };
    });
}
