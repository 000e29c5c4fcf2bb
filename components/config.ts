import * as pulumi from "@pulumi/pulumi";
import { CONFIG_NAMESPACE, RawConfig } from "./spec";

const KEYS = ["hosts", "image", "imageSource", "model", "vllm", "ray", "probes", "logDir", "shmSizeMb"];

/** Reads the stack's raw config values (structured values arrive as JSON text). */
export function readConfig(config = new pulumi.Config(CONFIG_NAMESPACE)): RawConfig {
    const raw: RawConfig = {};
    for (const key of KEYS) {
        const text = config.get(key);
        if (text === undefined) continue;
        try {
            raw[key] = JSON.parse(text);
        } catch {
            raw[key] = text;
        }
    }
    return raw;
}
