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


def streamed_chat(base, key, model, max_tokens, timeout):
    """One streamed chat completion: seconds to the first content token, seconds in all, and the output tokens (the
    usage chunk's count, else one per content chunk). The stream is vLLM's (vllm/entrypoints/openai/serving_chat.py
    chat_completion_stream_generator): `data: {chunk}` events, a last chunk with `usage` and no choices when
    stream_options.include_usage is set, then `data: [DONE]`."""
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": max_tokens,
            "stream": True, "stream_options": {"include_usage": True}}
    req = urllib.request.Request(base + "/v1/chat/completions", method="POST", data=json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", "Bearer " + key)
    started = time.monotonic()
    first, chunks, usage = None, 0, None
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        for raw in resp:
            line = raw.decode(errors="replace").strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[len("data: "):])
            if event.get("usage"):
                usage = event["usage"].get("completion_tokens")
            for choice in event.get("choices") or []:
                if (choice.get("delta") or {}).get("content"):
                    chunks += 1
                    if first is None:
                        first = time.monotonic() - started
    total = time.monotonic() - started
    if first is None:
        raise RuntimeError("the stream carried no content")
    return {"ttft": first, "seconds": total, "tokens": usage if usage is not None else chunks}


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
            "outputTokensPerSecond": round(tokens / wall, 2) if wall > 0 else None}


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
    result = {"levels": levels, "maxTokens": args["maxTokens"],
              "warnings": drop_warnings(levels, previous, args["warnDropFraction"])}
    for w in result["warnings"]:
        say("serving: WARNING " + w)
    for lv in levels:
        say("serving: concurrency %d: time to first token p50 %.0f ms, p95 %.0f ms; %.1f output tokens/s"
            % (lv["concurrency"], lv["ttftP50Ms"], lv["ttftP95Ms"], lv["outputTokensPerSecond"] or 0))
    tmp = args["resultFile"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"levels": levels}, f)
    os.replace(tmp, args["resultFile"])
    say(json.dumps(result, sort_keys=True))
