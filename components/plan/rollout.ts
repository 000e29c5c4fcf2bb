// The rolling update of several replicas (spark-vllm:replicas, components/plan/replicas.ts) as plain data: the commands
// that take one replica out of the front proxy and put it back. Pure: no Pulumi.
//
// A relaunch of replica k waits for its drain: the front proxy on the first host marks it `down` in REPLICAS_FILE and
// reloads, so no new request reaches it, and the drain waits (at most rollout.drainSeconds) until none of the front's
// requests to it is still running. Its memory gates, vLLM, probe and serving proof follow; then its undrain puts it back,
// and only then does replica k+1's drain start (components/plan/resources.ts wires the order).
import { ClusterSpec } from "../spec/spec";
import { CommandPlan, ReplicaRollout } from "./clusterPlan";
import { PROXY_MOUNT, REPLICAS_FILE, proxyDir, replicasFile } from "./proxyPlan";
import { proxyContainerName } from "./naming";
import { argvLine, script, shq, withTimeout } from "./scripts";

/** How long nginx is given to start its new workers after a reload, in tenths of a second. */
const RELOAD_TENTHS = 300;

/**
 * The drain and undrain of each replica, in order. `servers` are the front's upstream servers (`host:port`, replica 1
 * first), as its nginx.conf names them (components/plan/plan.ts).
 */
export function replicaRollouts(spec: ClusterSpec, servers: readonly string[]): ReplicaRollout[] {
    return servers.map((server, i) => ({ drain: drain(spec, servers, i + 1), undrain: undrain(spec, servers, i + 1) }));
}

/**
 * Writes REPLICAS_FILE with replica `drained` down (none: every replica in service), has nginx check the configuration
 * (`nginx -t`: a refused one leaves the running proxy as it was), and reloads it. A reload is nginx's SIGHUP to its
 * master (nginx.org/en/docs/control.html: "changing configuration … starting new worker processes with a new
 * configuration, graceful shutdown of old worker processes"); `docker kill --signal` sends it to the container's main
 * process, nginx itself (proxyContainer's entrypoint, no init). The reload is done once no worker that ran before it is
 * still an active worker: `docker top` lists the container's processes with ps's default columns (PID second), and nginx
 * renames a worker that is shutting down to "nginx: worker process is shutting down" (src/os/unix/ngx_process_cycle.c).
 */
function reloadWith(spec: ClusterSpec, servers: readonly string[], drained: number | undefined): string[] {
    const dir = proxyDir(spec);
    const container = proxyContainerName();
    const fail = (why: string) => `{ echo ${shq(`spark-vllm: ${why}`)} >&2; exit 1; }`;
    const workers = `${argvLine(["docker", "top", container])} 2>/dev/null | awk '/nginx: worker process$/ { printf " %s", $2 }'`;
    return [
        `if [ "$(docker inspect -f '{{.State.Running}}' ${shq(container)} 2>/dev/null)" != true ]; then ${fail(`the endpoint proxy ${container} is not running on ${spec.hosts[0].name}: run pulumi up again to start it`)}; fi`,
        // The file as it was is kept until nginx accepts the new one, and put back if it does not.
        `file=${shq(`${dir}/${REPLICAS_FILE}`)}; prev=$(mktemp ${shq(`${dir}/.${REPLICAS_FILE}.prev.XXXXXX`)}) || exit 1`,
        `cp -p "$file" "$prev" || { rm -f "$prev"; exit 1; }`,
        `tmp=$(mktemp ${shq(`${dir}/.${REPLICAS_FILE}.XXXXXX`)}) || exit 1`,
        `printf '%s' ${shq(replicasFile(servers, drained))} > "$tmp" && chmod 600 "$tmp" && mv -f "$tmp" "$file" || { rm -f "$tmp" "$prev"; exit 1; }`,
        `${argvLine(["docker", "exec", container, "nginx", "-t", "-q", "-c", `${PROXY_MOUNT}/nginx.conf`])} >/dev/null || { mv -f "$prev" "$file"; ${fail("nginx refused the replicas' configuration (above); the proxy serves as before")}; }`,
        `rm -f "$prev"`,
        `old="$(${workers}) "`,
        `${argvLine(["docker", "kill", "--signal", "HUP", container])} >/dev/null || exit 1`,
        "t=0",
        "while :; do",
        `  now=$(${workers}); reloaded=\${now:+1}`,
        `  for p in $now; do case "$old" in *" $p "*) reloaded= ;; esac; done`,
        `  [ -n "$reloaded" ] && break`,
        `  [ $t -ge ${RELOAD_TENTHS} ] && ${fail(`nginx in ${container} started no new workers within ${RELOAD_TENTHS / 10} s of its reload`)}`,
        // GNU sleep takes fractions ("NUMBER need not be an integer", coreutils' sleep(1)).
        "  sleep 0.1; t=$((t+1))",
        "done",
    ];
}

/**
 * The front nginx's own sockets, as the inode numbers of the socket descriptors its processes hold: read inside the
 * proxy container (its own PID namespace: only nginx's processes) as `nobody`, the workers' user (proxyPlan.ts nginxConf
 * `user nobody nogroup`). A process's /proc/PID/fd may be listed by its own user when it is dumpable (proc(5), "ptrace
 * access mode PTRACE_MODE_READ_FSCREDS"), and nginx makes each worker dumpable again after it changes user
 * (src/os/unix/ngx_process_cycle.c ngx_worker_process_init: `prctl(PR_SET_DUMPABLE, 1)`); container root could not
 * (Docker's default capabilities have no CAP_SYS_PTRACE). `ls -l` shows each as `-> socket:[INODE]` (proc(5)). Only
 * processes named nginx are read. The exit status is docker exec's: the script itself always ends with `true`.
 */
const NGINX_SOCKETS = "for p in /proc/[0-9]*; do [ \"$(cat \"$p/comm\" 2>/dev/null)\" = nginx ] && ls -l \"$p/fd\" 2>/dev/null; done; true";

/**
 * Takes replica `k` out of the front proxy, then waits until the front has no request to it still running: nginx keeps
 * no idle connection to an upstream server without `keepalive` (ngx_http_upstream_module `keepalive`: it "activates the
 * cache for connections to upstream servers"), so each established connection from the front nginx to the replica's
 * server is one request in flight. `ss -H -t -n -e state established dst ADDR:PORT` lists every such connection on this
 * host with its socket's inode (`ino:`; iproute2's ss(8), on every host: Debian and Ubuntu install iproute2 by default),
 * and only those whose inode is one of nginx's own sockets (NGINX_SOCKETS) are counted: another local user's
 * connections to the same address no longer hold the drain to its limit (issue 50, finding 5). Chosen over ss's
 * `cgroup` filter (cgroup v2 only: on a cgroup v1 host it matches nothing, and the drain would wait for nothing) and
 * over `ss -p` (it reads the same /proc/PID/fd, which the SSH user may not read for nginx's workers). Should the
 * container not answer, every connection to the server is counted, as before, and the JSON line says so
 * (`counted: "all"`). At most rollout.drainSeconds; requests still running then are cut when the replica stops (the
 * JSON line says how many). Prints one JSON line: replica, server, the host's clock when it was taken out (`drainedAt`,
 * seconds since the epoch) and when its requests had finished (`drainedUntil`), the count, and what was counted.
 */
function drain(spec: ClusterSpec, servers: readonly string[], k: number): CommandPlan {
    const server = servers[k - 1];
    const limit = spec.rollout.drainSeconds;
    const seconds = limit + RELOAD_TENTHS / 10 + 60;
    return {
        create: inShell(seconds, [
            `command -v ss >/dev/null || { echo ${shq(`spark-vllm: ss (iproute2) is not installed on ${spec.hosts[0].name}: the drain cannot see the requests still running; install iproute2`)} >&2; exit 1; }`,
            ...reloadWith(spec, servers, k),
            // In milliseconds (GNU date's %N): whole seconds could give up a second early, as the clock turned.
            "drained_at=$(date +%s.%N); start=$(date +%s%N); none_before=",
            "while :; do",
            `  if fds=$(${argvLine(["docker", "exec", "-u", "nobody", proxyContainerName(), "sh", "-c", NGINX_SOCKETS])}); then counted=nginx; else counted=all; fi`,
            `  sockets=$(printf '%s\\n' "$fds" | sed -n 's/.* socket:\\[\\([0-9]*\\)\\]$/\\1/p')`,
            `  running=$(ss -H -t -n -e state established dst ${shq(server)} | awk -v counted="$counted" -v sockets=" $(echo $sockets) " ` +
                `'counted == "all" { n++; next } { for (i = 1; i <= NF; i++) if ($i ~ /^ino:/ && index(sockets, " " substr($i, 5) " ")) { n++; break } } END { print n + 0 }')`,
            // Done at the second count of none in a row, a second apart: a worker that ran before the reload still
            // passes on, with the old configuration, a request it had already accepted (a reload's "graceful shutdown
            // of old worker processes", nginx.org/en/docs/control.html), and a connection opened between the socket
            // list and ss is not counted; either has reached the replica by the next count. Seen in CI: a single
            // count of none let 2 requests reach a drained replica (tests/e2e/replicas-four.test.ts).
            `  if [ "$running" -eq 0 ]; then [ -n "$none_before" ] && break; none_before=1; else none_before=; fi`,
            `  [ $(( ($(date +%s%N) - start) / 1000000 )) -ge ${limit * 1000} ] && break`,
            "  sleep 1",
            "done",
            `printf '{"replica": ${k}, "server": "%s", "drainedAt": %s, "drainedUntil": %s, "stillRunning": %s, "counted": "%s"}\\n' ${shq(server)} "$drained_at" "$(date +%s.%N)" "$running" "$counted"`,
        ]),
        timeoutSeconds: seconds,
    };
}

/** Puts replica `k` back into the front proxy (every replica in service). Prints one JSON line: replica, server, `undrainedAt`. */
function undrain(spec: ClusterSpec, servers: readonly string[], k: number): CommandPlan {
    return {
        create: inShell(RELOAD_TENTHS / 10 + 60, [
            ...reloadWith(spec, servers, undefined),
            `printf '{"replica": ${k}, "server": "%s", "undrainedAt": %s}\\n' ${shq(servers[k - 1])} "$(date +%s.%N)"`,
        ]),
        timeoutSeconds: RELOAD_TENTHS / 10 + 60,
    };
}

/** The script in one `sh -c`, bounded by `timeout` (customTimeouts never kills a hung remote command). */
const inShell = (seconds: number, lines: string[]) => withTimeout(seconds, argvLine(["sh", "-c", script(lines)]));
