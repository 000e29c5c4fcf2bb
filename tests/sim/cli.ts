// Manual use: node --import tsx tests/sim/cli.ts up [--hosts N] | down | status | reboot HOST [--down-seconds N]
import { rebootSimHost, simStatus, startSim, stopSim } from "./hosts";

async function main(): Promise<void> {
    const [cmd, ...rest] = process.argv.slice(2);
    const log = (s: string) => process.stderr.write(`[sim] ${s}\n`);
    if (cmd === "up") {
        const i = rest.indexOf("--hosts");
        const hosts = i >= 0 ? Number(rest[i + 1]) : 2;
        // ownerPid 0: the sim outlives this process; `down` (or the next startSim) removes it
        const sim = await startSim({ hosts, log, ownerPid: 0, handleSignals: false, force: rest.includes("--force") });
        const out = {
            hosts: sim.hosts.map(h => ({ name: h.name, address: h.address, dockerHost: h.dockerHost, root: h.root, storageDriver: h.storageDriver })),
            registry: sim.registry,
            images: sim.images,
            sshConfigFile: sim.sshConfigFile,
            sshKeyFile: sim.sshKeyFile,
            timings: sim.timings,
        };
        process.stdout.write(JSON.stringify(out, null, 2) + "\n");
        process.stderr.write(
            `\n# use it:\nexport PATH=${sim.env.PATH!.split(":")[0]}:$PATH SSH_AUTH_SOCK=${sim.sshAuthSock}\n` +
            `ssh ${sim.hosts[0].address} nvidia-smi -L\nDOCKER_HOST=${sim.hosts[0].dockerHost} docker info\n` +
            `# tear down: node --import tsx tests/sim/cli.ts down\n`);
    } else if (cmd === "down") {
        await stopSim(log);
    } else if (cmd === "reboot" && rest[0]) {
        const i = rest.indexOf("--down-seconds");
        await rebootSimHost(rest[0], { log, ...(i >= 0 ? { downSeconds: Number(rest[i + 1]) } : {}) });
    } else if (cmd === "status") {
        process.stdout.write(JSON.stringify(await simStatus(), null, 2) + "\n");
    } else {
        process.stderr.write("usage: node --import tsx tests/sim/cli.ts up [--hosts N] [--force] | down | status | reboot HOST [--down-seconds N]\n");
        process.exit(2);
    }
}

main().catch(e => { process.stderr.write(`${(e as Error).stack ?? e}\n`); process.exit(1); });
