// The failures `--fault NAME` replays: each is set up exactly as the end-to-end suite sets it up
// (tests/e2e/cluster.test.ts, "failures stop up with the cause"), and `expect` holds what that suite asserts
// about the error `up` prints, so a replay that shows something else is reported as broken.
import type { Sim } from "../../tests/sim/hosts";
import type { SimStackOptions } from "../../tests/sim/stacks";

export interface Fault {
    summary: string;
    stack: SimStackOptions;
    setup(sim: Sim): Promise<void>;
    /** Undoes setup, so that destroy can reach every host. */
    cleanup(sim: Sim): Promise<void>;
    expect: RegExp[];
}

const none = async () => undefined;

export const FAULTS = {
    "old-image": {
        summary: "the image's vLLM 0.14.0 is too old for the model's architecture (refused before any launch)",
        stack: { tag: "0.14.0" },
        setup: none,
        cleanup: none,
        expect: [/Qwen3_5MoeForConditionalGeneration/, /vLLM 0\.14\.0/, /supported from vLLM 0\.17\.0/],
    },
    crash: {
        summary: "vLLM crashes 6 s into loading the model (reported within seconds, with the root-cause line)",
        stack: {},
        setup: sim => sim.setFaults("spark-a", { load_seconds: 30, crash_after_seconds: 6 }),
        cleanup: sim => sim.setFaults("spark-a", null),
        expect: [/kind: cuda-error/, /root cause: RuntimeError: CUDA error: an illegal memory access was encountered/, /full log: spark-a:\/var\/tmp\/spark-vllm\/vllm-serve\.log/],
    },
    hang: {
        summary: "vLLM hangs in NCCL set-up (reported at the endpoint probe's timeout, 8 s here)",
        stack: { probes: { endpointTimeoutSeconds: 8 } },
        setup: sim => sim.setFaults("spark-a", { nccl_hang: true }),
        cleanup: sim => sim.setFaults("spark-a", null),
        expect: [/did not become healthy within 8 s/],
    },
    "worker-down": {
        summary: "the worker host spark-b is unreachable (the error names it; vLLM never launches)",
        stack: {},
        setup: sim => sim.setHostDown("spark-b", true),
        cleanup: sim => sim.setHostDown("spark-b", false),
        expect: [/spark-b/],
    },
} satisfies Record<string, Fault>;

export type FaultName = keyof typeof FAULTS;
