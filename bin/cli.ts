const USAGE = `usage:
  spark-vllm plan --stack NAME [--json]   render what a stack would do, offline
  spark-vllm diff --stack NAME --set key=value ...   what a config change replaces or updates, offline
  spark-vllm diagnose FILE|- [--json]     find the root cause in a vLLM log (- reads stdin)`;

export async function main(argv: string[]): Promise<number> {
    const [command, ...rest] = argv;
    switch (command) {
        case "diagnose":
            return (require("./diagnose-command") as typeof import("./diagnose-command")).diagnoseCommand(rest);
        case "diff":
            return (require("./diff-command") as typeof import("./diff-command")).diffCommand(rest);
        case "plan":
            return (require("./plan-command") as typeof import("./plan-command")).planCommand(rest);
        default:
            console.error(USAGE);
            return command === undefined || command === "--help" || command === "-h" ? 0 : 2;
    }
}
