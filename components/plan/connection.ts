// How the hosts are reached: the SSH connection of every remote command and the Docker provider's SSH options.
// Pure: no Pulumi (the components pass the connection to remote.Command, adding the private key).
import { HostSpec } from "../spec/spec";
import { openSshPinnedKeyOptions } from "../spec/hostKeys";

/** A remote command's SSH connection, as @pulumi/command's remote.Command takes it (types.input.remote.ConnectionArgs). */
export interface SshConnection {
    host: string;
    user: string;
    port: number;
    hostKey?: string;
    dialErrorLimit: number;
    perDialTimeout: number;
}

/**
 * How remote commands reach a host: SSH with the configured key (Wiring.command adds it), else the ssh-agent (SSH_AUTH_SOCK). The host's key is
 * checked only when `hostKey` is set: @pulumi/command v1.2.1 uses ssh.InsecureIgnoreHostKey() otherwise, and
 * ssh.FixedHostKey(the parsed key) when set (provider/pkg/provider/remote/connection.go SSHConfig).
 */
export function sshConnection(host: HostSpec): SshConnection {
    return {
        host: host.ssh.host,
        user: host.ssh.user,
        port: host.ssh.port,
        ...(host.ssh.hostKey !== undefined ? { hostKey: host.ssh.hostKey } : {}),
        // Fail within about 30 s when a host is down instead of the provider's 10 × 15 s.
        dialErrorLimit: 3,
        perDialTimeout: 10,
    };
}

/**
 * Where a launch runs, for its triggers: @pulumi/command only updates on a connection change (and
 * would rerun `create` beside what is running), so a launch moved to another host must be replaced.
 */
export function sshTarget(host: HostSpec): string {
    return `${host.ssh.user}@${host.ssh.host}:${host.ssh.port}`;
}

/** The Docker provider's SSH options: OpenSSH in batch mode, failing fast on a dead host. */
export const DOCKER_SSH_OPTS = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=15"];

/**
 * The Docker provider's `sshOpts` for a host: OpenSSH, so without a pinned key it checks ~/.ssh/known_hosts (batch
 * mode: an unknown key fails); with one, it accepts that key only (components/spec/hostKeys.ts openSshPinnedKeyOptions).
 */
export function dockerSshOpts(host: HostSpec): string[] {
    return [...DOCKER_SSH_OPTS, ...(host.ssh.hostKey !== undefined ? openSshPinnedKeyOptions(host.ssh.hostKey) : [])];
}
