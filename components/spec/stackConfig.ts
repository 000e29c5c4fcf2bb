// Reading the stack's config: the namespace, which keys are secrets (only their presence is read), and every key of
// the namespace as `pulumi up` and `spark-vllm plan` both read it. Pure: no Pulumi. Checking it is parseSpec.ts.
import { TLS_CERTIFICATE_KEY, TLS_PRIVATE_KEY } from "./givenTls";

/** The stack config namespace: every key is `spark-vllm:<key>`. */
export const CONFIG_NAMESPACE = "spark-vllm";
/** Raw config values by key (without the namespace), as read from the stack. */
export type RawConfig = Record<string, unknown>;

/** The keys of the namespace (secrets included); parseSpec names any other. */
export const KNOWN_KEYS = ["hosts", "image", "imageSource", "model", "vllm", "ray", "probes", "logDir", "shmSizeMb", "sshPrivateKey", "hfToken", "endpoint", "testBed", "replicas", "rollout", "memoryGuard", "fabric", TLS_CERTIFICATE_KEY, TLS_PRIVATE_KEY];

/** Levenshtein distance, or limit + 1 as soon as it must exceed `limit` (keys may be huge). */
export function editDistance(a: string, b: string, limit = 3): number {
    if (Math.abs(a.length - b.length) > limit || a.length > 64 || b.length > 64) return limit + 1;
    const dp = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
    for (let j = 1; j <= b.length; j++) dp[0][j] = j;
    for (let i = 1; i <= a.length; i++)
        for (let j = 1; j <= b.length; j++)
            dp[i][j] = Math.min(dp[i - 1][j] + 1, dp[i][j - 1] + 1, dp[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    return dp[a.length][b.length];
}

/** Keys whose values are secrets. parseSpec sees only whether they are set; SparkCluster gets them as secret Outputs. */
export const SECRET_KEYS: readonly string[] = ["sshPrivateKey", "hfToken", TLS_CERTIFICATE_KEY, TLS_PRIVATE_KEY];
/** A set secret, as a RawConfig holds it: its presence, never its text. */
export const SECRET_SET = "[secret]";
/** A secret the stack file holds in plain text instead of `secure:`; parseSpec refuses it. */
export const SECRET_IN_PLAIN_TEXT = "[secret in plain text]";
/** A key outside our namespace that looks meant for it (`spark-vlm:model`, or `hosts` with no namespace). */
export const FOREIGN_KEY = "[key outside the spark-vllm namespace]";

/**
 * Whether a key's value is kept out of the raw config: a secret key, a near spelling of one, or an unknown key
 * whose name says secret. (Only top-level keys: a secret nested in an object must be read with
 * `config.getSecret`/`requireSecretObject` by whoever adds one, not through parseSpec.)
 */
function secretLike(key: string): boolean {
    const k = key.toLowerCase();
    if (SECRET_KEYS.some(s => editDistance(s.toLowerCase(), k) <= 3)) return true;
    return !KNOWN_KEYS.includes(key) && /key|token|secret|passw|credential/.test(k);
}

function nearNamespace(space: string, ns: string): boolean {
    const squash = (s: string) => s.toLowerCase().replace(/[^a-z0-9]/g, "");
    return squash(space) === squash(ns) || editDistance(space, ns, 2) <= 2;
}

/** Pulumi's config text: structured values arrive as JSON, scalars as their text. */
function parseConfigText(text: string): unknown {
    try {
        return JSON.parse(text);
    } catch {
        return text;
    }
}

/** How a stack's config map is read (rawConfigFromStack): every field is optional. */
export interface StackConfigOptions {
    /** Values are Pulumi's config text (JSON for structured values), as `pulumi up` hands them to the program. */
    text?: boolean;
    /** For a secret's value: whether the stack holds it in plain text (a stack file's `secure:` is not). */
    plainText?: (value: unknown) => boolean;
    /** Default spark-vllm. */
    namespace?: string;
}

/**
 * The raw config of our namespace, from a whole stack's config map (`spark-vllm:hosts` → value): every key,
 * known or not, so a misspelt key (`spark-vllm:vLLM`, `spark-vllm:modle`) is refused under `pulumi up`
 * (components/config.ts) with the same words as by `spark-vllm plan` (bin/shared.ts readStackFile); both read through
 * here. Secrets become SECRET_SET or SECRET_IN_PLAIN_TEXT, so their text never reaches the spec or a message.
 * A key whose namespace is one or two edits from ours, or that has none, is kept so parseSpec can name it;
 * other namespaces (`docker:`, `pulumi:`) are left alone.
 */
export function rawConfigFromStack(config: Record<string, unknown>, opts: StackConfigOptions = {}): RawConfig {
    const ns = opts.namespace ?? CONFIG_NAMESPACE;
    const raw: RawConfig = {};
    for (const full of Object.keys(config).sort()) {
        const colon = full.indexOf(":");
        const space = colon < 0 ? "" : full.slice(0, colon);
        const key = full.slice(colon + 1);
        const value = config[full];
        if (colon < 0) raw[`:${full}`] = FOREIGN_KEY;
        else if (space !== ns) {
            if (nearNamespace(space, ns)) raw[full] = FOREIGN_KEY;
        } else if (secretLike(key)) {
            if (value !== null && value !== undefined) raw[key] = opts.plainText?.(value) ? SECRET_IN_PLAIN_TEXT : SECRET_SET;
        } else raw[key] = opts.text && typeof value === "string" ? parseConfigText(value) : value;
    }
    return raw;
}
