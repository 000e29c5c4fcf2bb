// Command text read as the shell reads it, for rules that must judge real arguments rather than substrings (issue 41:
// ` --headless` inside another argument's value is not the option). No expansions are done: spark-vllm's commands
// quote every value (components/plan/scripts.ts shq), so the words are what the shell passes on.

export type ShellToken = { word: string } | { op: string };

const OPERATOR = /[;&|<>()\n]/;
const BLANK = /[ \t]/;

/**
 * The tokens of a POSIX shell text (POSIX.1-2017 XCU 2.2 Quoting, 2.3 Token Recognition): '…' is literal, "…" keeps
 * its text with `\` escaping $ ` " \ and newline, `\` outside quotes escapes the next character (and drops an escaped
 * newline), unquoted ; & | < > ( ) and newline are operators, and a `#` that starts a word begins a comment.
 * Undefined when a quote is never closed.
 */
export function shellTokens(text: string): ShellToken[] | undefined {
    const tokens: ShellToken[] = [];
    let word: string | undefined;
    const end = () => {
        if (word !== undefined) tokens.push({ word });
        word = undefined;
    };
    for (let i = 0; i < text.length; i++) {
        const c = text[i];
        if (c === "'") {
            const close = text.indexOf("'", i + 1);
            if (close < 0) return undefined;
            word = (word ?? "") + text.slice(i + 1, close);
            i = close;
        } else if (c === '"') {
            let s = "";
            for (i++; i < text.length && text[i] !== '"'; i++) {
                if (text[i] === "\\" && i + 1 < text.length && '$`"\\\n'.includes(text[i + 1])) {
                    if (text[i + 1] !== "\n") s += text[i + 1];
                    i++;
                } else s += text[i];
            }
            if (i >= text.length) return undefined;
            word = (word ?? "") + s;
        } else if (c === "\\") {
            if (i + 1 < text.length && text[i + 1] !== "\n") word = (word ?? "") + text[i + 1];
            i++;
        } else if (c === "#" && word === undefined) {
            while (i + 1 < text.length && text[i + 1] !== "\n") i++;
        } else if (BLANK.test(c)) end();
        else if (OPERATOR.test(c)) {
            end();
            let op = c;
            while (c !== "\n" && i + 1 < text.length && /[;&|<>]/.test(text[i + 1])) op += text[++i];
            tokens.push({ op });
        } else word = (word ?? "") + c;
    }
    end();
    return tokens;
}

/**
 * Every `vllm serve` argument list (from `vllm` to the first operator) in a command text and in each script it runs
 * with `bash -c` / `sh -c` (`docker exec … bash -c '…'`), as the shell splits them. Undefined when some text cannot be
 * split (an open quote): a rule then knows nothing about the arguments.
 */
export function vllmServeArgvs(text: string, depth = 0): string[][] | undefined {
    const tokens = shellTokens(text);
    if (!tokens || depth > 4) return undefined;
    const argvs: string[][] = [];
    for (let i = 0; i < tokens.length; i++) {
        const t = tokens[i];
        if (!("word" in t)) continue;
        const prev = tokens[i - 1];
        const next = tokens[i + 1];
        if (t.word === "-c" && prev && "word" in prev && /(^|\/)(ba)?sh$/.test(prev.word) && next && "word" in next) {
            const inner = vllmServeArgvs(next.word, depth + 1);
            if (!inner) return undefined;
            argvs.push(...inner);
            i++;
        } else if (t.word === "vllm" && next && "word" in next && next.word === "serve") {
            const argv: string[] = [];
            for (let j = i; j < tokens.length && "word" in tokens[j]; j++) argv.push((tokens[j] as { word: string }).word);
            argvs.push(argv);
        }
    }
    return argvs;
}
