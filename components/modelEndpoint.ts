import * as pulumi from "@pulumi/pulumi";
import * as remote from "@pulumi/command/remote";
import { ClusterPlan } from "./plan/clusterPlan";
import { ResourceNames } from "./plan/naming";
import { Wiring, stdinLine } from "./wiring";
import { lastJsonLine } from "./sparkHost";

/** @internal Built only by SparkCluster. */
export interface ModelEndpointArgs {
    plan: ClusterPlan;
    names: ResourceNames;
    wiring: Wiring;
    /** The API key vLLM requires; it only ever travels through stdin. */
    apiKey: pulumi.Input<string>;
}

/**
 * @internal vLLM, proven to answer: on every host the memory gate (drop the page cache, then free memory against
 * what vLLM will ask for), `vllm serve` on the head (and, for the mp backend, `vllm serve --headless` on every
 * worker), then the probe that proves a completion works.
 */
export class ModelEndpoint extends pulumi.ComponentResource {
    /** Per host, in plan order. */
    readonly memoryGates: remote.Command[];
    /** Per host, the memory figures its gate measured (unknown until it ran). */
    readonly memory: pulumi.Output<Record<string, unknown>>[];
    readonly launch: remote.Command;
    /** mp backend: the workers' headless launches. */
    readonly headless: remote.Command[];
    readonly probe: remote.Command;
    /** Per host, in plan order: free memory once the endpoint answered (vLLM loaded). */
    readonly memoryAfterLoadCommands: remote.Command[];
    /** Their figures (CUDA free, MemAvailable, the one vLLM calls free, warnings below the threshold). */
    readonly memoryAfterLoad: pulumi.Output<Record<string, unknown>>[];
    /** probes.serving: the short streamed load after the probe; undefined when skipped. */
    readonly servingProof?: remote.Command;
    /** Its figures: per concurrency, time to first token p50/p95 and output tokens/s; warnings on a drop. */
    readonly serving: pulumi.Output<Record<string, unknown> | undefined>;

    constructor(name: string, args: ModelEndpointArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:ModelEndpoint", name, {}, opts);
        const { plan, names, wiring } = args;
        const keyLine = stdinLine(args.apiKey);
        this.memoryGates = plan.hosts.map(h => wiring.command(names.host(h.host.name, "memory"), { parent: this }));
        this.memory = this.memoryGates.map(g => g.stdout.apply(lastJsonLine));
        this.launch = wiring.command(names.of("vllm-launch"), { parent: this }, keyLine);
        this.headless = plan.hosts.filter(h => h.vllmLaunch).map(h => wiring.command(names.host(h.host.name, "vllm"), { parent: this }));
        this.probe = wiring.command(names.of("endpoint-probe"), { parent: this }, keyLine);
        this.memoryAfterLoadCommands = plan.hosts.map(h => wiring.command(names.host(h.host.name, "loaded"), { parent: this }));
        this.memoryAfterLoad = this.memoryAfterLoadCommands.map(c => c.stdout.apply(out => {
            const facts = lastJsonLine(out) as Record<string, unknown> & { warnings?: string[] };
            for (const w of facts.warnings ?? []) pulumi.log.warn(w, c);
            return facts as Record<string, unknown>;
        }));
        if (plan.servingProof) this.servingProof = wiring.command(names.of("serving-proof"), { parent: this }, keyLine);
        this.serving = this.servingProof ? this.servingProof.stdout.apply(out => {
            const figures = lastJsonLine(out) as { levels?: Record<string, number>[]; warnings?: string[]; ttftMeasures?: string };
            // The first token is the first chunk with choices, reasoning or answer (components/hostProgram/spark_vllm/serving.py).
            for (const lv of figures.levels ?? [])
                pulumi.log.info(`serving at concurrency ${lv.concurrency}: time to first token p50 ${lv.ttftP50Ms} ms, p95 ${lv.ttftP95Ms} ms` +
                    `${figures.ttftMeasures ? ` (${figures.ttftMeasures})` : ""}; ${lv.outputTokensPerSecond} output tokens/s` +
                    `${lv.reasoningTokens ? `, ${lv.reasoningTokens} reasoning tokens` : ""}`, this);
            for (const w of figures.warnings ?? []) pulumi.log.warn(w, this);
            return figures as Record<string, unknown>;
        }) : pulumi.output(undefined);
        this.registerOutputs({ probe: this.probe.stdout, serving: this.serving });
    }
}
