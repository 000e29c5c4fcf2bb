import * as pulumi from "@pulumi/pulumi";
import * as docker from "@pulumi/docker";
import { types } from "@pulumi/command";
import * as remote from "@pulumi/command/remote";
import { HostPlan } from "./plan";
import { sshConnection } from "./connection";

export interface SparkHostArgs {
    /** This host's part of the plan (from `planCluster`). */
    plan: HostPlan;
    /** SSH private key for remote commands. Default: the ssh-agent at SSH_AUTH_SOCK. */
    sshPrivateKey?: pulumi.Input<string>;
    /**
     * Skip the Docker provider's daemon ping. Default: true, in preview and update alike: a preview
     * must run with no path to the host, and a value that differed between preview and update would
     * show the provider as changed in every pull-request preview. The preflight checks Docker on
     * the host (with a better message) before any Docker resource is touched.
     */
    disableDockerDaemonCheck?: boolean;
}

/** One DGX Spark: its Docker provider over SSH, the helper program and the preflight facts. */
export class SparkHost extends pulumi.ComponentResource {
    readonly provider: docker.Provider;
    readonly connection: types.input.remote.ConnectionArgs;
    readonly preflight: remote.Command;
    /** Preflight facts (arch, GPU, driver, Docker, fabric, disk, memory) as parsed JSON. */
    readonly facts: pulumi.Output<Record<string, unknown>>;

    constructor(name: string, args: SparkHostArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:SparkHost", name, {}, opts);
        const { host, tools, preflight } = args.plan;
        this.connection = sshConnection(host, args.sshPrivateKey);
        this.provider = new docker.Provider(`${name}-docker`, {
            host: `ssh://${host.ssh.user}@${host.ssh.host}:${host.ssh.port}`,
            sshOpts: ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=15"],
            disableDockerDaemonCheck: args.disableDockerDaemonCheck ?? true,
        }, { parent: this });
        const toolsCmd = new remote.Command(`${name}-tools`, {
            connection: this.connection,
            create: tools.create,
            delete: tools.delete,
            stdin: tools.content,
            triggers: [tools.create, tools.content],
        }, { parent: this, deleteBeforeReplace: true });
        this.preflight = new remote.Command(`${name}-preflight`, {
            connection: this.connection,
            create: preflight.create,
            triggers: [preflight.create],
        }, { parent: this, dependsOn: [toolsCmd] });
        this.facts = this.preflight.stdout.apply(parseFacts);
        this.registerOutputs({ facts: this.facts });
    }
}

/** The preflight prints one JSON object as its last stdout line. */
export function parseFacts(stdout: string): Record<string, unknown> {
    const last = stdout.trim().split("\n").pop() ?? "";
    try {
        const value = JSON.parse(last);
        return typeof value === "object" && value !== null ? value : { raw: stdout };
    } catch {
        return { raw: stdout };
    }
}
