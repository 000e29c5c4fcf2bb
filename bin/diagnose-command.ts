// `spark-vllm diagnose FILE|- [--json]`: the root cause of a vLLM log, offline.
// `spark-vllm diagnose --stack NAME [--json] [--dir DIR]`: the cluster's root cause from every host's own logs, read
// over SSH (bin/diagnose-stack.ts).
// Exit 0: diagnosis found; 1: none found; 2: usage error or unreadable input (bin/shared.ts EXIT).
import { readFile } from "node:fs/promises";
import { contextAround, normaliseLog } from "../components/knowledge/diagnosis";
import { diagnoseWithNccl as diagnose } from "../components/knowledge/nccl";
import { EXIT } from "./shared";

const USAGE = "usage: spark-vllm diagnose FILE|- [--json]   (- reads the log from stdin)\n" +
    "       spark-vllm diagnose --stack NAME [--json] [--dir DIR]   (every host's logs, over SSH)";

async function readStdin(): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
    return Buffer.concat(chunks).toString("utf8");
}

export async function diagnoseCommand(args: string[]): Promise<number> {
    // Loaded only here: a log file's diagnosis stays a cold start of the diagnosis module alone (docs/benchmarks.md).
    if (args.includes("--stack") || args.includes("-s"))
        return (require("./diagnose-stack") as typeof import("./diagnose-stack")).diagnoseStack(args, USAGE);
    if (args.includes("--help") || args.includes("-h")) {
        console.log(USAGE);
        return EXIT.ok;
    }
    const json = args.includes("--json");
    const rest = args.filter(a => a !== "--json");
    const unknown = rest.filter(a => a.startsWith("-") && a !== "-");
    if (rest.length !== 1 || unknown.length > 0) {
        console.error(unknown.length > 0 ? `spark-vllm diagnose: unknown option ${unknown[0]}\n${USAGE}` : USAGE);
        return EXIT.usage;
    }
    const file = rest[0];
    let log: string;
    try {
        log = file === "-" ? await readStdin() : await readFile(file, "utf8");
    } catch (err) {
        const why = err instanceof Error ? err.message : String(err);
        console.error(`spark-vllm diagnose: cannot read ${file === "-" ? "stdin" : file}: ${why}`);
        return EXIT.usage;
    }

    const found = diagnose(log);
    if (json) console.log(JSON.stringify(found ?? null, null, 2));
    if (!found) {
        const lines = normaliseLog(log).filter(l => l.length > 0).length;
        console.error(`no known root cause found in ${lines} lines; read the full log`);
        return EXIT.failure;
    }
    if (!json) {
        const context = contextAround(log, found.line);
        console.log(
            [
                `kind: ${found.kind}`,
                `root cause: ${found.line}`,
                ...(found.transport ? [`transport: ${found.transport} (what NCCL used)`] : []),
                `hint: ${found.hint}`,
                "context:",
                ...context.map(l => (l.endsWith(found.line) ? `> ${l}` : `  ${l}`)),
            ].join("\n"),
        );
    }
    return EXIT.ok;
}
