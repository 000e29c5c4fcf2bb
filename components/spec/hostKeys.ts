// Pinned SSH host keys (hosts[].ssh.hostKey): the one line format we accept, and the OpenSSH options that make
// the Docker provider's ssh accept that key and no other. Pure: no Pulumi in this file.

/**
 * Host key types we accept. Not ssh-rsa: @pulumi/command v1.2.1 sets the client's HostKeyAlgorithms to the pinned
 * key's type (provider/pkg/provider/remote/connection.go SSHConfig: `hostKeyAlgorithms = []string{publicKey.Type()}`),
 * and for an RSA key that is "ssh-rsa" (SHA-1 signatures), which OpenSSH servers stopped offering by default in 8.8
 * (openssh-portable V_8_8_P1 myproposal.h KEX_DEFAULT_PK_ALG lists only rsa-sha2-512/256), so the handshake would fail.
 * Certificates (`*-cert-v01@openssh.com`) are not plain keys: golang.org/x/crypto's FixedHostKey compares key bytes.
 */
export const HOST_KEY_TYPES = ["ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521"] as const;

/** How a user gets a host's key line; every hostKey message and the advisory policy say it the same way. */
export const HOST_KEY_HOWTO =
    "the first two fields of /etc/ssh/ssh_host_ed25519_key.pub on that host (read it on the host itself), " +
    "or `ssh-keyscan -t ed25519 HOST` with the leading host field removed, checked against that file's `ssh-keygen -lf` fingerprint";

/** The key as `<type> <base64>` (a trailing comment is dropped), or why the line is not one. Messages never echo the value. */
export function parseHostKey(line: string): { key: string } | { problem: string } {
    const fields = line.trim().split(/\s+/);
    const known = (t: string | undefined): boolean => (HOST_KEY_TYPES as readonly string[]).includes(t ?? "");
    const [type, data] = fields;
    if (!known(type)) {
        if (known(data)) return { problem: `starts with a host field before the key type (as ssh-keyscan prints it); drop it and give \`${data} <base64>\`` };
        if (type === "ssh-rsa") return { problem: "is an RSA key, which @pulumi/command can only check with SHA-1 signatures that OpenSSH 8.8 and later refuse; give the host's ed25519 key: " + HOST_KEY_HOWTO };
        if (/-cert-v01@openssh\.com$/.test(type)) return { problem: "is a host certificate; give the host's plain public key: " + HOST_KEY_HOWTO };
        return { problem: `must be one OpenSSH public key line \`<type> <base64>\` with a type of ${HOST_KEY_TYPES.join(", ")}; use ${HOST_KEY_HOWTO}` };
    }
    if (data === undefined) return { problem: `has the type ${type} but no key after it; give \`${type} <base64>\`` };
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(data) || data.length % 4 !== 0) return { problem: `the key after ${type} is not base64; copy the whole line again` };
    const blob = Buffer.from(data, "base64");
    const inner = wireString(blob, 0);
    if (inner === undefined || inner.value.toString("latin1") !== type)
        return { problem: `the key data is not a ${type} key (its encoded type is ${inner ? JSON.stringify(inner.value.toString("latin1").slice(0, 40)) : "unreadable"}); copy the whole line again` };
    const body = wireString(blob, inner.next);
    // RFC 8709 3.1: ed25519 public keys are 32 bytes. RFC 5656 3.1: ecdsa keys carry the curve name after the type.
    const ok = type === "ssh-ed25519" ? body?.value.length === 32 && body.next === blob.length
        : body?.value.toString("latin1") === type.replace("ecdsa-sha2-", "") && wireString(blob, body.next)?.next === blob.length;
    if (!ok) return { problem: `the ${type} key data is damaged (wrong length or curve); copy the whole line again` };
    return { key: `${type} ${data}` };
}

/** An SSH wire-format string (uint32 length, bytes) at OFFSET; undefined if it does not fit. */
function wireString(blob: Buffer, offset: number): { value: Buffer; next: number } | undefined {
    if (offset + 4 > blob.length) return undefined;
    const length = blob.readUInt32BE(offset);
    if (offset + 4 + length > blob.length) return undefined;
    return { value: blob.subarray(offset + 4, offset + 4 + length), next: offset + 4 + length };
}

/**
 * OpenSSH (≥ 8.5) options under which ssh accepts HOSTKEY (a parsed `<type> <base64>`) and nothing else, with no file on
 * disk and the same text on every run (they are Docker provider inputs: a per-run path would show as a diff):
 * - no known_hosts files (`UserKnownHostsFile none`, ssh_config(5); `GlobalKnownHostsFile none`, openssh-portable ssh.c
 *   "Invalid GlobalKnownHostsFiles: \"none\""), so an old or planted entry adds nothing;
 * - `KnownHostsCommand` prints the one known_hosts line `* <type> <base64>` (ssh_config(5) KnownHostsCommand: "in identical
 *   format to the usual files"; sshconnect.c load_hostkeys_command splits it with argv_split, no shell, and runs it only
 *   by absolute path; `*` matches any host name, address and [host]:port);
 * - `StrictHostKeyChecking yes`: any other key fails with "Host key verification failed." (sshconnect2.c);
 * - `HostKeyAlgorithms <type>`, as @pulumi/command's Go client does for the same key (connection.go SSHConfig).
 * The docker CLI's connhelper passes these to `ssh` as separate argv entries, no shell between (docker/cli v28.5.2
 * cli/connhelper/connhelper.go getConnectionHelper → commandconn.New(ctx, "ssh", sshArgs...)).
 */
export function openSshPinnedKeyOptions(hostKey: string): string[] {
    const type = hostKey.split(" ")[0];
    return ["-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=none", "-o", "GlobalKnownHostsFile=none",
        "-o", `HostKeyAlgorithms=${type}`, "-o", `KnownHostsCommand=/bin/echo * ${hostKey}`];
}
