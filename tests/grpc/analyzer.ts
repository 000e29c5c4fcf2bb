// A CrossGuard policy pack run as the CLI runs it: an analyzer plugin started through the Node language
// host's RunPlugin (pulumi/pulumi@1b59498 sdk/nodejs/cmd/pulumi-language-nodejs/main.go):
//   node <@pulumi/pulumi/cmd/run-policy-pack> <engine address> <pack dir>      (cwd: the pack dir)
// with PULUMI_NODEJS_TYPESCRIPT=true (PulumiPolicy.yaml's runtime option, on by default) and the stack's
// PULUMI_CONFIG / PULUMI_NODEJS_{PROJECT,STACK,DRY_RUN}. The plugin's first stdout line is its port
// (pkg/resource/plugin/plugin.go newPlugin; @pulumi/policy 1.21.0 server.js serve prints it); the engine
// then calls ConfigureStack (analyzer_plugin.go NewPolicyAnalyzer), Analyze for each resource before its step
// and AnalyzeStack after the last one (pkg/resource/deploy/step_generator.go analyzeAll, AnalyzeResources).
import * as grpc from "@grpc/grpc-js";
import { spawn, ChildProcess } from "child_process";
import * as path from "path";
import * as anrpc from "@pulumi/pulumi/proto/analyzer_grpc_pb";
import * as anproto from "@pulumi/pulumi/proto/analyzer_pb";
import { Empty } from "google-protobuf/google/protobuf/empty_pb";
import { Struct } from "google-protobuf/google/protobuf/struct_pb";
import type { Registration } from "./monitor";
import { decode, encode } from "./wire";
import { configEnv } from "./runner";

export type Level = "advisory" | "mandatory" | "disabled";

export interface Diagnostic {
    policy: string;
    pack: string;
    level: Level;
    message: string;
    urn?: string;
}

export interface AnalyzerOptions {
    packDir: string;
    engineAddress: string;
    project: string;
    stack: string;
    dryRun: boolean;
    config: Record<string, unknown>;
    secretKeys?: string[];
}

const LEVELS: Record<number, Level> = { 0: "advisory", 1: "mandatory", 2: "disabled", 3: "mandatory" };

/** What a diagnostic means to the engine: a remediation that still fails counts as mandatory (analyze_snapshot.go analyzeResource). */
function toDiagnostic(d: anproto.AnalyzeDiagnostic): Diagnostic {
    return { policy: d.getPolicyname(), pack: d.getPolicypackname(), level: LEVELS[d.getEnforcementlevel()] ?? "advisory", message: d.getMessage(), urn: d.getUrn() || undefined };
}

const call = <Req, Res>(fn: (req: Req, cb: (err: grpc.ServiceError | null, res: Res) => void) => void, req: Req) =>
    new Promise<Res>((resolve, reject) => fn(req, (err, res) => (err ? reject(err) : resolve(res))));

export class Analyzer {
    private constructor(private readonly child: ChildProcess, private readonly client: anrpc.AnalyzerClient, readonly stderr: () => string) {}

    static async start(opts: AnalyzerOptions): Promise<Analyzer> {
        const packDir = path.resolve(opts.packDir);
        const runPath = require.resolve("@pulumi/pulumi/cmd/run-policy-pack", { paths: [packDir] });
        const env: Record<string, string> = { ...(process.env as Record<string, string>) };
        delete env.NODE_OPTIONS;
        Object.assign(env, {
            PULUMI_NODEJS_TYPESCRIPT: "true",
            PULUMI_CONFIG: configEnv(opts.config),
            PULUMI_NODEJS_PROJECT: opts.project,
            PULUMI_NODEJS_STACK: opts.stack,
            PULUMI_NODEJS_DRY_RUN: String(opts.dryRun),
        });
        const child = spawn(process.execPath, [runPath, opts.engineAddress, packDir], { cwd: packDir, env, stdio: ["ignore", "pipe", "pipe"] });
        let stderr = "";
        child.stderr!.on("data", d => (stderr += d));
        const port = await new Promise<number>((resolve, reject) => {
            let out = "";
            const onData = (d: Buffer) => {
                out += d;
                const nl = out.indexOf("\n");
                if (nl < 0) return;
                child.stdout!.off("data", onData);
                const n = Number(out.slice(0, nl).trim());
                if (Number.isInteger(n) && n > 0 && n <= 65535) resolve(n);
                else reject(new Error(`policy pack wrote an invalid port to stdout: ${JSON.stringify(out.slice(0, nl))}\n${stderr}`));
            };
            child.stdout!.on("data", onData);
            child.on("close", code => reject(new Error(`policy pack ${packDir} exited ${code} before it printed its port:\n${stderr}`)));
        });
        const client = new anrpc.AnalyzerClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
        const analyzer = new Analyzer(child, client, () => stderr);
        const configure = new anproto.AnalyzerStackConfigureRequest().setStack(opts.stack).setProject(opts.project).setDryRun(opts.dryRun)
            .setConfigSecretKeysList(opts.secretKeys ?? []);
        for (const [k, v] of Object.entries(opts.config)) configure.getConfigMap().set(k, typeof v === "string" ? v : JSON.stringify(v));
        try {
            await call(client.configureStack.bind(client), configure);
        } catch (err) {
            if ((err as grpc.ServiceError).code !== grpc.status.UNIMPLEMENTED) throw err;
        }
        return analyzer;
    }

    /** The pack's name, version and policies (GetAnalyzerInfo). */
    async info(): Promise<{ name: string; version: string; policies: Array<{ name: string; level: Level }> }> {
        const res = await call<Empty, anproto.AnalyzerInfo>(this.client.getAnalyzerInfo.bind(this.client), new Empty());
        return { name: res.getName(), version: res.getVersion(), policies: res.getPoliciesList().map(p => ({ name: p.getName(), level: LEVELS[p.getEnforcementlevel()] })) };
    }

    /** Analyze one resource's inputs, as the engine does before its step. */
    async analyze(r: Registration, provider?: Registration): Promise<Diagnostic[]> {
        const req = new anproto.AnalyzeRequest().setUrn(r.urn).setType(r.type).setName(r.name)
            .setProperties(Struct.fromJavaScript(encode(decode(r.wire)))).setOptions(options(r));
        if (provider) req.setProvider(providerResource(provider));
        const res = await call<anproto.AnalyzeRequest, anproto.AnalyzeResponse>(this.client.analyze.bind(this.client), req);
        return res.getDiagnosticsList().map(toDiagnostic).filter(d => d.level !== "disabled");
    }

    /** AnalyzeStack over every resource's final properties (in preview: the registered inputs). */
    async analyzeStack(resources: Array<{ r: Registration; properties: Record<string, any>; provider?: Registration }>): Promise<Diagnostic[]> {
        const list = resources.map(({ r, properties, provider }) => {
            const a = new anproto.AnalyzerResource().setUrn(r.urn).setType(r.type).setName(r.name)
                .setProperties(Struct.fromJavaScript(encode(properties))).setOptions(options(r))
                .setParent(r.parent ?? "").setDependenciesList(r.dependencies);
            for (const [k, urns] of Object.entries(r.propertyDependencies))
                if (urns.length) a.getPropertydependenciesMap().set(k, new anproto.AnalyzerPropertyDependencies().setUrnsList(urns));
            if (provider) a.setProvider(providerResource(provider));
            return a;
        });
        const res = await call<anproto.AnalyzeStackRequest, anproto.AnalyzeResponse>(this.client.analyzeStack.bind(this.client), new anproto.AnalyzeStackRequest().setResourcesList(list));
        return res.getDiagnosticsList().map(toDiagnostic).filter(d => d.level !== "disabled");
    }

    stop(): void {
        this.client.close();
        this.child.kill();
    }
}

function options(r: Registration): anproto.AnalyzerResourceOptions {
    return new anproto.AnalyzerResourceOptions().setParent(r.parent ?? "").setDeletebeforereplace(r.deleteBeforeReplace)
        .setDeletebeforereplacedefined(r.deleteBeforeReplace).setAdditionalsecretoutputsList(r.additionalSecretOutputs)
        .setIgnorechangesList(r.ignoreChanges);
}

function providerResource(p: Registration): anproto.AnalyzerProviderResource {
    return new anproto.AnalyzerProviderResource().setUrn(p.urn).setType(p.type).setName(p.name).setProperties(Struct.fromJavaScript(encode(decode(p.wire))));
}
