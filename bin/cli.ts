// `spark-vllm COMMAND ...`: the usage, and each command run from its own module, loaded only when it runs.
import { EXIT } from "./shared";

const USAGE = `usage:
  spark-vllm plan --stack NAME [--json]   render what a stack would do, offline
  spark-vllm diff --stack NAME [--set key=value ...] [--rotate SECRET ...]
                                          what a config change or a secret's new value replaces or updates, offline
  spark-vllm diagnose FILE|- [--json]     find the root cause in a vLLM log (- reads stdin)
  spark-vllm diagnose --stack NAME [--json] [--dir DIR]
                                          the cluster's root cause from every host's logs, over SSH
  spark-vllm status --stack NAME [--json] is the cluster serving? per host, over SSH (read-only)
  spark-vllm top --stack NAME [--once] [--json]
                                          requests, tokens/s, latencies, KV cache, memory, GPU, live
  spark-vllm init --stack NAME --host [USER@]ADDRESS[:PORT] ... [--identity KEY] [--model ID] [--image REF] [--dry-run] [--force]
                                          read the Sparks over SSH (read-only) and write Pulumi.NAME.yaml

exit codes:
  ${EXIT.ok}  done (plan/diff: every mandatory policy passes; diagnose: a root cause was found)
  ${EXIT.failure}  diagnose: no known root cause found; any command: an unexpected failure
  ${EXIT.usage}  usage error: unknown command or option, a missing value; diagnose: the log cannot be read
  ${EXIT.config}  config error: stack file missing, unreadable, not YAML or not a stack file; invalid config;
     hfToken or sshPrivateKey in plain text instead of secure:; init: the hosts cannot form a cluster
     (every reason printed), or the stack file exists (without --force)
  ${EXIT.policy}  a mandatory policy fails
  ${EXIT.notServing}  status: the cluster is not serving`;

export async function main(argv: string[]): Promise<number> {
    const [command, ...rest] = argv;
    switch (command) {
        case "diagnose":
            return (require("./diagnose-command") as typeof import("./diagnose-command")).diagnoseCommand(rest);
        case "diff":
            return (require("./diff-command") as typeof import("./diff-command")).diffCommand(rest);
        case "status":
            return (require("./status-command") as typeof import("./status-command")).statusCommand(rest);
        case "top":
            return (require("./top-command") as typeof import("./top-command")).topCommand(rest);
        case "init":
            return (require("./init-command") as typeof import("./init-command")).initCommand(rest);
        case "plan":
            return (require("./plan-command") as typeof import("./plan-command")).planCommand(rest);
        default:
            console.error(USAGE);
            return command === undefined || command === "--help" || command === "-h" ? EXIT.ok : EXIT.usage;
    }
}
