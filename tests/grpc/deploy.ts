// One deployment as the CLI drives it: the program through the language host's runner (runner.ts), each
// registration analyzed by the policy pack before its step, the stack analyzed once every step is done.
// Preview and update differ as the engine makes them differ (pulumi/pulumi@1b59498
// pkg/resource/deploy/analyze_snapshot.go analyzeResource): a mandatory violation in update refuses that
// resource ("resource <urn> is invalid", step_generator.go generateSteps) before its step runs; in preview
// it is reported and the preview fails at the end. AnalyzeStack runs only when the program and every step
// succeeded (deployment_executor.go Execute), on each resource's final properties.
import * as path from "path";
import { Analyzer, Diagnostic } from "./analyzer";
import { Monitor, Outcome, Registration } from "./monitor";
import { RunOptions, RunResult, failed, runProgram } from "./runner";
import { decode } from "./wire";

export const REPO = path.join(__dirname, "..", "..");

export interface DeployOptions extends Omit<RunOptions, "beforeStep"> {
    /** The policy pack directory (PulumiPolicy.yaml); none: no analysis. */
    packDir?: string;
}

export interface DeployResult {
    run: RunResult;
    /** Per-resource Analyze diagnostics, in registration order. */
    diagnostics: Diagnostic[];
    /** AnalyzeStack diagnostics; undefined when it did not run (the program or a step failed). */
    stackDiagnostics?: Diagnostic[];
    /** Final properties per URN as the engine would keep them (preview: inputs; update: the step's outputs). */
    properties: Map<string, Record<string, any>>;
    /** The CLI would report failure: the program failed, a step failed, or any mandatory violation. */
    failed: boolean;
}

export const mandatory = (ds: Diagnostic[] = []) => ds.filter(d => d.level === "mandatory");

export async function deploy(opts: DeployOptions): Promise<DeployResult> {
    const diagnostics: Diagnostic[] = [];
    const properties = new Map<string, Record<string, any>>();
    let analyzer: Analyzer | undefined, host: Monitor | undefined;
    const project = "spark-vllm";
    if (opts.packDir) {
        // The analyzer gets the engine's host address (analyzer_plugin.go: []string{host.ServerAddr()}); ours serves Engine.log.
        host = new Monitor({ project, stack: opts.stack, dryRun: opts.dryRun });
        const engineAddress = await host.start();
        analyzer = await Analyzer.start({ packDir: opts.packDir, engineAddress, project, stack: opts.stack, dryRun: opts.dryRun, config: opts.config, secretKeys: opts.secretKeys });
    }
    try {
        const byUrn = new Map<string, Registration>();
        const providerOf = (r: Registration) => (r.provider ? byUrn.get(r.provider.split("::").slice(0, -1).join("::")) : undefined);
        const run = await runProgram({
            ...opts,
            beforeStep: async r => {
                byUrn.set(r.urn, r);
                properties.set(r.urn, decode(r.wire));
                if (!analyzer) return;
                // The engine attributes a resource's violations to its URN (analyzeResource: events.OnPolicyViolation(r.URN, d)).
                const ds = (await analyzer.analyze(r, providerOf(r))).map(d => ({ ...d, urn: d.urn ?? r.urn }));
                diagnostics.push(...ds);
                if (!opts.dryRun && mandatory(ds).length) throw new Error(`resource ${r.urn} is invalid`);
            },
            onRegister: opts.onRegister && (async (r): Promise<Outcome> => {
                const outcome = await opts.onRegister!(r);
                properties.set(r.urn, decode(outcome.outputs));
                return outcome;
            }),
        });
        let stackDiagnostics: Diagnostic[] | undefined;
        if (analyzer && !failed(run))
            stackDiagnostics = await analyzer.analyzeStack(run.registrations.map(r => ({ r, properties: properties.get(r.urn) ?? {}, provider: providerOf(r) })));
        return { run, diagnostics, stackDiagnostics, properties, failed: failed(run) || mandatory(diagnostics).length > 0 || mandatory(stackDiagnostics).length > 0 };
    } finally {
        analyzer?.stop();
        host?.stop();
    }
}
