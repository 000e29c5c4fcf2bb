// One address holding many connections to a proxy, each with only part of a request header sent (a "slowloris"), and
// a second address's requests meanwhile: the test of components/plan/proxyPlan.ts's per-client limits
// (tests/unit/plan/proxy-limits-nginx.test.ts) and the measurement in docs/security.md (scripts/measure-proxy-flood.ts).
import * as net from "node:net";

/** The connections one address holds, and how many of them the server has closed so far. */
export interface Flood {
    /** Connections that were established. */
    opened: number;
    /** Connections that failed to open (refused, reset, timed out). */
    failed: number;
    /** Connections held open now. */
    open(): number;
    /** Established connections the server has closed since. */
    closedByServer(): number;
    /** What the server sent on the held connections (a 408 is nginx's answer to a header that did not arrive in time). */
    answers(): string[];
    end(): void;
}

/**
 * Opens `count` connections from `from` to 127.0.0.1:`port`, `batch` at a time, each sending `partial` (a request line
 * and one header, never the blank line that ends the header) and then nothing.
 */
export async function holdPartialHeaders(port: number, count: number, from: string, opts: { batch?: number; partial?: string; refill?: boolean } = {}): Promise<Flood> {
    const partial = opts.partial ?? "GET /v1/models HTTP/1.1\r\nHost: x\r\n";
    const sockets = new Set<net.Socket>();
    const answers: string[] = [];
    let failed = 0, closed = 0;
    const batch = opts.batch ?? 200;
    let ended = false;
    // With `refill`, a connection the server closes is opened again at once, as a persistent attacker would.
    const open = () => new Promise<void>(resolve => {
        const s = net.connect({ port, host: "127.0.0.1", localAddress: from });
        let established = false;
        const timer = setTimeout(() => { s.destroy(); }, 5000);
        s.on("connect", () => {
            established = true;
            clearTimeout(timer);
            sockets.add(s);
            s.write(partial);
            resolve();
        });
        s.on("data", d => answers.push(d.toString("latin1").split("\r\n")[0]));
        s.on("error", () => {});
        s.on("close", () => {
            clearTimeout(timer);
            sockets.delete(s);
            if (established) closed++;
            else { failed++; resolve(); }
            if (established && opts.refill && !ended) setTimeout(() => { if (!ended) void open(); }, 10);
        });
    });
    for (let i = 0; i < count; i += batch) await Promise.all(Array.from({ length: Math.min(batch, count - i) }, open));
    return {
        opened: sockets.size, failed,
        open: () => sockets.size,
        closedByServer: () => closed,
        answers: () => answers,
        end: () => { ended = true; for (const s of sockets) s.destroy(); },
    };
}

/** `n` requests from `from`, one after another, each on its own connection: the statuses (0: no answer within 5 s). */
export async function requestsFrom(port: number, from: string, n: number, request: string): Promise<number[]> {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
        out.push(await new Promise<number>(resolve => {
            const s = net.connect({ port, host: "127.0.0.1", localAddress: from });
            let raw = "";
            const done = () => { clearTimeout(timer); s.destroy(); const m = /^HTTP\/1\.[01] (\d{3})/.exec(raw); resolve(m ? Number(m[1]) : 0); };
            const timer = setTimeout(done, 5000);
            s.on("connect", () => s.write(request));
            s.on("data", d => { raw += d.toString("latin1"); if (/\r\n\r\n/.test(raw)) done(); });
            s.on("error", () => {});
            s.on("close", done);
        }));
    }
    return out;
}
