// How to relaunch what a plain `pulumi up` will not: the launches are remote commands, which the command provider
// never reads back (no Read), so a vLLM or Ray process that died after its launch succeeded stays dead through any
// number of `pulumi up`s with no change. `pulumi up --replace URN` replaces a resource whatever its inputs
// (pulumi/pulumi pkg/resource/deploy/step_generator.go isTargetedReplace) and may be given several times; a URN not
// in the stack fails the whole up before anything runs (deployment_executor.go checkTargets). Which URNs:
// components/resources.ts section 8 — every host's memory gate (delete-before-replace: stops vLLM, drops the page
// cache, checks free memory) is in the vLLM launch's replacedBy, every headless launch follows the head's, and the
// probe follows the launches; a host's Ray launch is in the Ray probe's replacedBy, which the gates follow.
// tests/e2e/relaunch.test.ts runs it. Pure: no Pulumi.
import { Owner } from "./ownership";
import { resourceNames } from "./naming";
import { shq } from "./scripts";

/** The parent chain of each component's commands under index.ts's SparkCluster (pinned: tests/unit/fixtures/stack-urns.json). */
const PARENTS = { ModelEndpoint: "spark-vllm:index:SparkCluster$spark-vllm:index:ModelEndpoint", RayCluster: "spark-vllm:index:SparkCluster$spark-vllm:index:RayCluster" };

/** A remote command's URN (urn.New: `urn:pulumi:STACK::PROJECT::PARENT-TYPES$TYPE::NAME`, sdk/go/common/resource/urn/urn.go). */
function commandUrn(owner: Owner, parent: keyof typeof PARENTS, name: string): string {
    return `urn:pulumi:${owner.stack}::${owner.project}::${PARENTS[parent]}$command:remote:Command::${name}`;
}

/** Every host's memory gate: replacing them all relaunches vLLM everywhere, after a clean memory check. */
export function memoryGateUrns(owner: Owner, hosts: string[]): string[] {
    const n = resourceNames();
    return hosts.map(h => commandUrn(owner, "ModelEndpoint", n.host(h, "memory")));
}

/** A host's Ray launch (the head's is ray-head): replacing it re-forms Ray there, then relaunches vLLM. */
export function rayLaunchUrn(owner: Owner, host: string, head: boolean): string {
    const n = resourceNames();
    return commandUrn(owner, "RayCluster", head ? n.of("ray-head") : n.host(host, "ray"));
}

/** `pulumi up -s STACK --replace 'URN' …`, each URN quoted for a POSIX shell. */
export function replaceCommand(owner: Owner, urns: string[]): string {
    return [`pulumi up -s ${shq(owner.stack)}`, ...urns.map(u => `--replace ${shq(u)}`)].join(" ");
}
