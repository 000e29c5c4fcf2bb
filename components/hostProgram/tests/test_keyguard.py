import asyncio
import os
import unittest
from unittest import mock

from spark_vllm.keyguard import SparkVllmKeyGuard, keyguard_token_ok

KEY = "k3y-Abc"


def call(scope, key=KEY):
    """Runs the guard around an app that records that it was reached; returns (reached, messages sent)."""
    reached = []
    sent = []

    async def app(scope, receive, send):
        reached.append(scope["path"] if "path" in scope else scope["type"])

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    with mock.patch.dict(os.environ, {"VLLM_API_KEY": key} if key else {}, clear=True):
        guard = SparkVllmKeyGuard(app=app)
    asyncio.run(guard(scope, receive, send))
    return reached, sent


def http(path, method="GET", authorization=None):
    headers = [(b"host", b"127.0.0.1:8001")] + ([(b"authorization", authorization.encode("latin-1"))] if authorization else [])
    return {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "root_path": "", "headers": headers}


class KeyGuard(unittest.TestCase):
    def test_every_path_but_health_needs_the_key(self):
        for path in ["/invocations", "/metrics", "/metrics/", "/metricsX", "/metrics/../health", "/v1/models", "/tokenize",
                     "/version", "/docs", "/openapi.json", "/ping", "/load", "/pooling", "/score", "/rerank", "/v2/rerank",
                     "/inference/v1/generate", "/health/", "/health/../metrics", "/Health", "//health", "/", ""]:
            for method in ["GET", "POST", "OPTIONS", "HEAD"]:
                reached, sent = call(http(path, method))
                self.assertEqual(reached, [], "%s %s reached vLLM without the key" % (method, path))
                self.assertEqual(sent[0]["status"], 401, path)
                self.assertIn((b"www-authenticate", b"Bearer"), sent[0]["headers"])
                self.assertEqual(sent[1]["body"], b'{"error": "Unauthorized"}')

    def test_health_needs_no_key(self):
        for method in ["GET", "HEAD"]:
            self.assertEqual(call(http("/health", method))[0], ["/health"])

    def test_the_key_opens_every_path(self):
        for path in ["/invocations", "/metrics", "/v1/models", "/version"]:
            self.assertEqual(call(http(path, "POST", "Bearer " + KEY))[0], [path])
        self.assertEqual(call(http("/metrics", "GET", "bearer " + KEY))[0], ["/metrics"], "the scheme in any case, as vLLM")

    def test_wrong_keys(self):
        for value in ["Bearer " + KEY.lower(), "Bearer " + KEY + "x", "Bearer  " + KEY, "Basic " + KEY, KEY, "Bearer", ""]:
            self.assertEqual(call(http("/metrics", "GET", value))[0], [], repr(value))

    def test_no_key_configured_opens_only_health(self):
        self.assertEqual(call(http("/metrics", "GET", "Bearer "), key=None)[0], [])
        self.assertEqual(call(http("/v1/models", "GET", "Bearer " + KEY), key=None)[0], [])
        self.assertEqual(call(http("/health"), key=None)[0], ["/health"])
        self.assertFalse(keyguard_token_ok("", "Bearer "))

    def test_websockets_are_refused_before_accept_without_the_key(self):
        scope = dict(http("/v1/realtime"), type="websocket")
        reached, sent = call(scope)
        self.assertEqual((reached, sent), ([], [{"type": "websocket.close", "code": 1008}]))
        scope["headers"] = scope["headers"] + [(b"authorization", ("Bearer " + KEY).encode())]
        self.assertEqual(call(scope)[0], ["/v1/realtime"])
        self.assertEqual(call(dict(http("/health"), type="websocket"))[0], [], "/health is open to http only")

    def test_lifespan_passes(self):
        self.assertEqual(call({"type": "lifespan"})[0], ["lifespan"])


if __name__ == "__main__":
    unittest.main()
