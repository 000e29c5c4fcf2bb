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

/** A promise with its resolver: lets a resource wait for others created after it. */
export function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
    let resolve!: (value: T) => void;
    const promise = new Promise<T>(r => (resolve = r));
    return { promise, resolve };
}
