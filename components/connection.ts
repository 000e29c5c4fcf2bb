import * as pulumi from "@pulumi/pulumi";
import { types } from "@pulumi/command";
import { HostSpec } from "./spec";

/** How remote commands reach a host: SSH with the given key, else the ssh-agent (SSH_AUTH_SOCK). */
export function sshConnection(host: HostSpec, privateKey?: pulumi.Input<string>): types.input.remote.ConnectionArgs {
    return {
        host: host.ssh.host,
        user: host.ssh.user,
        port: host.ssh.port,
        ...(privateKey !== undefined ? { privateKey } : {}),
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
