// spark-vllm: the package root. One component, SparkCluster, builds everything; its parts (SparkHost,
// ClusterImage, VllmContainer, ModelWeights, RayCluster, ModelEndpoint) only make sense inside it and are
// internal. The pure core (spec → plan → planned resources, diagnosis, catalog, memory) is exported whole.
export * from "./spec/spec";
export { CONFIG_NAMESPACE, RawConfig, SECRET_KEYS, SECRET_SET, SECRET_IN_PLAIN_TEXT, StackConfigOptions, rawConfigFromStack } from "./spec/stackConfig";
export { parseSpec, parseIPv4, unusableAddress, isLinkLocal, linkLocalNotes, parseImageRef } from "./spec/parseSpec";
export { show } from "./spec/showValue";
export { vllmOptionOf } from "./spec/vllmArgv";
export {
    DATA_PARALLEL_VLLM_FLAGS, KV_EVENTS_DEFAULT_ENDPOINT, MANAGED_VLLM_FLAGS, REFUSED_VLLM_FLAGS, VALUE_CHECKED_VLLM_FLAGS,
    VLLM_ALIASES, VLLM_H11_LIMITS, exposureProblems,
} from "./spec/extraArgs";
export { planCluster } from "./plan/plan";
export { Role, CommandPlan, ContainerPlan, HostPlan, ClusterPlan, ProxyPlan, ToolsInstall } from "./plan/clusterPlan";
export { containerEnv, perHostEnvNames, rayNonCarryOver } from "./plan/containers";
export { COPY_IDLE_SECONDS, KEYGUARD_MIDDLEWARE, cpuVllmSkips, packTools, vllmServeArgv, weightsFitArgs, withPythonPath } from "./plan/hostCommands";
export { toolsPath, toolsProgram } from "./plan/toolsProgram";
export * from "./plan/scripts";
export { resourceNames, ResourceNames, containerName, CLUSTER } from "./plan/naming";
export { plannedResources, PlannedResource, PlannedResourcesOptions } from "./plan/resources";
export { Diagnosis, DIAGNOSIS_CATALOG } from "./knowledge/diagnosis";
/** The root cause of a vLLM (or NCCL) log: `{ kind, line, hint, transport? }`, or undefined (components/knowledge/nccl.ts). */
export { diagnoseWithNccl as diagnose, NcclDiagnosis, parseNcclLog, ncclTransportUsed } from "./knowledge/nccl";
export { CATALOG, CatalogModel, findModel, firstVllmVersionFor, supportsArchitecture } from "./knowledge/catalog";
export { MemoryPlan, planMemory, renderMemoryPlan } from "./plan/memory";
export { sameImage, sameWeights, WeightsManifest } from "./plan/checks";
export { SparkCluster, SparkClusterArgs } from "./sparkCluster";
export { GivenCertificate } from "./endpointProxy";
export { readConfig, readGivenTls } from "./config";
export { GivenTlsTexts, givenTlsProblems } from "./spec/givenTls";
export { dropPromiseStacks } from "./debugStacks";
