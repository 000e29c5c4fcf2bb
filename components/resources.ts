// The provider resources the components register for a plan, as plain data, and which resource is
// replaced along with which (the trigger wiring). Pure. The offline policy verdicts and
// `spark-vllm diff` read it; tests/unit/diff-cli.test.ts checks it against the real program under mocks.
import { ClusterPlan, CommandPlan } from "./plan";
import { HostSpec } from "./spec";
import { sshConnection, sshTarget } from "./connection";

/** The name index.ts gives the SparkCluster; every resource name starts with it. */
export const CLUSTER = "spark";
export const COMMAND = "command:remote:Command";
export const CONTAINER = "docker:index/container:Container";
export const IMAGE = "docker:index/remoteImage:RemoteImage";

export interface PlannedResource {
    name: string;
    type: string;
    /** The inputs the component passes, as plain data; for commands `triggers` holds only the plan's part. */
    inputs: Record<string, unknown>;
    /** Resources whose replacement replaces this one (their id is in its triggers, or its image is theirs). */
    replacedWith: string[];
    /** The secret the component pipes to this command's stdin (not in `inputs`: its value is never plain data). */
    secretStdin?: CommandPlan["stdin"];
}

/**
 * Who is replaced with whom, as wired in components/*.ts:
 * container ← every host's image (its image input waits for their agreement); tools, preflight: own text only;
 * weights ← its container (a worker's also ← the weights source); weights source (head-then-copy) ← head container;
 * compat ← head container and every host's weights (its triggers hold their manifests' fingerprint, unknown at
 * preview when they rerun); ray head launch ← head container; worker launch ← its container and the head launch;
 * ray probe ← head launch and worker launches; vLLM launch ← ray probe and the API key (its digest);
 * endpoint probe ← vLLM launch.
 */
export function triggerWiring(plan: ClusterPlan): Record<string, string[]> {
    const h = (name: string) => `${CLUSTER}-${name}`;
    const head = plan.head.host.name;
    const workers = plan.hosts.slice(1).map(w => w.host.name);
    const source = plan.weightsSource;
    return {
        // The image input waits for every host's image to agree, so at preview it follows all of them.
        ...Object.fromEntries(plan.hosts.map(x => [h(`${x.host.name}-container`), plan.hosts.map(y => h(`${y.host.name}-image`))])),
        ...Object.fromEntries(plan.hosts.map((x, i) => [h(`${x.host.name}-weights`), [h(`${x.host.name}-container`), ...(i > 0 && source ? [h("weights-source")] : [])]])),
        [h("weights-source")]: [h(`${head}-container`)],
        [h("model-compat")]: [h(`${head}-container`), ...plan.hosts.map(x => h(`${x.host.name}-weights`))],
        [h("ray-head-launch")]: [h(`${head}-container`)],
        ...Object.fromEntries(workers.map(w => [h(`ray-${w}-launch`), [h(`${w}-container`), h("ray-head-launch")]])),
        [h("ray-head-probe")]: [h("ray-head-launch"), ...workers.map(w => h(`ray-${w}-launch`))],
        [h("model-launch")]: [h("ray-head-probe"), h("api-key")],
        [h("model-probe")]: [h("model-launch")],
    };
}

/** The repo digest a pull of the reference reports: repository@digest. */
const repoDigest = (reference: string) => reference.replace(/:[^/@]*@/, "@");

/** Every provider resource the program registers for a plan, with the inputs that come from config. */
export function plannedResources(plan: ClusterPlan): PlannedResource[] {
    const wiring = triggerWiring(plan);
    const out: PlannedResource[] = [];
    const add = (name: string, type: string, inputs: Record<string, unknown>, secretStdin?: CommandPlan["stdin"]) =>
        out.push({ name: `${CLUSTER}-${name}`, type, inputs, replacedWith: wiring[`${CLUSTER}-${name}`] ?? [], ...(secretStdin ? { secretStdin } : {}) });
    const cmd = (name: string, connection: unknown, c: CommandPlan, extra: Record<string, unknown> = {}) =>
        add(name, COMMAND, { connection, create: c.create, ...(c.delete ? { delete: c.delete } : {}), triggers: [c.create], ...extra }, c.stdin);
    const headConn = sshConnection(plan.head.host);
    add("api-key", "random:index/randomPassword:RandomPassword", { length: 40, special: false });
    for (const h of plan.hosts) {
        const n = h.host.name, c = h.container, conn = sshConnection(h.host);
        add(`${n}-docker`, "pulumi:providers:docker", { host: `ssh://${h.host.ssh.user}@${h.host.ssh.host}:${h.host.ssh.port}` });
        cmd(`${n}-tools`, conn, h.tools, { stdin: h.tools.content, triggers: [h.tools.create, h.tools.content] });
        cmd(`${n}-preflight`, conn, h.preflight);
        // imageSource head: a command on the head copies the image; else the provider pulls it.
        if (h.imageFromHead) cmd(`${n}-image`, headConn, h.imageFromHead);
        else add(`${n}-image`, IMAGE, { name: c.image, platform: c.platform, keepLocally: true });
        add(`${n}-container`, CONTAINER, {
            name: c.name, image: h.imageFromHead ? c.image : repoDigest(c.image), entrypoints: c.entrypoint, command: c.command,
            envs: c.env.map(([k, v]) => `${k}=${v}`), networkMode: c.networkMode, ipcMode: c.ipcMode, gpus: c.gpus,
            init: c.init, shmSize: c.shmSizeMb, ulimits: c.ulimits, capabilities: { adds: c.capabilities }, devices: c.devices,
            mounts: c.mounts.map(m => ({ type: "bind", source: m.hostPath, target: m.containerPath })),
            labels: c.labels.map(([label, value]) => ({ label, value })), restart: "no", mustRun: true, destroyGraceSeconds: 30,
        });
        cmd(`${n}-weights`, conn, h.weights);
    }
    // head-then-copy only: the head serves its snapshot to the workers.
    const source = plan.weightsSource;
    if (source) cmd("weights-source", headConn, source);
    cmd("model-compat", headConn, plan.compat);
    // Launches also carry their SSH target in their triggers (components/connection.ts sshTarget).
    const launch = (c: CommandPlan, host: HostSpec) => ({ triggers: [c.create, sshTarget(host)] });
    cmd("ray-head-launch", headConn, plan.head.rayLaunch, launch(plan.head.rayLaunch, plan.head.host));
    for (const w of plan.hosts.slice(1)) cmd(`ray-${w.host.name}-launch`, sshConnection(w.host), w.rayLaunch, launch(w.rayLaunch, w.host));
    cmd("ray-head-probe", headConn, plan.rayProbe);
    cmd("model-launch", headConn, plan.vllmLaunch, launch(plan.vllmLaunch, plan.head.host));
    cmd("model-probe", headConn, plan.endpointProbe);
    return out;
}

