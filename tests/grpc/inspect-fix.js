// Preloaded (`node --require`) into the program's process by the runner (runner.ts), and only there.
// Why: @pulumi/pulumi's cmd/run prints a program's uncaught error with util.inspect(err, { colors: true })
// (cmd/run/error.js defaultErrorMessage), and its source maps name SDK frames `node_modules/@pulumi/output.ts`
// (output.js.map: "sources": ["../output.ts"], installed by cmd/run/index.js require("source-map-support/register")).
// On Node 20.20.2 and 22.23.3 util.inspect with colors never returns for a stack frame whose node_modules
// segment has no path separator after it (nodejs/node#64011, fixed by nodejs/node#64022): markNodeModules
// restarts its search at -1 and grows its string until the heap runs out. So every error a program throws
// inside an apply (only update runs applies on known values) hangs `pulumi up` on these Node versions.
// This backports the fix's effect: such a stack is inspected without colors (same text, no ANSI codes).
"use strict";
const util = require("util");
const inspect = util.inspect;
// A node_modules segment with no separator after it, or a scope (@x/) with none after the scope: the two paths into the loop.
const LOOPS = /node_modules[/\\](?:[^/\\\s]*$|[^/\\\s]*[\s:)]|@[^/\\\s]+[/\\][^/\\]*$|@[^/\\\s]+[/\\][^/\\\s]*[\s:)])/m;
function patched(value, opts) {
    if (value instanceof Error && typeof value.stack === "string" && opts && typeof opts === "object" && opts.colors &&
        value.stack.split("\n").some(line => LOOPS.test(line)))
        return inspect.call(this, value, { ...opts, colors: false });
    return inspect.apply(this, arguments);
}
Object.assign(patched, inspect);
Object.defineProperty(patched, "custom", { value: inspect.custom });
util.inspect = patched;
