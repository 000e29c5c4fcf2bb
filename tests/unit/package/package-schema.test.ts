// The component package's schema (provider/), as Pulumi infers it from the TypeScript source (@pulumi/pulumi 3.276.0
// provider/experimental/analyzer.js, what `pulumi package add` generates every SDK from), against the stack config's
// schema (components/spec/configSchema.ts): every config key is an arg at the same path, with its type, required where the
// config requires it, secrets as (non-plain) inputs; and the args reach parseSpec as the stack file's keys would.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "fs";
import * as path from "path";
import { Analyzer, PropertyDefinition } from "@pulumi/pulumi/provider/experimental/analyzer";
import { CONFIG_SCHEMA, ConfigType } from "../../../components/spec/configSchema";
import { SECRET_SET, rawConfigFromStack } from "../../../components/spec/stackConfig";
import { SpecError } from "../../../components/spec/spec";
import { parseSpec } from "../../../components/spec/parseSpec";
import { rawConfigFromArgs, SparkClusterArgs } from "../../../provider/sparkCluster";

const DIR = path.join(__dirname, "..", "..", "..", "provider");
const analyzed = new Analyzer(DIR, "spark-vllm", require(path.join(DIR, "package.json")), new Set(["SparkCluster"])).analyze();
const component = analyzed.components.SparkCluster;

/** The property at a config key path (`hosts[].ssh.port`), walking the schema's types. */
function at(keyPath: string): PropertyDefinition | undefined {
    let props: Record<string, PropertyDefinition> | undefined = component.inputs;
    let prop: PropertyDefinition | undefined;
    for (const part of keyPath.split(".")) {
        const name = part.replace(/\[\]$/, "");
        prop = props?.[name];
        if (!prop) return undefined;
        let target: PropertyDefinition = prop;
        if (part.endsWith("[]")) {
            assert.ok("type" in prop && prop.type === "array", `${keyPath}: ${name} is a list`);
            target = prop.items!;
        }
        const ref: string | undefined = "$ref" in target ? target.$ref : undefined;
        props = ref ? analyzed.typeDefinitions[ref.replace("#/types/spark-vllm:index:", "")]?.properties : undefined;
    }
    return prop;
}

const SCHEMA_TYPE: Record<ConfigType, (p: PropertyDefinition) => boolean> = {
    "string": p => "type" in p && p.type === "string",
    "integer": p => "type" in p && p.type === "number",
    "number": p => "type" in p && p.type === "number",
    "boolean": p => "type" in p && p.type === "boolean",
    "list of strings": p => "type" in p && p.type === "array" && !!p.items && "type" in p.items && p.items.type === "string",
    "object": p => "$ref" in p,
    "list of objects": p => "type" in p && p.type === "array" && !!p.items && "$ref" in p.items,
};

test("every stack config key is a SparkCluster arg at its path, with its type, required where the config requires it", () => {
    assert.equal(component.name, "SparkCluster");
    for (const key of CONFIG_SCHEMA) {
        const prop = at(key.path);
        assert.ok(prop, `${key.path}: no arg in the package's schema (add it to provider/sparkCluster.ts)`);
        assert.ok(SCHEMA_TYPE[key.type](prop), `${key.path}: ${key.type} in the config, ${JSON.stringify(prop)} in the package`);
        // An optional key inside a required object is optional (configSchema.ts ConfigKey.required).
        assert.equal(!prop.optional, key.required, `${key.path}: required ${key.required} in the config`);
        // Secrets may be outputs (config.get_secret); everything else is plain, as parseSpec needs it before any resource.
        assert.equal(!!prop.plain, !key.secret, `${key.path}: ${key.secret ? "a secret, an input" : "plain"}`);
    }
});

test("the package's outputs are the TypeScript program's (index.ts's stack outputs)", () => {
    const program = fs.readFileSync(path.join(DIR, "..", "index.ts"), "utf8");
    const exported = [...program.matchAll(/^export const (\w+) = cluster\./gm)].map(m => m[1]).sort();
    assert.ok(exported.length >= 8, `index.ts's outputs: ${exported}`);
    assert.deepEqual(Object.keys(component.outputs).sort(), exported);
});

test("the args reach parseSpec as the stack file's keys do; secrets only as set; errors keep the key paths", () => {
    const args: SparkClusterArgs = {
        hosts: [{ name: "spark-a", ssh: { host: "spark-a.local", user: "nvidia" }, fabric: { interface: "enp1s0f1np1", address: "192.168.100.10" } }],
        image: `vllm/vllm-openai:v0.17.1@sha256:${"a".repeat(64)}`,
        model: { id: "Qwen/Qwen3.5-122B-A10B-FP8", cacheDir: "/home/nvidia/.cache/huggingface" },
        vllm: { maxModelLen: 32768 },
        sshPrivateKey: "-----BEGIN OPENSSH PRIVATE KEY-----",
        apiKey: "not-config",
        keepImage: false,
    };
    const raw = rawConfigFromArgs(args);
    assert.deepEqual(Object.keys(raw).sort(), ["hosts", "image", "model", "sshPrivateKey", "vllm"]);
    assert.equal(raw.sshPrivateKey, SECRET_SET, "the key's text never reaches the spec");
    const fromStack = rawConfigFromStack(Object.fromEntries(Object.entries(raw).map(([k, v]) => [`spark-vllm:${k}`, v])));
    assert.deepEqual(parseSpec(raw), parseSpec(fromStack));
    const broken = rawConfigFromArgs({ ...args, hosts: [{ ...args.hosts[0], ssh: { ...args.hosts[0].ssh, port: 70000 } }], model: { ...args.model, cacheDir: undefined as unknown as string } });
    assert.throws(() => parseSpec(broken), (e: SpecError) => e.problems.length === 2 && /hosts\[0\]\.ssh\.port/.test(e.message) && /model\.cacheDir/.test(e.message));
});

test("the number and boolean defaults the package's docs state (every generated SDK shows them) are the config's", () => {
    let compared = 0;
    for (const key of CONFIG_SCHEMA) {
        if (typeof key.default !== "number" && typeof key.default !== "boolean") continue;
        const said = /Default: (.*?)(?:[.;,]\s|[.;,]?$|\s\()/.exec(at(key.path)?.description ?? "")?.[1];
        assert.equal(said, String(key.default), `${key.path}: the config's default is ${key.default} (provider/sparkCluster.ts says ${said})`);
        compared++;
    }
    assert.ok(compared >= 20, `${compared} defaults compared`);
});
