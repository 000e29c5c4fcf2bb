// Child process: evaluates the program with mocks that only record what is registered.
// argv[2]: JSON { stack, config, preview }. Writes JSON { resources, outputs } or { error } to argv[2].out
// (a file, not stdout: a failing program exits before a large stdout write is flushed).
import * as fs from "fs";
import * as pulumi from "@pulumi/pulumi";
import { evaluate } from "./evaluate";

interface Recorded {
    type: string;
    name: string;
    inputs: Record<string, any>;
    provider?: string;
    /** The names of the resources its registration depends on (dependsOn and inputs), as the engine is told. */
    dependencies?: string[];
    answeredBefore?: number;
    answeredAs?: number;
    /** The resource's customTimeouts as the request carries them ("40m"), when any is set. */
    customTimeouts?: { create: string; update: string; delete: string };
}

const resources: Recorded[] = [];

/**
 * The SDK's per-promise debug stacks (@pulumi/pulumi 3.276.0 runtime/debuggable.js debuggablePromise stores
 * `new Error().stack` on the promise): how many were taken, and how many hold frames (components/debugStacks.ts).
 * The SDK's modules call it through the module's exports (`debuggable_1.debuggablePromise(...)`), so this wrapper,
 * installed before the program loads, sees every call.
 */
const debugStacks = { total: 0, withFrames: 0 };
{
    const debuggable = require("@pulumi/pulumi/runtime/debuggable") as { debuggablePromise: (p: Promise<unknown>, ctx: unknown) => Promise<unknown> };
    const original = debuggable.debuggablePromise;
    debuggable.debuggablePromise = (p, ctx) => {
        const wrapped = original(p, ctx);
        debugStacks.total++;
        if (/\n\s+at /.test(String((p as { _debugStackTrace?: string })._debugStackTrace))) debugStacks.withFrames++;
        return wrapped;
    };
}

// Secret inputs reach mocks wrapped in Pulumi's signature object; tests look at the values.
const SECRET_SIG = "4dabf18193072939515e22adb298388d";
function unsecret(value: any): any {
    if (Array.isArray(value)) return value.map(unsecret);
    if (value && typeof value === "object") {
        if (value[SECRET_SIG] === "1b47061264138c4ac30d75fd1eb44270") return unsecret(value.value);
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, unsecret(v)]));
    }
    return value;
}

/** Resource name → its registration's dependencies (the request's list, which the mocks' newResource does not see). */
const dependencies = new Map<string, string[]>();
/** Resource name → its customTimeouts (also only in the request). */
const timeouts = new Map<string, { create: string; update: string; delete: string }>();

/** Records what each RegisterResource request tells the engine a resource depends on, then lets the mocks answer. */
function watchDependencies(): void {
    const monitor = pulumi.runtime.getMonitor() as unknown as { registerResource(req: RegisterRequest, cb: unknown): void };
    const register = monitor.registerResource.bind(monitor);
    monitor.registerResource = (req, cb) => {
        // A URN ends with ::<name>; names are unique in this program.
        dependencies.set(req.getName(), req.getDependenciesList().map(urn => urn.slice(urn.lastIndexOf("::") + 2)));
        const t = req.getCustomtimeouts();
        if (t && (t.getCreate() || t.getUpdate() || t.getDelete())) timeouts.set(req.getName(), { create: t.getCreate(), update: t.getUpdate(), delete: t.getDelete() });
        return register(req, cb);
    };
}
interface RegisterRequest {
    getName(): string;
    getDependenciesList(): string[];
    getCustomtimeouts(): { getCreate(): string; getUpdate(): string; getDelete(): string } | undefined;
}

let delays: Record<string, number> = {};
let answered = 0;

let digestOverrides: Record<string, string> = {};
let manifestOverrides: Record<string, Record<string, number>> = {};

function commandStdout(name: string): string {
    if (name.endsWith("-preflight")) return JSON.stringify({ host: name, arch: "aarch64" });
    if (name.endsWith("-image")) return JSON.stringify({ imageId: "sha256:" + "fe".repeat(32) });
    if (name.endsWith("-weights")) {
        const files = manifestOverrides[name] ?? { "config.json": 100, "model-00001-of-00001.safetensors": 1000 };
        return JSON.stringify({ host: name.replace(/-weights$/, ""), revision: "r1", files, totalBytes: Object.values(files).reduce((a, b) => a + b, 0) });
    }
    return "";
}

function fakeState(type: string, name: string, inputs: Record<string, any>): Record<string, unknown> {
    switch (type) {
        case "random:index/randomPassword:RandomPassword":
            // Each generated secret its own value, so a test can tell which one a command was given.
            return { ...inputs, result: name.endsWith("-ray-token") ? "GENERATED-RAY-TOKEN-0123456789abcdefghijk"
                : name.endsWith("-weights-token") ? "GENERATED-COPY-TOKEN-0123456789abcdefghij" : "GENERATED-API-KEY-0123456789abcdefghijklmn" };
        case "docker:index/remoteImage:RemoteImage":
            return { ...inputs, repoDigest: digestOverrides[name] ?? inputs.name.replace(/:[^/@]*@/, "@"), imageId: "sha256:feed" };
        case "command:remote:Command":
            return { ...inputs, stdout: commandStdout(name), stderr: "" };
        default:
            return inputs;
    }
}

async function main(): Promise<void> {
    const request = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
    digestOverrides = request.digestOverrides ?? {};
    manifestOverrides = request.manifestOverrides ?? {};
    delays = request.delays ?? {};
    try {
        const outputs = await evaluate({
            stack: request.stack,
            config: request.config,
            preview: request.preview,
            secretKeys: request.secretKeys,
            afterMocks: watchDependencies,
            mocks: {
                async newResource(args) {
                    const recorded: Recorded = { type: args.type, name: args.name, inputs: unsecret(args.inputs), provider: args.provider, dependencies: dependencies.get(args.name), answeredBefore: answered,
                        ...(timeouts.has(args.name) ? { customTimeouts: timeouts.get(args.name) } : {}) };
                    resources.push(recorded);
                    if (delays[args.name]) await new Promise(r => setTimeout(r, delays[args.name]));
                    recorded.answeredAs = answered++;
                    return { id: `${args.name}-id`, state: fakeState(args.type, args.name, args.inputs) };
                },
                call: args => args.inputs,
            },
        });
        fs.writeFileSync(`${process.argv[2]}.out`, JSON.stringify({ resources, outputs, debugStacks }));
    } catch (err) {
        fs.writeFileSync(`${process.argv[2]}.out`, JSON.stringify({ error: err instanceof Error ? err.message : String(err), resources }));
    }
}

main();
