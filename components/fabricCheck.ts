import * as pulumi from "@pulumi/pulumi";
import * as remote from "@pulumi/command/remote";
import { ClusterPlan } from "./plan/clusterPlan";
import { ResourceNames } from "./plan/naming";
import { Wiring } from "./wiring";
import { lastJsonLine, lastLineWarnings } from "./sparkHost";

/** @internal Built only by SparkCluster. */
export interface FabricCheckArgs {
    plan: ClusterPlan;
    names: ResourceNames;
    wiring: Wiring;
}

/**
 * @internal The fabric, proven before any Ray or vLLM launch: one NCCL all-reduce rank per host in its container,
 * all at once (components/hostProgram/spark_vllm/fabric.py). Fails when HCAs are configured but NCCL used sockets.
 */
export class FabricCheck extends pulumi.ComponentResource {
    /** Per host, in plan order. */
    readonly ranks: remote.Command[];
    /** The head's (rank 0's) verdict: transport, bus bandwidth per size, NCCL's own lines. */
    readonly result: pulumi.Output<Record<string, unknown>>;

    constructor(name: string, args: FabricCheckArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:FabricCheck", name, {}, opts);
        const { plan, names, wiring } = args;
        this.ranks = plan.hosts.filter(h => h.fabricRank).map(h => wiring.command(names.host(h.host.name, "fabric"), { parent: this }));
        this.result = this.ranks[0].stdout.apply(lastJsonLine);
        // A slow fabric still serves, so it is a warning `pulumi up` shows, not a failure (fabric.py bandwidth_warning).
        this.ranks.forEach(rank => rank.stdout.apply(out => lastLineWarnings(out).forEach(w => pulumi.log.warn(w, rank))));
        this.registerOutputs({ fabric: this.result });
    }
}

