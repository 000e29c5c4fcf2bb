// A throw-away Pulumi project (Pulumi.yaml + index.ts) in a temp dir, resolving @pulumi/pulumi from the
// repository's node_modules: for programs that must not live in the repo (one with a type error would
// break `tsc -p .`).
import * as fs from "fs";
import * as path from "path";
import { REPO } from "./deploy";
import { testTempDir } from "../tempDir";

export function tempProject(name: string, program: string): string {
    const dir = testTempDir(`grpc-${name}`);
    fs.writeFileSync(path.join(dir, "Pulumi.yaml"), `name: ${name}\nruntime:\n  name: nodejs\n  options:\n    typescript: true\nmain: index.ts\n`);
    fs.writeFileSync(path.join(dir, "index.ts"), program);
    fs.symlinkSync(path.join(REPO, "node_modules"), path.join(dir, "node_modules"));
    return dir;
}
