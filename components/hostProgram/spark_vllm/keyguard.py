# The API key on every path of vLLM's HTTP server but /health: an ASGI middleware that `vllm serve --middleware
# spark_vllm_tools.SparkVllmKeyGuard` loads on the head (components/plan/hostCommands.ts vllmServeArgv), so that no account on the head
# that lacks the key gets anything from vLLM's loopback port (docs/security.md, "Who reaches vLLM on the head").
#
# Why: vLLM's own --api-key (VLLM_API_KEY) guards only some path prefixes: "/v1" up to 0.20.1 (vllm 0.20.1 wheel,
# vllm/entrypoints/openai/server_utils.py AuthenticationMiddleware: `if url_path.startswith("/v1") and not
# self.verify_token(headers)`), GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere") later
# (vllm/entrypoints/serve/utils/server_utils.py, commit 0753ceeb9cb7d7e39564ebebfe031d179e0c9924); /invocations,
# /metrics, /tokenize, /pooling, /score, /rerank, /version, /docs, … answer anyone who reaches the port (vLLM's
# docs/usage/security.md, vllm-project/vllm#58144).
#
# How vLLM loads it, in every version from 0.10 to 0.20 (vllm/entrypoints/openai/api_server.py build_app): `for middleware
# in args.middleware: module_path, object_name = middleware.rsplit(".", 1); imported =
# getattr(importlib.import_module(module_path), object_name); if inspect.isclass(imported): app.add_middleware(imported)`.
# Starlette's add_middleware puts the last one added outermost, so this runs before vLLM's routes, its /metrics mount
# (`Mount("/metrics", …)`, matched by prefix), CORS and its own key check. Pure ASGI and standard library only: the
# shipped spark_vllm_tools.py is imported by vLLM's API server as it is (PYTHONPATH is the log directory).
import hashlib
import os
import secrets

KEYGUARD_OPEN_PATH = "/health"
KEYGUARD_BODY = b'{"error": "Unauthorized"}'


def keyguard_token_ok(api_key, authorization):
    """Whether an Authorization header value carries the key, decided as vLLM's AuthenticationMiddleware.verify_token does:
    `scheme, _, param = value.partition(" ")`, the scheme "bearer" in any case, the rest compared whole by sha256 with
    secrets.compare_digest (no timing signal). No key configured: nothing matches."""
    if not api_key or not authorization:
        return False
    scheme, _, param = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return secrets.compare_digest(hashlib.sha256(param.encode("utf-8")).digest(),
                                  hashlib.sha256(api_key.encode("utf-8")).digest())


def keyguard_header(scope, name):
    """The first value of header NAME (lower-case bytes) in an ASGI scope, as text (latin-1, as HTTP carries it)."""
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class SparkVllmKeyGuard:
    """ASGI middleware: a request passes only with `Authorization: Bearer <VLLM_API_KEY>`, or when its path is exactly
    /health (any method: vLLM answers what /health allows). Every method, OPTIONS included, and websockets alike;
    lifespan and other scope types pass. Without a key in the environment, only /health passes."""

    def __init__(self, app):
        self.app = app
        self.api_key = os.environ.get("VLLM_API_KEY") or ""

    async def __call__(self, scope, receive, send):
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        if scope.get("path") == KEYGUARD_OPEN_PATH and kind == "http":
            return await self.app(scope, receive, send)
        if keyguard_token_ok(self.api_key, keyguard_header(scope, b"authorization")):
            return await self.app(scope, receive, send)
        if kind == "websocket":
            # Closing before accepting refuses the handshake (ASGI spec, websocket.close: the server answers 403).
            return await send({"type": "websocket.close", "code": 1008})
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(KEYGUARD_BODY)).encode()),
            (b"www-authenticate", b"Bearer"),
        ]})
        await send({"type": "http.response.body", "body": KEYGUARD_BODY})
