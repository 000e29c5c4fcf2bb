// Runs a consumer's Pulumi program the way `pulumi up` does, with the engine replaced by mocks.
//
// `pulumi up` starts Pulumi's Node.js language host entry, @pulumi/pulumi/cmd/run, with the resource
// monitor's address; for `runtime.options.typescript: true` that entry registers ts-node (the
// project's typescript and ts-node if it has them, else the ones vendored in @pulumi/pulumi), which
// type-checks the program and never compiles files inside node_modules. This script calls
// pulumi.runtime.setMocks and then starts that same entry with --monitor=mock, so the program is
// loaded, compiled and run by Pulumi's own code; only the engine is a recording mock.
//
// argv[2]: a JSON request { program, typescript, project, stack, config, secretKeys }.
// Writes { resources: [{ type, name, inputs }], outputs, exitCode } to argv[2] + ".out" on exit.
"use strict";
const fs = require("fs");
const path = require("path");

const requestFile = path.resolve(process.argv[2]);
const request = JSON.parse(fs.readFileSync(requestFile, "utf8"));
const pulumi = require("@pulumi/pulumi");

const resources = [];
let outputs;
// Secret values reach the mocks wrapped in Pulumi's signature object: record the plain value.
const SECRET_SIG = "4dabf18193072939515e22adb298388d";
function plain(value) {
    if (Array.isArray(value)) return value.map(plain);
    if (value && typeof value === "object") {
        if (value[SECRET_SIG] === "1b47061264138c4ac30d75fd1eb44270") return plain(value.value);
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
    }
    return value;
}

const COMMAND_STDOUT = JSON.stringify({
    arch: "aarch64",
    imageId: "sha256:" + "fe".repeat(32),
    revision: "r1",
    files: { "config.json": 100, "model-00001-of-00001.safetensors": 1000 },
    totalBytes: 1100,
});

function fakeState(type, name, inputs) {
    switch (type) {
        case "random:index/randomPassword:RandomPassword":
            return { ...inputs, result: name.endsWith("-ray-token") ? "GENERATED-RAY-TOKEN-0123456789abcdefghijk" : "GENERATED-API-KEY-0123456789abcdefghijklmn" };
        case "docker:index/remoteImage:RemoteImage":
            return { ...inputs, repoDigest: String(inputs.name).replace(/:[^/@]*@/, "@"), imageId: "sha256:feed" };
        case "command:remote:Command":
            // One JSON document with what any of the program's commands reports (host facts, image,
            // weights manifest), so the program's parsers find their fields whatever the command.
            return { ...inputs, stdout: COMMAND_STDOUT, stderr: "" };
        default:
            return inputs;
    }
}

async function main() {
    const config = {};
    for (const [key, value] of Object.entries(request.config)) config[key] = typeof value === "string" ? value : JSON.stringify(value);
    pulumi.runtime.setAllConfig(config, request.secretKeys ?? []);
    await pulumi.runtime.setMocks(
        {
            newResource(args) {
                resources.push({ type: args.type, name: args.name, inputs: plain(args.inputs) });
                return { id: `${args.name}-id`, state: fakeState(args.type, args.name, args.inputs) };
            },
            call: args => args.inputs,
        },
        request.project,
        request.stack,
        false,
    );
    // The mock monitor has no shutdown call; the language host makes one after the program ends.
    const monitor = pulumi.runtime.getMonitor();
    monitor.signalAndWaitForShutdown = (_req, callback) => callback(null, {});
    const registerOutputs = monitor.registerResourceOutputs.bind(monitor);
    monitor.registerResourceOutputs = (req, callback) => {
        if (req.getUrn().includes("::pulumi:pulumi:Stack::")) outputs = plain(req.getOutputs()?.toJavaScript() ?? {});
        return registerOutputs(req, callback);
    };

    process.env.PULUMI_NODEJS_TYPESCRIPT = request.typescript ? "true" : "false";
    const entry = require.resolve("@pulumi/pulumi/cmd/run");
    process.argv = [process.argv[0], entry, "--monitor=mock", `--project=${request.project}`, `--stack=${request.stack}`, request.program];
    require(entry);
    // After the entry's own exit handler, which sets the exit code when the program failed.
    process.on("exit", code => {
        fs.writeFileSync(`${requestFile}.out`, JSON.stringify({ resources, outputs, exitCode: process.exitCode ?? code }));
    });
}

main().catch(err => {
    console.error(err);
    process.exitCode = 1;
});
