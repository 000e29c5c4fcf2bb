import io
import json
import os
import shutil
import threading
import time
import unittest
from contextlib import redirect_stdout
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock

from spark_vllm import serving
from tests import scratch_dir


def sse_server(first_token_s, token_gap_s, tokens, key="k"):
    """An OpenAI-style streaming endpoint with a known time to first token and token rate."""
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Authorization") != "Bearer " + key:
                self.send_response(401)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()

            def send(obj):
                self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
                self.wfile.flush()
            # vLLM sends the role chunk with the first output (serving_chat.py first_iteration), not before it
            time.sleep(first_token_s)
            send({"choices": [{"delta": {"role": "assistant", "content": ""}}]})
            for i in range(tokens):
                if i:
                    time.sleep(token_gap_s)
                send({"choices": [{"delta": {"content": " w%d" % i}}]})
            send({"choices": [], "usage": {"completion_tokens": tokens}})
            self.wfile.write(b"data: [DONE]\n\n")

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


class ReasoningStreams(unittest.TestCase):
    """reasoning-only.sse: a stream in vLLM's chunk format (vllm/entrypoints/openai/serving_chat.py; the role chunk,
    then deltas with `reasoning_content`, the older name, and `reasoning`, the newer, vllm-project/vllm#22920) of a
    reasoning model whose answer never leaves reasoning before max_tokens; written for this test, not captured on a
    GB10."""

    def lines(self):
        with open(os.path.join(FIXTURES, "reasoning-only.sse"), "rb") as f:
            return f.read().splitlines(keepends=True)

    def test_an_answer_that_stays_in_reasoning_is_timed_and_counted(self):
        ticks = iter([0.0, 0.25, 0.4])
        r = serving.stream_figures(self.lines(), clock=lambda: next(ticks))
        self.assertEqual(r["ttft"], 0.25)  # the first chunk with choices, as vLLM's benchmark times it
        self.assertEqual(r["seconds"], 0.4)
        self.assertEqual((r["tokens"], r["reasoningChunks"], r["contentChunks"]), (5, 5, 0))

    def test_without_usage_the_tokens_are_the_reasoning_and_answer_chunks(self):
        lines = [l for l in self.lines() if b'"usage"' not in l]
        lines.insert(-2, b'data: {"choices":[{"index":0,"delta":{"content":"Sea."}}]}\n')
        r = serving.stream_figures(lines)
        self.assertEqual((r["tokens"], r["reasoningChunks"], r["contentChunks"]), (6, 5, 1))

    def test_a_stream_without_any_choices_fails(self):
        with self.assertRaisesRegex(RuntimeError, "no chunk with choices"):
            serving.stream_figures([b'data: {"choices":[],"usage":{"completion_tokens":0}}\n', b"data: [DONE]\n"])

    def test_a_level_reports_reasoning_tokens_and_what_was_measured(self):
        one = {"ttft": 0.1, "seconds": 0.5, "tokens": 5, "reasoningChunks": 5, "contentChunks": 0}
        lv = serving.load_level(lambda: dict(one), 1, 2)
        self.assertEqual((lv["reasoningTokens"], lv["answersOnlyInReasoning"]), (10, 2))
        self.assertIn("first streamed chunk with choices", serving.TTFT_MEASURES)


class Figures(unittest.TestCase):
    def test_percentile_is_nearest_rank(self):
        self.assertEqual(serving.percentile([5, 1, 3, 2, 4], 50), 3)
        self.assertEqual(serving.percentile(list(range(1, 21)), 95), 19)
        self.assertEqual(serving.percentile([7], 95), 7)

    def test_a_streamed_completion_is_measured_for_real(self):
        srv = sse_server(0.2, 0.01, 10)
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        r = serving.streamed_chat("http://127.0.0.1:%d" % srv.server_port, "k", "m", 10, 10)
        self.assertGreaterEqual(r["ttft"], 0.2)
        self.assertLess(r["ttft"], 1.5)
        self.assertEqual(r["tokens"], 10)
        self.assertGreaterEqual(r["seconds"], r["ttft"] + 0.09)

    def test_a_level_gathers_every_request_and_fails_on_any_error(self):
        calls = []
        lv = serving.load_level(lambda: calls.append(1) or {"ttft": 0.1, "seconds": 0.5, "tokens": 20, "reasoningChunks": 0, "contentChunks": 20}, 2, 4)
        self.assertEqual((lv["requests"], lv["outputTokens"], lv["ttftP50Ms"], len(calls)), (4, 80, 100.0, 4))

        def broken():
            raise OSError("connection refused")
        with self.assertRaisesRegex(RuntimeError, "4 of 4 requests at concurrency 2 failed: connection refused"):
            serving.load_level(broken, 2, 4)

    def test_a_drop_beyond_the_fraction_warns(self):
        prev = {"levels": [{"concurrency": 1, "outputTokensPerSecond": 100.0}, {"concurrency": 4, "outputTokensPerSecond": 300.0}]}
        now = [{"concurrency": 1, "outputTokensPerSecond": 85.0}, {"concurrency": 4, "outputTokensPerSecond": 200.0}]
        self.assertEqual(serving.drop_warnings(now, prev, 0.2),
                         ["output tokens/s at concurrency 4 fell from 300.0 to 200.0 (more than 20%) since the previous deploy"])
        self.assertEqual(serving.drop_warnings(now, None, 0.2), [])


class Proof(unittest.TestCase):
    def test_two_levels_then_the_next_run_compares_with_the_saved_figures(self):
        d = scratch_dir(self)
        self.addCleanup(shutil.rmtree, d)
        fast = sse_server(0.02, 0.005, 8)
        self.addCleanup(fast.server_close)
        self.addCleanup(fast.shutdown)
        args = {"host": "spark-a", "port": fast.server_port, "servedName": "m", "maxTokens": 8, "requests": 4,
                "concurrency": 2, "requestTimeoutSeconds": 10, "warnDropFraction": 0.5,
                "resultFile": os.path.join(d, "serving.json")}

        def run(a):
            out = io.StringIO()
            with mock.patch("sys.stdin", io.StringIO("k\n")), redirect_stdout(out):
                serving.serving_proof(a)
            return json.loads(out.getvalue().strip().splitlines()[-1])
        first = run(args)
        self.assertEqual([lv["concurrency"] for lv in first["levels"]], [1, 2])
        self.assertEqual(first["warnings"], [])
        slow = sse_server(0.02, 0.2, 8)
        self.addCleanup(slow.server_close)
        self.addCleanup(slow.shutdown)
        second = run(dict(args, port=slow.server_port))
        self.assertEqual(len(second["warnings"]), 2, second)
        self.assertRegex(second["warnings"][0], r"^output tokens/s at concurrency 1 fell from ")


if __name__ == "__main__":
    unittest.main()
