/*
 * libacp-uv - MCP over HTTP on a libuv loop: the Streamable HTTP transport
 * (MCP 2025-03-26 .. 2025-11-25) and the legacy HTTP+SSE transport
 * (2024-11-05), server and client.
 *
 * Names only libacp types and the libuv types acp/uv.h already exposes
 * (uv_loop_t); libmicrohttpd and libcurl stay private.
 *
 * SERVER (acp_http_server). Serves one acp_mcp_server registry: every HTTP
 * session is one acp_mcp_conn on it.
 *   - Streamable HTTP at one endpoint (default "/mcp"): POST (one JSON-RPC
 *     message, or a batch once 2025-03-26 was negotiated), GET (the
 *     standalone SSE stream, or resumption with Last-Event-ID), DELETE (ends
 *     the session).
 *   - A POST with requests is answered `application/json` when every
 *     response is ready at once and nothing else was emitted for it;
 *     otherwise `text/event-stream`: a priming event (id, retry, empty data)
 *     first when the session negotiated 2025-11-25 or later (earlier
 *     clients would parse its empty data as a message; GET streams follow
 *     the same rule), then the messages emitted for those requests
 *     (progress, log messages, server->client requests), then the
 *     responses, then the end of the stream. Messages not related to a
 *     request go to the GET stream (queued while none is connected).
 *   - Event ids are "<stream>-<seq>", unique in the session; a GET with
 *     Last-Event-ID replays that stream's later events only, then continues
 *     it live.
 *   - MCP-Session-Id: 32 hex digits (128 bits from getrandom(2), or
 *     /dev/urandom), after "PREFIX-" when a worker name is set
 *     (acp_http_server_options_set_session_prefix()), assigned in the
 *     initialize answer. Status codes: 400
 *     missing session id (non-initialize), unsupported MCP-Protocol-Version,
 *     malformed JSON (-32700 body) or invalid message (-32600 body); 403 bad
 *     Origin or Host; 404 unknown or ended session, or another path; 405
 *     other methods; 406 Accept lists neither type; 409 a second standalone
 *     GET stream; 413 body over the cap; 415 non-JSON Content-Type; 503 too
 *     many sessions or streams.
 *   - Security: binds 127.0.0.1 unless told otherwise; `Origin`, when
 *     present, must be a loopback origin (http(s)://localhost,
 *     127.0.0.1 or [::1], any port) or listed with
 *     acp_http_server_options_add_origin(); `Host` must name a loopback
 *     host or one added with acp_http_server_options_add_host() (DNS
 *     rebinding protection). Header values (session ids, tokens) are never
 *     logged.
 *   - Legacy HTTP+SSE (on by default): `GET /sse` opens a session whose
 *     first event is `endpoint` with `/message?sessionId=<id>`; `POST
 *     /message?sessionId=<id>` answers 202 and every message of the
 *     session goes on the SSE stream. The session ends with the stream.
 *   - Relay mode (acp_http_server_new_relay()): no registry; each
 *     session's JSON-RPC messages are handed to callbacks one by one and
 *     the answers come back through acp_http_relay_deliver(), routed to
 *     streams as above. A POST with one request (no batch) that
 *     accepts `application/json` waits, unanswered, for upstream: a sole
 *     response becomes a JSON body; anything routed to it first (a
 *     progress notification) turns it into `text/event-stream`. Other
 *     POSTs with requests are answered as streams at once. While waiting,
 *     a client that goes away is noticed only when the session ends.
 *     Requests must repeat the Authorization value
 *     the session was opened with (401 otherwise). No legacy endpoints.
 *
 * CLIENT (acp_http_client). Carries one acp_mcp_client over Streamable
 * HTTP or legacy HTTP+SSE with libcurl's multi interface driven by the
 * loop. Each outgoing message is one POST; JSON or SSE answers are fed to
 * the client; MCP-Session-Id and MCP-Protocol-Version are kept and sent;
 * the session is DELETEd on close. In ACP_HTTP_AUTO mode the first POST
 * (initialize) probes: 400, 404 or 405 switch to legacy (GET the URL,
 * wait for `endpoint`, POST there). In raw mode (acp_http_client_new_raw())
 * the transport carries the caller's JSON-RPC messages as they are
 * instead (a relay between stdio and HTTP). Extra headers (Authorization)
 * go with every request (acp_http_client_add_header()).
 *
 * Lifetime (as acp/uv.h): objects are created with `T **out` and released
 * only with their `_close`, which finishes asynchronously on the loop;
 * run the loop until it returns before uv_loop_close(). Every object
 * belongs to the loop's thread.
 *
 * Errors: 0 or a negative ACP_ERR_* code.
 */
#ifndef ACP_HTTP_H
#define ACP_HTTP_H

/* uv.h first: it sets the POSIX feature macro libuv needs, which must
 * come before any system header. */
#include "uv.h"

#include "common.h"
#include "mcp.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Default cap of a POST body: 4 MiB. */
#define ACP_HTTP_DEFAULT_MAX_BODY ((size_t)4 << 20)
/** Default cap of concurrent SSE streams (all sessions): 256. */
#define ACP_HTTP_DEFAULT_MAX_STREAMS 256
/** Default cap of live sessions: 1024. */
#define ACP_HTTP_DEFAULT_MAX_SESSIONS 1024
/** Longest prefix of acp_http_server_options_set_session_prefix(). */
#define ACP_HTTP_MAX_SESSION_PREFIX 32
/** Default `retry` sent in priming events, in milliseconds. */
#define ACP_HTTP_DEFAULT_RETRY_MS 1000
/** Default interval of SSE keep-alive comments on open 2026-07-28 streams,
 * in milliseconds. */
#define ACP_HTTP_DEFAULT_KEEPALIVE_MS 15000
/** acp_http_server_options_set_drain_timeout()'s default, in ms. */
#define ACP_HTTP_DEFAULT_DRAIN_MS 5000

/* MARK: - Server */

/** An MCP HTTP server. Opaque. */
typedef struct acp_http_server acp_http_server;
/** Server options. Opaque; setters copy. */
typedef struct acp_http_server_options acp_http_server_options;

/** @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM. */
ACP_EXTERN int acp_http_server_options_new(acp_http_server_options **out,
                                           const acp_mem *mem);
/** Accepts NULL. */
ACP_EXTERN void acp_http_server_options_free(acp_http_server_options *o);
/**
 * Listening address (numeric IPv4 or IPv6) and port (0: any free port;
 * see acp_http_server_port()). Default "127.0.0.1", 0.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL or not numeric), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_server_options_set_address(acp_http_server_options *o,
                                                   const char *addr,
                                                   uint16_t port);
/** The MCP endpoint path (default "/mcp"; must start with '/').
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM. */
ACP_EXTERN int acp_http_server_options_set_path(acp_http_server_options *o,
                                                const char *path);
/** Allow one more Origin (exact "scheme://host[:port]").
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM. */
ACP_EXTERN int acp_http_server_options_add_origin(acp_http_server_options *o,
                                                  const char *origin);
/** Allow one more Host name (compared without its port, case-insensitive).
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM. */
ACP_EXTERN int acp_http_server_options_add_host(acp_http_server_options *o,
                                                const char *host);
/** Caps (0 selects the default). At the cap of sessions a new one ends
 * the session idle for longest (no stream connected, nothing unanswered;
 * its client gets 404 and may initialize again); only when every session
 * is busy is it refused with 503. */
ACP_EXTERN void acp_http_server_options_set_max_body(acp_http_server_options *o,
                                                     size_t bytes);
ACP_EXTERN void
acp_http_server_options_set_max_streams(acp_http_server_options *o, size_t n);
ACP_EXTERN void
acp_http_server_options_set_max_sessions(acp_http_server_options *o, size_t n);
/** `retry` of priming events (0 selects the default). */
ACP_EXTERN void acp_http_server_options_set_retry(acp_http_server_options *o,
                                                  uint32_t ms);
/**
 * Every `ms` milliseconds, write the SSE comment ": keep-alive" on each
 * open 2026-07-28 response stream (a subscriptions/listen, a call still
 * running) and on each connected standalone GET stream of a session (the
 * 2025 Streamable HTTP GET, the legacy /sse stream), so that proxies and
 * clients with idle timeouts keep quiet streams open. The comment has no
 * event id: a resumption with Last-Event-ID is unchanged. The POST streams
 * of a 2025 session get none. 0 turns them off; the default is
 * ACP_HTTP_DEFAULT_KEEPALIVE_MS.
 */
ACP_EXTERN void
acp_http_server_options_set_keepalive(acp_http_server_options *o, uint32_t ms);
/**
 * How long acp_http_server_close() waits at most for open 2026-07-28
 * requests (listens being ended, calls in progress) before it stops anyway
 * (default ACP_HTTP_DEFAULT_DRAIN_MS; 0: no drain, stop at once). A second
 * acp_http_server_close() during the drain stops at once whatever this is.
 */
ACP_EXTERN void
acp_http_server_options_set_drain_timeout(acp_http_server_options *o,
                                          uint32_t ms);
/** Serve the legacy HTTP+SSE endpoints /sse and /message (default on). */
ACP_EXTERN void acp_http_server_options_set_legacy(acp_http_server_options *o,
                                                   int on);
/**
 * Serve on an already-listening TCP socket (IPv4 or IPv6, bound and
 * listen()ed by the caller) instead of binding the address of
 * acp_http_server_options_set_address(): a parent binds 127.0.0.1:0
 * itself, learns the port, and passes the descriptor on. The options only
 * record the number; the server created from them owns the descriptor
 * from the call of acp_http_server_new() or acp_http_server_new_relay()
 * on, success or failure, makes it non-blocking and closes it (on
 * failure, or in acp_http_server_close()). Give options carrying a
 * descriptor to one constructor only. acp_http_server_port() reports the
 * socket's port.
 * @param fd  the socket, or -1 (the default): bind the address.
 */
ACP_EXTERN void
acp_http_server_options_set_listen_fd(acp_http_server_options *o, int fd);
/**
 * Name this server (one worker of several behind a proxy) in the session
 * ids it assigns: "PREFIX-" then the usual 32 hex digits (still 128 random
 * bits), e.g. "w1-3f0c...". A proxy routes a request carrying
 * MCP-Session-Id (or a legacy `sessionId`) to the worker the prefix names
 * (examples/deploy/). JSON and SSE answers to POST and GET on the
 * endpoint then also carry the header `X-Acp-Worker: PREFIX`, so a client
 * or a test sees which worker answered; error answers do not.
 * @param prefix  1 to ACP_HTTP_MAX_SESSION_PREFIX characters of
 *                [A-Za-z0-9_] (no '-': the id splits at its first '-');
 *                NULL or "" (the default): bare 32 hex digits. Copied.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL options, too long, another
 *         character; the previous prefix stays), ACP_ERR_NOMEM.
 */
ACP_EXTERN int
acp_http_server_options_set_session_prefix(acp_http_server_options *o,
                                           const char *prefix);

/**
 * Start serving `registry` on `loop`. The registry is borrowed and must
 * outlive the server.
 * @param opts  NULL for the defaults; copied.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (also: the listen descriptor of
 *         acp_http_server_options_set_listen_fd() is not a listening TCP
 *         socket), ACP_ERR_SYSTEM (cannot listen: the address is in use or
 *         not local), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_server_new(acp_http_server **out, uv_loop_t *loop,
                                   acp_mcp_server *registry,
                                   const acp_http_server_options *opts,
                                   const acp_mem *mem);
/** The port listened on. */
ACP_EXTERN uint16_t acp_http_server_port(const acp_http_server *srv);
/** Number of live sessions (Streamable and legacy). */
ACP_EXTERN size_t acp_http_server_session_count(const acp_http_server *srv);

/** Called once the server is closed, just before it is freed. */
typedef void (*acp_http_server_close_cb)(acp_http_server *srv, void *user_data);
/**
 * Stop listening, end every session (their conns are freed; open streams
 * are ended; a relay server calls `closed` for each live session), close
 * the handles (a listen descriptor given with
 * acp_http_server_options_set_listen_fd() is closed), run `cb` (may be
 * NULL), free. Accepts NULL.
 *
 * When 2026-07-28 requests are open (a subscriptions/listen, a call not
 * answered yet) the server first drains, on the loop: it stops accepting
 * connections, ends every open listen with its result (resultType
 * "complete", acp_mcp_conn_close_listens()) and waits until those
 * responses are written and the calls answered, at most the drain timeout
 * (acp_http_server_options_set_drain_timeout(), 5 s by default); then it
 * stops as above. A second call while draining stops at once. Run the
 * loop until `cb` either way.
 */
ACP_EXTERN void acp_http_server_close(acp_http_server *srv,
                                      acp_http_server_close_cb cb,
                                      void *user_data);

/**
 * From a tool handler of a conn served over Streamable HTTP: close the
 * HTTP connection of the SSE stream that carries `call`'s request without
 * ending the stream (SSE polling, SEP-1699). The HTTP response ends right
 * after the messages the conn emitted before this call (the priming event
 * at least); everything emitted after it, the answer included, is held in
 * the stream and reaches the client when it reconnects with Last-Event-ID
 * after the `retry` delay. The stream is switched to SSE if the answer
 * was going to be JSON.
 * `call`'s conn must have been created by an acp_http_server (its
 * user_data is the server's), or have NULL user_data.
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_UNSUPPORTED (not an HTTP
 *         conn, a legacy one, or a 2026-07-28 request's, which has no
 *         resumability), ACP_ERR_INVALID_STATE (not called from
 *         the handler while its request is being dispatched),
 *         ACP_ERR_LIMIT or ACP_ERR_NOMEM (the conn's output is full).
 */
ACP_EXTERN int acp_http_call_close_stream(acp_mcp_call *call);

/* MARK: - Server: authorization (resource server) */

/**
 * The authorization of a registry server as an OAuth 2.1 resource server
 * (MCP authorization; RFC 9728, RFC 6750, RFC 8707). Opaque. Configure
 * it, then hand it to acp_http_server_options_set_auth(). With it:
 *   - `GET /.well-known/oauth-protected-resource` and the same with the
 *     MCP path appended (e.g. `/.well-known/oauth-protected-resource/mcp`)
 *     answer the protected resource metadata: `resource`,
 *     `authorization_servers` (the issuer), `scopes_supported` (the
 *     scopes of acp_http_auth_add_scope() and of every tool),
 *     `bearer_methods_supported` ["header"]. No token needed.
 *   - Every request to the MCP endpoint (POST, GET, DELETE; 2025 sessions
 *     and 2026-07-28 requests alike) needs `Authorization: Bearer TOKEN`.
 *     None: 401 with `WWW-Authenticate: Bearer resource_metadata="URL"`
 *     (and `scope="..."` when scopes are required). A token that is not
 *     valid: 401 with `error="invalid_token"` and a short
 *     `error_description`. A valid token without every scope of
 *     acp_http_auth_add_scope(): 403 `error="insufficient_scope"`.
 *   - A JWT access token is valid when its compact JWS is signed RS256
 *     or ES256 (nothing else: `none` and HS* are refused, and the key's
 *     type must fit `alg`) by a key of the issuer's JWK Set, `iss` equals
 *     the issuer, `aud` (string or array) contains the audience, `exp`
 *     has not passed and `nbf` has (60 s leeway by default), `typ`, when
 *     present, is JWT or at+jwt, and the token is at most 8 KiB. Scopes
 *     come from `scope` (space-separated) or `scp`.
 *   - The JWK Set is found through the issuer's authorization server
 *     metadata (RFC 8414, then OpenID discovery) `jwks_uri` (or set with
 *     acp_http_auth_set_jwks_uri() / acp_http_auth_set_jwks()), fetched
 *     with libcurl on first use (no redirects, TLS verified, 256 KiB at
 *     most, 10 s timeout), kept, and fetched again once when a token names
 *     a `kid` the set lacks (at most once per 30 s).
 *   - With acp_http_auth_set_introspection(), tokens are instead checked
 *     by the issuer's introspection endpoint (RFC 7662; the server
 *     authenticates with client_secret_basic): `active` must be true, and
 *     `iss`, `aud`, `exp`, `nbf` are checked when present.
 *   - A `tools/call` of a tool with required scopes
 *     (acp_http_auth_add_tool_scope()) by a token lacking one of them is
 *     answered 403 `WWW-Authenticate: Bearer error="insufficient_scope",
 *     scope="..."` (every scope the call needs) and the tool does not run
 *     (in a batch: none of its messages is processed).
 *   - A session is bound to the subject (`sub`) of the token that opened
 *     it: a request of that session with another subject's token gets 403.
 *   - The legacy HTTP+SSE endpoints are off.
 *   - Fetches and introspection run on libuv's thread pool (the loop's
 *     uv_queue_work); only the requests waiting for one are held (bounded
 *     by the timeout), the server serves the others meanwhile. Requests
 *     that need the key set while it is being fetched share that fetch.
 *     Free the acp_http_auth only after every server using it is closed
 *     and its loop has run the close to the end.
 *   - Tokens are never logged nor kept beyond the request.
 * A tool handler reads the token's subject and scopes with
 * acp_http_call_auth().
 */
typedef struct acp_http_auth acp_http_auth;

/**
 * @param issuer  the authorization server's issuer identifier (an http or
 *                https URL); copied.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL out or issuer, not http(s)),
 *         ACP_ERR_SYSTEM (libcurl could not start), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_auth_new(acp_http_auth **out, const char *issuer,
                                 const acp_mem *mem);
/** Accepts NULL. The servers using it must be closed first. */
ACP_EXTERN void acp_http_auth_free(acp_http_auth *a);
/**
 * The canonical URL of this resource (the metadata's `resource`, RFC
 * 8707). Default: "http://ADDR:PORT" and the MCP path, from the address
 * the server listens on (set it when clients reach the server by another
 * name, behind a proxy, or when listening on 0.0.0.0 or ::).
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL, not http(s)), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_auth_set_resource(acp_http_auth *a, const char *url);
/**
 * The audience a token's `aud` must contain. Default: the resource URL.
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_auth_set_audience(acp_http_auth *a, const char *aud);
/**
 * A scope every request needs (listed in the metadata, asked for in the
 * 401 challenge). May be called several times.
 * @param scope  one scope token (no space, quote or backslash); copied.
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_auth_add_scope(acp_http_auth *a, const char *scope);
/**
 * A scope calling tool `tool` needs (in addition to those of
 * acp_http_auth_add_scope()). May be called several times per tool.
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_auth_add_tool_scope(acp_http_auth *a, const char *tool,
                                            const char *scope);
/**
 * Check tokens with the introspection endpoint `url` (RFC 7662) instead
 * of as JWTs, authenticating as `client_id` / `client_secret`
 * (client_secret_basic). All copied; the secret is never logged.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL, url not http(s)),
 *         ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_auth_set_introspection(acp_http_auth *a,
                                               const char *url,
                                               const char *client_id,
                                               const char *client_secret);
/**
 * Fetch the JWK Set from `url` instead of discovering it.
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_auth_set_jwks_uri(acp_http_auth *a, const char *url);
/**
 * Use this JWK Set ({"keys":[...]}) and never fetch one.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL), ACP_ERR_PARSE (not a JWK
 *         Set), ACP_ERR_LIMIT (over 256 KiB), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_auth_set_jwks(acp_http_auth *a, const char *json,
                                      size_t len);
/** Clock skew allowed on `exp` and `nbf`, in seconds (default 60). */
ACP_EXTERN void acp_http_auth_set_leeway(acp_http_auth *a, unsigned seconds);

/**
 * Protect a registry server with `auth` (borrowed: it must outlive every
 * server created from these options). NULL (the default): no
 * authorization. A relay server refuses options carrying one.
 */
ACP_EXTERN void acp_http_server_options_set_auth(acp_http_server_options *o,
                                                 acp_http_auth *auth);

/**
 * From a tool (or other) handler while its request is being dispatched:
 * the subject and scopes of the access token the request carried.
 * `call`'s conn must have been created by an acp_http_server (its
 * user_data is the server's), or have NULL user_data.
 * @param subject  receives the token's `sub` (NUL-terminated, borrowed
 *                 until the handler returns; NULL when the token has
 *                 none). May be NULL.
 * @param scopes   receives its scopes, space-separated ("" when none).
 *                 May be NULL.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL call), ACP_ERR_UNSUPPORTED
 *         (the server has no authorization, or NULL user_data),
 *         ACP_ERR_INVALID_STATE (not called while the request is being
 *         dispatched).
 */
ACP_EXTERN int acp_http_call_auth(const acp_mcp_call *call,
                                  const char **subject, const char **scopes);

/* MARK: - Server: relay mode */

/**
 * One session of a relay server (acp_http_server_new_relay()). Opaque,
 * owned by the server. Valid from the `open` callback until `closed` runs
 * or acp_http_relay_session_end() returns (or the server is freed).
 */
typedef struct acp_http_relay_session acp_http_relay_session;

/**
 * Callbacks of a relay server. Copied by acp_http_server_new_relay().
 * They run on the loop's thread from inside the server's request
 * processing; they may call acp_http_relay_deliver() (its messages are
 * routed at once, so an answer delivered from `message` goes out with
 * that POST) and acp_http_relay_session_end() (taking effect once the
 * current request has been answered), but must not call
 * acp_http_server_close() nor run the loop.
 */
typedef struct acp_http_relay_callbacks {
  /**
   * A POST carrying an `initialize` request without MCP-Session-Id.
   * `authorization` is the Authorization header value (NUL-terminated,
   * borrowed for the call) or NULL when absent. Return 0 to accept: the
   * session is created, then the initialize message is delivered through
   * `message`, and its id goes out in the answer's MCP-Session-Id. Any
   * other return refuses: HTTP 401 with `WWW-Authenticate: Bearer` and a
   * JSON-RPC error body; no session, and `closed` does not run. NULL
   * accepts every session.
   */
  int (*open)(acp_http_relay_session *s, const char *authorization,
              void *user_data);
  /**
   * One JSON-RPC message from the HTTP client: a JSON object on one line
   * (line breaks between tokens turned into spaces), no trailing newline,
   * borrowed for the call. A batch arrives as its elements, in order.
   * Required.
   */
  void (*message)(acp_http_relay_session *s, const char *msg, size_t len,
                  void *user_data);
  /**
   * The session ended from the HTTP side: DELETE, or
   * acp_http_server_close(). Not called for acp_http_relay_session_end()
   * nor for a refused `open`. During the call deliver/end are no-ops;
   * after it `s` is invalid. May be NULL.
   */
  void (*closed)(acp_http_relay_session *s, void *user_data);
} acp_http_relay_callbacks;

/**
 * Start an HTTP endpoint whose Streamable HTTP sessions are relayed to the
 * caller instead of served by a registry: the HTTP layer frames, routes
 * and checks, but does not interpret MCP.
 *   - A POST with requests is answered `text/event-stream` (priming event
 *     first once upstream's answer to initialize said 2025-11-25 or later);
 *     the stream ends once each of its requests was answered
 *     through acp_http_relay_deliver(). A POST of notifications and
 *     responses only is answered 202 after `message` ran for each.
 *   - Every later request of a session (POST, GET, DELETE) must carry the
 *     Authorization value `open` saw (compared in constant time; absent
 *     only if it was absent): otherwise 401 as for a refused `open`. The
 *     value is kept and never logged.
 *   - Batches are accepted only once the upstream's answer to initialize
 *     said protocolVersion "2025-03-26"; otherwise 400 (-32600).
 *   - An initialize notification without an id is refused (400).
 *   - The legacy HTTP+SSE endpoints are off; Origin, Host,
 *     MCP-Protocol-Version, body, stream and session caps apply as in
 *     acp_http_server_new(). Relay sessions have no expiry.
 * @param out        receives the server (NULL on failure).
 * @param loop       must outlive the server.
 * @param cbs        copied; `message` is required.
 * @param user_data  given to every callback.
 * @param opts       NULL for the defaults; copied (see
 *                   acp_http_server_options_set_listen_fd() for its
 *                   descriptor, owned by the server even on failure).
 * @param mem        allocator (copied) or NULL for the default.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL out, loop, cbs or
 *         cbs->message; a listen descriptor that is not a listening TCP
 *         socket), ACP_ERR_SYSTEM (cannot listen), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_server_new_relay(acp_http_server **out, uv_loop_t *loop,
                                         const acp_http_relay_callbacks *cbs,
                                         void *user_data,
                                         const acp_http_server_options *opts,
                                         const acp_mem *mem);

/**
 * Send one JSON-RPC message from upstream to the HTTP client of `s`.
 * Routed as for a registry session: a response goes to the SSE stream of
 * the POST that carried its request (which ends once all its requests
 * are answered; a response nobody waits for is dropped); a
 * `notifications/progress` whose token came with a request of a still
 * open POST goes to that POST's stream; anything else goes to the POST
 * being handled when called from `message`, else to the session's GET
 * stream (held until a GET connects). A suspended stream is woken: the
 * bytes leave before the loop next waits. The answer to the initialize
 * request is read for its protocolVersion (batches, see above).
 * @param msg  one JSON object; a trailing newline and line breaks between
 *             tokens are allowed. Copied.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL s or msg, not a relay
 *         session, or msg is not one JSON object), ACP_ERR_CLOSED (the
 *         session was ended: acp_http_relay_session_end(), or from inside
 *         `closed`), ACP_ERR_LIMIT (the stream holds 64 MiB undelivered,
 *         or msg is too deep or too large to parse), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_relay_deliver(acp_http_relay_session *s,
                                      const char *msg, size_t len);

/**
 * Upstream is gone: end the session without calling `closed`. Streams
 * that are connected end after what they hold; everything else of the
 * session is freed; later requests with its id get 404. When called from
 * `open` or `message`, it takes effect once the current request was
 * answered and no later message is delivered. `s` is invalid after the
 * call. Accepts NULL; a no-op inside `closed`.
 */
ACP_EXTERN void acp_http_relay_session_end(acp_http_relay_session *s);

/** Attach the caller's pointer to a relay session (NULL at first). */
ACP_EXTERN void acp_http_relay_session_set_user_data(acp_http_relay_session *s,
                                                     void *ud);
/** The pointer set with acp_http_relay_session_set_user_data() (NULL for
 * NULL). */
ACP_EXTERN void *
acp_http_relay_session_get_user_data(const acp_http_relay_session *s);
/** The session's MCP-Session-Id ("[PREFIX-]" and 32 hex digits,
 * NUL-terminated; borrowed,
 * valid as `s`), or NULL for NULL. */
ACP_EXTERN const char *
acp_http_relay_session_id(const acp_http_relay_session *s);

/* MARK: - Client */

/** Which HTTP transport a client uses. */
typedef enum acp_http_transport {
  /** Streamable HTTP, falling back to legacy HTTP+SSE on 400/404/405. */
  ACP_HTTP_AUTO = 0,
  ACP_HTTP_STREAMABLE = 1,
  ACP_HTTP_LEGACY_SSE = 2
} acp_http_transport;

/** An MCP client transport over HTTP. Opaque. */
typedef struct acp_http_client acp_http_client;

/**
 * Called once when the transport failed or the server ended the session.
 * @param reason ACP_ERR_SYSTEM (connection error: see
 *        acp_http_client_error()), ACP_ERR_PROTOCOL (unexpected HTTP status
 *        or content), ACP_ERR_CLOSED (legacy stream ended, or the session
 *        was gone: 404), or a fatal code from the MCP client.
 * Pending requests of the MCP client have been completed with
 * ACP_ERR_CLOSED (acp_mcp_client_recv_eof()); a raw-mode transport has
 * no MCP client and only reports.
 */
typedef void (*acp_http_client_end_cb)(acp_http_client *hc, int reason,
                                       void *user_data);
/** Called once when the transport is closed, just before it is freed. */
typedef void (*acp_http_client_close_cb)(acp_http_client *hc, void *user_data);

/**
 * Carry `client` over HTTP to `url`. Output the client produces (at any
 * time: the transport checks before each loop wait) is sent; answers are
 * fed to it; its timeouts are driven by a timer. The MCP client is
 * borrowed and must outlive the transport.
 * @param end_cb may be NULL.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL or non-http(s) URL),
 *         ACP_ERR_SYSTEM (libcurl could not start), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_client_new(acp_http_client **out, uv_loop_t *loop,
                                   acp_mcp_client *client, const char *url,
                                   acp_http_transport mode,
                                   acp_http_client_end_cb end_cb,
                                   void *user_data, const acp_mem *mem);
/**
 * Raw mode: called with each JSON-RPC message received from the server,
 * in arrival order: responses (from JSON or SSE answers to POSTs), and
 * requests and notifications (on POST streams, the standalone GET stream
 * or the legacy SSE stream). A batch answer is split: each call carries
 * one JSON object. `msg` is borrowed, valid during the call only, not
 * NUL-terminated, and holds no CR or LF (line breaks between tokens are
 * turned into spaces), so it can be written as one NDJSON line. A POST
 * of a request answered with a non-2xx status yields a synthesized error
 * response for that id (code -32000, "HTTP status N").
 * Runs from inside the transport's I/O processing: it may call
 * acp_http_client_send_raw() (the message goes out before the loop next
 * waits) and acp_http_client_close(); it must not run the loop.
 */
typedef void (*acp_http_client_msg_cb)(acp_http_client *hc, const char *msg,
                                       size_t len, void *user_data);

/**
 * Create a raw-mode transport: no acp_mcp_client in the middle; the caller
 * sends JSON-RPC messages with acp_http_client_send_raw() and receives the
 * server's through `msg_cb`. Everything else is as acp_http_client_new():
 * the AUTO probe (the first POST decides; 400, 404 or 405 switch to legacy
 * HTTP+SSE, and the held message is re-sent to the `endpoint`),
 * MCP-Session-Id, the standalone GET stream (acp_http_client_set_get_stream(),
 * opened once the answer to `initialize` arrived), SSE resumption,
 * DELETE on close, and `end_cb`. The MCP-Protocol-Version header is the
 * `result.protocolVersion` of the server's answer to the `initialize`
 * request sent through this transport (absent until then).
 * Nothing is sent before the loop runs, so acp_http_client_add_header()
 * may be called after this.
 * @param out      receives the transport (NULL on failure); release it with
 *                 acp_http_client_close().
 * @param loop     the loop; must outlive the transport.
 * @param url      http:// or https:// URL; copied.
 * @param mode     transport selection, as acp_http_client_new().
 * @param msg_cb   required.
 * @param end_cb   may be NULL; called once when the transport failed or the
 *                 server ended the session (no MCP client to complete).
 * @param user_data given to `msg_cb` and `end_cb`.
 * @param mem      allocator (copied) or NULL for the default.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL out/loop/url/msg_cb, a
 *         non-http(s) URL or an unknown mode), ACP_ERR_SYSTEM (libcurl
 *         could not start), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_client_new_raw(acp_http_client **out, uv_loop_t *loop,
                                       const char *url, acp_http_transport mode,
                                       acp_http_client_msg_cb msg_cb,
                                       acp_http_client_end_cb end_cb,
                                       void *user_data, const acp_mem *mem);

/**
 * Raw mode: send one JSON-RPC message (a JSON object, or a batch array)
 * as its own POST. `msg` is copied (it may hold line breaks between
 * tokens; a trailing newline is allowed) and may be reused at once; the
 * POST starts before the loop next waits (never from inside this call,
 * so it is safe from `msg_cb`). Over legacy HTTP+SSE, messages sent
 * before the `endpoint` event are held and sent in order once it came.
 * MCP-Session-Id is sent once assigned; MCP-Protocol-Version once the
 * answer to `initialize` told it (see acp_http_client_new_raw()).
 * @return 0, ACP_ERR_INVALID_STATE (NULL hc, not a raw transport, or
 *         ended: end_cb ran or acp_http_client_close() was called),
 *         ACP_ERR_INVALID_ARGUMENT (NULL msg, or not one valid JSON
 *         object or array), ACP_ERR_LIMIT (the queue would overflow),
 *         ACP_ERR_NOMEM. Nothing was queued on error.
 */
ACP_EXTERN int acp_http_client_send_raw(acp_http_client *hc, const char *msg,
                                        size_t len);

/**
 * Add a header sent with every HTTP request of this transport (POST, GET,
 * the legacy SSE GET, DELETE), e.g. "Authorization", "Bearer x". Works in
 * both modes, before the first request is started (the first loop
 * iteration after output was produced, or after _new for
 * ACP_HTTP_LEGACY_SSE). Headers go out in the order added, after the
 * transport's own; a name the transport or libcurl also sets (Host,
 * Accept, ...) replaces libcurl's value where libcurl allows it and is
 * otherwise sent twice: avoid those. An empty value sends "Name:" with no
 * value. Both strings are copied. Values are never logged.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL hc, name or value; empty name;
 *         a name with CR, LF, ':', space or another control character; a
 *         value with CR or LF), ACP_ERR_INVALID_STATE (a request was
 *         already started, or the transport ended or is closing),
 *         ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_client_add_header(acp_http_client *hc, const char *name,
                                          const char *value);

typedef struct acp_http_oauth acp_http_oauth;
/**
 * Authorize this transport's requests with `o` (see MCP AUTHORIZATION
 * below; NULL: stop). Each request then gets its own Authorization header
 * (and, for a DPoP-bound token, a fresh DPoP proof) from
 * acp_http_oauth_request_headers(); before o has a token none is sent, so
 * the first request earns the 401 that starts the flow. A DPoP-Nonce the
 * server answers is handed to o, and a POST refused with 401 that carried
 * a new nonce (use_dpop_nonce) is sent once more with it. `o` is borrowed:
 * it must outlive the transport, and is used from the loop's thread (a
 * token refresh there blocks the loop for its duration).
 */
ACP_EXTERN void acp_http_client_set_oauth(acp_http_client *hc,
                                          acp_http_oauth *o);

/** The transport in use (AUTO until the first answer decided). */
ACP_EXTERN acp_http_transport
acp_http_client_transport(const acp_http_client *hc);
/** The MCP-Session-Id the server assigned (NUL-terminated) or NULL. */
ACP_EXTERN const char *acp_http_client_session_id(const acp_http_client *hc);
/** Also open the standalone GET stream after initialize (default off). */
ACP_EXTERN void acp_http_client_set_get_stream(acp_http_client *hc, int on);

/** State of the standalone GET stream of a Streamable HTTP client. */
typedef enum acp_http_get_state {
  /** Not asked for (acp_http_client_set_get_stream()), or not opened yet:
   * it opens once initialize was answered over Streamable HTTP. */
  ACP_HTTP_GET_NONE = 0,
  /** The GET was sent; the server has not answered yet. */
  ACP_HTTP_GET_OPENING = 1,
  /** The server answered 2xx `text/event-stream`: it has the stream, and
   * what it sends on it from now on reaches the MCP client. */
  ACP_HTTP_GET_OPEN = 2,
  /** The server answered anything else (405: it offers no GET stream), or
   * the transfer failed before an answer. Final. */
  ACP_HTTP_GET_REFUSED = 3,
  /** The stream was open and has ended. Final (it is not reopened). */
  ACP_HTTP_GET_ENDED = 4
} acp_http_get_state;

/**
 * Called on each change of the GET stream's state past OPENING (to OPEN,
 * REFUSED or ENDED), from inside the transport's I/O processing. It may
 * send MCP requests (they go out before the loop next waits) and may call
 * acp_http_client_close(); it must not free the MCP client.
 */
typedef void (*acp_http_client_get_cb)(acp_http_client *hc,
                                       acp_http_get_state state,
                                       void *user_data);
/** Set (or clear, with NULL) the GET stream callback. */
ACP_EXTERN void acp_http_client_set_get_cb(acp_http_client *hc,
                                           acp_http_client_get_cb cb,
                                           void *user_data);
/** The GET stream's state now (ACP_HTTP_GET_NONE for NULL). */
ACP_EXTERN acp_http_get_state
acp_http_client_get_state(const acp_http_client *hc);
/** Last HTTP status seen (0 before any) and a description of the last
 * transport error ("" if none; static or owned by hc). */
ACP_EXTERN long acp_http_client_last_status(const acp_http_client *hc);
ACP_EXTERN const char *acp_http_client_error(const acp_http_client *hc);
/**
 * The WWW-Authenticate value of the last 401 or 403 answer (NUL-terminated,
 * owned by hc, valid until its next answer or close), or NULL. Feed it with
 * acp_http_client_last_status() to acp_http_oauth_authorize().
 */
ACP_EXTERN const char *
acp_http_client_www_authenticate(const acp_http_client *hc);

/*
 * MCP AUTHORIZATION (OAuth 2.1, MCP 2025-11-25 "Authorization"), client
 * side. One acp_http_oauth per MCP server URL. When a transport ends with
 * 401 (or 403 insufficient_scope), call acp_http_oauth_authorize() with
 * the status and the WWW-Authenticate value; it runs, blocking (libcurl,
 * not on the loop: call it between transports, not from a callback):
 * protected resource metadata discovery (RFC 9728: the challenge's
 * resource_metadata, then the well-known URLs), a check that the metadata
 * names this server, authorization server metadata (RFC 8414 and OpenID
 * discovery, every path variant; the issuer must match), PKCE S256 (an
 * authorization server not advertising S256 is refused), client identity
 * in the spec's order (pre-registered, acp_http_oauth_set_client(); a
 * Client ID Metadata Document URL, when the server supports them; dynamic
 * registration, RFC 7591, with application_type), the authorization code
 * grant through the application's callback (state and RFC 9207 `iss`
 * checked), and the token request (auth none, client_secret_basic or
 * client_secret_post). Then open a new transport with the header
 * "Authorization: Bearer <acp_http_oauth_token()>".
 * Scope: the challenge's, else the resource's scopes_supported, else none;
 * offline_access is added when the authorization server lists it. Step-up
 * (403 insufficient_scope) is allowed twice per object, then refused.
 * Credentials and tokens belong to one issuer: when the resource names
 * another authorization server, they are dropped and the client registers
 * again. Tokens and secrets are never logged nor put in error texts; TLS
 * verification stays on; no request follows redirects.
 * An MCP server of the 2025-03-26 revision without resource metadata is
 * served too (its origin is the authorization server; default endpoints
 * /authorize, /token, /register when it has no metadata either).
 */
/* acp_http_oauth is declared above, with acp_http_client_set_oauth(). */

/**
 * The application opens `auth_url` (a browser, or a headless fetch) and
 * hands back the URL the authorization server redirected to (the redirect
 * URI with `code`, `state`, maybe `iss`). `auth_url` is borrowed for the
 * call. *redirect_url must be malloc'ed by the callback; the library
 * frees it. Return 0, or a negative ACP_ERR_* to abandon (the flow then
 * fails with that code).
 */
typedef int (*acp_http_oauth_open_cb)(acp_http_oauth *o, const char *auth_url,
                                      char **redirect_url, void *user_data);

/** Create for the MCP server at `mcp_url` (copied). 0,
 * ACP_ERR_INVALID_ARGUMENT (not http(s)), ACP_ERR_NOMEM. */
ACP_EXTERN int acp_http_oauth_new(acp_http_oauth **out, const char *mcp_url);
/** Free; secrets are wiped first. Accepts NULL. */
ACP_EXTERN void acp_http_oauth_free(acp_http_oauth *o);
/** Pre-registered client credentials (copied); secret may be NULL (a
 * public client). Used with whichever issuer the flow discovers. */
ACP_EXTERN int acp_http_oauth_set_client(acp_http_oauth *o,
                                         const char *client_id,
                                         const char *client_secret);
/** The https URL of this client's Client ID Metadata Document (copied):
 * used as client_id where the authorization server supports them. */
ACP_EXTERN int acp_http_oauth_set_metadata_url(acp_http_oauth *o,
                                               const char *url);
/** Redirect URI (copied; default "http://127.0.0.1/callback"). */
ACP_EXTERN int acp_http_oauth_set_redirect_uri(acp_http_oauth *o,
                                               const char *uri);
/** The callback of the authorization code grant (required for it). */
ACP_EXTERN void acp_http_oauth_set_open_cb(acp_http_oauth *o,
                                           acp_http_oauth_open_cb cb,
                                           void *user_data);
/**
 * private_key_jwt client authentication (RFC 7523 section 2.2): with
 * pre-registered credentials (acp_http_oauth_set_client(); the secret may
 * be NULL), every token request carries a fresh client assertion signed
 * with this key (iss and sub the client id, aud the issuer, a random jti,
 * five minutes) instead of a secret, where the authorization server lists
 * private_key_jwt (or lists no methods). `pem` (`len` bytes, not
 * necessarily NUL-terminated) holds an unencrypted private key, PKCS#8 or
 * traditional; `alg` is "ES256" (EC P-256; signatures in the JOSE r||s
 * form), "RS256" (RSA, at least 2048 bits) or NULL to take it from the key.
 * The key is parsed into o at once; `pem` is not kept. It is never logged.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL o; no PEM key; an encrypted,
 *         unreadable or wrong-type key; an unknown alg: the reason is in
 *         acp_http_oauth_error()), ACP_ERR_NOMEM. A previous key is kept
 *         on error and replaced on success.
 */
ACP_EXTERN int acp_http_oauth_set_client_key(acp_http_oauth *o, const char *pem,
                                             size_t len, const char *alg);
/**
 * DPoP (RFC 9449). `on`: generate a fresh ES256 key for o (kept until o is
 * freed or DPoP is turned off) and, where the authorization server lists
 * ES256 in dpop_signing_alg_values_supported, send a proof with every
 * token request (retried once with the server's DPoP-Nonce when it answers
 * use_dpop_nonce) to get a DPoP-bound token. Such a token is then sent as
 * "Authorization: DPoP <token>" with a fresh proof per request (htm, htu,
 * iat, jti, ath and the resource server's nonce):
 * acp_http_oauth_request_headers(), which acp_http_client_set_oauth() uses
 * on every request. Off (the default, or on = 0) drops the key.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL o), ACP_ERR_SYSTEM (no key
 *         could be generated), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_oauth_set_dpop(acp_http_oauth *o, int on);
/**
 * The DPoP-Nonce a resource server answered (RFC 9449 section 9), copied;
 * later proofs carry it. acp_http_client_set_oauth() transports call this
 * themselves. @return 0, ACP_ERR_INVALID_ARGUMENT (NULL, empty, or not
 * printable ASCII without '"' and '\'), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_oauth_set_dpop_nonce(acp_http_oauth *o,
                                             const char *nonce);
/**
 * An assertion for the JWT bearer grant (RFC 7523 section 2.1), e.g. a
 * workload identity token issued by another party (copied; never logged).
 * Used by acp_http_oauth_authorize() with ACP_HTTP_OAUTH_JWT_BEARER.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL or empty), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_oauth_set_assertion(acp_http_oauth *o, const char *jwt);
/**
 * Enterprise-managed authorization (SEP-990, cross-app access): the
 * enterprise identity provider's token endpoint, the user's ID token from
 * it, and this client's credentials there (`client_id` may be NULL;
 * `client_secret` NULL for a public client: then client_id goes in the
 * body, else client_secret_basic). All copied; the token and secret are
 * never logged. With ACP_HTTP_OAUTH_ID_JAG, acp_http_oauth_authorize()
 * exchanges the ID token at the IdP for an ID-JAG (RFC 8693; audience the
 * MCP authorization server's issuer, resource the MCP server) and presents
 * it with the JWT bearer grant to the MCP authorization server.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL o, a token endpoint that is
 *         not http(s), a NULL or empty ID token, a secret without client
 *         id), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_oauth_set_idp(acp_http_oauth *o,
                                      const char *token_endpoint,
                                      const char *id_token,
                                      const char *client_id,
                                      const char *client_secret);
/** acp_http_oauth_authorize() flags (one of them at most): use the client
 * credentials grant (machine clients; needs pre-registered credentials, a
 * secret or a key) instead of the authorization code grant. */
#define ACP_HTTP_OAUTH_CLIENT_CREDENTIALS 1
/** The JWT bearer grant with acp_http_oauth_set_assertion()'s assertion
 * (workload identity federation); pre-registered credentials, when set,
 * authenticate the client. A refused assertion is not retried. */
#define ACP_HTTP_OAUTH_JWT_BEARER 2
/** Enterprise-managed authorization (acp_http_oauth_set_idp()). */
#define ACP_HTTP_OAUTH_ID_JAG 4
/**
 * Run the flow (see above) after an answer of `status` (401 or 403) with
 * `www_authenticate` (may be NULL). Blocking.
 * @return 0 (a token is ready), ACP_ERR_PROTOCOL (bad metadata, a resource
 *         or issuer mismatch, state or iss mismatch, a refused token
 *         request, a 403 that is not insufficient_scope),
 *         ACP_ERR_UNSUPPORTED (no S256; no way to get a client id),
 *         ACP_ERR_LIMIT (step-up limit), ACP_ERR_NOT_FOUND (no metadata),
 *         ACP_ERR_INVALID_STATE (no callback), the callback's code,
 *         ACP_ERR_SYSTEM, ACP_ERR_NOMEM. acp_http_oauth_error() says why.
 */
ACP_EXTERN int acp_http_oauth_authorize(acp_http_oauth *o, long status,
                                        const char *www_authenticate,
                                        int flags);
/** Refresh with the refresh token (blocking). 0 or as above;
 * ACP_ERR_INVALID_STATE without a refresh token. */
ACP_EXTERN int acp_http_oauth_refresh(acp_http_oauth *o);
/** The access token (owned by o, valid until the next call on o), or
 * NULL; refreshed first (blocking) when it expires within 30 s. */
ACP_EXTERN const char *acp_http_oauth_token(acp_http_oauth *o);
/** "Bearer", or "DPoP" for a DPoP-bound token; NULL without a token. */
ACP_EXTERN const char *acp_http_oauth_token_type(const acp_http_oauth *o);
/**
 * The headers of one request to the MCP server: *authorization gets the
 * Authorization value ("Bearer <token>" or "DPoP <token>"), *dpop the DPoP
 * proof for `method` and `url` for a DPoP-bound token (else NULL). Both
 * malloc'ed, the caller frees them. The token is refreshed first when it
 * expires within 30 s (blocking). The token goes only to the MCP server's
 * origin: another origin is refused.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (a NULL argument, `url` not of the
 *         MCP server's origin), ACP_ERR_INVALID_STATE (no token yet),
 *         ACP_ERR_SYSTEM (signing failed), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_oauth_request_headers(acp_http_oauth *o,
                                              const char *method,
                                              const char *url,
                                              char **authorization,
                                              char **dpop);
/** Why the last call failed ("" if it did not); never holds a secret. */
ACP_EXTERN const char *acp_http_oauth_error(const acp_http_oauth *o);
/**
 * For headless hosts and tests: GET `url` without following redirects and
 * return the Location of a 3xx answer (malloc'ed, in *location). 0,
 * ACP_ERR_PROTOCOL (no redirect), ACP_ERR_INVALID_ARGUMENT.
 */
ACP_EXTERN int acp_http_oauth_fetch_redirect(const char *url, char **location);
/**
 * The authorization state (issuer, client registration, endpoint, tokens)
 * as one JSON object, for the application to store (it holds secrets: keep
 * it private, e.g. a 0600 file) and give back to acp_http_oauth_import()
 * in a later process. *json is malloc'ed (free() it).
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_INVALID_STATE (no token
 *         yet), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_oauth_export(acp_http_oauth *o, char **json);
/**
 * Restore what acp_http_oauth_export() gave, for the same MCP server URL:
 * acp_http_oauth_token() then returns the stored token (refreshed first
 * when it expires within 30 s).
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_PARSE (not such a state,
 *         or another server's; nothing changed), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_http_oauth_import(acp_http_oauth *o, const char *json,
                                     size_t len);
/** The issuer the tokens belong to (owned by o), or NULL. */
ACP_EXTERN const char *acp_http_oauth_issuer(const acp_http_oauth *o);

/**
 * Close: abort transfers, send DELETE for a Streamable session (waiting at
 * most `timeout_ms` for it; 0: skip it), release everything, run `cb`
 * (may be NULL), free. The MCP client is not freed. Accepts NULL.
 */
ACP_EXTERN void acp_http_client_close(acp_http_client *hc, uint64_t timeout_ms,
                                      acp_http_client_close_cb cb,
                                      void *user_data);

#ifdef __cplusplus
}
#endif

#endif /* ACP_HTTP_H */
