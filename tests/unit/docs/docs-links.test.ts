// The README and docs/ as a reader follows them: every relative link points at a file that exists, every
// `#anchor` at a heading of its target (GitHub's slugs), and the README stays a front door (under 200 lines).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";

const ROOT = path.join(__dirname, "..", "..", "..");

/** The markdown files a reader starts from: README.md and every page in docs/. */
function markdownFiles(root: string = ROOT): string[] {
    const docs = path.join(root, "docs");
    return [path.join(root, "README.md"), ...fs.readdirSync(docs).filter(f => f.endsWith(".md")).sort().map(f => path.join(docs, f))];
}

/** The text without fenced code blocks (``` or ~~~), whose brackets and `#` lines are not markdown. */
function withoutFences(text: string): string[] {
    const out: string[] = [];
    let fence: string | undefined;
    for (const line of text.split("\n")) {
        const m = /^ {0,3}(`{3,}|~{3,})/.exec(line);
        if (fence) {
            if (m && m[1][0] === fence[0] && m[1].length >= fence.length && line.trim() === m[1]) fence = undefined;
            out.push("");
        } else if (m) {
            fence = m[1];
            out.push("");
        } else out.push(line);
    }
    return out;
}

/**
 * GitHub's anchor for a heading: lowercase, punctuation but `-` and `_` dropped, each space a `-`, repeats numbered
 * `-1`, `-2` (the rules github-slugger reproduces from GitHub's renderer: Flet/github-slugger index.js `slug` and
 * `Slugger.slug`; the removed characters are its generated regex, script/generate-regex.mjs, approximated here as "not a letter, mark, number,
 * connector, space or -").
 */
function slug(heading: string): string {
    return heading
        .replace(/<[^>]*>/g, "")                       // inline HTML
        .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")     // a link's text
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
        .replace(/ /g, "-");
}

/** Every anchor a markdown file's headings make, with GitHub's `-1`, `-2` for repeats. */
function anchors(text: string): Set<string> {
    const seen = new Map<string, number>();
    const out = new Set<string>();
    for (const line of withoutFences(text)) {
        const m = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
        if (!m) continue;
        const base = slug(m[1]);
        const n = seen.get(base) ?? 0;
        seen.set(base, n + 1);
        out.add(n === 0 ? base : `${base}-${n}`);
    }
    return out;
}

interface Link { file: string; line: number; target: string }

/** The relative links of a markdown file, `[text](path)` and `[text](path#anchor)`; no URL, no code. */
function relativeLinks(file: string, text: string): Link[] {
    const links: Link[] = [];
    withoutFences(text).forEach((raw, i) => {
        const line = raw.replace(/(`+)[\s\S]*?\1/g, "");   // inline code spans
        for (const m of line.matchAll(/\[(?:[^\]]|\][^(])*?\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
            const target = m[1];
            if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;   // http(s):, mailto: …
            links.push({ file, line: i + 1, target });
        }
    });
    return links;
}

/** What is wrong with a link: a missing file or a missing heading; undefined when it works. */
function brokenLink(link: Link): string | undefined {
    const [rawPath, anchor] = link.target.split("#", 2) as [string, string | undefined];
    const target = rawPath === "" ? link.file : path.resolve(path.dirname(link.file), decodeURIComponent(rawPath));
    if (!fs.existsSync(target)) return `no such file: ${path.relative(ROOT, target)}`;
    if (anchor === undefined || !target.endsWith(".md") || fs.statSync(target).isDirectory()) return undefined;
    const have = anchors(fs.readFileSync(target, "utf8"));
    return have.has(decodeURIComponent(anchor).toLowerCase()) ? undefined : `no heading #${anchor} in ${path.relative(ROOT, target)}`;
}

test("GitHub's slugs: punctuation dropped, spaces to -, repeats numbered", () => {
    assert.equal(slug("Is it serving? `spark-vllm status`"), "is-it-serving-spark-vllm-status");
    assert.equal(slug("See it run: `sudo npm run demo` (no Sparks needed)"), "see-it-run-sudo-npm-run-demo-no-sparks-needed");
    assert.equal(slug("A new owner's path: `init` → `plan` → `pulumi up`"), "a-new-owners-path-init--plan--pulumi-up");
    assert.equal(slug("`logDir` ownership"), "logdir-ownership");
    assert.deepEqual([...anchors("# A\n## Recovery\n```sh\n# not a heading\n```\n### Recovery\n## Recovery\n")], ["a", "recovery", "recovery-1", "recovery-2"]);
});

test("a broken link is found: a missing file, a missing heading; a URL and a link in code are not links", () => {
    const file = path.join(ROOT, "README.md");
    const links = relativeLinks(file, "[a](docs/nope.md) [b](docs/operations.md#nope) [c](https://example.com/x.md)\n`[d](nope.md)`\n```\n[e](nope.md)\n```\n[f](docs/operations.md#recovery)");
    assert.deepEqual(links.map(l => l.target), ["docs/nope.md", "docs/operations.md#nope", "docs/operations.md#recovery"]);
    assert.match(brokenLink(links[0]) ?? "", /no such file: docs\/nope\.md/);
    assert.match(brokenLink(links[1]) ?? "", /no heading #nope in docs\/operations\.md/);
    assert.equal(brokenLink(links[2]), undefined);
});

test("every relative link in README.md and docs/*.md points at an existing file and heading", () => {
    const problems: string[] = [];
    let count = 0;
    for (const file of markdownFiles()) {
        for (const link of relativeLinks(file, fs.readFileSync(file, "utf8"))) {
            count++;
            const why = brokenLink(link);
            if (why) problems.push(`${path.relative(ROOT, link.file)}:${link.line}: (${link.target}) ${why}`);
        }
    }
    assert.ok(count > 20, `only ${count} links found: the parser is broken`);
    assert.deepEqual(problems, []);
});

test("the README is a front door: fewer than 200 lines", () => {
    const lines = fs.readFileSync(path.join(ROOT, "README.md"), "utf8").replace(/\n$/, "").split("\n").length;
    assert.ok(lines < 200, `README.md has ${lines} lines; move the detail to docs/`);
});
