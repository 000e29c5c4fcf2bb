// Talking to the endpoint as a user would: the stack outputs `endpoint` and `apiKey` in two variables, and `curl`
// lines that are printed exactly as they are run (so they can be pasted).
import { spawnSync } from "node:child_process";
import { shq } from "../../components/plan/scripts";

export const ENDPOINT_VAR = "SPARK_VLLM_ENDPOINT";
export const KEY_VAR = "SPARK_VLLM_API_KEY";

export const QUESTION = "In one sentence: what does spark-vllm do?";

export function exportLine(endpoint: string, apiKey: string): string {
    return `export ${ENDPOINT_VAR}=${shq(endpoint)} ${KEY_VAR}=${shq(apiKey)}`;
}

/** An OpenAI chat completion with the API key. */
export function chatCurl(model: string): string {
    const body = JSON.stringify({ model, messages: [{ role: "user", content: QUESTION }], max_tokens: 32 });
    return `curl -sS "$${ENDPOINT_VAR}/chat/completions" -H "Authorization: Bearer $${KEY_VAR}" -H 'Content-Type: application/json' -d ${shq(body)}`;
}

/** The same endpoint without the key: vLLM's --api-key guards /v1 (docs/security.md), so this is refused. */
export function noKeyCurl(): string {
    return `curl -sS -w '\\nHTTP %{http_code}\\n' "$${ENDPOINT_VAR}/models"`;
}

export interface Ran {
    code: number;
    stdout: string;
    stderr: string;
}

/** Runs a line shown to the user with bash, the two variables set as `exportLine` sets them. */
export function runShown(line: string, endpoint: string, apiKey: string): Ran {
    const r = spawnSync("bash", ["-c", line], {
        encoding: "utf8",
        env: { ...process.env, [ENDPOINT_VAR]: endpoint, [KEY_VAR]: apiKey },
        timeout: 30_000,
    });
    return { code: r.status ?? 1, stdout: r.stdout ?? "", stderr: r.stderr ?? String(r.error ?? "") };
}

/** The answer of a chat completion response, or why there is none. */
export function answerOf(body: string): { answer?: string; problem?: string } {
    try {
        const content = JSON.parse(body)?.choices?.[0]?.message?.content;
        return typeof content === "string" ? { answer: content } : { problem: `no choices[0].message.content in ${body.slice(0, 300)}` };
    } catch {
        return { problem: `not JSON: ${body.slice(0, 300)}` };
    }
}
