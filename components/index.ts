// spark-vllm: the package root. One component, SparkCluster, builds everything; its parts (SparkHost,
// ClusterImage, VllmContainer, ModelWeights, RayCluster, ModelEndpoint) only make sense inside it and are
// internal. The pure core (spec → plan → planned resources, diagnosis, catalog, memory) is exported whole.
export * from "./spec";
export * from "./plan";
export * from "./scripts";
export { resourceNames, ResourceNames, containerName, CLUSTER } from "./naming";
export { plannedResources, PlannedResource, PlannedResourcesOptions } from "./resources";
export { diagnose, Diagnosis, DIAGNOSIS_CATALOG } from "./diagnosis";
export { CATALOG, CatalogModel, findModel, firstVllmVersionFor, supportsArchitecture } from "./catalog";
export { MemoryPlan, planMemory, renderMemoryPlan } from "./memory";
export { sameImage, sameWeights, WeightsManifest } from "./checks";
export { SparkCluster, SparkClusterArgs } from "./sparkCluster";
export { readConfig } from "./config";
