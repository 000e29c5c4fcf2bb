// Issue 41, one rule for code: vllm.extraArgs may not make vLLM import or run code that the stack names (a module, a
// class or function by qualified name, a .py file, a logging factory). What runs in the containers is the image's code,
// and the model repository's own only with spark-vllm:model.trustRemoteCode. Each option and JSON field below is cited
// where vLLM imports it (vLLM 0.32.0 paths unless another version is named); the list is what vLLM 0.10.1.1, 0.20.1
// and 0.32.0 offer, found by their imports (resolve_obj_by_qualname, importlib.import_module, __import__,
// import_from_path, logging.config.dictConfig). A later vLLM may add more.
import { showJson } from "./showValue";
import { NOT_JSON, isObject, namesOption, optionValue, resolveJsonOption, vllmOptionOf } from "./vllmArgv";

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

const show = (v: unknown) => showJson(v, 80);
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
                add(resolved.keyAt[field.field] ?? resolved.at, `${name} ${field.field} ${show(value)} is refused: ${field.why}; ` +
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
            `the speculative-decoding proposer (method ${show(m)}, model ${show(d)}) is refused: vLLM imports a "custom_class" ` +
            `proposer by its qualified name (vllm/config/speculative.py, vllm/v1/spec_decode/custom_class_proposer.py); ` +
            `spark-vllm runs only the image's code; use a draft model from the Hugging Face Hub or a built-in method`);
    return problems;
}
