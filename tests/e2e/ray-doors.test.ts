// End to end: Ray's open doors (issue 28). With token authentication on, a fabric peer without the token probes every
// TCP listener of the cluster's Ray processes on the other host (real Ray from PyPI; the probe is
// tests/sim/image/bin/ray-doors-probe, run in a throw-away container of the image on the peer) and records what each
// one lets it do. Needs root (network namespaces, dockerd, sshd). docs/security.md (section Ray) states the result.
import { describe, test } from "node:test";
import * as assert from "node:assert/strict";
import { simSuite } from "./suite";
import { destroy, up } from "../engine/engine";
import { containerName } from "../../components/plan/naming";

const suite = simSuite("e2e-ray-doors");

interface Door { port: number; bind: string; process: string; protocol: string; verdict: string; seen?: Record<string, unknown> }

const MARKER = "/tmp/ray-door-probe";

/**
 * Ray's listeners on `target`, vLLM's (a Ray driver) included (the container shares the host's network and PIDs are the
 * machine's): port, bind, command line.
 */
async function listeners(target: string) {
    const py = "import json,re,subprocess\n" +
        "out=[]\n" +
        "for l in subprocess.run(['ss','-ltnpH'],capture_output=True,text=True).stdout.splitlines():\n" +
        "    f=l.split(); m=re.search(r'pid=(\\d+)',l)\n" +
        "    if not m: continue\n" +
        "    bind,port=f[3].rsplit(':',1); bind=bind.strip('[]').replace('::ffff:','')\n" +
        "    try: cmd=open('/proc/%s/cmdline'%m.group(1)).read().replace('\\0',' ')\n" +
        "    except OSError: continue\n" +
        "    if '/ray/' in cmd or 'vllm serve' in cmd or cmd.startswith(('ray::','ray-dashboard')): out.append({'port':int(port),'bind':bind,'cmd':cmd})\n" +
        "print(json.dumps(out))\n";
    const r = await suite.sim.exec(target, `python3 -c "$(echo ${Buffer.from(py).toString("base64")} | base64 -d)"`);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as { port: number; bind: string; cmd: string }[];
}

/** The probe from `from` against `target`'s Ray listeners, without the token; one Door per listener. */
async function probe(tag: string, from: string, target: string): Promise<Door[]> {
    const address = suite.sim.hosts.find(h => h.name === target)!.address;
    const args = JSON.stringify({ address, listeners: await listeners(target), marker: MARKER });
    const image = suite.sim.images[tag];
    const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    const r = await suite.sim.exec(from, `docker run --rm --network host ${q(image)} ray-doors-probe ${q(args)}`);
    assert.equal(r.code, 0, r.stderr);
    const doors = r.stdout.trim().split("\n").filter(Boolean).map(l => JSON.parse(l) as Door);
    console.log(`# Ray's doors on ${target} (${tag}), seen from ${from} without the token:\n` +
        doors.map(d => `#   ${d.port} ${d.bind} ${d.process} ${d.protocol}: ${d.verdict}`).join("\n"));
    return doors;
}

/** Whether the job API ran the probe's command in `target`'s container. */
async function ranThere(target: string, port: number): Promise<boolean> {
    for (let i = 0; i < 20; i++) {
        const r = await suite.sim.exec(target, `docker exec ${containerName(target)} test -e ${MARKER}-${port}`);
        if (r.code === 0) return true;
        await new Promise(res => setTimeout(res, 500));
    }
    return false;
}

describe("Ray's listeners, seen from a fabric peer without the token", () => {
    test("Ray >= 2.54 (the default image): nothing runs code; only Prometheus metrics answer", async () => {
        const stack = suite.stack("doors");
        try {
            const r = await up(stack);
            assert.equal(r.error, undefined, r.error);
            for (const [from, target] of [["spark-b", "spark-a"], ["spark-a", "spark-b"]]) {
                const doors = await probe("0.17.1", from, target);
                assert.ok(doors.some(d => d.process === "GCS" || d.process === "raylet"), "the probe saw Ray's listeners");
                assert.deepEqual(doors.filter(d => d.verdict === "runs code"), [], `a door runs code on ${target}`);
                for (const d of doors.filter(d => d.verdict === "reads data"))
                    assert.deepEqual(Object.entries(d.seen ?? {}).filter(([, c]) => c === 200).map(([k]) => k), ["GET /metrics"],
                        `${d.port} (${d.process}) gives more than Prometheus metrics without the token`);
                for (const d of doors.filter(d => d.process === "dashboard agent" && d.protocol === "http"))
                    assert.ok(!(await ranThere(target, d.port)), `the job API on ${target}:${d.port} ran a command`);
                // the dashboard stays on the head's loopback (components/plan/hostCommands.ts --dashboard-host=127.0.0.1)
                assert.ok(doors.filter(d => d.process === "dashboard head" && d.verdict !== "loopback").every(d => d.verdict === "reads data"));
            }
        } finally {
            const d = await destroy(stack);
            assert.deepEqual(d.errors, []);
        }
    });

    test("Ray 2.52: the dashboard agent's job API runs a peer's command; up warns", async () => {
        const stack = suite.stack("doors-252", { tag: "ray-2.52" });
        try {
            const r = await up(stack);
            assert.equal(r.error, undefined, r.error);
            assert.ok((r.warnings ?? []).some(w => /Ray 2\.52\.0 checks the cluster's token everywhere but on its dashboard agent's HTTP server/.test(w)),
                `no warning in ${JSON.stringify(r.warnings)}`);
            const doors = await probe("ray-2.52", "spark-b", "spark-a");
            const open = doors.filter(d => d.verdict === "runs code");
            assert.deepEqual(open.map(d => d.process), ["dashboard agent"], JSON.stringify(doors));
            assert.ok(await ranThere("spark-a", open[0].port), "the job API's command ran in the head's container");
            assert.ok(doors.some(d => d.process === "GCS" && d.verdict === "token"), "the GCS still wants the token");
        } finally {
            const d = await destroy(stack);
            assert.deepEqual(d.errors, []);
        }
    });
});
