// The test engine's remote-command transport follows @pulumi/command v1.2.1's Go SSH client, not the caller's OpenSSH
// set-up (tests/engine/operations.ts remoteSshArgv). Checked against OpenSSH itself: `ssh -G` prints the options it
// would connect with, after reading (or not reading) configuration.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { testTempDir } from "../../tempDir";
import { GO_CLIENT_KEX, OPENSSH, PREVIOUS_OUTPUT_ENV, configQuoted, isAuthRefused, remoteSshArgv, remoteSshAttempts, setenvWarning } from "../../engine/operations";

/** What OpenSSH resolves for the argv (`-G` prints the options and exits without connecting). */
function resolved(argv: string[], env: NodeJS.ProcessEnv = {}): Map<string, string[]> {
    const at = argv.indexOf("--");
    const r = spawnSync(argv[0], ["-G", ...argv.slice(1, at), ...argv.slice(at)], { encoding: "utf8", env: { PATH: "/usr/bin:/bin", ...env } });
    assert.equal(r.status, 0, r.stderr);
    const out = new Map<string, string[]>();
    for (const line of r.stdout.trim().split("\n")) {
        const [k, ...v] = line.split(" ");
        out.set(k, [...(out.get(k) ?? []), v.join(" ")]);
    }
    return out;
}

const dir = testTempDir("transport");
const file = (name: string, content: string, mode?: number) => {
    const f = path.join(dir, name);
    fs.writeFileSync(f, content, { mode });
    return f;
};

test("no ssh_config: a Host alias, User and IdentityFile from a config given to the caller's ssh do not apply", () => {
    const config = file("ssh_config", "Host spark-a\n  HostName 198.18.0.2\n  User nvidia\n  Port 2222\n  IdentityFile /keys/from-config\n");
    const argv = remoteSshArgv({ host: "spark-a", user: "root" }, { SSH_AUTH_SOCK: "/run/agent.sock" }, file);
    assert.equal(argv[0], OPENSSH, "OpenSSH itself, not a wrapper first on PATH");
    assert.deepEqual(argv.slice(1, 3), ["-F", "none"]);
    // The same argv with the config in front shows what the config would have changed; ours must not.
    const ours = resolved(argv);
    assert.deepEqual(ours.get("hostname"), ["spark-a"]);
    assert.deepEqual(ours.get("user"), ["root"]);
    assert.deepEqual(ours.get("port"), ["22"]);
    assert.ok(!(ours.get("identityfile") ?? []).includes("/keys/from-config"));
    const withConfig = resolved([argv[0], "-F", config, ...argv.slice(3)]);
    assert.deepEqual(withConfig.get("hostname"), ["198.18.0.2"], "the probe itself works: a config would resolve the alias");
});

test("only the connection's key, then the agent: never ~/.ssh/id_* (OpenSSH's defaults when no identity is given)", () => {
    const withKey = resolved(remoteSshArgv({ host: "198.18.0.2", privateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----" }, {}, file));
    assert.deepEqual(withKey.get("identityfile"), [path.join(dir, "id")]);
    assert.equal(fs.statSync(path.join(dir, "id")).mode & 0o777, 0o600, "ssh refuses a key others can read");
    assert.deepEqual(withKey.get("identityagent"), ["none"], "no SSH_AUTH_SOCK, no agent");
    const agentOnly = resolved(remoteSshArgv({ host: "198.18.0.2" }, { SSH_AUTH_SOCK: "/run/agent.sock" }, file));
    assert.deepEqual(agentOnly.get("identityagent"), ["/run/agent.sock"]);
    const ids = agentOnly.get("identityfile") ?? [];
    assert.equal(ids.length, 1);
    assert.ok(!/\/\.ssh\/id_/.test(ids[0]) && !fs.existsSync(ids[0]), `a path that does not exist, not a default key: ${ids}`);
    assert.deepEqual(resolved(remoteSshArgv({ host: "h", agentSocketPath: "/other.sock" }, { SSH_AUTH_SOCK: "/run/agent.sock" }, file)).get("identityagent"), ["/other.sock"]);
});

test("a key and an agent: the key alone first, the agent only when the host refuses it (Go's order, not OpenSSH's)", () => {
    const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----";
    const attempts = remoteSshAttempts({ host: "198.18.0.2", privateKey: key }, { SSH_AUTH_SOCK: "/run/agent.sock" }, file).map(a => resolved(a));
    assert.equal(attempts.length, 2);
    assert.deepEqual(attempts[0].get("identityfile"), [path.join(dir, "id")]);
    assert.deepEqual(attempts[0].get("identityagent"), ["none"], "OpenSSH would offer the agent's keys before the file's");
    assert.deepEqual(attempts[1].get("identityagent"), ["/run/agent.sock"]);
    assert.ok(!fs.existsSync(attempts[1].get("identityfile")![0]), "the second attempt is the agent alone");
    assert.equal(remoteSshAttempts({ host: "h", privateKey: key }, {}, file).length, 1, "no agent: the key alone");
    assert.equal(remoteSshAttempts({ host: "h" }, { SSH_AUTH_SOCK: "/run/agent.sock" }, file).length, 1, "no key: the agent alone");
    // Only a refusal of every key moves on (sshconnect2.c: fatal("%s@%s: Permission denied (%s).")); a host key
    // mismatch or a failing command does not.
    assert.ok(isAuthRefused({ code: 255, stdout: "", stderr: "root@198.18.0.2: Permission denied (publickey).\n" }));
    assert.ok(!isAuthRefused({ code: 255, stdout: "", stderr: "Host key verification failed.\n" }));
    assert.ok(!isAuthRefused({ code: 1, stdout: "", stderr: "root@198.18.0.2: Permission denied (publickey).\n" }));
});

test("host keys: any without hostKey (nothing read or remembered); with it, only that key, strictly", () => {
    const any = resolved(remoteSshArgv({ host: "h" }, {}, file));
    assert.deepEqual(any.get("stricthostkeychecking"), ["false"]);
    assert.deepEqual(any.get("userknownhostsfile"), ["/dev/null"]);
    assert.deepEqual(any.get("globalknownhostsfile"), ["/dev/null"]);
    const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk6uS0j3dfa0+4m0ZbJ6i8yx7F4N1DxB2pGc1P6Yc9o";
    const pinned = resolved(remoteSshArgv({ host: "h", hostKey: key }, {}, file));
    assert.deepEqual(pinned.get("stricthostkeychecking"), ["true"]);
    assert.deepEqual(pinned.get("hostkeyalgorithms"), ["ssh-ed25519"]);
    assert.equal(fs.readFileSync(pinned.get("userknownhostsfile")![0], "utf8"), `* ${key}\n`);
    assert.deepEqual(pinned.get("batchmode"), ["yes"]);
    // No "Warning: Permanently added …" in a command's stderr: Go's client writes nothing of its own there.
    assert.deepEqual(any.get("loglevel"), ["ERROR"]);
});

test("key exchange: only what Go's client offers, in its order; never OpenSSH's default sntrup761x25519-sha512", () => {
    for (const argv of remoteSshAttempts({ host: "198.18.0.2", privateKey: "KEY" }, { SSH_AUTH_SOCK: "/run/agent.sock" }, file)) {
        // `ssh -G` exits 255 on a name this OpenSSH does not know ("Bad SSH2 KexAlgorithms"): each one is real here.
        assert.deepEqual(resolved(argv).get("kexalgorithms"), [GO_CLIENT_KEX.join(",")]);
    }
    const openssh = resolved([OPENSSH, "-F", "none", "--", "198.18.0.2"]).get("kexalgorithms")![0].split(",");
    assert.match(openssh[0], /^sntrup761x25519-sha512/, "OpenSSH's own first choice, which the engine must not use");
    assert.ok(!GO_CLIENT_KEX.some(k => k.startsWith("sntrup")));
});

test("a password is refused, not silently ignored", () => {
    assert.throws(() => remoteSshArgv({ host: "h", password: "x" }, {}, file), /cannot log in with a password/);
});

test("the previous outputs travel as one SetEnv value each, whatever they hold (quotes, backslashes, lines)", () => {
    const value = 'vllm serve started, pid 42, log "/var/tmp/x y.log" on \\spark-a\nsecond line';
    const argv = remoteSshArgv({ host: "h" }, {}, file);
    const at = argv.indexOf("--");
    const r = spawnSync(argv[0], ["-G", ...argv.slice(1, at), "-o", `SetEnv=${PREVIOUS_OUTPUT_ENV.stdout}=${configQuoted(value)}`, ...argv.slice(at)], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    assert.ok(r.stdout.includes(`setenv ${PREVIOUS_OUTPUT_ENV.stdout}=${value}\n`), r.stdout.split("\n").filter(l => /setenv|second/.test(l)).join("\n"));
});

test("a refused SetEnv is the provider's warning, word for word (commandOutputs.go logAndWrapSetenvErr)", () => {
    assert.equal(setenvWarning("PULUMI_COMMAND_STDOUT"),
        "Unable to set 'PULUMI_COMMAND_STDOUT'. This only works if your SSH server is configured to accept\n" +
        "\tthese variables via AcceptEnv. Alternatively, if a Bash-like shell runs the command on the remote host, you could\n" +
        "\tprefix the command itself with the variables in the form 'VAR=value command'");
});
