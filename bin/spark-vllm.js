#!/usr/bin/env node
// Command-line entry: `spark-vllm plan --stack NAME`, `spark-vllm diagnose FILE|-`.
require("tsx/cjs");
require("./cli.ts")
    .main(process.argv.slice(2))
    .then(code => { process.exitCode = code; })
    .catch(err => { console.error(err instanceof Error ? err.message : String(err)); process.exitCode = 1; });
