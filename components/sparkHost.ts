import * as pulumi from "@pulumi/pulumi";
import * as docker from "@pulumi/docker";
import * as remote from "@pulumi/command/remote";
import { HostPlan } from "./plan/clusterPlan";
import { ResourceNames } from "./plan/naming";
import { Wiring } from "./wiring";
import { DOCKER_PROVIDER } from "./plan/resources";

/** @internal Built only by SparkCluster. */
export interface SparkHostArgs {
    /** This host's part of the plan (from `planCluster`). */
    plan: HostPlan;
    names: ResourceNames;
    wiring: Wiring;
}

/**
 * @internal One DGX Spark: its Docker provider over SSH, the helper program and the preflight facts.
 * The provider never pings the daemon (`disableDockerDaemonCheck`, in preview and update alike: a value
 * that differed between them would show the provider as changed in every pull-request preview); the
 * preflight checks Docker on the host with a better message before any Docker resource is touched.
 */
export class SparkHost extends pulumi.ComponentResource {
    readonly provider: docker.Provider;
    readonly preflight: remote.Command;
    /** Preflight facts (arch, GPU, driver, Docker, fabric, disk, memory) as parsed JSON. */
    readonly facts: pulumi.Output<Record<string, unknown>>;

    constructor(name: string, args: SparkHostArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:SparkHost", name, {}, opts);
        const { names, wiring } = args;
        const host = args.plan.host.name;
        const providerName = names.host(host, "docker");
        this.provider = wiring.set(providerName, new docker.Provider(providerName,
            wiring.entry(providerName, DOCKER_PROVIDER).inputs, { parent: this }));
        wiring.command(names.host(host, "tools"), { parent: this });
        this.preflight = wiring.command(names.host(host, "preflight"), { parent: this });
        this.facts = this.preflight.stdout.apply(lastJsonLine);
        this.registerOutputs({ facts: this.facts });
    }
}

/** Helper commands print one JSON object as their last stdout line. */
export function lastJsonLine(stdout: string): Record<string, unknown> {
    const last = stdout.trim().split("\n").pop() ?? "";
    try {
        const value = JSON.parse(last);
        return typeof value === "object" && value !== null ? value : { raw: stdout };
    } catch {
        return { raw: stdout };
    }
}

/** The "warnings" of a command's last JSON line (compat: a Ray without token auth; fabric: a slow link), for pulumi.log.warn. */
export function lastLineWarnings(stdout: string): string[] {
    const warnings = lastJsonLine(stdout).warnings;
    return Array.isArray(warnings) ? warnings.filter((w): w is string => typeof w === "string") : [];
}
