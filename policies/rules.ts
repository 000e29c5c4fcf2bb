// CrossGuard rules for spark-vllm, importable without starting a policy pack (index.ts does that).
// They read the provider resources the components create (see components/plan/plan.ts):
//   docker:index/remoteImage:RemoteImage  one per host, `name` = the configured image reference
//   docker:index/container:Container      one per host, host network/IPC, fabric environment, labels
//   command:remote:Command                `ray start …`, the compat check, `vllm serve …` (key via stdin)
// Policies see inputs, never secret plaintext reliably. Values unknown in preview (a pull's repo digest, a secret
// from a password not yet created) are a trap under the real analyzer server: @pulumi/policy hands a rule its props
// through a proxy that throws UnknownValueError on reading one, and the server then reports "can't run policy …
// during preview" as advisory instead of the rule's verdict (@pulumi/policy 1.21.0 proxy.js unknownCheckingProxy,
// server.js Analyze/AnalyzeStack `catch (e) { if (e instanceof UnknownValueError) … enforcementLevel: "advisory" }`).
// So every rule gets plain copies of the props (`policies` below wraps them with knownInPreview), in which each
// unknown value is the sentinel UNKNOWN; a rule treats it as "not known yet", skips it and still judges the rest.
// The mandatory rules judge values known in preview: the pulls' `name` (the configured image), command text, the
// containers' settings from config.
import type { PolicyResource, ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import { findModel, firstVllmVersionFor, parseVersion, supportsArchitecture } from "../components/knowledge/catalog";
import { MEMORY_DEFAULTS, MemoryOptions, planMemory, totalMemoryFor } from "../components/plan/memory";
import { parseImageRef } from "../components/spec/parseSpec";
import { GB10_CAPABILITY, HostFacts, KNOWN_IMAGES, imageProblems, lookupImage } from "../components/knowledge/images";
import { quantizationKernelProblem } from "../components/knowledge/imageKernels";
import { HOST_KEY_HOWTO } from "../components/spec/hostKeys";
import { exposureProblems, refusedArgProblem } from "../components/spec/extraArgs";
import { KEYGUARD_MIDDLEWARE } from "../components/plan/hostCommands";
import { vllmServeArgvs } from "./shellWords";
import { REPLICA_LABEL } from "../components/plan/replicas";
import { subnetOf } from "../components/init/initChoose";

/**
 * The host the image rules assume at preview: a GB10 (compute capability 12.1) on DGX OS's R580 driver branch
 * (eugr/spark-vllm-docker#266 reports 580.159.03 on a Spark). The compatibility check measures the real ones.
 */
const SPARK_HOST: HostFacts = { capability: GB10_CAPABILITY, driver: "580.159.03" };

export const CONTAINER = "docker:index/container:Container";
export const REMOTE_IMAGE = "docker:index/remoteImage:RemoteImage";
export const COMMAND = "command:remote:Command";
/** What the Pulumi engine sends for values not known until apply. */
export const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

type Props = Record<string, any>;
type Res = Pick<PolicyResource, "type" | "props" | "urn" | "name">;

/** Every unknown sentinel the engine sends, one per type (@pulumi/policy 1.21.0 proxy.js unknown*Value). */
const UNKNOWN_SENTINELS = new Set([
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7", "3eeb2bf0-c639-47a8-9e75-3b44932eb421", UNKNOWN, "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
    "030794c1-ac77-496b-92df-f27374a8bd58", "e48ece36-62e2-4504-bad9-02848725956a", "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
]);

/** Whether an error is the analyzer server's "unknown in preview" (only its proxy throws while props are read). */
function isUnknownValueError(e: unknown): boolean {
    // Loaded lazily: only the analyzer server's proxy throws here, and it has loaded @pulumi/policy already.
    // eslint-disable-next-line @typescript-eslint/no-var-requires
    return e instanceof (require("@pulumi/policy") as typeof import("@pulumi/policy")).UnknownValueError;
}

/**
 * A plain copy of (proxied) props: every value unknown in preview, wherever it sits, becomes UNKNOWN instead of an
 * exception (see the header). Plain data comes back as it is, copied.
 */
export function knownOrUnknown(value: unknown, depth = 0): any {
    if (typeof value === "string") return UNKNOWN_SENTINELS.has(value) ? UNKNOWN : value;
    if (value === null || typeof value !== "object" || depth > 64) return value;
    const o = value as Record<string | number, unknown>;
    const read = (k: string | number) => {
        try {
            return knownOrUnknown(o[k], depth + 1);
        } catch (e) {
            if (isUnknownValueError(e)) return UNKNOWN;
            throw e;
        }
    };
    if (Array.isArray(value)) return Array.from({ length: value.length }, (_, i) => read(i));
    return Object.fromEntries(Object.keys(o).map(k => [k, read(k)]));
}

/** A rule that judges plain props (knownOrUnknown), so the server runs it in preview rather than reporting it can't. */
export function knownInPreview<P extends ResourceValidationPolicy | StackValidationPolicy>(policy: P): P {
    if ("validateResource" in policy && policy.validateResource) {
        const each = Array.isArray(policy.validateResource) ? policy.validateResource : [policy.validateResource];
        return { ...policy, validateResource: each.map(v => (args: any, report: any) => v({ ...args, props: knownOrUnknown(args.props) }, report)) };
    }
    if ("validateStack" in policy && policy.validateStack) {
        const v = policy.validateStack;
        return { ...policy, validateStack: (args: any, report: any) => v({ ...args, resources: args.resources.map((r: any) => ({ ...r, props: knownOrUnknown(r.props) })) }, report) };
    }
    return policy;
}

const known = (v: unknown): boolean => v !== undefined && v !== null && v !== UNKNOWN;
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== UNKNOWN ? v : undefined);

/** All command text of a remote.Command (create, update, delete). */
export function commandText(props: Props): string {
    return ["create", "update", "delete"].map(k => str(props[k])).filter(Boolean).join("\n");
}

/** A Container's `envs` ("K=V" strings) as a map; unknown entries are skipped. */
export function envMap(props: Props): Map<string, string> {
    const out = new Map<string, string>();
    for (const e of Array.isArray(props.envs) ? props.envs : []) {
        const s = str(e);
        const i = s?.indexOf("=") ?? -1;
        if (s && i > 0) out.set(s.slice(0, i), s.slice(i + 1));
    }
    return out;
}

function label(props: Props, name: string): string | undefined {
    const l = (Array.isArray(props.labels) ? props.labels : []).find((x: any) => x?.label === name);
    return str(l?.value);
}

/** The value of `--flag V` or `--flag=V` in shell text (quotes stripped); undefined if absent. */
export function flagValue(text: string, flag: string): string | undefined {
    const m = new RegExp(`(?:^|[\\s'"])${flag.replace(/[-]/g, "\\-")}(?:=|\\s+)['"]?([^\\s'"]+)`).exec(text);
    return m?.[1];
}

const isServe = (text: string) => /\bvllm serve\s/.test(text);
const isRayHead = (text: string) => /\bray start\b[^\n]*\s--head\b/.test(text);
const servedModel = (text: string) => /\bvllm serve\s+['"]?([^\s'"]+)/.exec(text)?.[1];

/**
 * The interface "family". Mellanox/NVIDIA mlx5 netdevs are named by PCIe function and physical port
 * (`enp1s0f1np1`, its twin `enP2p1s0f1np1`, or the other port `enp1s0f0np0`): all of those are the
 * ConnectX-7 fabric and may be mixed across hosts (cables can join port 0 to port 1). Any other name
 * (`enP7s7` is the Spark's 10 GbE port, `eth0`, `wlP9s9`) is its own family: every host must use it.
 */
export function interfaceFamily(iface: string): string {
    return /^en.*f\d+np\d+$/.test(iface) ? "connectx" : iface;
}

const FABRIC_VARS = ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES", "OMPI_MCA_btl_tcp_if_include"];

/** vLLM version the image carries, when known at preview: declared (compat command) first, then a 0.x image tag. */
export function knownVllmVersion(resources: Res[]): { version: string; from: string } | undefined {
    for (const r of resources.filter(r => r.type === COMMAND)) {
        const m = /(?:declaredVllmVersion|spark-vllm:vllm\.version|vllm\.version)\\?["']?\s*[:=]\s*\\?["']?(v?\d+\.\d+(?:\.\d+)?[0-9A-Za-z.+-]*)/.exec(commandText(r.props));
        if (m) return { version: m[1], from: "the declared spark-vllm:vllm.version" };
    }
    for (const r of resources.filter(r => r.type === REMOTE_IMAGE)) {
        const ref = str(r.props.name);
        const tag = ref ? parseImageRef(ref)?.tag : undefined;
        // vLLM releases are 0.x; NGC's YY.MM-py3 tags are container releases, not vLLM versions.
        if (tag && /^v?0\.\d+(\.\d+)?($|[-+._a-z])/.test(tag) && parseVersion(tag)) return { version: tag, from: `the image tag ${ref}` };
    }
    return undefined;
}

/**
 * The endpoint proxy's container (labelled spark-vllm.role=proxy) and its image pull (`<cluster>-proxy-pull`,
 * components/plan/naming.ts): nginx on the head, not a vLLM host. The rules about vLLM containers and images skip them.
 */
export function isEndpointProxy(r: Pick<Res, "type" | "props" | "name">): boolean {
    return (r.type === CONTAINER && label(r.props, "spark-vllm.role") === "proxy") || (r.type === REMOTE_IMAGE && /-proxy-pull$/.test(r.name));
}
const byType = (resources: Res[], type: string) => resources.filter(r => r.type === type && !isEndpointProxy(r));
const serveCommands = (resources: Res[]) => byType(resources, COMMAND).filter(r => isServe(commandText(r.props)));
/** The known-images row (components/knowledge/images.ts) of the stack's image; undefined when there is none or the table lacks it. */
function knownImageOf(resources: Res[]) {
    const image = byType(resources, REMOTE_IMAGE).map(r => str(r.props.name)).find(Boolean);
    return image ? lookupImage(image) : undefined;
}

/**
 * The vLLM containers by replica (the `spark-vllm.replica` label, components/plan/replicas.ts REPLICA_LABEL; one group
 * when no container has it), in the order of the label's number.
 */
export function replicaContainers(resources: Res[]): Array<{ replica: string; containers: Res[] }> {
    const groups = new Map<string, Res[]>();
    for (const c of byType(resources, CONTAINER)) {
        const k = label(c.props, REPLICA_LABEL) ?? "1";
        groups.set(k, [...(groups.get(k) ?? []), c]);
    }
    return [...groups].sort(([a], [b]) => Number(a) - Number(b)).map(([replica, containers]) => ({ replica, containers }));
}

const hostOf = (c: Res) => ({ name: label(c.props, "spark-vllm.host") ?? c.name, gpus: Number(label(c.props, "spark-vllm.gpus") ?? 1) });

/**
 * The memory planner's input, rebuilt from the resources: hosts from container labels, settings from `vllm serve`. With
 * several replicas, the hosts of one replica: each holds a whole copy of the model (parallelism-matches-gpus holds them equal).
 */
export function memoryInputFrom(resources: Res[]) {
    const serve = serveCommands(resources)[0];
    if (!serve) return undefined;
    const text = commandText(serve.props);
    const num = (flag: string) => (flagValue(text, flag) !== undefined ? Number(flagValue(text, flag)) : undefined);
    const groups = replicaContainers(resources);
    return {
        modelId: servedModel(text),
        hosts: (groups[0]?.containers ?? []).map(hostOf),
        replicas: groups.length,
        vllm: {
            tensorParallelSize: num("--tensor-parallel-size") ?? num("-tp") ?? 1,
            pipelineParallelSize: num("--pipeline-parallel-size") ?? num("-pp") ?? 1,
            gpuMemoryUtilization: num("--gpu-memory-utilization") ?? 0.9, // vLLM's own default
            maxModelLen: num("--max-model-len"),
        },
        urn: serve.urn,
    };
}

export const MEMORY_CONFIG_SCHEMA = {
    properties: {
        usableGiB: { type: "number" as const, default: MEMORY_DEFAULTS.usableGiB, description: "CUDA-visible memory per GB10 in GiB" },
        reserveGiB: { type: "number" as const, default: MEMORY_DEFAULTS.reserveGiB, description: "activation and runtime reserve per GPU in GiB" },
        minHostHeadroomGiB: { type: "number" as const, default: MEMORY_DEFAULTS.minHostHeadroomGiB, description: "least memory left to the OS, Docker and Ray in GiB" },
    },
};

function memoryPlanFor(resources: Res[], config: MemoryOptions) {
    const input = memoryInputFrom(resources);
    if (!input?.modelId || input.hosts.length === 0) return undefined;
    const plan = planMemory(input, findModel(input.modelId), config);
    return plan.kind === "plan" ? { plan, urn: input.urn, replicas: input.replicas, hosts: input.hosts.length } : undefined;
}

/** With several replicas, what the memory figures are of: one replica, which holds a whole copy of the model. */
const perReplica = (replicas: number, hosts: number) =>
    replicas > 1 ? ` (per replica: each of the ${replicas} replicas holds a whole copy of the model on its ${hosts} host${hosts === 1 ? "" : "s"}; fewer spark-vllm:replicas give each more hosts)` : "";

const SECRET_PATTERNS: Array<[RegExp, string]> = [
    [/\bhf_[A-Za-z0-9]{30,}/, "a Hugging Face token (hf_…)"],
    [/\bsk-[A-Za-z0-9_-]{20,}/, "an API key (sk-…)"],
    [/--api-key(?:=|\s+)(?!['"]?\$)['"]?[^\s'"$]+/, "a literal --api-key"],
    // RAY_AUTH_TOKEN: Ray's token authentication reads the token from it (components/plan/rayAuth.ts); only the file's path
    // (RAY_AUTH_TOKEN_PATH) belongs in text.
    [/\b(?:HF_TOKEN|HUGGING_FACE_HUB_TOKEN|VLLM_API_KEY|RAY_AUTH_TOKEN)=(?!['"]?\$)['"]?[^\s'"$;)]+/, "a literal token assignment"],
];

/** The first secret-looking value in TEXT: what it looks like, never the value itself. */
export function findSecret(text: string): string | undefined {
    for (const [re, what] of SECRET_PATTERNS) if (re.test(text)) return what;
    return undefined;
}

const RULES: Array<ResourceValidationPolicy | StackValidationPolicy> = [
    {
        name: "image-pinned-by-digest",
        description: "Every host pulls the vLLM image by digest (repo[:tag]@sha256:…), so a retag cannot change what runs.",
        enforcementLevel: "mandatory",
        validateResource: (args, report) => {
            if (args.type !== REMOTE_IMAGE) return;
            const name = str(args.props.name);
            if (name !== undefined && !parseImageRef(name)?.digest)
                report(`image "${name}" is not pinned by digest. Remediation: set spark-vllm:image to ${name.replace(/@.*$/, "")}@sha256:<digest> (docker buildx imagetools inspect ${name} prints it).`);
        },
    },
    {
        name: "same-image-on-every-host",
        description: "All hosts run the same image: mixed vLLM versions across Ray nodes fail at load with misleading errors.",
        enforcementLevel: "mandatory",
        validateStack: (args, report) => {
            const names = new Set(byType(args.resources, REMOTE_IMAGE).map(r => str(r.props.name)).filter((n): n is string => !!n));
            if (names.size > 1) report(`hosts use different images: ${[...names].join(", ")}. Remediation: use one spark-vllm:image for every host.`);
            const digests = new Set(byType(args.resources, CONTAINER).map(r => str(r.props.image)).filter((n): n is string => !!n));
            if (digests.size > 1) report(`containers run different image digests: ${[...digests].join(", ")}. Remediation: pull the same pinned image on every host and recreate the containers.`);
        },
    },
    {
        name: "image-change-interrupts-serving",
        description: "With one replica, a new image stops serving for the new version's load (it is proven on every host first); with two or more it rolls.",
        enforcementLevel: "advisory",
        validateStack: (args, report) => {
            // In a preview of a stack that is deployed, a vLLM container's image is the pull's repo digest: known from the
            // state while the image stays, unknown when the pull is replaced (a new image). The proxy's stays known unless
            // its own image changes too; both unknown is a first deploy (nothing serves yet), which this does not judge.
            const proxyKnown = args.resources.some(r => r.type === CONTAINER && isEndpointProxy(r) && str(r.props.image) !== undefined);
            const changing = byType(args.resources, CONTAINER).filter(c => c.props.image === UNKNOWN);
            const groups = replicaContainers(args.resources);
            if (!proxyKnown || changing.length === 0 || groups.length > 1) return;
            report(`the image changes on a stack of one replica (${changing.map(c => label(c.props, "spark-vllm.host") ?? c.name).join(", ")}): ` +
                "the new image is proven on every host while the old version serves (a refused image fails up and changes nothing), then the " +
                "endpoint stops serving from the old vLLM's stop until the new version has loaded and is proven, and if the new version fails " +
                "after its launch, it stays down until an up with the previous image. Remediation: run this up when a pause in serving is " +
                "acceptable, or serve spark-vllm:replicas: 2 or more on enough Sparks, which rolls a new image replica by replica (docs/operations.md, \"Changing the image\").");
        },
    },
    {
        name: "parallelism-matches-gpus",
        description: "TP × PP equals the GPUs of all hosts, and TP divides the model's attention heads.",
        enforcementLevel: "mandatory",
        validateStack: (args, report) => {
            const input = memoryInputFrom(args.resources);
            if (!input || input.hosts.length === 0) return;
            const { tensorParallelSize: tp, pipelineParallelSize: pp } = input.vllm;
            const gpus = input.hosts.reduce((n, h) => n + h.gpus, 0);
            const groups = replicaContainers(args.resources);
            if (groups.length === 1 && tp * pp !== gpus)
                report(`vllm serve uses TP × PP = ${tp} × ${pp} = ${tp * pp} GPUs but the hosts have ${gpus}. Remediation: set spark-vllm:vllm.tensorParallelSize × pipelineParallelSize to ${gpus}, or change the hosts.`, input.urn);
            // Several replicas: each runs one copy on TP × PP GPUs, so TP × PP × replicas is every host's GPUs, split evenly.
            const total = groups.reduce((n, g) => n + g.containers.reduce((m, c) => m + hostOf(c).gpus, 0), 0);
            if (groups.length > 1) for (const g of groups) {
                const hosts = g.containers.map(hostOf), own = hosts.reduce((n, h) => n + h.gpus, 0);
                if (own !== tp * pp)
                    report(`replica ${g.replica} (${hosts.map(h => h.name).join(", ")}) has ${own} GPU${own === 1 ? "" : "s"} but vllm serve uses TP × PP = ${tp} × ${pp} = ${tp * pp}: ` +
                        `TP × PP × replicas = ${tp * pp * groups.length} ≠ the hosts' ${total} GPUs. Remediation: set spark-vllm:vllm.tensorParallelSize × pipelineParallelSize to ${total / groups.length} (the GPUs of one replica), or change spark-vllm:replicas or the hosts.`, input.urn);
            }
            const model = input.modelId ? findModel(input.modelId) : undefined;
            if (model && model.attentionHeads % tp !== 0)
                report(`${model.id} has ${model.attentionHeads} attention heads, not divisible by TP=${tp}. Remediation: choose a tensorParallelSize that divides ${model.attentionHeads} (use pipelineParallelSize for the rest).`, input.urn);
        },
    },
    {
        name: "model-weights-fit",
        description: "The model's weights (per GPU, plus the runtime reserve) fit vLLM's share of a Spark's memory.",
        enforcementLevel: "mandatory",
        configSchema: MEMORY_CONFIG_SCHEMA,
        validateStack: (args, report) => {
            const m = memoryPlanFor(args.resources, args.getConfig<MemoryOptions>());
            if (m && !m.plan.weightsFit) report(`${m.plan.modelId}: ${m.plan.problems[0]}${perReplica(m.replicas, m.hosts)}.`, m.urn);
        },
    },
    {
        name: "kv-cache-and-host-headroom",
        description: "max-model-len fits the KV cache left after weights, and each host keeps enough memory for the OS, Docker and Ray.",
        enforcementLevel: "advisory",
        configSchema: MEMORY_CONFIG_SCHEMA,
        validateStack: (args, report) => {
            const m = memoryPlanFor(args.resources, args.getConfig<MemoryOptions>());
            if (!m) return;
            if (m.plan.weightsFit && !m.plan.maxModelLenFits) report(`${m.plan.modelId}: ${m.plan.problems[0]}.`, m.urn);
            if (!m.plan.hostHeadroomOk) report(`${m.plan.problems[m.plan.problems.length - 1]}.`, m.urn);
        },
    },
    {
        name: "model-in-catalog",
        description: "The served model is in the catalog (components/knowledge/catalog.ts), so its memory is checked at preview; otherwise `up` checks its real size before any download or launch.",
        enforcementLevel: "advisory",
        configSchema: MEMORY_CONFIG_SCHEMA,
        validateStack: (args, report) => {
            // A model the catalog lacks would pass model-weights-fit silently (planMemory answers "unknown-model").
            const input = memoryInputFrom(args.resources);
            if (!input?.modelId || input.hosts.length === 0 || findModel(input.modelId)) return;
            const config = args.getConfig<MemoryOptions>();
            const usable = totalMemoryFor(config).gib;
            const reserve = config.reserveGiB ?? MEMORY_DEFAULTS.reserveGiB;
            const { tensorParallelSize: tp, pipelineParallelSize: pp, gpuMemoryUtilization: gmu } = input.vllm;
            const room = usable * gmu - reserve;
            report(`${input.modelId} is not in spark-vllm's model catalog (components/knowledge/catalog.ts): its memory was not checked at preview (model-weights-fit and kv-cache-and-host-headroom know only catalog models). ` +
                `Its weights must fit ${tp * pp} GPU${tp * pp === 1 ? "" : "s"} (TP ${tp} × PP ${pp}) of ${room.toFixed(2)} GiB each (${gmu} × ${usable} GiB, less ${reserve} GiB reserve), ${(room * tp * pp).toFixed(2)} GiB in all; ` +
                `\`up\` reads the real size (the hub's file listing before a download, the safetensors headers in the cache) and refuses before any download or launch when they do not. ` +
                `Remediation: check the model's size on its Hugging Face page, or add it to components/knowledge/catalog.ts so preview checks it.`, input.urn);
        },
    },
    {
        name: "vllm-supports-architecture",
        description: "The image's vLLM knows the model's architecture, wherever the vLLM version is known at preview.",
        enforcementLevel: "mandatory",
        validateStack: (args, report) => {
            const serve = serveCommands(args.resources)[0];
            const model = serve ? findModel(servedModel(commandText(serve.props)) ?? "") : undefined;
            const v = knownVllmVersion(args.resources);
            if (!serve || !model || !v) return;
            if (supportsArchitecture(v.version, model.architecture) === false)
                report(`vLLM ${v.version} (from ${v.from}) does not know ${model.architecture}, the architecture of ${model.id}; it fails with "Model architectures ['${model.architecture}'] failed to be inspected" or "are not supported". Remediation: use an image with vLLM >= ${firstVllmVersionFor(model.architecture)} and set spark-vllm:vllm.version to match.`, serve.urn);
        },
    },
    {
        name: "image-runs-on-gb10",
        description: "A known image can run on a Spark with the chosen backend: kernels for compute capability 12.1, a CUDA the Spark's driver runs, Ray for the ray backend, vLLM >= 0.11.1 for mp (components/knowledge/images.ts).",
        enforcementLevel: "mandatory",
        validateStack: (args, report) => {
            const row = knownImageOf(args.resources);
            if (!row) return; // unknown images are left to the compatibility check on the hosts
            const serve = serveCommands(args.resources).map(r => commandText(r.props));
            const backend = byType(args.resources, COMMAND).some(r => /\bray start\b/.test(commandText(r.props))) ? "ray"
                : serve.some(t => /\s--nnodes\s/.test(t)) ? "mp" : "single";
            const hosts = byType(args.resources, CONTAINER).length;
            for (const p of imageProblems(row, SPARK_HOST, backend, hosts).filter(p => p.severity === "error"))
                report(`${row.reference} on a DGX Spark (${backend} backend): ${p.message} [${p.kind}; sources: ${row.sources.join(", ")}]. Remediation: use an image known to run on a Spark (${KNOWN_IMAGES.filter(i => i.runsOnGb10).map(i => i.reference).join(", ")}) or change spark-vllm:vllm.backend.`);
        },
    },
    {
        name: "quantization-kernels-on-gb10",
        description: "A known image's vLLM carries its own CUTLASS kernels for the catalog model's quantization (FP8, NVFP4) in a form that runs on compute capability 12.1 (components/knowledge/vllmKernels.ts); `up` asks the image's vLLM and runs the kernel on the head before launch.",
        enforcementLevel: "advisory",
        validateStack: (args, report) => {
            const row = knownImageOf(args.resources);
            const serve = serveCommands(args.resources)[0];
            const model = serve ? findModel(servedModel(commandText(serve.props)) ?? "") : undefined;
            if (!row || !model || !serve) return; // unknown images and models are left to the compatibility check on the head
            const p = quantizationKernelProblem(row, model.quantization, model.id, SPARK_HOST.capability);
            if (p) report(`${p.message} [${p.kind}; sources: ${row.sources.join(", ")}]`, serve.urn);
        },
    },
    {
        name: "container-host-network-and-ipc",
        description: "vLLM/Ray containers use the host network (NCCL and Ray bind the fabric address) and host IPC (shared memory between workers).",
        enforcementLevel: "mandatory",
        validateResource: (args, report) => {
            if (args.type !== CONTAINER || isEndpointProxy(args)) return;
            for (const key of ["networkMode", "ipcMode"]) {
                const v = args.props[key];
                if (v === UNKNOWN) continue;
                if (v !== "host") report(`container ${args.name}: ${key} is ${v === undefined ? "unset" : `"${v}"`}, not "host". Remediation: set ${key}: "host" (the planner always does; do not override it).`);
            }
        },
    },
    {
        name: "container-fabric-environment",
        description: "Every container sets VLLM_HOST_IP and the NCCL/Gloo socket interfaces, all in one interface family.",
        enforcementLevel: "mandatory",
        validateResource: (args, report) => {
            if (args.type !== CONTAINER || isEndpointProxy(args) || !known(args.props.envs)) return;
            const env = envMap(args.props);
            for (const k of ["VLLM_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"])
                if (!env.get(k)) report(`container ${args.name} does not set ${k}. Remediation: set the host's fabric.interface and fabric.address; Ray cannot pass environment to workers at serve time.`);
            const families = new Set(FABRIC_VARS.filter(k => env.get(k)).map(k => interfaceFamily(env.get(k)!)));
            if (families.size > 1)
                report(`container ${args.name} mixes interfaces (${FABRIC_VARS.filter(k => env.get(k)).map(k => `${k}=${env.get(k)}`).join(", ")}). Remediation: point every *_IFNAME variable at the ConnectX-7 fabric interface.`);
        },
    },
    {
        name: "fabric-interface-family",
        description: "All hosts use the same interface family for NCCL/Gloo (ConnectX-7 mlx5 netdevs, or one identical other interface), each with its own VLLM_HOST_IP.",
        enforcementLevel: "mandatory",
        validateStack: (args, report) => {
            const containers = byType(args.resources, CONTAINER).filter(c => known(c.props.envs));
            const fam = new Map<string, string[]>();
            const ips = new Map<string, string[]>();
            for (const c of containers) {
                const env = envMap(c.props);
                const iface = env.get("NCCL_SOCKET_IFNAME");
                if (iface) fam.set(interfaceFamily(iface), [...(fam.get(interfaceFamily(iface)) ?? []), `${c.name}=${iface}`]);
                const ip = env.get("VLLM_HOST_IP");
                if (ip) ips.set(ip, [...(ips.get(ip) ?? []), c.name]);
            }
            if (fam.size > 1)
                report(`hosts use different interface families for NCCL: ${[...fam.values()].flat().join(", ")} (enP7s7 is the 10 GbE port, not the fabric). Remediation: set every host's fabric.interface to its ConnectX-7 netdev (enp1s0f…np…).`);
            for (const [ip, names] of ips)
                if (names.length > 1) report(`containers ${names.join(", ")} share VLLM_HOST_IP=${ip}. Remediation: give each host its own fabric.address.`);
        },
    },
    {
        name: "replica-hosts-share-fabric-subnet",
        description: "The hosts of each replica (all hosts with one) share one fabric subnet: their NCCL, Gloo and Ray traffic stays on the link between them.",
        // Advisory: the stack names addresses, not prefix lengths, so preview assumes NVIDIA's /24 (connect-two-sparks
        // netplan `addresses: [192.168.100.10/24]`) or link-local's /16 (RFC 3927); the fabric check proves the real link at up.
        enforcementLevel: "advisory",
        validateStack: (args, report) => {
            for (const g of replicaContainers(args.resources)) {
                const subnets = new Map<string, string[]>();
                for (const c of g.containers.filter(c => known(c.props.envs))) {
                    const ip = envMap(c.props).get("VLLM_HOST_IP");
                    if (!ip || ip.split(".").length !== 4) continue;
                    const subnet = subnetOf({ address: ip, prefix: ip.startsWith("169.254.") ? 16 : 24 });
                    subnets.set(subnet, [...(subnets.get(subnet) ?? []), `${hostOf(c).name}=${ip}`]);
                }
                if (subnets.size > 1)
                    report(`${g.replica === "1" && replicaContainers(args.resources).length === 1 ? "the hosts" : `replica ${g.replica}'s hosts`} are on ` +
                        `${subnets.size} fabric subnets (assuming /24, or /16 link-local): ${[...subnets].map(([n, hs]) => `${n}: ${hs.join(", ")}`).join("; ")}. ` +
                        `Remediation: give the hosts of one replica fabric.address values on one subnet (the ports they share a switch or cable on), or regroup the hosts (they form the replicas in order).`);
            }
        },
    },
    {
        name: "endpoint-requires-api-key",
        description: "vllm serve requires an API key, read from stdin into VLLM_API_KEY (never in command text).",
        enforcementLevel: "mandatory",
        validateResource: (args, report) => {
            if (args.type !== COMMAND) return;
            const text = commandText(args.props);
            // An mp worker's `vllm serve --headless` runs engine ranks only and serves no API
            // (vllm/entrypoints/cli/serve.py run_headless), so it has no key to check. Issue 41: `--headless` counts
            // only as an argument of its own in the argument lists the shell passes to vllm serve, not as text
            // inside another argument's value; text the shell cannot split proves nothing.
            if (!isServe(text)) return;
            const argvs = vllmServeArgvs(text);
            if (argvs && argvs.length > 0 && argvs.every(argv => argv.includes("--headless"))) return;
            const reads = /\bread\b[^\n]*\bVLLM_API_KEY\b/.test(text);
            // Unknown in preview (UNKNOWN) when it is the generated key: something is piped, which is what matters.
            const stdin = args.props.stdin;
            if (!reads || stdin === undefined || stdin === null || stdin === "")
                report(`the vllm serve command ${reads ? "has no stdin to read the key from" : "does not read VLLM_API_KEY from stdin"}, so the endpoint would answer anyone. Remediation: pipe the generated apiKey through stdin and \`read -r VLLM_API_KEY\` before vllm serve (components/plan/hostCommands.ts does).`);
        },
    },
    {
        name: "vllm-serve-arguments-confined",
        description: "vllm serve's arguments, read as vLLM resolves them, start no KV-event publisher, choose no data-parallel address but loopback, keep vLLM's h11 limits, load no code the stack names and open no listener beside the endpoint proxy (the rules parseSpec applies to vllm.extraArgs, components/spec/extraArgs.ts).",
        enforcementLevel: "mandatory",
        validateResource: (args, report) => {
            if (args.type !== COMMAND) return;
            const text = commandText(args.props);
            if (!isServe(text)) return;
            // The arguments after `vllm serve MODEL`, as the shell passes them, less the planner's own key guard
            // (components/plan/hostCommands.ts vllmServeArgv: `--middleware <KEYGUARD_MIDDLEWARE>` on the head).
            for (const argv of vllmServeArgvs(text) ?? []) {
                const rest = argv.slice(3);
                const own = rest.findIndex((a, i) => a === "--middleware" && rest[i + 1] === KEYGUARD_MIDDLEWARE);
                const checked = own < 0 ? rest : [...rest.slice(0, own), ...rest.slice(own + 2)];
                const problems = [...checked.map(refusedArgProblem).filter((p): p is string => !!p), ...exposureProblems(checked).map(([, p]) => p)];
                for (const p of problems)
                    report(`vllm serve in ${args.name}: ${p}. Remediation: remove it from spark-vllm:vllm.extraArgs (\`spark-vllm plan\` names the entry).`);
            }
        },
    },
    {
        name: "ray-dashboard-loopback",
        description: "Ray has no authentication: the head's dashboard (which runs jobs) binds to 127.0.0.1 only.",
        enforcementLevel: "mandatory",
        validateResource: (args, report) => {
            if (args.type !== COMMAND) return;
            const text = commandText(args.props);
            if (!isRayHead(text) || /--include-dashboard(?:=|\s+)['"]?false/.test(text)) return;
            const host = flagValue(text, "--dashboard-host");
            if (!host || !["127.0.0.1", "localhost", "::1"].includes(host))
                report(`ray start --head ${host ? `binds the dashboard to ${host}` : "has no --dashboard-host, so the dashboard listens on all interfaces"}; anyone who reaches it can run code on every host. Remediation: pass --dashboard-host=127.0.0.1 (use an SSH tunnel to view it).`);
        },
    },
    {
        name: "ssh-host-keys-pinned",
        description: "Every host pins its SSH host key (hosts[].ssh.hostKey): without it remote commands accept any key, so an impostor at a host's address receives the API key and the HF token.",
        enforcementLevel: "advisory",
        validateStack: (args, report) => {
            // @pulumi/command checks the host key only when connection.hostKey is set (v1.2.1 connection.go SSHConfig:
            // ssh.InsecureIgnoreHostKey() otherwise). A connection not known at preview says nothing.
            const unpinned = new Set<string>();
            for (const c of byType(args.resources, COMMAND)) {
                const conn = c.props.connection;
                if (!conn || typeof conn !== "object" || !str(conn.host)) continue;
                if (conn.hostKey === undefined || conn.hostKey === null || conn.hostKey === "") unpinned.add(str(conn.host)!);
            }
            // Sorted: the stack's resources come in the order the engine registered them, which varies from run to run
            // (a Go program's preview listed spark-b.local first, the TypeScript program's spark-a.local).
            if (unpinned.size)
                report(`remote commands to ${[...unpinned].sort().join(", ")} accept any SSH host key, so a machine that takes over one of those addresses receives the API key and the HF token. Remediation: set spark-vllm:hosts[].ssh.hostKey of each host to ${HOST_KEY_HOWTO} (docs/security.md, "SSH host keys").`);
        },
    },
    {
        name: "no-privileged-containers",
        description: "Containers get GPUs, /dev/infiniband and IPC_LOCK explicitly; privileged mode is never needed.",
        enforcementLevel: "mandatory",
        validateResource: (args, report) => {
            if (args.type === CONTAINER && args.props.privileged === true)
                report(`container ${args.name} is privileged. Remediation: remove privileged; use gpus: "all", devices: [/dev/infiniband] and capabilities.adds: ["IPC_LOCK"] with memlock unlimited.`);
        },
    },
    {
        name: "no-secrets-in-text",
        description: "No token or key appears in command text, container arguments or environment: they show in diffs, logs and errors.",
        enforcementLevel: "mandatory",
        validateResource: (args, report) => {
            const p = args.props;
            const parts: string[] = [];
            if (args.type === COMMAND) {
                parts.push(commandText(p));
                if (p.environment && typeof p.environment === "object")
                    parts.push(...Object.entries(p.environment).map(([k, v]) => `${k}=${str(v) ?? ""}`));
            } else if (args.type === CONTAINER) {
                for (const k of ["command", "entrypoints", "envs"]) if (Array.isArray(p[k])) parts.push(p[k].map((x: unknown) => str(x) ?? "").join(" "));
            } else return;
            const what = findSecret(parts.join("\n"));
            if (what)
                report(`${args.name} contains ${what} in its text. Remediation: pass secrets through stdin (spark-vllm:hfToken / the generated apiKey), never in commands, arguments or environment; rotate the exposed value.`);
        },
    },
];

/** The rules as the pack runs them: each on plain props, so it runs in preview too (see the header). */
export const policies: Array<ResourceValidationPolicy | StackValidationPolicy> = RULES.map(knownInPreview);
