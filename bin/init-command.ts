// `spark-vllm init --stack NAME --host [USER@]ADDRESS[:PORT]… [--identity KEY] [--model ID] [--image REF] [--dir DIR]
// [--dry-run] [--force]`: reads every host over SSH (one read-only script each, all at once) and writes
// Pulumi.<stack>.yaml from what they report. The choices are components/init/initChoose.ts; the script components/init/initFacts.ts.
import { spawn } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { DOCKER_SSH_OPTS } from "../components/plan/connection";
import { HostResult, HostTarget, chooseStack, parseHostTarget, renderReport } from "../components/init/initChoose";
import { initHostScript, parseHostFacts } from "../components/init/initFacts";
import { show } from "../components/spec/showValue";
import { EXIT, STACK_NAME } from "./shared";

const USAGE = "usage: spark-vllm init --stack NAME --host [USER@]ADDRESS[:PORT] [--host …] [--identity KEY] [--model ID] [--image REF] [--dir DIR] [--dry-run] [--force]";
/** A host that answers nothing for this long is reported unreachable (as `spark-vllm status`). */
const HOST_TIMEOUT_MS = 60_000;

/**
 * The OpenSSH argv for one host: `spark-vllm status`'s options (the Docker provider's: batch mode, never prompting,
 * ~/.ssh/known_hosts), the given key or else the agent's.
 */
export function initSshArgv(t: HostTarget, identity?: string): string[] {
    return ["ssh", ...DOCKER_SSH_OPTS, ...(identity ? ["-i", identity] : []), "-p", String(t.port), `${t.user}@${t.host}`, "sh -s"];
}

function readHost(target: HostTarget, identity: string | undefined): Promise<HostResult> {
    return new Promise(resolve => {
        const [cmd, ...args] = initSshArgv(target, identity);
        const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "pipe"] });
        let stdout = "", stderr = "";
        child.stdout.on("data", d => { stdout += d; });
        child.stderr.on("data", d => { stderr += d; });
        const timer = setTimeout(() => { stderr += `\nno answer within ${HOST_TIMEOUT_MS / 1000} s`; child.kill("SIGKILL"); }, HOST_TIMEOUT_MS);
        const said = () => stderr.trim().split("\n").filter(Boolean).pop()?.slice(0, 300);
        child.on("error", err => { clearTimeout(timer); resolve({ target, unreachable: `cannot run ${cmd}: ${err.message}` }); });
        child.on("close", code => {
            clearTimeout(timer);
            // The script ends with the images section: without it SSH (or the shell) failed before the end.
            if (code !== 0 || !stdout.includes("@@spark-vllm-init images.rc")) resolve({ target, unreachable: said() ?? `exit ${code}` });
            else resolve({ target, facts: parseHostFacts(stdout) });
        });
        child.stdin.on("error", () => { /* the host hung up before reading: close reports it */ });
        child.stdin.end(initHostScript());
    });
}

interface InitArgs {
    stack: string;
    hosts: HostTarget[];
    identity?: string;
    model?: string;
    image?: string;
    dir: string;
    dryRun: boolean;
    force: boolean;
}

function parseArgs(args: string[]): InitArgs | number {
    const hosts: string[] = [];
    let stack: string | undefined, identity: string | undefined, model: string | undefined, image: string | undefined;
    let dir = process.cwd(), dryRun = false, force = false;
    const valued = ["--stack", "-s", "--host", "--identity", "-i", "--model", "--image", "--dir"];
    for (let i = 0; i < args.length; i++) {
        const a = args[i];
        if (valued.includes(a) && (args[i + 1] === undefined || args[i + 1].startsWith("-"))) {
            console.error(`spark-vllm init: ${a} needs a value\n${USAGE}`);
            return EXIT.usage;
        }
        if (a === "--stack" || a === "-s") stack = args[++i];
        else if (a === "--host") hosts.push(args[++i]);
        else if (a === "--identity" || a === "-i") identity = args[++i];
        else if (a === "--model") model = args[++i];
        else if (a === "--image") image = args[++i];
        else if (a === "--dir") dir = args[++i];
        else if (a === "--dry-run") dryRun = true;
        else if (a === "--force") force = true;
        else if (a === "--help" || a === "-h") {
            console.log(USAGE);
            return EXIT.ok;
        } else {
            console.error(`spark-vllm init: unknown argument ${show(a)}\n${USAGE}`);
            return EXIT.usage;
        }
    }
    const problems: string[] = [];
    if (!stack) problems.push("--stack NAME is required");
    else if (!STACK_NAME.test(stack)) problems.push(`${show(stack)} is not a stack name (letters, digits, -, _ and .)`);
    if (hosts.length === 0) problems.push("at least one --host is required (the first is the head)");
    const user = process.env.USER || os.userInfo().username;
    const targets = hosts.map(h => parseHostTarget(h, user));
    for (const t of targets) if ("problem" in t) problems.push(t.problem);
    const seen = new Set<string>();
    for (const t of targets) if (!("problem" in t)) {
        const key = `${t.host.toLowerCase()}:${t.port}`;
        if (seen.has(key)) problems.push(`--host ${t.host}:${t.port} is given twice`);
        seen.add(key);
    }
    if (model !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/.test(model)) problems.push(`--model ${show(model)}: expected a Hugging Face id ORG/NAME`);
    if (identity !== undefined && !fs.existsSync(identity)) problems.push(`--identity ${identity}: no such file`);
    if (problems.length) {
        console.error(problems.map(p => `spark-vllm init: ${p}`).join("\n") + `\n${USAGE}`);
        return EXIT.usage;
    }
    return { stack: stack!, hosts: targets as HostTarget[], identity, model, image, dir, dryRun, force };
}

export async function initCommand(args: string[]): Promise<number> {
    const a = parseArgs(args);
    if (typeof a === "number") return a;
    const file = path.join(a.dir, `Pulumi.${a.stack}.yaml`);
    // Refused before any host is asked: nothing would be written anyway.
    if (!a.dryRun && !a.force && fs.existsSync(file)) {
        console.error(`spark-vllm init: ${file} exists; pass --force to overwrite it, or --dry-run to print the new one`);
        return EXIT.config;
    }
    const results = await Promise.all(a.hosts.map(t => readHost(t, a.identity)));
    const r = chooseStack(results, { stack: a.stack, model: a.model, image: a.image, identity: a.identity, now: new Date() });
    process.stderr.write(renderReport(r));
    if (r.problems.length || !r.yaml) return EXIT.config;
    if (a.dryRun) {
        process.stdout.write(r.yaml);
        return EXIT.ok;
    }
    fs.writeFileSync(file, r.yaml, { flag: a.force ? "w" : "wx" });
    console.error(`\nwrote ${file}; next: npx spark-vllm plan --stack ${a.stack}, then pulumi up -s ${a.stack}`);
    return EXIT.ok;
}
