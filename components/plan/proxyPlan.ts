// The endpoint proxy as plain data: nginx's configuration, the commands that write it (and the optional
// self-signed certificate) on the head, and the proxy's container. Pure: no Pulumi.
//
// Why a proxy: vLLM's --api-key guards only paths under "/v1" up to 0.20.1 (the 0.20.1 wheel's
// vllm/entrypoints/openai/server_utils.py AuthenticationMiddleware: `if url_path.startswith("/v1") and not
// self.verify_token(headers)`), under GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere") later
// (vllm/entrypoints/serve/utils/server_utils.py), so /invocations, /tokenize, /pooling, /score, /rerank, /classify and
// /metrics answer anyone who reaches the port (vLLM's docs/usage/security.md). On the head's loopback vLLM's key guard
// (components/hostProgram/spark_vllm/keyguard.py) asks the key on every path but /health; nginx on the head publishes
// vllm.port: /health (GET or HEAD, no body) without a key, the routes in FORWARDED_PATHS with it, everything else 401
// without the key and 404 with it; a request whose target is not a plain path is refused before any location is chosen.
import { ClusterSpec } from "../spec/spec";
import { argvLine, ifContainerRunning, script, shq, withTimeout } from "./scripts";
import { proxyContainerName } from "./naming";

/** Where the proxy's files live on the head: a private directory under logDir (itself the SSH user's, 700). */
export const proxyDir = (spec: ClusterSpec) => `${spec.logDir}/proxy`;
/** Where the proxy container sees that directory (mounted read-only). */
export const PROXY_MOUNT = "/etc/spark-vllm/proxy";

/**
 * The paths the proxy forwards (with the key), exactly; "*" is one path segment ([A-Za-z0-9_-]+).
 * - The OpenAI API, from vLLM's routers (vllm/entrypoints/openai/*\/api_router.py): /v1/models, /v1/completions,
 *   /v1/chat/completions, /v1/embeddings, /v1/responses (and /v1/responses/{id}, …/{id}/cancel),
 *   /v1/audio/transcriptions, /v1/audio/translations.
 * - Rerank and score as clients call them (vllm/entrypoints/pooling/score/api_router.py: `@router.post("/rerank")`,
 *   `"/v1/rerank"`, `"/v2/rerank"`, `"/score"`, `"/v1/score"`); the proxy asks the key on all five.
 * - Anthropic's Messages API (vllm/entrypoints/anthropic/api_router.py): /v1/messages, /v1/messages/count_tokens.
 * - /metrics, for a Prometheus that scrapes with the key as a bearer token. vLLM mounts it unguarded and by prefix
 *   (vllm/entrypoints/openai/api_server.py mount_metrics: `Mount("/metrics", make_asgi_app())`, `path_regex =
 *   re.compile("^/metrics(?P<path>.*)$")`: /metricsX/… answers metrics too); only this exact path is forwarded.
 * Not forwarded: /invocations, /tokenize, /detokenize, /pooling, /classify, /version, /load, /ping, /v1/load_lora_adapter,
 * /inference/…, and anything else.
 */
export const FORWARDED_PATHS = [
    "/v1/models",
    "/v1/completions",
    "/v1/chat/completions",
    "/v1/embeddings",
    "/v1/responses",
    "/v1/responses/*",
    "/v1/responses/*/cancel",
    "/v1/audio/transcriptions",
    "/v1/audio/translations",
    "/v1/rerank",
    "/v1/score",
    "/v2/rerank",
    "/rerank",
    "/score",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/metrics",
] as const;

/** The request body limit with the key: nginx's default of 1 MB (client_max_body_size) is below a long prompt or an image. */
export const PROXY_MAX_BODY = "64m";
/** How long a response may go quiet: a non-streamed generation sends nothing until it is done. */
export const PROXY_READ_TIMEOUT_SECONDS = 3600;

/**
 * How long nginx goes on reading (and discarding) the body of a request it refused, at most: `lingering_time`. nginx
 * counts it in whole seconds from the second it answered (ngx_http_finalize_connection: `r->lingering_time = ngx_time()
 * + (time_t) (clcf->lingering_time / 1000)`), so 2 s is between 1 and 2 s of reading; then it closes the connection.
 */
export const PROXY_REFUSAL_LINGER_SECONDS = 2;
/** How long nginx waits for more of a refused request's body before it closes the connection: `lingering_timeout`. */
export const PROXY_REFUSAL_LINGER_TIMEOUT_SECONDS = 1;

/**
 * Per-client limits: one address must not be able to take every connection nginx has (issue 50: about 2,000 connections
 * from one address, each with half a request header, left no connection for anyone else with 2 workers × 1024).
 * - nginx's `limit_conn` (ngx_http_limit_conn_module, nginx.org/en/docs/http/ngx_http_limit_conn_module.html) counts "only
 *   if it has a request being processed by the server and the whole request header has already been read": it cannot
 *   see a connection still sending its header. So those are bounded by time, `client_header_timeout`
 *   (ngx_http_core_module: "If a client does not transmit the entire header within this time, the request is terminated
 *   with the 408"; default 60 s), and by room: each worker has more connections than one address can open to one
 *   address and port (TCP's 16-bit source port: 65,535; Linux picks from 28,232 by default, ip_local_port_range
 *   32768-60999), so one address cannot fill a worker, whichever worker accepts its connections.
 * - limit_conn then bounds, per address, the requests in progress: forwarded requests with the key and /health (a keyless
 *   request to any other path is refused in the rewrite phase, before limit_conn's preaccess phase, and never counted).
 */
/** `worker_connections` (ngx_core_module events): per worker, client and upstream connections together. */
export const PROXY_WORKER_CONNECTIONS = 131072;
/**
 * `worker_rlimit_nofile` (ngx_core_module): each connection is a descriptor, and a forwarded request holds two. Below the
 * hard limit Docker gives a container (524288 or 1048576, dockerd's LimitNOFILE), so nginx's setrlimit succeeds.
 */
export const PROXY_WORKER_NOFILE = 2 * PROXY_WORKER_CONNECTIONS + 1024;
/** `client_header_timeout`: a client sends its whole header at once; 10 s leaves room for a slow link. */
export const PROXY_HEADER_TIMEOUT_SECONDS = 10;
/**
 * `client_body_timeout` ("only for a period between two successive read operations", default 60 s): only a request with the
 * key has its body read (proxyPlan's refusals discard theirs within PROXY_REFUSAL_LINGER_SECONDS).
 */
export const PROXY_BODY_TIMEOUT_SECONDS = 30;
/**
 * `limit_conn` per client address (`limit_conn_zone $binary_remote_addr`, 10 MB: "about 16 thousand 64-byte states"
 * per megabyte): requests in progress at once. Above any one client's useful concurrency (vLLM runs max_num_seqs, 256 by
 * default, at once and queues the rest), so a benchmark from one machine is not refused; a client above it gets 429.
 */
export const PROXY_CONNECTIONS_PER_CLIENT = 1024;
/** The limit_conn zone's name. */
const LIMIT_ZONE = "spark_vllm_clients";
/** `server_name`: what $host is for a request without Host, forwarded as Host (any name a replica's nginx accepts). */
export const PROXY_SERVER_NAME = "localhost";

/**
 * The refusals answered from a named location (nginx's `error_page`): status, location, JSON body, extra headers.
 * 400 is not one of them: nginx answers its own 400s too (a request line it cannot parse, `%00` in the path), some
 * before it has a URI, and ngx_http_named_location (src/http/ngx_http_core_module.c) refuses to go to a named location
 * without one ("empty URI in redirect to named location", a 500). So every 400 is nginx's own page.
 */
const REFUSALS: Array<{ status: number; location: string; body: string; headers: string[] }> = [
    // RFC 6750 section 3: a 401 for a bearer token carries `WWW-Authenticate: Bearer`.
    { status: 401, location: "@unauthorized", body: '{"error": "Unauthorized"}', headers: ["WWW-Authenticate Bearer"] },
    { status: 404, location: "@not_found", body: '{"error": "Not Found"}', headers: [] },
    // RFC 6585 section 4: too many requests; limit_conn's refusal (PROXY_CONNECTIONS_PER_CLIENT). OpenAI's clients retry
    // a 429 after a pause, where a 503 would also make the front pass the request to the next replica.
    { status: 429, location: "@too_many_requests", body: '{"error": "Too Many Requests"}', headers: [] },
    // RFC 9110 section 15.5.6: a 405 lists the methods the target supports. Only /health answers 405 (nginx's own 405,
    // to TRACE and CONNECT before a location is chosen, keeps nginx's page: this `error_page` is /health's only).
    { status: 405, location: "@method_not_allowed", body: '{"error": "Method Not Allowed"}', headers: ['Allow "GET, HEAD"'] },
];
const refusal = (status: number) => REFUSALS.find(r => r.status === status)!;

/** One path segment: what a plain request target is made of (no ".", "%", ";" or empty segment). */
const SEGMENT = "[A-Za-z0-9_-]+";

/** The regular expression of a nginx `location ~` that matches exactly FORWARDED_PATHS. */
export function forwardedPathsRegex(): string {
    return `^(${FORWARDED_PATHS.map(p => p.replaceAll("*", SEGMENT)).join("|")})$`;
}

/**
 * The regular expression a request line ($request) must match: origin-form (RFC 9112 section 3.2.1, not the absolute
 * form `GET http://host/…`), a path of plain segments (no dot segment, no percent-encoding, no empty segment) and an
 * optional query, HTTP/1.0 or 1.1. On such a target nginx's normalised $uri is byte for byte the path it forwards.
 */
export const PLAIN_REQUEST_LINE = `^[A-Z]+ (/${SEGMENT})+(\\?[^ ]*)? HTTP/1\\.[01]$`;

/**
 * nginx.conf for the proxy. Every directive is from nginx's documentation (nginx.org/en/docs/):
 * - ngx_http_map_module `map` + `include`: $spark_vllm_authorized is 1 only when the Authorization header matches
 *   the regular expression in api-key.map (written from stdin, never in a command line). A string source in a map
 *   would compare case-insensitively (src/http/ngx_http_variables.c ngx_http_map_find lower-cases the value), so
 *   the key is matched by a case-sensitive `~` regex, as vLLM compares it: scheme "bearer" in any case, one space,
 *   then exactly the key (server_utils.py verify_token: `scheme, _, param = value.partition(" ")`).
 * - The path decided is the path forwarded. nginx chooses a `location` on $uri, the request URI after "decoding the
 *   text encoded in the “%XX” form, resolving references to relative path components “.” and “..”, and possible
 *   compression of two or more adjacent slashes" (ngx_http_core_module `location`), while `proxy_pass` without a URI
 *   passes "the request URI … in the same form as sent by a client when the original request is processed"
 *   (ngx_http_proxy_module `proxy_pass`), and vLLM mounts /metrics by prefix: `/metrics/../health` was chosen as
 *   /health and answered as /metrics. So a map on $request ("full original request line", ngx_http_core_module
 *   Embedded Variables) sets $spark_vllm_plain only for PLAIN_REQUEST_LINE, and a server-level `if … return 400`
 *   (ngx_http_rewrite_module: server-level rewrite directives run before a location is chosen) refuses the rest,
 *   the absolute form included. `merge_slashes off` (ngx_http_core_module) keeps "//" from being merged should it
 *   ever get that far.
 * - Nothing reads a body before the key is checked: `return` (ngx_http_rewrite_module) runs in the rewrite phase, and
 *   the proxy module reads the body only in the content phase (`proxy_request_buffering`: "the entire request body is
 *   read from the client before sending the request"), so a keyless request is answered 401 and its body discarded,
 *   never written to client_body_temp_path. `client_max_body_size` (ngx_http_core_module, default 1m) is 64m only
 *   where the key was checked; /health refuses any method but GET and HEAD (405) and any body (400) the same way.
 *   Inside a location, `return` is one of the two things that are safe in an `if` (nginx's "If is evil" note).
 * - A refused request gets no `100 Continue`, and its connection is closed after a bounded read of its body. From
 *   nginx's source (the same in 1.22.1, Debian's, and 1.31.4):
 *   - `return CODE 'text'` answers through ngx_http_send_response (src/http/ngx_http_core_module.c; called by
 *     ngx_http_script_return_code, src/http/ngx_http_script.c), which first calls ngx_http_discard_request_body,
 *     which calls ngx_http_test_expect (both src/http/ngx_http_request_body.c): that writes "HTTP/1.1 100 Continue" unless
 *     r->expect_tested is set, so a client that sent `Expect: 100-continue` was invited to send its body, then got
 *     the 401. `return CODE` without text (CODE >= 400) only ends the phase with CODE, and ngx_http_finalize_request
 *     hands it to ngx_http_special_response_handler (src/http/ngx_http_special_response.c), which looks up
 *     `error_page` first; ngx_http_send_error_page sets r->expect_tested for a page without `=` (overwrite -1,
 *     ngx_http_core_error_page) before it goes to a named location. So every refusal here is `return CODE;` without
 *     text. 401 and 404 go by `error_page CODE @name;` at server level (inherited by every location and `if`), 405
 *     by /health's own, to a named location (REFUSALS) that answers with text: its ngx_http_send_response discards
 *     the body with expect_tested already set, so no 100 Continue. (Never `error_page CODE =200 @name` or
 *     `= @name`: overwrite 200 or 0 leaves expect_tested unset.) A 400 has no `error_page` (REFUSALS says why):
 *     ngx_http_special_response_handler sets r->expect_tested itself before it discards, and sends nginx's page.
 *   - A discarded body is read until it ends or until `lingering_time` after the answer: ngx_http_discard_request_body
 *     reads what has already arrived and sets r->discard_body; ngx_http_finalize_connection (src/http/ngx_http_request.c)
 *     then keeps ngx_http_discarded_request_body_handler reading with a deadline of `lingering_time` (whole
 *     seconds) and a timer of `lingering_timeout`, and past either closes the connection (ngx_http_finalize_request
 *     NGX_ERROR). nginx has no limit in bytes for this (ngx_http_read_discarded_request_body reads 4 KiB at a time
 *     until EAGAIN; ngx_http_discard_request_body_filter checks no client_max_body_size), and `lingering_close off`
 *     does not shorten it (only ngx_http_set_lingering_close, for a body already read, looks at it). The defaults
 *     (30 s, 5 s) let a keyless client stream 30 s of body per request; here `lingering_time`
 *     PROXY_REFUSAL_LINGER_SECONDS and `lingering_timeout` PROXY_REFUSAL_LINGER_TIMEOUT_SECONDS, server-wide: every
 *     body nginx discards in this server is one it refused (a forwarded body is read whole before vLLM answers),
 *     the 413 of client_max_body_size included (ngx_http_core_find_config_phase discards it too). The lingering
 *     still lets a client read its 401 before a reset. The bound is in time: in bytes it is what the client's link
 *     carries in that time.
 *   - `keepalive_timeout 0` (ngx_http_core_module) in each named location: ngx_http_update_location_config clears
 *     r->keepalive, so the answer says `Connection: close` (ngx_http_header_filter) and no further request is read
 *     on that connection. A 400 and a 413 close it too (ngx_http_special_response_handler clears r->keepalive for
 *     them). Keyed and /health connections keep nginx's keep-alive.
 * - ngx_http_proxy_module `proxy_buffering off` (each streamed SSE chunk reaches the client as vLLM writes it),
 *   `proxy_read_timeout`/`proxy_send_timeout` (defaults 60 s, shorter than a long generation), `proxy_http_version 1.1`.
 * - ngx_http_core_module `server_tokens off`; ngx_http_headers_module `add_header … always` (so a 401 carries
 *   `WWW-Authenticate: Bearer`, RFC 6750 section 3).
 * - ngx_http_ssl_module `listen … ssl`, `ssl_certificate`, `ssl_certificate_key`, `ssl_protocols`.
 * - core `user nobody nogroup` (both exist in Debian's base-passwd, which the official image and the sim's share),
 *   `daemon off` (the container's main process), `pid` in /tmp.
 */
export function nginxConf(spec: ClusterSpec, shape: ProxyShape = {}): string {
    const upstream = shape.replicas ? `http://${REPLICAS_UPSTREAM}` : `http://127.0.0.1:${spec.vllm.internalPort}`;
    const tls = spec.endpoint.tls !== "none";
    const listen = shape.listen ?? [`${spec.vllm.port}${tls ? " ssl" : ""}`];
    const unauthorized = [
        `        if ($spark_vllm_authorized = 0) {`,
        `            return 401;`,
        `        }`,
    ];
    return [
        // Byte for byte as before this file moved to components/plan/: a new text would rewrite nginx.conf and restart
        // the proxy on every running cluster (proxy-conf's create is its text).
        "# spark-vllm endpoint proxy: generated by spark-vllm (components/proxyPlan.ts); rewritten on every change.",
        "daemon off;",
        "user nobody nogroup;",
        "worker_processes 2;",
        // Per-client limits (PROXY_WORKER_CONNECTIONS and the constants beside it say why each is what it is).
        `worker_rlimit_nofile ${PROXY_WORKER_NOFILE};`,
        "pid /tmp/nginx.pid;",
        "error_log stderr warn;",
        `events { worker_connections ${PROXY_WORKER_CONNECTIONS}; }`,
        "http {",
        "    server_tokens off;",
        "    access_log /dev/stdout;",
        "    default_type application/json;",
        "    merge_slashes off;",
        `    client_header_timeout ${PROXY_HEADER_TIMEOUT_SECONDS}s;`,
        `    client_body_timeout ${PROXY_BODY_TIMEOUT_SECONDS}s;`,
        // The client's address as the limit's key; an address in `unlimited` (the front, at another replica's proxy)
        // maps to "", which limit_conn does not count ("Requests with an empty key value are not accounted").
        "    map $remote_addr $spark_vllm_client {",
        "        default $binary_remote_addr;",
        ...(shape.unlimited ?? []).map(a => `        "${a}" "";`),
        "    }",
        `    limit_conn_zone $spark_vllm_client zone=${LIMIT_ZONE}:10m;`,
        `    limit_conn ${LIMIT_ZONE} ${PROXY_CONNECTIONS_PER_CLIENT};`,
        `    limit_conn_status ${refusal(429).status};`,
        "    limit_conn_log_level warn;",
        "    map $http_authorization $spark_vllm_authorized {",
        "        default 0;",
        `        include ${PROXY_MOUNT}/api-key.map;`,
        "    }",
        "    map $request $spark_vllm_plain {",
        "        default 0;",
        `        "~${PLAIN_REQUEST_LINE}" 1;`,
        "    }",
        ...(shape.replicas ? replicasUpstream() : []),
        "    server {",
        ...listen.map(l => `        listen ${l};`),
        ...(tls ? [
            `        ssl_certificate ${PROXY_MOUNT}/tls.crt;`,
            `        ssl_certificate_key ${PROXY_MOUNT}/tls.key;`,
            "        ssl_protocols TLSv1.2 TLSv1.3;",
        ] : []),
        // $host of a request without Host (HTTP/1.0 may send none) is "the server name matching a request" (ngx_http_core_module
        // Embedded Variables): without a server_name that is "", and `proxy_set_header Host $host` then sent `Host:` empty,
        // which another replica's nginx refused with 400 ("client sent invalid host header", ngx_http_validate_host).
        `        server_name ${PROXY_SERVER_NAME};`,
        "        proxy_http_version 1.1;",
        "        proxy_buffering off;",
        ...(shape.replicas ? [
            // No keep-alive to clients on the front (ngx_http_core_module `keepalive_timeout`: "The zero value disables
            // keep-alive client connections"): a rolling update reloads it (components/plan/rollout.ts), and each old
            // worker then closes its idle keep-alive connections at once (src/os/unix/ngx_process_cycle.c
            // ngx_worker_process_cycle: ngx_close_idle_connections), so a client that sent its next request on one just
            // then got the connection closed without an answer ("socket hang up": 2, 4 and 5 of about 720 requests over 30
            // reloads in tests/unit/plan/rollout-nginx.test.ts's setting; none with this). A new connection per request
            // costs a handshake; a generation takes far longer.
            "        keepalive_timeout 0;",
            // ngx_http_proxy_module `proxy_next_upstream` (nginx.org/en/docs/http/ngx_http_proxy_module.html): a replica
            // that refuses the connection (vLLM stopped or still loading), times out, or answers 502/503 (its own proxy
            // without a vLLM behind it) passes the request to the next replica. `non_idempotent`: without it nginx does not
            // pass a POST on once it was sent to a server (tests/unit/plan/proxy-replicas-nginx.test.ts fails without it),
            // and every completion is a POST; a generation has no side effect, so a second try is safe.
            "        proxy_next_upstream error timeout http_502 http_503 non_idempotent;",
        ] : []),
        `        proxy_read_timeout ${PROXY_READ_TIMEOUT_SECONDS}s;`,
        `        proxy_send_timeout ${PROXY_READ_TIMEOUT_SECONDS}s;`,
        "        proxy_set_header Host $host;",
        "        proxy_set_header X-Forwarded-For $remote_addr;",
        "        proxy_set_header X-Forwarded-Proto $scheme;",
        // Refusals: no 100 Continue, a bounded read of the body, then the connection closed (see above).
        `        lingering_time ${PROXY_REFUSAL_LINGER_SECONDS}s;`,
        `        lingering_timeout ${PROXY_REFUSAL_LINGER_TIMEOUT_SECONDS}s;`,
        `        error_page 401 ${refusal(401).location};`,
        `        error_page 404 ${refusal(404).location};`,
        `        error_page 429 ${refusal(429).location};`,
        "        if ($spark_vllm_plain = 0) {",
        "            return 400;",
        "        }",
        "        location = /health {",
        // /health's own error_pages: it answers no 401 or 404, so it needs none of the server's; and as an error_page here
        // means the server's are not inherited (ngx_http_core_module `error_page`: "if and only if there are no error_page
        // directives defined on the current level"), limit_conn's 429 is named again.
        `            error_page 405 ${refusal(405).location};`,
        `            error_page 429 ${refusal(429).location};`,
        `            if ($request_method !~ "^(GET|HEAD)$") {`,
        "                return 405;",
        "            }",
        "            if ($http_transfer_encoding) {",
        "                return 400;",
        "            }",
        `            if ($http_content_length !~ "^0?$") {`,
        "                return 400;",
        "            }",
        `            proxy_pass ${upstream};`,
        "        }",
        `        location ~ "${forwardedPathsRegex()}" {`,
        `            client_max_body_size ${PROXY_MAX_BODY};`,
        ...unauthorized.map(l => `    ${l}`),
        `            proxy_pass ${upstream};`,
        "        }",
        "        location / {",
        ...unauthorized.map(l => `    ${l}`),
        "            return 404;",
        "        }",
        ...REFUSALS.flatMap(r => [
            `        location ${r.location} {`,
            "            keepalive_timeout 0;",
            ...r.headers.map(h => `            add_header ${h} always;`),
            `            return ${r.status} '${r.body}';`,
            "        }",
        ]),
        "    }",
        "}",
        "",
    ].join("\n");
}

/**
 * Where the proxy listens and what it forwards to, when it is not the one proxy of one replica (which listens on
 * vllm.port on every address and forwards to vLLM on the head's loopback).
 */
export interface ProxyShape {
    /** nginx `listen` values; default vllm.port (with ssl under endpoint.tls) on every address. */
    listen?: string[];
    /**
     * The front proxy of several replicas: the servers it balances over, `host:port` each: the first replica's vLLM on
     * loopback, then each other replica's proxy on its head's fabric address (components/plan/replicas.ts).
     */
    replicas?: string[];
    /**
     * Addresses whose connections limit_conn does not count: at another replica's proxy, the front's host, which brings it
     * every client's requests from its one address.
     */
    unlimited?: string[];
}

/**
 * The front's upstream servers (`host:port`), replica 1 first: the first replica's vLLM on the front's loopback, then each
 * other replica's proxy on its head's fabric address (components/plan/plan.ts lists them so; `spark-vllm status` checks
 * REPLICAS_FILE against them).
 */
export function frontServers(spec: ClusterSpec, heads: ReadonlyArray<{ fabric: { address: string } }>): string[] {
    return heads.map((h, i) => (i === 0 ? `127.0.0.1:${spec.vllm.internalPort}` : `${h.fabric.address}:${spec.vllm.port}`));
}

/** The name of the front proxy's `upstream` block of the replicas. */
const REPLICAS_UPSTREAM = "spark_vllm_replicas";
/** The front proxy's file of replica servers, in the proxy directory: written by proxy-conf, and by a rolling update's drain. */
export const REPLICAS_FILE = "replicas.conf";

/**
 * The front proxy's upstream (ngx_http_upstream_module, nginx.org/en/docs/http/ngx_http_upstream_module.html):
 * `least_conn` sends a request to the server with the fewest active connections. Its servers are in REPLICAS_FILE
 * (ngx_core_module `include`, allowed in any context), so a rolling update marks one replica `down` and reloads nginx
 * without rewriting nginx.conf (components/plan/rollout.ts). The client's Authorization header goes on to the replica
 * unchanged (`proxy_pass_request_headers`, on by default), and each replica's own proxy checks the key again.
 */
function replicasUpstream(): string[] {
    return [
        `    upstream ${REPLICAS_UPSTREAM} {`,
        "        least_conn;",
        `        include ${PROXY_MOUNT}/${REPLICAS_FILE};`,
        "    }",
    ];
}

/**
 * REPLICAS_FILE's text: one `server` per replica, in order. `max_fails=1 fail_timeout=10s` takes a server that failed once
 * (an error, a timeout, or a 502/503 as proxy_next_upstream counts them) out for 10 s, after which nginx tries it again;
 * `down` "marks the server as permanently unavailable" (ngx_http_upstream_module `server`): the replica `drained` (1-based)
 * gets no new request while a rolling update relaunches it.
 */
export function replicasFile(servers: readonly string[], drained?: number): string {
    return servers.map((s, i) => `server ${s} max_fails=1 fail_timeout=10s${i + 1 === drained ? " down" : ""};\n`).join("");
}

/**
 * RFC 6750 section 2.1: a Bearer credential is a b64token, `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
 * A key outside it cannot be matched safely in nginx's configuration; the generated key is alphanumeric.
 */
const NOT_B64TOKEN = "''|*[!A-Za-z0-9._~+/=-]*";

/**
 * Writes nginx.conf and api-key.map into the private proxy directory on the head. The key is the command's stdin
 * (one line), checked and escaped by shell builtins (printf) and sed reading a pipe: it is never an argument of a
 * program, never in this text, and lands only in a 0600 file in a 0700 directory. A running proxy is restarted
 * (docker restart waits until nginx is up again), so a rotated key is in force before anything that follows; on an
 * update, only when a file changed.
 */
export function proxyConfig(spec: ClusterSpec, shape: ProxyShape = {}): { create: string; update: string; delete: string; timeoutSeconds: number } {
    const dir = proxyDir(spec);
    const file = (name: string) => shq(`${dir}/${name}`);
    const temp = (name: string) => `$(mktemp ${shq(`${dir}/.${name}.XXXXXX`)})`;
    const fail = (why: string) => `{ echo ${shq(`spark-vllm: ${why}`)} >&2; exit 1; }`;
    const container = proxyContainerName();
    // "$tmp" in place of NAME unless NAME already holds the same bytes; a replaced file sets changed.
    const place = (name: string) => `if cmp -s "$tmp" ${file(name)}; then rm -f "$tmp"; else mv -f "$tmp" ${file(name)} && changed=1 || { rm -f "$tmp"; exit 1; }; fi`;
    // create (a new key, certificate or image: this command is replaced with them) restarts a running proxy always; an
    // update (a new SSH key: pulumi-command v1.2.1 remote/commandController.go Update runs `update` when set) only when
    // a file changed, so the endpoint keeps answering.
    const write = (restart: "always" | "if-changed") => script([
            "umask 077",
            `mkdir -p ${shq(dir)} && chmod 700 ${shq(dir)} || exit 1`,
            `IFS= read -r key || [ -n "$key" ] || ${fail("no API key on stdin")}`,
            `case "$key" in ${NOT_B64TOKEN}) ${fail("the API key is empty or has characters outside RFC 6750's b64token (A-Z a-z 0-9 - . _ ~ + / =), so the proxy cannot match it; use such a key")};; esac`,
            // Regex-escape the two b64token characters that are special in PCRE (. and +) as one-character classes.
            `escaped=$(printf '%s\\n' "$key" | sed 's/[.+]/[&]/g') || exit 1`,
            // A file whose content is already there is left as it is. cmp is diffutils', Essential: yes in Debian and
            // Ubuntu (DGX OS), so on every host.
            restart === "always" ? "changed=1" : "changed=",
            `tmp=${temp("api-key.map")} || exit 1`,
            `printf ${shq('"~^[Bb][Ee][Aa][Rr][Ee][Rr] %s$" 1;\n')} "$escaped" > "$tmp" || { rm -f "$tmp"; exit 1; }`,
            place("api-key.map"),
            `tmp=${temp("nginx.conf")} || exit 1`,
            `printf '%s' ${shq(nginxConf(spec, shape))} > "$tmp" || { rm -f "$tmp"; exit 1; }`,
            place("nginx.conf"),
            // The front of several replicas: every replica in service (a drained one is taken back with the new file).
            ...(shape.replicas ? [
                `tmp=${temp(REPLICAS_FILE)} || exit 1`,
                `printf '%s' ${shq(replicasFile(shape.replicas))} > "$tmp" || { rm -f "$tmp"; exit 1; }`,
                place(REPLICAS_FILE),
            ] : []),
            `if [ -n "$changed" ]; then ${restartIfRunning(container)}; fi`,
            `echo ${shq(`proxy configuration written to ${spec.hosts[0].name}:${dir}`)}`,
        ]);
    return {
        create: write("always"),
        update: write("if-changed"),
        delete: `rm -f ${file("api-key.map")} ${file("nginx.conf")}${shape.replicas ? ` ${file(REPLICAS_FILE)}` : ""}`,
        timeoutSeconds: 90,
    };
}

/** subjectAltName of the generated certificate: the head's SSH address, the host name clients use in the endpoint. */
export function subjectAltName(host: string): string {
    return /^\d{1,3}(\.\d{1,3}){3}$/.test(host) ? `IP:${host}` : `DNS:${host}`;
}

/** Restarts the proxy when it runs (docker restart waits until nginx is up again); nothing when it does not yet. */
const restartIfRunning = (container: string) =>
    ifContainerRunning(container, withTimeout(60, argvLine(["docker", "restart", "-t", "10", container])) + " >/dev/null");

/** The proxy's certificate on the head: made there (tls "generated") or written from stdin (tls "given"). */
export function proxyTls(spec: ClusterSpec): { create: string; update?: string; delete: string; timeoutSeconds: number } {
    return spec.endpoint.tls === "given" ? givenTls(spec) : generatedTls(spec);
}

/**
 * tls "generated": a self-signed certificate made on the head by the proxy image's openssl (the official nginx
 * image installs ca-certificates, which depends on openssl), in a throw-away container without network, as the
 * SSH user, into the private proxy directory: the private key (0600) never leaves the head. Prints the certificate,
 * which becomes the `endpointCertificate` output so clients can pin it. Options from OpenSSL's openssl-req(1):
 * -x509 (self-signed), -newkey ec -pkeyopt ec_paramgen_curve:prime256v1, -nodes (key not encrypted), -days,
 * -subj, -addext subjectAltName=… (OpenSSL 1.1.1 or newer).
 */
function generatedTls(spec: ClusterSpec): { create: string; update: string; delete: string; timeoutSeconds: number } {
    const dir = proxyDir(spec);
    const host = spec.hosts[0].ssh.host;
    const openssl = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "3650",
        "-subj", `/CN=${host}`, "-addext", `subjectAltName=${subjectAltName(host)}`, "-keyout", "/out/tls.key", "-out", "/out/tls.crt"];
    const run = ["docker", "run", "--rm", "--network", "none", "--entrypoint", "openssl", "--mount", `type=bind,source=${dir},target=/out`];
    const [key, crt] = [shq(`${dir}/tls.key`), shq(`${dir}/tls.crt`)];
    const make = [
        "umask 077",
        `mkdir -p ${shq(dir)} && chmod 700 ${shq(dir)} || exit 1`,
        `rm -f ${key} ${crt}`,
        `${withTimeout(120, `${argvLine(run.slice(0, 2))} --user "$(id -u):$(id -g)" ${argvLine([...run.slice(2), spec.endpoint.image, ...openssl])}`)} 2>&1 || exit 1`,
        `chmod 600 ${key} && chmod 644 ${crt} || exit 1`,
    ];
    const container = proxyContainerName();
    return {
        create: script([...make, `cat ${crt}`]),
        // An update (a new SSH key: pulumi-command v1.2.1 remote/commandController.go Update runs `update` when set) keeps
        // the certificate clients pinned; only one that is gone is made again, and then a running proxy serves it.
        update: script([
            `if [ -s ${key} ] && [ -s ${crt} ]; then cat ${crt}; exit 0; fi`,
            ...make,
            restartIfRunning(container),
            `cat ${crt}`,
        ]),
        delete: `rm -f ${key} ${crt}`,
        timeoutSeconds: 150,
    };
}

/**
 * tls "given": the chain and key arrive on stdin as two base64 lines (components/spec/givenTls.ts givenTlsStdin), read by
 * the shell's `read` builtin (it reads a pipe a byte at a time, so the second line is still there for the second
 * read) and decoded by coreutils' `base64 -d` from a pipe: neither text is an argument, in the environment or in this
 * command. Each file is written 0600 under a mktemp name in the 0700 proxy directory (nothing can be planted there)
 * and renamed into place. The configuration command follows this one (resources.ts) and restarts a running proxy,
 * so a rotated certificate is served before anything that follows.
 */
function givenTls(spec: ClusterSpec): { create: string; delete: string; timeoutSeconds: number } {
    const dir = proxyDir(spec);
    const fail = (why: string) => `{ echo ${shq(`spark-vllm: ${why}`)} >&2; exit 1; }`;
    const write = (variable: string, name: string) => [
        `tmp=$(mktemp ${shq(`${dir}/.${name}.XXXXXX`)}) || exit 1`,
        `printf '%s\\n' "$${variable}" | base64 -d > "$tmp" && chmod 600 "$tmp" && mv -f "$tmp" ${shq(`${dir}/${name}`)} || { rm -f "$tmp"; exit 1; }`,
    ];
    return {
        create: script([
            "umask 077",
            `mkdir -p ${shq(dir)} && chmod 700 ${shq(dir)} || exit 1`,
            `IFS= read -r crt && IFS= read -r key || ${fail("the given certificate and key did not arrive on stdin")}`,
            `case "$crt$key" in ''|*[!A-Za-z0-9+/=]*) ${fail("the given certificate and key on stdin are not two lines of base64")};; esac`,
            ...write("crt", "tls.crt"),
            ...write("key", "tls.key"),
            `echo ${shq(`given certificate written to ${spec.hosts[0].name}:${dir}`)}`,
        ]),
        delete: `rm -f ${shq(`${dir}/tls.key`)} ${shq(`${dir}/tls.crt`)}`,
        timeoutSeconds: 30,
    };
}

/** The proxy's container as plain data (docker.Container inputs but the image, which is the pull's repo digest). */
export function proxyContainer(spec: ClusterSpec) {
    return {
        name: proxyContainerName(),
        // nginx itself, not the image's docker-entrypoint.sh (which rewrites configuration from templates and env).
        entrypoints: ["nginx"],
        command: ["-c", `${PROXY_MOUNT}/nginx.conf`],
        // Like the vLLM container: the proxy reaches vLLM on the head's loopback and publishes vllm.port itself.
        networkMode: "host",
        mounts: [{ type: "bind", source: proxyDir(spec), target: PROXY_MOUNT, readOnly: true }],
        labels: [{ label: "spark-vllm.role", value: "proxy" }],
        // nginx comes back with the head's dockerd after a reboot (components/plan/launches.ts cites Docker's policy).
        restart: "unless-stopped",
        mustRun: true,
        destroyGraceSeconds: 10,
    };
}
