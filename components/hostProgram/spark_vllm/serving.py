# serving-proof: after the endpoint answers, a short streamed load at concurrency 1 and at a higher concurrency:
# time to first token (p50/p95) and output tokens per second, compared with the previous deploy's figures.
import json
import math
import os
import sys
import threading
import time
import urllib.request

from spark_vllm.common import fail, read_file, say

PROMPT = "Write one short paragraph about the sea."


def percentile(values, p):
    """Nearest-rank percentile: the smallest value with at least p% of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


# What the time to first token measures: the first chunk with choices, as vLLM's own benchmark times it
# (vllm/benchmarks/lib/endpoint_request_func.py async_request_openai_chat_completions: `if choices :=
# data.get("choices")` starts the clock's stop, content or not). vLLM sends its first chunk (the assistant role) when the
# engine yields the first output (vllm/entrypoints/openai/serving_chat.py chat_completion_stream_generator,
# first_iteration), so this is the first token whether it is reasoning or answer.
TTFT_MEASURES = "first streamed chunk with choices (vLLM benchmarks' TTFT; reasoning or answer)"


def stream_figures(lines, clock=time.monotonic, started=None):
    """The figures of one streamed chat completion from its SSE lines: seconds to the first chunk with choices, seconds
    in all, output tokens (the usage chunk's completion_tokens, else one per token chunk), and the chunks that carried
    reasoning and answer. A model served with --reasoning-parser (gpt-oss among them) streams `reasoning_content`
    (`reasoning` in newer vLLM, vllm-project/vllm#22920) before any `content`, and a short answer can stay in reasoning:
    that is an answer, not a failure."""
    started = clock() if started is None else started
    first, reasoning, content, usage = None, 0, 0, None
    for raw in lines:
        line = (raw.decode(errors="replace") if isinstance(raw, bytes) else raw).strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[len("data: "):])
        choices = event.get("choices")
        if choices:
            if first is None:
                first = clock() - started
            delta = choices[0].get("delta") or {}
            if delta.get("reasoning_content") or delta.get("reasoning"):
                reasoning += 1
            if delta.get("content"):
                content += 1
        elif event.get("usage"):
            usage = event["usage"].get("completion_tokens")
    if first is None:
        # vllm/benchmarks/lib/endpoint_request_func.py: "Never received a valid chunk to calculate TTFT."
        raise RuntimeError("the stream carried no chunk with choices (no token): cannot time the first token")
    return {"ttft": first, "seconds": clock() - started, "tokens": usage if usage is not None else reasoning + content,
            "reasoningChunks": reasoning, "contentChunks": content}


def streamed_chat(base, key, model, max_tokens, timeout):
    """One streamed chat completion against vLLM's OpenAI server (vllm/entrypoints/openai/serving_chat.py
    chat_completion_stream_generator): `data: {chunk}` events, a last chunk with `usage` and no choices when
    stream_options.include_usage is set, then `data: [DONE]`. Its figures: stream_figures."""
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": max_tokens,
            "stream": True, "stream_options": {"include_usage": True}}
    req = urllib.request.Request(base + "/v1/chat/completions", method="POST", data=json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", "Bearer " + key)
    started = time.monotonic()
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return stream_figures(resp, started=started)


def load_level(run_one, concurrency, requests):
    """`requests` streamed completions, `concurrency` at a time; the figures of that level."""
    results, errors, lock = [], [], threading.Lock()
    todo = list(range(requests))

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                todo.pop()
            try:
                r = run_one()
                with lock:
                    results.append(r)
            except Exception as e:  # noqa: BLE001 - any failure of a request is reported with the level
                with lock:
                    errors.append(str(e))

    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    if errors:
        raise RuntimeError("%d of %d requests at concurrency %d failed: %s" % (len(errors), requests, concurrency, errors[0]))
    ttfts = [r["ttft"] * 1000 for r in results]
    tokens = sum(r["tokens"] for r in results)
    return {"concurrency": concurrency, "requests": requests, "ttftP50Ms": round(percentile(ttfts, 50), 1),
            "ttftP95Ms": round(percentile(ttfts, 95), 1), "outputTokens": tokens,
            "outputTokensPerSecond": round(tokens / wall, 2) if wall > 0 else None,
            # reasoning tokens (one per reasoning chunk), and how many answers never left reasoning
            "reasoningTokens": sum(r["reasoningChunks"] for r in results),
            "answersOnlyInReasoning": sum(1 for r in results if r["contentChunks"] == 0)}


def drop_warnings(levels, previous, fraction):
    """A warning per level whose tokens/s fell by more than `fraction` against the previous deploy's same level."""
    before = {lv["concurrency"]: lv for lv in (previous or {}).get("levels", [])}
    out = []
    for lv in levels:
        old = before.get(lv["concurrency"], {}).get("outputTokensPerSecond")
        new = lv["outputTokensPerSecond"]
        if old and new is not None and new < (1 - fraction) * old:
            out.append("output tokens/s at concurrency %d fell from %.1f to %.1f (more than %d%%) since the previous deploy"
                       % (lv["concurrency"], old, new, round(fraction * 100)))
    return out


def serving_proof(args):
    key = sys.stdin.readline().strip()
    base = "http://127.0.0.1:%d" % args["port"]

    def one():
        return streamed_chat(base, key, args["servedName"], args["maxTokens"], args["requestTimeoutSeconds"])

    levels = []
    for concurrency in sorted({1, max(1, int(args["concurrency"]))}):
        requests = max(concurrency, int(args["requests"]))
        try:
            levels.append(load_level(one, concurrency, requests))
        except Exception as e:  # noqa: BLE001
            fail(["serving proof on %s: %s" % (args["host"], e)])
    previous_text = read_file(args["resultFile"])
    try:
        previous = json.loads(previous_text) if previous_text else None
    except ValueError:
        previous = None
    result = {"levels": levels, "maxTokens": args["maxTokens"], "ttftMeasures": TTFT_MEASURES,
              "warnings": drop_warnings(levels, previous, args["warnDropFraction"])}
    for w in result["warnings"]:
        say("serving: WARNING " + w)
    for lv in levels:
        say("serving: concurrency %d: time to first token p50 %.0f ms, p95 %.0f ms (%s); %.1f output tokens/s, "
            "%d of them reasoning" % (lv["concurrency"], lv["ttftP50Ms"], lv["ttftP95Ms"], TTFT_MEASURES,
                                      lv["outputTokensPerSecond"] or 0, lv["reasoningTokens"]))
    tmp = args["resultFile"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"levels": levels}, f)
    os.replace(tmp, args["resultFile"])
    say(json.dumps(result, sort_keys=True))
