import * as pulumi from "@pulumi/pulumi";
import { CONFIG_NAMESPACE, RawConfig, rawConfigFromStack } from "./spec/stackConfig";
import { GivenTlsTexts, TLS_CERTIFICATE_KEY, TLS_PRIVATE_KEY } from "./spec/givenTls";

/**
 * Reads the stack's raw config: every key of the namespace, not only the known ones, so that a misspelt key
 * (`spark-vllm:vLLM`, `spark-vllm:modle`) fails `pulumi up` with the same "did you mean" as `spark-vllm plan`
 * (both go through rawConfigFromStack; parseSpec refuses unknown keys). Secrets are read as set or not, never
 * their text: SparkCluster gets them from `config.getSecret`.
 *
 * `pulumi.runtime.allConfig()` is the whole config map, `namespace:key` → text (structured values as JSON):
 * under the real runner it is parsed from PULUMI_CONFIG, which the language host sets, and under
 * `pulumi.runtime.setMocks` from what `setAllConfig` stored; `Config.get` reads the same map
 * (@pulumi/pulumi runtime/config.js parseConfig), so this sees exactly what `config.get` would.
 */
export function readConfig(config = new pulumi.Config(CONFIG_NAMESPACE)): RawConfig {
    return rawConfigFromStack(pulumi.runtime.allConfig(), { text: true, namespace: config.name });
}

/**
 * The texts of the endpoint.tls "given" secrets, for parseSpec to check (components/spec/givenTls.ts): the program holds
 * every secret decrypted in the same map (`allConfig`), and `config.getSecret` (SparkCluster's inputs) reads them
 * from it too. Undefined where not set.
 */
export function readGivenTls(config = new pulumi.Config(CONFIG_NAMESPACE)): GivenTlsTexts {
    const all = pulumi.runtime.allConfig();
    return { tlsCertificate: all[`${config.name}:${TLS_CERTIFICATE_KEY}`], tlsPrivateKey: all[`${config.name}:${TLS_PRIVATE_KEY}`] };
}
