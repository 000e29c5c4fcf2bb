// What each provider answers a step with in a preview (the engine calls Create/Update with Preview set: pulumi/pulumi@
// 1b59498 pkg/resource/deploy/step.go CreateStep/UpdateStep.Apply; an update's id is always the old one, "Always
// propagate the ID … even in previews"). The program sees exactly this: an id ("" is unknown) and the outputs, where
// a property left out is unknown (the SDK's resolveOutputs in a dry run).
import * as crypto from "crypto";
import * as rpc from "@pulumi/pulumi/runtime/rpc";
import type { Entry, OpKind } from "../engine/state";
import type { Outcome, Registration } from "./monitor";
import { encode } from "./wire";

const COMMAND = "command:remote:Command";
/** The providers bridged from Terraform SDKv2 providers (pulumi-terraform-bridge v3.133.0 in @pulumi/docker 5.2.0). */
const BRIDGED_SDKV2 = new Set(["docker:index/container:Container", "docker:index/remoteImage:RemoteImage"]);

/**
 * resource.NewUniqueHex(name, 8, 0) (pulumi/pulumi sdk/go/common/resource/resource_id.go): the name and 8 hex digits.
 * remote.Command's Create makes its id so before it looks at DryRun (pulumi-command v1.2.1 commandController.go), and
 * neither pulumi-go-provider v1.3.0 nor the engine drops it in a preview: the program sees a known id.
 */
export const uniqueHex = (name: string) => name + crypto.randomBytes(4).toString("hex");

/**
 * A create's (or a replacement's new copy's) preview answer.
 * - remote.Command (pulumi-go-provider v1.3.0 infer/resource.go markComputed, isCreate): an output that mirrors an
 *   input of the same name and value stays known, every other one (`stdout`, `stderr`) is unknown; the id is known.
 * - docker.Container, docker.RemoteImage (bridge v3.133.0 pkg/tfbridge/provider.go Create: in a preview the state is
 *   diff.ProposedState, terraform-plugin-sdk v2.40.1 helper/schema/grpc_provider.go PlanResourceChange: `id` is
 *   NewComputed and SetUnknowns leaves every unset computed attribute unknown): the inputs, everything else and the id
 *   unknown. random.RandomPassword likewise (`result`, `bcryptHash` unknown until created).
 * Known difference: the bridge's Check also fills in schema defaults (a container's `start`, `mustRun`…), which this
 * engine does not; the program reads none of them.
 */
export function previewCreate(r: Registration): Outcome {
    // A provider resource is created by the engine itself: in a preview its id is the UnknownID token, which the SDK
    // takes as a string (pkg/resource/deploy/providers/registry.go Registry.Create; runtime/resource.js resolveID).
    if (r.type.startsWith("pulumi:providers:")) return { id: rpc.unknownValue, outputs: r.wire };
    return { id: r.type === COMMAND ? uniqueHex(r.name) : "", outputs: r.wire };
}

/**
 * An update's preview answer: the old id, always (step.go UpdateStep.Apply).
 * - remote.Command (infer markComputed, update): with no declared flow every output depends on every input
 *   (ensureDefaultComputed), and an update has a changed input, so `stdout`/`stderr` are unknown; inputs mirror.
 * - docker.Container, docker.RemoteImage (bridge Update: diff.ProposedState from the prior state; PlanResourceChange
 *   applies the diff to the prior attributes and sets unknowns only on create, and neither resource has a
 *   CustomizeDiff in terraform-provider-docker v4.5.0): the prior state with the new inputs over it, so computed
 *   outputs such as a RemoteImage's `repoDigest` and `imageId` stay known.
 */
export function previewUpdate(r: Registration, old: Entry): Outcome {
    if (!BRIDGED_SDKV2.has(r.type)) return { id: old.id, outputs: r.wire };
    const removedInputs = new Set(Object.keys(old.inputs).filter(k => !(k in r.wire)));
    const prior = Object.fromEntries(Object.entries(old.outputs).filter(([k]) => !removedInputs.has(k)));
    return { id: old.id, outputs: { ...encode(prior), ...r.wire } };
}

/** The preview answer for a step of this kind. */
export function previewOutcome(op: OpKind, r: Registration, old?: Entry): Outcome {
    if (op === "same") return { id: old!.id, outputs: encode(old!.outputs) };
    if (op === "update") return previewUpdate(r, old!);
    return previewCreate(r);
}
