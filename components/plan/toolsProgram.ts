// The helper program every host receives: the modules of components/hostProgram/spark_vllm/ joined into
// one stdlib-only Python 3 file, after one generated line of JSON data from the TypeScript catalogs.
// Pure and deterministic: the same sources give the same bytes.
//
// Joined file layout:
//   main.py's leading comment (what the program does, every subcommand), then a "generated" notice;
//   every module's top-level stdlib imports, hoisted, deduplicated and sorted;
//   SPARK_VLLM_DATA = json.loads("<toolsData() as JSON>")   (one line; read through spark_vllm/data.py)
//   each module in TOOLS_MODULES order, then any module not listed, then main.py, each under a
//   `# ---- spark_vllm/<name>.py` line, without its sibling imports (`from spark_vllm.<mod> import a, b`
//   or `from .<mod> import a, b`), since all modules share the one file's namespace, and without
//   its own `if __name__ == "__main__":` block (only main.py's runs).
// The joiner refuses what cannot work joined: another form of sibling import, or a name imported from
// a module that does not define it or comes later. What still runs but is wrong (a module missing from
// TOOLS_MODULES, a top-level name bound by two modules, where the later one wins) it reports in
// joinTools().problems, which tests/unit/plan/tools.test.ts requires to be empty.
import * as fs from "fs";
import * as path from "path";
import { ClusterSpec } from "../spec/spec";
import { ARCHITECTURES } from "../knowledge/catalog";
import { diagnosisData } from "../knowledge/diagnosis";
import { imagesCarrying } from "../knowledge/imageKernels";
import { KNOWN_IMAGES, UMA_CAPABILITIES_BEFORE_INTEGRATED_QUERY, firstRayWithAgentTokenAuth, firstRayWithTokenAuth, firstVllmWithIntegratedGpuQuery,
    firstVllmWithMultiNodeMp, firstVllmWithUnifiedMemoryAvailable } from "../knowledge/images";

export const TOOLS_FILE = "spark_vllm_tools.py";
/** Where every host keeps the helper program: in logDir. */
export const toolsPath = (spec: ClusterSpec) => `${spec.logDir}/${TOOLS_FILE}`;
export const TOOLS_PACKAGE = path.join(__dirname, "..", "hostProgram", "spark_vllm");

/** Modules in dependency order (each imports only from modules before it); `main`, the dispatcher, comes last. */
export const TOOLS_MODULES: readonly string[] = ["common", "data", "diagnosis", "ownership", "preflight", "weights_size", "weights", "weights_source", "cuda", "kernels", "compat", "memory", "images", "probes", "supervise", "status", "serving", "gid", "fabric", "rayenv", "keyguard"];
const ENTRY = "main";

/** The data the Python side reads (`data()` in spark_vllm/data.py). */
export function toolsData() {
    const firstVllm = Object.fromEntries(Object.entries(ARCHITECTURES).map(([arch, s]) => [arch, s.firstVllm]));
    const images = {
        firstVllmWithMultiNodeMp,
        firstRayWithTokenAuth,
        firstRayWithAgentTokenAuth,
        // The memory gate's rule for vLLM's free figure (spark_vllm/memory.py startup_free_source).
        firstVllmWithUnifiedMemoryAvailable,
        firstVllmWithIntegratedGpuQuery,
        umaCapabilities: UMA_CAPABILITIES_BEFORE_INTEGRATED_QUERY,
        // What the compat check suggests instead of an image that cannot run here.
        gb10: KNOWN_IMAGES.filter(i => i.runsOnGb10).map(i => i.reference),
        // What the compat check suggests when the image's vLLM lacks its kernel for the checkpoint's quantization (spark_vllm/kernels.py).
        kernelsForGb10: { fp8: imagesCarrying("fp8"), nvfp4: imagesCarrying("nvfp4") },
    };
    return { diagnosis: diagnosisData(), firstVllm, images };
}

/** Module names found in the package directory (`__init__.py` aside), sorted. */
export function toolsModuleFiles(dir = TOOLS_PACKAGE): string[] {
    return fs.readdirSync(dir).filter(f => f.endsWith(".py") && f !== "__init__.py").map(f => f.slice(0, -3)).sort();
}

/** The join order: the listed modules, then unlisted ones (sorted), then main. */
export function toolsModuleOrder(dir = TOOLS_PACKAGE): string[] {
    const present = toolsModuleFiles(dir);
    for (const m of [...TOOLS_MODULES, ENTRY]) {
        if (!present.includes(m)) throw new Error(`components/plan/toolsProgram.ts lists spark_vllm/${m}.py, which does not exist`);
    }
    const unlisted = present.filter(m => m !== ENTRY && !TOOLS_MODULES.includes(m));
    return [...TOOLS_MODULES, ...unlisted, ENTRY];
}

const SIBLING = /^from (?:spark_vllm)?\.([A-Za-z_][A-Za-z0-9_]*) import (.+)$/;
const SIBLING_OTHER = /^(?:import spark_vllm\b|from spark_vllm import |from \.+ import )/;
const STDLIB = /^(?:import [A-Za-z_]|from [A-Za-z_][A-Za-z0-9_.]* import )/;
const DEFINES = /^(?:(?:async +)?def +([A-Za-z_][A-Za-z0-9_]*)|class +([A-Za-z_][A-Za-z0-9_]*)|([A-Za-z_][A-Za-z0-9_]*) *(?::[^=]*)?=(?!=))/;

/** Names bound by an import statement (one logical line). */
function importBindings(line: string): string[] {
    const from = /^from \S+ import (.+)$/.exec(line);
    const parts = from ? from[1].replace(/[()]/g, "").split(",") : line.slice("import ".length).split(",");
    return parts.map(p => p.trim()).filter(Boolean).map(p => {
        const as = / as +([A-Za-z0-9_]+)$/.exec(p);
        return as ? as[1] : from ? p : p.split(".")[0];
    });
}

/** Joins a statement that continues in parentheses onto one line; returns it and the index of its last line. */
function logicalLine(lines: string[], i: number): [string, number] {
    let text = lines[i];
    while (text.includes("(") && !text.includes(")") && i + 1 < lines.length) text += " " + lines[++i].trim();
    return [text.replace(/\( */, "(").replace(/,? *\)/, ")"), i];
}

interface Parsed { header: string[]; body: string[]; imports: string[]; defines: string[] }

const MAIN_GUARD = /^if +__name__ *== *["']__main__["'] *:/;

function parseModule(name: string, source: string, defined: Map<string, Set<string>>): Parsed {
    const lines = source.replace(/\r\n/g, "\n").split("\n");
    const header: string[] = [];
    let i = 0;
    while (i < lines.length && lines[i].startsWith("#")) header.push(lines[i++]);
    const body: string[] = [];
    const imports: string[] = [];
    const defines: string[] = [];
    const where = `components/hostProgram/spark_vllm/${name}.py`;
    for (; i < lines.length; i++) {
        const line = lines[i];
        if (name !== ENTRY && MAIN_GUARD.test(line)) {
            while (i + 1 < lines.length && /^(?:[ \t]|$)/.test(lines[i + 1])) i++;
            continue;
        }
        if (SIBLING_OTHER.test(line)) {
            throw new Error(`${where}: "${line}": import siblings as \`from spark_vllm.<module> import name, ...\`, so the joined file can drop the import`);
        }
        if (SIBLING.test(line) || STDLIB.test(line)) {
            const [text, last] = logicalLine(lines, i);
            i = last;
            const sibling = SIBLING.exec(text);
            if (!sibling) { imports.push(text); continue; }
            const [, from] = sibling;
            for (const n of importBindings(text)) {
                if (!defined.get(from)?.has(n)) {
                    throw new Error(`${where} imports ${n} from spark_vllm.${from}, which ${defined.has(from) ? "does not define it" : "is not joined before it: fix the order in TOOLS_MODULES (components/plan/toolsProgram.ts)"}`);
                }
            }
            continue;
        }
        const def = DEFINES.exec(line);
        if (def) defines.push(def[1] ?? def[2] ?? def[3]);
        body.push(line);
    }
    while (body.length && body[0] === "") body.shift();
    while (body.length && body[body.length - 1] === "") body.pop();
    return { header, body, imports, defines };
}

/** The joined program and what is wrong with it though it runs (empty when all is well). */
export function joinTools(dir = TOOLS_PACKAGE): { program: string; problems: string[] } {
    const order = toolsModuleOrder(dir);
    const problems = order.filter(m => m !== ENTRY && !TOOLS_MODULES.includes(m))
        .map(m => `spark_vllm/${m}.py is not in TOOLS_MODULES (components/plan/toolsProgram.ts): add it where its imports allow`);
    const defined = new Map<string, Set<string>>();
    const owner = new Map<string, string>();
    const imports = new Set<string>(["import json"]);
    const sections: string[] = [];
    let header: string[] = [];
    for (const name of order) {
        const m = parseModule(name, fs.readFileSync(path.join(dir, `${name}.py`), "utf8"), defined);
        for (const n of new Set(m.defines)) {
            if (owner.has(n)) problems.push(`${n} is bound at top level by both spark_vllm/${owner.get(n)}.py and spark_vllm/${name}.py, and the joined file has one namespace: import it from one, or rename one`);
            else owner.set(n, name);
        }
        defined.set(name, new Set(m.defines));
        m.imports.forEach(i => imports.add(i));
        if (name === ENTRY) header = m.header;
        sections.push([`# ---- spark_vllm/${name}.py`, ...(name === ENTRY ? [] : m.header), "", ...m.body].join("\n"));
    }
    const bound = new Map([...imports].flatMap(i => importBindings(i).map(n => [n, i] as const)));
    for (const [n, mod] of owner) {
        if (bound.has(n)) problems.push(`spark_vllm/${mod}.py defines ${n}, which \`${bound.get(n)}\` also binds in the joined file`);
    }
    const sorted = [...imports].sort((a, b) => Number(a.startsWith("from ")) - Number(b.startsWith("from ")) || (a < b ? -1 : a > b ? 1 : 0));
    const program = [
        ...header,
        "#",
        "# Generated by components/plan/toolsProgram.ts from components/hostProgram/spark_vllm/*.py and the",
        "# TypeScript catalogs (the SPARK_VLLM_DATA line); edit those, not this file.",
        ...sorted,
        "",
        `SPARK_VLLM_DATA = json.loads(${JSON.stringify(JSON.stringify(toolsData()))})`,
        "",
        "",
        sections.join("\n\n\n"),
        "",
    ].join("\n");
    return { program, problems };
}

/** The helper program shipped to every host, byte for byte the same for the same sources and data. */
export function toolsProgram(dir = TOOLS_PACKAGE): string {
    return joinTools(dir).program;
}
