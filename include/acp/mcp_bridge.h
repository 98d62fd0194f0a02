/*
 * libacp - the conductor's MCP-over-ACP bridge, sans I/O.
 *
 * When the agent of a chain does not advertise `mcpCapabilities.acp`, the
 * conductor bridges the MCP servers that the client or a proxy offers
 * through ACP (RFD "MCP-over-ACP"): the agent is given ordinary MCP
 * servers instead (a stdio command, `PROGRAM mcp-shim SOCKET TOKEN`, or a
 * loopback Streamable HTTP URL with a bearer token), and the MCP traffic of
 * those servers is carried to the provider as `mcp/...` messages, written as
 * if the agent had sent them. This object is that logic: the runtime owns
 * the sockets, the helper processes and the timers, and moves bytes.
 *
 *   router -> agent   acp_mcp_bridge_to_agent(): every line the router
 *                     has for the agent passes here; the bridge rewrites
 *                     session/new|load|resume|fork declarations of
 *                     `"type":"acp"`, holds such lines while the agent's
 *                     initialize answer is unknown, and consumes what is
 *                     for an endpoint (mcp/message, mcp/disconnect,
 *                     $/cancel_request for a bridged request, answers to
 *                     its own requests).
 *   agent -> router   acp_mcp_bridge_from_agent(): the agent's lines, so
 *                     the bridge learns its capabilities (and tells the
 *                     client mcpCapabilities.acp) and its session ids.
 *   bridge -> router  acp_mcp_bridge_send(): lines to feed to the router
 *                     on the agent's link, as if the agent wrote them
 *                     (ids "acpbr-<n>").
 *   endpoint k        one MCP client connection of the agent (a shim, or
 *                     a session of the HTTP helper): acp_mcp_bridge_
 *                     endpoint_new() when it connects, _recv() with its
 *                     bytes (a token line first, then MCP lines), _closed()
 *                     at its end; its output comes through the
 *                     endpoint_write callback.
 *
 * The MCP-over-ACP machinery (connections, the table of requests in flight,
 * id translation, cancellation) is the one of mcp_acp.h. The wire shape is
 * a property of each bridged connection (M1 today).
 *
 * PROVIDERS. Each bridged server remembers that its provider is alive:
 * acp_mcp_bridge_server_gone() (the runtime calls it when the component
 * that declared the server died, see acp_router_mcp_server()) answers the
 * endpoints' pending requests with an MCP error, closes their connections,
 * revokes the token, and nothing further is routed for it.
 *
 * CALLBACKS run inside the calls of this API and must not call any of its
 * functions (no re-entrancy); they may call the runtime. Thread-safety:
 * one thread at a time per bridge. Time is not needed.
 *
 * OUTPUT LIFETIMES. What _to_agent(), _release() and _send() return is
 * valid until the next call on the bridge.
 */
#ifndef ACP_MCP_BRIDGE_H
#define ACP_MCP_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "rpc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct acp_mcp_bridge acp_mcp_bridge;
typedef struct acp_mcp_bridge_options acp_mcp_bridge_options;

/** What the agent is given for a bridged server. */
typedef enum acp_mcp_bridge_transport {
  /** Nothing is rewritten (the agent gets `"type":"acp"`); the client is
   * still told mcpCapabilities.acp. */
  ACP_MCP_BRIDGE_TRANSPORT_OFF = 0,
  /** `PROGRAM mcp-shim SOCKET TOKEN` (stdio). */
  ACP_MCP_BRIDGE_TRANSPORT_STDIO = 1,
  /** `http://127.0.0.1:PORT/mcp` with `Authorization: Bearer TOKEN` when
   * the agent advertises mcpCapabilities.http, else stdio. */
  ACP_MCP_BRIDGE_TRANSPORT_HTTP = 2
} acp_mcp_bridge_transport;

/** Events (acp_mcp_bridge_event_cb). */
typedef enum acp_mcp_bridge_event_type {
  /** `detail` is a 32-hex-digit token the HTTP helper must accept. */
  ACP_MCP_BRIDGE_EVENT_TOKEN_ADDED = 1,
  /** `detail` is a token that is no longer valid. */
  ACP_MCP_BRIDGE_EVENT_TOKEN_REMOVED = 2,
  /** `detail` is a line for the log (no newline), "mcp bridge: ...". */
  ACP_MCP_BRIDGE_EVENT_LOG = 3
} acp_mcp_bridge_event_type;

/** Kinds of acp_mcp_bridge_hop. */
typedef enum acp_mcp_bridge_hop_type {
  /** An MCP line from endpoint `endpoint` to the bridge. */
  ACP_MCP_BRIDGE_HOP_FROM_ENDPOINT = 1,
  /** An MCP line from the bridge to endpoint `endpoint`. */
  ACP_MCP_BRIDGE_HOP_TO_ENDPOINT = 2,
  /** A line the router had for the agent, as the agent gets it (after any
   * rewrite). Held lines are reported when released. */
  ACP_MCP_BRIDGE_HOP_TO_AGENT = 3,
  /** A line the router had for the agent, taken by the bridge. */
  ACP_MCP_BRIDGE_HOP_TO_BRIDGE = 4
} acp_mcp_bridge_hop_type;

/** One message seen by the bridge (for --trace). Borrowed, valid during
 * the callback. */
typedef struct acp_mcp_bridge_hop {
  acp_mcp_bridge_hop_type type;
  /** The endpoint (0 for the agent hops). */
  uint64_t endpoint;
  /** The name of the bridged server, NUL-terminated, or NULL. */
  const char *server;
  /** The message, without its newline. */
  const char *data;
  size_t len;
} acp_mcp_bridge_hop;

/** 16 random bytes for a server token. 0, or nonzero (the declaration is
 * then passed unchanged). */
typedef int (*acp_mcp_bridge_random_cb)(acp_mcp_bridge *b, uint8_t out[16],
                                        void *user_data);
/**
 * Make `transport` usable before a declaration is rewritten to it: for
 * STDIO, a listening socket, announced with acp_mcp_bridge_set_socket();
 * for HTTP (asked after STDIO succeeded), the HTTP helper, its port
 * announced with acp_mcp_bridge_set_http_port(). Called again before
 * every rewrite; return 0 at once when ready. Nonzero: HTTP falls back to
 * stdio, STDIO leaves the line unchanged. The only bridge calls allowed
 * inside.
 */
typedef int (*acp_mcp_bridge_prepare_cb)(acp_mcp_bridge *b,
                                         acp_mcp_bridge_transport transport,
                                         void *user_data);
/** Write `len` bytes (whole lines) to endpoint `endpoint`. */
typedef void (*acp_mcp_bridge_endpoint_write_cb)(acp_mcp_bridge *b,
                                                 uint64_t endpoint,
                                                 const char *data, size_t len,
                                                 void *user_data);
/** Close endpoint `endpoint`; the bridge has forgotten it. */
typedef void (*acp_mcp_bridge_endpoint_close_cb)(acp_mcp_bridge *b,
                                                 uint64_t endpoint,
                                                 void *user_data);
typedef void (*acp_mcp_bridge_event_cb)(acp_mcp_bridge *b,
                                        acp_mcp_bridge_event_type type,
                                        const char *detail, void *user_data);
typedef void (*acp_mcp_bridge_trace_cb)(acp_mcp_bridge *b,
                                        const acp_mcp_bridge_hop *hop,
                                        void *user_data);

/** @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM. */
ACP_EXTERN int acp_mcp_bridge_options_new(acp_mcp_bridge_options **out);
/** Accepts NULL. */
ACP_EXTERN void acp_mcp_bridge_options_free(acp_mcp_bridge_options *o);
/** Default ACP_MCP_BRIDGE_TRANSPORT_STDIO. Unknown values are ignored. */
ACP_EXTERN void
acp_mcp_bridge_options_set_transport(acp_mcp_bridge_options *o,
                                     acp_mcp_bridge_transport t);
/** The program the agent runs for a stdio server (copied). Without one
 * (the default) no declaration is rewritten (a log event says so once).
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM. */
ACP_EXTERN int acp_mcp_bridge_options_set_program(acp_mcp_bridge_options *o,
                                                  const char *program);
/** Longest endpoint line after its token (default 64 MiB; 0 restores it),
 * line ending excluded. A longer line is answered with
 * acp_ndjson_overlong_reply() and dropped; the endpoint goes on. */
ACP_EXTERN void acp_mcp_bridge_options_set_max_line(acp_mcp_bridge_options *o,
                                                    size_t max);
ACP_EXTERN void
acp_mcp_bridge_options_set_random_cb(acp_mcp_bridge_options *o,
                                     acp_mcp_bridge_random_cb cb);
ACP_EXTERN void
acp_mcp_bridge_options_set_prepare_cb(acp_mcp_bridge_options *o,
                                      acp_mcp_bridge_prepare_cb cb);
ACP_EXTERN void acp_mcp_bridge_options_set_endpoint_write_cb(
    acp_mcp_bridge_options *o, acp_mcp_bridge_endpoint_write_cb cb);
ACP_EXTERN void acp_mcp_bridge_options_set_endpoint_close_cb(
    acp_mcp_bridge_options *o, acp_mcp_bridge_endpoint_close_cb cb);
ACP_EXTERN void acp_mcp_bridge_options_set_event_cb(acp_mcp_bridge_options *o,
                                                    acp_mcp_bridge_event_cb cb);
ACP_EXTERN void acp_mcp_bridge_options_set_trace_cb(acp_mcp_bridge_options *o,
                                                    acp_mcp_bridge_trace_cb cb);

/**
 * Create a bridge. `opts` is copied (NULL: defaults; without a random
 * callback no declaration is rewritten).
 * @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_mcp_bridge_new(acp_mcp_bridge **out,
                                  const acp_mcp_bridge_options *opts,
                                  void *user_data, const acp_mem *mem);
/** Free everything; no message is written, no callback runs. Accepts
 * NULL. */
ACP_EXTERN void acp_mcp_bridge_free(acp_mcp_bridge *b);
ACP_EXTERN void *acp_mcp_bridge_get_user_data(const acp_mcp_bridge *b);

/** From the prepare callback: the socket the shims connect to (copied).
 * @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM. */
ACP_EXTERN int acp_mcp_bridge_set_socket(acp_mcp_bridge *b, const char *path);
/** From the prepare callback: the HTTP helper's loopback port. */
ACP_EXTERN void acp_mcp_bridge_set_http_port(acp_mcp_bridge *b, uint16_t port);

/**
 * The router's output for the agent: whole lines (each ending with a
 * newline). Sets `*out` to what to write to the agent (`data` itself when
 * nothing is for the bridge) and returns its length (0: nothing now).
 * Lines for the router may follow (acp_mcp_bridge_send()).
 * @return bytes, or ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM (fatal for
 *         the bridge: only _free may follow).
 */
ACP_EXTERN acp_ssize acp_mcp_bridge_to_agent(acp_mcp_bridge *b,
                                             const char *data, size_t len,
                                             const char **out);
/**
 * As acp_mcp_bridge_to_agent(), for the router's output in pieces
 * (acp_router_send_iov()): `in[0..nin)` are whole lines, each ending with a
 * newline, cut anywhere. When nothing in them is for the bridge, `*out` is
 * `in` itself and `*nout` is `nin`: the pieces are not joined, and a large
 * text borrowed from the router's input goes to the agent without a copy.
 * Otherwise they are joined and filtered as acp_mcp_bridge_to_agent() does,
 * and `*out` is one piece owned by the bridge (valid until its next call);
 * `*nout` is 0 when nothing is to be written now.
 * @return the bytes to write (the sum of the output pieces), or
 *         ACP_ERR_INVALID_ARGUMENT (a NULL argument, a NULL piece with a
 *         length, or more than PTRDIFF_MAX bytes), ACP_ERR_NOMEM (fatal
 *         for the bridge: only _free may follow).
 */
ACP_EXTERN acp_ssize acp_mcp_bridge_to_agent_iov(acp_mcp_bridge *b,
                                                 const acp_rpc_iov *in,
                                                 size_t nin,
                                                 const acp_rpc_iov **out,
                                                 size_t *nout);
/** Nonzero when held lines may now be written (the agent answered
 * initialize): take them with acp_mcp_bridge_release(). */
ACP_EXTERN int acp_mcp_bridge_want_release(const acp_mcp_bridge *b);
/** The held lines, rewritten as the agent's capabilities say. Returns as
 * acp_mcp_bridge_to_agent(). */
ACP_EXTERN acp_ssize acp_mcp_bridge_release(acp_mcp_bridge *b,
                                            const char **out);

/**
 * One line from the agent (no newline), before it is routed. Sets `*out`
 * to the line to route (`line` itself, or the initialize answer with
 * `mcpCapabilities.acp` added) and returns its length.
 * @return bytes, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM.
 */
ACP_EXTERN acp_ssize acp_mcp_bridge_from_agent(acp_mcp_bridge *b,
                                               const char *line, size_t len,
                                               const char **out);
/** Nonzero once the agent said it speaks MCP-over-ACP itself. */
ACP_EXTERN int acp_mcp_bridge_agent_native(const acp_mcp_bridge *b);

/**
 * Take the lines to feed to the router on the agent's link (whole lines).
 * @return bytes (0: none), or ACP_ERR_INVALID_ARGUMENT.
 */
ACP_EXTERN acp_ssize acp_mcp_bridge_send(acp_mcp_bridge *b, const char **data);

/** A new endpoint connected. @return 0, ACP_ERR_INVALID_ARGUMENT or
 * ACP_ERR_NOMEM. `*out` is its id (never 0). */
ACP_EXTERN int acp_mcp_bridge_endpoint_new(acp_mcp_bridge *b, uint64_t *out);
/**
 * Bytes from endpoint `endpoint`, framed by acp_ndjson (acp/ndjson.h): a
 * token line (at most 128 bytes), then MCP lines. A wrong or over-long token
 * line closes the endpoint (endpoint_close callback). An MCP line over the
 * cap is answered on the endpoint (endpoint_write callback) with
 * acp_ndjson_overlong_reply(), as every libacp component answers it, and
 * dropped; the endpoint goes on.
 * @return 0, ACP_ERR_NOT_FOUND (no such endpoint: already closed),
 *         ACP_ERR_NOMEM (fatal).
 */
ACP_EXTERN int acp_mcp_bridge_endpoint_recv(acp_mcp_bridge *b,
                                            uint64_t endpoint, const char *data,
                                            size_t len);
/** Nonzero once the endpoint's token was accepted. */
ACP_EXTERN int acp_mcp_bridge_endpoint_accepted(const acp_mcp_bridge *b,
                                                uint64_t endpoint);
/** The endpoint ended (EOF, error): the provider gets mcp/disconnect when
 * the connection was open. No close callback. Unknown ids are ignored. */
ACP_EXTERN void acp_mcp_bridge_endpoint_closed(acp_mcp_bridge *b,
                                               uint64_t endpoint);
/** Endpoints open. */
ACP_EXTERN size_t acp_mcp_bridge_endpoint_count(const acp_mcp_bridge *b);

/**
 * The provider of server `server_id` (decoded, `len` bytes) is gone: the
 * requests its endpoints sent that are still pending get the MCP error
 * -33001 (ACP_MCP_ACP_SERVER_UNAVAILABLE) with a message naming `reason`
 * (may be NULL), their MCP-over-ACP connections are closed (nothing more is
 * written to the router for them), the token is revoked (new endpoints are
 * refused). The endpoints themselves stay until they end, every further
 * request answered with the same error at once, so that the agent's MCP
 * client learns why instead of seeing its server vanish mid-call.
 * @return the number of servers removed (0 or 1).
 */
ACP_EXTERN int acp_mcp_bridge_server_gone(acp_mcp_bridge *b,
                                          const char *server_id, size_t len,
                                          const char *reason);

#ifdef __cplusplus
}
#endif

#endif /* ACP_MCP_BRIDGE_H */
