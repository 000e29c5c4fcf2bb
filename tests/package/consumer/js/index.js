// docs/library.md's program ("A first program") in plain JavaScript, as a Pulumi project with
// runtime.options.typescript: false runs it. The TypeScript one is taken from docs/library.md by the test.
"use strict";
const pulumi = require("@pulumi/pulumi");
const { CONFIG_NAMESPACE, SparkCluster, diagnose, parseSpec, planCluster, readConfig } = require("spark-vllm");

const config = new pulumi.Config(CONFIG_NAMESPACE);
const spec = parseSpec(readConfig(config));
const plan = planCluster(spec);
const cluster = new SparkCluster("spark", { spec, hfToken: config.getSecret("hfToken") });

exports.endpoint = cluster.endpoint;
exports.apiKey = cluster.apiKey;
exports.vllmServe = plan.vllmServeArgv.join(" ");
const found = diagnose("OSError: [Errno 98] Address already in use");
exports.example = found && found.kind;
