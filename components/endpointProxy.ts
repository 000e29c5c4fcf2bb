import * as crypto from "crypto";
import * as pulumi from "@pulumi/pulumi";
import * as docker from "@pulumi/docker";
import * as remote from "@pulumi/command/remote";
import { ClusterPlan } from "./plan/clusterPlan";
import { ResourceNames } from "./plan/naming";
import { Wiring, digestSalt, secretDigest, unknownNotSecret } from "./wiring";
import { chainCertificates, givenTlsError, givenTlsProblems, givenTlsStdin } from "./spec/givenTls";
import { CONTAINER, IMAGE } from "./plan/resources";
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
    /** endpoint.tls "given": the certificate chain and its private key (secrets). */
    given?: GivenCertificate;
}

/** endpoint.tls "given": the PEM certificate chain (the server's certificate first) and its private key. */
export interface GivenCertificate {
    certificate: pulumi.Input<string>;
    privateKey: pulumi.Input<string>;
}

/** The first PEM certificate in a text, or undefined. */
export function pemCertificate(text: string): string | undefined {
    const m = /-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+?-----END CERTIFICATE-----/.exec(text);
    return m ? `${m[0]}\n` : undefined;
}

/** SHA-256 fingerprint of a PEM certificate (a chain's first) as `AB:CD:…` (Node's X509Certificate.fingerprint256, as `openssl x509 -fingerprint -sha256` prints it). */
export function certificateSha256(pem: string): string {
    return new crypto.X509Certificate(pem).fingerprint256;
}

/**
 * @internal The reverse proxy on the head (components/plan/proxyPlan.ts): nginx, pinned by digest, in its own container
 * on the host network, publishing vllm.port while vLLM listens on loopback only. Its configuration (with the API
 * key, from stdin) and its certificate (tls "generated": made on the head; "given": from stdin) are written into a
 * private directory on the head that the container mounts read-only.
 */
export class EndpointProxy extends pulumi.ComponentResource {
    readonly image: docker.RemoteImage;
    readonly tls?: remote.Command;
    readonly config: remote.Command;
    readonly container: docker.Container;
    /** The certificate (PEM; "given": the whole chain) clients pin; undefined without TLS. */
    readonly certificate: pulumi.Output<string | undefined>;
    /** tls "given": the chain as given (normalised to its certificates); not a secret, the proxy serves it to anyone. */
    private readonly givenCertificate?: pulumi.Output<string>;
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
        const tlsPlan = args.plan.proxy.tls;
        let givenStdin: pulumi.Output<string> | undefined;
        if (tlsPlan?.stdin === "tlsFiles") {
            if (!args.given) throw new Error("spark-vllm: endpoint.tls is given, and SparkCluster got no tls: { certificate, privateKey }");
            // Checked again here for callers that pass Outputs (index.ts checks the texts in parseSpec, before any
            // resource): a failure fails proxy-tls before it runs, so the proxy never starts with them.
            const texts = pulumi.all([args.given.certificate, args.given.privateKey]).apply(([tlsCertificate, tlsPrivateKey]) => {
                const problems = givenTlsProblems({ tlsCertificate, tlsPrivateKey });
                if (problems.length > 0) throw givenTlsError(problems);
                return { tlsCertificate, tlsPrivateKey };
            });
            givenStdin = unknownNotSecret(pulumi.secret(texts.apply(givenTlsStdin)));
            // A rotated certificate or key rewrites the files (and so restarts the proxy): its digest, never its text.
            wiring.set(names.of("proxy-cert"), undefined, secretDigest(givenStdin, digestSalt(names.of("proxy-cert"))));
            this.givenCertificate = pulumi.unsecret(texts.apply(t => chainCertificates(t.tlsCertificate).join("")));
        }
        if (tlsPlan) this.tls = wiring.command(names.of("proxy-tls"), parent, givenStdin);
        this.config = wiring.command(names.of("proxy-conf"), parent, args.keyLine);
        const containerName = names.of("proxy");
        const entry = wiring.entry(containerName, CONTAINER);
        this.container = wiring.set(containerName, new docker.Container(containerName,
            { ...entry.inputs, image: this.image.repoDigest },
            { ...parent, provider: head.provider, dependsOn: wiring.dependsOn(entry), deleteBeforeReplace: entry.deleteBeforeReplace }));
        // The certificate clients pin: the given chain once it has been written, or the one made on the head.
        this.certificate = this.givenCertificate && this.tls ? pulumi.unsecret(pulumi.all([this.givenCertificate, this.tls.stdout]).apply(([pem]) => pem))
            : this.tls ? this.tls.stdout.apply(out => pemCertificate(out)) : pulumi.output(undefined);
        this.certificateSha256 = this.certificate.apply(pem => (pem ? certificateSha256(pem) : undefined));
        this.registerOutputs({ certificate: this.certificate, certificateSha256: this.certificateSha256 });
    }
}
