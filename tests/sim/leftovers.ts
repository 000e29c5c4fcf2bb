// What the tests left on the machine (issue 32: "nothing left behind: namespaces, bridges, daemons, mounts, temp dirs").
// `.ci/run` takes a snapshot before its first test stage and checks after the e2e stage, pass or fail:
//   node --import tsx tests/sim/leftovers.ts snapshot FILE   # before
//   node --import tsx tests/sim/leftovers.ts check FILE      # after: prints each leftover, exits 1 if any
// The judgement (simLeftovers) is pure; readMachine only reads. Each file's own teardown is tests/sim/hosts.ts
// `teardown`; this is the machine-wide proof that every cluster's ran, whatever the order files ran in.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { SIM_DIR, SIM_STATE_DIR } from "./hosts";

export interface MachineSnapshot {
    netns: string[];
    links: string[];
    /** `pid cmdline` (arguments joined by spaces). */
    processes: string[];
    /** Mount points. */
    mounts: string[];
    /** Top-level cgroup directory names (cgroup v2). */
    cgroups: string[];
    /** `iptables -S` lines of FORWARD and INPUT. */
    firewall: string[];
    /** Entries of the temp directory. */
    tmp: string[];
}

/** Where the simulated clusters keep data and runtime state (tests/sim/hosts.ts simCluster). */
export interface SimPlaces {
    simDir: string;
    stateDirs: string[];
}

export const SIM_PLACES: SimPlaces = { simDir: SIM_DIR, stateDirs: [SIM_STATE_DIR, "/run/svsim"] };

// Cluster 0: netns and veths sv-<host>, bridge svbr0, cgroups spark-vllm-sim-<host>, comment spark-vllm-sim;
// cluster N: sv<N>-<host>, svbr<N>, svsim<N>-<host>, svsim<N> (tests/sim/hosts.ts simCluster).
const SIM_NETNS = /^sv\d*-/;
const SIM_LINK = /^(svbr\d+|sv\d*-[\w-]+)(@\S*)?$/;
const SIM_CGROUP = /^(spark-vllm-sim-|svsim\d+-)/;
const SIM_FIREWALL = /--comment "?(spark-vllm-sim|svsim\d+)"?( |$)/;
// Temp names: the tests' own (tests/tempDir.ts, tests/e2e/suite.ts, components/hostProgram/tests scratch_dir: spark-vllm-*),
// the sim's, and the real vLLM's torch FileStore (vllm 0.32.0 vllm/utils/network_utils.py get_file_store_init_method).
const TEST_TEMP = /^(spark-vllm-|sim-|vllm-sim-|vllm_dist_)/;

/** What `after` holds of the simulated clusters that `before` did not, one line each; empty when nothing is left. */
export function simLeftovers(before: MachineSnapshot, after: MachineSnapshot, places: SimPlaces = SIM_PLACES): string[] {
    const isNew = (key: keyof MachineSnapshot) => {
        const had = new Set(before[key]);
        return (x: string) => !had.has(x);
    };
    const underSim = (s: string) => [places.simDir, ...places.stateDirs].some(d => s === d || s.includes(`${d}/`));
    const out: string[] = [];
    for (const n of after.netns.filter(n => SIM_NETNS.test(n)).filter(isNew("netns"))) out.push(`network namespace ${n}`);
    for (const l of after.links.filter(l => SIM_LINK.test(l)).filter(isNew("links"))) out.push(`link ${l}`);
    for (const p of after.processes.filter(p => underSim(p.slice(p.indexOf(" ") + 1))).filter(isNew("processes"))) out.push(`process ${p}`);
    for (const m of after.mounts.filter(underSim).filter(isNew("mounts"))) out.push(`mount ${m}`);
    for (const c of after.cgroups.filter(c => SIM_CGROUP.test(c)).filter(isNew("cgroups"))) out.push(`cgroup ${c}`);
    for (const r of after.firewall.filter(r => SIM_FIREWALL.test(r)).filter(isNew("firewall"))) out.push(`firewall rule ${r}`);
    // Temp entries of the tests and the simulated clusters (TEST_TEMP); other new ones (containerd's stack dumps, what
    // other programs on the machine make) are not the tests' to judge.
    for (const t of after.tmp.filter(t => TEST_TEMP.test(path.basename(t))).filter(isNew("tmp"))) out.push(`temp entry ${t}`);
    return out;
}

function lines(cmd: string, args: string[]): string[] {
    const r = spawnSync(cmd, args, { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")}: exit ${r.status}: ${(r.stderr || String(r.error ?? "")).trim()}`);
    return r.stdout.split("\n").filter(Boolean);
}

/** The machine as it is now (root: reads every process's cmdline and the firewall). */
export function readMachine(tmpDir = os.tmpdir()): MachineSnapshot {
    const processes: string[] = [];
    for (const pid of fs.readdirSync("/proc").filter(d => /^\d+$/.test(d))) {
        if (Number(pid) === process.pid) continue;
        try {
            const argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
            if (argv.length) processes.push(`${pid} ${argv.join(" ")}`);
        } catch {
            // gone since readdir
        }
    }
    // mountinfo field 5 is the mount point, octal-escaped (proc(5)).
    const mounts = fs.readFileSync("/proc/self/mountinfo", "utf8").split("\n").filter(Boolean)
        .map(l => l.split(" ")[4].replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8))));
    const cgroupRoot = "/sys/fs/cgroup";
    const cgroups = fs.existsSync(cgroupRoot) ? fs.readdirSync(cgroupRoot, { withFileTypes: true }).filter(d => d.isDirectory()).map(d => d.name) : [];
    return {
        netns: lines("ip", ["netns", "list"]).map(l => l.split(" ")[0]),
        links: lines("ip", ["-o", "link", "show"]).map(l => l.split(": ")[1]),
        processes,
        mounts,
        cgroups,
        firewall: ["FORWARD", "INPUT"].flatMap(chain => lines("iptables", ["-w", "-S", chain])),
        tmp: fs.readdirSync(tmpDir).map(e => path.join(tmpDir, e)),
    };
}

function main(): void {
    const [cmd, file] = process.argv.slice(2);
    if ((cmd !== "snapshot" && cmd !== "check") || !file) {
        process.stderr.write("usage: node --import tsx tests/sim/leftovers.ts snapshot FILE | check FILE\n");
        process.exit(2);
    }
    if (cmd === "snapshot") {
        fs.writeFileSync(file, JSON.stringify(readMachine()));
        return;
    }
    const before = JSON.parse(fs.readFileSync(file, "utf8")) as MachineSnapshot;
    const snapshot = path.resolve(file);
    const left = simLeftovers(before, readMachine()).filter(l => l !== `temp entry ${snapshot}`);
    for (const l of left) process.stdout.write(`left behind: ${l}\n`);
    process.stdout.write(left.length ? `${left.length} things left behind since the snapshot ${file}\n` : "nothing left behind since the snapshot\n");
    process.exit(left.length ? 1 : 0);
}

if (require.main === module) main();
