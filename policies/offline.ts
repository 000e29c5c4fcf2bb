// The pack without the engine: a plan as the resources the components would register, and every
// rule's verdict on them. Used by `spark-vllm plan` and by the stack tests.
import { ClusterPlan } from "../components/plan/clusterPlan";
import { UNKNOWN, policies } from "./rules";
import { COMMAND, CONTAINER, GATE, plannedResources } from "../components/plan/resources";

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

/**
 * The provider resources of a plan as a preview shows them to the pack: what comes from other
 * resources' outputs (a container's image digest, the API key on stdin) is unknown.
 */
export function planResources(plan: ClusterPlan, stack = "stack"): OfflineResource[] {
    return plannedResources(plan).filter(r => r.type !== GATE).map(r => {
        const props: Record<string, any> = { ...r.inputs };
        if (r.type === CONTAINER) props.image = UNKNOWN;
        if (r.type === COMMAND && r.secretStdin) props.stdin = UNKNOWN;
        return { type: r.type, name: r.name, urn: `urn:pulumi:${stack}::spark-vllm::${r.type}::${r.name}`, props };
    });
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
