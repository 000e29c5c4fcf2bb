// components/knowledge/nccl.ts over the real NCCL 2.28.9 logs in tests/fixtures/nccl/ (see its README).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { diagnose } from "../../../components/knowledge/diagnosis";
import {
    allReduceBusBandwidth,
    describeNcclTransport,
    NCCL_SOCKET_FALLBACK_ENTRY,
    ncclSocketFallback,
    ncclTransportUsed,
    parseFabricOutput,
    parseNcclLog,
    refineNcclDiagnosis,
    summariseTransport,
    transportClass,
} from "../../../components/knowledge/nccl";

const FIXTURES = path.join(__dirname, "..", "..", "fixtures", "nccl");
const fixture = (name: string) => readFileSync(path.join(FIXTURES, name), "utf8");

test("P2P run: transport, version, network named although unused", () => {
    const f = parseNcclLog(fixture("p2p.nccl.log"));
    assert.equal(f.version, "2.28.9+cuda13.0");
    assert.equal(f.transport, "P2P");
    assert.deepEqual(f.transports, { "P2P/CUMEM": 24 });
    assert.equal(f.channels[0].line, "vm:641:641 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM");
    assert.deepEqual([f.channels[0].from, f.channels[0].to, f.channels[0].direction], [0, 1, undefined]);
    // No HCA on the machine: NCCL says so and names the Socket network even though every channel is P2P.
    assert.equal(f.ibNoDevice, "vm:641:641 [0] NCCL INFO NET/IB : No device found.");
    assert.equal(f.network, "Socket");
    assert.equal(ncclSocketFallback(f), undefined, "no HCA asked for and no socket channel: not a fall-back");
    assert.deepEqual(f.warnings, []);
    assert.equal(ncclTransportUsed(fixture("torchrun.nccl.log")), "P2P");
});

test("socket runs: every channel NET/Socket, the interface NCCL used", () => {
    for (const name of ["socket.nccl.log", "socket-lo.nccl.log", "hca-missing-net.nccl.log"]) {
        const f = parseNcclLog(fixture(name));
        assert.equal(f.transport, "NET/Socket", name);
        assert.deepEqual(f.transports, { "NET/Socket/0": 4 }, name);
        assert.deepEqual(f.channels.map(c => c.direction).sort(), ["receive", "receive", "send", "send"], name);
    }
    assert.ok(parseNcclLog(fixture("socket-lo.nccl.log")).socketLines.includes("vm:843:843 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>"));
    assert.equal(describeNcclTransport(fixture("socket.nccl.log")),
        "NCCL 2.28.9+cuda13.0 used NET/Socket (4 channels via NET/Socket/0; network Socket)");
    assert.equal(describeNcclTransport(fixture("p2p.nccl.log")),
        "NCCL 2.28.9+cuda13.0 used P2P (24 channels via P2P/CUMEM; network Socket)");
});

test("HCAs asked for, none found: fall-back with the NET/IB line first", () => {
    const fb = ncclSocketFallback(fixture("hca-missing.nccl.log"))!;
    assert.equal(fb.line, "vm:941:941 [0] NCCL INFO NET/IB : No device found.");
    assert.deepEqual(fb.lines, [
        "vm:941:941 [0] NCCL INFO NCCL_IB_HCA set to rocep1s0f1,roceP2p1s0f1",
        "vm:941:941 [0] NCCL INFO NET/IB : No device found.",
        "vm:941:941 [0] NCCL INFO Failed to initialize NET plugin IB",
        "vm:941:941 [0] NCCL INFO Using network Socket",
    ]);
    const net = ncclSocketFallback(fixture("hca-missing-net.nccl.log"))!;
    assert.equal(net.lines.at(-1), "vm:1043:1043 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0");
    // Sockets with no NCCL_IB_HCA line: a fall-back once NCCL looked for IB (this project sets NCCL_IB_DISABLE=1 for hcas: []).
    assert.ok(ncclSocketFallback(fixture("socket.nccl.log")));
    // The P2P log is one only when the caller knows HCAs were configured.
    assert.ok(ncclSocketFallback(fixture("p2p.nccl.log"), { hcasConfigured: true }));
    assert.equal(ncclSocketFallback(fixture("iface-missing.nccl.log")), undefined);
});

test("NCCL_IB_DISABLE=1 (hcas: []) is TCP on purpose, not a fall-back", () => {
    // With IB disabled NCCL returns before looking for devices (src/transport/net_ib.cc:677 at v2.28.9-1):
    // the real socket run's log without its NET/IB lines, `Failed to initialize NET plugin IB` kept.
    const disabled = fixture("socket.nccl.log").split("\n").filter(l => !l.includes("NCCL INFO NET/IB")).join("\n");
    const f = parseNcclLog(disabled);
    assert.equal(f.ibPluginFailed, "vm:741:741 [0] NCCL INFO Failed to initialize NET plugin IB");
    assert.equal(f.transport, "NET/Socket");
    assert.equal(ncclSocketFallback(f), undefined);
    assert.equal(refineNcclDiagnosis(undefined, disabled), undefined);
});

test("bootstrap failure: NCCL's WARN line, and torch's `Last error:` line without NCCL_DEBUG", () => {
    const f = parseNcclLog(fixture("iface-missing.nccl.log"));
    assert.equal(f.bootstrapError, "[2026-11-30 21:39:41] vm:1140:1140 [0] bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found");
    assert.equal(f.transport, undefined);
    assert.equal(ncclTransportUsed(f), undefined);
    assert.equal(describeNcclTransport(f), undefined);
    const torch = parseNcclLog(fixture("iface-missing.rank.log"));
    assert.equal(torch.lastError, "Bootstrap : no socket interface found");
    assert.equal(torch.bootstrapError, undefined);
});

test("a missing socket interface is socket-iface-missing with NCCL's cause line, not torch's wrapper; refining keeps it", () => {
    // torch's `DistBackendError: NCCL error in: ..., invalid usage` is the consequence; the line after its `Last error:`
    // is NCCL's cause (catalog entry socket-iface-missing, a cause, so it wins over the nccl-error consequence).
    const rank = fixture("iface-missing.rank.log");
    const before = diagnose(rank)!;
    assert.equal(before.kind, "socket-iface-missing");
    assert.equal(before.line, "Bootstrap : no socket interface found");
    assert.match(before.hint, /NCCL_SOCKET_IFNAME .*spark-vllm:hosts\[\]\.fabric\.interface/);
    assert.deepEqual(refineNcclDiagnosis(before, rank), before);
    // With NCCL's own log in front, its WARN line (host, file:line) is the cause.
    const both = fixture("iface-missing.nccl.log") + rank;
    assert.equal(refineNcclDiagnosis(diagnose(both), both)!.line,
        "[2026-11-30 21:39:41] vm:1140:1140 [0] bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found");
    assert.equal(refineNcclDiagnosis(diagnose(both), both)!.transport, undefined);
    // An NCCL error with no cause line keeps nccl-error, refined with torch's `Last error:` line when there is one.
    const bare = rank.replace(/^.*no socket interface found.*$/gm, "");
    assert.equal(diagnose(bare)?.kind, "nccl-error");
});

test("refineNcclDiagnosis: a fall-back with no other cause is nccl-socket-fallback naming the transport", () => {
    const net = fixture("hca-missing-net.nccl.log");
    // The catalog knows the NET/IB line (a weak pattern, so the Python port finds it too); refining adds the transport.
    assert.equal(diagnose(net)?.kind, "nccl-socket-fallback");
    assert.deepEqual(refineNcclDiagnosis(diagnose(net), net), {
        kind: "nccl-socket-fallback",
        line: "vm:1043:1043 [0] NCCL INFO NET/IB : No device found.",
        hint: NCCL_SOCKET_FALLBACK_ENTRY.hint,
        transport: "NET/Socket",
    });
    // Ray prefixes are stripped as diagnose() strips them.
    const prefixed = fixture("hca-missing.nccl.log").split("\n").map(l => `(RayWorkerWrapper pid=311, ip=192.168.100.11) ${l}`).join("\n");
    assert.equal(refineNcclDiagnosis(undefined, prefixed)?.line, "vm:941:941 [0] NCCL INFO NET/IB : No device found.");
    // A firm cause elsewhere stays; the transport is added.
    const oom = { kind: "cuda-oom", line: "torch.OutOfMemoryError: CUDA out of memory.", hint: "h" };
    assert.deepEqual(refineNcclDiagnosis(oom, net), { ...oom, transport: "NET/Socket" });
    assert.equal(refineNcclDiagnosis(undefined, fixture("p2p.nccl.log")), undefined);
});

test("the catalog entry's weak pattern is in the JS/Python common subset and matches only the NET/IB line", () => {
    const [p] = NCCL_SOCKET_FALLBACK_ENTRY.weakPatterns!;
    assert.deepEqual(NCCL_SOCKET_FALLBACK_ENTRY.patterns, []);
    assert.doesNotMatch(p, /\\[dDwWsSbBAZzpPk]|\(\?<|\(\?P|\(\?[imsx]/);
    const hits = fixture("hca-missing.nccl.log").split("\n").filter(l => new RegExp(p, "s").test(l));
    assert.deepEqual(hits, ["vm:941:941 [0] NCCL INFO NET/IB : No device found."]);
    assert.ok(/^[\x20-\x7e]*$/.test(NCCL_SOCKET_FALLBACK_ENTRY.hint));
    for (const s of ["spark-vllm:hosts[].fabric.hcas", "rocep1s0f1", "roceP2p1s0f1", "/dev/infiniband", "IPC_LOCK", "memlock unlimited"]) {
        assert.ok(NCCL_SOCKET_FALLBACK_ENTRY.hint.includes(s), s);
    }
});

test("fabric.py's JSON: bus bandwidth per size, transport, versions", () => {
    const p2p = parseFabricOutput(fixture("p2p.out"))!;
    assert.equal(p2p.transport, "P2P");
    assert.deepEqual(p2p.busbwGBps, { "1MiB": 41.117, "16MiB": 219.385, "256MiB": 299.6 });
    assert.equal(p2p.ncclVersion, "2.28.9+cuda13.0");
    assert.equal(p2p.torchVersion, "2.11.0+cu130");
    const sock = parseFabricOutput(fixture("socket.out"))!;
    assert.equal(sock.transport, "NET/Socket");
    assert.deepEqual(sock.busbwGBps, { "1MiB": 2.79, "16MiB": 4.246, "256MiB": 4.195 });
    assert.ok(p2p.busbwGBps["256MiB"] > 50 * sock.busbwGBps["256MiB"]);
    // torchrun: both ranks print; the last line is rank 1's object.
    assert.equal(parseFabricOutput(fixture("torchrun.out"))?.rank, 1);
    // A failed check ends with progress, not JSON.
    assert.equal(parseFabricOutput(fixture("hca-missing.out")), undefined);
    assert.equal(parseFabricOutput(""), undefined);
});

test("busbw formula (nccl-tests PERFORMANCE.md) reproduces the measured figures", () => {
    for (const name of ["p2p.out", "socket.out", "socket-lo.out"]) {
        for (const r of parseFabricOutput(fixture(name))!.results) {
            const { busbwGBps } = allReduceBusBandwidth(r.bytes, r.timeUs / 1e6, 2);
            assert.ok(Math.abs(busbwGBps - r.busbwGBps) <= r.busbwGBps * 0.01, `${name} ${r.bytes}`);
        }
    }
    assert.deepEqual(allReduceBusBandwidth(1e9, 1, 4), { algbwGBps: 1, busbwGBps: 1.5 });
});

test("transport classes", () => {
    assert.equal(transportClass("NET/IB/0/GDRDMA"), "NET/IB");
    assert.equal(transportClass("NET/Socket/1"), "NET/Socket");
    assert.equal(transportClass("P2P/CUMEM"), "P2P");
    assert.equal(transportClass("SHM/direct/direct"), "SHM");
    assert.equal(summariseTransport(["P2P", "NET/IB"]), "NET/IB+P2P");
    assert.equal(summariseTransport([]), undefined);
});

/** A free TCP port on loopback. */
async function freePort(): Promise<number> {
    const srv = createServer();
    await new Promise<void>(resolve => srv.listen(0, "127.0.0.1", resolve));
    const port = (srv.address() as { port: number }).port;
    await new Promise(resolve => srv.close(resolve));
    return port;
}

test("the sim's stand-in torch prints NCCL lines this parser reads as it reads the real ones", async () => {
    // fabric.py on the stand-in (tests/sim/image/python/torch), two local ranks; the second host's HCAs are missing.
    const root = mkdtempSync(path.join(tmpdir(), "nccl-standin-"));
    const repo = path.join(__dirname, "..", "..", "..");
    try {
        const port = await freePort();
        const run = (rank: number, faults: object) => {
            const home = path.join(root, `h${rank}`);
            const log = path.join(home, "log");
            mkdirSync(home, { recursive: true });
            writeFileSync(path.join(home, "sim-faults.json"), JSON.stringify(faults));
            const args = { rank, worldSize: 2, masterAddr: "127.0.0.1", masterPort: port, logDir: log, sizes: [1 << 20], iters: 2, warmup: 1, timeoutSeconds: 10 };
            const child = spawn("python3", [path.join(repo, "components/hostProgram/spark_vllm/fabric.py"), JSON.stringify(args)], {
                env: {
                    PATH: process.env.PATH, PYTHONDONTWRITEBYTECODE: "1", PYTHONPATH: path.join(repo, "tests/sim/image/python"),
                    HF_HOME: home, NVIDIA_VISIBLE_DEVICES: "all", NCCL_SOCKET_IFNAME: "lo", NCCL_IB_HCA: "rocep1s0f1,roceP2p1s0f1",
                },
            });
            let out = "";
            child.stdout.on("data", d => (out += d));
            return new Promise<{ code: number | null; out: string; nccl: string }>(resolve =>
                child.on("close", code => resolve({ code, out, nccl: readFileSync(path.join(log, `fabric-rank${rank}.nccl.log`), "utf8") })));
        };
        const [a, b] = await Promise.all([run(0, {}), run(1, { hca_missing: true })]);
        assert.equal(a.code, 0);
        assert.equal(parseFabricOutput(a.out)?.transport, "NET/IB");
        assert.equal(ncclTransportUsed(a.nccl), "NET/IB");
        assert.equal(ncclSocketFallback(a.nccl), undefined);
        assert.equal(parseNcclLog(a.nccl).version, "2.28.9+cuda13.0");
        assert.equal(b.code, 1);
        const fb = ncclSocketFallback(b.nccl)!;
        assert.match(fb.line, /^[^ ]+:[0-9]+:[0-9]+ \[0\] NCCL INFO NET\/IB : No device found\.$/);
        assert.deepEqual(fb.lines.map(l => l.replace(/^.* NCCL INFO /, "")), [
            "NCCL_IB_HCA set to rocep1s0f1,roceP2p1s0f1",
            "NET/IB : No device found.",
            "Failed to initialize NET plugin IB",
            "Using network Socket",
            "Channel 00/0 : 0[0] -> 1[0] [receive] via NET/Socket/0",
        ]);
        assert.equal(refineNcclDiagnosis(undefined, b.nccl)?.transport, "NET/Socket");
    } finally {
        rmSync(root, { recursive: true, force: true });
    }
});

test("spark-vllm diagnose on real NCCL logs: socket fall-back with the NET/IB line and the transport; a missing interface's bootstrap line", () => {
    const cli = (file: string) => spawnSync(process.execPath, [path.join(__dirname, "..", "..", "..", "bin", "spark-vllm.js"), "diagnose", file], { encoding: "utf8" });
    const fallback = cli(path.join(__dirname, "..", "..", "fixtures", "nccl", "hca-missing-net.nccl.log"));
    assert.equal(fallback.status, 0, fallback.stderr);
    assert.match(fallback.stdout, /^kind: nccl-socket-fallback\nroot cause: .*NCCL INFO NET\/IB : No device found\.\ntransport: NET\/Socket/);
    const iface = cli(path.join(__dirname, "..", "..", "fixtures", "nccl", "iface-missing.err"));
    assert.equal(iface.status, 0, iface.stderr);
    assert.match(iface.stdout, /^kind: socket-iface-missing\nroot cause: .*NCCL WARN Bootstrap : no socket interface found/);
});
