// Which stack a host's containers and processes belong to (issue 15, shared hosts). Pure: no Pulumi.
//
// Every container the program creates carries the owner's labels, and every process in it the owner's
// environment variable (`docker exec` runs with the container's environment). The preflight (and the helper
// program's install, before it writes anything) lists the host's labelled containers and refuses a host that
// another stack holds (components/remote/spark_vllm/ownership.py). "Since when" is not a label: a time in an
// input would make every run a change. Docker records it on the host at create (the container's `Created`).
import { ClusterSpec } from "./spec";

/** The Pulumi project and stack a cluster belongs to (pulumi.getProject() / pulumi.getStack()). */
export interface Owner {
    project: string;
    stack: string;
}

/** Docker label keys (reverse-DNS style, as Docker's object-labels guide recommends for third-party tools). */
export const OWNER_LABELS = {
    project: "spark-vllm.project",
    stack: "spark-vllm.stack",
    model: "spark-vllm.model",
    servedName: "spark-vllm.served-name",
} as const;

/** In every container's environment, so every Ray and vLLM process started by `docker exec` carries it: `<project>/<stack>`. */
export const OWNER_ENV = "SPARK_VLLM_STACK";

/** What the host-side check needs: who we are, and what we serve (for the other side's message). */
export interface OwnerArgs {
    project: string;
    stack: string;
    model: string;
    servedName: string;
}

export function ownerArgs(owner: Owner, spec: ClusterSpec): OwnerArgs {
    return { project: owner.project, stack: owner.stack, model: spec.model.id, servedName: spec.model.servedName };
}

/** The owner's labels, in a stable order. */
export function ownerLabels(owner: Owner, spec: ClusterSpec): Array<[string, string]> {
    const a = ownerArgs(owner, spec);
    return [
        [OWNER_LABELS.project, a.project],
        [OWNER_LABELS.stack, a.stack],
        [OWNER_LABELS.model, a.model],
        [OWNER_LABELS.servedName, a.servedName],
    ];
}

export function ownerEnv(owner: Owner): [string, string] {
    return [OWNER_ENV, `${owner.project}/${owner.stack}`];
}
