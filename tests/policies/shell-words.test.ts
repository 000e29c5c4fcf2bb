// Issue 41: the policies read `vllm serve`'s arguments as the shell passes them (policies/shellWords.ts). The real
// planned launch commands (docker exec … bash -c '<script>', values quoted by components/plan/scripts.ts) give back exactly
// the argv the planner put in them, a value holding " --headless" included.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { parseSpec } from "../../components/spec/parseSpec";
import { planCluster } from "../../components/plan/plan";
import { shellTokens, vllmServeArgvs } from "../../policies/shellWords";
import { rawConfig } from "../fixtures";

test("the planned mp launches split back into the planned argvs", () => {
    const raw = rawConfig(2);
    raw.vllm.backend = "mp";
    raw.vllm.extraArgs = ["--chat-template", "{{ 'a --headless b' }} \"x\"\\y $HOME `id`", "--served-model-name-x", "it's"];
    const plan = planCluster(parseSpec(raw));
    assert.deepEqual(vllmServeArgvs(plan.vllmLaunch.create), [plan.vllmServeArgv]);
    assert.deepEqual(vllmServeArgvs(plan.hosts[1].vllmLaunch!.create), [plan.hosts[1].vllmServeArgv]);
    assert.ok(!plan.vllmServeArgv.includes("--headless") && plan.hosts[1].vllmServeArgv!.includes("--headless"));
});

test("shell tokens: quotes, escapes, operators, comments; an open quote is undefined", () => {
    assert.deepEqual(shellTokens(`a 'b c'"d\\"e" f\\ g 2>&1 # x\nh`), [
        { word: "a" }, { word: "b cd\"e" }, { word: "f g" }, { word: "2" }, { op: ">&" }, { word: "1" }, { op: "\n" }, { word: "h" }]);
    assert.equal(shellTokens("a 'b"), undefined);
    assert.equal(shellTokens('a "b'), undefined);
    assert.deepEqual(vllmServeArgvs("bash -c 'vllm serve m --headless > log'"), [["vllm", "serve", "m", "--headless"]]);
    assert.deepEqual(vllmServeArgvs("vllm serve m --x ' --headless'"), [["vllm", "serve", "m", "--x", " --headless"]]);
});
