// Issue 30: the helper program in logDir is run as container root (the supervisor, `spark-vllm status`) and as the
// SSH user only when its sha256 is the expected one. Pure: Python and shell text as data. No Pulumi.
import * as crypto from "crypto";
import { shq } from "./scripts";

/** sha256 (hex) of the helper program the plan places. */
export function helperDigest(content: string): string {
    return crypto.createHash("sha256").update(content, "utf8").digest("hex");
}

/**
 * Inside every vLLM container (its own file system, not a mount, so not in logDir): the sha256 of the helper program
 * the last install put in logDir, which the supervisor's entrypoint requires. Root's, 0600 in a 0700 directory.
 */
export const TOOLS_PIN_FILE = "/var/lib/spark-vllm/tools.sha256";

/**
 * `python3 -c VERIFIED_RUN PATH WANT [ARGS…]` reads the program at PATH once, hashes those bytes and, when they match,
 * runs the same bytes (exec of the compiled text, `__name__ == "__main__"`, sys.argv as `python3 PATH ARGS…` would
 * set it), so a program swapped between the check and the run is never run. Without ARGS it only checks. A mismatch
 * prints why on stderr and exits 97 without running anything.
 *
 * WANT is the sha256 itself (`spark-vllm status`: the plan's), or the absolute path of a pin file holding it (the
 * container's entrypoint: TOOLS_PIN_FILE). A missing pin file is written with this program's digest (0600, through
 * a rename) and the program trusted: the container's first start, in the `pulumi up` that checked logDir and its
 * parents and then installed the program (hostCommands.ts toolsInstall); every later install rewrites the pin (pinTools).
 * The umask is left alone: it is the supervisor's, which its relaunched processes inherit.
 */
export const VERIFIED_RUN = [
    `import hashlib, os, sys`,
    `path, want = sys.argv[1], sys.argv[2]`,
    `try:`,
    `    src = open(path, "rb").read()`,
    `except OSError as e:`,
    `    sys.stderr.write("spark-vllm: cannot read the helper program %s (%s): install it again (spark-vllm status prints the command)\\n" % (path, e.strerror)); sys.exit(97)`,
    `got = hashlib.sha256(src).hexdigest()`,
    `whose = "the helper program this spark-vllm places"`,
    `if want.startswith("/"):`,
    `    pin, whose = want, "the one the last install pinned in " + want`,
    `    try:`,
    `        want = open(pin).read().strip()`,
    `    except FileNotFoundError:`,
    `        os.makedirs(os.path.dirname(pin), 0o700, exist_ok=True)`,
    `        fd = os.open(pin + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)`,
    `        os.write(fd, (got + "\\n").encode()); os.close(fd); os.replace(pin + ".tmp", pin)`,
    `        want = got`,
    `if got != want:`,
    `    sys.stderr.write("spark-vllm: refusing to run %s: its sha256 is %s, not %s, %s; ` +
        `it was changed on the host, or the stack was deployed by another spark-vllm version: check who can write it, then install it again (spark-vllm status prints the command)\\n" % (path, got, want, whose)); sys.exit(97)`,
    `if len(sys.argv) > 3:`,
    `    sys.argv = [path] + sys.argv[3:]`,
    `    exec(compile(src, path, "exec"), {"__name__": "__main__", "__file__": path, "__builtins__": __builtins__})`,
].join("\n");

/** The argv that runs the helper program at PATH with ARGS only if its sha256 is WANT (a digest, or a pin file's path). */
export function verifiedTools(path: string, want: string, args: readonly string[]): string[] {
    return ["python3", "-c", VERIFIED_RUN, path, want, ...args];
}

/** A tar stream of TOOLS_PIN_FILE (0600, in a 0700 directory) holding the sha256 given as argv[1], on stdout. */
const PIN_TAR = [
    `import io, sys, tarfile, time`,
    `data = (sys.argv[1] + "\\n").encode()`,
    `d, f = tarfile.TarInfo(sys.argv[2].strip("/").rsplit("/", 1)[0]), tarfile.TarInfo(sys.argv[2].strip("/"))`,
    `d.type, d.mode, f.mode, f.size = tarfile.DIRTYPE, 0o700, 0o600, len(data)`,
    `d.mtime = f.mtime = int(time.time())`,
    `t = tarfile.open(fileobj=sys.stdout.buffer, mode="w|")`,
    `t.addfile(d); t.addfile(f, io.BytesIO(data)); t.close()`,
].join("\n");

/**
 * Bash lines for the tools install, once the program is in place: when CONTAINER exists (running or stopped), its pin
 * becomes the sha256 in the shell variable SUM (the installed bytes'), so the supervisor runs the new program and
 * nothing else. `docker cp` writes into a
 * running or stopped container, as root (https://docs.docker.com/reference/cli/docker/container/cp/: "The CONTAINER
 * can be a running or stopped container", "files copied to a container are created with UID:GID of the root user");
 * `-` extracts a tar stream from stdin. No container yet: its first start pins the program (VERIFIED_RUN).
 */
export function pinTools(container: string, sum: string): string[] {
    return [
        `if docker inspect --type container ${shq(container)} >/dev/null 2>&1; then`,
        `  pinned=$(python3 -c ${shq(PIN_TAR)} "$${sum}" ${shq(TOOLS_PIN_FILE)} | docker cp - ${shq(`${container}:/`)} 2>&1) || ` +
            `{ echo "$pinned" >&2; echo ${shq(`spark-vllm: could not record the new helper program's sha256 in container ${container} (${TOOLS_PIN_FILE}); its supervisor would refuse the program: remove the container (docker rm -f ${container}) and run pulumi up --refresh`)} >&2; exit 1; }`,
        `fi`,
    ];
}
