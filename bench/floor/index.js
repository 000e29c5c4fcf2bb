// The SDK floor (bench/floor.ts): registers a recorded resource graph (BENCH_FLOOR_GRAPH, a JSON file) with the same
// SDK classes, types, names, parents and providers as the program it was recorded from, and the smallest inputs each
// class takes. No spark-vllm code runs but the one mitigation any program can take, which the program takes first
// (index.ts): the SDK's per-promise debug stacks dropped (components/debugStacks.ts, compiled, at
// BENCH_FLOOR_DEBUG_STACKS). What this costs is what @pulumi/pulumi and the provider SDKs charge for the registrations.
"use strict";
const fs = require("fs");
require(process.env.BENCH_FLOOR_DEBUG_STACKS).dropPromiseStacks();
const pulumi = require("@pulumi/pulumi");
// Each provider SDK loaded when the graph first needs it, as a program that uses only some of them loads only those.
const docker = () => require("@pulumi/docker");
const command = () => require("@pulumi/command");
const random = () => require("@pulumi/random");

const HOST = "198.18.0.1"; // a test address (198.18.0.0/15): a preview contacts nothing
const make = {
    "pulumi:providers:docker": (name, opts) => new (docker().Provider)(name, { host: `ssh://floor@${HOST}` }, opts),
    "command:remote:Command": (name, opts) => new (command().remote.Command)(name, { connection: { host: HOST, user: "floor" }, create: "true" }, opts),
    "docker:index/remoteImage:RemoteImage": (name, opts) => new (docker().RemoteImage)(name, { name: "floor:1" }, opts),
    "docker:index/container:Container": (name, opts) => new (docker().Container)(name, { image: "floor:1", name }, opts),
    "random:index/randomPassword:RandomPassword": (name, opts) => new (random().RandomPassword)(name, { length: 32 }, opts),
};

/** @type {Array<{type: string, name: string, custom: boolean, parent?: number, provider?: number}>} */
const graph = JSON.parse(fs.readFileSync(process.env.BENCH_FLOOR_GRAPH, "utf8"));
const made = [];
const components = [];
for (const r of graph) {
    const opts = {
        ...(r.parent !== undefined ? { parent: made[r.parent] } : {}),
        ...(r.provider !== undefined ? { provider: made[r.provider] } : {}),
    };
    if (r.custom) {
        const f = make[r.type];
        if (!f) throw new Error(`the SDK floor has no class for ${r.type}: add it to bench/floor/index.js`);
        made.push(f(r.name, opts));
    } else {
        const c = new pulumi.ComponentResource(r.type, r.name, {}, opts);
        components.push(c);
        made.push(c);
    }
}
// As every component of the program does once its children are made.
for (const c of components) c.registerOutputs({});
