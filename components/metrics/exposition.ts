// Prometheus' text exposition format, read: the lines a `/metrics` endpoint answers with. Pure.
//
// The format (prometheus.io/docs/instrumenting/exposition_formats/, "Text-based format"): `# HELP` and `# TYPE` lines
// and other `#` comments; a sample is `name{label="value",...} value [timestamp]`; label values escape `\\`, `\"` and
// `\n`; values are Go floats, `+Inf`, `-Inf` and `NaN` among them. vLLM's names hold colons (`vllm:num_requests_running`),
// which the format allows in metric names ([a-zA-Z_:][a-zA-Z0-9_:]*).

export interface Sample {
    name: string;
    labels: Record<string, string>;
    value: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

/** A sample value as the format writes it (Go's ParseFloat: `+Inf`, `-Inf`, `NaN`, decimal and exponent forms). */
function parseValue(text: string): number | undefined {
    if (text === "+Inf" || text === "Inf") return Infinity;
    if (text === "-Inf") return -Infinity;
    if (text === "NaN") return NaN;
    if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) return undefined;
    return Number(text);
}

/** The labels between `{` and `}` starting at REST, and what follows the `}`; undefined when they do not parse. */
function parseLabels(rest: string): { labels: Record<string, string>; after: string } | undefined {
    const labels: Record<string, string> = {};
    let i = 1;
    for (;;) {
        while (rest[i] === " ") i++;
        if (rest[i] === "}") return { labels, after: rest.slice(i + 1) };
        const name = LABEL_NAME.exec(rest.slice(i));
        if (!name) return undefined;
        i += name[0].length;
        while (rest[i] === " ") i++;
        if (rest[i] !== "=" || rest[i + 1] !== '"') return undefined;
        i += 2;
        let value = "";
        for (;;) {
            const c = rest[i];
            if (c === undefined) return undefined;
            if (c === '"') break;
            if (c === "\\") {
                const next = rest[i + 1];
                value += next === "n" ? "\n" : next === "\\" ? "\\" : next === '"' ? '"' : `\\${next ?? ""}`;
                i += 2;
            } else {
                value += c;
                i++;
            }
        }
        labels[name[0]] = value;
        i++;
        while (rest[i] === " ") i++;
        if (rest[i] === ",") i++;
        else if (rest[i] !== "}") return undefined;
    }
}

/**
 * Every sample in TEXT, in order. A line that is not a comment, not blank and not a sample is skipped and counted in
 * `skipped`: a reader of figures goes on with what it can read, and says how much it could not.
 */
export function parseExposition(text: string): { samples: Sample[]; skipped: number } {
    const samples: Sample[] = [];
    let skipped = 0;
    for (const raw of text.split("\n")) {
        const line = raw.trim();
        if (line === "" || line.startsWith("#")) continue;
        const name = NAME.exec(line);
        if (!name) { skipped++; continue; }
        let rest = line.slice(name[0].length);
        let labels: Record<string, string> = {};
        if (rest.startsWith("{")) {
            const parsed = parseLabels(rest);
            if (!parsed) { skipped++; continue; }
            labels = parsed.labels;
            rest = parsed.after;
        }
        const [valueText] = rest.trim().split(/\s+/);
        const value = valueText === undefined ? undefined : parseValue(valueText);
        if (value === undefined) { skipped++; continue; }
        samples.push({ name: name[0], labels, value });
    }
    return { samples, skipped };
}
