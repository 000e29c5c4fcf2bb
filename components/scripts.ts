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

/**
 * Starts ARGV fully detached (own session, all three streams redirected) with its output
 * in LOG and its pid in PIDFILE; the previous log is kept as LOG.prev.
 */
export function detachedLaunch(argv: readonly string[], log: string, pidFile: string): string[] {
    return [
        `if [ -f ${shq(log)} ]; then mv -f ${shq(log)} ${shq(`${log}.prev`)}; fi`,
        `setsid ${argvLine(argv)} > ${shq(log)} 2>&1 < /dev/null &`,
        `echo $! > ${shq(pidFile)}`,
    ];
}

/** Stops the process in PIDFILE: TERM, up to GRACE seconds, then KILL. Succeeds when nothing runs. */
export function stopByPidFile(pidFile: string, graceSeconds: number): string[] {
    const pf = shq(pidFile);
    return [
        `if [ -f ${pf} ]; then`,
        `  pid=$(cat ${pf})`,
        `  if kill -0 "$pid" 2>/dev/null; then`,
        `    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true`,
        `    i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt ${graceSeconds} ]; do sleep 1; i=$((i+1)); done`,
        `    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true`,
        `  fi`,
        `  rm -f ${pf}`,
        `fi`,
    ];
}
