// Day two on the simulated Sparks: the serving proof's figures in the outputs, and `spark-vllm status` against a
// healthy cluster, one whose supervisor gave up relaunching vLLM (the page cache fills the memory vLLM's start-up check
// wants: every relaunch dies, docs/operations.md "Known limit"), a degraded one (vLLM dead, no record to relaunch it)
// and a dead one (containers stopped: the supervisor's marker is still read from the stopped head); a helper program
// swapped in logDir, refused by the container's entrypoint and by status; every host's facts the preflight gates on
// (issue 47), as the simulated host shows them. Needs root.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { simSuite } from "./suite";
import { destroy, up } from "../engine/engine";
import { leftovers } from "../sim/stacks";
import { waitFor } from "../sim/util";
import * as crypto from "node:crypto";
import { parseSpec } from "../../components/spec/parseSpec";
import { packTools } from "../../components/plan/hostCommands";
import { planCluster } from "../../components/plan/plan";
import { HostFacts } from "../../components/plan/status";
import { toolsProgram } from "../../components/plan/toolsProgram";

const ROOT = path.join(__dirname, "..", "..");
const suite = simSuite("status");

const MARKER = "/var/lib/spark-vllm/launches/vllm.failed";

test("serving figures after up; status: healthy (0), supervisor gave up (5, named with its diagnosis), vLLM dead (5, its host named), containers stopped (5); destroy leaves nothing", async () => {
    // One HCA configured, so status has a RoCE v2 GID to show (the sim's hosts show one in sysfs: tests/sim/hosts.ts).
    const stack = suite.stack("day2", { hcas: ["rocep1s0f1"] });
    const dir = path.dirname(stack.statePath);
    fs.writeFileSync(path.join(dir, `Pulumi.${stack.name}.yaml`), yaml.dump({ config: stack.config }));
    const status = () => {
        const r = spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), "status", "--stack", stack.name, "--dir", dir, "--json"],
            { encoding: "utf8", env: { ...process.env, ...stack.transport.env } });
        console.log(`--- spark-vllm status (exit ${r.status}):\n${r.stdout}${r.stderr}---`);
        return { code: r.status, report: JSON.parse(r.stdout) };
    };
    try {
        const r = await up(stack);
        assert.equal(r.error, undefined, r.error);
        // The serving proof measured the stand-in's stream (ttft_ms 40, 100 tokens/s): real, plausible figures.
        const serving = r.outputs?.serving as { levels: Array<Record<string, number>>; warnings: string[] };
        assert.deepEqual(serving.levels.map(l => l.concurrency), [1, 4]);
        for (const l of serving.levels) {
            assert.ok(l.ttftP50Ms >= 40 && l.ttftP95Ms >= l.ttftP50Ms, JSON.stringify(l));
            assert.ok(l.outputTokensPerSecond > 10 && l.outputTokensPerSecond < 100 * l.concurrency, JSON.stringify(l));
        }
        assert.deepEqual(serving.warnings, []);

        const healthy = status();
        assert.equal(healthy.code, 0);
        assert.equal(healthy.report.serving, true);
        assert.equal(healthy.report.hosts[0].vllm.state, "running");
        assert.equal(healthy.report.hosts[0].vllm.servedModel, "qwen3.5-122b");
        assert.equal(healthy.report.hosts[0].health, 200);
        assert.deepEqual(healthy.report.hosts.map((h: { raylet: boolean }) => h.raylet), [true, true]);
        // Issue 47: each host's kernel release and CMA lines (the machine's kernel: a host is a namespace), the stand-in
        // nvidia-smi's driver, and the index of its HCA's RoCE v2 GID that carries its fabric address, as the host shows them.
        const facts = new Map<string, HostFacts>(healthy.report.hosts.map((h: { host: string; facts: HostFacts }) => [h.host, h.facts]));
        for (const { name, fabric } of stack.config["spark-vllm:hosts"] as Array<{ name: string; fabric: { address: string } }>) {
            const f = facts.get(name)!;
            const sh = async (cmd: string) => (await suite.sim.exec(name, cmd)).stdout.trim();
            assert.equal(f.kernel.release, await sh("uname -r"));
            const meminfo = await sh("cat /proc/meminfo");
            const cma = (key: string) => { const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(meminfo); return m ? Number(m[1]) * 1024 : null; };
            assert.deepEqual([f.kernel.cmaTotalBytes, f.kernel.cmaFreeBytes], [cma("CmaTotal"), cma("CmaFree")]);
            assert.equal(f.driver.version, await sh("nvidia-smi --query-gpu=driver_version --format=csv,noheader"));
            assert.equal(f.fabricAddress, fabric.address);
            const [hca] = f.hcas;
            assert.deepEqual([f.hcas.length, hca.name, hca.exists, hca.active], [1, "rocep1s0f1", true, true]);
            const port = "/sys/class/infiniband/rocep1s0f1/ports/1";
            const mapped = "0000:0000:0000:0000:0000:ffff:" + fabric.address.split(".").map(n => Number(n).toString(16).padStart(2, "0")).join("").replace(/^(.{4})/, "$1:");
            assert.equal(await sh(`cat ${port}/gids/${hca.fabricGidIndex} ${port}/gid_attrs/types/${hca.fabricGidIndex}`), `${mapped}\nRoCE v2`);
            if (f.kernelLog.readable) assert.deepEqual([typeof f.kernelLog.nvrmNoMemory.count, typeof f.kernelLog.xid.count], ["number", "number"]);
            assert.deepEqual(f.problems, [], `${name}: nothing the preflight refuses`);
        }

        const pid = (await suite.sim.docker("spark-a", ["exec", "spark-vllm-spark-a", "cut", "-d", " ", "-f1", "/var/tmp/spark-vllm/vllm-serve.pid"])).stdout.trim();
        assert.match(pid, /^[0-9]+$/);
        // vLLM dies while another process holds the memory: each relaunch fails vLLM's start-up free-memory check (page
        // cache would not do: vLLM 0.17.1 on a GB10 counts it as free, components/knowledge/images.ts [uma-free]), and after
        // MAX_FAILURES (5 s, 10 s, 20 s, 40 s apart) the supervisor stops and writes its marker (supervise.py give_up).
        await suite.sim.setFaults("spark-a", { memory_held_gib: 100 });
        await suite.sim.docker("spark-a", ["exec", "spark-vllm-spark-a", "kill", "-KILL", pid]);
        for (const since = Date.now(); (await suite.sim.docker("spark-a", ["exec", "spark-vllm-spark-a", "test", "-f", MARKER])).code !== 0;) {
            if (Date.now() - since > 300_000) {
                const sup = await suite.sim.docker("spark-a", ["logs", "--tail", "30", "spark-vllm-spark-a"]);
                assert.fail(`the supervisor did not give up within 300 s:\n${sup.stdout}${sup.stderr}`);
            }
            await new Promise(res => setTimeout(res, 500)); // poll interval of this wait for the marker
        }
        const gaveUp = status();
        assert.equal(gaveUp.code, 5);
        const [given] = gaveUp.report.hosts[0].givenUp;
        assert.deepEqual([given.name, given.failures, given.log, given.diagnosis?.kind], ["vllm", 5, "/var/tmp/spark-vllm/vllm-serve.log", "startup-free-memory"]);
        assert.ok(Math.abs(Date.parse(given.markedAt) - Date.now()) < 120_000, given.markedAt);
        assert.deepEqual(gaveUp.report.hosts[1].givenUp, []);
        assert.match(gaveUp.report.problems[0], /^spark-a: the supervisor stopped relaunching vllm after 5 failures in a row \(.*\): startup-free-memory: ValueError: Free memory on device/);
        // Every host's memory gate (it checks free memory again and drops the page cache), not the launch alone.
        const gate = (h: string) => `urn:pulumi:day2::spark-vllm::spark-vllm:index:SparkCluster$spark-vllm:index:ModelEndpoint$command:remote:Command::spark-${h}-memory`;
        assert.deepEqual(given.replace, [gate("spark-a"), gate("spark-b")]);
        assert.ok(gaveUp.report.problems[0].includes(`fix the cause, then run \`pulumi up -s day2 --replace '${gate("spark-a")}' --replace '${gate("spark-b")}'\``), gaveUp.report.problems[0]);
        await suite.sim.setFaults("spark-a", null);

        // Without its record nothing relaunches vLLM (components/plan/launches.ts), and a marker without its record is ignored.
        const launches = ["exec", "spark-vllm-spark-a", "mv", "-f"];
        await suite.sim.docker("spark-a", [...launches, "/var/lib/spark-vllm/launches/vllm.json", "/var/lib/spark-vllm/launches/vllm.json.bak"]);
        const degraded = status();
        assert.equal(degraded.code, 5);
        assert.deepEqual(degraded.report.hosts[0].givenUp, []);
        assert.match(degraded.report.problems.join("\n"), /^spark-a: vLLM is not running \(exited\)/);
        await suite.sim.docker("spark-a", [...launches, "/var/lib/spark-vllm/launches/vllm.json.bak", "/var/lib/spark-vllm/launches/vllm.json"]);

        await suite.sim.docker("spark-b", ["stop", "-t", "1", "spark-vllm-spark-b"]);
        await suite.sim.docker("spark-a", ["stop", "-t", "1", "spark-vllm-spark-a"]);
        const dead = status();
        assert.equal(dead.code, 5);
        assert.ok(dead.report.problems.includes("spark-b: container spark-vllm-spark-b is exited; run `pulumi up -s day2 --refresh` to start it: its supervisor relaunches what it ran (a plain `pulumi up -s day2` does not look at the hosts)"),
            dead.report.problems.join("\n"));
        assert.equal(dead.report.hosts[0].container, "exited");
        assert.deepEqual(dead.report.hosts[0].givenUp.map((g: { name: string }) => g.name), ["vllm"], "read from the stopped container");
        assert.equal(dead.report.hosts[1].facts?.kernel.release, facts.get("spark-b")!.kernel.release, "the facts are asked of the host, its container stopped");

        // Issue 30: a program swapped in logDir is not run by the container's entrypoint (the sha256 pinned in the
        // container at its first start) nor by status; the genuine one, put back, is run again.
        const tools = "/var/tmp/spark-vllm/spark_vllm_tools.py", ran = "/var/tmp/spark-vllm/planted-ran";
        const logs = async () => { const l = await suite.sim.docker("spark-b", ["logs", "spark-vllm-spark-b"]); return l.stdout + l.stderr; };
        const count = (text: string, what: string) => text.split(what).length - 1;
        const genuine = (await suite.sim.exec("spark-b", `sha256sum ${tools} | cut -d' ' -f1`)).stdout.trim();
        assert.equal((await suite.sim.docker("spark-b", ["cp", "spark-vllm-spark-b:/var/lib/spark-vllm/tools.sha256", "-"])).code, 0);
        await suite.sim.exec("spark-b", `cp -p ${tools} /var/tmp/tools.genuine && printf 'open("${ran}", "w").write("ran")\n' > ${tools}`);
        const watching = count(await logs(), "spark-vllm supervise: watching");
        await suite.sim.docker("spark-b", ["start", "spark-vllm-spark-b"]);
        const refusal = `spark-vllm: refusing to run ${tools}: its sha256 is `;
        await waitFor("the entrypoint's refusal", async () => (await logs()).includes(refusal), 60_000, 1000);
        assert.ok((await logs()).includes(`not ${genuine}, the one the last install pinned in /var/lib/spark-vllm/tools.sha256`));
        await new Promise(res => setTimeout(res, 6000)); // one more turn of the loop
        assert.equal((await suite.sim.exec("spark-b", `test -e ${ran}`)).code, 1, "the planted program ran");
        assert.equal(count(await logs(), "spark-vllm supervise: watching"), watching, "a supervisor started");
        const swapped = status();
        assert.equal(swapped.code, 5);
        const tuUrn = "urn:pulumi:day2::spark-vllm::spark-vllm:index:SparkCluster$spark-vllm:index:SparkHost$command:remote:Command::spark-spark-b-tools";
        const problem = swapped.report.problems.find((p: string) => p.startsWith("spark-b: nothing was asked of the host's helper program: spark-vllm: refusing to run"));
        assert.ok(problem?.includes(`run \`pulumi up -s day2 --replace '${tuUrn}'\``), swapped.report.problems.join("\n"));
        await suite.sim.exec("spark-b", `cp -p /var/tmp/tools.genuine ${tools} && rm -f /var/tmp/tools.genuine`);
        await waitFor("the supervisor, on the genuine program", async () => count(await logs(), "spark-vllm supervise: watching") > watching, 60_000, 1000);

        // The next program's install (the planned tools command, over ssh) pins it in the existing container with
        // docker cp: a restarted container's supervisor runs it.
        const raw = Object.fromEntries(Object.entries(stack.config).map(([k, v]) => [k.replace(/^spark-vllm:/, ""), v]));
        const next = toolsProgram() + "# the next version\n";
        const installed = await suite.sim.ssh("spark-b", planCluster(parseSpec(raw)).hosts[1].tools.create, { input: packTools(next), timeoutMs: 60_000 });
        assert.equal(installed.code, 0, installed.stderr);
        const pinned = await suite.sim.docker("spark-b", ["exec", "spark-vllm-spark-b", "sh", "-c", "cat /var/lib/spark-vllm/tools.sha256; stat -c %a /var/lib/spark-vllm/tools.sha256"]);
        assert.equal(pinned.stdout, `${crypto.createHash("sha256").update(next).digest("hex")}\n600\n`);
        const before = count(await logs(), "spark-vllm supervise: watching");
        await suite.sim.docker("spark-b", ["restart", "-t", "1", "spark-vllm-spark-b"]);
        await waitFor("the supervisor, on the next program", async () => count(await logs(), "spark-vllm supervise: watching") > before, 60_000, 1000);
        assert.ok(!(await logs()).includes(`${refusal}${crypto.createHash("sha256").update(next).digest("hex")}`));
    } finally {
        await suite.sim.setFaults("spark-a", null);
        const d = await destroy(stack);
        assert.equal(d.error, undefined, d.error);
        assert.deepEqual(await leftovers(suite.sim), []);
    }
});
