// What the demo needs from the machine: root and the Debian packages the simulated Sparks run on. It says what is
// missing and the one command that installs it; it never installs anything itself.
import { spawnSync } from "node:child_process";

/**
 * Debian/Ubuntu packages and what the demo uses from each. The simulated hosts (tests/sim) are the same as in
 * `.ci/run`'s apt line (a unit test keeps them in step); `curl` is the demo's own: it sends the request it shows.
 */
export const DEMO_PACKAGES: Record<string, string> = {
    "docker.io": "dockerd and the docker client (one daemon per simulated host)",
    "openssh-server": "sshd (one per simulated host)",
    "openssh-client": "ssh, ssh-keygen, ssh-agent (the providers' transports)",
    "docker-registry": "the local registry holding the stand-in vLLM image",
    "iproute2": "ip (network namespaces, the bridge)",
    "iptables": "the bridge's firewall exceptions",
    "procps": "pgrep (the check that nothing is left behind)",
    "debootstrap": "builds the stand-in image's root filesystem on the first run",
    "python3": "the simulated nvidia-smi and runc wrapper",
    "python3-pip": "installs real Ray and Transformers from PyPI into the stand-in image (first run; wheels cached)",
    "curl": "the chat completion the demo shows and sends",
};

/** Whether dpkg says the package is installed; undefined when there is no dpkg (not Debian/Ubuntu). */
export type PackageQuery = (pkg: string) => boolean | undefined;

export const dpkgQuery: PackageQuery = pkg => {
    const r = spawnSync("dpkg-query", ["-W", "-f=${Status}", pkg], { encoding: "utf8" });
    if (r.error) return undefined;
    // dpkg-query's Status field of an installed package: "install ok installed" (dpkg-query(1), --showformat).
    return r.status === 0 && r.stdout.trim().endsWith(" installed");
};

/** Why the demo cannot run here, as lines to print; [] when it can. */
export function prerequisiteProblems(uid: number | undefined, query: PackageQuery): string[] {
    const problems: string[] = [];
    if (uid !== 0)
        problems.push("the demo needs root: it creates network namespaces and runs an sshd and a dockerd per simulated host. Run: sudo npm run demo");
    const status = Object.keys(DEMO_PACKAGES).map(pkg => [pkg, query(pkg)] as const);
    if (status.some(([, s]) => s === undefined))
        return [...problems, "the demo runs on Debian or Ubuntu (it checks its packages with dpkg-query, which is not here)"];
    const missing = status.filter(([, s]) => !s).map(([pkg]) => pkg);
    if (missing.length)
        problems.push(
            `missing packages: ${missing.join(", ")}`,
            ...missing.map(pkg => `  ${pkg}: ${DEMO_PACKAGES[pkg]}`),
            "install them with:",
            `  sudo apt-get install --no-install-recommends ${missing.join(" ")}`,
        );
    return problems;
}
