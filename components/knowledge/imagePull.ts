// How long a vLLM image pull may take before docker.RemoteImage's create gives up. Pure.
//
// The provider's own bound is 20 minutes: pulumi-docker bridges kreuzwerker/terraform-provider-docker, whose
// docker_image resource (internal/provider/resource_docker_image.go) declares no Timeouts, so terraform-plugin-sdk v2's
// default applies (helper/schema ResourceData.Timeout: 20 minutes when the resource sets none); a Pulumi
// `customTimeouts` replaces it. vLLM images are tens of GB: vllm/vllm-openai:latest is 28.6 GB
// (vllm-project/vllm#22377, Dec 2025), "up to 25GB" (vllm-project/vllm#17163), "around 12 GB" compressed
// (vllm-project/vllm#27154). 20 minutes is 17 MB/s for 20 GB: a slow or shared uplink fails the first `up`.
import { normalizeReference } from "./images";

/** The provider's default create timeout, in minutes (see above). */
export const PROVIDER_DEFAULT_PULL_MINUTES = 20;

/** What we assume an image we know nothing about weighs: the largest published vLLM image size above. */
export const DEFAULT_IMAGE_BYTES = 30e9;

/**
 * Image sizes we have a source for (on-disk bytes, which bound what a pull writes), keyed as normalizeReference
 * writes them. Others are DEFAULT_IMAGE_BYTES.
 */
export const IMAGE_BYTES: Record<string, number> = {
    // vllm-project/vllm#22377: "Size of official out-of-the-box `vllm-openai:latest` docker image: `28.6 GB`" (0.12 era).
    "vllm/vllm-openai:latest": 28.6e9,
};

/**
 * The slowest link a pull is sized for: 100 Mbit/s. Not a fact about any host, a choice: a pull slower than this
 * is better told as a timeout than waited on for hours.
 */
export const SLOWEST_PULL_BYTES_PER_SECOND = 12.5e6;

/** The image's size in bytes, as far as we know it. */
export function imageBytes(reference: string): number {
    return IMAGE_BYTES[normalizeReference(reference)] ?? DEFAULT_IMAGE_BYTES;
}

/** Minutes a pull of the image may take: its size at the slowest link, never less than the provider's default. */
export function pullTimeoutMinutes(reference: string): number {
    return Math.max(PROVIDER_DEFAULT_PULL_MINUTES, Math.ceil(imageBytes(reference) / SLOWEST_PULL_BYTES_PER_SECOND / 60));
}

/** docker.RemoteImage's customTimeouts for the image (create only: update and delete do not pull). */
export function pullCustomTimeouts(reference: string): { create: string } {
    return { create: `${pullTimeoutMinutes(reference)}m` };
}
