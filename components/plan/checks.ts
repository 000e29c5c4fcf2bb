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

/** The files one host holds for the model, as its weights command lists them. */
export interface WeightsManifest {
    host: string;
    revision: string;
    /** Path inside the snapshot → bytes. */
    files: Record<string, number>;
    totalBytes: number;
}

/**
 * Every host must hold the same files with the same sizes (the head's manifest is the reference).
 * Returns a short fingerprint of the agreed manifest, or throws naming each host and its missing files.
 */
export function sameWeights(model: string, manifests: WeightsManifest[]): string {
    const [head, ...others] = manifests;
    const problems: string[] = [];
    for (const m of others) {
        if (m.revision !== head.revision) problems.push(`  ${m.host}: snapshot ${m.revision}, but ${head.host} has ${head.revision}`);
        const missing = Object.keys(head.files).filter(f => !(f in m.files)).sort();
        const differ = Object.keys(head.files).filter(f => f in m.files && m.files[f] !== head.files[f]).sort();
        const extra = Object.keys(m.files).filter(f => !(f in head.files)).sort();
        const list = (fs: string[]) => fs.slice(0, 8).join(", ") + (fs.length > 8 ? ` and ${fs.length - 8} more` : "");
        if (missing.length) problems.push(`  ${m.host}: missing ${list(missing)}`);
        if (differ.length) problems.push(`  ${m.host}: different size from ${head.host}: ${list(differ)}`);
        if (extra.length) problems.push(`  ${m.host}: files ${head.host} does not have: ${list(extra)}`);
    }
    if (problems.length)
        throw new Error(`the hosts do not hold the same weights of ${model} (reference: ${head.host}, ${Object.keys(head.files).length} files):\n${problems.join("\n")}\n` +
            `copy the model to every host at the same path, or set spark-vllm:model.weights: download`);
    return `${head.revision}:${Object.keys(head.files).length}:${head.totalBytes}`;
}
