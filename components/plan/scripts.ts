// Shell generation. Every value that reaches a shell goes through `shq`;
// scripts are assembled from argv arrays, never by pasting user input.

const SAFE_WORD = /^[A-Za-z0-9_\-.,/:=@%+]+$/;

/** POSIX shell quoting: the one quoting helper. Leaves plainly safe words bare for readable diffs. */
export function shq(value: string): string {
    if (SAFE_WORD.test(value)) return value;
    return `'${value.replace(/'/g, `'"'"'`)}'`;
}

/** One shell command line from an argv. */
export function argvLine(argv: readonly string[]): string {
    return argv.map(shq).join(" ");
}

/** A script of lines run by `sh -c` on the host or in a container. */
export function script(lines: readonly string[]): string {
    return lines.join("\n");
}

/** `docker exec [-i] CONTAINER bash -c SCRIPT` as one line. */
export function dockerExecScript(container: string, body: string, opts: { stdin?: boolean } = {}): string {
    return dockerExec(container, ["bash", "-c", body], opts);
}

/** `docker exec [-i] CONTAINER ARGV…` as one line. */
export function dockerExec(container: string, argv: readonly string[], opts: { stdin?: boolean } = {}): string {
    return argvLine(["docker", "exec", ...(opts.stdin ? ["-i"] : []), container, ...argv]);
}

/** Prefixes a command with `timeout SECONDS`: customTimeouts never kills a hung remote command. */
export function withTimeout(seconds: number, command: string): string {
    return `timeout ${Math.ceil(seconds)} ${command}`;
}

/** Runs `command` only when CONTAINER is running, so deletes succeed after the container is gone. */
export function ifContainerRunning(container: string, command: string): string {
    return `if [ "$(docker inspect -f '{{.State.Running}}' ${shq(container)} 2>/dev/null)" = true ]; then ${command}; fi`;
}

// A pid alone does not name a process: pids are reused, and the pid file sits in logDir, which outlives the
// container (a replaced container numbers its processes from 1 again). The file therefore holds the pid and the
// process's start time, field 22 of /proc/PID/stat (proc(5): "starttime", clock ticks since boot; unchanged by
// exec). Fields are read after the last ")" because field 2, the command name, may contain spaces and ")".
const START_TIME = (pid: string) => `sed 's/.*) //' /proc/${pid}/stat 2>/dev/null | cut -d' ' -f20`;

/**
 * Starts ARGV fully detached (own session, all three streams redirected) with its output
 * in LOG and its pid and start time in PIDFILE; the previous log is kept as LOG.prev.
 */
export function detachedLaunch(argv: readonly string[], log: string, pidFile: string): string[] {
    return [
        `if [ -f ${shq(log)} ]; then mv -f ${shq(log)} ${shq(`${log}.prev`)}; fi`,
        // fd 9 closed: the launch holds the records' lock on it (components/plan/launches.ts LOCK_FD), the process must not.
        `setsid ${argvLine(argv)} > ${shq(log)} 2>&1 < /dev/null 9>&- &`,
        `echo "$! $(${START_TIME("$!")})" > ${shq(pidFile)}`,
    ];
}

/** The pid in PIDFILE, for messages (the file also holds the start time). */
export function pidFromFile(pidFile: string): string {
    return `$(cut -d' ' -f1 ${shq(pidFile)})`;
}

/**
 * Stops the process PIDFILE names: TERM to its session, up to GRACE seconds, then KILL. Only when the pid still
 * is the process that was started (same start time): a stale file never signals an unrelated process. Succeeds when
 * nothing runs.
 */
export function stopByPidFile(pidFile: string, graceSeconds: number): string[] {
    const pf = shq(pidFile);
    return [
        `if [ -f ${pf} ]; then`,
        `  read -r pid started < ${pf} || true`,
        `  case "$pid" in ''|*[!0-9]*) pid= ;; esac`,
        `  if [ -n "$pid" ] && [ -n "$started" ] && [ "$(${START_TIME('"$pid"')})" = "$started" ]; then`,
        `    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true`,
        `    i=0; while [ "$(${START_TIME('"$pid"')})" = "$started" ] && [ $i -lt ${graceSeconds} ]; do sleep 1; i=$((i+1)); done`,
        `    if [ "$(${START_TIME('"$pid"')})" = "$started" ]; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; fi`,
        `  fi`,
        `  rm -f ${pf}`,
        `fi`,
    ];
}
