// Stacks on the simulated hosts and the check that nothing is left behind: shared by the
// end-to-end suite and the benchmarks.
import * as path from "path";
import type { Stack } from "../engine/engine";
import type { Sim } from "./hosts";

export interface SimStackOptions {
    /** Image tag from the sim registry; default 0.17.1. */
    tag?: string;
    /** A full image reference instead of a tag. */
    image?: string;
    /** How many of the sim's hosts; default all. */
    hosts?: number;
    vllm?: Record<string, unknown>;
    probes?: Record<string, unknown>;
    /** Fabric netdev on every host; default the sim's. */
    fabricInterface?: string;
    weights?: string;
    /** RDMA HCAs on every host (the sim's hosts show a RoCE `rocep1s0f1` in sysfs); default [] (TCP). */
    hcas?: string[];
    /** spark-vllm:endpoint beyond the sim's proxy image (Debian's nginx from the sim registry), e.g. { tls: "generated" }. */
    endpoint?: Record<string, unknown>;
    /** Secret config (key without the namespace → value), as `pulumi config set --secret` sets it: in the stack's secretKeys. */
    secrets?: Record<string, string>;
    /** spark-vllm:model instead of the stand-in's Qwen3.5 (tests/e2e/real-vllm.test.ts serves a real tiny model). */
    model?: Record<string, unknown>;
    /** spark-vllm:testBed (components/spec/parseSpec.ts parseTestBed). */
    testBed?: Record<string, unknown>;
}

/** A stack on the simulated hosts: TCP fabric on the sim's interface, this machine's x86 platform. */
export function simStack(sim: Sim, workDir: string, name: string, opts: SimStackOptions = {}): Stack {
    const hosts = sim.hosts.slice(0, opts.hosts ?? sim.hosts.length).map(h => ({
        name: h.name,
        ssh: { host: h.address, user: "root" },
        fabric: { interface: opts.fabricInterface ?? h.fabricInterface, address: h.address, hcas: opts.hcas ?? [] },
        platform: "linux/amd64",
    }));
    return {
        name,
        statePath: path.join(workDir, `${name}.state.json`),
        // The docker CLI's ssh on PATH carries the sim's config (known_hosts), as an operator's ~/.ssh would for the
        // Docker provider; remote commands read none of it, only the agent (tests/engine/operations.ts remoteSshArgv).
        transport: { env: sim.env },
        config: {
            "spark-vllm:hosts": hosts,
            "spark-vllm:image": opts.image ?? sim.images[opts.tag ?? "0.17.1"],
            "spark-vllm:model": opts.model ?? { id: "Qwen/Qwen3.5-122B-A10B-FP8", servedName: "qwen3.5-122b", cacheDir: "/root/.cache/huggingface", weights: opts.weights ?? "present" },
            "spark-vllm:vllm": { tensorParallelSize: hosts.length, maxModelLen: 32768, ...(opts.vllm ?? {}) },
            "spark-vllm:probes": { intervalSeconds: 1, rayTimeoutSeconds: 30, endpointTimeoutSeconds: 60, ...(opts.probes ?? {}) },
            // The sim's registry serves the proxy image; nothing outside 198.18.0.0/15 is reachable.
            "spark-vllm:endpoint": { image: sim.proxyImage, ...(opts.endpoint ?? {}) },
            ...(opts.testBed ? { "spark-vllm:testBed": opts.testBed } : {}),
            ...Object.fromEntries(Object.entries(opts.secrets ?? {}).map(([k, v]) => [`spark-vllm:${k}`, v])),
        },
        ...(opts.secrets ? { secretKeys: Object.keys(opts.secrets).map(k => `spark-vllm:${k}`) } : {}),
    };
}

/** Containers, processes and ports of spark-vllm still on any simulated host. */
export async function leftovers(sim: Sim): Promise<string[]> {
    const found: string[] = [];
    for (const h of sim.hosts) {
        const ps = await sim.docker(h.name, ["ps", "-a", "--filter", "name=spark-vllm", "--format", "{{.Names}}"]);
        if (ps.code !== 0) found.push(`${h.name}: docker ps failed: ${ps.stderr.trim()}`);
        if (ps.stdout.trim()) found.push(`${h.name}: containers ${ps.stdout.trim()}`);
        // Only this host's processes (its network namespace): other stand-in tests may run on the machine.
        const procs = await sim.exec(h.name, "pgrep -af --ns $$ --nslist net '[v]llm serve|[r]ay start|[_]sim_gcs|[s]erve-weights' || true");
        if (procs.stdout.trim()) found.push(`${h.name}: processes ${procs.stdout.trim()}`);
        const ports = await sim.exec(h.name, "ss -Hltn '( sport = :8000 or sport = :8001 or sport = :6379 or sport = :20080 or sport = :29501 )' || true");
        if (ports.stdout.trim()) found.push(`${h.name}: listening ${ports.stdout.trim()}`);
    }
    return found;
}
