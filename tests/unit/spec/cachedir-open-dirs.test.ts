// Issue 41, item 3: model.cacheDir under a directory every local account can write to (/tmp, /var/tmp, /dev/shm) is
// refused at plan time: root in the vLLM container loads code from under it (HF_HOME, VLLM_CACHE_ROOT, TRITON_CACHE_DIR,
// TORCHINDUCTOR_CACHE_DIR), and any local account could create it, or a directory on its path, first.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { parseSpec } from "../../../components/spec/parseSpec";
import { rawConfig, specProblems } from "../../fixtures";

test("model.cacheDir under a directory anyone can write to is refused at plan, with the reason and the fix", () => {
    for (const dir of ["/tmp/hf", "/var/tmp/hf", "/dev/shm/hf", "/tmp/a/b/c", "/var/tmp/spark-vllm/hf"]) {
        const raw = rawConfig(2);
        raw.model.cacheDir = dir;
        const found = specProblems(raw).filter(p => p.startsWith("spark-vllm:model.cacheDir: "));
        assert.equal(found.length, 1, `${dir}: ${specProblems(raw).join("\n")}`);
        assert.match(found[0], /is under \/(tmp|var\/tmp|dev\/shm), which every local account can write to/);
        assert.match(found[0], /HF_HOME.*VLLM_CACHE_ROOT, TRITON_CACHE_DIR .*TORCHINDUCTOR_CACHE_DIR/);
        assert.match(found[0], /such as \/home\/<user>\/\.cache\/huggingface/);
    }
    for (const ok of ["/home/nvidia/.cache/huggingface", "/var/tmpfoo/hf", "/data/tmp/hf"]) {
        const raw = rawConfig(2);
        raw.model.cacheDir = ok;
        assert.equal(parseSpec(raw).model.cacheDir, ok);
    }
    // logDir keeps its own rule (a subdirectory of /var/tmp, checked on the host).
    const raw = rawConfig(2);
    raw.logDir = "/var/tmp/spark-vllm";
    assert.equal(parseSpec(raw).logDir, "/var/tmp/spark-vllm");
});
