// A valid stack config for any number of hosts, on test addresses only (198.18.0.0/15, which nothing
// outside this machine answers): the bench and the scale-shape test evaluate it at 2 to 256 hosts.
import { clusterConfig, hostConfig } from "../fixtures";

/** The i-th host's addresses: SSH in 198.18.0.0/16, fabric in 198.19.0.0/16, 250 hosts per /24. */
export function testAddresses(i: number): { ssh: string; fabric: string } {
    if (!Number.isInteger(i) || i < 0 || i >= 250 * 256) throw new Error(`no test address for host ${i}`);
    const [third, fourth] = [Math.floor(i / 250), (i % 250) + 2];
    return { ssh: `198.18.${third}.${fourth}`, fabric: `198.19.${third}.${fourth}` };
}

/** n hosts, TP × PP = n: TP=2, doubled while PP would exceed the 64 the spec allows (TP=n for an odd n). */
export function manyHostConfig(n: number): Record<string, unknown> {
    const base = clusterConfig(2);
    const hosts = Array.from({ length: n }, (_, i) => {
        const h = hostConfig(0);
        const a = testAddresses(i);
        return { ...h, name: `spark-${String(i).padStart(3, "0")}`, ssh: { ...h.ssh, host: a.ssh }, fabric: { ...h.fabric, address: a.fabric } };
    });
    let tp = n % 2 === 0 ? 2 : n;
    while (n / tp > 64 && n % (tp * 2) === 0) tp *= 2;
    return { ...base, "spark-vllm:hosts": hosts, "spark-vllm:vllm": { ...(base["spark-vllm:vllm"] as object), tensorParallelSize: tp, pipelineParallelSize: n / tp } };
}
