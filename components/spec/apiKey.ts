// A caller-given API key (SparkClusterArgs.apiKey, the component package's `apiKey` input): the rule it must meet.
// Pure: no Pulumi. Never shows the key: only its length and which rule it breaks.

/** Where the key is given, as errors name it. */
export const API_KEY_PATH = "apiKey";

/**
 * At least this many characters. The generated key is 40 (a RandomPassword of letters and digits, about 238 bits); 32
 * is what `openssl rand -hex 16` prints (128 bits), the least a key guarded only by the proxy's comparison should have.
 */
export const API_KEY_MIN_CHARS = 32;
/** Longer is a mistake (a file, a certificate); the key travels as one stdin line. */
export const API_KEY_MAX_CHARS = 512;

/**
 * RFC 6750 section 2.1: a Bearer credential is a b64token, `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
 * The proxy can match only such a key (components/plan/proxyPlan.ts proxyConfig refuses any other on the head).
 */
const B64TOKEN = /^[A-Za-z0-9._~+/-]+=*$/;

const HOW = `generate one with \`openssl rand -hex 32\`, or leave ${API_KEY_PATH} unset for a generated 40-character key`;

/** What is wrong with a given key, each a sentence that names the rule; [] when it meets it. */
export function apiKeyProblems(key: unknown): string[] {
    if (typeof key !== "string") return [`must be a string; ${HOW}`];
    if (key.length < API_KEY_MIN_CHARS)
        return [`is ${key.length} character${key.length === 1 ? "" : "s"} long; an API key must be at least ${API_KEY_MIN_CHARS} (a short key can be guessed); ${HOW}`];
    if (key.length > API_KEY_MAX_CHARS) return [`is ${key.length} characters long; at most ${API_KEY_MAX_CHARS}; ${HOW}`];
    if (!B64TOKEN.test(key))
        return [`has characters outside RFC 6750's b64token (A-Z a-z 0-9 - . _ ~ + / and = only at the end), which a Bearer header cannot carry; ${HOW}`];
    return [];
}

/** The error for a key that breaks the rule (each problem on its own line, at the key path), or undefined. */
export function apiKeyError(key: unknown): Error | undefined {
    const problems = apiKeyProblems(key);
    if (problems.length === 0) return undefined;
    return new Error(`invalid API key:\n${problems.map(p => `  - ${API_KEY_PATH}: ${p}`).join("\n")}`);
}
