// docs/configuration.md is generated from components/spec/configSchema.ts, and the schema is held against the
// real parser (parseSpec): the keys it accepts at every level, its defaults, what is required, types and
// ranges. docs/troubleshooting.md's generated block follows DIAGNOSIS_CATALOG.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "fs";
import { CONFIG_SCHEMA, ConfigKey, SCHEMA_NAMESPACE } from "../../../components/spec/configSchema";
import { CONFIG_NAMESPACE } from "../../../components/spec/stackConfig";
import { ClusterSpec, SpecError } from "../../../components/spec/spec";
import { parseSpec } from "../../../components/spec/parseSpec";
import { CONFIGURATION_MD, TROUBLESHOOTING_MD, exampleConfig, renderConfiguration, setAtPath, withDiagnosisKinds } from "../../../scripts/gen-docs";

const byPath = new Map(CONFIG_SCHEMA.map(k => [k.path, k]));
/** Names of the keys directly under an object key ("" for the namespace; lists as `hosts[]`). */
function children(parent: string): string[] {
    const prefix = parent === "" ? "" : parent + ".";
    return CONFIG_SCHEMA.map(k => k.path)
        .filter(p => p.startsWith(prefix) && !p.slice(prefix.length).replace(/\[\]$/, "").includes(".") && p !== parent)
        .map(p => p.slice(prefix.length).replace(/\[\]$/, ""));
}
const isObject = (k: ConfigKey) => k.type === "object" || k.type === "list of objects";
/** The schema path with `[]` as the first entry: hosts[].ssh.port → hosts[0].ssh.port. */
const concrete = (p: string) => p.replace(/\[\]/g, "[0]");

/** The problems parseSpec reports for a config ([] when it parses). */
function problems(config: Record<string, unknown>): string[] {
    try {
        parseSpec(config);
        return [];
    } catch (err) {
        if (err instanceof SpecError) return err.problems;
        throw err;
    }
}

/** A config of two hosts with only the required keys, each at its example value. */
const minimal = () => exampleConfig(k => isRequiredChain(k));
function isRequiredChain(k: ConfigKey): boolean {
    // Required, and every object above it is required too.
    const parts = k.path.split(".");
    return parts.every((_, i) => byPath.get(parts.slice(0, i + 1).join(".").replace(/\[\]$/, ""))?.required ?? false);
}
/** Where an object key's own keys live: `hosts[]` for the list of hosts. */
const objectPath = (k: ConfigKey) => (k.type === "list of objects" ? `${k.path}[]` : k.path);

/** A value in the parsed spec at a schema path. */
function valueAt(spec: ClusterSpec, keyPath: string): unknown {
    let v: any = spec;
    for (const raw of keyPath.split(".")) {
        v = v?.[raw.replace(/\[\]$/, "")];
        if (raw.endsWith("[]")) v = v?.[0];
    }
    return v;
}

test("docs/configuration.md is what npm run docs generates from components/spec/configSchema.ts", () => {
    assert.equal(fs.readFileSync(CONFIGURATION_MD, "utf8"), renderConfiguration(), "docs/configuration.md is out of date: run npm run docs");
});

test("docs/troubleshooting.md's generated block lists every diagnosis kind with its hint (npm run docs)", () => {
    const doc = fs.readFileSync(TROUBLESHOOTING_MD, "utf8");
    assert.equal(doc, withDiagnosisKinds(doc), "docs/troubleshooting.md is out of date: run npm run docs");
});

test("the schema's namespace is the parser's", () => {
    assert.equal(SCHEMA_NAMESPACE, CONFIG_NAMESPACE);
});

test("at every level, the keys parseSpec accepts are the schema's keys (and no others)", () => {
    // parseSpec names the known keys when a key is unknown and nothing is close to it.
    const known = (at: string): string[] => {
        const config = minimal();
        const probe = "zzqqxxunknownkey";
        setAtPath(config, at ? `${at}.${probe}` : probe, 1);
        const where = `${CONFIG_NAMESPACE}:${at ? concrete(at) + "." : ""}${probe}`;
        const line = problems(config).find(p => p.startsWith(where + ":"));
        assert.ok(line, `parseSpec does not reject an unknown key under ${at || "the namespace"}; problems: ${problems(config).join("; ")}`);
        const m = /known keys: (.*)$/.exec(line);
        assert.ok(m, `parseSpec's message for an unknown key does not list the known keys: ${line}`);
        return m[1].split(", ").sort();
    };
    const fix = "(actual: what parseSpec accepts; expected: what components/spec/configSchema.ts lists. Change the schema, then npm run docs)";
    assert.deepEqual(known(""), children("").sort(), `top-level keys ${fix}`);
    for (const k of CONFIG_SCHEMA.filter(isObject)) assert.deepEqual(known(objectPath(k)), children(objectPath(k)).sort(), `keys under ${k.path} ${fix}`);
});

test("a config of only the schema's required keys parses, and each of them is required", () => {
    assert.deepEqual(problems(minimal()), []);
    for (const k of CONFIG_SCHEMA.filter(k => k.required && !k.program)) {
        const config = minimal();
        const parent = k.path.includes(".") ? k.path.slice(0, k.path.lastIndexOf(".")) : "";
        const name = k.path.slice(k.path.lastIndexOf(".") + 1).replace(/\[\]$/, "");
        let obj: any = config;
        for (const raw of parent ? parent.split(".") : []) obj = raw.endsWith("[]") ? obj[raw.slice(0, -2)][0] : obj[raw];
        delete obj[name];
        const found = problems(config).some(p => p.startsWith(`${CONFIG_NAMESPACE}:${concrete(k.path)}:`));
        assert.ok(found, `${k.path} is required in the schema but parseSpec accepts a config without it: ${problems(config).join("; ")}`);
    }
});

test("every optional key's default in the schema is what parseSpec fills in", () => {
    const spec = parseSpec(minimal());
    for (const k of CONFIG_SCHEMA.filter(k => !k.required && !k.program && !isObject(k))) {
        if (k.default !== undefined) assert.deepEqual(valueAt(spec, k.path), k.default, `${k.path}: the schema's default (actual: parseSpec's)`);
        else assert.ok(k.defaultText, `${k.path}: neither a default nor a defaultText`);
    }
    // The computed defaults, as the schema words them.
    assert.equal(spec.model.servedName, spec.model.id, "model.servedName defaults to model.id");
    assert.equal(spec.vllm.maxModelLen, undefined, "vllm.maxModelLen: the model's own maximum (not set)");
    assert.equal(spec.vllm.version, undefined, "vllm.version: unknown");
    const host = (minimal().hosts as Array<Record<string, any>>)[0];
    assert.equal(spec.vllm.tensorParallelSize, 2, "vllm.tensorParallelSize defaults to the GPUs of all hosts");
    const hosts = [1, 2, 3, 4].map(i => ({ ...host, name: `h${i}`, ssh: { ...host.ssh, host: `198.18.0.${i}` }, fabric: { ...host.fabric, address: `198.19.0.${i}` } }));
    const gpus = parseSpec({ ...minimal(), hosts, vllm: { pipelineParallelSize: 2 } });
    assert.equal(gpus.vllm.tensorParallelSize, 2, "vllm.tensorParallelSize defaults to the GPUs of all hosts ÷ pipelineParallelSize");
});

test("every key's example parses, and a value of the wrong type or out of range is refused at its path", () => {
    assert.deepEqual(problems(exampleConfig()), [], "every example at once");
    const wrong: Record<string, unknown> = { string: 42, integer: "many", number: "much", boolean: "maybe", "list of strings": "not-a-list", object: "not-an-object", "list of objects": "not-a-list" };
    for (const k of CONFIG_SCHEMA.filter(k => !k.program)) {
        const at = `${CONFIG_NAMESPACE}:${concrete(k.path)}:`;
        const refused = (value: unknown, what: string) => {
            const config = minimal();
            setAtPath(config, k.path, value);
            assert.ok(problems(config).some(p => p.startsWith(at)), `${k.path} = ${JSON.stringify(value)} (${what}) is not refused at ${at}: ${problems(config).join("; ") || "it parses"}`);
        };
        const config = minimal();
        if (!isObject(k)) {
            setAtPath(config, k.path, k.example);
            assert.deepEqual(problems(config), [], `${k.path}: its example ${JSON.stringify(k.example)} parses`);
        }
        refused(wrong[k.type], `not a ${k.type}`);
        if (k.values) refused("zz-not-one-of-them", `not one of ${k.values.join(", ")}`);
        if (k.max !== undefined) refused(k.max + 1, `above ${k.max}`);
        if (k.min !== undefined) refused(k.type === "number" ? k.min : k.min - 1, `below ${k.min}`);
    }
});

test("the program-read keys are the secrets, and the parser accepts them without reading them", () => {
    const program = CONFIG_SCHEMA.filter(k => k.program);
    assert.deepEqual(program.map(k => k.path).sort(), ["hfToken", "sshPrivateKey", "tlsCertificate", "tlsPrivateKey"]);
    assert.ok(program.every(k => k.secret));
    const config: Record<string, unknown> = { ...minimal(), sshPrivateKey: "x", hfToken: "y", tlsCertificate: "y", tlsPrivateKey: "y" };
    assert.deepEqual(problems(config), []);
    assert.ok(!JSON.stringify(parseSpec(config)).includes('"y"'), "secrets do not end up in the spec");
});
