// The evaluation bench's SDK floor (bench/floor.ts) stands for "the program's resources and nothing else": it must
// register the same types, names, parents and providers as the program, in the same order, or its figure says
// nothing about the program. Both run as `pulumi preview` runs them (tests/grpc/runner.ts), at 2 hosts.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import { compileProgram } from "../../../bench/evaluate";
import { containersOnly, floorGraph, floorProject } from "../../../bench/floor";
import { manyHostConfig } from "../../harness/many-hosts";
import { RunResult, runProgram } from "../../grpc/runner";
import type { Registration } from "../../grpc/monitor";

let compiled = "";
let program: RunResult;
before(async () => {
    compiled = compileProgram();
    program = await runProgram({ dir: compiled, stack: "bench", config: manyHostConfig(2), dryRun: true });
    assert.equal(program.exitCode, 0, program.stderr);
});
after(() => fs.rmSync(compiled, { recursive: true, force: true }));

/** What a registration is in the graph: its type, its URN (names and parent chain) and its provider's URN. */
const shape = (r: Registration) => ({ type: r.type, urn: r.urn, provider: r.provider?.replace(/::[^:]*$/, "") });

async function runFloor(graph: ReturnType<typeof floorGraph>): Promise<RunResult> {
    const floor = floorProject(graph, compiled);
    try {
        const run = await runProgram({ dir: floor.dir, stack: "bench", config: {}, dryRun: true, env: floor.env });
        assert.equal(run.exitCode, 0, run.stderr);
        return run;
    } finally {
        fs.rmSync(floor.dir, { recursive: true, force: true });
    }
}

/** In URN order: each registers when its inputs resolve, so the program's arrive in another order than the floor's. */
const shapes = (rs: Registration[]) => rs.map(shape).sort((x, y) => x.urn.localeCompare(y.urn));

test("the floor registers the program's resources: same types, URNs and providers", async () => {
    const graph = floorGraph(program.registrations);
    assert.ok(graph.some(r => r.parent !== undefined) && graph.some(r => r.provider !== undefined), "the graph keeps parents and providers");
    const floor = await runFloor(graph);
    assert.deepEqual(shapes(floor.registrations), shapes(program.registrations));
    // The smallest inputs: the helper program the tools commands carry is not in the floor.
    const bytes = (rs: Registration[]) => JSON.stringify(rs.map(r => r.inputs)).length;
    assert.ok(bytes(floor.registrations) * 10 < bytes(program.registrations), `floor inputs ${bytes(floor.registrations)} B, program's ${bytes(program.registrations)} B`);
});

test("the containers-only floor registers the program's containers alone", async () => {
    const floor = await runFloor(containersOnly(floorGraph(program.registrations)));
    const containers = program.registrations.filter(r => r.type === "docker:index/container:Container").map(r => r.name);
    assert.deepEqual(floor.registrations.filter(r => r.type !== "pulumi:pulumi:Stack").map(r => [r.type, r.name, r.parent?.split("::")[2]]),
        containers.map(name => ["docker:index/container:Container", name, "pulumi:pulumi:Stack"]));
});

test("a graph whose parent registers after its child is refused", () => {
    const [a, b] = program.registrations.filter(r => r.parent && !r.parent.endsWith("::" + program.registrations[0].name)).slice(0, 2);
    assert.equal(program.registrations[0].type, "pulumi:pulumi:Stack");
    const parent = program.registrations.find(r => r.urn === a.parent)!;
    assert.throws(() => floorGraph([a, parent, b]), /registered after it/);
});
