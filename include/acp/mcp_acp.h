/*
 * libacp - MCP over ACP (RFD "MCP-over-ACP"), sans I/O.
 *
 * An MCP server can be offered THROUGH an ACP connection: the component that
 * provides it (the client, or any proxy of a chain) declares it in the
 * `mcpServers` of session/new (load, resume, fork) and answers the MCP
 * traffic that the agent tunnels to it in `mcp/...` messages.
 *
 * PROVIDER (acp_mcp_acp_provider): offers acp_mcp_server registries (the
 * exact server API of mcp.h) over the ACP connection of an acp_client or an
 * acp_proxy. Each `mcp/connect` opens one acp_mcp_conn on a private
 * in-memory session: the MCP requests carried by incoming `mcp/message`
 * requests are fed to it and its answers become the outer answers (inner
 * result = outer result, inner error = outer JSON-RPC error); what the conn
 * sends on its own (notifications, server->client requests) becomes
 * outgoing `mcp/message`. Several connections per server at once, up to
 * ACP_MCP_ACP_MAX_CONNS: one more `mcp/connect` is answered -33001
 * (ACP_MCP_ACP_SERVER_UNAVAILABLE) until one is disconnected.
 *
 * CONSUMER (acp_mcp_acp_consumer): an agent (acp_agent) that advertises
 * `mcpCapabilities.acp` opens connections to declared servers and talks to
 * each with an acp_mcp_client (mcp.h) whose transport is `mcp/message`.
 * It works with providers of every shape, choosing per link:
 *
 *   - the declaration picks the first shape tried (acp_mcp_acp_decl_parse():
 *     an `acp:` URL -> M0, {"type":"acp"} with id, serverId or acpId -> M1);
 *   - a connect answered -32601 (Method not found) moves to the next shape:
 *     M0 -> M1 -> M2. M1 is tried before M2 even for a `serverId`
 *     declaration because libacp's own providers declare that form too and
 *     give a full stateful session over M1; a provider built on the
 *     TypeScript SDK 2.4 knows no mcp/connect and answers -32601 at once.
 *     acp_mcp_acp_link_shape() tells which shape a link ended with.
 *
 * Over M2 the provider speaks only MCP 2026-07-28 (TypeScript SDK 2.4:
 * requests without the `io.modelcontextprotocol/...` `_meta` get an error,
 * so does `initialize`) while acp_mcp_client speaks the 2025 revisions. The
 * consumer translates with the era writers of mcp.h: the client's
 * `initialize` is sent as `server/discover` and answered from its result
 * (or synthesized when the provider answers it -32601); every request gets
 * the 2026 `_meta` (version 2026-07-28, the capabilities and clientInfo of
 * that initialize); `resultType`, `ttlMs` and `cacheScope` are removed from
 * results (an `input_required` result is answered -32603); `ping` is
 * answered by the consumer itself; other notifications of the client are
 * dropped (there is no connection to send them on). Each request gets a
 * fresh `requestId` unique in the consumer, a string of decimal digits (the
 * SDK's schema refuses any other JSON type with -32602). Notifications the
 * provider sends for a request (`mcp/message` {serverId, requestId, method,
 * params}) reach the client while that request runs. Cancellation (the
 * client's notifications/cancelled, or its timeout) sends
 * `$/cancel_request` for the outer request, which the SDK's provider
 * answers -32800; closing an M2 link cancels its requests the same way.
 *
 * WIRE SHAPES. Three are in use (spec/acp/METHODS.md); the provider accepts
 * all and answers each peer in the shape it used:
 *
 *   M1 (seed / RFD, default)
 *     -> mcp/connect {"acpId"|"serverId"|"id": S}   <- {"connectionId": C}
 *     <> mcp/message {"connectionId": C, "method", "params"?}  request or
 *        notification (decided by the outer id), both directions
 *     -> mcp/disconnect {"connectionId": C}          <- {}
 *   M0 (sacp)
 *     -> _mcp/connect {"acp_url": "acp:S"}           <- {"connection_id": C}
 *     <> _mcp/message {"connectionId": C, "method", "params"?}
 *     -> _mcp/disconnect {"connection_id": C} (notification or request)
 *   M2 (connectionless, TypeScript SDK 2.4)
 *     -> mcp/message {"serverId": S, "requestId": R, "method", "params"?}
 *        <- {"result": X} or {"error": {code, message, data?}} (a carrier:
 *        the outer JSON-RPC error is kept for binding failures). The
 *        provider answers each with a fresh conn it initializes itself;
 *        notifications the server emits while the request runs go back as
 *        mcp/message {"serverId": S, "requestId": R, "method", "params"}.
 *
 * Declarations (acp_mcp_acp_decl_json()): {"type":"acp","name":N,"id":S}
 * (default), {"type":"acp","name":N,"serverId":S}, or the M0 form
 * {"type":"http","name":N,"url":"acp:S","headers":[]}. The consumer also
 * accepts {"transport":"acp","id":S} and `acpId`.
 *
 * ROUTING. Server ids are 128 random bits in hex, chosen by the caller (the
 * core reads no OS state); connection ids are "<server id>:<n>", so they
 * are unique along a chain and a proxy can tell its own from those of the
 * components before it: a proxy returns ACP_MCP_ACP_NOT_MINE (equal to
 * ACP_PROXY_FORWARD) for ids it does not know, the client answers them
 * -32602 "Unknown MCP server" / "Unknown MCP connection".
 *
 * CANCELLATION. A tool call is cancelled by the consumer with an
 * `mcp/message` notification `notifications/cancelled` whose `requestId`
 * is the id of the outer `mcp/message` request on this hop (the consumer
 * rewrites its MCP client's request id to that), or with `$/cancel_request`
 * for the outer request. Either way the provider cancels the inner call
 * (its cancel callback runs) and answers the outer request -32800.
 *
 * PUMPING. The private sessions are drained after every dispatched message.
 * A tool that answers LATER (outside the ACP callbacks), or an MCP client
 * request issued by the agent outside them, is transmitted by the next
 * *_flush() call: call it after such work.
 *
 * LIFETIMES. Attach a provider/consumer to one role object; free the
 * provider/consumer AFTER that role object (the role object may hold
 * response callbacks that point into it). Callback contract as mcp.h.
 * Thread-safety: one thread at a time per provider/consumer and its role
 * object.
 */
#ifndef ACP_MCP_ACP_H
#define ACP_MCP_ACP_H

#include <stdint.h>

#include "agent.h"
#include "client.h"
#include "common.h"
#include "json.h"
#include "mcp.h"
#include "proxy.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * JSON-RPC error code of the connectionless binding (TypeScript SDK 2.4,
 * `McpBindingErrorCode.serverUnavailable`): no server with that serverId is
 * offered here. The older shapes answer an unknown server with -32602.
 */
#define ACP_MCP_ACP_SERVER_UNAVAILABLE (-33001)

/** Open `mcp/connect` connections a provider keeps per declared server. */
#define ACP_MCP_ACP_MAX_CONNS 64

/** Returned by the dispatch functions for a message that is not for this
 * provider/consumer (same value as ACP_PROXY_FORWARD). */
#define ACP_MCP_ACP_NOT_MINE 1

/** Wire shape of a connection (see WIRE SHAPES). */
typedef enum acp_mcp_acp_shape {
  ACP_MCP_ACP_SHAPE_M0 = 0, /**< `_mcp/...`, acp: URLs */
  ACP_MCP_ACP_SHAPE_M1 = 1, /**< mcp/connect, mcp/message, mcp/disconnect */
  ACP_MCP_ACP_SHAPE_M2 = 2  /**< connectionless mcp/message */
} acp_mcp_acp_shape;

/** Form of a declaration in `mcpServers`. */
typedef enum acp_mcp_acp_decl_form {
  ACP_MCP_ACP_DECL_ID = 0,        /**< {"type":"acp","name","id"} */
  ACP_MCP_ACP_DECL_SERVER_ID = 1, /**< {"type":"acp","name","serverId"} */
  ACP_MCP_ACP_DECL_URL = 2        /**< {"type":"http","url":"acp:ID",...} */
} acp_mcp_acp_decl_form;

/* MARK: - Provider */

typedef struct acp_mcp_acp_provider acp_mcp_acp_provider;
/** One declared server (a registry offered on one session). Opaque. */
typedef struct acp_mcp_acp_decl acp_mcp_acp_decl;

/**
 * Create a provider.
 * @param out        receives it (NULL on failure).
 * @param user_data  returned by acp_mcp_acp_provider_get_user_data().
 * @param mem        allocator or NULL; copied.
 * @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_mcp_acp_provider_new(acp_mcp_acp_provider **out,
                                        void *user_data, const acp_mem *mem);
/** Free every declaration and connection (no message is sent). Accepts
 * NULL. Free it after the role object it was attached to. */
ACP_EXTERN void acp_mcp_acp_provider_free(acp_mcp_acp_provider *p);
ACP_EXTERN void *
acp_mcp_acp_provider_get_user_data(const acp_mcp_acp_provider *p);

/**
 * Attach to the ACP connection the servers are offered on: an acp_client
 * (the agent connects to the client) or an acp_proxy (the agent side of a
 * proxy). Exactly one, once. Borrowed: it must outlive the provider's use.
 * The role object's handlers must route to the dispatch functions below.
 * @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_INVALID_STATE (attached).
 */
ACP_EXTERN int acp_mcp_acp_provider_attach_client(acp_mcp_acp_provider *p,
                                                  acp_client *client);
ACP_EXTERN int acp_mcp_acp_provider_attach_proxy(acp_mcp_acp_provider *p,
                                                 acp_proxy *proxy);

/**
 * Declare `server` (borrowed; must outlive the declaration) under `name`.
 * @param id          16 random bytes from the caller; the server id is
 *                    their 32 lowercase hex digits.
 * @param session_id  the ACP session it belongs to (copied), or NULL when
 *                    not yet known (session/new: set it from the answer
 *                    with acp_mcp_acp_decl_set_session()).
 * @param out         optional: the declaration (owned by the provider,
 *                    valid until removed or the provider is freed).
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_INVALID_STATE (id already
 *         declared) or ACP_ERR_NOMEM.
 */
ACP_EXTERN int
acp_mcp_acp_provider_declare(acp_mcp_acp_provider *p, acp_mcp_server *server,
                             const char *name, const char *session_id,
                             const uint8_t id[16], acp_mcp_acp_decl **out);
/** The declaration of server id `id` (NUL-terminated), or NULL. */
ACP_EXTERN acp_mcp_acp_decl *
acp_mcp_acp_provider_find(const acp_mcp_acp_provider *p, const char *id);
/**
 * Remove every declaration of `session_id` (the session ended), closing
 * their connections (pending outer requests are answered -32603).
 * @return the number removed, or ACP_ERR_INVALID_ARGUMENT.
 */
ACP_EXTERN int acp_mcp_acp_provider_close_session(acp_mcp_acp_provider *p,
                                                  const char *session_id);
/** Open connections (M0/M1) plus M2 requests in progress. */
ACP_EXTERN size_t
acp_mcp_acp_provider_connection_count(const acp_mcp_acp_provider *p);
/**
 * Transmit what the private sessions produced since the last dispatch
 * (answers given later, notifications). Never from inside a tool handler
 * of the same provider's connections (those are drained anyway).
 * @param now_ms  time base given to the inner sessions.
 * @return 0 or the first error (ACP_ERR_NOMEM, ACP_ERR_LIMIT, a fatal code
 *         from the role object).
 */
ACP_EXTERN int acp_mcp_acp_provider_flush(acp_mcp_acp_provider *p,
                                          uint64_t now_ms);

/** The server id (32 hex digits, NUL-terminated; borrowed). */
ACP_EXTERN const char *acp_mcp_acp_decl_id(const acp_mcp_acp_decl *d);
ACP_EXTERN const char *acp_mcp_acp_decl_name(const acp_mcp_acp_decl *d);
/** The session id, or NULL while unknown. */
ACP_EXTERN const char *acp_mcp_acp_decl_session_id(const acp_mcp_acp_decl *d);
/** Set (copy) the session id. @return 0, ACP_ERR_INVALID_ARGUMENT,
 * ACP_ERR_NOMEM. */
ACP_EXTERN int acp_mcp_acp_decl_set_session(acp_mcp_acp_decl *d,
                                            const char *session_id);
ACP_EXTERN acp_mcp_server *acp_mcp_acp_decl_server(const acp_mcp_acp_decl *d);
ACP_EXTERN void acp_mcp_acp_decl_set_user_data(acp_mcp_acp_decl *d, void *ud);
ACP_EXTERN void *acp_mcp_acp_decl_get_user_data(const acp_mcp_acp_decl *d);
/**
 * The declaration JSON for `mcpServers` in the given form (NUL-terminated).
 * `*json` is borrowed, valid until the next call on `d` or its removal.
 * @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_mcp_acp_decl_json(acp_mcp_acp_decl *d,
                                     acp_mcp_acp_decl_form form,
                                     const char **json, size_t *len);
/** Remove one declaration, closing its connections. Accepts NULL. */
ACP_EXTERN void acp_mcp_acp_decl_remove(acp_mcp_acp_decl *d);

/**
 * Session correlation for tool handlers: the declaration (and its session
 * id) a call or conn came through, or NULL when the conn is not an
 * MCP-over-ACP connection of a provider.
 */
ACP_EXTERN acp_mcp_acp_decl *acp_mcp_acp_conn_decl(const acp_mcp_conn *conn);
ACP_EXTERN acp_mcp_acp_decl *acp_mcp_acp_call_decl(const acp_mcp_call *call);
ACP_EXTERN const char *acp_mcp_acp_call_session_id(const acp_mcp_call *call);
/** The shape of the connection a conn belongs to (M1 if not over ACP). */
ACP_EXTERN acp_mcp_acp_shape acp_mcp_acp_conn_shape(const acp_mcp_conn *conn);

/**
 * Dispatch, acp_client side: call from the client's on_mcp_connect,
 * on_mcp_message, on_mcp_disconnect and on_ext_request handlers (the
 * latter for `_mcp/...`). The request is answered now or later by the
 * provider; unknown server/connection ids are answered -32602.
 * @return 0 (taken), ACP_MCP_ACP_NOT_MINE (not an MCP-over-ACP method: the
 *         caller handles it), or a fatal code (return it from the handler).
 */
ACP_EXTERN int acp_mcp_acp_provider_client_request(acp_mcp_acp_provider *p,
                                                   acp_client_request *req);
/** From on_mcp_message_notification / on_ext_notification. Same returns. */
ACP_EXTERN int acp_mcp_acp_provider_client_notification(acp_mcp_acp_provider *p,
                                                        const acp_rpc_msg *msg);
/** From on_cancel_request. Same returns. */
ACP_EXTERN int acp_mcp_acp_provider_client_cancel(acp_mcp_acp_provider *p,
                                                  acp_client_request *req);
/**
 * Dispatch, acp_proxy side: call from on_from_agent with every message and
 * return its result from the callback (ACP_MCP_ACP_NOT_MINE ==
 * ACP_PROXY_FORWARD: not an MCP-over-ACP message, or an id of another
 * component, to be forwarded toward the client).
 */
ACP_EXTERN int acp_mcp_acp_provider_proxy_msg(acp_mcp_acp_provider *p,
                                              const acp_proxy_msg *msg);
/** From on_cancel. 0 if taken, ACP_MCP_ACP_NOT_MINE otherwise. */
ACP_EXTERN int acp_mcp_acp_provider_proxy_cancel(acp_mcp_acp_provider *p,
                                                 acp_proxy_request *req);

/**
 * Write `params` (a session/new, load, resume or fork params object) with
 * `decl` (one JSON object) appended to its `mcpServers` array (created when
 * absent). Every other member is copied byte for byte.
 * @param w  caller's writer (reset first).
 * @return 0, ACP_ERR_INVALID_ARGUMENT (params not an object, mcpServers not
 *         an array), ACP_ERR_NOMEM, ACP_ERR_LIMIT.
 */
ACP_EXTERN int acp_mcp_acp_params_add_server(acp_json_writer *w,
                                             const acp_json_val *params,
                                             const char *decl, size_t len);

/* MARK: - Capability */

/**
 * Write `caps` (an agentCapabilities object, or NULL for {}) with
 * `mcpCapabilities.acp` set to true, other members kept byte for byte.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (caps not an object), ACP_ERR_NOMEM,
 *         ACP_ERR_LIMIT.
 */
ACP_EXTERN int acp_mcp_acp_caps_enable(acp_json_writer *w, const char *caps,
                                       size_t len);
/** Nonzero if agentCapabilities `caps` has mcpCapabilities.acp == true. */
ACP_EXTERN int acp_mcp_acp_caps_has_acp(const acp_json_val *caps);

/**
 * Recognize an MCP-over-ACP declaration (any accepted form).
 * @param id, id_len  the decoded server id (borrowed from `doc`'s scratch;
 *                    valid until the next acp_json_doc_str on `doc`).
 * @param shape       optional: M0 for the acp: URL form, else M1.
 * @return 0, ACP_ERR_NOT_FOUND (not an acp declaration),
 *         ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_mcp_acp_decl_parse(acp_json_doc *doc,
                                      const acp_json_val *decl, const char **id,
                                      size_t *id_len, acp_mcp_acp_shape *shape);

/* MARK: - Consumer (agent side) */

typedef struct acp_mcp_acp_consumer acp_mcp_acp_consumer;
/** One open (or opening) connection. Opaque. */
typedef struct acp_mcp_acp_link acp_mcp_acp_link;

/**
 * End of mcp/connect: status 0 (connected: start with
 * acp_mcp_client_initialize() and flush), ACP_ERR_PROTOCOL (refused; `msg`
 * is the error response) or ACP_ERR_CLOSED. After a non-zero status the
 * link is freed when the callback returns. `msg` is NULL when the link is
 * connectionless (M2: opened so, or fallen back to after -32601).
 */
typedef int (*acp_mcp_acp_open_cb)(acp_mcp_acp_link *link, int status,
                                   const acp_rpc_msg *msg, void *user_data);

/** @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM. */
ACP_EXTERN int acp_mcp_acp_consumer_new(acp_mcp_acp_consumer **out,
                                        acp_agent *agent, void *user_data,
                                        const acp_mem *mem);
/** Frees every link (no message sent). Accepts NULL. Free it after the
 * agent. */
ACP_EXTERN void acp_mcp_acp_consumer_free(acp_mcp_acp_consumer *c);
ACP_EXTERN void *
acp_mcp_acp_consumer_get_user_data(const acp_mcp_acp_consumer *c);

/**
 * Open a connection to server `server_id` with `client` (borrowed; must
 * outlive the link; no other transport may drive it): sends mcp/connect
 * (M1: {"serverId","acpId"}; M0: _mcp/connect {"acp_url"}), falling back
 * as described under CONSUMER when it is answered -32601. Nothing the
 * client produces is sent before the connection is open. With shape M2
 * nothing is sent: the link is open at once and `cb` runs (status 0, msg
 * NULL) before this returns.
 * @param out  optional: the link (owned by the consumer); set before `cb`
 *             runs.
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM, an error of
 *         acp_agent_call(), or (M2) what `cb` returned.
 */
ACP_EXTERN int
acp_mcp_acp_consumer_open(acp_mcp_acp_consumer *c, const char *server_id,
                          acp_mcp_acp_shape shape, acp_mcp_client *client,
                          acp_mcp_acp_open_cb cb, void *user_data,
                          acp_mcp_acp_link **out);
/**
 * Close: mcp/disconnect (M0: _mcp/disconnect notification), the client
 * gets end of input (its pending requests complete with ACP_ERR_CLOSED),
 * the link is freed. Accepts NULL.
 */
ACP_EXTERN void acp_mcp_acp_link_close(acp_mcp_acp_link *link);
ACP_EXTERN acp_mcp_client *acp_mcp_acp_link_client(acp_mcp_acp_link *link);
/** The shape the link uses now: the one it was opened with until a
 * fallback (see CONSUMER) changed it. M1 for NULL. */
ACP_EXTERN acp_mcp_acp_shape
acp_mcp_acp_link_shape(const acp_mcp_acp_link *link);
/** The connectionId, or NULL before the connection is open and for M2. */
ACP_EXTERN const char *
acp_mcp_acp_link_connection_id(const acp_mcp_acp_link *link);
/** Nonzero once open. */
ACP_EXTERN int acp_mcp_acp_link_is_open(const acp_mcp_acp_link *link);
/** Transmit what the MCP clients produced (see PUMPING). Returns as
 * acp_mcp_acp_provider_flush(). */
ACP_EXTERN int acp_mcp_acp_consumer_flush(acp_mcp_acp_consumer *c,
                                          uint64_t now_ms);
/**
 * Dispatch, agent side: call from on_mcp_message (and on_ext_request for
 * `_mcp/message`), on_mcp_message_notification (and on_ext_notification).
 * Unknown connection ids are answered -32602.
 * @return 0, ACP_MCP_ACP_NOT_MINE or a fatal code.
 */
ACP_EXTERN int acp_mcp_acp_consumer_agent_request(acp_mcp_acp_consumer *c,
                                                  acp_agent_request *req);
ACP_EXTERN int acp_mcp_acp_consumer_agent_notification(acp_mcp_acp_consumer *c,
                                                       const acp_rpc_msg *msg);

#ifdef __cplusplus
}
#endif

#endif /* ACP_MCP_ACP_H */
