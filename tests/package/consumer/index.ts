// A user's Pulumi program (TypeScript) with spark-vllm installed from its tarball: the stack's
// `spark-vllm:` config → parseSpec → the offline plan → SparkCluster, as the repository's index.ts does,
// plus diagnose. Pulumi runs it through ts-node, which type-checks it against the package's
// declarations and does not compile anything inside node_modules.
import * as pulumi from "@pulumi/pulumi";
import { CONFIG_NAMESPACE, SparkCluster, SparkClusterArgs, diagnose, parseSpec, planCluster, readConfig } from "spark-vllm";

const config = new pulumi.Config(CONFIG_NAMESPACE);
const spec = parseSpec(readConfig(config));
const plan = planCluster(spec);

const args: SparkClusterArgs = { spec, hfToken: config.getSecret("hfToken") };
const cluster = new SparkCluster("spark", args);

const diagnosis = diagnose("(APIServer pid=1) OSError: [Errno 98] Address already in use\n");

export const endpoint = cluster.endpoint;
export const modelName = cluster.modelName;
export const apiKey = cluster.apiKey;
export const plannedEndpoint: string = plan.endpoint;
export const hostCount: number = plan.hosts.length;
export const diagnosisKind: string | undefined = diagnosis?.kind;
