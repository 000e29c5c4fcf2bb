// Which stack a host's containers and processes belong to (issue 15, shared hosts). Pure: no Pulumi.
//
// Every container the program creates carries the owner's labels, and every process in it the owner's
// environment variable (`docker exec` runs with the container's environment). The preflight (and the helper
// program's install, before it writes anything) lists the host's labelled containers and refuses a host that
// another stack holds (components/hostProgram/spark_vllm/ownership.py). "Since when" is not a label: a time in an
// input would make every run a change. Docker records it on the host at create (the container's `Created`).
import { ClusterSpec } from "../spec/spec";

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

/** What the host-side check needs: who we are (the other side's model and served name come from its labels). */
export function ownerArgs(owner: Owner): Owner {
    return { project: owner.project, stack: owner.stack };
}

/**
 * The labels of every container: the owner and its model. A model change replaces the containers anyway in practice
 * (a variant is a stack), so the label costs nothing there.
 */
export function ownerLabels(owner: Owner, spec: ClusterSpec): Array<[string, string]> {
    return [
        [OWNER_LABELS.project, owner.project],
        [OWNER_LABELS.stack, owner.stack],
        [OWNER_LABELS.model, spec.model.id],
    ];
}

/**
 * The endpoint proxy's labels add the served name: renaming it replaces only the proxy (seconds), where on the hosts'
 * containers it would restart Ray and everything after it for a name.
 */
export function proxyOwnerLabels(owner: Owner, spec: ClusterSpec): Array<[string, string]> {
    return [...ownerLabels(owner, spec), [OWNER_LABELS.servedName, spec.model.servedName]];
}

export function ownerEnv(owner: Owner): [string, string] {
    return [OWNER_ENV, `${owner.project}/${owner.stack}`];
}
