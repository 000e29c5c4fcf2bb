// `npm run demo -- [--keep] [--fault NAME] [--hosts 2|4] | --down`: the command line, parsed without side effects.
import { FAULTS, FaultName } from "./faults";

export interface DemoOptions {
    /** Stop a cluster an earlier `--keep` left up, and nothing else. */
    down: boolean;
    /** Leave the cluster up at the end (with how to use and stop it). */
    keep: boolean;
    fault?: FaultName;
    /** 2 (TP=2) or 4 (TP=2 × PP=2). */
    hosts: 2 | 4;
}

export const USAGE = `usage: sudo npm run demo [-- [--keep] [--fault NAME] [--hosts 4]]
       sudo npm run demo -- --down
  --keep        leave the cluster up and print how to talk to it and how to stop it
  --fault NAME  replay one failure and show the diagnosis \`up\` prints; NAME is one of:
${Object.entries(FAULTS).map(([name, f]) => `                  ${name.padEnd(12)} ${f.summary}`).join("\n")}
  --hosts 4     four simulated Sparks: tensor parallel 2 x pipeline parallel 2 (default 2 hosts, TP=2)
  --down        stop what \`--keep\` left up (destroy the stack, stop the simulated hosts)`;

/** The options, or the problem with the command line (the caller prints it with USAGE). */
export function parseDemoArgs(argv: string[]): DemoOptions | { error: string } {
    const opts: DemoOptions = { down: false, keep: false, hosts: 2 };
    for (let i = 0; i < argv.length; i++) {
        const arg = argv[i];
        if (arg === "--keep") opts.keep = true;
        else if (arg === "--down") opts.down = true;
        else if (arg === "--fault") {
            const name = argv[++i];
            if (!name || !(name in FAULTS)) return { error: `--fault needs one of ${Object.keys(FAULTS).join(", ")}${name ? `, not ${JSON.stringify(name)}` : ""}` };
            opts.fault = name as FaultName;
        } else if (arg === "--hosts") {
            const n = argv[++i];
            if (n !== "2" && n !== "4") return { error: `--hosts is 2 or 4, not ${JSON.stringify(n ?? "")}` };
            opts.hosts = Number(n) as 2 | 4;
        } else return { error: `unknown argument ${JSON.stringify(arg)}` };
    }
    if (opts.down && (opts.keep || opts.fault || opts.hosts !== 2)) return { error: "--down takes no other option" };
    if (opts.keep && opts.fault) return { error: "--keep and --fault do not go together: a fault replay leaves nothing up" };
    return opts;
}
