// What the real providers do, performed for real over the transports they use:
// docker CLI with DOCKER_HOST=ssh://… for images and containers, ssh for remote commands.
import { spawn } from "child_process";
import * as crypto from "crypto";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { shq } from "../../components/plan/scripts";
import { LiveContainer, LiveImage, repoDigestOf } from "./refresh";

export interface Transport {
    /** Environment for the local docker client and its ssh (PATH, ssh config for docker's ssh); remote commands take only SSH_AUTH_SOCK from it. */
    env: NodeJS.ProcessEnv;
    /** The one place the test bed lowers memlock: the machine's hard limit is below "unlimited". */
    memlockBytes?: number;
}

export interface Result {
    code: number;
    stdout: string;
    stderr: string;
}

/** Calls `onLine` with each complete line of the chunks it is fed; `flush` passes on an unterminated last line. */
function lineSplitter(onLine: (line: string) => void): { feed(chunk: string): void; flush(): void } {
    let partial = "";
    return {
        feed(chunk) {
            const lines = (partial + chunk).split("\n");
            partial = lines.pop()!;
            lines.forEach(onLine);
        },
        flush() {
            if (partial) onLine(partial);
            partial = "";
        },
    };
}

export function exec(argv: string[], opts: { env?: NodeJS.ProcessEnv; stdin?: string; timeoutMs?: number; onLine?: (line: string) => void } = {}): Promise<Result> {
    return new Promise(resolve => {
        const child = spawn(argv[0], argv.slice(1), { env: opts.env ?? process.env, stdio: ["pipe", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        const out = lineSplitter(opts.onLine ?? (() => undefined));
        const err = lineSplitter(opts.onLine ?? (() => undefined));
        child.stdout.on("data", d => { stdout += d; out.feed(String(d)); });
        child.stderr.on("data", d => { stderr += d; err.feed(String(d)); });
        const timer = opts.timeoutMs ? setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs) : undefined;
        child.on("error", e => resolve({ code: 127, stdout, stderr: stderr + String(e) }));
        child.on("close", code => {
            if (timer) clearTimeout(timer);
            out.flush();
            err.flush();
            resolve({ code: code ?? 128, stdout, stderr });
        });
        child.stdin.on("error", () => {});
        child.stdin.end(opts.stdin ?? "");
    });
}

// ---------------------------------------------------------------- remote.Command

export interface Connection {
    host: string;
    user?: string;
    port?: number;
    hostKey?: string;
    /** The key's text (PEM or OpenSSH), as the provider's `privateKey` input. */
    privateKey?: string;
    /** The provider's `agentSocketPath`; default SSH_AUTH_SOCK. */
    agentSocketPath?: string;
    password?: string;
    dialErrorLimit?: number;
    perDialTimeout?: number;
}

/**
 * Where this process's scratch files go (known_hosts for pinned keys, keys, ssh wrappers): the folder named by
 * ENGINE_SCRATCH_ENV, which the parent that spawned this engine owns and removes when the engine ends, however it ends
 * (an aborted `up` is stopped with SIGTERM, and Node runs no "exit" handler on a signal); without it, a temp folder
 * removed on a normal exit.
 */
export const ENGINE_SCRATCH_ENV = "SPARK_VLLM_ENGINE_SCRATCH";
let scratchDir: string | undefined;
function scratch(name: string, content: string, mode = 0o644): string {
    if (!scratchDir) {
        const given = process.env[ENGINE_SCRATCH_ENV];
        if (given) {
            fs.mkdirSync(given, { recursive: true, mode: 0o700 });
            scratchDir = given;
        } else {
            const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-engine-"));
            process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
            scratchDir = dir;
        }
    }
    const file = path.join(scratchDir, crypto.createHash("sha256").update(content).digest("hex").slice(0, 16), name);
    if (!fs.existsSync(file)) {
        fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
        fs.writeFileSync(file, content, { mode });
    }
    return file;
}

/**
 * Host key checking as @pulumi/command v1.2.1 does it (provider/pkg/provider/remote/connection.go SSHConfig): without
 * `hostKey`, ssh.InsecureIgnoreHostKey() (any key, nothing remembered); with it, ssh.FixedHostKey(key) and
 * HostKeyAlgorithms = [its type]. Here with OpenSSH: no known_hosts but a file holding only that key, strictly.
 */
function hostKeyOptions(conn: Connection, file: (name: string, content: string) => string): string[] {
    if (conn.hostKey === undefined)
        return ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "GlobalKnownHostsFile=/dev/null"];
    const knownHosts = file("known_hosts", `* ${conn.hostKey}\n`);
    return ["-o", "StrictHostKeyChecking=yes", "-o", `UserKnownHostsFile=${knownHosts}`, "-o", "GlobalKnownHostsFile=/dev/null",
        "-o", `HostKeyAlgorithms=${conn.hostKey.split(" ")[0]}`];
}

/** The OpenSSH client itself, never a wrapper on the caller's PATH that adds a config (the sim's client-bin does). */
export const OPENSSH = "/usr/bin/ssh";

/**
 * The key exchanges Go's client offers, in its order (golang.org/x/crypto ssh/common.go defaultKexAlgos, v0.58.0; with
 * curve25519-sha256@libssh.org, which it adds beside curve25519-sha256), less mlkem768x25519-sha256: this OpenSSH
 * (Debian 12, 9.2p1) does not know it, nor do the sshds it would meet first (9.2p1 here, Ubuntu 24.04's 9.6p1 on
 * DGX OS), which only offer it from 9.9. Go's client never offers OpenSSH's default sntrup761x25519-sha512, so
 * against those sshds it agrees on curve25519-sha256; OpenSSH left to itself would pick sntrup761, about ten times the
 * client's CPU per connection (measured here: 0.108 s against 0.012 s).
 */
export const GO_CLIENT_KEX = ["curve25519-sha256", "curve25519-sha256@libssh.org", "ecdh-sha2-nistp256", "ecdh-sha2-nistp384",
    "ecdh-sha2-nistp521", "diffie-hellman-group14-sha256", "diffie-hellman-group14-sha1"];

/**
 * The `ssh` argv that behaves as @pulumi/command v1.2.1's Go client (golang.org/x/crypto/ssh, connection.go SSHConfig):
 * - no ssh_config at all (`-F none`: Go's client reads none), so no Host aliases, no User/Port/IdentityFile from it;
 * - authentication only from the connection: its `privateKey` (ssh.PublicKeys), then its `password`, then the agent at
 *   `agentSocketPath` or SSH_AUTH_SOCK (ssh.PublicKeysCallback(agent.Signers)); never ~/.ssh/id_*: OpenSSH would add
 *   those when no identity is given, so an identity is always given (the key, or a path that does not exist, which
 *   OpenSSH skips) and IdentityAgent names the agent or `none`. With both a key and an agent this is the first of two
 *   attempts (remoteSshAttempts): the key alone;
 * - host keys per hostKeyOptions; ports and timeouts from the connection (perDialTimeout, default 15 s); the key
 *   exchanges Go's client offers (GO_CLIENT_KEX);
 * - nothing of the client's own on stderr (Go's client prints nothing there).
 * A password cannot be given to OpenSSH in batch mode: the engine refuses it rather than pretend.
 */
export function remoteSshArgv(conn: Connection, env: NodeJS.ProcessEnv, file: (name: string, content: string, mode?: number) => string = scratch): string[] {
    return remoteSshAttempts(conn, env, file)[0];
}

/**
 * Every argv to try, in order. Go's client offers the connection's key before the agent's keys (connection.go appends
 * ssh.PublicKeys(signer) to config.Auth before the agent's callback); OpenSSH offers agent keys before a key that is
 * only in a file (sshconnect2.c pubkey_prepare: "agent keys that are found in the config file", "other agent keys",
 * then "keys that are only listed in the config file"). So with both, the engine tries the key alone, and only when
 * the host refuses it (isAuthRefused) the agent alone: the key that logs in is the one Go's client would use, at the
 * cost of one more connection when the key is refused.
 */
export function remoteSshAttempts(conn: Connection, env: NodeJS.ProcessEnv, file: (name: string, content: string, mode?: number) => string = scratch): string[][] {
    if (conn.password !== undefined) throw new Error("the test engine cannot log in with a password (OpenSSH in batch mode); give a key or an agent");
    const noIdentity = path.join(path.dirname(file("none", "")), "no-identity");
    const key = conn.privateKey !== undefined ? file("id", conn.privateKey.endsWith("\n") ? conn.privateKey : `${conn.privateKey}\n`, 0o600) : undefined;
    const agent = conn.agentSocketPath ?? env.SSH_AUTH_SOCK;
    const argv = (identity: string, identityAgent: string | undefined) =>
        // LogLevel=ERROR: OpenSSH's own notices ("Warning: Permanently added … to the list of known hosts.") would land in
        // the command's stderr, where Go's client writes nothing; errors (a host key mismatch) still show.
        [OPENSSH, "-F", "none", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", `ConnectTimeout=${conn.perDialTimeout ?? 15}`,
            "-o", `KexAlgorithms=${GO_CLIENT_KEX.join(",")}`,
            "-o", `IdentityFile=${identity}`, "-o", "IdentitiesOnly=no", "-o", `IdentityAgent=${identityAgent ?? "none"}`,
            ...hostKeyOptions(conn, file),
            "-p", String(conn.port ?? 22), "-l", conn.user ?? "root", "--", conn.host];
    if (key === undefined) return [argv(noIdentity, agent)];
    return agent === undefined ? [argv(key, undefined)] : [argv(key, undefined), argv(noIdentity, agent)];
}

/** The host refused every key offered, before any session opened (sshconnect2.c: `fatal("%s@%s: Permission denied (%s).")`). */
export const isAuthRefused = (r: Result) => r.code === 255 && /@\S+: Permission denied \(/.test(r.stderr);

/** The outputs @pulumi/command v1.2.1 puts back into the environment of an update's and a delete's session (util.PulumiCommandStdout/Stderr). */
export const PREVIOUS_OUTPUT_ENV = { stdout: "PULUMI_COMMAND_STDOUT", stderr: "PULUMI_COMMAND_STDERR" } as const;

/**
 * The provider's warning when the sshd refuses one of them (pulumi-command v1.2.1 provider/pkg/provider/remote/
 * commandOutputs.go logAndWrapSetenvErr, severity diag.Warning for these two; the command still runs). The Go raw string
 * keeps the source's line breaks and tab indentation.
 */
export const setenvWarning = (key: string) =>
    `Unable to set '${key}'. This only works if your SSH server is configured to accept\n\tthese variables via AcceptEnv. ` +
    `Alternatively, if a Bash-like shell runs the command on the remote host, you could\n\tprefix the command itself with the variables in the form 'VAR=value command'`;

/** A value as one OpenSSH config token: double-quoted, with `\\` and `"` escaped (misc.c argv_split). */
export const configQuoted = (value: string) => `"${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;

/**
 * Whether the host's sshd takes the previous-output variables. Go's session.Setenv asks for a reply (RFC 4254 6.4,
 * want reply) and fails when refused; OpenSSH's SetEnv asks for none, so the engine asks the sshd once per host
 * instead: sent, is it there? A default sshd_config accepts only `LANG LC_*` (Debian's AcceptEnv).
 */
const acceptsPreviousOutput = new Map<string, Promise<boolean>>();
function sshdAccepts(t: Transport, conn: Connection): Promise<boolean> {
    const key = `${conn.user ?? "root"}@${conn.host}:${conn.port ?? 22}`;
    if (!acceptsPreviousOutput.has(key)) {
        acceptsPreviousOutput.set(key, sshSession(t, conn, ["-o", `SetEnv=${PREVIOUS_OUTPUT_ENV.stdout}=probe`], `printenv ${PREVIOUS_OUTPUT_ENV.stdout}`, {})
            .then(r => r.stdout.trim() === "probe"));
    }
    return acceptsPreviousOutput.get(key)!;
}

/**
 * Runs a command as @pulumi/command's remote.Command does: one SSH session over the Go client's rules (remoteSshArgv),
 * the text as the session command, `environment` sent as SSH SetEnv (dropped by a default sshd, as for real), stdin
 * piped. On update and delete, `previous` is the resource's last stdout and stderr: each non-empty one is offered as
 * PULUMI_COMMAND_STDOUT/STDERR (addPreviousOutputInEnv defaults to true), and a refusal is the provider's warning, in
 * `warnings`. Fails as the provider fails, with the command text and both streams. `onLine` sees each line of stdout
 * and stderr while the command runs, as the provider logs them to the engine (pulumi/pulumi-command
 * provider/pkg/provider/remote/commandOutputs.go: `util.CopyOutput(ctx, r, …, diag.Info)` during `session.Run`).
 */
export async function runRemote(t: Transport, conn: Connection, command: string, stdin?: string, environment?: Record<string, string>,
    onLine?: (line: string) => void, previous?: { stdout?: string; stderr?: string }): Promise<Result & { warnings: string[] }> {
    const setEnv = Object.entries(environment ?? {}).flatMap(([k, v]) => ["-o", `SetEnv=${k}=${v}`]);
    const offered = (["stdout", "stderr"] as const).filter(k => previous?.[k]).map(k => [PREVIOUS_OUTPUT_ENV[k], previous![k]!] as const);
    const warnings: string[] = [];
    if (offered.length) {
        if (await sshdAccepts(t, conn)) setEnv.push(...offered.flatMap(([k, v]) => ["-o", `SetEnv=${k}=${configQuoted(v)}`]));
        else warnings.push(...offered.map(([k]) => setenvWarning(k)));
    }
    const r = await sshSession(t, conn, setEnv, command, { stdin, onLine });
    return { ...r, warnings };
}

/** One session with `options` before the host, over the first attempt the host accepts (remoteSshAttempts). */
async function sshSession(t: Transport, conn: Connection, options: string[], command: string,
    io: { stdin?: string; onLine?: (line: string) => void }): Promise<Result> {
    const attempts = remoteSshAttempts(conn, t.env);
    for (const [i, [ssh, ...args]] of attempts.entries()) {
        const at = args.indexOf("--");
        const last = i === attempts.length - 1;
        // A refused attempt prints only OpenSSH's refusal, which the next attempt makes moot: not shown as the command's.
        const onLine = last || !io.onLine ? io.onLine : (line: string) => { if (!/Permission denied \(/.test(line)) io.onLine!(line); };
        const r = await exec([ssh, ...args.slice(0, at), ...options, ...args.slice(at), command], { env: t.env, stdin: io.stdin, onLine });
        if (last || !isAuthRefused(r)) return r;
    }
    throw new Error("unreachable: remoteSshAttempts returns at least one argv");
}

/**
 * The provider's error when the host's key is not the pinned one: dialWithRetry gives up after dialErrorLimit + 1 dials
 * with "after %d failed attempts: %w" (connection.go), around golang.org/x/crypto v0.48.0 ssh/client.go's
 * "ssh: handshake failed: %w" and FixedHostKey's "ssh: host key mismatch". No command ran: the session never opened.
 */
export function dialError(conn: Connection, r: Result): Error | undefined {
    if (conn.hostKey === undefined || r.code !== 255 || !/Host key verification failed\./.test(r.stderr)) return undefined;
    return new Error(`after ${conn.dialErrorLimit ?? 10} failed attempts: ssh: handshake failed: ssh: host key mismatch`);
}

export function commandError(command: string, r: Result): Error {
    return new Error(`Process exited with status ${r.code}: running ${JSON.stringify(command)}:\n${r.stdout}${r.stderr}`);
}

// ---------------------------------------------------------------- docker

/** A Docker provider: its `host` (ssh://…) and its `sshOpts`. */
export interface DockerTarget {
    host: string;
    sshOpts?: string[];
}

/**
 * The docker CLI's connhelper is the provider's (docker/cli v28.5.2 cli/connhelper/connhelper.go: the provider calls
 * GetConnectionHelperWithSSHOpts(host, sshOpts), which runs `ssh -l USER -p PORT <sshOpts> -T -- HOST docker system
 * dial-stdio`), but the CLI has no flag for sshOpts (GetConnectionHelper(host), cli/context/docker/load.go). So an
 * `ssh` first on PATH adds them, each as one argument, before the CLI's own: for `-o` options the first value wins,
 * so its added `-o ConnectTimeout=30` (addSSHTimeout, only without one of ours) changes nothing.
 */
function dockerEnv(t: Transport, target: DockerTarget): NodeJS.ProcessEnv {
    const env = { ...t.env, DOCKER_HOST: target.host };
    if (!target.sshOpts?.length) return env;
    const dirs = (t.env.PATH ?? "").split(":").filter(Boolean);
    const ssh = dirs.map(d => path.join(d, "ssh")).find(f => fs.existsSync(f)) ?? "/usr/bin/ssh";
    const wrapper = scratch("ssh", `#!/bin/sh\nexec ${[ssh, ...target.sshOpts].map(shq).join(" ")} "$@"\n`, 0o755);
    return { ...env, PATH: [path.dirname(wrapper), ...dirs].join(":") };
}

function docker(t: Transport, target: DockerTarget, args: string[], timeoutMs = 600_000): Promise<Result> {
    return exec(["docker", ...args], { env: dockerEnv(t, target), timeoutMs });
}

async function mustDocker(t: Transport, target: DockerTarget, args: string[]): Promise<string> {
    const r = await docker(t, target, args);
    if (r.code !== 0) throw new Error(`docker ${args.join(" ")} on ${target.host} failed (exit ${r.code}): ${r.stderr.trim() || r.stdout.trim()}`);
    return r.stdout;
}

/**
 * docker.RemoteImage create: pull by reference for the platform unless the host already holds an
 * image by that name (as the provider does: pulumi-docker#342, terraform-provider-docker#172), so
 * a moved tag leaves a stale image on a host. Outputs repoDigest and imageId.
 */
export async function pullImage(t: Transport, target: DockerTarget, inputs: Record<string, any>): Promise<Record<string, unknown>> {
    const name: string = inputs.name;
    if ((await docker(t, target, ["image", "inspect", name])).code !== 0)
        await mustDocker(t, target, ["pull", ...(inputs.platform ? ["--platform", inputs.platform] : []), "-q", name]);
    const inspect = JSON.parse(await mustDocker(t, target, ["image", "inspect", name]))[0];
    // Create ends with the provider's Read (resourceDockerImageCreate → resourceDockerImageRead): refresh.ts repoDigestOf.
    return { ...inputs, repoDigest: repoDigestOf(name, inspect.RepoDigests ?? []), imageId: inspect.Id };
}

export async function removeImage(t: Transport, target: DockerTarget, state: Record<string, any>): Promise<void> {
    if (state.keepLocally) return;
    await docker(t, target, ["rmi", state.repoDigest ?? state.name]);
}

/** docker.Container create: the same `docker run` the provider's API call amounts to. */
export function runArgs(t: Transport, inputs: Record<string, any>): string[] {
    const args = ["run", "-d", "--name", inputs.name];
    if (inputs.networkMode) args.push("--network", inputs.networkMode);
    if (inputs.ipcMode) args.push("--ipc", inputs.ipcMode);
    if (inputs.gpus) args.push("--gpus", inputs.gpus);
    if (inputs.init) args.push("--init");
    if (inputs.shmSize) args.push("--shm-size", `${inputs.shmSize}m`);
    if (inputs.restart) args.push("--restart", inputs.restart);
    if (inputs.privileged) args.push("--privileged");
    for (const u of inputs.ulimits ?? []) {
        const lower = (n: number) => (u.name === "memlock" && t.memlockBytes !== undefined && (n < 0 || n > t.memlockBytes) ? t.memlockBytes : n);
        args.push("--ulimit", `${u.name}=${lower(u.soft)}:${lower(u.hard)}`);
    }
    for (const c of inputs.capabilities?.adds ?? []) args.push("--cap-add", c);
    for (const d of inputs.devices ?? []) args.push("--device", `${d.hostPath}:${d.containerPath ?? d.hostPath}`);
    for (const m of inputs.mounts ?? []) args.push("--mount", `type=${m.type},source=${m.source},target=${m.target}${m.readOnly ? ",readonly" : ""}`);
    for (const l of inputs.labels ?? []) args.push("--label", `${l.label}=${l.value}`);
    for (const e of inputs.envs ?? []) args.push("--env", e);
    if (inputs.entrypoints?.length) args.push("--entrypoint", inputs.entrypoints[0]);
    args.push(inputs.image, ...(inputs.entrypoints?.slice(1) ?? []), ...(inputs.command ?? []));
    return args;
}

export async function createContainer(t: Transport, target: DockerTarget, inputs: Record<string, any>): Promise<string> {
    const id = (await mustDocker(t, target, runArgs(t, inputs))).trim();
    if (inputs.mustRun) {
        const running = (await mustDocker(t, target, ["inspect", "-f", "{{.State.Running}}", id])).trim();
        if (running !== "true") throw new Error(`container ${inputs.name} on ${target.host} exited right after start`);
    }
    return id;
}

/**
 * docker.Container update (terraform-provider-docker v4.5.0 resource_docker_container_funcs.go
 * resourceDockerContainerUpdate), the same container: `must_run` false → true with `start` (default true) starts it
 * (ContainerStart: what a refresh that found it stopped leads to); a change to the restart policy or a resource limit
 * is one ContainerUpdate with the restart policy and the limits; other in-place inputs change only the state.
 * Returns the docker operations run.
 */
export async function updateContainer(t: Transport, target: DockerTarget, id: string, olds: Record<string, any>, news: Record<string, any>): Promise<number> {
    let actions = 0;
    if (olds.mustRun === false && news.mustRun !== false && news.start !== false) {
        await mustDocker(t, target, ["start", id]);
        actions++;
    }
    const limits = ["restart", "maxRetryCount", "cpuShares", "memory", "memoryReservation", "cpuSet", "memorySwap"];
    if (limits.some(k => JSON.stringify(olds[k]) !== JSON.stringify(news[k]))) {
        const policy = news.restart ?? "no";
        const args = ["update", "--restart", policy === "on-failure" && news.maxRetryCount ? `${policy}:${news.maxRetryCount}` : policy];
        if (news.cpuShares) args.push("--cpu-shares", String(news.cpuShares));
        if (news.memory) args.push("--memory", `${news.memory}m`);
        if (news.memoryReservation) args.push("--memory-reservation", `${news.memoryReservation}m`);
        if (news.cpuSet) args.push("--cpuset-cpus", news.cpuSet);
        if (news.memorySwap) args.push("--memory-swap", news.memorySwap > 0 ? `${news.memorySwap}m` : String(news.memorySwap));
        await mustDocker(t, target, [...args, id]);
        actions++;
    }
    return actions;
}

export async function removeContainer(t: Transport, target: DockerTarget, state: Record<string, any>): Promise<void> {
    await docker(t, target, ["stop", "-t", String(state.destroyGraceSeconds ?? 10), state.name]);
    const r = await docker(t, target, ["rm", "-f", state.name]);
    if (r.code !== 0 && !/No such container/.test(r.stderr)) throw new Error(`docker rm ${state.name} on ${target.host}: ${r.stderr.trim()}`);
}

/**
 * What docker_container Read asks the host (terraform-provider-docker v4.5.0 resource_docker_container_funcs.go:
 * fetchDockerContainer lists every container, `ContainerList(All: true)`, and looks for the id; then ContainerInspect).
 * Undefined: not in the list. A failing docker call fails the refresh.
 */
export async function inspectContainer(t: Transport, target: DockerTarget, id: string): Promise<LiveContainer | undefined> {
    const ids = (await mustDocker(t, target, ["ps", "--all", "--no-trunc", "--format", "{{.ID}}"])).split("\n").map(l => l.trim());
    if (!ids.includes(id)) return undefined;
    const { State: state, HostConfig: hostConfig } = JSON.parse(await mustDocker(t, target, ["container", "inspect", "--format", "{{json .}}", id]));
    return { id, running: state.Running === true, exitCode: state.ExitCode ?? 0, capAdd: hostConfig?.CapAdd ?? [] };
}

/**
 * What docker_image Read asks the host (v4.5.0 resource_docker_image_funcs.go searchLocalImages: ImageInspect(name);
 * not found is no image, any other error fails).
 */
export async function inspectImage(t: Transport, target: DockerTarget, name: string): Promise<LiveImage | undefined> {
    const r = await docker(t, target, ["image", "inspect", name]);
    if (r.code !== 0) {
        if (/No such image/i.test(r.stderr)) return undefined;
        throw new Error(`docker image inspect ${name} on ${target.host} failed (exit ${r.code}): ${r.stderr.trim() || r.stdout.trim()}`);
    }
    const inspect = JSON.parse(r.stdout)[0];
    return { id: inspect.Id, repoDigests: inspect.RepoDigests ?? [] };
}

export function randomPassword(length: number): string {
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    return Array.from(crypto.randomBytes(length), b => alphabet[b % alphabet.length]).join("");
}
