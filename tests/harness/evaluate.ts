// Evaluates the real program (index.ts) under pulumi.runtime.setMocks.
// Run as its own process per evaluation, as `pulumi up` would: the Pulumi runtime is global.
import * as path from "path";
import * as pulumi from "@pulumi/pulumi";

export interface EvaluateOptions {
    stack: string;
    /** Stack config as in Pulumi.<stack>.yaml: "spark-vllm:hosts" → value. */
    config: Record<string, unknown>;
    /** Keys of config whose values are secrets. */
    secretKeys?: string[];
    preview?: boolean;
    mocks: pulumi.runtime.Mocks;
    /** Default: the repository's index.ts. */
    program?: string;
    /** Called once the mocks are in place, before the program runs (e.g. to watch the mock monitor). */
    afterMocks?: () => void;
}

/** Resolves with the stack outputs once every resource is registered; rejects with the program's error. */
export async function evaluate(opts: EvaluateOptions): Promise<Record<string, unknown>> {
    const config: Record<string, string> = {};
    for (const [key, value] of Object.entries(opts.config)) config[key] = typeof value === "string" ? value : JSON.stringify(value);
    pulumi.runtime.setAllConfig(config, opts.secretKeys);
    await pulumi.runtime.setMocks(opts.mocks, "spark-vllm", opts.stack, opts.preview ?? false);
    opts.afterMocks?.();
    const program = opts.program ?? path.join(__dirname, "..", "..", "index.ts");
    const outputs = await pulumi.runtime.runInPulumiStack(async () => {
        const mod = require(program);
        return { ...mod };
    });
    // Resources that no output depends on are still registering: wait for every RPC.
    await pulumi.runtime.disconnect();
    const resolved: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(outputs ?? {})) resolved[key] = await unwrap(value);
    return resolved;
}

/** The plain value of an Output (secrets included); undefined when unknown at preview. */
export async function unwrap<T>(value: pulumi.Input<T> | unknown): Promise<T | undefined> {
    if (!pulumi.Output.isInstance(value)) return value as T;
    const output = value as unknown as { isKnown: Promise<boolean>; promise(): Promise<T> };
    return (await output.isKnown) ? output.promise() : undefined;
}
