// The component package's entry (PulumiPlugin.yaml): every ComponentResource class exported here becomes a resource of
// the `spark-vllm` package in the SDKs `pulumi package add` generates (@pulumi/pulumi 3.276.0 cmd/run-plugin/run.js:
// getPulumiComponents(require(<this folder>)); the schema is inferred from the TypeScript source by
// provider/experimental/analyzer.js, which starts at this file: package.json "main" with .js → .ts, else index.ts).
export { SparkCluster, SparkClusterArgs } from "./sparkCluster";
