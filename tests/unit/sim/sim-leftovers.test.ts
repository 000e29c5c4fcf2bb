// The machine-wide leftover check .ci/run runs after the end-to-end suite (tests/sim/leftovers.ts).
import assert from "node:assert/strict";
import { test } from "node:test";
import { MachineSnapshot, simLeftovers } from "../../sim/leftovers";

const places = { simDir: "/repo/.sim", stateDirs: ["/run/spark-vllm-sim", "/run/svsim"] };
const empty: MachineSnapshot = { netns: [], links: [], processes: [], mounts: [], cgroups: [], firewall: [], tmp: [] };
const machine: MachineSnapshot = {
    netns: ["other-ns"],
    links: ["lo", "eth0", "docker0"],
    processes: ["1 /sbin/init", "77 /usr/sbin/sshd -D"],
    mounts: ["/", "/proc", "/run/netns/other-ns"],
    cgroups: ["system.slice", "user.slice"],
    firewall: ["-P FORWARD ACCEPT", "-A INPUT -s 10.0.0.0/8 -j ACCEPT"],
    tmp: ["/tmp/tsx-0"],
};

test("a machine the suite left as it found it has no leftovers, even with other things of its own", () => {
    assert.deepEqual(simLeftovers(machine, machine, places), []);
});

test("every kind of a cluster's leftover is named: namespace, bridge and veth, daemons, mounts, cgroups, firewall rules, temp dirs", () => {
    const after: MachineSnapshot = {
        netns: [...machine.netns, "sv3-spark-a", "sv-spark-b"],
        links: [...machine.links, "svbr3", "sv3-spark-a@if2", "sv-spark-b"],
        processes: [...machine.processes,
            "901 nsenter --net=/run/netns/sv3-spark-a --mount=/run/svsim/3/ns/spark-a.mnt /usr/bin/dockerd --data-root /repo/.sim/clusters/3/hosts/spark-a/docker",
            "902 /usr/bin/docker-registry serve /repo/.sim/run/registry.yml",
            "903 /usr/bin/ssh-agent -D -a /run/spark-vllm-sim/agent.sock"],
        mounts: [...machine.mounts, "/run/svsim/3/ns", "/repo/.sim/clusters/3/hosts/spark-a/home"],
        cgroups: [...machine.cgroups, "svsim3-spark-a", "spark-vllm-sim-spark-b"],
        firewall: [...machine.firewall, '-A FORWARD -i svbr3 -m comment --comment svsim3 -j ACCEPT', '-A INPUT -i svbr0 -m comment --comment "spark-vllm-sim" -j ACCEPT'],
        tmp: [...machine.tmp, "/tmp/spark-vllm-rotation-Ab12", "/tmp/tmpn04_nbyb", "/tmp/vllm_dist_c04b459936a34002bf95a8a8faefa9c0"],
    };
    assert.deepEqual(simLeftovers(machine, after, places), [
        "network namespace sv3-spark-a", "network namespace sv-spark-b",
        "link svbr3", "link sv3-spark-a@if2", "link sv-spark-b",
        `process ${after.processes[2]}`, `process ${after.processes[3]}`, `process ${after.processes[4]}`,
        "mount /run/svsim/3/ns", "mount /repo/.sim/clusters/3/hosts/spark-a/home",
        "cgroup svsim3-spark-a", "cgroup spark-vllm-sim-spark-b",
        `firewall rule ${after.firewall[2]}`, `firewall rule ${after.firewall[3]}`,
        "temp entry /tmp/spark-vllm-rotation-Ab12", "temp entry /tmp/vllm_dist_c04b459936a34002bf95a8a8faefa9c0",
    ]);
});

test("what was there before the suite is not its leftover; names that only look alike are not the sim's", () => {
    const before: MachineSnapshot = { ...empty, netns: ["sv-spark-a"], links: ["svbr0"], cgroups: ["spark-vllm-sim-spark-a"] };
    const after: MachineSnapshot = {
        ...before,
        netns: ["sv-spark-a", "svc-frontend"],
        links: ["svbr0", "svbridge", "veth12"],
        processes: ["5 /usr/bin/python3 /opt/other/.sim-like/x", "6 /usr/bin/vim /repo/.simulation"],
        cgroups: ["spark-vllm-sim-spark-a", "svsim-x"],
        firewall: ["-A INPUT -m comment --comment svsimulated -j ACCEPT"],
    };
    assert.deepEqual(simLeftovers(before, after, places), []);
});
