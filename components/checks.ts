// Cross-host checks on facts the hosts report. Pure: the components call them inside `apply`,
// so a failed check rejects the inputs of everything downstream and nothing launches.

/** The repo digest without its repository: `repo@sha256:…` → `sha256:…`. */
export function digestOf(repoDigest: string): string {
    return repoDigest.slice(repoDigest.lastIndexOf("@") + 1);
}

/**
 * Every host must run the very same image. Compares repo digests (not image IDs: storage
 * drivers give one image different IDs). Returns the common digest or throws naming each host.
 */
export function sameImage(reference: string, byHost: Array<[string, string]>): string {
    const digests = new Set(byHost.map(([, d]) => digestOf(d)));
    if (digests.size === 1) return [...digests][0];
    throw new Error(
        `the hosts pulled different images for ${reference}:\n` +
            byHost.map(([host, d]) => `  ${host}: ${d || "no repo digest (image not from a registry)"}`).join("\n") +
            "\npin spark-vllm:image by digest (<repo>[:tag]@sha256:<digest>) so every host runs the same image",
    );
}
