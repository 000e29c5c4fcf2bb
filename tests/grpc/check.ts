// What a provider's Check does to the inputs before the engine diffs them and the policy pack analyzes them, where it
// changes what the program sent. Seen on the real CLI 3.276.0 with pulumi-command 1.2.1 (pulumi-go-provider v1.3.0),
// issue 37: an input that is secret *and* unknown (the SDK keeps the secret marker on an unknown, @pulumi/pulumi 3.276.0
// runtime/rpc.js serializeProperty) comes back
// - inside `triggers` (a list of any): as a secret with no value, which the CLI refuses ("malformed secret: missing
//   value", pulumi/pulumi sdk/go/propertyrpc/unmarshal.go), failing the preview;
// - as a string input (`stdin`): as a secret "", which is what the policy pack is then given.
// The program sends no such value (components/wiring.ts unknownNotSecret); tests/real/preview.test.ts runs the real one.
import * as rpc from "@pulumi/pulumi/runtime/rpc";

const COMMAND = "command:remote:Command";
const SIG = rpc.specialSigKey;
/** A secret unknown as the SDK sends it: a secret around the unknown token, or an output value marked secret without a value. */
const isSecretUnknown = (v: any) => v !== null && typeof v === "object" &&
    (v[SIG] === rpc.specialSecretSig && v.value === rpc.unknownValue || v[SIG] === rpc.specialOutputValueSig && v.secret === true && !("value" in v));

/** The inputs as the resource's provider's Check returns them (wire form); throws the CLI's error where it refuses them. */
export function checkedInputs(type: string, wire: Record<string, any>): Record<string, any> {
    if (type !== COMMAND) return wire;
    const triggers = Array.isArray(wire.triggers) ? wire.triggers : [];
    const bad = triggers.findIndex(isSecretUnknown);
    if (bad !== -1) throw new Error(`triggers[${bad}]: malformed secret: missing value`);
    return Object.fromEntries(Object.entries(wire).map(([k, v]) => [k, isSecretUnknown(v) ? { [SIG]: rpc.specialSecretSig, value: "" } : v]));
}
