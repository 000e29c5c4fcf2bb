// spark-vllm: the package root. One component, SparkCluster, builds everything; its parts (SparkHost,
// ClusterImage, VllmContainer, ModelWeights, RayCluster, ModelEndpoint) only make sense inside it and are
// internal. The pure core (spec → plan → planned resources, diagnosis, catalog, memory) is exported whole.
export * from "./spec";
export * from "./plan";
export * from "./scripts";
export { resourceNames, ResourceNames, containerName, CLUSTER } from "./naming";
export { plannedResources, PlannedResource, PlannedResourcesOptions } from "./resources";
export { Diagnosis, DIAGNOSIS_CATALOG } from "./diagnosis";
/** The root cause of a vLLM (or NCCL) log: `{ kind, line, hint, transport? }`, or undefined (components/nccl.ts). */
export { diagnoseWithNccl as diagnose, NcclDiagnosis, parseNcclLog, ncclTransportUsed } from "./nccl";
export { CATALOG, CatalogModel, findModel, firstVllmVersionFor, supportsArchitecture } from "./catalog";
export { MemoryPlan, planMemory, renderMemoryPlan } from "./memory";
export { sameImage, sameWeights, WeightsManifest } from "./checks";
export { SparkCluster, SparkClusterArgs } from "./sparkCluster";
export { GivenCertificate } from "./endpointProxy";
export { readConfig, readGivenTls } from "./config";
export { GivenTlsTexts, givenTlsProblems } from "./givenTls";
export { dropPromiseStacks } from "./debugStacks";
