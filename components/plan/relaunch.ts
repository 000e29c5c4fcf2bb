// How to relaunch what a plain `pulumi up` will not: the launches are remote commands, which the command provider
// never reads back (no Read), so a vLLM or Ray process that died after its launch succeeded stays dead through any
// number of `pulumi up`s with no change. `pulumi up --replace URN` replaces a resource whatever its inputs
// (pulumi/pulumi pkg/resource/deploy/step_generator.go isTargetedReplace) and may be given several times; a URN not
// in the stack fails the whole up before anything runs (deployment_executor.go checkTargets). Which URNs:
// components/plan/resources.ts section 8 — every host's memory gate (delete-before-replace: stops vLLM, drops the page
// cache, checks free memory) is in the vLLM launch's replacedBy, every headless launch follows the head's, and the
// probe follows the launches; a host's Ray launch is in the Ray probe's replacedBy, which the gates follow.
// The endpoint probe (hostCommands.ts) and `spark-vllm status` (status.ts) print these; tests/e2e/relaunch.test.ts runs them.
// Pure: no Pulumi.
import { Owner } from "./ownership";
import { resourceNames } from "./naming";
import { shq } from "./scripts";

/** The parent chain of each component's commands under index.ts's SparkCluster (pinned: tests/unit/fixtures/stack-urns.json). */
const PARENTS = {
    ModelEndpoint: "spark-vllm:index:SparkCluster$spark-vllm:index:ModelEndpoint",
    RayCluster: "spark-vllm:index:SparkCluster$spark-vllm:index:RayCluster",
    SparkHost: "spark-vllm:index:SparkCluster$spark-vllm:index:SparkHost",
};

/** A remote command's URN (urn.New: `urn:pulumi:STACK::PROJECT::PARENT-TYPES$TYPE::NAME`, sdk/go/common/resource/urn/urn.go). */
function commandUrn(owner: Owner, parent: keyof typeof PARENTS, name: string): string {
    return `urn:pulumi:${owner.stack}::${owner.project}::${PARENTS[parent]}$command:remote:Command::${name}`;
}

/** Every host's memory gate (components/plan/resources.ts section 8), in the hosts' order. */
export function memoryGateUrns(owner: Owner, hosts: string[]): string[] {
    const n = resourceNames();
    return hosts.map(h => commandUrn(owner, "ModelEndpoint", n.host(h, "memory")));
}

/** A host's helper program install (components/plan/hostCommands.ts toolsInstall): replacing it writes the program and its pin again. */
export function toolsUrn(owner: Owner, host: string): string {
    return commandUrn(owner, "SparkHost", resourceNames().host(host, "tools"));
}

/** The command whose `create` wrote a host's launch record (components/plan/launches.ts LaunchRecord.name); undefined for another name. */
export function launchUrn(owner: Owner, host: string, head: boolean, launch: string, replica?: number): string | undefined {
    // Several replicas: a replica's head launches are named per replica (naming.ts REPLICA_ROLES).
    const n = resourceNames(undefined, replica);
    if (launch === "vllm") return commandUrn(owner, "ModelEndpoint", head ? n.of("vllm-launch") : n.host(host, "vllm"));
    if (launch === "ray") return commandUrn(owner, "RayCluster", head ? n.of("ray-head") : n.host(host, "ray"));
    return undefined;
}

/**
 * What relaunches LAUNCH on HOST: vLLM (the head's or an mp worker's), every host's memory gate, never the launch alone
 * (that would skip the gates, and a `startup-free-memory` would come back); Ray, that host's Ray launch.
 */
export function relaunchUrns(owner: Owner, hosts: string[], host: string, head: boolean, launch: string, replica?: number): string[] | undefined {
    if (launch === "vllm") return memoryGateUrns(owner, hosts);
    const urn = launchUrn(owner, host, head, launch, replica);
    return urn ? [urn] : undefined;
}

/**
 * `pulumi up -s STACK --replace 'URN' …`, each word quoted for a POSIX shell (`--replace urn1 --replace urn2`:
 * https://www.pulumi.com/docs/iac/cli/commands/pulumi_up/).
 */
export function replaceCommand(owner: Owner, urns: string[]): string {
    return [`pulumi up -s ${shq(owner.stack)}`, ...urns.map(u => `--replace ${shq(u)}`)].join(" ");
}
