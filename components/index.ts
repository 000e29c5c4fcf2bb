// spark-vllm: the package root.
export * from "./spec";
export * from "./plan";
export * from "./scripts";
export { diagnose, Diagnosis } from "./diagnosis";
export { SparkHost, SparkHostArgs } from "./sparkHost";
export { VllmContainer, VllmContainerArgs } from "./vllmContainer";
export { RayHead, RayHeadArgs } from "./rayHead";
export { RayWorker, RayWorkerArgs } from "./rayWorker";
export { ModelEndpoint, ModelEndpointArgs } from "./modelEndpoint";
export { SparkCluster, SparkClusterArgs } from "./sparkCluster";
export { readConfig } from "./config";
