// What the replica files send through the endpoint: chat completions with the key, a few at a time.

/** `n` chat completions through the endpoint with the key, `concurrency` at a time; the statuses that were not 200. */
export async function load(endpoint: string, key: string, model: string, n: number, concurrency: number): Promise<string[]> {
    const failed: string[] = [];
    let next = 0;
    await Promise.all(Array.from({ length: concurrency }, async () => {
        while (next < n) {
            next++;
            try {
                const res = await fetch(`${endpoint}/chat/completions`, {
                    method: "POST",
                    headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
                    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
                    signal: AbortSignal.timeout(30_000),
                });
                const body = await res.text();
                if (res.status !== 200) failed.push(`${res.status} ${body.slice(0, 200)}`);
            } catch (e) {
                failed.push(String(e));
            }
        }
    }));
    return failed;
}

/**
 * Requests through the endpoint, `lanes` at a time with a pause of 0.5 s after each, for as long as `run` (an up) takes:
 * how many were sent, which failed, and the seconds (since `run` started) at which the first and the last failed
 * request was sent: the window the endpoint did not serve.
 */
export async function loadDuring<T>(run: () => Promise<T>, endpoint: string, key: string, model: string, lanes = 4):
    Promise<{ result: T; sent: number; failed: string[]; downSeconds: number; startedMs: number; firstFailedAt?: number; lastFailedAt?: number }> {
    let done = false, sent = 0;
    const failed: string[] = [], failedAt: number[] = [];
    const t0 = Date.now();
    const all = Array.from({ length: lanes }, async () => {
        while (!done) {
            sent++;
            const at = (Date.now() - t0) / 1000;
            const f = await load(endpoint, key, model, 1, 1);
            if (f.length) { failed.push(...f); failedAt.push(at); }
            await new Promise(r => setTimeout(r, 500));
        }
    });
    const result = await run().finally(() => { done = true; });
    await Promise.all(all);
    const first = failedAt.length ? Math.min(...failedAt) : undefined, last = failedAt.length ? Math.max(...failedAt) : undefined;
    return { result, sent, failed, downSeconds: first === undefined ? 0 : last! - first + 0.5, startedMs: t0, firstFailedAt: first, lastFailedAt: last };
}
