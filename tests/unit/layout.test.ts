// The layout's rules, read from the imports themselves (docs/architecture.md#layout): no import circle among
// components/ and bin/; the pure core (components/spec, plan, knowledge, init) reaches no @pulumi package, directly or
// through anything it imports; and each folder imports only the folders below it (components → plan → spec →
// knowledge), so data flows one way.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "fs";
import * as path from "path";
import * as ts from "typescript";

const ROOT = path.join(__dirname, "..", "..");

/** Every TypeScript file under dir (repo-relative, `/`-separated), the host program's Python folder left out. */
function sources(dir: string): string[] {
    return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap(e => {
        const rel = `${dir}/${e.name}`;
        if (e.isDirectory()) return e.name === "hostProgram" || e.name === "node_modules" ? [] : sources(rel);
        return e.name.endsWith(".ts") && !e.name.endsWith(".d.ts") ? [rel] : [];
    });
}

/** What a file imports: its local files (repo-relative) and its packages, from every import, export … from, require and import(). */
function importsOf(file: string): { local: string[]; packages: string[] } {
    const info = ts.preProcessFile(fs.readFileSync(path.join(ROOT, file), "utf8"), true, true);
    const local: string[] = [];
    const packages: string[] = [];
    for (const { fileName } of info.importedFiles) {
        if (!fileName.startsWith(".")) {
            packages.push(fileName);
            continue;
        }
        const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), fileName));
        const found = [`${target}.ts`, `${target}/index.ts`, target].find(f => fs.existsSync(path.join(ROOT, f)) && fs.statSync(path.join(ROOT, f)).isFile());
        assert.ok(found, `${file} imports ${fileName}, which is no file here`);
        local.push(found);
    }
    return { local, packages };
}

type Graph = Map<string, { local: string[]; packages: string[] }>;

/** The import graph from the given roots, following local imports wherever they lead (policies/ included). */
function graphFrom(roots: string[]): Graph {
    const graph: Graph = new Map();
    const todo = [...roots];
    while (todo.length) {
        const f = todo.pop()!;
        if (graph.has(f)) continue;
        const imports = importsOf(f);
        graph.set(f, imports);
        todo.push(...imports.local.filter(l => !graph.has(l)));
    }
    return graph;
}

/** The import circles: every strongly connected component of two or more files, or a file that imports itself (Tarjan). */
function circles(graph: Graph): string[][] {
    let next = 0;
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const onStack = new Set<string>();
    const found: string[][] = [];
    const visit = (v: string): void => {
        index.set(v, next);
        low.set(v, next++);
        stack.push(v);
        onStack.add(v);
        for (const w of graph.get(v)?.local ?? []) {
            if (!index.has(w)) {
                visit(w);
                low.set(v, Math.min(low.get(v)!, low.get(w)!));
            } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
        }
        if (low.get(v) === index.get(v)) {
            const scc: string[] = [];
            let w: string;
            do {
                w = stack.pop()!;
                onStack.delete(w);
                scc.push(w);
            } while (w !== v);
            if (scc.length > 1 || graph.get(v)!.local.includes(v)) found.push(scc.sort());
        }
    };
    for (const v of graph.keys()) if (!index.has(v)) visit(v);
    return found;
}

/** The chain of imports from `from` to a file importing a package that `bad` matches, or undefined. */
function pathToPackage(graph: Graph, from: string, bad: (pkg: string) => boolean): string[] | undefined {
    const seen = new Set<string>([from]);
    const queue: string[][] = [[from]];
    while (queue.length) {
        const chain = queue.shift()!;
        const file = chain[chain.length - 1];
        const pkg = graph.get(file)!.packages.find(bad);
        if (pkg) return [...chain, pkg];
        for (const l of graph.get(file)!.local) if (!seen.has(l)) {
            seen.add(l);
            queue.push([...chain, l]);
        }
    }
    return undefined;
}

const CODE = [...sources("components"), ...sources("bin")];
const GRAPH = graphFrom(CODE);
const PURE = ["components/spec/", "components/plan/", "components/knowledge/", "components/init/"];

test("the layout's files are all found: components/ and bin/ hold code, and each pure folder has files", () => {
    assert.ok(CODE.includes("components/index.ts") && CODE.includes("bin/cli.ts"), CODE.join(" "));
    for (const folder of PURE) assert.ok(CODE.some(f => f.startsWith(folder)), `no file under ${folder}`);
});

test("no import circle among components/ and bin/ (nor through what they import)", () => {
    assert.deepEqual(circles(GRAPH), []);
});

test("the pure core imports no @pulumi package, directly or through anything it imports", () => {
    const reached = CODE.filter(f => PURE.some(p => f.startsWith(p)))
        .map(f => pathToPackage(GRAPH, f, pkg => pkg === "@pulumi" || pkg.startsWith("@pulumi/")))
        .filter((chain): chain is string[] => chain !== undefined)
        .map(chain => chain.join(" → "));
    assert.deepEqual(reached, []);
});

test("each folder imports only itself and the folders below it: components → plan → spec → knowledge; init → plan", () => {
    // What each folder may import, besides itself; the component classes (components/*.ts) may import any of these.
    const below: Record<string, string[]> = {
        "components/knowledge/": [],
        "components/spec/": ["components/knowledge/"],
        "components/plan/": ["components/spec/", "components/knowledge/"],
        "components/init/": ["components/plan/", "components/spec/", "components/knowledge/"],
    };
    const folderOf = (f: string) => Object.keys(below).find(p => f.startsWith(p)) ?? (f.startsWith("components/") ? "components/" : path.posix.dirname(f) + "/");
    const wrong: string[] = [];
    for (const f of CODE) {
        const from = folderOf(f);
        for (const l of GRAPH.get(f)!.local) {
            const to = folderOf(l);
            if (to === from) continue;
            const allowed = from === "components/" ? ["components/plan/", "components/spec/", "components/knowledge/"]
                : from === "bin/" ? [...Object.keys(below), "components/", "policies/"]
                : below[from] ?? [];
            if (!allowed.includes(to)) wrong.push(`${f} imports ${l}`);
        }
    }
    assert.deepEqual(wrong, []);
});
