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
