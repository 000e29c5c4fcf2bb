// hosts[].ssh.hostKey: the accepted line format, and that the key reaches every transport of the program.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { parseSpec } from "../../../components/spec/parseSpec";
import { parseHostKey, openSshPinnedKeyOptions } from "../../../components/spec/hostKeys";
import { evaluateWithMocks } from "../../harness/mocks";
import { clusterConfig, rawConfig, specProblems } from "../../fixtures";
import { resourceNames } from "../../../components/plan/naming";

// Keys made with `ssh-keygen -t <type> -C root@spark-x` for these tests.
export const KEYS = {
    ed25519: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKUcZFdnMYt1+OQnP9uJD4s1CFnLWUciKxw5B95cRYc1",
    p256: "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBJTatWy64w6YBVTupeqTf6xVkWGxQ1W1NfhRWn+w8gdK+ih8PdepdER4x+aDueIjZh2nsX6DJcRLr3jeLPqjets=",
    p384: "ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBJY3Km4bSqg3PegXyYfNouYpwbukh1ta2yntlZrYzHK9GU3OJBkJ55QiO2v9+sdUz+5amO0CgSUL7NSuQ3azahleqZF+7g3FI1+zJLftn/GpK6QbxP4mnEEOIveC2BMwXw==",
    p521: "ecdsa-sha2-nistp521 AAAAE2VjZHNhLXNoYTItbmlzdHA1MjEAAAAIbmlzdHA1MjEAAACFBADvUNXVzm/TEYX56YmI+/BJQmHemp1E3mPbblGiJ2//iKwO4/aAtAW0fBEfl8uPQpKUJeAhz5REQu+YxvYCUOEVXwC71TrPKfD22CtwKd6mcMSpmmOy97BIiEhCD3LyCR3EKDSg0DgtJq1WT6XYPwZgPmEumeka3zHpS8d/8Rla6orgAA==",
    rsa: "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCunCrbcYV6z/5DZo+4tomc+PYEqnCMRVxWWQhfTa/Je754InWLlGoZ5E2rMapNREwfVE591ykoSnbRDPh2PmnVrZWOXYCvXnoJNd26c/SwMl59X0sYVbJ2BtZAfShoJl7YoET2RfSfzUl2C61XwdrOzSGSb8LxILndUFFqlSXuEmUz+EFn0AkTsKgBrFwaKyeUoJzMv6hXZc/hMJjI5Z4Vkbxdy3M3TB9S1Y64y1ns8Ad1wq/tQmImk4DhmUcpMHRgULwXcXAEddLTj27DTaFN5scC892gj3IzMvpdiyzYPRB90FbVu3DCsaGDayXewk4yGm5Ot4kFPgXfXYk2C7eb",
};

test("every accepted key type parses; a trailing comment (as in the .pub file) is dropped", () => {
    for (const key of [KEYS.ed25519, KEYS.p256, KEYS.p384, KEYS.p521]) {
        assert.deepEqual(parseHostKey(key), { key });
        assert.deepEqual(parseHostKey(`  ${key} root@spark-x  `), { key });
    }
});

test("a wrong host key line is refused with the reason and the fix, never echoing the value", () => {
    const problem = (line: string) => {
        const r = parseHostKey(line);
        assert.ok("problem" in r, `${line} was accepted`);
        return r.problem;
    };
    assert.match(problem(`spark-a.local ${KEYS.ed25519}`), /host field .*drop it and give `ssh-ed25519 <base64>`/);
    assert.match(problem(KEYS.rsa), /RSA key.*SHA-1.*OpenSSH 8\.8.*ed25519.*ssh_host_ed25519_key\.pub/);
    assert.match(problem("ssh-ed25519-cert-v01@openssh.com AAAA"), /host certificate/);
    assert.match(problem("AAAAC3NzaC1lZDI1NTE5AAAAIKUcZFdnMYt1"), /one OpenSSH public key line `<type> <base64>`.*ssh-keyscan -t ed25519/);
    assert.match(problem("ssh-ed25519"), /no key after it/);
    assert.match(problem("ssh-ed25519 not*base64"), /not base64/);
    // ed25519 data under an ecdsa type: the encoded type disagrees.
    assert.match(problem(`ecdsa-sha2-nistp256 ${KEYS.ed25519.split(" ")[1]}`), /not a ecdsa-sha2-nistp256 key \(its encoded type is "ssh-ed25519"\)/);
    // p256 data under p384: same prefix, wrong curve.
    assert.match(problem(`ecdsa-sha2-nistp384 ${KEYS.p256.split(" ")[1]}`), /not a ecdsa-sha2-nistp384 key/);
    // A truncated ed25519 key (29 of 32 bytes).
    assert.match(problem("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKUcZFdnMYt1+OQnP9uJD4s1CFnLWUciKxw5B95c"), /damaged/);
    for (const line of [KEYS.rsa, `host ${KEYS.ed25519}`]) assert.ok(!problem(line).includes(line.split(" ").at(-1)!.slice(0, 20)));
});

test("hosts[].ssh.hostKey is optional, normalised, and a bad one names its key path", () => {
    const raw = rawConfig(2);
    raw.hosts[0].ssh.hostKey = `${KEYS.ed25519} root@spark-a`;
    const spec = parseSpec(raw);
    assert.equal(spec.hosts[0].ssh.hostKey, KEYS.ed25519);
    assert.equal(spec.hosts[1].ssh.hostKey, undefined);

    raw.hosts[1].ssh.hostKey = KEYS.rsa;
    raw.hosts[0].ssh.hostKey = 42;
    const found = specProblems(raw);
    assert.ok(found.some(p => p.startsWith("spark-vllm:hosts[1].ssh.hostKey: is an RSA key")), found.join("\n"));
    assert.ok(found.some(p => p.startsWith("spark-vllm:hosts[0].ssh.hostKey: must be a non-empty string")), found.join("\n"));
    raw.hosts[0].ssh.hostKey = `${KEYS.ed25519}\nssh-ed25519 AAAA`;
    assert.ok(specProblems(raw).some(p => p.startsWith("spark-vllm:hosts[0].ssh.hostKey: contains the control character U+000A")));
});

test("the pinned key reaches every remote command's connection and the host's Docker provider ssh", () => {
    const config = clusterConfig(2);
    const hosts = config["spark-vllm:hosts"] as any[];
    hosts[1].ssh.hostKey = `${KEYS.p256} root@spark-b`;
    const { resources, error } = evaluateWithMocks(config);
    assert.equal(error, undefined, error);
    const n = resourceNames();
    const commands = resources.filter(r => r.type === "command:remote:Command");
    assert.ok(commands.length > 5);
    for (const c of commands) {
        const onB = c.inputs.connection.host === hosts[1].ssh.host;
        assert.equal(c.inputs.connection.hostKey, onB ? KEYS.p256 : undefined, `${c.name} on ${c.inputs.connection.host}`);
        // In the triggers too: pinning a key on a running stack replaces the host's commands, never re-runs a launch beside itself.
        assert.equal((c.inputs.triggers as unknown[]).includes(KEYS.p256), onB, `${c.name} triggers`);
    }
    // Provider inputs reach the provider as strings (a list as its JSON), as the Pulumi engine sends them.
    const sshOpts = (host: string): string[] => {
        const p = resources.find(r => r.type === "pulumi:providers:docker" && r.name === n.host(host, "docker"));
        assert.ok(p, `no Docker provider for ${host}`);
        return typeof p.inputs.sshOpts === "string" ? JSON.parse(p.inputs.sshOpts) : p.inputs.sshOpts;
    };
    assert.deepEqual(sshOpts("spark-b").slice(6), openSshPinnedKeyOptions(KEYS.p256));
    assert.deepEqual(sshOpts("spark-a"), ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=15"]);
});

test("imageSource head: the head's ssh to a worker carries that worker's pinned key (the third SSH transport)", () => {
    const config: Record<string, unknown> = { ...clusterConfig(2), "spark-vllm:imageSource": "head" };
    (config["spark-vllm:hosts"] as any[])[1].ssh.hostKey = KEYS.ed25519;
    const { resources, error } = evaluateWithMocks(config);
    assert.equal(error, undefined, error);
    const copy = resources.find(r => r.name === resourceNames().host("spark-b", "image"));
    assert.ok(copy);
    // The target's JSON, shell-quoted in the command text; spark_vllm/images.py turns hostKey into the same OpenSSH options.
    assert.ok(String(copy.inputs.create).includes(`"target":{"name":"spark-b","user":"root","address":"198.18.1.3","hostKey":"${KEYS.ed25519}"}`), copy.inputs.create);
});

test("the Docker provider's OpenSSH options accept only the pinned key, with no file and the same text every run", () => {
    assert.deepEqual(openSshPinnedKeyOptions(KEYS.ed25519), [
        "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=none", "-o", "GlobalKnownHostsFile=none",
        "-o", "HostKeyAlgorithms=ssh-ed25519", "-o", `KnownHostsCommand=/bin/echo * ${KEYS.ed25519}`]);
});

test("OpenSSH reads those options as meant: strict, no known_hosts file, the key line intact (ssh -G, no connection)", () => {
    // argv as the docker CLI's connhelper builds it: ssh -l USER -p PORT <sshOpts> -T -- HOST (docker/cli v28.5.2).
    const r = spawnSync("ssh", ["-F", "/dev/null", "-G", "-l", "root", "-p", "22", ...openSshPinnedKeyOptions(KEYS.p384), "-T", "--", "198.18.0.3"], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    const conf = new Map(r.stdout.split("\n").map(l => [l.slice(0, l.indexOf(" ")), l.slice(l.indexOf(" ") + 1)]));
    assert.equal(conf.get("stricthostkeychecking"), "true");
    assert.equal(conf.get("userknownhostsfile"), "none");
    assert.equal(conf.get("globalknownhostsfile"), "none");
    assert.equal(conf.get("hostkeyalgorithms"), "ecdsa-sha2-nistp384");
    assert.equal(conf.get("knownhostscommand"), `/bin/echo * ${KEYS.p384}`);
});
