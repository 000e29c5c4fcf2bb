// spark-vllm: the package root.
export * from "./spec";
export * from "./plan";
export * from "./scripts";
export { diagnose, Diagnosis, DIAGNOSIS_CATALOG } from "./diagnosis";
export { CATALOG, CatalogModel, findModel, firstVllmVersionFor, supportsArchitecture } from "./catalog";
export { MemoryPlan, planMemory, renderMemoryPlan } from "./memory";
export { sameImage, sameWeights, WeightsManifest } from "./checks";
export { SparkHost, SparkHostArgs } from "./sparkHost";
export { VllmContainer, VllmContainerArgs } from "./vllmContainer";
export { RayHead, RayHeadArgs } from "./rayHead";
export { RayWorker, RayWorkerArgs } from "./rayWorker";
export { ModelEndpoint, ModelEndpointArgs } from "./modelEndpoint";
export { SparkCluster, SparkClusterArgs } from "./sparkCluster";
export { readConfig } from "./config";
