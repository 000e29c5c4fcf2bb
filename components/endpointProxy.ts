import * as crypto from "crypto";
import * as pulumi from "@pulumi/pulumi";
import * as docker from "@pulumi/docker";
import * as remote from "@pulumi/command/remote";
import { ClusterPlan } from "./plan";
import { ResourceNames } from "./naming";
import { Wiring } from "./wiring";
import { CONTAINER, IMAGE } from "./resources";
import { SparkHost } from "./sparkHost";

/** @internal Built only by SparkCluster. */
export interface EndpointProxyArgs {
    plan: ClusterPlan;
    names: ResourceNames;
    wiring: Wiring;
    /** The head: its Docker provider runs the proxy. */
    head: SparkHost;
    /** The line piped to the configuration command: the API key and a newline (a secret). */
    keyLine: pulumi.Input<string>;
}

/** The first PEM certificate in a text, or undefined. */
export function pemCertificate(text: string): string | undefined {
    const m = /-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+?-----END CERTIFICATE-----/.exec(text);
    return m ? `${m[0]}\n` : undefined;
}

/** SHA-256 fingerprint of a PEM certificate as `AB:CD:…` (Node's X509Certificate.fingerprint256, as `openssl x509 -fingerprint -sha256` prints it). */
export function certificateSha256(pem: string): string {
    return new crypto.X509Certificate(pem).fingerprint256;
}

/**
 * @internal The reverse proxy on the head (components/proxyPlan.ts): nginx, pinned by digest, in its own container
 * on the host network, publishing vllm.port while vLLM listens on loopback only. Its configuration (with the API
 * key, from stdin) and, for tls "generated", its self-signed certificate are written into a private directory on
 * the head that the container mounts read-only.
 */
export class EndpointProxy extends pulumi.ComponentResource {
    readonly image: docker.RemoteImage;
    readonly tls?: remote.Command;
    readonly config: remote.Command;
    readonly container: docker.Container;
    /** tls "generated": the certificate (PEM) clients pin; undefined without TLS. */
    readonly certificate: pulumi.Output<string | undefined>;
    /** Its SHA-256 fingerprint (AB:CD:…). */
    readonly certificateSha256: pulumi.Output<string | undefined>;

    constructor(name: string, args: EndpointProxyArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:EndpointProxy", name, {}, opts);
        const { names, wiring, head } = args;
        const parent = { parent: this };
        const imageName = names.of("proxy-pull");
        const pull = wiring.entry(imageName, IMAGE);
        this.image = wiring.set(imageName, new docker.RemoteImage(imageName, pull.inputs,
            { ...parent, provider: head.provider, dependsOn: wiring.dependsOn(pull) }));
        if (args.plan.proxy.tls) this.tls = wiring.command(names.of("proxy-tls"), parent);
        this.config = wiring.command(names.of("proxy-conf"), parent, args.keyLine);
        const containerName = names.of("proxy");
        const entry = wiring.entry(containerName, CONTAINER);
        this.container = wiring.set(containerName, new docker.Container(containerName,
            { ...entry.inputs, image: this.image.repoDigest },
            { ...parent, provider: head.provider, dependsOn: wiring.dependsOn(entry), deleteBeforeReplace: entry.deleteBeforeReplace }));
        this.certificate = this.tls ? this.tls.stdout.apply(out => pemCertificate(out)) : pulumi.output(undefined);
        this.certificateSha256 = this.certificate.apply(pem => (pem ? certificateSha256(pem) : undefined));
        this.registerOutputs({ certificate: this.certificate, certificateSha256: this.certificateSha256 });
    }
}
