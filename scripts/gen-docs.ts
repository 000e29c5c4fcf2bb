// Generates the reference parts of docs/ from the code they describe:
//   docs/configuration.md            whole file, from components/spec/configSchema.ts
//   docs/troubleshooting.md          the block between the GENERATED markers, from DIAGNOSIS_CATALOG
// `npm run docs` rewrites them; `npm run docs -- --check` only says whether they are up to date (exit 1
// when not). tests/unit/docs/docs-config.test.ts fails when a committed file differs from what this renders.
import * as fs from "fs";
import * as path from "path";
import * as yaml from "js-yaml";
import { CONFIG_SCHEMA, ConfigKey, SCHEMA_NAMESPACE } from "../components/spec/configSchema";
import { DIAGNOSIS_CATALOG } from "../components/knowledge/diagnosis";

const ROOT = path.join(__dirname, "..");
export const CONFIGURATION_MD = path.join(ROOT, "docs", "configuration.md");
export const TROUBLESHOOTING_MD = path.join(ROOT, "docs", "troubleshooting.md");
export const BEGIN = "<!-- BEGIN GENERATED from DIAGNOSIS_CATALOG (components/knowledge/diagnosis.ts) by `npm run docs`; do not edit -->";
export const END = "<!-- END GENERATED -->";

const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");
const code = (v: unknown) => "`" + (typeof v === "string" ? v : JSON.stringify(v)) + "`";

function typeText(k: ConfigKey): string {
    const parts = [k.secret ? `secret ${k.type}` : k.type];
    if (k.values) parts.push(`one of ${k.values.map(code).join(", ")}`);
    if (k.min !== undefined && k.max !== undefined) parts.push(k.type === "number" ? `(${k.min}, ${k.max}]` : `${k.min}–${k.max}`);
    return parts.join("; ");
}

function defaultText(k: ConfigKey): string {
    if (k.required) return "**required**";
    if (k.default !== undefined) return code(k.default);
    if (k.type === "object") return "every key at its default";
    return k.defaultText ?? "—";
}

function table(keys: readonly ConfigKey[]): string[] {
    return [
        "| key | type | default | meaning |",
        "| --- | --- | --- | --- |",
        ...keys.map(k => `| \`${k.path}\` | ${cell(typeText(k))} | ${cell(defaultText(k))} | ${cell(k.description)} |`),
    ];
}

/** Sets a value at a schema path in a nested object; `[]` means entry `entry` of the list (default the first). */
export function setAtPath(target: Record<string, unknown>, keyPath: string, value: unknown, entry = 0): void {
    const parts = keyPath.split(".");
    let obj: any = target;
    parts.forEach((raw, i) => {
        const list = raw.endsWith("[]");
        const key = list ? raw.slice(0, -2) : raw;
        const last = i === parts.length - 1;
        if (list) {
            if (!Array.isArray(obj[key])) obj[key] = [];
            while (obj[key].length <= entry) obj[key].push({});
            if (last) obj[key] = value;
            else obj = obj[key][entry];
        } else if (last) {
            obj[key] = value;
        } else {
            if (typeof obj[key] !== "object" || obj[key] === null) obj[key] = {};
            obj = obj[key];
        }
    });
}

/** A stack config of two hosts with every key the spec parser reads (and `filter` keeps) set to its example. */
export function exampleConfig(filter: (k: ConfigKey) => boolean = () => true): Record<string, unknown> {
    const config: Record<string, unknown> = {};
    const isLeaf = (k: ConfigKey) => !CONFIG_SCHEMA.some(o => o.path.startsWith(k.path + ".") || o.path.startsWith(k.path + "[]."));
    for (const k of CONFIG_SCHEMA) {
        if (!isLeaf(k) || k.program || !filter(k)) continue;
        setAtPath(config, k.path, k.example);
        if (k.path.includes("[].")) setAtPath(config, k.path, k.example2 ?? k.example, 1);
    }
    return config;
}

export function renderConfiguration(): string {
    const groups = new Map<string, ConfigKey[]>([["", []]]);
    for (const k of CONFIG_SCHEMA) {
        const top = k.path.split(/[.[]/)[0];
        const isGroup = CONFIG_SCHEMA.some(o => o.path !== top && o.path.startsWith(top) && /^[.[]/.test(o.path.slice(top.length)));
        const group = isGroup ? top : "";
        groups.set(group, [...(groups.get(group) ?? []), k]);
    }
    const example: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(exampleConfig())) example[`${SCHEMA_NAMESPACE}:${key}`] = value;
    const out = [
        "# Configuration reference",
        "",
        "<!-- Generated from components/spec/configSchema.ts by `npm run docs`; do not edit by hand.",
        "     tests/unit/docs/docs-config.test.ts fails when this file and the schema drift apart, and holds",
        "     the schema against the parser (parseSpec in components/spec/parseSpec.ts). -->",
        "",
        `Every key lives in the stack file \`Pulumi.<stack>.yaml\` under the namespace \`${SCHEMA_NAMESPACE}\`. The program`,
        "parses and validates the whole config before it creates any resource, and reports every problem at",
        `once, each with its key path (\`${SCHEMA_NAMESPACE}:hosts[1].fabric.address: not an IPv4 address: "198.19.100"\`).`,
        "`npx spark-vllm plan --stack <name>` does the same offline and shows what the config turns into.",
        "",
        "Set a value with `pulumi config set --path` (structured keys) or edit the stack file; set the secrets",
        `with \`pulumi config set --secret ${SCHEMA_NAMESPACE}:hfToken hf_...\`, never in plain text.`,
        "`hosts[]` stands for every entry of the list. A key whose default is **required** must be set; an",
        "optional object (`vllm`, `ray`, `probes`) may be left out whole.",
        "",
    ];
    for (const [group, keys] of groups) {
        out.push(`## ${group ? `\`${group}\`` : "Top-level keys"}`, "", ...table(keys), "");
    }
    out.push(
        "## Every key at once",
        "",
        "Each key set to an example value: two Sparks on test addresses, a config that parses. Only `hosts`,",
        "`image` and `model` (`id`, `cacheDir`) are needed; `Pulumi.spark.yaml` is a real one.",
        "",
        "```yaml",
        yaml.dump({ config: example }, { lineWidth: 120, flowLevel: 4, noRefs: true }).trimEnd(),
        "```",
        "",
    );
    return out.join("\n");
}

/** The generated block of docs/troubleshooting.md: one row per diagnosis kind, with the hint `up` prints. */
export function renderDiagnosisKinds(): string {
    return [
        BEGIN,
        "",
        "| kind | what it means and what to change (the hint `up` and `spark-vllm diagnose` print) |",
        "| --- | --- |",
        ...DIAGNOSIS_CATALOG.map(e => `| \`${e.kind}\` | ${cell(e.hint)} |`),
        "",
        END,
    ].join("\n");
}

/** docs/troubleshooting.md with its generated block replaced. */
export function withDiagnosisKinds(doc: string): string {
    const start = doc.indexOf(BEGIN);
    const end = doc.indexOf(END);
    if (start < 0 || end < start) throw new Error(`docs/troubleshooting.md has no generated block (${BEGIN} … ${END})`);
    return doc.slice(0, start) + renderDiagnosisKinds() + doc.slice(end + END.length);
}

function main(argv: string[]): number {
    const check = argv.includes("--check");
    const wanted: Array<[string, string]> = [
        [CONFIGURATION_MD, renderConfiguration()],
        [TROUBLESHOOTING_MD, withDiagnosisKinds(fs.readFileSync(TROUBLESHOOTING_MD, "utf8"))],
    ];
    let stale = 0;
    for (const [file, text] of wanted) {
        const current = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "";
        if (current === text) continue;
        stale++;
        if (check) console.error(`${path.relative(ROOT, file)} is out of date: run npm run docs`);
        else {
            fs.writeFileSync(file, text);
            console.log(`wrote ${path.relative(ROOT, file)}`);
        }
    }
    return check && stale > 0 ? 1 : 0;
}

if (require.main === module) process.exitCode = main(process.argv.slice(2));
