// An image change (issue 46), the pure core: the new image is proven on every host in a throw-away container before any
// container is created or replaced, and with several replicas each replica's containers wait for its drain, so the new
// image rolls replica by replica as a relaunch does.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { resourceNames } from "../../../components/plan/naming";
import { COMMAND, CONTAINER, GATE, PlannedResource, plannedResources } from "../../../components/plan/resources";
import { planCluster } from "../../../components/plan/plan";
import { parseSpec } from "../../../components/spec/parseSpec";
import { rawConfig } from "../../fixtures";

const n = resourceNames();
const OTHER_IMAGE = "198.18.0.1:5000/vllm-sim:0.17.2@sha256:" + "cd".repeat(32);

function resources(hosts: number, opts: { replicas?: number; backend?: "ray" | "mp"; image?: string; shm?: number } = {}) {
    const raw = rawConfig(hosts, { tp: opts.replicas ? hosts / opts.replicas : hosts });
    if (opts.replicas) raw.replicas = opts.replicas;
    if (opts.backend) raw.vllm.backend = opts.backend;
    if (opts.image) raw.image = opts.image;
    if (opts.shm) raw.shmSizeMb = opts.shm;
    return plannedResources(planCluster(parseSpec(raw)));
}
const byName = (rs: PlannedResource[], name: string) => {
    const r = rs.find(x => x.name === name);
    assert.ok(r, `${name} is planned`);
    return r!;
};
const hostNames = (count: number) => ["spark-a", "spark-b", "spark-c", "spark-d"].slice(0, count);

test("every host proves the pulled image in a throw-away container before any container of the cluster is created or replaced", () => {
    for (const backend of ["ray", "mp"] as const) {
        const rs = resources(2, { backend });
        const gate = byName(rs, n.of("image-checks"));
        assert.equal(gate.type, GATE);
        assert.deepEqual(gate.dependsOn, hostNames(2).map(h => n.host(h, "image-check")));
        for (const h of hostNames(2)) {
            const check = byName(rs, n.host(h, "image-check"));
            assert.equal(check.type, COMMAND);
            assert.equal(check.host, h);
            assert.deepEqual(check.dependsOn, [n.host(h, "image"), n.of("images")]);
            assert.deepEqual(check.replacedBy, [n.of("images")], "again for every new image");
            // Nothing to stop: a new proof is created before the old one goes, and its failure leaves what runs as it was.
            assert.equal(check.deleteBeforeReplace, undefined);
            assert.equal(check.type === COMMAND && check.inputs.delete, undefined);
            const container = byName(rs, n.host(h, "container"));
            assert.ok(container.dependsOn.includes(n.of("image-checks")), `${h}'s container waits for every host's proof`);
        }
        // What stops anything on a host (a delete-before-replace) registers only after the proofs: the real engine deletes
        // a replaced resource's dependents when it registers, so nothing stops before the new image is proven.
        const order = rs.map(r => r.name);
        const proven = order.indexOf(n.of("image-checks"));
        // (The helper program's install is replaced by a new spark-vllm, not by an image; its delete removes a file only.)
        for (const r of rs.filter(r => r.deleteBeforeReplace && !r.name.endsWith("-tools")))
            assert.ok(order.indexOf(r.name) > proven, `${r.name} registers after the image proofs`);
    }
});

test("the image proof runs compat on exactly the pulled image, with the GPU, read-only mounts, no network, and the model only once it is there", () => {
    const check = byName(resources(2), n.host("spark-b", "image-check"));
    assert.ok(check.type === COMMAND);
    const create = check.inputs.create;
    assert.match(create, /^timeout 180 docker run --rm --pull never --gpus all --network none /);
    assert.match(create, /--label spark-vllm\.image-check=spark-b /);
    assert.match(create, / -e HF_HOME=\/root\/\.cache\/huggingface -e HF_HUB_OFFLINE=1 /);
    assert.match(create, / -v \/root\/\.cache\/huggingface:\/root\/\.cache\/huggingface:ro -v \/var\/tmp\/spark-vllm:\/var\/tmp\/spark-vllm:ro /);
    assert.match(create, / --entrypoint python3 '?198\.18\.0\.1:5000\/vllm-sim[^ ]*@sha256:[0-9a-f]{64}'? /);
    assert.match(create, / compat '\{[^']*"modelIfPresent":true[^']*\}'$/);
    assert.ok(create.includes('"backend":"ray"'), create);
});

test("a new image changes every host's proof and container, and nothing the proof stands before", () => {
    const before = resources(2), after = resources(2, { image: OTHER_IMAGE });
    const changed = after.filter(r => JSON.stringify(r.inputs) !== JSON.stringify(before.find(b => b.name === r.name)?.inputs)).map(r => r.name).sort();
    for (const h of hostNames(2))
        for (const role of ["image", "image-check", "container"] as const) assert.ok(changed.includes(n.host(h, role)), `${n.host(h, role)} changes`);
    assert.ok(!changed.includes(n.host("spark-a", "preflight")) && !changed.includes(n.of("vllm-launch")), changed.join(", "));
});

test("several replicas: each replica's containers wait for its drain, and each drain for the replica before it to be back", () => {
    for (const [hosts, replicas] of [[2, 2], [4, 2]] as const) {
        const rs = resources(hosts, { replicas });
        const order = rs.map(r => r.name);
        for (let k = 1; k <= replicas; k++) {
            const rn = resourceNames(undefined, k);
            const drain = byName(rs, rn.of("drain"));
            assert.ok(drain.dependsOn.includes(n.of("proxy")), "after the front proxy");
            if (k > 1) assert.ok(drain.dependsOn.includes(resourceNames(undefined, k - 1).of("undrain")), `replica ${k} drains once replica ${k - 1} is back`);
            // Replaced by what replaces its containers, never by what follows them (that would be a cycle).
            assert.deepEqual(drain.replacedBy, [n.of("images"), n.of("api-key"), ...(hosts / replicas > 1 ? [n.of("ray-token")] : [])]);
            const mine = hostNames(hosts).slice((k - 1) * (hosts / replicas), k * (hosts / replicas));
            for (const h of mine) {
                const container = byName(rs, n.host(h, "container"));
                assert.equal(container.type, CONTAINER);
                assert.ok(container.dependsOn.includes(rn.of("drain")), `${h}'s container follows replica ${k}'s drain`);
                assert.ok(order.indexOf(container.name) > order.indexOf(rn.of("drain")));
            }
        }
        // Planned in an order every component can build: whatever an entry waits for or follows comes before it.
        rs.forEach((r, i) => [...r.dependsOn, ...r.replacedBy].forEach(d =>
            assert.ok(order.indexOf(d) >= 0 && order.indexOf(d) < i, `${r.name} needs ${d} before it`)));
    }
});

test("several replicas: a new image or container setting drains every replica again; an unchanged stack drains none", () => {
    const digest = (rs: PlannedResource[], k: number) => JSON.stringify((byName(rs, resourceNames(undefined, k).of("drain")).inputs as { triggers: unknown[] }).triggers);
    const base = resources(2, { replicas: 2 });
    assert.equal(digest(resources(2, { replicas: 2 }), 1), digest(base, 1));
    for (const other of [resources(2, { replicas: 2, image: OTHER_IMAGE }), resources(2, { replicas: 2, shm: 32768 })])
        for (const k of [1, 2]) assert.notEqual(digest(other, k), digest(base, k), `replica ${k}'s drain runs again`);
});
