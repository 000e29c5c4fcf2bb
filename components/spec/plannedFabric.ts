// With spark-vllm:fabric.setup on, each host's `fabric` (interface, address, HCAs) comes from the planned layout
// (fabricConfig.ts): filled where left out, and where written, held to the plan. Pure.
import { FabricSetupSpec, fabricLayout, primaryEnd } from "./fabricConfig";
import { HostSpec } from "./spec";

/**
 * Fills `host.fabric` of every host from the plan (mutating the parsed hosts) and returns the problems as
 * [key path, message]: a written interface or address that is not the planned one, an address missing with link-local
 * addressing. `hcasGiven`: the host's `fabric.hcas` was written (it is kept as written; else every planned twin's RoCE device).
 */
export function plannedFabricProblems(fabric: FabricSetupSpec, hosts: Array<{ host: HostSpec; hcasGiven: boolean }>): Array<[string, string]> {
    const problems: Array<[string, string]> = [];
    if (fabric.addressing === "static" && fabric.subnets.length === 0) return problems;
    const layout = fabricLayout(fabric, hosts.length);
    hosts.forEach(({ host, hcasGiven }, i) => {
        const at = `hosts[${i}].fabric`;
        const end = primaryEnd(layout, i);
        if (!end) return;
        if (host.fabric.interface === "") host.fabric.interface = end.interface;
        else if (host.fabric.interface !== end.interface)
            problems.push([`${at}.interface`, `is ${host.fabric.interface}, but spark-vllm:fabric (${fabric.topology}, port ${fabric.port}) sets up ${host.name}'s fabric on ${end.interface}; ` +
                `remove hosts[${i}].fabric.interface (the plan fills it) or change spark-vllm:fabric`]);
        if (end.address !== undefined) {
            if (host.fabric.address === "") host.fabric.address = end.address;
            else if (host.fabric.address !== end.address)
                problems.push([`${at}.address`, `is ${host.fabric.address}, but spark-vllm:fabric gives ${host.name} ${end.address} on ${end.interface}; ` +
                    `remove hosts[${i}].fabric.address (the plan fills it) or change spark-vllm:fabric.subnets`]);
        } else if (host.fabric.address === "")
            problems.push([`${at}.address`, `missing: with spark-vllm:fabric.addressing link-local the kernel picks ${host.name}'s address on ${end.interface} (169.254.0.0/16) ` +
                `when the drop-in is applied, and the stack must name it; set fabric.addressing: static (the program chooses the addresses), or give the address the host has`]);
        if (!hcasGiven) host.fabric.hcas = layout.ends.filter(e => e.host === i).map(e => e.rdma).filter((d, k, all) => all.indexOf(d) === k);
    });
    return problems;
}
