// The steps a preview shows, given the test engine's state file from an earlier `up` (tests/engine/state.ts:
// resources keyed by URN with their plain inputs and outputs). For a resource whose inputs are
// unchanged the engine answers the program with the old id and outputs (so what depends on it stays known);
// for anything else it answers as that provider's preview of that step does (previews.ts), so a replacement's
// unknown outputs flow into its dependents as they would under the real engine.
import { OpKind, State, diff } from "../engine/state";
import type { Outcome, Registration } from "./monitor";
import { previewOutcome } from "./previews";
import { decode, plain } from "./wire";

export interface Step {
    op: OpKind;
    type: string;
    name: string;
    urn?: string;
    custom: boolean;
}

export class StepPlanner {
    readonly steps: Step[] = [];
    private readonly seen = new Set<string>();

    constructor(private readonly state: State = { resources: {} }) {}

    /** The monitor's onRegister for a preview against this state. */
    readonly onRegister = async (r: Registration): Promise<Outcome> => {
        const key = r.urn;
        this.seen.add(key);
        const old = this.state.resources[key];
        const op = diff(r.type, old, plain(decode(r.wire)));
        this.steps.push({ op, type: r.type, name: r.name, urn: r.urn, custom: true });
        return previewOutcome(op, r, old);
    };

    /** Components and the stack: created on a first run, otherwise unchanged (they have no provider and no inputs to diff). */
    component(r: Registration): void {
        if (r.custom) return;
        this.steps.push({ op: Object.keys(this.state.resources).length ? "same" : "create", type: r.type, name: r.name, urn: r.urn, custom: false });
    }

    /** What is in state but was not registered: deleted, last registered first. */
    deletes(): Step[] {
        return Object.entries(this.state.resources).filter(([k]) => !this.seen.has(k)).sort(([, a], [, b]) => b.seq - a.seq)
            .map(([, e]) => ({ op: "delete" as const, type: e.type, name: e.name, custom: true }));
    }
}
