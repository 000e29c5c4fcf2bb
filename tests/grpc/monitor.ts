// The engine side of a Pulumi deployment, served over gRPC as the CLI serves it to a program: the
// ResourceMonitor (pulumi/pulumi@1b59498 pkg/resource/deploy/source_eval.go `resmon`) and the Engine
// (log, root resource). It records every registration with its decoded inputs (secrets and unknowns kept,
// per-property dependencies) and answers as the engine does in preview; `onRegister` lets a caller
// perform the operation instead (update).
import * as grpc from "@grpc/grpc-js";
import * as resrpc from "@pulumi/pulumi/proto/resource_grpc_pb";
import * as resproto from "@pulumi/pulumi/proto/resource_pb";
import * as engrpc from "@pulumi/pulumi/proto/engine_grpc_pb";
import * as engproto from "@pulumi/pulumi/proto/engine_pb";
import { Empty } from "google-protobuf/google/protobuf/empty_pb";
import { Struct } from "google-protobuf/google/protobuf/struct_pb";
import { previewCreate } from "./previews";
import { decode } from "./wire";
import { checkedInputs } from "./check";

export const STACK_TYPE = "pulumi:pulumi:Stack";

export interface Registration {
    urn: string;
    type: string;
    name: string;
    custom: boolean;
    parent?: string;
    /** Decoded inputs: Secret, UNKNOWN and ResourceRef where the wire had them. */
    inputs: Record<string, any>;
    /** The Struct as received (for the analyzer, which gets the same property map). */
    wire: Record<string, any>;
    dependencies: string[];
    propertyDependencies: Record<string, string[]>;
    provider?: string;
    deleteBeforeReplace: boolean;
    additionalSecretOutputs: string[];
    ignoreChanges: string[];
    replaceOnChanges: string[];
    /** Registration order. */
    seq: number;
}

export interface LogEntry {
    severity: "debug" | "info" | "warning" | "error";
    message: string;
    urn?: string;
}

export interface Outcome {
    id?: string;
    /** Output properties in wire form (Struct.toJavaScript shape, signatures included). */
    outputs: Record<string, any>;
}

export interface MonitorOptions {
    project: string;
    stack: string;
    dryRun: boolean;
    config?: Record<string, string>;
    configSecretKeys?: string[];
    /** Runs for every registration before its step (the engine's policy analysis); throwing refuses the resource. */
    beforeStep?: (r: Registration) => Promise<void>;
    /** Performs a custom resource's step; default: the preview answer (no id, the inputs as outputs). */
    onRegister?: (r: Registration) => Promise<Outcome>;
}

// The features the engine advertises (source_eval.go supportsFeatureID / supportedMonitorFeatures, defaults:
// resource references and output values on). The 3.276 SDK asks GetDeploymentInfo first and falls back to
// one SupportsFeature per id (@pulumi/pulumi 3.276.0 runtime/settings.js awaitFeatureSupport).
const FEATURE_IDS = ["secrets", "resourceReferences", "outputValues", "aliasSpecs", "replacementTrigger", "deletedWith",
    "replaceWith", "transforms", "invokeTransforms", "parameterization", "resourceHooks", "errorHooks", "sendsOptionsToHooks"];
const F = resproto.ResourceMonitorFeature;
const FEATURES = [F.RESOURCE_MONITOR_FEATURE_SECRETS, F.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES, F.RESOURCE_MONITOR_FEATURE_OUTPUT_VALUES,
    F.RESOURCE_MONITOR_FEATURE_ALIAS_SPECS, F.RESOURCE_MONITOR_FEATURE_REPLACEMENT_TRIGGER, F.RESOURCE_MONITOR_FEATURE_DELETED_WITH,
    F.RESOURCE_MONITOR_FEATURE_REPLACE_WITH, F.RESOURCE_MONITOR_FEATURE_TRANSFORMS, F.RESOURCE_MONITOR_FEATURE_INVOKE_TRANSFORMS,
    F.RESOURCE_MONITOR_FEATURE_PARAMETERIZATION, F.RESOURCE_MONITOR_FEATURE_RESOURCE_HOOKS, F.RESOURCE_MONITOR_FEATURE_ERROR_HOOKS,
    F.RESOURCE_MONITOR_FEATURE_SENDS_OPTIONS_TO_HOOKS, F.RESOURCE_MONITOR_FEATURE_BYTE_STRING, F.RESOURCE_MONITOR_FEATURE_INVOKE_DEPENDS_ON,
    F.RESOURCE_MONITOR_FEATURE_INVOKE_PARENT].filter(f => f !== undefined);

/** urn.New: the parent's type chain joined with `$`, except under the root stack (sdk/go/common/resource/urn/urn.go). */
export function urnOf(stack: string, project: string, type: string, name: string, parent?: string): string {
    const parentType = parent ? parent.split("::")[2] : "";
    const qualified = parentType && parentType !== STACK_TYPE ? `${parentType}$${type}` : type;
    return `urn:pulumi:${stack}::${project}::${qualified}::${name}`;
}

export class Monitor {
    readonly registrations: Registration[] = [];
    readonly logs: LogEntry[] = [];
    /** Every RPC the program made, by method name (feature negotiation included). */
    readonly calls: string[] = [];
    readonly featureQueries: string[] = [];
    stackOutputs?: Record<string, any>;
    rootUrn?: string;
    private server?: grpc.Server;
    private failure?: Error;
    /** Called once when the engine fails (the runner cancels the program then). */
    onFailure?: () => void;

    constructor(readonly opts: MonitorOptions) {}

    /** Binds 127.0.0.1:0 (as the engine's plugin host does) and returns the address. */
    async start(): Promise<string> {
        const server = new grpc.Server({ "grpc.max_receive_message_length": 400 * 1024 * 1024 });
        server.addService(resrpc.ResourceMonitorService, this.monitorService() as any);
        server.addService(engrpc.EngineService, this.engineService() as any);
        const port = await new Promise<number>((resolve, reject) =>
            server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
        this.server = server;
        return `127.0.0.1:${port}`;
    }

    stop(): void {
        this.server?.forceShutdown();
    }

    /** The first error the engine itself hit answering (a refused resource, a failed step). */
    get error(): Error | undefined {
        return this.failure;
    }

    private unary<Req, Res>(method: string, fn: (req: Req) => Promise<Res> | Res) {
        return (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>) => {
            this.calls.push(method);
            // After the engine failed, the resmon is cancelled: every registration in flight or later is answered
            // Unavailable (source_eval.go RegisterResource: "resource monitor shut down while waiting on step's done
            // channel"), which the SDK takes as the engine terminating (runtime/resource.js → terminateRpcs).
            const shutDown = () => callback({ code: grpc.status.UNAVAILABLE, details: "resource monitor shut down while waiting on step's done channel" } as grpc.ServiceError, null);
            if (this.failure && method.startsWith("register")) return shutDown();
            Promise.resolve()
                .then(() => fn(call.request))
                .then(res => callback(null, res), (err: Error) => (this.failure ? shutDown() : callback({ code: grpc.status.UNKNOWN, details: err.message } as grpc.ServiceError, null)));
        };
    }

    private monitorService() {
        return {
            supportsFeature: this.unary("supportsFeature", (req: resproto.SupportsFeatureRequest) => {
                this.featureQueries.push(req.getId());
                return new resproto.SupportsFeatureResponse().setHassupport(FEATURE_IDS.includes(req.getId()));
            }),
            getDeploymentInfo: this.unary("getDeploymentInfo", () => {
                const info = new resproto.DeploymentInfo().setProject(this.opts.project).setStack(this.opts.stack)
                    .setDryrun(this.opts.dryRun).setParallel(1).setSupportedfeaturesList(FEATURES)
                    .setConfigsecretkeysList(this.opts.configSecretKeys ?? []);
                for (const [k, v] of Object.entries(this.opts.config ?? {})) info.getConfigMap().set(k, v);
                return info;
            }),
            registerResource: this.unary("registerResource", (req: resproto.RegisterResourceRequest) => this.register(req)),
            registerResourceOutputs: this.unary("registerResourceOutputs", (req: resproto.RegisterResourceOutputsRequest) => {
                const outputs = req.getOutputs()?.toJavaScript() ?? {};
                if (req.getUrn() === this.rootUrn || req.getUrn().split("::")[2] === STACK_TYPE) this.stackOutputs = decode(outputs);
                return new Empty();
            }),
            signalAndWaitForShutdown: this.unary("signalAndWaitForShutdown", () => new Empty()),
        };
    }

    private engineService() {
        const SEVERITY = ["debug", "info", "warning", "error"] as const;
        return {
            log: this.unary("log", (req: engproto.LogRequest) => {
                this.logs.push({ severity: SEVERITY[req.getSeverity()], message: req.getMessage(), urn: req.getUrn() || undefined });
                return new Empty();
            }),
            getRootResource: this.unary("getRootResource", () => new engproto.GetRootResourceResponse().setUrn(this.rootUrn ?? "")),
            setRootResource: this.unary("setRootResource", (req: engproto.SetRootResourceRequest) => {
                this.rootUrn = req.getUrn();
                return new engproto.SetRootResourceResponse();
            }),
        };
    }

    private fail(err: unknown): void {
        if (this.failure) return;
        this.failure = err instanceof Error ? err : new Error(String(err));
        setImmediate(() => this.onFailure?.());
    }

    private async register(req: resproto.RegisterResourceRequest): Promise<resproto.RegisterResourceResponse> {
        const parent = req.getParent() || undefined;
        // As the resource's provider's Check returns them (check.ts): what the engine diffs and the analyzer is given.
        let wire: Record<string, any>;
        try {
            wire = checkedInputs(req.getType(), (req.getObject()?.toJavaScript() ?? {}) as Record<string, any>);
        } catch (err) {
            this.fail(err);
            throw err;
        }
        const propertyDependencies: Record<string, string[]> = {};
        req.getPropertydependenciesMap().forEach((deps: resproto.RegisterResourceRequest.PropertyDependencies, key: string) => {
            propertyDependencies[key] = deps.getUrnsList();
        });
        const r: Registration = {
            urn: urnOf(this.opts.stack, this.opts.project, req.getType(), req.getName(), parent),
            type: req.getType(),
            name: req.getName(),
            custom: req.getCustom(),
            parent,
            inputs: decode(wire),
            wire: wire as Record<string, any>,
            dependencies: req.getDependenciesList(),
            propertyDependencies,
            provider: req.getProvider() || undefined,
            deleteBeforeReplace: req.getDeletebeforereplace(),
            additionalSecretOutputs: req.getAdditionalsecretoutputsList(),
            ignoreChanges: req.getIgnorechangesList(),
            replaceOnChanges: req.getReplaceonchangesList(),
            seq: this.registrations.length,
        };
        this.registrations.push(r);
        const res = new resproto.RegisterResourceResponse().setUrn(r.urn);
        try {
            await this.opts.beforeStep?.(r);
        } catch (err) {
            this.fail(err);
            throw err;
        }
        if (!r.custom) return res.setObject(Struct.fromJavaScript({}));
        let outcome: Outcome;
        if (this.opts.onRegister) {
            try {
                outcome = await this.opts.onRegister(r);
            } catch (err) {
                this.fail(err);
                throw err;
            }
        } else {
            // Preview of a create, as the resource's provider answers it (previews.ts): the inputs; every other output
            // unknown, which the SDK applies to the properties it does not get back (runtime/resource.js resolveOutputs).
            outcome = previewCreate(r);
        }
        return res.setId(outcome.id ?? "").setObject(Struct.fromJavaScript(outcome.outputs as any));
    }
}
