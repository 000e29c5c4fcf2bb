const USAGE = `usage:
  spark-vllm plan --stack NAME [--json]   render what a stack would do, offline
  spark-vllm diagnose FILE|-              find the root cause in a vLLM log (- reads stdin)`;

export async function main(argv: string[]): Promise<number> {
    const [command, ...rest] = argv;
    switch (command) {
        case "diagnose":
            return (await import("./diagnose-command")).diagnoseCommand(rest);
        case "plan":
            return (await import("./plan-command")).planCommand(rest);
        default:
            console.error(USAGE);
            return command === undefined || command === "--help" || command === "-h" ? 0 : 2;
    }
}
