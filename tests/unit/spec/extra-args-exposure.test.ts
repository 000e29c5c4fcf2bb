// Issue 30: extraArgs that open a listener beside the endpoint proxy, or replace or weaken vLLM's HTTP stack, are
// refused with the reason, in every spelling vLLM reads (`--flag value`, `--flag=value`, `_` for `-`, abbreviations,
// JSON values and dotted JSON keys). docs/security.md#refused-extraargs lists the same options.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "fs";
import * as path from "path";
import { DATA_PARALLEL_VLLM_FLAGS, REFUSED_VLLM_FLAGS, VALUE_CHECKED_VLLM_FLAGS } from "../../../components/spec/extraArgs";
import { parseSpec } from "../../../components/spec/parseSpec";
import { rawConfig, specProblems } from "../../fixtures";

const withArgs = (...extraArgs: string[]) => {
    const raw = rawConfig(2);
    raw.vllm.extraArgs = extraArgs;
    return raw;
};
/** The problems about extraArgs[i] (each must name `spark-vllm:vllm.extraArgs[i]`). */
const about = (args: string[], i: number) =>
    specProblems(withArgs(...args)).filter(p => p.startsWith(`spark-vllm:vllm.extraArgs[${i}]: `));
const refused = (args: string[], i: number, why: RegExp) => {
    const found = about(args, i);
    assert.ok(found.some(p => why.test(p)), `${JSON.stringify(args)}: expected extraArgs[${i}] refused matching ${why}; got:\n${specProblems(withArgs(...args)).join("\n")}`);
};
const accepted = (...args: string[]) => assert.deepEqual(parseSpec(withArgs(...args)).vllm.extraArgs, args);

test("the five options of the review are refused, each with its reason", () => {
    refused(["--kv-events-config", '{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:5557"}'], 0,
        /turns vLLM's KV-cache event publisher on and is refused: .*binds an endpoint with \* or ::/);
    refused(["--data-parallel-address", "0.0.0.0"], 0, /--data-parallel-address "0\.0\.0\.0" is refused: .*not loopback/);
    refused(["--root-path", "/api"], 0, /--root-path is refused: it mounts vLLM's routes under a prefix/);
    refused(["--middleware", "evil.mw"], 0, /--middleware is refused: it makes vLLM import and run code that the stack names: each value is an importable ASGI middleware/);
    refused(["--allowed-local-media-path", "/"], 0, /--allowed-local-media-path is refused: .*file:\/\/ media URLs/);
    refused(["--allowed-local-media-path=/srv/media"], 0, /--allowed-local-media-path \(vLLM reads it as --allowed-local-media-path\)|--allowed-local-media-path.*is refused/);
});

test("every spelling: --flag=value, underscores, case, abbreviations, the short alias", () => {
    refused(["--data-parallel-address=0.0.0.0"], 0, /is refused: vLLM's data-parallel coordination listens/);
    refused(["--data_parallel_address", "10.0.0.5"], 0, /is refused: vLLM's data-parallel coordination listens/);
    refused(["-dpa", "0.0.0.0"], 0, /-dpa "0\.0\.0\.0" is refused/);
    refused(["-dpa=::"], 0, /is refused/);
    refused(["--data-parallel-addr", "0.0.0.0"], 0, /is refused/);
    refused(["--root_path=/x"], 0, /--root_path \(vLLM reads it as --root-path\) is refused/);
    refused(["--Middleware", "m"], 0, /vLLM reads it as --middleware\) is refused/);
    refused(["--middle", "m"], 0, /vLLM reads it as --middleware\) is refused/);
    refused(["--enforce-eager", "--uds", "/tmp/v.sock"], 1, /--uds is refused: it moves vLLM's HTTP listener/);
    refused(["--grpc"], 0, /--grpc is refused/);
    for (const ssl of ["--ssl-keyfile", "--ssl-certfile", "--ssl-ca-certs", "--ssl-cert-reqs", "--ssl-ciphers", "--enable-ssl-refresh"])
        refused([ssl, "x"], 0, /is refused: the endpoint proxy speaks plain HTTP to vLLM .*spark-vllm:endpoint\.tls/);
    refused(["--kv-transfer-config", '{"kv_connector":"P2pNcclConnector"}'], 0, /--kv-transfer-config is refused: KV-transfer connectors/);
    refused(["--trust-request-chat-template"], 0, /is refused: it lets every API caller send a chat template/);
});

test("--kv-events-config: JSON and dotted forms; events on are refused whatever the endpoint (issue 41)", () => {
    refused(["--kv-events-config", '{"enable_kv_cache_events": true}'], 0, /publisher on .*the default tcp:\/\/\*:5557/);
    refused(["--kv-events-config={\"publisher\": \"zmq\"}"], 0, /publisher "zmq": vLLM 0\.10 starts the publisher/);
    refused(["--kv-events-config.enable_kv_cache_events", "true"], 0, /publisher on/);
    refused(["--kv-events-config", '{"endpoint": "tcp://127.0.0.1:5557", "replay_endpoint": "tcp://*:5558", "enable_kv_cache_events": true}'], 0, /publisher on/);
    refused(["--kv-events-config", "tcp://*:5557"], 0, /must be a JSON object/);
    // Loopback endpoints are refused too now: a local account can bind or open each of them (extra-args-boundary.test.ts).
    refused(["--kv-events-config", '{"enable_kv_cache_events": true, "endpoint": "tcp://127.0.0.1:5557", "replay_endpoint": "ipc:///tmp/replay"}'], 0, /local account/);
    refused(["--kv-events-config.enable_kv_cache_events=true", "--kv-events-config.endpoint=tcp://localhost:5557"], 0, /publisher on/);
    // Events off: the endpoints are never opened.
    accepted("--kv-events-config", '{"enable_kv_cache_events": false}');
    accepted("--kv_events_config.endpoint=tcp://0.0.0.0:5557");
});

test("--data-parallel-address on loopback and lowered h11 limits pass; raised ones are refused", () => {
    accepted("--data-parallel-address", "127.0.0.1");
    accepted("-dpa=localhost");
    accepted("--h11-max-header-count", "100", "--h11-max-incomplete-event-size=65536");
    refused(["--h11-max-header-count", "100000"], 0, /may only lower vLLM's limit against header abuse \(default and most 256\)/);
    refused(["--h11_max_incomplete_event_size=999999999"], 0, /default and most 4194304/);
    refused(["--h11-max-header-count", "-1"], 0, /may only lower/);
});

test("options decided harmless stay allowed (CORS, request-id headers, uvicorn's log level, docs off)", () => {
    accepted("--allowed-origins", '["https://a.example"]', "--enable-request-id-headers", "--uvicorn-log-level", "trace",
        "--disable-fastapi-docs", "--allowed-media-domains", "upload.wikimedia.org", "--enable-prefix-caching");
});

test("docs/security.md lists every refused and value-checked option", () => {
    const doc = fs.readFileSync(path.join(__dirname, "..", "..", "..", "docs", "security.md"), "utf8");
    const section = /## Refused extraArgs\n([\s\S]*?)\n## /.exec(doc)?.[1] ?? assert.fail("docs/security.md has no '## Refused extraArgs' section");
    for (const flag of [...Object.keys(REFUSED_VLLM_FLAGS), ...VALUE_CHECKED_VLLM_FLAGS, ...DATA_PARALLEL_VLLM_FLAGS])
        assert.ok(section.includes(`\`${flag}`), `docs/security.md#refused-extraargs does not list ${flag}`);
});
