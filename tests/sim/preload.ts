// Image layers a simulated host starts with. Every e2e file brings up fresh hosts, and each host's first `up` pulled
// the stand-in images again: measured on the 2-core CI machine, one pull of the default image cost 10-11 s of CPU
// (unpacking about 560 MB, mostly Ray), about a sixth of the whole end-to-end suite's CPU. A Spark that ran an image of
// the same family already holds most of its layers; here every host holds all of the stand-ins' layers, and nothing
// else: no image names (repositories.json is empty), so the program's pull still asks the registry for the manifest
// and checks it against the digest, and then finds the image it names already in the store (moby/moby
// distribution/pull_v2.go pullSchema2: "If the image already exists locally, no need to pull anything"): no layer is
// fetched or unpacked. `startSim({ preload: false })` gives hosts with empty image stores.
//
// The layers come from a template made once per registry storage (tests/sim/image.ts registryDirName, so pruned with
// it): a throw-away dockerd in the first host's network namespace (it reaches the cluster's registry as the hosts do)
// and in a mount namespace of its own (the overlay2 driver's private mount of its home dies with it) pulls every image,
// then stops; its data root's `image/` and `overlay2/` are the template. A host's data root gets them as hard links
// (`cp -al`): the overlay2 driver only reads a layer's files, a container writes into its own upper directory, and
// removing an image unlinks the host's links, not the template's.
import * as fs from "fs";
import * as path from "path";
import { holdLock, must, run, sleep, spawnDaemon, stopPid, alive } from "./util";

/** The template's name inside a registry's cache entry. */
const LAYER_TEMPLATE = "layers-overlay2";

export interface LayerTemplateOptions {
    /** The registry's cache entry (its `data/`, images.json): the template is made inside it. */
    regDir: string;
    /** host:port of the cluster's registry, reachable from `netns`. */
    registry: string;
    /** Every image reference to pull into the template. */
    refs: string[];
    /** A network namespace (by name, /run/netns) that reaches the registry. */
    netns: string;
    /** A short directory of this cluster's for the daemon's sockets and exec root (unix socket paths are short). */
    scratchDir: string;
    /** The lock that serializes builds into this cache (the image build's). */
    lockFile: string;
    env: NodeJS.ProcessEnv;
    log: (s: string) => void;
}

/** The template for this registry entry, made now (under the lock) when no cluster made it yet. */
export async function layerTemplate(o: LayerTemplateOptions): Promise<string> {
    const dir = path.join(o.regDir, LAYER_TEMPLATE);
    if (fs.existsSync(dir)) return dir;
    const release = await holdLock(o.lockFile, 30 * 60_000);
    try {
        if (fs.existsSync(dir)) return dir;
        const tmp = `${dir}.tmp-${process.pid}`;
        fs.rmSync(tmp, { recursive: true, force: true });
        fs.rmSync(o.scratchDir, { recursive: true, force: true });
        fs.mkdirSync(o.scratchDir, { recursive: true });
        fs.mkdirSync(tmp, { recursive: true });
        const t0 = Date.now();
        try {
            await pullInto(o, path.join(tmp, "root"));
            // Only the image store and the layers: no daemon ID, network state or containers travel to the hosts.
            const root = path.join(tmp, "root");
            fs.mkdirSync(path.join(tmp, "template"));
            for (const d of ["image", "overlay2"]) fs.renameSync(path.join(root, d), path.join(tmp, "template", d));
            fs.writeFileSync(path.join(tmp, "template", "image", "overlay2", "repositories.json"), JSON.stringify({ Repositories: {} }));
            fs.renameSync(path.join(tmp, "template"), dir);
        } finally {
            fs.rmSync(tmp, { recursive: true, force: true });
        }
        o.log(`layer template: ${o.refs.length} images in ${Date.now() - t0} ms`);
        return dir;
    } finally {
        fs.rmSync(o.scratchDir, { recursive: true, force: true });
        await release();
    }
}

async function pullInto(o: LayerTemplateOptions, dataRoot: string): Promise<void> {
    const sock = path.join(o.scratchDir, "docker.sock");
    const config = path.join(o.scratchDir, "daemon.json");
    fs.writeFileSync(config, "{}\n");
    const logFile = path.join(path.dirname(dataRoot), "dockerd.log");
    const pid = spawnDaemon([
        "nsenter", `--net=/run/netns/${o.netns}`, "--", "unshare", "--mount", "--propagation", "private", "--",
        "/usr/sbin/dockerd", "--data-root", dataRoot, "--exec-root", path.join(o.scratchDir, "exec"),
        "--pidfile", path.join(o.scratchDir, "docker.pid"), "-H", `unix://${sock}`, "--config-file", config,
        "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false", "--ip-forward=false", "--userland-proxy=false",
        "--storage-driver", "overlay2", "--insecure-registry", o.registry,
    ], logFile, o.env);
    try {
        const docker = (args: string[], timeoutMs: number) => run(["docker", "-H", `unix://${sock}`, ...args], { env: o.env, timeoutMs });
        for (const until = Date.now() + 30_000; (await docker(["info", "--format", "{{.Driver}}"], 10_000)).stdout.trim() !== "overlay2";) {
            if (!alive(pid) || Date.now() > until)
                throw new Error(`the layer template's dockerd did not start; the end of its log:\n${fs.readFileSync(logFile, "utf8").split("\n").slice(-15).join("\n")}`);
            await sleep(150); // poll interval of this wait for the daemon
        }
        for (const ref of o.refs) {
            const r = await docker(["pull", "-q", ref], 10 * 60_000);
            if (r.code !== 0) throw new Error(`layer template: docker pull ${ref}: ${r.stderr.trim()}`);
        }
    } finally {
        await stopPid(pid, "dockerd", 30_000);
    }
}

/** Gives a host's (not yet started) data root the template's layers, as hard links. */
export async function preloadLayers(template: string, dataRoot: string): Promise<void> {
    fs.mkdirSync(dataRoot, { recursive: true });
    await must(["cp", "-a", "-l", path.join(template, "image"), path.join(template, "overlay2"), `${dataRoot}/`]);
}
