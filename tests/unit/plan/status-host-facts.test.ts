// Issue 47: `spark-vllm status` shows, per host, what the preflight gates on (kernel release, CMA lines, driver, NVRM
// out-of-memory and Xid lines since boot, the RoCE v2 GID index of the fabric address per HCA), and what the preflight
// would refuse or warn about there, in its words. The host script run for real with the real helper program, and the
// report parsed and rendered from a host's output. Test addresses only.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { ClusterPlan } from "../../../components/plan/clusterPlan";
import { HostFacts, clusterStatus, hostStatusScript, parseHostOutput, renderStatus } from "../../../components/plan/status";
import { TOOLS_FILE, toolsProgram } from "../../../components/plan/toolsProgram";
import { rawConfig } from "../../fixtures";

const plan2 = () => planCluster(parseSpec(rawConfig(2)));
const memory = { availableGiB: 60.2, totalGiB: 119.7 };
const running = { state: "running", pid: 812, uptimeSeconds: 7300, servedModel: "qwen3.5-122b" };

// As owners' Sparks showed it (components/knowledge/diagnosis.ts KNOWN_BAD_KERNELS; NVIDIA/dgx-spark-playbooks#116's line);
// the problems as the host's helper prints them, shortened (components/hostProgram/tests/test_status.py checks its real words).
const NVRM_OOM = "[  812.402081] NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359";
const XID = "[  900.100000] NVRM: Xid (PCI:000f:01:00): 43, pid=4242, name=python3, Ch 00000008";
const REFUSE_KERNEL = "spark-b: kernel 7.0.0-1019-nvidia with CmaFree 940604 kB larger than CmaTotal 0 kB: NCCL's ibv_reg_mr_iova2 fails with ENOMEM; fix: add the kernel parameter kho=off";
const REFUSE_OOM = `spark-b: the GPU driver ran out of memory since boot (1 NVRM NV_ERR_NO_MEMORY lines in the kernel log, first: ${NVRM_OOM}); reboot this host first`;

function healthyFacts(address: string): HostFacts {
    return {
        kernel: { release: "6.17.0-1032-nvidia", cmaTotalBytes: 0, cmaFreeBytes: 0 },
        driver: { version: "580.95.05", source: "/sys/module/nvidia/version" },
        kernelLog: { readable: true, nvrmNoMemory: { count: 0 }, xid: { count: 0 } },
        fabricAddress: address,
        hcas: [{ name: "rocep1s0f1", exists: true, active: true, fabricGidIndex: 3, roceV2Ipv4: [{ index: 3, address }] }],
        problems: [], warnings: [],
    };
}

const badFacts: HostFacts = {
    kernel: { release: "7.0.0-1019-nvidia", cmaTotalBytes: 0, cmaFreeBytes: 940604 * 1024 },
    driver: { version: "580.95.05", source: "nvidia-smi" },
    kernelLog: { readable: true, nvrmNoMemory: { count: 1, line: NVRM_OOM, which: "last" }, xid: { count: 2, line: XID, which: "last" } },
    fabricAddress: "198.18.1.3",
    hcas: [
        { name: "rocep1s0f1", exists: true, active: true, fabricGidIndex: 5, roceV2Ipv4: [{ index: 5, address: "198.18.1.3" }] },
        { name: "roceP2p1s0f1", exists: true, active: false, fabricGidIndex: null, roceV2Ipv4: [{ index: 3, address: "198.18.2.3" }] },
    ],
    problems: [REFUSE_KERNEL, REFUSE_OOM],
    warnings: ["spark-b: enp1s0f1np1 (rocep1s0f1) has MTU 1500; NVIDIA recommends 9000 for the Spark fabric"],
};

/** A running host's script output: container, host-status's JSON, given-up, and the host-facts line as printed. */
function output(host: string, role: "head" | "worker", factsLine: string): string {
    const status = { host, vllm: role === "head" ? running : { state: "no pid file", pid: null }, raylet: true, memory, ...(role === "head" ? { health: 200 } : {}) };
    return `spark-vllm-container running\n${JSON.stringify(status)}\nspark-vllm-given-up []\nspark-vllm-host-facts ${factsLine}\n`;
}

function reports(plan: ClusterPlan, facts: Record<string, string>) {
    return plan.hosts.map(h => parseHostOutput(h, 0, output(h.host.name, h.role === "head" ? "head" : "worker",
        facts[h.host.name] ?? JSON.stringify(healthyFacts(h.host.fabric.address))), ""));
}

test("each host's one script asks its helper for the facts on the host itself, with that host's fabric address and HCAs, whatever the container's state", () => {
    const plan = plan2();
    for (const h of plan.hosts) {
        const script = hostStatusScript(plan, h);
        const lines = script.split("\n").filter(l => l.includes(" host-facts "));
        assert.equal(lines.length, 1, script);
        assert.ok(lines[0].includes(`host-facts '${JSON.stringify({ host: h.host.name, fabric: { address: h.host.fabric.address, hcas: ["rocep1s0f1", "roceP2p1s0f1"] } })}'`), lines[0]);
        assert.doesNotMatch(lines[0], /docker exec|\$state/, "on the host, not in the container, and not only when it runs");
        // Inside the branch that runs only the helper the plan places (issue 30), before its `else`.
        const at = script.indexOf(lines[0]);
        assert.ok(script.lastIndexOf("if refused=", at) >= 0 && script.indexOf("\nelse\n", at) > at, script);
    }
});

test("the real host script on this machine: the helper reads this kernel's release and CMA lines, and refuses the HCAs it lacks in the preflight's words", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "status-facts-"));
    try {
        const plan = planCluster(parseSpec({ ...rawConfig(1), logDir: dir }));
        fs.writeFileSync(path.join(dir, TOOLS_FILE), toolsProgram());
        const bin = path.join(dir, "bin");
        fs.mkdirSync(bin);
        // `docker` here: no container on this host (the facts are asked all the same).
        fs.writeFileSync(path.join(bin, "docker"), "#!/bin/sh\nexit 1\n", { mode: 0o755 });
        const r = spawnSync("sh", ["-s"], { input: hostStatusScript(plan, plan.hosts[0]), encoding: "utf8", env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
        assert.equal(r.status, 0, r.stderr);
        const report = parseHostOutput(plan.hosts[0], r.status, r.stdout, r.stderr);
        assert.equal(report.container, "absent");
        assert.equal(report.factsError, undefined, r.stdout);
        const f = report.facts!;
        assert.equal(f.kernel.release, os.release());
        const cma = (key: string) => { const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(fs.readFileSync("/proc/meminfo", "utf8")); return m ? Number(m[1]) * 1024 : null; };
        assert.deepEqual([f.kernel.cmaTotalBytes, f.kernel.cmaFreeBytes], [cma("CmaTotal"), cma("CmaFree")]);
        assert.equal(f.fabricAddress, "198.18.1.2");
        assert.equal(typeof f.kernelLog.readable, "boolean");
        if (!fs.existsSync("/sys/class/infiniband/rocep1s0f1")) {
            assert.deepEqual(f.hcas.map(h => [h.name, h.exists, h.fabricGidIndex]), [["rocep1s0f1", false, null], ["roceP2p1s0f1", false, null]]);
            const s = clusterStatus(plan, "one", [report]);
            assert.ok(s.problems.includes("spark-a: HCA rocep1s0f1 not found: check spark-vllm:hosts[].fabric.hcas (ibdev2netdev)"), s.problems.join("\n"));
            assert.match(renderStatus(s), /\n {4}kernel .*, RoCE v2 GID index for 198\.18\.1\.2: rocep1s0f1 not found, roceP2p1s0f1 not found\n/);
        }
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

test("a host the preflight would refuse: its facts under its line, the last NVRM and Xid lines, and the preflight's refusals as problems that do not by themselves stop serving", () => {
    const plan = plan2();
    const s = clusterStatus(plan, "two", reports(plan, { "spark-b": JSON.stringify(badFacts) }));
    assert.equal(s.serving, true, "vLLM answers: the facts are said, the verdict is the endpoint's");
    assert.deepEqual(s.problems, [REFUSE_KERNEL, REFUSE_OOM]);
    const text = renderStatus(s);
    assert.ok(text.includes("\n  spark-a (head): container running, Ray node joined, vLLM pid 812 up 2 h 1 min serving qwen3.5-122b, /health 200, 60.2 of 119.7 GiB free\n" +
        "    kernel 6.17.0-1032-nvidia (CmaTotal 0 kB, CmaFree 0 kB), driver 580.95.05, since boot 0 NVRM out-of-memory and 0 Xid lines, RoCE v2 GID index for 198.18.1.2: rocep1s0f1 3\n"), text);
    assert.ok(text.includes("\n    kernel 7.0.0-1019-nvidia (CmaTotal 0 kB, CmaFree 940604 kB), driver 580.95.05, since boot 1 NVRM out-of-memory and 2 Xid lines, " +
        "RoCE v2 GID index for 198.18.1.3: rocep1s0f1 5, roceP2p1s0f1 none (it has 3 = 198.18.2.3) (not ACTIVE)\n" +
        `      last NVRM out-of-memory line: ${NVRM_OOM}\n      last Xid line: ${XID}\n`), text);
    assert.ok(text.endsWith(`\n\n- ${REFUSE_KERNEL}\n- ${REFUSE_OOM}\n- warning: ${badFacts.warnings[0]}\n`), text);
    // --json: the facts as the host gave them.
    assert.deepEqual(JSON.parse(JSON.stringify(s)).hosts[1].facts, badFacts);
});

test("past the lines the preflight's reader keeps the first line is shown and called the first; an unreadable log, an unknown driver and no CMA lines are said", () => {
    const plan = plan2();
    const facts: HostFacts = { ...healthyFacts("198.18.1.3"), kernel: { release: "6.17.0-1032-nvidia", cmaTotalBytes: null, cmaFreeBytes: null },
        driver: { version: null, why: "[Errno 2] No such file or directory: 'nvidia-smi'" }, kernelLog: { readable: false } };
    const many: HostFacts = { ...healthyFacts("198.18.1.2"), kernelLog: { readable: true, nvrmNoMemory: { count: 0 }, xid: { count: 5, line: XID, which: "first" } } };
    const text = renderStatus(clusterStatus(plan, "two", reports(plan, { "spark-a": JSON.stringify(many), "spark-b": JSON.stringify(facts) })));
    assert.match(text, /\n {4}kernel 6\.17\.0-1032-nvidia \(CmaTotal 0 kB, CmaFree 0 kB\), driver 580\.95\.05, since boot 0 NVRM out-of-memory and 5 Xid lines, .*\n {6}first Xid line: \[ {2}900\.1/);
    assert.match(text, /\n {4}kernel 6\.17\.0-1032-nvidia \(no CMA lines\), driver unknown \(\[Errno 2\] No such file or directory: 'nvidia-smi'\), kernel log unreadable, RoCE v2 GID index for 198\.18\.1\.3: rocep1s0f1 3\n/);
});

test("a kernel log line from the host is printed escaped, like every other text from a host; a helper that printed no facts is said under its host", () => {
    const plan = plan2();
    const evil = `${XID}\x1b[2J\r\nstack two: serving everything\u202e`;
    const facts = { ...badFacts, kernelLog: { readable: true, nvrmNoMemory: { count: 0 }, xid: { count: 1, line: evil, which: "last" } }, problems: [`spark-b: ${evil}`] };
    const s = clusterStatus(plan, "two", reports(plan, { "spark-b": JSON.stringify(facts) }));
    const text = renderStatus(s);
    assert.ok(!text.split("\n").includes("stack two: serving everything"), "a host cannot forge a line of the report");
    assert.ok(text.includes(`      last Xid line: ${XID}\\x1b[2J\\r\\nstack two: serving everything\\u202e\n`), text);
    assert.ok(s.problems.includes(`spark-b: ${XID}\\x1b[2J\\r\\nstack two: serving everything\\u202e`), s.problems.join("\n"));
    assert.ok(!/[\u0000-\u0009\u000b-\u001f\u202e]/.test(text));

    const failed = clusterStatus(plan, "two", reports(plan, { "spark-b": "KeyError: 'fabric'\x1b[31m" }));
    assert.equal(failed.hosts[1].facts, undefined);
    assert.equal(failed.hosts[1].factsError, "KeyError: 'fabric'\\x1b[31m");
    assert.match(renderStatus(failed), /\n {4}host facts not read: KeyError: 'fabric'\\x1b\[31m\n/);
    assert.deepEqual(failed.problems, []);
    // host-status's own JSON cannot pass itself off as the facts.
    const forged = parseHostOutput(plan.hosts[1], 0, `spark-vllm-container running\n${JSON.stringify({ host: "spark-b", facts: badFacts, memory })}\n`, "");
    assert.equal(forged.facts, undefined);
});

test("several replicas: a host's refused facts are its replica's problems too, and leave its verdict alone", () => {
    const raw = rawConfig(4, { tp: 2 });
    raw.replicas = 2;
    const plan = planCluster(parseSpec(raw));
    const front = "server 127.0.0.1:8001 max_fails=1 fail_timeout=10s;\nserver 198.18.1.4:8000 max_fails=1 fail_timeout=10s;\n";
    const rs = plan.hosts.map((h, i) => parseHostOutput(h, 0, output(h.host.name, h.role === "head" ? "head" : "worker",
        JSON.stringify(h.host.name === "spark-d" ? { ...badFacts, problems: [REFUSE_OOM.replace("spark-b", "spark-d")] } : healthyFacts(h.host.fabric.address))) +
        (i === 0 ? `spark-vllm-front-replicas ok ${Buffer.from(front).toString("base64")}\n` : ""), ""));
    const s = clusterStatus(plan, "four", rs);
    assert.deepEqual(s.replicas!.map(r => [r.serving, r.problems.length]), [[true, 0], [true, 1]]);
    assert.deepEqual(s.problems, s.replicas![1].problems);
    const text = renderStatus(s);
    assert.match(text, /\n {4}spark-d \(worker\): [^\n]*\n {6}kernel 7\.0\.0-1019-nvidia /);
    assert.ok(text.includes(`\nreplica 2 (spark-c, spark-d):\n- ${REFUSE_OOM.replace("spark-b", "spark-d")}\n`), text);
});
