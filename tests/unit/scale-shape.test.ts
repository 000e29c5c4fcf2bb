// Issue 17: evaluation linear in hosts. What made it quadratic was every image and container waiting on every
// host's preflight by name, and every container and fabric rank carrying every host's image or container in its
// inputs: N lists of N. Now the edges from every host meet at a gate (components/plan/resources.ts GATE), and only
// the few resources that must gather every host hold a list that grows with the hosts. These tests pin that shape,
// in the plan and in what the program really tells the engine (tests/harness records each registration's
// dependencies), and that the gates still order: every preflight before any image, every image before any container.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { parseSpec } from "../../components/spec/parseSpec";
import { planCluster } from "../../components/plan/plan";
import { plannedResources } from "../../components/plan/resources";
import { resourceNames } from "../../components/plan/naming";
import { manyHostConfig } from "../harness/many-hosts";
import { RecordedResource, evaluateWithMocks } from "../harness/mocks";

const n = resourceNames();
const NS = "spark-vllm:";
/** The gates, and the resources that must gather every host: the only lists that may grow with the hosts. */
const GATHERERS = new Set([
    n.of("preflights"), n.of("images"), n.of("image-checks"), n.of("containers"), n.of("weights"), // gates: one edge in per host
    n.of("compat"), // runs once every host's weights are in place (and they agree)
    n.of("ray-head"), // starts once every host's fabric rank has passed
    n.of("ray-probe"), // waits for every Ray node
    n.of("vllm-launch"), // after every host's memory gate
    n.of("endpoint-probe"), // mp: after every host's launch
]);
/** Every name with its host replaced by <host>, so plans of different sizes compare. */
const kind = (name: string) => name.replace(/spark-\d{3}/g, "<host>");

function config(hosts: number, change: Record<string, unknown> = {}): Record<string, unknown> {
    const c = manyHostConfig(hosts);
    for (const [key, value] of Object.entries(change)) {
        const [top, sub] = key.split(".");
        c[NS + top] = sub ? { ...(c[NS + top] as object), [sub]: value } : value;
    }
    return c;
}
const plan = (c: Record<string, unknown>) =>
    plannedResources(planCluster(parseSpec(Object.fromEntries(Object.entries(c).map(([k, v]) => [k.slice(NS.length), v])))));

/** Per kind, the longest list of each field over the resources of that kind. */
function longest<T>(items: T[], name: (t: T) => string, lists: Record<string, (t: T) => string[]>): Map<string, Record<string, number>> {
    const out = new Map<string, Record<string, number>>();
    for (const item of items) {
        const k = kind(name(item));
        const row = out.get(k) ?? {};
        for (const [field, list] of Object.entries(lists)) row[field] = Math.max(row[field] ?? 0, list(item).length);
        out.set(k, row);
    }
    return out;
}

/** The kinds whose lists are longer with more hosts. */
function growing(small: Map<string, Record<string, number>>, large: Map<string, Record<string, number>>): string[] {
    const grew: string[] = [];
    for (const [k, row] of large)
        for (const [field, length] of Object.entries(row))
            if (length > (small.get(k)?.[field] ?? 0)) grew.push(`${k}.${field} (${small.get(k)?.[field] ?? 0} → ${length})`);
    return grew;
}

const VARIANTS: Array<[string, Record<string, unknown>]> = [
    ["ray", {}],
    ["mp", { "vllm.backend": "mp" }],
    ["head-then-copy weights", { "model.weights": "head-then-copy" }],
    ["image copied from the head", { imageSource: "head" }],
];

for (const [variant, change] of VARIANTS)
    test(`plan (${variant}): no dependsOn/replacedBy list grows with the hosts except the gates' and the gatherers'`, () => {
        const lists = { dependsOn: (p: { dependsOn: string[] }) => p.dependsOn, replacedBy: (p: { replacedBy: string[] }) => p.replacedBy };
        const small = longest(plan(config(4, change)), p => p.name, lists);
        const large = longest(plan(config(12, change)), p => p.name, lists);
        const grew = growing(small, large);
        assert.deepEqual(grew.filter(g => !GATHERERS.has(g.slice(0, g.indexOf(".")))), [], "lists that grow with the hosts");
        // The gates really gather: each waits for its resource on every host.
        for (const gate of [n.of("preflights"), n.of("images"), n.of("image-checks"), n.of("containers"), n.of("weights")])
            assert.equal(large.get(gate)?.dependsOn, 12, `${gate} waits for every host`);
        // And what used to wait for every host by name now waits for the gate: a handful of names each.
        for (const [k, row] of large) if (!GATHERERS.has(k)) assert.ok(row.dependsOn <= 4 && row.replacedBy <= 4, `${k}: ${JSON.stringify(row)}`);
    });

/** The program under mocks: what each registration tells the engine it depends on, in registration order. */
function registrations(hosts: number, change: Record<string, unknown> = {}): RecordedResource[] {
    const e = evaluateWithMocks(config(hosts, change), { stack: "scale" });
    assert.equal(e.error, undefined);
    for (const r of e.resources) assert.ok(Array.isArray(r.dependencies), `${r.name}: dependencies recorded`);
    return e.resources;
}

for (const [variant, change] of VARIANTS.slice(0, 2))
    test(`program (${variant}): no registration's dependencies grow with the hosts except the gatherers'`, () => {
        const deps = { dependencies: (r: RecordedResource) => r.dependencies! };
        const grew = growing(longest(registrations(3, change), r => r.name, deps), longest(registrations(7, change), r => r.name, deps));
        assert.deepEqual(grew.filter(g => !GATHERERS.has(g.slice(0, g.indexOf(".")))), [], "registrations whose dependencies grow with the hosts");
    });

test("program: the gates order: with one host's preflight slow, no image is pulled before it passed, no container before every image", () => {
    const slow = "spark-006";
    const e = evaluateWithMocks(config(7), { stack: "scale", delays: { [`spark-${slow}-preflight`]: 1500, [`spark-${slow}-image`]: 1500 } });
    assert.equal(e.error, undefined);
    const rs = e.resources;
    const of = (role: string) => rs.filter(r => r.name.endsWith(`-${role}`) && /spark-\d{3}/.test(r.name));
    const [preflights, images, containers] = [of("preflight"), of("image"), of("container")];
    assert.deepEqual([preflights.length, images.length, containers.length], [7, 7, 7]);
    // Every image requested only after the slow preflight was answered (created), every container after the slow image.
    const answer = (name: string) => rs.find(r => r.name === name)!.answeredAs!;
    const [slowPreflight, slowImage] = [answer(`spark-${slow}-preflight`), answer(`spark-${slow}-image`)];
    for (const image of images) assert.ok(slowPreflight < image.answeredBefore!, `${image.name} requested before ${slow}'s preflight was answered`);
    for (const container of containers) assert.ok(slowImage < container.answeredBefore!, `${container.name} requested before ${slow}'s image was answered`);
    // Each image and container still names its own host's resources for the engine (state, delete order).
    for (const r of images) assert.ok(r.dependencies!.includes(r.name.replace(/-image$/, "-preflight")), `${r.name}: ${r.dependencies}`);
    for (const r of containers) assert.ok(r.dependencies!.includes(r.name.replace(/-container$/, "-image")), `${r.name}: ${r.dependencies}`);
});

/** Bytes of a registration's inputs as JSON: what its request, its response and the SDK's debug log each carry. */
const inputBytes = (r: RecordedResource) => JSON.stringify(r.inputs).length;

for (const [variant, change] of VARIANTS.slice(0, 2))
    test(`program (${variant}): no per-host registration carries more bytes with more hosts; only the gatherers' inputs grow`, () => {
        const size = { bytes: (r: RecordedResource) => Array.from({ length: inputBytes(r) }) as string[] };
        const [small, large] = [longest(registrations(3, change), r => r.name, size), longest(registrations(7, change), r => r.name, size)];
        // A host's inputs name only their host (same-width names and addresses here); a few digits may differ (a rank, a world size).
        const grew = [...large].filter(([k, row]) => !GATHERERS.has(k) && row.bytes > (small.get(k)?.bytes ?? 0) + 16)
            .map(([k, row]) => `${k}: ${small.get(k)?.bytes} → ${row.bytes} bytes`);
        assert.deepEqual(grew, [], "registrations whose inputs grow with the hosts");
    });

test("program: the helper program travels once per host, on its tools command's stdin, and in no other input", () => {
    const rs = registrations(3);
    const tools = rs.filter(r => /^spark-spark-\d{3}-tools$/.test(r.name));
    assert.equal(tools.length, 3);
    const packed = String(tools[0].inputs.stdin);
    assert.ok(packed.length > 10_000, `the packed program (${packed.length} bytes) is on stdin`);
    for (const t of tools) assert.equal(t.inputs.stdin, packed, `${t.name}: the same program`);
    // Any 200 characters of it: a copy, whole or in part, in any other input would hold them.
    const sample = packed.slice(packed.length / 2, packed.length / 2 + 200);
    const carriers = rs.filter(r => JSON.stringify(r.inputs).includes(sample)).map(r => r.name).sort();
    assert.deepEqual(carriers, tools.map(t => t.name).sort());
    // The install's own script (logDir chain check, pin in the container: issue 30) is some 3 KB; a copy would be > 10 KB.
    for (const t of tools) assert.ok(JSON.stringify({ ...t.inputs, stdin: undefined }).length < 8000, `${t.name}: no second copy beside stdin`);
});
