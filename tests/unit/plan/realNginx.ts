// The real nginx running a generated configuration on loopback (tests/unit/plan/proxy-nginx.test.ts,
// proxy-replicas-nginx.test.ts). Needs an nginx binary: $SPARK_VLLM_NGINX, else /usr/sbin/nginx (Debian's `nginx`
// package, bookworm 1.22.1: the nginx the simulated Sparks' proxy image runs, tests/sim/image.ts PROXY_INCLUDE). Runs
// as root (nginx's `user nobody` needs it; CI runs as root), on 127.0.0.1 only.
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { ChildProcess, spawn } from "node:child_process";
import { PROXY_MOUNT } from "../../../components/plan/proxyPlan";

export const NGINX = process.env.SPARK_VLLM_NGINX ?? "/usr/sbin/nginx";

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.once("error", reject);
        s.listen(0, "127.0.0.1", () => { const p = (s.address() as net.AddressInfo).port; s.close(() => resolve(p)); });
    });
}

export interface RunningNginx {
    dir: string;
    process: ChildProcess;
    /** What nginx has written to stderr so far. */
    stderr(): string;
    /** Stops nginx (SIGTERM, waiting for its exit) and removes its directory. */
    stop(): Promise<void>;
}

/**
 * Starts nginx on `conf` (nginxConf's text) with only its file paths moved into a temp directory of its own (each
 * replacement must match, so a renamed path in the generated text fails here) and `key` as the one accepted API key.
 */
export function startNginx(conf: string, key: string, prefix: string, opts: { dir?: string; files?: Record<string, string> } = {}): RunningNginx {
    assert.ok(fs.existsSync(NGINX), `no nginx at ${NGINX}: install Debian's nginx (apt-get install nginx) or set SPARK_VLLM_NGINX`);
    // `dir`: where the proxy's files go (made here); else a temp directory of its own. `files`: more files written there.
    const dir = opts.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    fs.mkdirSync(dir, { recursive: true });
    for (const [name, text] of Object.entries(opts.files ?? {})) fs.writeFileSync(path.join(dir, name), text);
    fs.chmodSync(dir, 0o755);
    const move = (from: string, to: string) => { assert.ok(conf.includes(from), from); conf = conf.split(from).join(to); };
    move(PROXY_MOUNT, dir);
    move("pid /tmp/nginx.pid;", `pid ${dir}/nginx.pid;`);
    move("    server_tokens off;", `    server_tokens off;\n` +
        ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map(t => `    ${t}_temp_path ${dir}/${t};\n`).join(""));
    fs.writeFileSync(path.join(dir, "nginx.conf"), conf);
    fs.writeFileSync(path.join(dir, "api-key.map"), `"~^[Bb][Ee][Aa][Rr][Ee][Rr] ${key.replace(/[.+]/g, "[$&]")}$" 1;\n`);
    const nginx = spawn(NGINX, ["-e", "stderr", "-p", dir, "-c", path.join(dir, "nginx.conf")], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    nginx.stderr!.on("data", d => (stderr += d));
    return {
        dir, process: nginx, stderr: () => stderr,
        stop: async () => {
            if (nginx.exitCode === null && nginx.signalCode === null) {
                nginx.kill("SIGTERM");
                await new Promise(r => nginx.once("exit", r));
            }
            fs.rmSync(dir, { recursive: true, force: true });
        },
    };
}
