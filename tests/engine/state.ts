// The test engine's state file (resources keyed by URN, as the real engine's snapshot is) and the diff rules of
// the real engine and providers.
import * as fs from "fs";

export interface Entry {
    /** The key: urn.New's URN (stack, project, parent type chain, type, name), as the real engine keys its state. */
    urn: string;
    type: string;
    name: string;
    /** The URNs its registration depended on (dependsOn and the resources behind its inputs), and per input property. */
    dependencies: string[];
    propertyDependencies?: Record<string, string[]>;
    deleteBeforeReplace?: boolean;
    /** Its provider reference, `<provider urn>::<provider id>`. */
    provider?: string;
    id: string;
    inputs: Record<string, any>;
    outputs: Record<string, any>;
    /** DOCKER_HOST of the provider a docker resource was created through. */
    dockerHost?: string;
    /** That provider's sshOpts (OpenSSH options, e.g. a pinned host key). */
    dockerSshOpts?: string[];
    /** Registration order in the last run: dependencies come first, so deletes go in reverse. */
    seq: number;
}

export interface State {
    resources: Record<string, Entry>;
    /**
     * Old copies of resources replaced create-before-delete, deleted after every create and update (a snapshot keeps
     * them as `delete: true` until then, so a failed update leaves them for the next one).
     */
    pendingDeletes?: Entry[];
}

export type OpKind = "create" | "update" | "replace" | "delete" | "same";

export interface Op {
    op: OpKind;
    urn?: string;
    type: string;
    name: string;
    /** Remote commands and docker operations this step ran. */
    actions: number;
    startMs: number;
    endMs: number;
    failed?: boolean;
}

/** The state's entry of the resource with this type and name (for tests that edit a state file by hand). */
export function findEntry(state: State, type: string, name: string): Entry | undefined {
    return Object.values(state.resources).find(e => e.type === type && e.name === name);
}

export function loadState(file: string): State {
    return fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) : { resources: {} };
}

export function saveState(file: string, state: State): void {
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(state, null, 1));
    fs.renameSync(`${file}.tmp`, file);
}

/** Key-order independent JSON, so equal inputs compare equal. */
export function stable(value: unknown): string {
    return JSON.stringify(value, (_k, v) =>
        v && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.keys(v).sort().map(k => [k, v[k]])) : v);
}

/** What the engine would do with a resource given its old state and new inputs. */
export function diff(type: string, old: Entry | undefined, inputs: Record<string, any>): OpKind {
    if (!old) return "create";
    if (stable(old.inputs) === stable(inputs)) return "same";
    switch (type) {
        case "command:remote:Command":
            // Only triggers force replacement; any other change runs update (or create again).
            return stable(old.inputs.triggers) !== stable(inputs.triggers) ? "replace" : "update";
        case "docker:index/remoteImage:RemoteImage":
            // ForceNew: name, platform, pull_triggers, triggers, build (terraform-provider-docker v4.5.0
            // internal/provider/resource_docker_image.go); keep_locally and force_remove update in place.
            return ["name", "platform", "pullTriggers", "triggers", "build"].some(k => stable(old.inputs[k]) !== stable(inputs[k])) ? "replace" : "update";
        case "pulumi:providers:docker":
            return "update";
        case "docker:index/container:Container":
            return changedKeys(old.inputs, inputs).every(k => CONTAINER_IN_PLACE.has(k)) ? "update" : "replace";
        default:
            // Passwords regenerate (every random_password attribute RequiresReplace).
            return "replace";
    }
}

/** The top-level inputs whose values differ (an input present on one side only counts). */
export function changedKeys(olds: Record<string, any>, news: Record<string, any>): string[] {
    return [...new Set([...Object.keys(olds), ...Object.keys(news)])].filter(k => stable(olds[k]) !== stable(news[k]));
}

/**
 * docker.Container inputs without ForceNew (kreuzwerker/terraform-provider-docker v4.5.0, bridged by @pulumi/docker
 * 5.2.0: internal/provider/resource_docker_container.go): a change to only these is an update of the same container
 * (resourceDockerContainerUpdate); any other input (image, env, mounts, devices, command, shm…) replaces it.
 */
export const CONTAINER_IN_PLACE = new Set(["rm", "start", "wait", "waitTimeout", "attach", "logs", "mustRun", "restart", "maxRetryCount",
    "removeVolumes", "tmpfs", "deviceReadBps", "deviceReadIops", "deviceWriteBps", "deviceWriteIops", "destroyGraceSeconds", "memory",
    "memoryReservation", "memorySwap", "cpuShares", "cpuSet", "healthcheck", "containerReadRefreshTimeoutMilliseconds", "init", "cpuPeriod", "cpuQuota"]);
