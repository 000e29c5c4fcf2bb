// The check that the program under mocks registers exactly what the plan says (tests/unit/bin/diff-cli.test.ts for the
// committed stacks, tests/unit/program-replicas.test.ts for several replicas): the same names and types, every
// planned input, and each command's triggers: its own plan text, then one value per resource it follows.
import * as assert from "node:assert/strict";
import { COMMAND, CONTAINER, DOCKER_PROVIDER, GATE, PlannedResource } from "../../components/plan/resources";
import type { RecordedResource } from "./mocks";

const flat = (v: unknown): unknown[] => (Array.isArray(v) ? v.flatMap(flat) : [v]);

/**
 * `recorded`: the program's resources by name (components and the stack left out). `secretDigests`: the generated
 * secrets whose digest (a value, not an id) a command's triggers carry for them.
 */
export function assertRegistersThePlan(recorded: Map<string, RecordedResource>, planned: PlannedResource[], secretDigests: string[]): void {
    const registered = planned.filter(p => p.type !== GATE);
    assert.deepEqual(registered.map(p => p.name).sort(), [...recorded.keys()].sort());
    const gates = new Set(planned.filter(p => p.type === GATE).map(p => p.name));
    for (const p of registered) {
        const rec = recorded.get(p.name)!;
        assert.equal(p.type, rec.type, p.name);
        for (const [key, value] of Object.entries(p.inputs)) {
            if (key === "triggers" || (p.type === CONTAINER && key === "image")) continue;
            // A provider's configuration crosses the wire as strings (JSON for structured values).
            const got = p.type === DOCKER_PROVIDER && typeof value !== "string" ? JSON.parse(rec.inputs[key]) : rec.inputs[key];
            assert.deepEqual(got, value, `${p.name}.${key}`);
        }
        if (p.type !== COMMAND) continue;
        const triggers = flat(rec.inputs.triggers);
        const own = p.inputs.triggers;
        assert.deepEqual(triggers.slice(0, own.length), own, `${p.name}: triggers start with its own plan text`);
        // Then one value per name it follows: a resource's id, or a value: a gate's (an agreement) or a generated secret's digest.
        const values = new Set([...gates, ...secretDigests]);
        const rest = triggers.slice(own.length);
        assert.equal(rest.length, p.replacedBy.length, `${p.name}: ${JSON.stringify(rest)} for ${p.replacedBy}`);
        p.replacedBy.forEach((follows, i) => {
            if (values.has(follows)) assert.ok(typeof rest[i] === "string" && rest[i] !== `${follows}-id`, `${p.name}: ${follows} gives a value`);
            else assert.equal(rest[i], `${follows}-id`, `${p.name}: follows ${follows}`);
        });
    }
}
