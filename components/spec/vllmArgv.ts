// How vLLM reads the arguments of `vllm serve`, so that spark-vllm:vllm.extraArgs are judged by what vLLM resolves, not
// by their text (issue 41). Pure. Each rule follows vLLM's own code, cited beside it, for the versions spark-vllm tests
// against (0.10.1.1 and 0.20.1, scripts/vllm-parsers.sh; 0.32.0, scripts/vllm-cpu.sh); where they differ, the reading
// that makes spark-vllm refuse more is the one used.

/**
 * The option an argument names, as vLLM's parser reads it; undefined for a value. vLLM's FlexibleArgumentParser
 * (vllm/utils/argparse_utils.py parse_args; vllm/utils/__init__.py in 0.10) turns `_` into `-` in the name of every
 * `--` argument (the part before `=` and before the first `.`) and takes `--name=value`; every argument that starts
 * with `-` and has a `.` before any `=` (`--json-arg.key`, and single-dash ones: `-tp.x=4`) is folded into its option
 * named by the part before the first `.` (see resolveJsonOption); argparse takes `-tp=2` for short options. Names
 * compare in lower case (vLLM refuses other cases anyway).
 */
export function vllmOptionOf(arg: string): string | undefined {
    if (!arg.startsWith("-") || arg === "-" || arg === "--" || /^-[0-9.]/.test(arg)) return undefined;
    const name = arg.split("=")[0].split(".")[0];
    if (name.startsWith("--")) return "--" + name.slice(2).replace(/_/g, "-").toLowerCase();
    return name.toLowerCase();
}

/**
 * Whether `option` (as vllmOptionOf gives it) names `full`: itself, or an abbreviation of a long option (argparse's
 * allow_abbrev, on in vLLM's parsers; an ambiguous one vLLM refuses, so counting it is safe) or of a short one.
 */
export function namesOption(option: string, full: string): boolean {
    if (option === full) return true;
    const long = full.startsWith("--");
    return long ? option.startsWith("--") && option.length > 2 && full.startsWith(option)
        : !option.startsWith("--") && option.length >= 2 && full.startsWith(option);
}

/** The value an option argument carries: after `=`, else the next argument when that is not an option. */
export function optionValue(args: readonly string[], i: number): string | undefined {
    const eq = args[i].indexOf("=");
    if (eq >= 0) return args[i].slice(eq + 1);
    const next = args[i + 1];
    return next !== undefined && vllmOptionOf(next) === undefined ? next : undefined;
}

/** A dotted argument (`--kv-events-config.endpoint=…`) as vLLM folds it: its option, the keys and the value's text. */
export interface DottedArg {
    option: string;
    /** The option as vLLM groups dotted keys: `_` → `-` after `--`, case kept (vllm/utils/argparse_utils.py `pattern`). */
    group: string;
    keys: string[];
    text: string | undefined;
    /** The value is the next argument, which vLLM takes whatever it is (`delete.add(i + 1)`). */
    takesNext: boolean;
}

/**
 * vLLM's reading of one argument as a dotted JSON key (FlexibleArgumentParser.parse_args: `if processed_arg
 * .startswith("-") and "." in processed_arg`; with `=` only when the `.` is before it; a trailing `+` appends list
 * items). `-O…` arguments are vLLM 0.10's compilation-config shorthand, handled by compilationShorthand.
 */
export function dottedArg(args: readonly string[], i: number): DottedArg | undefined {
    const arg = args[i];
    if (!arg.startsWith("-") || /^-O/.test(arg)) return undefined;
    const eq = arg.indexOf("=");
    let key = eq >= 0 ? arg.slice(0, eq) : arg;
    if (!key.includes(".")) return undefined;
    if (key.startsWith("--")) key = "--" + key.slice(2).replace(/^[^.]*/, s => s.replace(/_/g, "-"));
    if (key.endsWith("+")) key = key.slice(0, -1);
    const [group, ...keys] = key.split(".");
    const option = vllmOptionOf(group);
    if (option === undefined) return undefined;
    return { option, group, keys, text: eq >= 0 ? arg.slice(eq + 1) : args[i + 1], takesNext: eq < 0 };
}

/**
 * vLLM 0.10.1.1's `-O` shorthand for `--compilation-config` (its vllm/utils/__init__.py parse_args: `-O3` and `-O=3`
 * become `-O.level=3`, `-O.<key>` is a dotted key, `-O <0-3>` is `-O.level <n>`; engine/arg_utils.py
 * `add_argument("--compilation-config", "-O", …)`). Later vLLM reads every `-O…` as `--optimization-level` (a level,
 * no JSON); spark-vllm reads them as 0.10 does, which only ever refuses more. Undefined for other arguments.
 */
export function compilationShorthand(args: readonly string[], i: number): DottedArg | "plain" | undefined {
    const arg = args[i];
    if (arg === "-O") {
        const next = args[i + 1];
        return next !== undefined && ["0", "1", "2", "3"].includes(next)
            ? { option: "-O", group: "-O", keys: ["level"], text: next, takesNext: true } : "plain";
    }
    if (!arg.startsWith("-O")) return undefined;
    if (arg[2] !== ".") return { option: "-O", group: "-O", keys: ["level"], text: arg[2] === "=" ? arg.slice(3) : arg.slice(2), takesNext: false };
    const eq = arg.indexOf("=");
    const key = (eq >= 0 ? arg.slice(0, eq) : arg).replace(/\+$/, "");
    return { option: "-O", group: "-O", keys: key.split(".").slice(1), text: eq >= 0 ? arg.slice(eq + 1) : args[i + 1], takesNext: eq < 0 };
}

/**
 * The arguments vLLM takes as the values of dotted keys (a dotted argument without `=` takes the next one, whatever it
 * is, and that one is not read again: `if i in delete: continue`, vllm/utils/argparse_utils.py parse_args), so they
 * are not options. `-O…` arguments take nothing here: vLLM 0.20 and later read them as --optimization-level, leaving
 * the next argument to stand on its own, which is the reading that hides nothing.
 */
export function dottedValueIndexes(args: readonly string[]): Set<number> {
    const taken = new Set<number>();
    for (let i = 0; i < args.length; i++) {
        if (taken.has(i)) continue;
        if (dottedArg(args, i)?.takesNext) taken.add(i + 1);
    }
    return taken;
}

// ---------------------------------------------------------------- values as Python and pydantic read them

/**
 * Python's `int(text)` for a str (base 10; the `int` argparse type of vLLM's integer options): surrounding
 * whitespace, one sign, ASCII digits with single `_` between them (Python docs, "int(x, base=10)" and "Integer
 * literals"); no `0x`, no exponent, no fraction. Python also takes non-ASCII decimal digits, which spark-vllm refuses
 * (undefined here): write ASCII digits. Undefined for anything int() refuses.
 */
export function pythonInt(text: string): number | undefined {
    const t = text.replace(/^[\s\u001c-\u001f\u0085]+|[\s\u001c-\u001f\u0085]+$/g, "");
    const m = /^([+-]?)(\d+(?:_\d+)*)$/.exec(t);
    if (!m) return undefined;
    const n = Number(m[2].replace(/_/g, ""));
    return m[1] === "-" ? -n : n;
}

/**
 * vLLM's `human_readable_int` (vllm/utils/argparse_utils.py, 0.20 and later), which dotted values that are not JSON
 * go through: `25.6k` → 25600, `1K` → 1024, else Python's int(); undefined where it raises.
 */
function humanReadableInt(text: string): number | undefined {
    const m = /^(\d+(?:\.\d+)?)([kKmMgGtT])$/.exec(text.trim());
    if (!m) return pythonInt(text);
    const decimal: Record<string, number> = { k: 1e3, m: 1e6, g: 1e9, t: 1e12 };
    if (decimal[m[2]]) return Math.trunc(Number(m[1]) * decimal[m[2]]);
    return /^\d+$/.test(m[1]) ? Number(m[1]) * 2 ** (10 * "KMGT".indexOf(m[2]) + 10) : undefined;
}

/**
 * A dotted key's value as vLLM builds it: `json.loads`, else (0.20 and later) human_readable_int, else the text
 * (vllm/utils/argparse_utils.py parse_args). Python's json also reads NaN and Infinity, which JSON.parse does not: they
 * stay text here, which no check below reads as off or harmless.
 */
export function dottedValue(text: string): unknown {
    try {
        return JSON.parse(text);
    } catch {
        return humanReadableInt(text) ?? text;
    }
}

/**
 * A bool field as pydantic v2 validates it in lax mode from JSON, as vLLM parses every config option
 * (`TypeAdapter(cls).validate_json(val)`, vllm/engine/arg_utils.py parse_dataclass, in 0.10.1.1, 0.20.1 and 0.32.0):
 * true/false; the numbers 0 and 1 (also 0.0 and 1.0); the strings "0", "off", "f", "false", "n", "no" and "1", "on",
 * "t", "true", "y", "yes", any case, nothing stripped (pydantic-core src/input/shared.rs str_as_bool and int_as_bool;
 * pydantic docs, concepts/conversion_table.md). Undefined where pydantic refuses the value.
 */
export function pydanticBool(value: unknown): boolean | undefined {
    if (typeof value === "boolean") return value;
    if (value === 0 || value === 1) return value === 1;
    if (typeof value !== "string") return undefined;
    const s = value.toLowerCase();
    if (value === "0" || ["f", "n", "no", "off", "false"].includes(s)) return false;
    if (value === "1" || ["t", "y", "on", "yes", "true"].includes(s)) return true;
    return undefined;
}

// ---------------------------------------------------------------- JSON options as vLLM resolves them

/** A JSON-valued option as vLLM resolves it from all of extraArgs. */
export interface ResolvedJsonOption {
    /** The value vLLM parses; NOT_JSON when the text is not JSON that spark-vllm can read. */
    value: unknown;
    /** The extraArgs index that decides it: the last plain entry, or the first entry of the dotted group that wins. */
    at: number;
    /** Where each top-level key was last set (a dotted group's keys; every key of a plain JSON value at its entry). */
    keyAt: Record<string, number>;
    /** Entries of the option whose value vLLM throws away (plain ones a dotted group replaces, earlier plain ones). */
    replaced: number[];
    dotted: boolean;
}

/** A plain value spark-vllm could not read as JSON. */
export const NOT_JSON: unique symbol = Symbol("not JSON");

/** vLLM's recursive_dict_update (vllm/utils/argparse_utils.py): dicts merge, lists concatenate, the rest is replaced. */
function mergeInto(into: Record<string, unknown>, update: Record<string, unknown>): void {
    for (const [k, v] of Object.entries(update)) {
        const old = into[k];
        if (isObject(v) && isObject(old)) mergeInto(old, v);
        else if (Array.isArray(v) && Array.isArray(old)) into[k] = [...old, ...v];
        else into[k] = v;
    }
}

export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The value vLLM gives a JSON option (one dest, every spelling `isOption` accepts), following FlexibleArgumentParser
 * (vllm/utils/argparse_utils.py parse_args): every dotted key of one spelling is merged into one dict, and all those
 * dicts are appended after every other argument, in the order each spelling first appears, as `--option '<json>'`;
 * argparse keeps the last value. So any dotted key replaces a plain `--option '{…}'` whole, wherever either stands.
 * Undefined when extraArgs do not set the option.
 */
export function resolveJsonOption(args: readonly string[], isOption: (option: string) => boolean): ResolvedJsonOption | undefined {
    const entries: number[] = [];
    let plain: { at: number; value: unknown } | undefined;
    const groups = new Map<string, { at: number; dict: Record<string, unknown>; keyAt: Record<string, number>; entries: number[] }>();
    const taken = dottedValueIndexes(args);
    for (let i = 0; i < args.length; i++) {
        if (taken.has(i)) continue;
        const shorthand = compilationShorthand(args, i);
        const dotted = shorthand === "plain" ? undefined : shorthand ?? dottedArg(args, i);
        if (dotted) {
            if (isOption(dotted.option)) {
                entries.push(i);
                const group = groups.get(dotted.group) ?? { at: i, dict: {}, keyAt: {}, entries: [] };
                groups.set(dotted.group, group);
                group.entries.push(i);
                const value = dotted.text === undefined ? NOT_JSON : dottedValue(dotted.text);
                mergeInto(group.dict, dotted.keys.reduceRight<Record<string, unknown>>((v, k) => ({ [k]: v }), value as any));
                group.keyAt[dotted.keys[0]] = i;
            }
            continue;
        }
        const option = shorthand === "plain" ? "-O" : vllmOptionOf(args[i]);
        if (option === undefined || !isOption(option)) continue;
        entries.push(i);
        const text = optionValue(args, i);
        let value: unknown = NOT_JSON;
        try {
            if (text !== undefined) value = JSON.parse(text);
        } catch {
            value = NOT_JSON;
        }
        plain = { at: i, value };
    }
    if (entries.length === 0) return undefined;
    const last = [...groups.values()].pop();
    if (last) {
        return { value: last.dict, at: last.at, keyAt: last.keyAt, dotted: true, replaced: entries.filter(i => !last.entries.includes(i)) };
    }
    const keyAt = isObject(plain!.value) ? Object.fromEntries(Object.keys(plain!.value).map(k => [k, plain!.at])) : {};
    return { value: plain!.value, at: plain!.at, keyAt, dotted: false, replaced: entries.filter(i => i !== plain!.at) };
}
