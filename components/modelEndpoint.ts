import * as pulumi from "@pulumi/pulumi";
import * as remote from "@pulumi/command/remote";
import { ResourceNames } from "./naming";
import { Wiring } from "./wiring";

/** @internal Built only by SparkCluster. */
export interface ModelEndpointArgs {
    names: ResourceNames;
    wiring: Wiring;
    /** The API key vLLM requires; it only ever travels through stdin. */
    apiKey: pulumi.Input<string>;
}

/** @internal `vllm serve` on the head, and the probe that proves the endpoint answers a completion. */
export class ModelEndpoint extends pulumi.ComponentResource {
    readonly launch: remote.Command;
    readonly probe: remote.Command;

    constructor(name: string, args: ModelEndpointArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:ModelEndpoint", name, {}, opts);
        const { names, wiring } = args;
        const keyLine = pulumi.secret(pulumi.output(args.apiKey).apply(k => `${k}\n`));
        this.launch = wiring.command(names.of("vllm-launch"), { parent: this }, keyLine);
        this.probe = wiring.command(names.of("endpoint-probe"), { parent: this }, keyLine);
        this.registerOutputs({ probe: this.probe.stdout });
    }
}
