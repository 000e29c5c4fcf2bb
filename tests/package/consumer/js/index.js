// The same program in plain JavaScript (a Pulumi project with runtime.options.typescript: false).
"use strict";
const pulumi = require("@pulumi/pulumi");
const { CONFIG_NAMESPACE, SparkCluster, diagnose, parseSpec, planCluster, readConfig } = require("spark-vllm");

const config = new pulumi.Config(CONFIG_NAMESPACE);
const spec = parseSpec(readConfig(config));
const plan = planCluster(spec);
const cluster = new SparkCluster("spark", { spec, hfToken: config.getSecret("hfToken") });
const diagnosis = diagnose("(APIServer pid=1) OSError: [Errno 98] Address already in use\n");

exports.endpoint = cluster.endpoint;
exports.modelName = cluster.modelName;
exports.apiKey = cluster.apiKey;
exports.plannedEndpoint = plan.endpoint;
exports.hostCount = plan.hosts.length;
exports.diagnosisKind = diagnosis && diagnosis.kind;
