// `pulumi up --refresh`: before the program runs, each resource in the state is read by its provider and the state
// becomes what the provider says (pulumi/pulumi@1b59498 pkg/resource/deploy/deployment_executor.go `refresh`: one
// RefreshStep per resource of the old snapshot, run in parallel, then rebuildBaseState; the CLI's `--run-program`
// defaults to false). The rules here are pure: what each provider's Read makes of an entry, given what the host says.
import { Entry, stable } from "./state";

/** What a container's inspect says (docker `ContainerList(All)` then `ContainerInspect`), or undefined: no such container. */
export interface LiveContainer {
    id: string;
    running: boolean;
    exitCode: number;
    /** HostConfig.CapAdd as the daemon stores it (normalized with the CAP_ prefix). */
    capAdd: string[];
}

/** What an image's inspect says (`ImageInspect(name)`), or undefined: not on the host. */
export interface LiveImage {
    id: string;
    repoDigests: string[];
}

/** One refresh step's result, as `pulumi up --refresh` shows it (step.go RefreshStep.ResultOp). */
export type RefreshOp = "same" | "update" | "delete";

/** One refresh step, as `Report.refresh` lists it. */
export interface RefreshStep {
    urn: string;
    type: string;
    name: string;
    op: RefreshOp;
}

/** What the host must be asked about an entry: its container, its image, or nothing (the provider's Read asks nothing). */
export function readKind(e: Entry): "container" | "image" | undefined {
    // Components, providers and pending replacements never change with a refresh (step.go RefreshStep.Apply).
    switch (e.type) {
        case "docker:index/container:Container": return "container";
        case "docker:index/remoteImage:RemoteImage": return "image";
        // remote.Command (pulumi-command v1.2.1 commandController.go) implements no infer.CustomRead, so
        // pulumi-go-provider v1.3.0 infer/resource.go Read returns the ID, state and inputs as they are; the random
        // provider's random_password Read is empty (hashicorp/terraform-provider-random v3.6.0–v3.9.0
        // internal/provider/resource_password.go); pulumi:providers:* are skipped by the engine itself.
        default: return undefined;
    }
}

/**
 * docker_container Read (kreuzwerker/terraform-provider-docker v4.5.0, the provider @pulumi/docker 5.2.0 bridges:
 * internal/provider/resource_docker_container_funcs.go resourceDockerContainerRead): not in the container list →
 * SetId("") (the engine drops it from the state: the update creates it again); stopped while `must_run` is true →
 * `exit_code` read and `must_run` set to false in the state ("Setting must_run to false in state to trigger update"),
 * and the bridge returns the inputs it extracts from that state, so the program's `mustRun: true` is an update, which
 * starts the same container (resourceDockerContainerUpdate: must_run false → true and `start` → ContainerStart).
 * Since v4.0.0 (commit 0eeb0feb, #841); v3.x (@pulumi/docker 4.x) instead waited for it to run, then deleted it and
 * failed the refresh (v3.9.0 resourceDockerContainerRead: errContainerFailedToBeInRunningState).
 */
export function readContainer(e: Entry, live: LiveContainer | undefined): Entry | undefined {
    if (!live) return undefined;
    // `capabilities.add` is read back from HostConfig.CapAdd as the daemon stores it (resourceDockerContainerRead:
    // d.Set("capabilities", … "add": container.HostConfig.CapAdd), which dockerd normalizes to CAP_… (docker/docker
    // v28.3.0 oci/caps/utils.go NormalizeLegacyCapabilities): an input "IPC_LOCK" reads back as "CAP_IPC_LOCK"
    // (seen on the real provider: issue 37).
    const read = e.inputs.capabilities?.adds !== undefined && live.capAdd.length > 0
        ? { ...e, inputs: { ...e.inputs, capabilities: { ...e.inputs.capabilities, adds: live.capAdd } } }
        : e;
    // must_run defaults to true; the bridge's refresh updates only the inputs already present (pulumi-terraform-bridge
    // v3.133.0 pkg/tfbridge/provider.go Read → schema.go ExtractInputsFromOutputs with isRefresh).
    if (live.running || (e.outputs.mustRun ?? e.inputs.mustRun ?? true) === false) return read;
    const inputs = "mustRun" in read.inputs ? { ...read.inputs, mustRun: false } : read.inputs;
    return { ...read, inputs, outputs: { ...read.outputs, mustRun: false, exitCode: live.exitCode } };
}

/**
 * docker_image Read (v4.5.0 internal/provider/resource_docker_image_funcs.go resourceDockerImageRead): the image
 * `name` not found on the host → SetId("") (pulled again by the update); else `image_id` and `repo_digest` as the host
 * has them now, and the id `<image id><name>`.
 */
export function readImage(e: Entry, live: LiveImage | undefined): Entry | undefined {
    if (!live) return undefined;
    const repoDigest = repoDigestOf(e.inputs.name, live.repoDigests);
    return { ...e, id: `${live.id}${e.inputs.name}`, outputs: { ...e.outputs, imageId: live.id, repoDigest } };
}

/**
 * determineRepoDigest (v4.5.0 internal/provider/data_source_docker_image.go): none → ""; one → it; several → the first
 * that starts with the name cut at its first ":", else the first.
 */
export function repoDigestOf(name: string, repoDigests: string[]): string {
    if (repoDigests.length === 0) return "";
    if (repoDigests.length === 1) return repoDigests[0];
    const colon = name.indexOf(":");
    const withoutTag = colon === -1 ? name : name.slice(0, colon);
    return repoDigests.find(d => d.startsWith(withoutTag)) ?? repoDigests[0];
}

/**
 * The refresh step's result (step.go RefreshStep.ResultOp): gone is a delete; otherwise the provider's diff of the old
 * inputs against the refreshed state, which for these providers sees only inputs (a refreshed computed output such as
 * `repoDigest` alone is no change).
 */
export function refreshOp(before: Entry, after: Entry | undefined): RefreshOp {
    if (!after) return "delete";
    return stable(before.inputs) === stable(after.inputs) ? "same" : "update";
}
