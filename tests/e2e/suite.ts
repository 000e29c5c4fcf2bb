// What every end-to-end file shares: root, simulated Sparks for the file's tests (two unless the file asks for more) (started before, stopped after) on
// a cluster of its own (its own bridge, namespaces, /24 and registry: tests/sim/hosts.ts simCluster), so that files run
// side by side; its stacks in a temporary directory, and how an expected failure is printed.
import { after, before } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Sim, SimOptions, startSim } from "../sim/hosts";
import { SimStackOptions, simStack } from "../sim/stacks";
import type { Report, Stack } from "../engine/engine";

export interface SimSuite {
    readonly sim: Sim;
    /** A stack on this file's simulated hosts (tests/sim/stacks.ts), with `defaults` under `opts`. */
    stack(name: string, opts?: SimStackOptions): Stack;
}

/**
 * Registers the file's before/after hooks; the sim is there once `before` has run. `simOptions` go to startSim as they
 * are (e.g. `fabric`, to cable a host on another port; `hosts`, 2 unless given); the cluster is the suite's.
 */
export function simSuite(prefix: string, defaults: SimStackOptions = {}, simOptions: Omit<SimOptions, "cluster"> = {}): SimSuite {
    if (process.getuid?.() !== 0) throw new Error("the end-to-end suite needs root (network namespaces, dockerd, sshd): run it as root, as .ci/run does");
    let sim: Sim | undefined;
    let work = "";
    before(async () => {
        work = fs.mkdtempSync(path.join(os.tmpdir(), `spark-vllm-${prefix}-`));
        sim = await startSim({ ...simOptions, hosts: simOptions.hosts ?? 2, cluster: "auto" });
    }, { timeout: 900_000 });
    after(async () => {
        await sim?.stop();
        fs.rmSync(work, { recursive: true, force: true });
    }, { timeout: 300_000 });
    return {
        get sim() {
            assert.ok(sim, "the simulated hosts are not up");
            return sim;
        },
        stack: (name, opts = {}) => simStack(sim!, work, name, { ...defaults, ...opts }),
    };
}

/** `s` as a regular expression matching exactly it (for addresses, which differ per cluster). */
export function esc(s: string): string {
    return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The failed up's error, printed so CI logs show what a user would read. */
export function failure(r: Report): string {
    assert.ok(r.error, "up was expected to fail");
    console.log(`--- up failed as expected:\n${r.error.split("\n").slice(0, 30).join("\n")}\n---`);
    return r.error;
}

/** The HTTP status of one chat completion against the stack's endpoint with its API key; 0 when nothing answers. */
export async function completionStatus(r: Report): Promise<number> {
    try {
        const res = await fetch(`${r.outputs?.endpoint}/chat/completions`, {
            method: "POST",
            headers: { "Content-Type": "application/json", Authorization: `Bearer ${r.outputs?.apiKey}` },
            body: JSON.stringify({ model: r.outputs?.modelName, messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
            signal: AbortSignal.timeout(10_000),
        });
        await res.text();
        return res.status;
    } catch {
        return 0;
    }
}
