// Issue 41: extraArgs judged by what vLLM resolves, not by their text. KV events (pydantic's lax booleans, dotted keys
// that replace a plain JSON value whole), the endpoints a local account could reach, one rule for options that load
// code, a loopback-only data-parallel address, integers as Python's int() reads them, single-dash dotted options.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { parseSpec } from "../../../components/spec/parseSpec";
import { rawConfig, specProblems } from "../../fixtures";

const withArgs = (...extraArgs: string[]) => {
    const raw = rawConfig(2);
    raw.vllm.extraArgs = extraArgs;
    return raw;
};
const refused = (args: string[], i: number, why: RegExp) => {
    const all = specProblems(withArgs(...args));
    assert.ok(all.some(p => p.startsWith(`spark-vllm:vllm.extraArgs[${i}]: `) && why.test(p)),
        `${JSON.stringify(args)}: expected extraArgs[${i}] refused matching ${why}; got:\n${all.join("\n")}`);
};
const accepted = (...args: string[]) => assert.deepEqual(parseSpec(withArgs(...args)).vllm.extraArgs, args);
const KV_ON = /--kv-events-config turns vLLM's KV-cache event publisher on .*is refused/;

test("item 1: enable_kv_cache_events is read as pydantic's lax bool, in JSON and in dotted keys", () => {
    for (const v of ["true", "1", '"1"', '"yes"', '"YES"', '"on"', '"y"', '"t"', '"True"', "1.0"])
        refused(["--kv-events-config", `{"enable_kv_cache_events": ${v}}`], 0, KV_ON);
    for (const v of ["1", "yes", "On", "t", "Y", "TRUE", "true"])
        refused([`--kv-events-config.enable_kv_cache_events=${v}`], 0, KV_ON);
    refused(["--kv_events_config.enable_kv_cache_events", "1"], 0, KV_ON);
    // Not a bool pydantic reads: vLLM would refuse to start, spark-vllm refuses at plan.
    refused(["--kv-events-config", '{"enable_kv_cache_events": "maybe"}'], 0, /is not a bool vLLM reads/);
    // Off in every version: false and 0 (pydantic), and the publisher left alone.
    accepted("--kv-events-config", '{"enable_kv_cache_events": false}');
    accepted("--kv-events-config", '{"enable_kv_cache_events": 0, "topic": "t"}');
    accepted("--kv-events-config.enable_kv_cache_events=false");
    accepted("--kv-events-config.enable_kv_cache_events=0");
    accepted("--kv-events-config", '{"enable_kv_cache_events": "no", "publisher": "null"}');
});

test("item 1: dotted keys replace a plain --kv-events-config whole, wherever either stands, as vLLM's parser does", () => {
    // Merged, these read as events on at a loopback endpoint; vLLM resolves only the dotted keys: events on at its
    // default tcp://*:5557.
    refused(["--kv-events-config", '{"endpoint": "tcp://127.0.0.1:5557"}', "--kv-events-config.enable_kv_cache_events=true"], 2,
        /turns vLLM's KV-cache event publisher on.*replace the whole --kv-events-config value at extraArgs\[0\]/);
    refused(["--kv-events-config.enable_kv_cache_events=on", "--kv-events-config", '{"enable_kv_cache_events": 0}'], 0, KV_ON);
    // The dotted key replaces the plain value that turns events on, though it stands first: vLLM resolves
    // {"endpoint": "ipc:///tmp/kv"}, events off.
    accepted("--kv-events-config.endpoint=ipc:///tmp/kv", "--kv-events-config", '{"enable_kv_cache_events": 1}');
    // The plain value turns events on but a dotted key replaces it: vLLM resolves {"topic": "x"}, events off.
    accepted("--kv-events-config", '{"enable_kv_cache_events": true}', "--kv-events-config.topic=x");
    // A dotted key without `=` takes the next argument as its value, whatever it is: here the topic.
    accepted("--kv-events-config.topic", "--kv-events-config.enable_kv_cache_events=1");
    // vLLM 0.20 and later read -O.backend as --optimization-level, which takes no next argument: the dotted key after
    // it stands on its own there (in vLLM 0.10 it would be -O's value).
    refused(["-O.backend", "--kv-events-config.enable_kv_cache_events=1"], 1, KV_ON);
    // Of two plain values the last one counts.
    accepted("--kv-events-config", '{"enable_kv_cache_events": true}', "--kv-events-config", '{"enable_kv_cache_events": false}');
    refused(["--kv-events-config", '{"enable_kv_cache_events": false}', "--kv-events-config", '{"enable_kv_cache_events": true}'], 2, KV_ON);
});

test("item 2: KV events are refused at every endpoint, each of which a local account can reach", () => {
    for (const endpoint of ["tcp://127.0.0.1:5557", "tcp://localhost:5557", "ipc:///tmp/kv", "ipc://@kv", "inproc://kv", "tcp://*:5557"])
        refused(["--kv-events-config", JSON.stringify({ enable_kv_cache_events: true, endpoint })], 0,
            /local account.*Remove it, or set "enable_kv_cache_events": false/);
    refused(["--kv-events-config", '{"enable_kv_cache_events": true, "endpoint": "inproc://x", "replay_endpoint": "tcp://127.0.0.1:5558"}'], 0, KV_ON);
    // vLLM 0.10 starts the publisher from `publisher` alone (its EventPublisherFactory.create).
    refused(["--kv-events-config", '{"publisher": "zmq"}'], 0, /publisher "zmq"/);
});

test("item 6: every option that loads code is refused by one rule, in every spelling", () => {
    const CODE = /is refused: it makes vLLM import and run code that the stack names/;
    for (const args of [["--middleware", "m.mw"], ["--tool-parser-plugin", "/tmp/p.py"], ["--reasoning-parser-plugin=/x.py"],
        ["--logits-processors", "evil:Proc"], ["--worker-extension-cls", "evil.Ext"], ["--worker-cls", "evil.W"],
        ["--scheduler-cls", "evil.S"], ["--log-config-file", "/tmp/log.json"], ["--model-class-overrides", '{"A": "evil:M"}'],
        ["--tool_parser_plugin", "x"], ["--worker-ext", "x"], ["--log-config", "x"]])
        refused(args, 0, CODE);
    refused(["--logits-processor-pattern", ".*"], 0, /lets every API caller name a function for vLLM to import/);
    const JSON_CODE = /is refused: .*qualified name|import/;
    refused(["--compilation-config", '{"backend": "evil.backend"}'], 0, /--compilation-config backend "evil.backend" is refused/);
    refused(["-cc", '{"backend": "evil.backend"}'], 0, JSON_CODE);
    refused(["-O", '{"backend": "evil.backend"}'], 0, JSON_CODE);
    refused(["--compilation-config.backend=evil.backend"], 0, JSON_CODE);
    refused(["-cc.backend", "evil.backend"], 0, JSON_CODE);
    refused(["-O.backend=evil.backend"], 0, JSON_CODE);
    refused(["--compilation-config", '{"inductor_passes": {"p": "evil.f"}}'], 0, /inductor_passes/);
    // vLLM 0.20 and later read -O3 as --optimization-level: the plain JSON's backend still counts.
    refused(["--compilation-config", '{"backend": "evil.f"}', "-O3"], 0, JSON_CODE);
    refused(["--logging-config", '{"pylogging_config_file": "/tmp/l.json"}'], 0, /pylogging_config_file/);
    refused(["--logging-config.pylogging_config_file=/tmp/l.json"], 0, /pylogging_config_file/);
    refused(["--structured-outputs-config", '{"reasoning_parser_plugin": "/tmp/r.py"}'], 0, /reasoning_parser_plugin/);
    refused(["--speculative-config", '{"method": "custom_class", "model": "evil.Proposer"}'], 0, /proposer .* is refused/);
    refused(["--speculative-config", '{"model": "evil.Proposer", "num_speculative_tokens": 2}'], 0, /proposer .* is refused/);
    refused(["--spec-method", "custom_class", "--spec-model", "evil.P"], 0, /proposer .* is refused/);
    refused(["--compilation-config", '{"backend": "x", level: 1}'], 0, /cannot read this value/);
    // vLLM's own backends and ordinary tuning pass.
    accepted("--compilation-config", '{"backend": "inductor", "cudagraph_mode": "PIECEWISE"}');
    accepted("--compilation-config.cudagraph_mode=PIECEWISE", "-O3");
    accepted("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}');
    accepted("--speculative-config", '{"model": "nvidia/gpt-oss-120b-Eagle3", "num_speculative_tokens": 3}');
    accepted("--tool-call-parser", "hermes", "--enable-auto-tool-choice", "--reasoning-parser", "qwen3");
});

test("item 7: data parallelism needs a loopback --data-parallel-address; vLLM would otherwise pick a routable one", () => {
    const DP = /is refused without a loopback --data-parallel-address: vLLM then picks the data-parallel address itself/;
    refused(["--data-parallel-backend", "ray"], 0, DP);
    refused(["-dpb=ray"], 0, DP);
    refused(["--data-parallel-backend", "mp", "--data-parallel-size", "2"], 0, DP);
    refused(["-dp", "2"], 0, DP);
    refused(["--data_parallel_size_local=1"], 0, DP);
    refused(["--data-parallel-hybrid-lb"], 0, DP);
    refused(["--enable-elastic-ep"], 0, DP);
    refused(["--data-parallel-b", "ray"], 0, DP);
    refused(["-dpb", "ray", "-dpa", "10.0.0.5"], 2, /-dpa "10\.0\.0\.5" is refused/);
    refused(["-dpm"], 0, /--data-parallel-multi-port-external-lb\) is refused/);
    // A dotted key without `=` takes the next argument as its value, and that one is not read again (so "-dp" here is
    // an option again): vllm/utils/argparse_utils.py.
    refused(["--kv-events-config.topic", "--kv-events-config.replay_endpoint", "-dp", "2"], 2, DP);
    accepted("--data-parallel-backend", "ray", "--data-parallel-address", "127.0.0.1");
    accepted("-dp", "1", "-dpa=127.0.0.1");
});

test("item 9: integers as Python's int() reads them; single-dash dotted options as vLLM folds them", () => {
    for (const v of ["0x100", "1e2", "100.0", "0b11", "1__0", "_1", "1 0"])
        refused(["--h11-max-header-count", v], 0, /--h11-max-header-count.* is refused: vLLM reads it with Python's int\(\)/);
    // Python's int() also takes other scripts' decimal digits; spark-vllm asks for ASCII ones.
    refused(["--h11-max-header-count", "\u0661\u0662"], 0, /--h11-max-header-count.* is refused/);
    accepted("--h11-max-header-count", "1_00", "--h11-max-incomplete-event-size", " 4096 ");
    accepted("--h11-max-header-count=+64");
    refused(["-tp.x=4"], 0, /-tp\.x \(vLLM reads it as -tp\) is set by spark-vllm/);
    refused(["-pp.x", "2"], 0, /vLLM reads it as -pp/);
    refused(["-dpa.x=1"], 0, /dotted/);
});
