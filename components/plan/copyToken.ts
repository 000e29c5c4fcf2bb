// head-then-copy: each worker's own copy token (issue 30). Pure: no Pulumi.
//
// The head's copy server holds the stack's copy token; each worker's copy receives only its own token, derived from
// it, so the token a request carries names the worker, and a worker can neither report another one done nor act
// as the server. Mirrored by worker_token in components/hostProgram/spark_vllm/weights_source.py (tests/unit/plan/weights-copy.test.ts
// checks that both give the same token).
import * as crypto from "crypto";

export const WORKER_TOKEN_CONTEXT = "spark-vllm weights worker ";

/** HMAC-SHA256 of the worker's host name under the copy token, hex. */
export function workerCopyToken(copyToken: string, host: string): string {
    return crypto.createHmac("sha256", copyToken).update(WORKER_TOKEN_CONTEXT + host).digest("hex");
}
