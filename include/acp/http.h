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
 *     first, then the messages emitted for those requests (progress, log
 *     messages, server->client requests), then the responses, then the end
 *     of the stream. Messages not related to a request go to the GET
 *     stream (queued while none is connected).
 *   - Event ids are "<stream>-<seq>", unique in the session; a GET with
 *     Last-Event-ID replays that stream's later events only, then continues
 *     it live.
 *   - MCP-Session-Id: 32 hex digits (128 bits from getrandom(2), or
 *     /dev/urandom), assigned in the initialize answer. Status codes: 400
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
 *
 * CLIENT (acp_http_client). Carries one acp_mcp_client over Streamable
 * HTTP or legacy HTTP+SSE with libcurl's multi interface driven by the
 * loop. Each outgoing message is one POST; JSON or SSE answers are fed to
 * the client; MCP-Session-Id and MCP-Protocol-Version are kept and sent;
 * the session is DELETEd on close. In ACP_HTTP_AUTO mode the first POST
 * (initialize) probes: 400, 404 or 405 switch to legacy (GET the URL,
 * wait for `endpoint`, POST there).
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
/** Default `retry` sent in priming events, in milliseconds. */
#define ACP_HTTP_DEFAULT_RETRY_MS 1000

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
/** Caps (0 selects the default). */
ACP_EXTERN void acp_http_server_options_set_max_body(acp_http_server_options *o,
                                                     size_t bytes);
ACP_EXTERN void
acp_http_server_options_set_max_streams(acp_http_server_options *o, size_t n);
ACP_EXTERN void
acp_http_server_options_set_max_sessions(acp_http_server_options *o, size_t n);
/** `retry` of priming events (0 selects the default). */
ACP_EXTERN void acp_http_server_options_set_retry(acp_http_server_options *o,
                                                  uint32_t ms);
/** Serve the legacy HTTP+SSE endpoints /sse and /message (default on). */
ACP_EXTERN void acp_http_server_options_set_legacy(acp_http_server_options *o,
                                                   int on);

/**
 * Start serving `registry` on `loop`. The registry is borrowed and must
 * outlive the server.
 * @param opts  NULL for the defaults; copied.
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_SYSTEM (cannot listen: the
 *         address is in use or not local), ACP_ERR_NOMEM.
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
 * are ended), close the handles, run `cb` (may be NULL), free. Accepts
 * NULL.
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
 *         conn, or a legacy one), ACP_ERR_INVALID_STATE (not called from
 *         the handler while its request is being dispatched),
 *         ACP_ERR_LIMIT or ACP_ERR_NOMEM (the conn's output is full).
 */
ACP_EXTERN int acp_http_call_close_stream(acp_mcp_call *call);

/* MARK: - stdio */

/**
 * Blocking: serve `conn` on `in_fd` / `out_fd` (newline-delimited JSON-RPC,
 * the MCP stdio transport) on a private loop until end of input, a fatal
 * conn error, or SIGTERM/SIGINT (which acts as end of input); then flush
 * the output for up to `flush_timeout_ms` (ACP_UV_FOREVER: no limit) and
 * return. Received bytes go to acp_mcp_conn_recv() with the loop's
 * uv_now(), and a timer drives acp_mcp_conn_handle_expiry(), so the
 * timeouts of server->client requests (acp_mcp_call_request()) run on
 * the loop's clock; output produced from any callback is written before
 * the loop next waits. Input left unconsumed by a handler that returned
 * ACP_ERR_PAUSE is offered again on each loop iteration. The conn is
 * borrowed (not freed). Ignores SIGPIPE. Descriptors are dup()ed (as
 * acp_uv_link_new_fds()).
 * @return the end reason: 0 (end of input or a signal), ACP_ERR_SYSTEM (a
 *         read error), a fatal code from the conn; or ACP_ERR_INVALID_ARGUMENT,
 *         ACP_ERR_SYSTEM, ACP_ERR_UNSUPPORTED, ACP_ERR_NOMEM from setting up.
 */
ACP_EXTERN int acp_mcp_run_fds(acp_mcp_conn *conn, int in_fd, int out_fd,
                               uint64_t flush_timeout_ms);
/** acp_mcp_run_fds(conn, 0, 1, flush_timeout_ms). */
ACP_EXTERN int acp_mcp_run_stdio(acp_mcp_conn *conn, uint64_t flush_timeout_ms);

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
 * ACP_ERR_CLOSED (acp_mcp_client_recv_eof()).
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
