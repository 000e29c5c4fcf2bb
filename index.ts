// The program: stack config → SparkCluster → outputs.
import * as pulumi from "@pulumi/pulumi";
import { CONFIG_NAMESPACE, SparkCluster, parseSpec, readConfig, withoutPromiseStacks } from "./components";

const config = new pulumi.Config(CONFIG_NAMESPACE);
// Throws SpecError listing every problem with its key path before any resource exists.
const spec = parseSpec(readConfig(config));

// Without the SDK's per-promise debug stacks while the resources are built (components/debugStacks.ts).
const cluster = withoutPromiseStacks(() => new SparkCluster("spark", {
    spec,
    sshPrivateKey: config.getSecret("sshPrivateKey"),
    hfToken: config.getSecret("hfToken"),
}));

export const endpoint = cluster.endpoint;
export const modelName = cluster.modelName;
export const apiKey = cluster.apiKey;
export const hosts = cluster.hostFacts;
export const fabric = cluster.fabric;
export const serving = cluster.serving;
// endpoint.tls "generated": the proxy's self-signed certificate and its SHA-256 fingerprint, for clients to pin.
export const endpointCertificate = cluster.endpointCertificate;
export const endpointCertificateSha256 = cluster.endpointCertificateSha256;
