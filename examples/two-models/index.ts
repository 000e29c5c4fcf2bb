// Two models on four DGX Sparks in one stack, behind one API key you choose.
//
// spark-vllm used as a library, composed its own way:
// - the clusters are described in this project's own config (namespace `two-models`), in a shorter
//   shape than spark-vllm's stack config, and turned into specs with `parseSpec`, which validates
//   each one and names every problem with its key path;
// - each model gets its own pair of Sparks (two `SparkCluster`s; their names prefix every resource,
//   so the two never collide);
// - both endpoints require the same API key, read from a secret config value
//   (`pulumi config set --secret apiKey ...`) instead of a generated one.
import * as pulumi from "@pulumi/pulumi";
import { ClusterSpec, SparkCluster, parseSpec } from "spark-vllm";

/** One Spark, the short way: fabric interface and HCAs are the same on every DGX Spark here. */
interface Spark {
    name: string;
    /** SSH address of the host. */
    ssh: string;
    /** The host's address on the ConnectX-7 fabric. */
    fabric: string;
}

/** One model and the pair of Sparks that serve it. */
interface Deployment {
    /** Cluster name: the prefix of every resource of this model. */
    name: string;
    model: string;
    servedName: string;
    maxModelLen: number;
    /** Names of the two Sparks (from `sparks`); the first is the Ray head. */
    on: [string, string];
}

const config = new pulumi.Config();
const sparks = config.requireObject<Spark[]>("sparks");
const deployments = config.requireObject<Deployment[]>("deployments");
const image = config.require("image");
const vllmVersion = config.get("vllmVersion");
// One key for both endpoints. Secret: it stays encrypted in the stack and reaches vLLM on stdin only.
const apiKey = config.requireSecret("apiKey");

function specFor(d: Deployment): ClusterSpec {
    const hosts = d.on.map(name => {
        const spark = sparks.find(s => s.name === name);
        if (!spark) throw new Error(`deployment ${d.name}: no Spark named ${name} in two-models:sparks`);
        return {
            name: spark.name,
            ssh: { host: spark.ssh, user: "nvidia" },
            fabric: { interface: "enp1s0f1np1", address: spark.fabric, hcas: ["rocep1s0f1", "roceP2p1s0f1"] },
        };
    });
    // parseSpec applies every default (ports, probes, memory utilization, …) and throws a SpecError
    // listing every problem before any resource exists.
    return parseSpec({
        hosts,
        image,
        model: { id: d.model, servedName: d.servedName, cacheDir: "/home/nvidia/.cache/huggingface" },
        vllm: { tensorParallelSize: 2, maxModelLen: d.maxModelLen, ...(vllmVersion ? { version: vllmVersion } : {}) },
    });
}

const clusters = deployments.map(d => new SparkCluster(d.name, { spec: specFor(d), apiKey }));

/** Model name → its OpenAI-compatible base URL. */
export const endpoints = pulumi
    .all(clusters.map(c => pulumi.all([c.modelName, c.endpoint])))
    .apply(pairs => Object.fromEntries(pairs));
