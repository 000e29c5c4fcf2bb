// NCCL's INFO/WARN output: the transport each channel used, whether NCCL looked for IB/RoCE
// devices, found none and fell back to sockets, and the cause line of bootstrap failures.
// Pure: no Pulumi, no I/O. The same reading as the fabric check's (components/hostProgram/spark_vllm/fabric.py).
//
// Every line shape below is NCCL's, cited from NVIDIA/nccl at tag v2.28.9-1 and checked against
// the real logs in tests/fixtures/nccl/ (NCCL 2.28.9, torch 2.11.0 on two H200s; README there).
import { DIAGNOSIS_CATALOG, diagnose, normaliseLog, type CatalogEntry, type Diagnosis } from "./diagnosis";

/** One `Channel … via …` line: a connection NCCL set up between two ranks. */
export interface NcclChannel {
    channel: number;
    from: number;
    to: number;
    /** `send` / `receive` on network channels; absent on P2P and SHM ones. */
    direction?: "send" | "receive";
    /** What NCCL printed after `via`: `P2P/CUMEM`, `NET/Socket/0`, `NET/IB/0/GDRDMA`, `SHM/direct/direct`. */
    via: string;
    /** The transport class: `P2P`, `SHM`, `NET/IB`, `NET/Socket`, `NET/<plugin>`. */
    transport: string;
    line: string;
}

export interface NcclLogFacts {
    /** `2.28.9+cuda13.0` from `NCCL version …`. */
    version?: string;
    /** The network plugin NCCL chose (`Using network IB` / `Using network Socket`). */
    network?: string;
    usingNetworkLine?: string;
    /** `NCCL_IB_HCA set to …`: HCAs were asked for. */
    ibHcaLine?: string;
    /** `NET/IB : No device found.` */
    ibNoDevice?: string;
    /** `Failed to initialize NET plugin IB`. */
    ibPluginFailed?: string;
    ibLines: string[];
    socketLines: string[];
    channels: NcclChannel[];
    /** `via` string → number of channel lines. */
    transports: Record<string, number>;
    /** Transport class → number of channel lines. */
    transportClasses: Record<string, number>;
    /** One name for the classes used, a network one first (`NET/IB`, `NET/Socket`, `P2P`, `NET/Socket+P2P`). */
    transport?: string;
    /** `NCCL WARN` lines, as printed (trimmed). */
    warnings: string[];
    /** The WARN line of a bootstrap failure (`Bootstrap : no socket interface found`, …). */
    bootstrapError?: string;
    /** The line after torch's `Last error:` in an `NCCL error in:` exception (NCCL's last WARN, without its prefix). */
    lastError?: string;
}

/** The log's lines as diagnose() quotes them: no ANSI, no process prefixes (`(RayWorkerWrapper pid=311, ip=…) `, `[rank0]: `), trimmed. */
const lines = (log: string) => normaliseLog(log).map(l => l.trim());

// `host:pid:tid [cudaDev] NCCL INFO msg`; WARN lines carry `file.cc:line` and, by default, a
// `[YYYY-MM-DD hh:mm:ss] ` timestamp first (src/debug.cc, NCCL_DEBUG_TIMESTAMP_LEVELS default WARN).
const NCCL_LINE = /NCCL (INFO|WARN) (.*)$/;
// src/transport/p2p.cc:393 `Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/%s%s%s`;
// src/transport/shm.cc `Channel %02d : %d[%d] -> %d[%d] via SHM/direct…`;
// src/transport/net.cc:313/359 `Channel %02d/%d : %d[%d] -> %d[%d] [send|receive] via NET/%s/%d%s%s%s`.
// Ring lines such as `Channel 00/24 : 0 1` (src/graph/rings.cc) have no `->` and do not match.
const CHANNEL = /^Channel ([0-9]+)(?:\/[0-9]+)? : ([0-9]+)\[[0-9]+\] -> ([0-9]+)\[[0-9]+\](?: \[(send|receive)\])? via (.+)$/;
// src/init.cc:428 `Using network %s`: printed on one host too, where all channels may be P2P
// (tests/fixtures/nccl/p2p.nccl.log), so it alone is no sign of a fall-back.
const USING_NETWORK = /^Using network (.+)$/;
// src/init.cc VERSION_STRING: `NCCL version 2.28.9+cuda13.0`.
const VERSION = /^NCCL version ([0-9][^ ]*)/;
// src/plugin/net.cc:225 `Failed to initialize NET plugin %s`.
const IB_PLUGIN_FAILED = /^Failed to initialize NET plugin IB$/;
// src/transport/net_ib.cc:702 `NCCL_IB_HCA set to %s`; :826 `NET/IB : No device found.`
const IB_HCA = /^NCCL_IB_HCA set to /;
const IB_NO_DEVICE = /^NET\/IB : No device found/;
// src/bootstrap.cc:114 `Bootstrap : no socket interface found`; :120 (NCCL_COMM_ID given)
// `NET/Socket : No usable listening interface found`.
const BOOTSTRAP = /^Bootstrap|No usable listening interface found/;

/** `NET/IB/0/GDRDMA` → `NET/IB`, `NET/Socket/1` → `NET/Socket`, `P2P/CUMEM` → `P2P`, `SHM/direct/direct` → `SHM`. */
export function transportClass(via: string): string {
    if (via.startsWith("NET/")) {
        const m = /^NET\/(.+?)\/[0-9]/.exec(via);
        return "NET/" + (m ? m[1] : via.slice(4).split("/")[0]);
    }
    return via.split("/")[0];
}

/** One name for a set of classes: network ones first (with one rank per host only they carry data), then the rest. */
export function summariseTransport(classes: Iterable<string>): string | undefined {
    const names = [...new Set(classes)].sort((a, b) =>
        Number(!a.startsWith("NET/")) - Number(!b.startsWith("NET/")) || (a < b ? -1 : a > b ? 1 : 0));
    return names.length ? names.join("+") : undefined;
}

export function parseNcclLog(log: string): NcclLogFacts {
    const facts: NcclLogFacts = {
        ibLines: [], socketLines: [], channels: [], transports: {}, transportClasses: {}, warnings: [],
    };
    const all = lines(log);
    all.forEach((line, i) => {
        // torch's DistBackendError ends `Last error:` then NCCL's last WARN message on its own line
        // (tests/fixtures/nccl/iface-missing.rank.log).
        if (/(^|[^A-Za-z])Last error:$/.test(line) && all[i + 1] && !facts.lastError) facts.lastError = all[i + 1];
        const m = NCCL_LINE.exec(line);
        if (!m) return;
        const [, level, message] = m;
        const msg = message.trim();
        if (level === "WARN") {
            facts.warnings.push(line);
            if (!facts.bootstrapError && BOOTSTRAP.test(msg)) facts.bootstrapError = line;
            return;
        }
        const v = VERSION.exec(msg);
        if (v) { facts.version ??= v[1]; return; }
        const u = USING_NETWORK.exec(msg);
        if (u) { facts.network = u[1]; facts.usingNetworkLine ??= line; return; }
        if (IB_PLUGIN_FAILED.test(msg)) { facts.ibPluginFailed ??= line; return; }
        if (IB_HCA.test(msg)) { facts.ibHcaLine ??= line; return; }
        if (msg.startsWith("NET/IB")) {
            facts.ibLines.push(line);
            if (IB_NO_DEVICE.test(msg)) facts.ibNoDevice ??= line;
            return;
        }
        if (msg.startsWith("NET/Socket")) { facts.socketLines.push(line); return; }
        const c = CHANNEL.exec(msg);
        if (c) {
            const via = c[5].trim();
            const transport = transportClass(via);
            facts.channels.push({
                channel: Number(c[1]), from: Number(c[2]), to: Number(c[3]),
                ...(c[4] ? { direction: c[4] as "send" | "receive" } : {}), via, transport, line,
            });
            facts.transports[via] = (facts.transports[via] ?? 0) + 1;
            facts.transportClasses[transport] = (facts.transportClasses[transport] ?? 0) + 1;
        }
    });
    facts.transport = summariseTransport(Object.keys(facts.transportClasses));
    return facts;
}

/** The transport NCCL's channels used (`NET/IB`, `NET/Socket`, `P2P`, …), or undefined when the log shows no channel. */
export function ncclTransportUsed(log: string | NcclLogFacts): string | undefined {
    return (typeof log === "string" ? parseNcclLog(log) : log).transport;
}

/** A sentence for a diagnosis or a report: `NCCL 2.28.9+cuda13.0 used NET/Socket (4 channels via NET/Socket/0; network Socket)`. */
export function describeNcclTransport(log: string | NcclLogFacts): string | undefined {
    const f = typeof log === "string" ? parseNcclLog(log) : log;
    if (!f.transport && !f.network) return undefined;
    const via = Object.entries(f.transports).map(([v, n]) => `${n} channel${n === 1 ? "" : "s"} via ${v}`).join(", ");
    const what = f.transport ? `used ${f.transport} (${via}; network ${f.network ?? "not named"})` : `chose network ${f.network} (no channel set up)`;
    return `NCCL${f.version ? " " + f.version : ""} ${what}`;
}

/** Lines that say NCCL looked for IB/RoCE devices, found none, and used sockets; the first is the root cause. */
export interface NcclSocketFallback {
    /** NCCL's `NET/IB : No device found.` line. */
    line: string;
    /** NCCL's own lines, in the order that tells the story: HCAs asked for, none found, network chosen, a socket channel. */
    lines: string[];
}

/**
 * NCCL fell back from IB/RoCE to sockets: it looked for IB devices and found none (`NET/IB : No
 * device found.`), chose the Socket network, and either HCAs were asked for (`NCCL_IB_HCA set to`,
 * or `hcasConfigured`) or the channels run over NET/Socket. Not a fall-back: a host with no HCA
 * and no NCCL_IB_HCA whose channels are all P2P (tests/fixtures/nccl/p2p.nccl.log), and
 * NCCL_IB_DISABLE=1, where NCCL returns before looking (src/transport/net_ib.cc:677) and prints
 * only `Failed to initialize NET plugin IB`.
 */
export function ncclSocketFallback(log: string | NcclLogFacts, opts: { hcasConfigured?: boolean } = {}): NcclSocketFallback | undefined {
    const f = typeof log === "string" ? parseNcclLog(log) : log;
    const socketChannel = f.channels.find(c => c.transport === "NET/Socket");
    if (!f.ibNoDevice || f.network !== "Socket") return undefined;
    if (!f.ibHcaLine && !opts.hcasConfigured && !socketChannel) return undefined;
    const story = [f.ibHcaLine, f.ibNoDevice, f.ibPluginFailed, f.usingNetworkLine, socketChannel?.line];
    return { line: f.ibNoDevice, lines: story.filter((l): l is string => !!l) };
}

/**
 * The catalog entry for `nccl-socket-fallback`, meant for components/knowledge/diagnosis.ts's DIAGNOSIS_CATALOG
 * (moved there as a literal: diagnosis.ts must not import this module, which imports it).
 * Weak: a slower fabric is rarely why a launch failed, so any firm cause elsewhere in the log wins.
 * This project sets NCCL_IB_DISABLE=1 when `hcas: []` (components/plan/containers.ts), and NCCL then returns
 * before looking for devices (src/transport/net_ib.cc:677) and never prints the NET/IB line: in our
 * logs it appears only where IB/RoCE was wanted.
 */
export const NCCL_SOCKET_FALLBACK_ENTRY: CatalogEntry = DIAGNOSIS_CATALOG.find(e => e.kind === "nccl-socket-fallback")!;

/** A diagnosis that also names the transport NCCL used, when the log shows it. */
export type NcclDiagnosis = Diagnosis & { transport?: string };

const BOOTSTRAP_IFACE_FIX =
    " `Bootstrap : no socket interface found` means NCCL_SOCKET_IFNAME (from `spark-vllm:hosts[].fabric.interface`) names no " +
    "interface with an address inside the container: compare it with `ip -br addr` on the host.";

/**
 * Refines `diagnose()`'s answer with what NCCL's own lines say; `log` is the same log.
 * - `nccl-error`: the line becomes NCCL's cause: the bootstrap WARN line (e.g. `… NCCL WARN Bootstrap : no
 *   socket interface found`), else the line after torch's `Last error:`, instead of torch's wrapper
 *   `DistBackendError: NCCL error in: …, invalid usage (run with NCCL_DEBUG=WARN for details)`.
 * - no diagnosis or `unknown-engine-failure`, and NCCL fell back to sockets: `nccl-socket-fallback` with the NET/IB line.
 * - always: `transport` set when the log shows NCCL's channels.
 */
export function refineNcclDiagnosis(d: Diagnosis | undefined, log: string): NcclDiagnosis | undefined {
    const f = parseNcclLog(log);
    const transport = f.transport;
    const withTransport = (x: Diagnosis): NcclDiagnosis => (transport ? { ...x, transport } : { ...x });
    if (d?.kind === "nccl-error") {
        const cause = f.bootstrapError ?? f.lastError;
        if (!cause) return withTransport(d);
        const iface = /no socket interface found/.test(cause);
        return withTransport({ kind: d.kind, line: cause, hint: d.hint + (iface ? BOOTSTRAP_IFACE_FIX : "") });
    }
    if (!d || d.kind === "unknown-engine-failure" || d.kind === NCCL_SOCKET_FALLBACK_ENTRY.kind) {
        const fallback = ncclSocketFallback(f);
        if (fallback) return withTransport({ kind: NCCL_SOCKET_FALLBACK_ENTRY.kind, line: fallback.line, hint: NCCL_SOCKET_FALLBACK_ENTRY.hint });
    }
    return d && withTransport(d);
}

/** One size of the fabric check's all-reduce (components/hostProgram/spark_vllm/fabric.py). */
export interface FabricSizeResult {
    bytes: number;
    timeUs: number;
    algbwGBps: number;
    busbwGBps: number;
    correct: boolean;
}

/** The JSON object fabric.py prints as its last stdout line. */
export interface FabricResult {
    host: string;
    rank: number;
    worldSize: number;
    device: number;
    transport: string | null;
    network: string | null;
    transports: Record<string, number>;
    /** Size label (`1MiB`, `16MiB`, `256MiB`) → bus bandwidth in GB/s (1e9 bytes). */
    busbwGBps: Record<string, number>;
    results: FabricSizeResult[];
    linkGbps: number | null;
    hcas: string[];
    warnings: string[];
    ncclVersion: string | null;
    torchVersion: string | null;
    cudaVersion: string | null;
    ncclLines: string[];
    env: Record<string, string>;
    seconds: number;
    log: string;
}

/** fabric.py's result from its stdout (the last line that is a JSON object), or undefined. */
export function parseFabricOutput(stdout: string): FabricResult | undefined {
    const last = lines(stdout).filter(l => l.length > 0).pop();
    if (!last || !last.startsWith("{")) return undefined;
    try {
        const r = JSON.parse(last) as FabricResult;
        return typeof r === "object" && r && "busbwGBps" in r && "transport" in r ? r : undefined;
    } catch {
        return undefined;
    }
}

/**
 * nccl-tests' bus bandwidth of an all-reduce (NVIDIA/nccl-tests doc/PERFORMANCE.md): algbw = S/t,
 * busbw = algbw × 2(n−1)/n, in GB/s of 1e9 bytes; comparable with the link's line rate whatever n is.
 */
export function allReduceBusBandwidth(bytes: number, seconds: number, ranks: number): { algbwGBps: number; busbwGBps: number } {
    const algbwGBps = bytes / seconds / 1e9;
    return { algbwGBps, busbwGBps: (algbwGBps * 2 * (ranks - 1)) / ranks };
}

/** `diagnose()` with NCCL's own words: the bootstrap cause line for `nccl-error`, and the transport NCCL used. */
export function diagnoseWithNccl(log: string): NcclDiagnosis | undefined {
    return refineNcclDiagnosis(diagnose(log), log);
}
