// Runs a plan's host command for real, here: `docker exec [-i] CONTAINER ARGV…` runs ARGV in this process' bash with
// the container's fixed paths (/var/lib/spark-vllm, /var/tmp/spark-vllm) moved under a temporary root, `docker
// inspect` answers "running", and python3 (the helper program) only records its arguments, unless `realPython`. So
// the generated shell around the helper program (locks, records, pid files, what is kept and what runs) is what is tested.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

export interface ContainerShell {
    /** The temporary root: /var/lib/spark-vllm is ROOT/var-lib, /var/tmp/spark-vllm is ROOT/var-tmp. */
    root: string;
    run(command: string, opts?: { stdin?: string; pythonExit?: number; realPython?: boolean; env?: NodeJS.ProcessEnv }): { status: number | null; stdout: string; stderr: string; calls: string[] };
    /** A path inside the container, as the fake `docker exec` moves it. */
    inside(containerPath: string): string;
    remove(): void;
}

export function containerShell(): ContainerShell {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-shell-"));
    const bin = path.join(root, "bin"), fakePython = path.join(root, "bin-python"), calls = path.join(root, "calls");
    fs.mkdirSync(bin);
    fs.mkdirSync(fakePython);
    const moves = `a="\${a//\\/var\\/lib\\/spark-vllm/${root}/var-lib}"; a="\${a//\\/var\\/tmp\\/spark-vllm/${root}/var-tmp}"`;
    fs.writeFileSync(path.join(bin, "docker"), [
        "#!/bin/bash",
        `case "$1" in inspect) echo true; exit 0;; exec) shift; [ "$1" = -i ] && shift; shift;; *) echo "docker $*" >> ${calls}; exit 0;; esac`,
        `args=(); for a in "$@"; do ${moves}; args+=("$a"); done`,
        `exec "\${args[@]}"`,
    ].join("\n") + "\n", { mode: 0o755 });
    fs.writeFileSync(path.join(fakePython, "python3"), `#!/bin/bash\necho "python3 $*" >> ${calls}\nexit \${SHELL_PYTHON_EXIT:-0}\n`, { mode: 0o755 });
    const inside = (p: string) => p.replace(/^\/var\/lib\/spark-vllm/, `${root}/var-lib`).replace(/^\/var\/tmp\/spark-vllm/, `${root}/var-tmp`);
    return {
        root,
        inside,
        run(command, opts = {}) {
            fs.writeFileSync(calls, "");
            const r = spawnSync("bash", ["-c", command], {
                input: opts.stdin ?? "", encoding: "utf8",
                env: { PATH: `${opts.realPython ? "" : `${fakePython}:`}${bin}:/usr/bin:/bin:/usr/sbin:/sbin`, SHELL_PYTHON_EXIT: String(opts.pythonExit ?? 0), HOME: root, ...opts.env },
            });
            return { status: r.status, stdout: r.stdout, stderr: r.stderr, calls: fs.readFileSync(calls, "utf8").split("\n").filter(Boolean) };
        },
        remove: () => fs.rmSync(root, { recursive: true, force: true }),
    };
}
