// spark-vllm:vllm.extraArgs, checked before anything runs: options spark-vllm sets itself, options refused whatever their
// value (listeners beside the endpoint proxy, weakened HTTP checks, code that the stack names: the first section below), and
// options refused for some values (KV events, data-parallel addresses, vLLM's h11 limits), each judged by what vLLM
// resolves (vllmArgv.ts). docs/security.md#refused-extraargs lists them with their reasons. Pure.
import { plain, show, showJson } from "./showValue";
import { NOT_JSON, ResolvedJsonOption, dottedArg, dottedValueIndexes, isObject, namesOption, optionValue, pydanticBool, pythonInt, resolveJsonOption, vllmOptionOf } from "./vllmArgv";

// ---------------------------------------------------------------- code that the stack names
// Issue 41, one rule for code: vllm.extraArgs may not make vLLM import or run code that the stack names (a module, a
// class or function by qualified name, a .py file, a logging factory). What runs in the containers is the image's code,
// and the model repository's own only with spark-vllm:model.trustRemoteCode. Each option and JSON field below is cited
// where vLLM imports it (vLLM 0.32.0 paths unless another version is named); the list is what vLLM 0.10.1.1, 0.20.1
// and 0.32.0 offer, found by their imports (resolve_obj_by_qualname, importlib.import_module, __import__,
// import_from_path, logging.config.dictConfig). A later vLLM may add more.

const loads = (what: string, where: string) => `it makes vLLM import and run code that the stack names: ${what} (${where})`;

/** Options whose value is always code for vLLM to load: refused whatever the value. */
export const CODE_LOADING_VLLM_FLAGS: Record<string, string> = {
    "--middleware": loads("each value is an importable ASGI middleware put in front of vLLM's routes and key check",
        "FrontendArgs.middleware, vllm/entrypoints/launchers/cli_args.py; imported in vllm/entrypoints/serve/middleware/register.py"),
    "--tool-parser-plugin": loads("a module or a .py file imported to register tool parsers",
        "ToolParserManager.import_tool_parser, vllm/tool_parsers/abstract_tool_parser.py, through import_plugin in vllm/utils/import_utils.py"),
    "--reasoning-parser-plugin": loads("a module or a .py file imported to register reasoning parsers",
        "ReasoningParserManager.import_reasoning_parser, vllm/reasoning/abs_reasoning_parsers.py"),
    "--logits-processors": loads("qualified class names imported as logits processors",
        "ModelConfig.logits_processors, imported in vllm/v1/sample/logits_processor/__init__.py"),
    "--logits-processor-pattern": "it lets every API caller name a function for vLLM to import and run as a logits processor " +
        "(ModelConfig.logits_processor_pattern; get_logits_processors, vllm/entrypoints/openai/engine/protocol.py in vLLM 0.20.1)",
    "--worker-cls": loads("the worker class by qualified name", "ParallelConfig.worker_cls, resolve_obj_by_qualname in vllm/v1/worker/worker_base.py"),
    "--worker-extension-cls": loads("a class mixed into every worker", "ParallelConfig.worker_extension_cls, resolve_obj_by_qualname in vllm/v1/worker/worker_base.py"),
    "--scheduler-cls": loads("the scheduler class by qualified name", "SchedulerConfig.get_scheduler_cls, vllm/config/scheduler.py"),
    "--log-config-file": loads("a logging dictConfig file, whose \"()\" keys name factories that Python's logging.config calls",
        "LoggingConfig.pylogging_config_file, vllm/config/logging.py; FrontendArgs.log_config_file before vLLM 0.31; Python docs, logging.config, \"User-defined objects\""),
    "--model-class-overrides": loads("\"module:class\" targets registered as model classes",
        "ModelConfig.model_class_overrides, vllm/config/model.py _maybe_register_model_class_overrides"),
};

/** A field of a JSON-valued option that names code; `loadsCode` says whether a value does. */
interface CodeField {
    options: string[];
    field: string;
    loadsCode: (value: unknown) => boolean;
    why: string;
}

/** CompilationConfig.backend values that are vLLM's own (vllm/config/compilation.py: "" is the default, inductor). */
const OWN_BACKENDS = ["", "eager", "inductor"];
/** vLLM 0.10.1.1's `-O` is --compilation-config (its engine/arg_utils.py), and 0.20 on add `-cc`. */
const COMPILATION = ["--compilation-config", "-cc", "-O"];
const set = (v: unknown) => v !== undefined && v !== null && v !== "" && !(isObject(v) && Object.keys(v).length === 0);

const CODE_FIELDS: CodeField[] = [
    { options: COMPILATION, field: "backend", loadsCode: v => v !== undefined && !OWN_BACKENDS.includes(v as string),
        why: `a backend other than vLLM's own (${OWN_BACKENDS.map(b => JSON.stringify(b)).join(", ")}) is a qualified name vLLM imports ` +
            `(CompilationConfig.backend, resolve_obj_by_qualname in vllm/config/compilation.py init_backend)` },
    { options: COMPILATION, field: "inductor_passes", loadsCode: set,
        why: "its values are qualified names of functions vLLM imports (CompilationConfig.inductor_passes, __import__ in vllm/config/compilation.py __post_init__)" },
    { options: ["--logging-config"], field: "pylogging_config_file", loadsCode: set,
        why: "a logging dictConfig file, whose \"()\" keys name factories that Python's logging.config calls (LoggingConfig, vllm/config/logging.py)" },
    { options: ["--structured-outputs-config"], field: "reasoning_parser_plugin", loadsCode: set,
        why: "a module or a .py file imported to register reasoning parsers (StructuredOutputsConfig.reasoning_parser_plugin, vllm/reasoning/abs_reasoning_parsers.py)" },
];

/**
 * A speculative-decoding proposer loaded by qualified name: `method` "custom_class", or no method and a `model` that
 * is a dotted import path (SpeculativeConfig._is_custom_proposer_path and __post_init__, vllm/config/speculative.py;
 * imported in vllm/v1/spec_decode/custom_class_proposer.py). Read more widely than vLLM does: any model without a `/`
 * (a Hugging Face id or a path has one) that has a `.` and is not a URL.
 */
function customProposer(method: unknown, model: unknown): boolean {
    if (typeof method === "string" && method.toLowerCase().replace(/-/g, "_") === "custom_class") return true;
    if (method !== undefined && method !== null) return false;
    return typeof model === "string" && model.includes(".") && !model.includes("/") && !/^(https?|file):\/\//i.test(model);
}

const showField = (v: unknown) => showJson(v, 80);
const optionOf = (names: string[]) => (o: string) => names.some(n => namesOption(o, n));

/** The last plain value of an option (`--spec-model x`), or undefined. */
function lastValue(args: readonly string[], name: string): { value: string | undefined; at: number } | undefined {
    let found: { value: string | undefined; at: number } | undefined;
    args.forEach((a, i) => {
        const o = vllmOptionOf(a);
        if (o && namesOption(o, name)) found = { value: optionValue(args, i), at: i };
    });
    return found;
}

/**
 * Problems with JSON-valued extraArgs whose resolved value names code, as [index, message]. Each option is resolved as
 * vLLM resolves it (resolveJsonOption: dotted keys replace a plain value whole); `-O` both as vLLM 0.10 reads it (a
 * --compilation-config) and as later vLLM does (not one), so neither reading lets code through.
 */
export function codeLoadingProblems(args: readonly string[]): Array<[number, string]> {
    const problems: Array<[number, string]> = [];
    const add = (at: number, message: string) => {
        if (!problems.some(([i, m]) => i === at && m === message)) problems.push([at, message]);
    };
    const readings = (names: string[]) => names.includes("-O") ? [names, names.filter(n => n !== "-O")] : [names];
    for (const field of CODE_FIELDS) {
        for (const names of readings(field.options)) {
            const resolved = resolveJsonOption(args, optionOf(names));
            if (!resolved) continue;
            const name = names[0];
            if (resolved.value === NOT_JSON) {
                add(resolved.at, `${name} is refused: spark-vllm reads its JSON to check that it names no code, and cannot read ` +
                    `this value; write it as a plain JSON object`);
                continue;
            }
            const value = isObject(resolved.value) ? resolved.value[field.field] : undefined;
            if (field.loadsCode(value))
                add(resolved.keyAt[field.field] ?? resolved.at, `${name} ${field.field} ${showField(value)} is refused: ${field.why}; ` +
                    `spark-vllm runs only the image's code (and the model's own with spark-vllm:model.trustRemoteCode); remove it`);
        }
    }
    const spec = resolveJsonOption(args, optionOf(["--speculative-config"]));
    const config = spec && isObject(spec.value) ? spec.value : {};
    if (spec?.value === NOT_JSON)
        add(spec.at, "--speculative-config is refused: spark-vllm reads its JSON to check that it names no code, and cannot read this value; write it as a plain JSON object");
    // vLLM 0.32's shortcuts merge into the speculative config (EngineArgs.create_speculative_config, vllm/engine/arg_utils.py).
    const method = lastValue(args, "--spec-method");
    const model = lastValue(args, "--spec-model");
    const m = method ? method.value : config.method;
    const d = model ? model.value : config.model;
    if (customProposer(m, d))
        add(method?.at ?? model?.at ?? spec!.keyAt.method ?? spec!.keyAt.model ?? spec!.at,
            `the speculative-decoding proposer (method ${showField(m)}, model ${showField(d)}) is refused: vLLM imports a "custom_class" ` +
            `proposer by its qualified name (vllm/config/speculative.py, vllm/v1/spec_decode/custom_class_proposer.py); ` +
            `spark-vllm runs only the image's code; use a draft model from the Hugging Face Hub or a built-in method`);
    return problems;
}

// ---------------------------------------------------------------- managed and refused options

/**
 * The flags spark-vllm sets itself, with the config key that sets each; extraArgs may not repeat them in any
 * spelling vLLM accepts (see vllmOptionOf and VLLM_ALIASES).
 */
export const MANAGED_VLLM_FLAGS: Record<string, string> = {
    "--model": "model.id",
    "--tensor-parallel-size": "vllm.tensorParallelSize",
    "-tp": "vllm.tensorParallelSize",
    "--pipeline-parallel-size": "vllm.pipelineParallelSize",
    "-pp": "vllm.pipelineParallelSize",
    // vLLM's own port is the loopback one behind the endpoint proxy (which publishes vllm.port).
    "--port": "vllm.internalPort",
    "--host": "vllm.internalPort (vLLM listens on 127.0.0.1 only, behind the endpoint proxy)",
    "--gpu-memory-utilization": "vllm.gpuMemoryUtilization",
    "--max-model-len": "vllm.maxModelLen",
    "--served-model-name": "model.servedName",
    "--api-key": "the generated apiKey output (never put a key in extraArgs)",
    "--hf-token": "hfToken, a secret (never put a token in extraArgs)",
    "--distributed-executor-backend": "vllm.backend",
    "--trust-remote-code": "model.trustRemoteCode",
    // vLLM's multi-node launch without Ray: spark-vllm decides how the hosts find each other.
    "--nnodes": "hosts (spark-vllm's multi-node launch)",
    "--node-rank": "hosts (spark-vllm's multi-node launch)",
    "--master-addr": "hosts (spark-vllm's multi-node launch)",
    "--master-port": "hosts (spark-vllm's multi-node launch)",
    "--headless": "hosts (spark-vllm's multi-node launch)",
};

const SSL_REFUSAL = "the endpoint proxy speaks plain HTTP to vLLM on the head's loopback and terminates TLS itself; " +
    "set spark-vllm:endpoint.tls instead";

/** Options refused in extraArgs whatever their value. */
export const REFUSED_VLLM_FLAGS: Record<string, string> = {
    // FlexibleArgumentParser._pull_args_from_config (vllm/utils/argparse_utils.py) splices every key of the
    // YAML file into the arguments: a file on the host could set the port, the key or the parallelism.
    "--config": "vLLM reads options from that file, which can override every option spark-vllm sets; " +
        "list the options themselves in spark-vllm:vllm.extraArgs",
    // Issue 30: options that open a listener beside the endpoint proxy, or replace or weaken the checks of vLLM's
    // HTTP stack (FrontendArgs in vllm/entrypoints/openai/cli_args.py, EngineArgs.add_cli_args in
    // vllm/engine/arg_utils.py). docs/security.md#refused-extraargs lists each with its reason.
    "--root-path": "it mounts vLLM's routes under a prefix (FastAPI root_path), so the paths vLLM checks the key on " +
        "are no longer the paths the endpoint proxy forwards and guards",
    "--allowed-local-media-path": "it lets every API caller read files of the host's file system in that directory " +
        "through file:// media URLs (vLLM's help calls it a security risk); send media in the request instead",
    "--uds": "it moves vLLM's HTTP listener to a Unix socket of your choosing; where vLLM listens is spark-vllm's, " +
        "behind the endpoint proxy",
    "--grpc": "it serves gRPC instead of the HTTP API that the endpoint proxy forwards and guards",
    "--ssl-keyfile": SSL_REFUSAL,
    "--ssl-certfile": SSL_REFUSAL,
    "--ssl-ca-certs": SSL_REFUSAL,
    "--ssl-cert-reqs": SSL_REFUSAL,
    "--ssl-ciphers": SSL_REFUSAL,
    "--enable-ssl-refresh": SSL_REFUSAL,
    "--kv-transfer-config": "KV-transfer connectors (disaggregated prefill) open listeners of their own (kv_ip/kv_port, " +
        "vllm/config/kv_transfer.py) outside the endpoint proxy and can load any module (kv_connector_module_path); " +
        "spark-vllm does not deploy disaggregated serving",
    "--ec-transfer-config": "encoder-cache transfer connectors open listeners of their own outside the endpoint proxy " +
        "(vllm/config/ec_transfer.py); spark-vllm does not deploy disaggregated serving",
    "--data-parallel-multi-port-external-lb": "it starts one more API server per data-parallel rank, on ports the " +
        "endpoint proxy does not front",
    "--data-parallel-supervisor-port": "it opens the HTTP port of the multi-port data-parallel health supervisor, which " +
        "the endpoint proxy does not front",
    "--trust-request-chat-template": "it lets every API caller send a chat template that the server renders; vLLM " +
        "refuses request templates unless told to (FrontendArgs.trust_request_chat_template)",
    // Issue 41: one rule for every option that loads code.
    ...CODE_LOADING_VLLM_FLAGS,
};

/**
 * Other option strings vLLM has for a managed or refused option (the serve parsers' option strings of vLLM 0.20.1
 * and 0.32.0, vllm/engine/arg_utils.py EngineArgs.add_cli_args: `add_argument("--nnodes", "-n", …)`,
 * `("--node-rank", "-r")`, `("--data-parallel-multi-port-external-lb", "-dpm")`, and 0.32.0's
 * `("--gpu-memory-utilization", "--device-memory-utilization")`).
 */
export const VLLM_ALIASES: Record<string, string> = {
    "-n": "--nnodes",
    "-r": "--node-rank",
    "-dpm": "--data-parallel-multi-port-external-lb",
    "--device-memory-utilization": "--gpu-memory-utilization",
};

/** Options whose value decides whether they open a listener beside the proxy or weaken vLLM's HTTP limits. */
export const VALUE_CHECKED_VLLM_FLAGS = ["--kv-events-config", "--data-parallel-address", "-dpa",
    "--h11-max-incomplete-event-size", "--h11-max-header-count"] as const;

/**
 * vLLM's data-parallel options (EngineArgs.add_cli_args, vllm/engine/arg_utils.py, 0.10.1.1 to 0.32.0) but the
 * address: any of them without a loopback --data-parallel-address is refused (dataParallelProblems).
 */
export const DATA_PARALLEL_VLLM_FLAGS = ["--data-parallel-size", "-dp", "--data-parallel-rank", "-dpn",
    "--data-parallel-start-rank", "-dpr", "--data-parallel-size-local", "-dpl", "--data-parallel-rpc-port", "-dpp",
    "--data-parallel-backend", "-dpb", "--data-parallel-hybrid-lb", "-dph", "--data-parallel-external-lb", "-dpe",
    "--enable-elastic-ep"] as const;

/**
 * vLLM's h11 limits against header abuse (FrontendArgs.h11_max_incomplete_event_size / h11_max_header_count,
 * defaults H11_MAX_INCOMPLETE_EVENT_SIZE_DEFAULT and H11_MAX_HEADER_COUNT_DEFAULT in
 * vllm/entrypoints/serve/utils/constants.py, as cli_args.py documents them): lowering is fine, raising is refused.
 */
export const VLLM_H11_LIMITS: Record<string, number> = {
    "--h11-max-incomplete-event-size": 4194304,
    "--h11-max-header-count": 256,
};

/** KVEventsConfig.endpoint's default (vllm/config/kv_events.py): a ZMQ publisher on every interface. */
export const KV_EVENTS_DEFAULT_ENDPOINT = "tcp://*:5557";

/**
 * vLLM options whose name is the start of a managed or refused one (`--reasoning-parser`, StructuredOutputsConfig's
 * reasoning_parser, vllm/engine/arg_utils.py, and `--reasoning-parser-plugin`): argparse takes an exact name before any
 * abbreviation (argparse _parse_optional), so these are not abbreviations. Found in the option lists of vLLM 0.10.1.1,
 * 0.20.1 and 0.32.0.
 */
const VLLM_PREFIX_OPTIONS = ["--reasoning-parser"];

/**
 * The managed or refused option an extraArgs option would set in vLLM: itself, an alias (VLLM_ALIASES), its `--no-`
 * negation (BooleanOptionalAction), or an abbreviation: argparse takes any unambiguous prefix of a long option
 * (allow_abbrev, on by default and not turned off by vLLM's parsers, vllm/entrypoints/cli/main.py), and of `-tp` /
 * `-pp`; a two-character short option (`-n`, `-r`) also takes its value attached (`-r1`; argparse
 * _get_option_tuples).
 */
function governedOption(option: string): string | undefined {
    if (VLLM_PREFIX_OPTIONS.includes(option)) return undefined;
    const table = { ...MANAGED_VLLM_FLAGS, ...REFUSED_VLLM_FLAGS };
    const names = [...Object.keys(table), ...Object.keys(VLLM_ALIASES)];
    const canonical = (n: string) => VLLM_ALIASES[n] ?? n;
    for (const o of option.startsWith("--no-") ? [option, "--" + option.slice(5)] : [option]) {
        if (table[o] || VLLM_ALIASES[o]) return canonical(o);
        const long = o.startsWith("--");
        if (long ? o.length > 2 : o.length === 2) {
            const hit = names.find(n => n.startsWith("--") === long && n.startsWith(o));
            if (hit) return canonical(hit);
        }
        if (!long && names.includes(o.slice(0, 2))) return canonical(o.slice(0, 2));
    }
    return undefined;
}

/** A problem with one extraArgs entry that names a flag spark-vllm sets or refuses; undefined when it names none. */
export function extraArgProblem(arg: string): string | undefined {
    const option = vllmOptionOf(arg);
    if (option === undefined) return undefined;
    const governed = governedOption(option);
    if (governed === undefined) return undefined;
    const written = arg.split("=")[0];
    const name = written === governed ? governed : `${plain(written)} (vLLM reads it as ${governed})`;
    const refused = REFUSED_VLLM_FLAGS[governed];
    if (refused) return `${name} is refused: ${refused}`;
    const from = MANAGED_VLLM_FLAGS[governed];
    const key = /^[a-z]+\.[A-Za-z]+$/.test(from) ? `spark-vllm:${from}` : undefined;
    return `${name} is set by spark-vllm from ${from}; remove it from extraArgs${key ? ` and set ${key} instead` : ""}`;
}

/** The value-checked option an option names (exact, or an argparse abbreviation of a long one); undefined if none. */
function valueCheckedOption(option: string): string | undefined {
    if ((VALUE_CHECKED_VLLM_FLAGS as readonly string[]).includes(option)) return option;
    if (!option.startsWith("--") || option.length <= 2) return undefined;
    return VALUE_CHECKED_VLLM_FLAGS.find(n => n.startsWith("--") && n.startsWith(option));
}

/** Loopback: 127.0.0.0/8 in dotted decimal (no leading zeros), localhost, ::1. */
export function loopbackHost(host: string): boolean {
    const v4 = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
    if (v4) return v4.slice(1).every(p => Number(p) <= 255 && (p === "0" || !p.startsWith("0")));
    return host === "localhost" || host === "[::1]" || host === "::1";
}

// ---------------------------------------------------------------- KV-cache events

const KV_EVENTS_REFUSAL = "spark-vllm refuses KV events: the publisher (ZmqEventPublisher, vllm/distributed/kv_events.py) " +
    "sends the token ids of every prompt to whoever listens, and no endpoint keeps a local account out. It binds an " +
    "endpoint with * or :: (the default tcp://*:5557) on every interface, binds ipc:// (ipc://@name is an abstract " +
    "socket any local account can open) and inproc://, and connects to any other tcp:// endpoint, so on loopback a local " +
    "account that binds the port first receives every event; a replay_endpoint binds and replays the last buffer_steps " +
    "batches to anyone who asks. Nothing spark-vllm deploys reads them. Remove it, or set \"enable_kv_cache_events\": false";

/**
 * Why a resolved KV-events config starts a publisher, or undefined when it does not. vLLM 0.20 and later start one when
 * enable_kv_cache_events is true and publisher is not "null" (EventPublisherFactory.create, vllm/distributed/
 * kv_events.py; KVEventsConfig.__post_init__ makes the publisher "zmq" when events are on, vllm/config/kv_events.py);
 * vLLM 0.10.1.1 from `publisher` alone. So: events are off only when enable_kv_cache_events reads as false (or is
 * absent) and publisher is absent or "null".
 */
function kvEventsOn(config: Record<string, unknown>): string | undefined {
    const enable = config.enable_kv_cache_events;
    const on = enable === undefined ? false : pydanticBool(enable);
    if (on === undefined) return `enable_kv_cache_events ${showJson(enable, 40)} is not a bool vLLM reads (pydantic: true/false, 0/1, "0"/"1", "yes"/"no", "on"/"off", "t"/"f", "y"/"n", "true"/"false")`;
    if (on) return `enable_kv_cache_events ${showJson(enable, 40)} reads as true: vLLM validates it with pydantic, which takes 1, "1", "yes", "on", "t", "y" and "true" in any case`;
    const publisher = config.publisher;
    if (publisher !== undefined && publisher !== "null")
        return `publisher ${showJson(publisher, 40)}: vLLM 0.10 starts the publisher from it alone, whatever enable_kv_cache_events says`;
    return undefined;
}

function kvEventsProblems(args: readonly string[]): Array<[number, string]> {
    const resolved: ResolvedJsonOption | undefined = resolveJsonOption(args, o => namesOption(o, "--kv-events-config"));
    if (!resolved) return [];
    if (!isObject(resolved.value))
        return [[resolved.at, `--kv-events-config ${resolved.value === NOT_JSON ? "" : `${showJson(resolved.value, 40)} `}` +
            `is refused: the value must be a JSON object, so that spark-vllm can check it (KVEventsConfig, vllm/config/kv_events.py)`]];
    const why = kvEventsOn(resolved.value);
    if (!why) return [];
    const at = resolved.keyAt.enable_kv_cache_events ?? resolved.keyAt.publisher ?? resolved.at;
    const replaced = resolved.dotted && resolved.replaced.length
        ? ` (its dotted keys replace the whole --kv-events-config value at extraArgs[${resolved.replaced.join("], [")}], as vLLM's ` +
          `FlexibleArgumentParser does, vllm/utils/argparse_utils.py)` : "";
    return [[at, `--kv-events-config turns vLLM's KV-cache event publisher on${replaced} and is refused: ${why}. ${KV_EVENTS_REFUSAL}`]];
}

// ---------------------------------------------------------------- data parallelism

const isDataParallel = (option: string) => {
    const o = option.startsWith("--no-") ? "--" + option.slice(5) : option;
    // The address itself (-dpa, --data-parallel-a…) is checked on its own, in exposureProblems.
    return o !== "-dpa" && !o.startsWith("--data-parallel-a") && DATA_PARALLEL_VLLM_FLAGS.some(f => namesOption(o, f));
};

const DATA_PARALLEL_ADDRESS = "vLLM then picks the data-parallel address itself and listens there for its data-parallel " +
    "sockets and TCPStore, outside the endpoint proxy: this host's IP (get_ip(), the fabric address VLLM_HOST_IP) with " +
    "--data-parallel-backend ray, and with mp --master-addr (vLLM 0.20 and later; spark-vllm's mp backend sets it to the " +
    "head's fabric address) or 127.0.0.1 (EngineArgs.create_engine_config, vllm/engine/arg_utils.py). Add " +
    "\"--data-parallel-address\", \"127.0.0.1\", or remove it";

/** Each data-parallel option, refused when no loopback --data-parallel-address comes with it (issue 41, item 7). */
function dataParallelProblems(args: readonly string[], loopbackAddress: boolean): Array<[number, string]> {
    if (loopbackAddress) return [];
    const problems: Array<[number, string]> = [];
    const taken = dottedValueIndexes(args);
    args.forEach((arg, i) => {
        const option = vllmOptionOf(arg);
        if (option && isDataParallel(option) && !taken.has(i))
            problems.push([i, `${plain(arg.split("=")[0])} is refused without a loopback --data-parallel-address: ${DATA_PARALLEL_ADDRESS}`]);
    });
    return problems;
}

// ---------------------------------------------------------------- all of it

/**
 * Problems with extraArgs whose value opens a listener on other than loopback, raises a limit of vLLM's HTTP stack or
 * names code, as [index, message]: reads `--flag value`, `--flag=value`, JSON values and vLLM's dotted JSON keys as
 * vLLM resolves them (vllmArgv.ts), in any spelling vllmOptionOf accepts.
 */
export function exposureProblems(args: readonly string[]): Array<[number, string]> {
    const problems: Array<[number, string]> = [...kvEventsProblems(args)];
    let loopbackAddress = false;
    const taken = dottedValueIndexes(args);
    for (let i = 0; i < args.length; i++) {
        if (taken.has(i)) continue;
        const option = vllmOptionOf(args[i]);
        const name = option && valueCheckedOption(option);
        if (!name || name === "--kv-events-config") continue;
        const written = args[i].split("=")[0];
        if (dottedArg(args, i)) {
            problems.push([i, `${plain(written)} is refused: vLLM folds a dotted key into a JSON text that becomes the option's ` +
                `value (vllm/utils/argparse_utils.py); write the option and its value`]);
            continue;
        }
        const value = optionValue(args, i);
        const shown = `${plain(written)}${value === undefined ? "" : ` ${show(value, 60)}`}`;
        if (name === "--data-parallel-address" || name === "-dpa") {
            if (value !== undefined && loopbackHost(value)) loopbackAddress = true;
            else if (value !== undefined)
                problems.push([i, `${shown} is refused: vLLM's data-parallel coordination listens on that address, which is ` +
                    `not loopback, outside the endpoint proxy; leave it out, or use 127.0.0.1 for data parallelism on one host`]);
            continue;
        }
        const limit = VLLM_H11_LIMITS[name];
        const n = value === undefined ? undefined : pythonInt(value);
        if (value !== undefined && n === undefined)
            problems.push([i, `${shown} is refused: vLLM reads it with Python's int(), which takes only decimal digits (no 0x, ` +
                `exponent or fraction), and would not start; write a whole number from 1 to ${limit}`]);
        else if (n !== undefined && !(n > 0 && n <= limit))
            problems.push([i, `${shown} is refused: it may only lower vLLM's limit against header abuse (default and ` +
                `most ${limit}), not raise or remove it`]);
    }
    return [...problems, ...dataParallelProblems(args, loopbackAddress), ...codeLoadingProblems(args)];
}

/** The refusal of an argument that names a refused option (not one spark-vllm sets itself); undefined otherwise. */
export function refusedArgProblem(arg: string): string | undefined {
    const option = vllmOptionOf(arg);
    const governed = option === undefined ? undefined : governedOption(option);
    return governed !== undefined && REFUSED_VLLM_FLAGS[governed] ? extraArgProblem(arg) : undefined;
}
