// `spark-vllm status` and the launches the container's supervisor gave up on: the host script run for real (sh, the
// real helper program reading a records directory streamed as `docker cp` streams it, the marker written by the real
// supervisor's give_up), and the URN the verdict tells the user to replace, pinned against the real program's URNs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { RECORDS_DIR } from "../../../components/plan/launches";
import { clusterStatus, hostStatusScript, parseHostOutput, renderStatus } from "../../../components/plan/status";
import { launchUrn, memoryGateUrns, relaunchUrns, replaceCommand } from "../../../components/plan/relaunch";
import { TOOLS_FILE, toolsProgram } from "../../../components/plan/toolsProgram";
import { readStackFile, stackOwner } from "../../../bin/shared";
import { rawConfig } from "../../fixtures";

const ROOT = path.join(__dirname, "..", "..", "..");

test("every launch record's URN is the real program's URN of the launch that wrote it (ray, mp and one-host stacks)", () => {
    const pinned: Record<string, string[]> = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "fixtures", "stack-urns.json"), "utf8"));
    let checked = 0;
    for (const [stack, urns] of Object.entries(pinned)) {
        const plan = planCluster(parseSpec(readStackFile(ROOT, stack)));
        for (const h of plan.hosts) {
            // What each host's launches record (hostCommands.ts: rayLaunch on every Ray host, the head's vLLM, an mp worker's headless one).
            const records = [...(h.rayLaunch ? ["ray"] : []), ...(h.role === "head" || h.vllmLaunch ? ["vllm"] : [])];
            for (const name of records) {
                const urn = launchUrn({ project: stackOwner(ROOT, stack).project, stack }, h.host.name, h.role === "head", name);
                assert.ok(urn && urns.includes(urn), `${stack} ${h.host.name} ${name}: ${urn} is not one of the program's URNs`);
                checked++;
            }
        }
    }
    assert.ok(checked >= 10, `only ${checked} launches checked`);
    const plan = planCluster(parseSpec(rawConfig(2)));
    assert.equal(launchUrn({ project: "p", stack: "s" }, "spark-a", true, "nosuch"), undefined);
    assert.equal(relaunchUrns({ project: "p", stack: "s" }, plan.hosts.map(h => h.host.name), "spark-a", true, "nosuch"), undefined);
});

test("what relaunches a launch is in the real program (ray, mp and one-host stacks): vLLM, every host's memory gate and no other; Ray, that host's Ray launch", () => {
    const pinned: Record<string, string[]> = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "fixtures", "stack-urns.json"), "utf8"));
    const backends = new Set<string>();
    for (const stack of ["gpt-oss-120b", "spark", "spark-mp"]) {
        const urns = pinned[stack];
        const plan = planCluster(parseSpec(readStackFile(ROOT, stack)));
        backends.add(`${plan.backend} ${plan.hosts.length}`);
        const project = stackOwner(ROOT, stack).project;
        const owner = { project, stack };
        const names = plan.hosts.map(h => h.host.name);
        const gates = memoryGateUrns(owner, names);
        // Every memory gate of the stack, each exactly once (a URN not in the stack fails the whole `up`).
        assert.deepEqual([...gates].sort(), urns.filter(u => /\$spark-vllm:index:ModelEndpoint\$command:remote:Command::[^:]*-memory$/.test(u)).sort(), stack);
        assert.equal(gates.length, plan.hosts.length, stack);
        for (const h of plan.hosts) {
            if (h.role === "head" || h.vllmLaunch) assert.deepEqual(relaunchUrns(owner, names, h.host.name, h.role === "head", "vllm"), gates, `${stack} ${h.host.name} vllm`);
            if (h.rayLaunch) {
                const ray = relaunchUrns(owner, names, h.host.name, h.role === "head", "ray");
                assert.equal(ray?.length, 1);
                assert.ok(urns.includes(ray![0]), `${stack} ${h.host.name} ray: ${ray![0]}`);
                assert.match(ray![0], h.role === "head" ? /::spark-ray-head$/ : new RegExp(`::spark-${h.host.name}-ray$`));
            }
        }
    }
    assert.deepEqual([...backends].sort(), ["mp 2", "ray 2", "single 1"], "one host, ray and mp stacks all checked");
    const mp = planCluster(parseSpec(readStackFile(ROOT, "spark-mp")));
    const mpOwner = { project: "spark-vllm", stack: "spark-mp" };
    assert.equal(replaceCommand(mpOwner, memoryGateUrns(mpOwner, mp.hosts.map(h => h.host.name))),
        "pulumi up -s spark-mp --replace 'urn:pulumi:spark-mp::spark-vllm::spark-vllm:index:SparkCluster$spark-vllm:index:ModelEndpoint$command:remote:Command::spark-spark-a-memory'" +
        " --replace 'urn:pulumi:spark-mp::spark-vllm::spark-vllm:index:SparkCluster$spark-vllm:index:ModelEndpoint$command:remote:Command::spark-spark-b-memory'");
});

/** The host script under `sh -s`, with a stand-in `docker`: inspect says STATE; cp streams DIR's copy of RECORDS_DIR as tar. */
function runHostScript(plan: ReturnType<typeof planCluster>, fake: string, state: string) {
    const r = spawnSync("sh", ["-s"], {
        input: hostStatusScript(plan, plan.hosts[0]), encoding: "utf8",
        env: { ...process.env, PATH: `${path.join(fake, "bin")}:${process.env.PATH}`, FAKE_ROOT: fake, FAKE_STATE: state },
    });
    assert.equal(r.status, 0, r.stderr);
    return parseHostOutput(plan.hosts[0], r.status, r.stdout, r.stderr);
}

test("the host script reports the launch the supervisor gave up on, from the container's records, running or stopped; a stale marker is ignored", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "status-given-up-"));
    try {
        const plan = planCluster(parseSpec({ ...rawConfig(2), logDir: dir }));
        const tools = path.join(dir, TOOLS_FILE);
        fs.writeFileSync(tools, toolsProgram());
        const records = path.join(dir, RECORDS_DIR);
        fs.mkdirSync(records, { recursive: true });
        fs.mkdirSync(path.join(dir, "bin"));
        // docker cp CONTAINER:DIR - : a tar whose entries sit under DIR's base name (moby daemon/archive_unix.go).
        fs.writeFileSync(path.join(dir, "bin", "docker"), [
            "#!/bin/sh",
            'case "$1" in',
            '  inspect) echo "$FAKE_STATE" ;;',
            '  cp) src=$FAKE_ROOT${2#*:}; [ "$3" = - ] && exec tar -C "$(dirname "$src")" -cf - "$(basename "$src")" ;;',
            '  exec) exit 0 ;;',
            "esac",
        ].join("\n") + "\n", { mode: 0o755 });

        const record = (argv: string[]) => fs.writeFileSync(path.join(records, "vllm.json"),
            JSON.stringify({ name: "vllm", argv, log: plan.vllmLog, pidFile: plan.vllmPidFile }) + "\n");
        record(["vllm", "serve", "Qwen/Qwen3.5-122B-A10B-FP8"]);
        fs.writeFileSync(plan.vllmLog, "INFO starting\nValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n");
        assert.deepEqual(runHostScript(plan, dir, "running").givenUp, [], "a record without a marker: nothing given up");

        // The real supervisor's give_up writes the marker (the packaged helper, loaded without running its main).
        const giveUp = spawnSync("python3", ["-c", [
            "import runpy, sys", "g = runpy.run_path(sys.argv[1])", "rec, digest = g['read_launch_record'](sys.argv[2], 'vllm')",
            "g['Supervisor'](sys.argv[2]).give_up('vllm', rec, digest, g['MAX_FAILURES'])",
        ].join("\n"), tools, records], { encoding: "utf8" });
        assert.equal(giveUp.status, 0, giveUp.stderr);
        const markedAt = new Date(fs.statSync(path.join(records, "vllm.failed")).mtimeMs).toISOString().replace(/\.\d+Z$/, "Z");

        for (const state of ["running", "exited"]) {
            const report = runHostScript(plan, dir, state);
            assert.equal(report.container, state);
            assert.equal(report.givenUp?.length, 1, JSON.stringify(report));
            const g = report.givenUp![0];
            assert.deepEqual([g.name, g.failures, g.log, g.markedAt, g.diagnosis?.kind], ["vllm", 5, plan.vllmLog, markedAt, "no-cache-memory"]);
            const verdict = clusterStatus(plan, "two", [report, { host: "spark-b", role: "worker", container: "running", raylet: true }]);
            assert.equal(verdict.serving, false);
            assert.match(verdict.problems.join("\n"), /spark-a: the supervisor stopped relaunching vllm after 5 failures in a row \(.*\): no-cache-memory: ValueError: No available memory/);
        }

        // A new record in place (as a new launch would write it, had it not removed the marker): the old marker does not count.
        record(["vllm", "serve", "Qwen/Qwen3.5-122B-A10B-FP8", "--max-model-len", "8192"]);
        assert.deepEqual(runHostScript(plan, dir, "running").givenUp, []);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

test("the memory guard: the real supervisor stops a running vLLM below the floor; status names the guard, the figures, the hint and the replace", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "status-guard-"));
    try {
        const plan = planCluster(parseSpec({ ...rawConfig(2), logDir: dir }));
        const tools = path.join(dir, TOOLS_FILE);
        fs.writeFileSync(tools, toolsProgram());
        const records = path.join(dir, RECORDS_DIR);
        fs.mkdirSync(records, { recursive: true });
        fs.mkdirSync(path.join(dir, "bin"));
        fs.writeFileSync(path.join(dir, "bin", "docker"), [
            "#!/bin/sh", 'case "$1" in', '  inspect) echo "$FAKE_STATE" ;;',
            '  cp) src=$FAKE_ROOT${2#*:}; [ "$3" = - ] && exec tar -C "$(dirname "$src")" -cf - "$(basename "$src")" ;;',
            '  exec) exit 0 ;;', "esac",
        ].join("\n") + "\n", { mode: 0o755 });
        fs.writeFileSync(path.join(records, "vllm.json"), JSON.stringify({ name: "vllm", argv: ["vllm", "serve", "m"], log: plan.vllmLog, pidFile: plan.vllmPidFile }) + "\n");
        fs.writeFileSync(path.join(dir, "meminfo"), "MemTotal:       127601604 kB\nMemAvailable:    3145728 kB\n");
        // A vLLM stand-in in its own session, as a launch starts it (setsid), its pid file as the launch writes it.
        const guard = spawnSync("python3", ["-c", [
            "import runpy, subprocess, sys", "g = runpy.run_path(sys.argv[1])",
            "p = subprocess.Popen(['sleep', '60'], start_new_session=True)",
            "open(sys.argv[3], 'w').write('%d %s\\n' % (p.pid, g['start_time'](p.pid)))",
            "sup = g['Supervisor'](sys.argv[2], floor_bytes=4 << 30, meminfo=sys.argv[4])",
            "rec, digest = g['read_launch_record'](sys.argv[2], 'vllm')",
            "print(sup.guard({'vllm': (rec, digest)}), p.wait(15))",
        ].join("\n"), tools, records, plan.vllmPidFile, path.join(dir, "meminfo")], { encoding: "utf8" });
        assert.equal(guard.status, 0, guard.stderr);
        assert.equal(guard.stdout.trim().split("\n").pop(), "True -15", "the guard fired and SIGTERM ended the process");
        const report = runHostScript(plan, dir, "running");
        const g = report.givenUp![0];
        assert.deepEqual([g.name, g.guard?.memAvailableBytes, g.guard?.floorBytes, g.diagnosis?.kind], ["vllm", 3 * 2 ** 30, 4 * 2 ** 30, "memory-guard"]);
        const s = clusterStatus(plan, "day2", [report, { host: "spark-b", role: "worker", container: "running", raylet: true }]);
        assert.equal(s.serving, false);
        assert.match(s.problems.join("\n"), /^spark-a: the memory guard stopped vllm \(.*\): memory-guard: MemAvailable 3\.0 GiB < floor 4\.0 GiB\n    this host's MemAvailable fell to 3\.0 GiB, below the memory guard's floor of 4\.0 GiB \(spark-vllm:memoryGuard\.floorGiB\)[^\n]*\n    log: [^\n]*\n    fix the cause, then run `pulumi up -s day2 --replace '[^']*spark-spark-a-memory' --replace '[^']*spark-spark-b-memory'`/m);
        assert.match(renderStatus(s), /spark-a \(head\): [^\n]*memory guard stopped vllm \(MemAvailable 3\.0 GiB < 4\.0 GiB\)/);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

test("the verdict names the launch given up, its diagnosis, log and the replace that clears it, instead of the bare 'not running'", () => {
    const plan = planCluster(parseSpec(rawConfig(2)));
    const given = { name: "vllm", failures: 5, log: "/var/tmp/spark-vllm/vllm-serve.log", markedAt: "2026-12-01T12:00:00Z",
        diagnosis: { kind: "startup-free-memory", line: "ValueError: Free memory on device cuda:0 (30.1/121.69 GiB) on startup is less than desired GPU memory utilization (0.85, 103.44 GiB).", hint: "Drop the page cache." } };
    const head = { host: "spark-a", role: "head" as const, container: "running", vllm: { state: "exited", pid: 812 }, health: null, raylet: true, givenUp: [given] };
    const worker = { host: "spark-b", role: "worker" as const, container: "running", raylet: true, givenUp: [] };
    const s = clusterStatus(plan, "day2", [head, worker], "my-project");
    // Every host's memory gate, not the launch alone (that would skip the page-cache drop this cause needs).
    const gate = (h: string) => `urn:pulumi:day2::my-project::spark-vllm:index:SparkCluster$spark-vllm:index:ModelEndpoint$command:remote:Command::spark-${h}-memory`;
    assert.equal(s.serving, false);
    assert.deepEqual(s.hosts[0].givenUp![0].replace, [gate("spark-a"), gate("spark-b")]);
    assert.deepEqual(s.problems, [
        "spark-a: the supervisor stopped relaunching vllm after 5 failures in a row (2026-12-01T12:00:00Z): startup-free-memory: " + given.diagnosis.line +
        "\n    Drop the page cache.\n    log: spark-a:/var/tmp/spark-vllm/vllm-serve.log" +
        `\n    fix the cause, then run \`pulumi up -s day2 --replace '${gate("spark-a")}' --replace '${gate("spark-b")}'\`: the new launch clears the marker (a plain \`pulumi up -s day2\` changes nothing)`,
    ]);
    const text = renderStatus(s);
    assert.match(text, /^stack day2: NOT serving qwen3\.5-122b at \S+; the supervisor gave up relaunching vllm on spark-a\n/);
    assert.match(text, /spark-a \(head\): container running, Ray node joined, vLLM exited, \/health no answer, supervisor gave up on vllm \(5 failures, startup-free-memory\)/);

    // A worker's Ray given up, no diagnosis, container stopped: the container's line, then the marker's (the supervisor
    // will not relaunch Ray there once the container runs again).
    const rayGone = { host: "spark-b", role: "worker" as const, container: "exited", givenUp: [{ name: "ray", failures: 5, log: "/var/tmp/spark-vllm/ray-start.log", markedAt: "2026-12-01T12:00:00Z", diagnosis: null }] };
    const t = clusterStatus(plan, "day2", [{ ...head, vllm: { state: "running", pid: 1 }, health: 200, givenUp: [] }, rayGone]);
    assert.equal(t.problems.length, 2);
    assert.match(t.problems[0], /^spark-b: container spark-vllm-spark-b is exited/);
    assert.match(t.problems[1], /^spark-b: the supervisor stopped relaunching ray after 5 failures in a row \(2026-12-01T12:00:00Z\); no known cause in its log\n    log: spark-b:\/var\/tmp\/spark-vllm\/ray-start\.log\n    fix the cause, then run `pulumi up -s day2 --replace 'urn:pulumi:day2::spark-vllm::spark-vllm:index:SparkCluster\$spark-vllm:index:RayCluster\$command:remote:Command::spark-spark-b-ray'`:/);
});
