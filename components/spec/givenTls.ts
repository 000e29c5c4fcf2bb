// endpoint.tls "given": the certificate chain and private key the user supplies as the secrets
// spark-vllm:tlsCertificate and spark-vllm:tlsPrivateKey. Checked here (every problem at once, by key path) before
// any resource exists, and framed for the one place they travel: the proxy-tls command's stdin. Pure: no Pulumi.
//
// The checks are OpenSSL's own, through Node's crypto (nodejs.org/api/crypto.html, class X509Certificate, Node ≥ 15.6):
// `new X509Certificate(pem)` parses the first certificate, `x509.checkPrivateKey(key)` is OpenSSL's
// X509_check_private_key (the public parts of the pair compared), `x509.checkIssued(other)` whether `other` issued
// this one, `validTo` the notAfter date; `crypto.createPrivateKey(pem)` parses a PEM private key.
import * as crypto from "crypto";

/** The config keys (without the namespace) of a given certificate. */
export const TLS_CERTIFICATE_KEY = "tlsCertificate";
export const TLS_PRIVATE_KEY = "tlsPrivateKey";

/** A certificate chain or key longer than this is a mistake (a whole bundle of roots, a binary file). */
export const GIVEN_TLS_MAX_CHARS = 64 * 1024;

/** The secrets' texts, as the program has them (only under `pulumi up`/`preview`: `spark-vllm plan` sees `secure:`). */
export interface GivenTlsTexts {
    tlsCertificate?: string;
    tlsPrivateKey?: string;
}

/** A problem at a key path (without the namespace). */
export type KeyProblem = [path: string, message: string];

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----([A-Za-z0-9+/=\s]*?)-----END \1-----/g;
const pemBlocks = (text: string) => [...text.matchAll(PEM_BLOCK)].map(m => ({ label: m[1], text: m[0] }));

/** The PEM certificates of a chain, in order (what nginx's ssl_certificate reads). */
export function chainCertificates(text: string): string[] {
    return pemBlocks(text).filter(b => b.label === "CERTIFICATE").map(b => `${b.text}\n`);
}

const setSecret = (key: string, example: string) =>
    `set it with \`${example} | pulumi config set --secret spark-vllm:${key}\``;

/**
 * What is wrong with a given certificate chain and key, each at its key path; [] when nginx can serve them. Never
 * shows either text. `now` is when the certificate must still be valid.
 */
export function givenTlsProblems(texts: GivenTlsTexts, now: Date = new Date()): KeyProblem[] {
    const problems: KeyProblem[] = [];
    const certificate = texts.tlsCertificate;
    const privateKey = texts.tlsPrivateKey;
    let leaf: crypto.X509Certificate | undefined;
    let key: crypto.KeyObject | undefined;

    if (certificate === undefined || certificate.trim() === "")
        problems.push([TLS_CERTIFICATE_KEY, `missing; endpoint.tls given needs the certificate chain (PEM, the server's certificate first); ${setSecret(TLS_CERTIFICATE_KEY, "cat chain.pem")}`]);
    else if (certificate.length > GIVEN_TLS_MAX_CHARS)
        problems.push([TLS_CERTIFICATE_KEY, `is ${certificate.length} characters long; at most ${GIVEN_TLS_MAX_CHARS} (the server's certificate and its intermediates, not a bundle of roots)`]);
    else {
        const blocks = pemBlocks(certificate);
        const others = [...new Set(blocks.filter(b => b.label !== "CERTIFICATE").map(b => b.label))];
        if (others.some(l => l.includes("PRIVATE KEY")))
            problems.push([TLS_CERTIFICATE_KEY, `holds a private key; put only certificates here and the key in spark-vllm:${TLS_PRIVATE_KEY}`]);
        else if (others.length > 0)
            problems.push([TLS_CERTIFICATE_KEY, `holds a PEM ${others[0]} block; put only certificates (-----BEGIN CERTIFICATE-----) here`]);
        const pems = chainCertificates(certificate);
        if (pems.length === 0)
            problems.push([TLS_CERTIFICATE_KEY, "holds no PEM certificate (-----BEGIN CERTIFICATE-----); convert a DER file with `openssl x509 -inform der -in cert.der`"]);
        const parsed: crypto.X509Certificate[] = [];
        pems.forEach((pem, i) => {
            try {
                parsed.push(new crypto.X509Certificate(pem));
            } catch {
                problems.push([TLS_CERTIFICATE_KEY, `certificate ${i + 1} of ${pems.length} cannot be parsed (damaged base64 or not X.509)`]);
            }
        });
        if (parsed.length === pems.length && parsed.length > 0) {
            leaf = parsed[0];
            // nginx.org/en/docs/http/configuring_https_servers.html, "SSL certificate chains": the server certificate
            // must appear before the chained certificates in the combined file.
            for (let i = 0; i + 1 < parsed.length; i++)
                if (!parsed[i].checkIssued(parsed[i + 1])) {
                    problems.push([TLS_CERTIFICATE_KEY, `is not a chain in order: certificate ${i + 2} (${parsed[i + 1].subject.replace(/\n/g, ", ")}) did not issue certificate ${i + 1} ` +
                        `(${parsed[i].subject.replace(/\n/g, ", ")}); put the server's certificate first, then each issuer (\`cat server.pem intermediate.pem\`)`]);
                    break;
                }
            if (new Date(leaf.validTo).getTime() <= now.getTime())
                problems.push([TLS_CERTIFICATE_KEY, `the server's certificate expired on ${leaf.validTo}; renew it and set the new chain`]);
        }
    }

    if (privateKey === undefined || privateKey.trim() === "")
        problems.push([TLS_PRIVATE_KEY, `missing; endpoint.tls given needs the certificate's private key (PEM, not encrypted); ${setSecret(TLS_PRIVATE_KEY, "cat key.pem")}`]);
    else if (privateKey.length > GIVEN_TLS_MAX_CHARS)
        problems.push([TLS_PRIVATE_KEY, `is ${privateKey.length} characters long; at most ${GIVEN_TLS_MAX_CHARS}`]);
    else {
        const blocks = pemBlocks(privateKey);
        const keys = blocks.filter(b => / ?PRIVATE KEY$/.test(b.label));
        if (blocks.some(b => b.label === "ENCRYPTED PRIVATE KEY") || /Proc-Type: 4,ENCRYPTED/.test(privateKey))
            problems.push([TLS_PRIVATE_KEY, "is encrypted, and the proxy cannot ask for its passphrase; decrypt it with `openssl pkey -in key.pem -out plain.pem` and set that"]);
        else if (keys.length !== 1 || blocks.length !== 1)
            problems.push([TLS_PRIVATE_KEY, `must be exactly one PEM private key (-----BEGIN PRIVATE KEY-----), found ${keys.length} key${keys.length === 1 ? "" : "s"} among ${blocks.length} PEM block${blocks.length === 1 ? "" : "s"}`]);
        else {
            try {
                key = crypto.createPrivateKey(keys[0].text);
            } catch {
                problems.push([TLS_PRIVATE_KEY, "cannot be parsed as a private key (damaged base64 or an unsupported key type)"]);
            }
        }
    }

    // nginx fails to start with "X509_check_private_key:key values mismatch" (same nginx page) when they differ.
    if (leaf && key && !leaf.checkPrivateKey(key))
        problems.push([TLS_PRIVATE_KEY, `does not belong to the server's certificate in spark-vllm:${TLS_CERTIFICATE_KEY} (${leaf.subject.replace(/\n/g, ", ")}); ` +
            "set the key the certificate was issued for (`openssl x509 -noout -pubkey -in chain.pem` and `openssl pkey -pubout -in key.pem` print the same key)"]);
    return problems;
}

/** A problem list as thrown under the program when the secrets arrive as Outputs (SparkCluster). */
export function givenTlsError(problems: KeyProblem[]): Error {
    return new Error(`invalid given certificate (${problems.length} problem${problems.length === 1 ? "" : "s"}):\n` +
        problems.map(([path, message]) => `  - spark-vllm:${path}: ${message}`).join("\n"));
}

/**
 * The proxy-tls command's stdin: the chain, then the key, each as one line of base64 (RFC 4648 section 4, no line
 * breaks), read on the head by the shell's `read` builtin and decoded by `base64 -d` from a pipe: multi-line PEM
 * through line-based stdin, never in an argument. The chain is normalised to its certificates (nothing else nginx
 * would read), each ending in a newline.
 */
export function givenTlsStdin(texts: Required<GivenTlsTexts>): string {
    const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64");
    const key = pemBlocks(texts.tlsPrivateKey)[0]?.text ?? texts.tlsPrivateKey;
    return `${b64(chainCertificates(texts.tlsCertificate).join(""))}\n${b64(`${key}\n`)}\n`;
}
