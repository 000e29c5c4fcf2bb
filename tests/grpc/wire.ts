// Property values as they cross the gRPC wire (google.protobuf.Struct with Pulumi's signature objects),
// decoded into plain data that keeps what mocks lose: which values are secret, which are unknown.
// The signatures are the SDK's own constants (@pulumi/pulumi 3.276.0 runtime/rpc.js: specialSigKey,
// specialSecretSig, specialResourceSig, specialOutputValueSig, unknownValue).
import * as rpc from "@pulumi/pulumi/runtime/rpc";

/** A value the program marked secret (config.getSecret, pulumi.secret, additionalSecretOutputs). */
export class Secret {
    constructor(readonly value: unknown) {}
    toJSON() { return { secret: this.value }; }
}

/** A value not known until apply (an output of a resource not yet created). */
export const UNKNOWN = Object.freeze({ toJSON: () => "<unknown>" });

/** A reference to another resource (resourceReferences feature). */
export class ResourceRef {
    constructor(readonly urn: string, readonly id?: unknown) {}
    toJSON() { return { resourceRef: this.urn }; }
}

const SIG = rpc.specialSigKey;

/** Struct.toJavaScript() output → plain data with Secret / UNKNOWN / ResourceRef. */
export function decode(v: any): any {
    if (v === rpc.unknownValue) return UNKNOWN;
    if (Array.isArray(v)) return v.map(decode);
    if (v === null || typeof v !== "object") return v;
    switch (v[SIG]) {
        case rpc.specialSecretSig: return new Secret(decode(v.value));
        case rpc.specialResourceSig: return new ResourceRef(v.urn, v.id === undefined ? undefined : decode(v.id));
        case rpc.specialOutputValueSig: {
            // An output value: no `value` key means unknown (pulumi/pulumi sdk/go/common/resource/plugin/rpc.go UnmarshalPropertyValue, OutputValueSig case).
            const inner = "value" in v ? decode(v.value) : UNKNOWN;
            return v.secret ? new Secret(inner) : inner;
        }
        case undefined: return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, decode(x)]));
        default: return v; // assets and archives: passed through as sent
    }
}

/**
 * Plain data → the wire form the engine sends an analyzer: MarshalProperties with KeepUnknowns and KeepSecrets
 * and no output values (pulumi/pulumi pkg/resource/plugin/analyzer_plugin.go Analyze).
 */
export function encode(v: any): any {
    if (v === UNKNOWN) return rpc.unknownValue;
    if (v instanceof Secret) return { [SIG]: rpc.specialSecretSig, value: encode(v.value) };
    if (v instanceof ResourceRef) return { [SIG]: rpc.specialResourceSig, urn: v.urn, ...(v.id === undefined ? {} : { id: encode(v.id) }) };
    if (Array.isArray(v)) return v.map(encode);
    if (v === null || typeof v !== "object") return v;
    return Object.fromEntries(Object.entries(v).filter(([, x]) => x !== undefined).map(([k, x]) => [k, encode(x)]));
}

/** The value with secrets unwrapped and unknowns as undefined (what a plain reader sees). */
export function plain(v: any): any {
    if (v === UNKNOWN) return undefined;
    if (v instanceof Secret) return plain(v.value);
    if (v instanceof ResourceRef) return v.urn;
    if (Array.isArray(v)) return v.map(plain);
    if (v === null || typeof v !== "object") return v;
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
}

/** Paths (a.b[0]) of every secret / unknown value inside v. */
export function pathsOf(v: any, test: (x: any) => boolean, at = ""): string[] {
    if (test(v)) return [at || "."];
    if (v instanceof Secret) return pathsOf(v.value, test, at);
    if (Array.isArray(v)) return v.flatMap((x, i) => pathsOf(x, test, `${at}[${i}]`));
    if (v === null || typeof v !== "object" || v instanceof ResourceRef) return [];
    return Object.entries(v).flatMap(([k, x]) => pathsOf(x, test, at ? `${at}.${k}` : k));
}
