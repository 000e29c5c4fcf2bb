// The spark-vllm policy pack. Rules live in rules.ts so tests can load them without starting a pack.
import { PolicyPack } from "@pulumi/policy";
import { policies } from "./rules";

new PolicyPack("spark-vllm", {
    description: "Guards for vLLM on DGX Spark: pinned identical images, parallelism, memory fit, vLLM/model compatibility, fabric, and no exposed secrets or unauthenticated endpoints.",
    policies,
});
