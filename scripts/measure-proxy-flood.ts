// Measures, with the real nginx on loopback, how many connections one address must hold (each with only part of a
// request header sent) before a second address's requests are refused, for the proxy of one replica and the front of
// several: the figures in docs/security.md ("Connections per client"). Needs root and nginx (tests/unit/plan/realNginx.ts).
//   node --import tsx scripts/measure-proxy-flood.ts [COUNTS...]     (default 1000 1900 2100 4000 16000 28000)
import * as http from "node:http";
import * as path from "node:path";
import { spawn } from "node:child_process";
import { parseSpec } from "../components/spec/parseSpec";
import { REPLICAS_FILE, nginxConf, replicasFile } from "../components/plan/proxyPlan";
import { freePort, startNginx } from "../tests/unit/plan/realNginx";
import { requestsFrom } from "../tests/unit/plan/connectionFlood";
import { rawConfig } from "../tests/fixtures";

const KEY = "measureKey0123456789abcdefghijklmnop";

async function main() {
    const counts = process.argv.slice(2).map(Number);
    const upstream = http.createServer((req, res) => { req.resume(); req.on("end", () => res.end("{}")); });
    const up = await freePort();
    await new Promise<void>(r => upstream.listen(up, "127.0.0.1", r));
    for (const front of [false, true]) {
        for (const count of counts.length ? counts : [1000, 1900, 2100, 4000, 16000, 28000]) {
            const port = await freePort();
            const spec = parseSpec({ ...rawConfig(1), vllm: { ...rawConfig(1).vllm, port, internalPort: up } });
            const servers = [`127.0.0.1:${up}`];
            const nginx = startNginx(nginxConf(spec, front ? { replicas: servers } : {}), KEY, "spark-vllm-flood-",
                { files: front ? { [REPLICAS_FILE]: replicasFile(servers) } : {} });
            const request = `GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nConnection: close\r\n\r\n`;
            for (let i = 0; i < 100 && (await requestsFrom(port, "127.0.0.2", 1, request))[0] !== 200; i++) await new Promise(r => setTimeout(r, 50));
            // The flood in a process of its own, so the second client's requests are not slowed by its event loop.
            const flood = spawn(process.execPath, ["--import", "tsx", "-e",
                `require("./tests/unit/plan/connectionFlood").holdPartialHeaders(${port}, ${count}, "127.0.0.1", { batch: 500, refill: true })` +
                `.then(f => { console.log("opened " + f.opened + " failed " + f.failed); setInterval(() => console.log("holding " + f.open() + " closed " + f.closedByServer()), 1000); })`],
                { cwd: path.join(__dirname, ".."), stdio: ["ignore", "pipe", "inherit"] });
            let said = "";
            flood.stdout!.on("data", d => (said += d));
            const t0 = Date.now();
            while (!/opened/.test(said) && Date.now() - t0 < 400_000) await new Promise(r => setTimeout(r, 200));
            const held = Date.now() - t0;
            await new Promise(r => setTimeout(r, 2000));
            const other = await requestsFrom(port, "127.0.0.2", 10, request);
            flood.kill();
            await new Promise(r => flood.once("exit", r));
            const [opened, failed] = (/opened (\d+) failed (\d+)/.exec(said) ?? []).slice(1).map(Number);
            const [holding, closed] = ([...said.matchAll(/holding (\d+) closed (\d+)\n/g)].pop() ?? []).slice(1).map(Number);
            const complaints = nginx.stderr().split("\n").filter(l => /not enough|Too many open files|limiting/.test(l)).length;
            await nginx.stop();
            console.log(JSON.stringify({ proxy: front ? "front of replicas" : "one replica", held: count, opened, holding, failedToOpen: failed,
                closedByServerMeanwhile: closed, secondClientOk: other.filter(s => s === 200).length, of: other.length, statuses: [...new Set(other)], msToOpen: held, nginxComplaints: complaints }));
        }
    }
    upstream.close();
}
main().catch(e => { console.error(e); process.exit(1); });
