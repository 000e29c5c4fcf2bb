// The program: stack config → SparkCluster → outputs.
import * as pulumi from "@pulumi/pulumi";
import { CONFIG_NAMESPACE, SparkCluster, parseSpec, readConfig, readGivenTls, dropPromiseStacks } from "./components";
import { checked } from "./components/wiring";

const config = new pulumi.Config(CONFIG_NAMESPACE);
// Fails listing every problem with its key path before any resource exists (a given certificate's too), as a
// RunError, which the runner prints as its message alone; any other error is printed as "Running program … failed
// with an unhandled exception" and its stack (@pulumi/pulumi 3.276.0 cmd/run/run.js uncaughtHandler).
const spec = checked(() => parseSpec(readConfig(config), readGivenTls(config)));

// Without the SDK's per-promise debug stacks (components/debugStacks.ts): most of the evaluation's CPU time at scale.
dropPromiseStacks();
const cluster = new SparkCluster("spark", {
    spec,
    sshPrivateKey: config.getSecret("sshPrivateKey"),
    hfToken: config.getSecret("hfToken"),
    // endpoint.tls "given": the chain and key, only ever on the proxy-tls command's stdin.
    tls: spec.endpoint.tls === "given" ? { certificate: config.requireSecret("tlsCertificate"), privateKey: config.requireSecret("tlsPrivateKey") } : undefined,
});

export const endpoint = cluster.endpoint;
export const modelName = cluster.modelName;
export const apiKey = cluster.apiKey;
export const hosts = cluster.hostFacts;
export const fabric = cluster.fabric;
export const serving = cluster.serving;
// endpoint.tls "generated" or "given": the certificate the proxy serves and its SHA-256 fingerprint, for clients to pin.
export const endpointCertificate = cluster.endpointCertificate;
export const endpointCertificateSha256 = cluster.endpointCertificateSha256;
// spark-vllm:replicas above 1: each replica's hosts, head, fabric verdict and serving figures (absent with one).
export const replicas = cluster.replicaOutputs;
