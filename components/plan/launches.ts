// What a launch leaves behind so the container's supervisor can run it again (components/hostProgram/spark_vllm/
// supervise.py): a record of the exact argv, never a secret. Pure: records and shell lines as data. No Pulumi.
//
// After a host reboots, Docker starts the container again under its restart policy ("unless-stopped": started again
// when the daemon starts, unless someone stopped it; https://docs.docker.com/engine/containers/start-containers-
// automatically/), its main process is the supervisor, and the container's own file system, which holds the records
// and the secrets' 0600 files, is the one the launches wrote to (the same container, not a new one).
import { HostSpec } from "../spec/spec";
import { argvLine, shq } from "./scripts";
import { TOOLS_PIN_FILE, verifiedTools } from "./verifiedRun";

/** Inside every vLLM container (not a mount): root-only, gone with the container, kept across its restarts. */
export const RECORDS_DIR = "/var/lib/spark-vllm/launches";
/** The API key for a relaunch of the head's `vllm serve`: 0600, beside the Ray token (rayAuth.ts). */
export const API_KEY_FILE = "/var/lib/spark-vllm/vllm/api_key";
/** The file descriptor the launch's lock is held on: every process a launch starts closes it (`9>&-`). */
export const LOCK_FD = 9;

/** One launch as the supervisor reads it (supervise.py documents each field). */
export interface LaunchRecord {
    name: "ray" | "vllm";
    argv: string[];
    log: string;
    /** A detached process with a "PID STARTTIME" file (vLLM), or a daemon found by its command name (Ray). */
    pidFile?: string;
    process?: string;
    /** Run before a relaunch (e.g. `ray stop --force`). */
    before?: string[][];
    /** Environment variable → the 0600 file its value is read from. */
    secretEnv?: Record<string, string>;
    /** Records on this host that must run first. */
    after?: Array<LaunchRecord["name"]>;
    /** What must answer before a relaunch: an address, or a command that exits 0. */
    gate?: { tcp: string } | { argv: string[]; timeoutSeconds: number };
    /** Proven (and serving again after a relaunch) once this answers 200; else after provenAfterSeconds of running. */
    healthUrl?: string;
    provenAfterSeconds?: number;
}

/**
 * The supervisor as the container's main process: a shell loop, so a crash of the supervisor never ends the container.
 * Issue 30: it runs the helper program only when its sha256 is the one pinned in the container (components/
 * verifiedRun.ts: the bytes hashed are the bytes run); a program swapped in logDir is refused, every 5 s, with why
 * on the container's log. The digest is not in these arguments: a new program would then replace every container.
 */
export function supervisorEntrypoint(toolsPath: string, pin: string = TOOLS_PIN_FILE, memoryFloorGiB = 0): { entrypoint: string[]; command: string[] } {
    const loop = `while :; do if [ -f ${shq(toolsPath)} ]; then ${argvLine(verifiedTools(toolsPath, pin, ["supervise"]))} "$1"; fi; sleep 5; done`;
    // The memory guard's floor (spark-vllm:memoryGuard.floorGiB; supervise.py), in bytes; absent when off.
    const floor = memoryFloorGiB > 0 ? { memoryFloorBytes: memoryFloorGiB * 2 ** 30 } : {};
    return { entrypoint: ["/bin/sh", "-c", loop, "spark-vllm-supervise"], command: [JSON.stringify({ dir: RECORDS_DIR, ...floor })] };
}

/** Takes the records' lock (the supervisor takes the same one before a relaunch), so a launch and a relaunch never race. */
export function lockRecords(dir: string = RECORDS_DIR): string[] {
    return [`mkdir -p ${shq(dir)} && chmod 700 ${shq(dir)}`, `exec ${LOCK_FD}>>${shq(`${dir}/.lock`)}`, `flock -w 120 ${LOCK_FD}`];
}

/** Writes the record (under the lock, after the process started); a new launch is unproven and not failed. */
export function writeRecord(record: LaunchRecord, dir: string = RECORDS_DIR): string[] {
    const at = (suffix: string) => shq(`${dir}/${record.name}${suffix}`);
    return [
        `rm -f ${at(".proven")} ${at(".failed")}`,
        `printf '%s\\n' ${shq(JSON.stringify(record))} > ${at(".json.tmp")} && mv -f ${at(".json.tmp")} ${at(".json")}`,
    ];
}

/** Removes the record first, so the supervisor never relaunches what a delete is stopping. */
export function removeRecord(name: LaunchRecord["name"], dir: string = RECORDS_DIR): string[] {
    return [`rm -f ${[".json", ".proven", ".failed"].map(x => shq(`${dir}/${name}${x}`)).join(" ")}`];
}

/** Bash lines: the API key from stdin's first line into API_KEY_FILE (0600, mktemp then rename), and into VLLM_API_KEY. */
export function installApiKey(file: string = API_KEY_FILE): string[] {
    const dir = shq(file.replace(/\/[^/]+$/, ""));
    return [
        "IFS= read -r VLLM_API_KEY || true",
        `[ -n "$VLLM_API_KEY" ] || { echo 'spark-vllm: no API key on stdin' >&2; exit 1; }`,
        "export VLLM_API_KEY",
        `( umask 077 && mkdir -p ${dir} && chmod 700 ${dir} && tmp=$(mktemp ${dir}/.api_key.XXXXXX) && printf '%s\\n' "$VLLM_API_KEY" > "$tmp" && mv -f "$tmp" ${shq(file)} )`,
    ];
}

/** ARGV with stdin from /dev/null and the lock's descriptor closed, for a daemonising start (`ray start`). */
export function withoutLock(argv: readonly string[]): string {
    return `${argvLine(argv)} < /dev/null ${LOCK_FD}>&-`;
}

/** What a launch that keeps the running process prints (keepIfSame); `spark-vllm diff` finds the launches by it. */
export const KEPT = "already runs as this launch declares it; kept";

/**
 * Idempotent by content (issue 14): bash lines that end the launch with success, keeping what runs, when the record
 * of the running launch is byte for byte the one this launch would write, its process runs (and, with healthUrl,
 * answers 200), and the secret it was started with is the one on stdin now. Otherwise the launch goes on and
 * replaces it. `create` runs again on an update (a new SSH key or connection, @pulumi/command v1.2.1
 * commandController.go Update) or a retry: an identical server is not restarted for that.
 */
export function keepIfSame(record: LaunchRecord, opts: { dir?: string; secret?: { variable: string; file: string }; running: string }): string[] {
    const dir = opts.dir ?? RECORDS_DIR;
    const file = shq(`${dir}/${record.name}.json`);
    const checks = [
        `[ -f ${file} ]`,
        `[ "$(cat ${file})" = ${shq(JSON.stringify(record))} ]`,
        `[ ! -f ${shq(`${dir}/${record.name}.failed`)} ]`,
        `{ ${opts.running}; }`,
        ...(opts.secret ? [`[ "$(cat ${shq(opts.secret.file)} 2>/dev/null)" = "$${opts.secret.variable}" ]`] : []),
        ...(record.healthUrl ? [`python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' ${shq(record.healthUrl)} >/dev/null 2>&1`] : []),
    ];
    return [`if ${checks.join(" && ")}; then echo ${shq(`spark-vllm: ${record.name} ${KEPT}`)}; exit 0; fi`];
}

/** Shell test: the process a "PID STARTTIME" file names still runs, not a zombie (as probes.py process_state). */
export function pidFileRunning(pidFile: string): string {
    const pf = shq(pidFile);
    // After the last ")": field 3, the state (a zombie has exited), then field 22, the start time (proc(5)).
    return `read -r kpid kstarted 2>/dev/null < ${pf} && [ -n "$kstarted" ] && kstat=$(sed 's/.*) //' /proc/"$kpid"/stat 2>/dev/null) && [ "\${kstat%% *}" != Z ] && [ "$(echo "$kstat" | cut -d' ' -f20)" = "$kstarted" ]`;
}

/** Shell test: a process with this command name runs (/proc/PID/comm; Ray's daemons). */
export function commRunning(name: string): string {
    return `grep -qsx ${shq(name)} /proc/[0-9]*/comm`;
}

/** The variable ncclGidExec sets (NCCL_PARAM(IbGidIndex, "IB_GID_INDEX", -1), NVIDIA/nccl v2.28.9-1 src/transport/net_ib.cc). */
export const NCCL_GID_VARIABLE = "NCCL_IB_GID_INDEX";

/**
 * `python3 -c GID_EXEC PROGRAM PIN ARGS ARGV…`: reads the helper program once, and only when its sha256 is the one pinned
 * in the container (PIN, as the supervisor's VERIFIED_RUN, components/plan/verifiedRun.ts; issue 30) runs those bytes as a
 * module (not `__main__`: no subcommand runs) and calls its nccl_gid_exec (spark_vllm/gid.py), which sets
 * NCCL_IB_GID_INDEX from this host's sysfs and execs ARGV. A mismatch or an unreadable file exits 97, naming why.
 */
export const GID_EXEC = [
    `import hashlib, json, sys`,
    `path, pin = sys.argv[1], sys.argv[2]`,
    `try:`,
    `    src, want = open(path, "rb").read(), open(pin).read().strip()`,
    `except OSError as e:`,
    `    sys.stderr.write("spark-vllm: cannot read %s (%s): install the helper program again (spark-vllm status prints the command)\\n" % (e.filename, e.strerror)); sys.exit(97)`,
    `if hashlib.sha256(src).hexdigest() != want:`,
    `    sys.stderr.write("spark-vllm: refusing to run %s: its sha256 is not the one pinned in %s; it was changed on the host: check who can write it, then install it again (spark-vllm status prints the command)\\n" % (path, pin)); sys.exit(97)`,
    `tools = {"__name__": "spark_vllm_tools", "__file__": path, "__builtins__": __builtins__}`,
    `exec(compile(src, path, "exec"), tools)`,
    `tools["nccl_gid_exec"](json.loads(sys.argv[3]), sys.argv[4:])`,
].join("\n");

/**
 * ARGV run with NCCL_IB_GID_INDEX = the index of HOST's own RoCE v2 GID that carries its fabric address on its HCAs,
 * read from that host's sysfs each time it starts: a launch, or the supervisor's relaunch from the record after a
 * reboot (the table moves when the interfaces change, so no value is fixed in the container). spark_vllm/gid.py says
 * what NCCL does without it, why it is set, and why it is left to NCCL when the twin HCAs' indexes differ. The variable
 * is exec'd into ARGV's own process, so a pid file's pid and start time are ARGV's. ARGV as is when HOST has no HCA
 * (NCCL over sockets).
 * @param toolsFile the helper program's path (toolsPath(spec)).
 * @param pin the file holding its pinned sha256; default TOOLS_PIN_FILE, the container's.
 */
export function ncclGidExec(toolsFile: string, host: HostSpec, argv: string[], pin: string = TOOLS_PIN_FILE): string[] {
    if (host.fabric.hcas.length === 0) return argv;
    return ["python3", "-c", GID_EXEC, toolsFile, pin, JSON.stringify({ address: host.fabric.address, hcas: host.fabric.hcas }), ...argv];
}
