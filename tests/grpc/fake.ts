// A stand-in for the providers in an update that must not touch a host: each step "succeeds" and answers
// with the outputs the program reads (RandomPassword.result, RemoteImage.repoDigest, a command's stdout),
// so the deployment proceeds as far as the engine lets it.
import { repoDigest } from "../../components/plan/resources";
import type { Outcome, Registration } from "./monitor";
import { plain } from "./wire";

export function fakeOutcome(r: Registration): Outcome {
    const inputs = plain(r.inputs);
    const extra: Record<string, unknown> =
        r.type.startsWith("random:") ? { result: "fake-password-0123456789" }
        : r.type === "docker:index/remoteImage:RemoteImage" ? { repoDigest: repoDigest(String(inputs.name)), imageId: "sha256:fake" }
        : r.type === "command:remote:Command" ? { stdout: "{}", stderr: "" }
        : {};
    return { id: `${r.name}-id`, outputs: { ...r.wire, ...extra } };
}
