// Ray token authentication and vLLM's environment carry-over to Ray workers, as plain data and shell. No Pulumi.
//
// Ray without authentication runs any code a peer that reaches its ports sends it. Ray >= 2.52.0 has token
// authentication (https://docs.ray.io/en/latest/ray-security/token-auth.html, "available in Ray 2.52.0 or later"):
// - RAY_AUTH_MODE=token turns it on for every Ray process that sees it, GCS, raylets, drivers and workers
//   (src/ray/rpc/authentication/authentication_mode.cc reads RayConfig AUTH_MODE, i.e. RAY_AUTH_MODE). A Ray older
//   than 2.52 has no such setting and ignores the variable, so the one container environment serves both: Ray itself
//   decides whether the cluster is authenticated, and the compatibility check warns when it cannot be
//   (components/hostProgram/spark_vllm/compat.py).
// - the token is read from RAY_AUTH_TOKEN, else from the first line of the file RAY_AUTH_TOKEN_PATH names, else
//   ~/.ray/auth_token (src/ray/rpc/authentication/authentication_token_loader.cc). We use the file: an environment
//   variable would be in every process's environment (vLLM copies environment to its Ray workers) and a `docker exec
//   -e` would put it in argv; the file is 0600 in a 0700 directory inside the container, written from stdin.
// - clients need RAY_AUTH_MODE=token too: `ray.init(address=...)` does not enable it on its own (ray-project/ray#64755
//   review), so it is in the container's environment, where `vllm serve` and the Ray probe inherit it.
import { shq } from "./scripts";

/** Inside every container (not a mount): root-only, gone with the container. */
export const RAY_TOKEN_DIR = "/var/lib/spark-vllm/ray";
export const RAY_TOKEN_FILE = `${RAY_TOKEN_DIR}/auth_token`;

/** What the container environment adds for the Ray backend: token mode, and where the token is. */
export function rayAuthEnv(): Array<[string, string]> {
    return [["RAY_AUTH_MODE", "token"], ["RAY_AUTH_TOKEN_PATH", RAY_TOKEN_FILE]];
}

/**
 * Shell lines (bash, in the container) that read the token from stdin's first line and put it in RAY_TOKEN_FILE
 * under a name mktemp picks, renamed into place; the token never reaches argv, the environment or another file.
 */
export function installRayToken(file: string = RAY_TOKEN_FILE): string[] {
    const dir = file.replace(/\/[^/]+$/, "");
    return [
        "IFS= read -r token || true",
        `[ -n "$token" ] || { echo 'spark-vllm: no Ray token on stdin' >&2; exit 1; }`,
        "umask 077",
        `mkdir -p ${shq(dir)} && chmod 700 ${shq(dir)}`,
        `tmp=$(mktemp ${shq(`${dir}/.auth_token.XXXXXX`)})`,
        `printf '%s\\n' "$token" > "$tmp" && mv -f "$tmp" ${shq(file)} || { rm -f "$tmp"; exit 1; }`,
        "unset token",
    ];
}

/**
 * vLLM's Ray executor copies the driver's VLLM_* variables (and HF_*, NCCL_*, …) to every Ray worker it starts,
 * except the names listed in $VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json (vllm/ray/ray_env.py,
 * get_env_vars_to_copy; VLLM_CONFIG_ROOT defaults to ~/.config/vllm, vllm/envs.py). The API key has no business on
 * the workers: the head's launch lists it there before `vllm serve` starts (the helper program merges it into the file).
 */
export const RAY_NON_CARRY_OVER = ["VLLM_API_KEY"];
