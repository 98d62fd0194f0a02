/*
 * libacp - the ACP proxy role (sans I/O): writing a component that sits
 * between a predecessor (toward the client) and a successor (toward the
 * agent) in a proxy chain run by a conductor (RFD "Proxy Chains").
 *
 * An acp_proxy wraps ONE acp_rpc_session: the proxy's single connection to
 * its conductor (stdio in practice). It does no I/O and reads no clock: feed
 * bytes with acp_proxy_recv() (or drive acp_proxy_session() with the uv
 * runtime, e.g. acp_uv_run_stdio(acp_proxy_session(p), ...)).
 *
 * MESSAGE FLOW. The conductor delivers the two directions differently on
 * the same connection, and this library hides the difference:
 *
 *              conductor                      this proxy
 *   client-side traffic  --- plain ACP ----->  on_from_client
 *   (predecessor)       <--- plain ACP ------  acp_proxy_send_to_client,
 *                                              forwarding of agent traffic
 *   agent-side traffic  -- proxy/successor -->  on_from_agent (unwrapped)
 *   (successor)         <- proxy/successor --  acp_proxy_send_to_agent,
 *                                              forwarding of client traffic
 *
 *   - A request or notification that arrives PLAIN comes from the client
 *     side (the predecessor): `session/new`, `session/prompt`,
 *     `session/cancel`, extension methods, ...
 *   - A request or notification that arrives WRAPPED in `proxy/successor
 *     {"method", "params"}` comes from the agent side (the successor):
 *     `session/update`, `session/request_permission`, `fs/read_text_file`,
 *     `terminal/create`, ... Whether the wrapped message is a request or a
 *     notification is decided by the outer envelope's `id`.
 *   - Sending toward the agent = a `proxy/successor` request/notification
 *     to the conductor; its response is the successor's result or error,
 *     unwrapped. Sending toward the client = a plain message.
 *   - Responses are plain in both directions: the response to a
 *     `proxy/successor` request we sent carries the successor's answer; the
 *     response to a plain request we sent carries the client's answer. The
 *     answer we give to a wrapped request from the agent is the inner
 *     result, unwrapped (the conductor routes it back).
 *
 * Forwarding (the default for everything except proxy/initialize) rewrites
 * only the envelope: `params`, `result` and `error` are spliced from the
 * received bytes unchanged (numbers such as 12345678901234567890 or
 * 1.000000000000000000001, key order, escapes, unknown fields and `_meta`
 * arrive exactly as sent). A forwarded request gets a fresh id on the other
 * side (each direction of the connection has its own id space); the answer
 * is returned under the original id, automatically. The envelope `_meta` of
 * a received `proxy/successor` is hop-local: visible in acp_proxy_msg, never
 * forwarded. An error answer is relayed as its exact bytes, except inside a
 * JSON-RPC batch, where it is re-encoded from code, decoded message and the
 * exact `data` bytes (other members of the error object are then lost).
 *
 *   Example (G2), a prompt and a permission request through one proxy:
 *
 *   conductor -> proxy  {"id":5,"method":"session/prompt","params":P}
 *   proxy -> conductor  {"id":1,"method":"proxy/successor",
 *                        "params":{"method":"session/prompt","params":P}}
 *   conductor -> proxy  {"id":9,"method":"proxy/successor","params":{
 *                        "method":"session/request_permission","params":Q}}
 *   proxy -> conductor  {"id":2,"method":"session/request_permission",
 *                        "params":Q}
 *   conductor -> proxy  {"id":2,"result":R}
 *   proxy -> conductor  {"id":9,"result":R}
 *   conductor -> proxy  {"id":1,"result":S}
 *   proxy -> conductor  {"id":5,"result":S}
 *
 * END OF INPUT. acp_proxy_recv_eof() completes the proxy's own pending
 * requests with a local -32099 error; for forwarded requests that error is
 * relayed to the side that sent them (the output may still be read).
 *
 * INITIALIZATION. The component learns that it is a proxy from the method it
 * is initialized with. Three wire generations are accepted (and answered in
 * the spelling received; the same spelling is then used for everything this
 * proxy sends toward its successor):
 *
 *   G2 `proxy/initialize`   -> sends `proxy/successor` (default)
 *   G1 `_proxy/initialize`  -> sends `_proxy/successor`
 *   G0 `initialize` with params `_meta.proxy: true`
 *                           -> sends `_proxy/successor/request` and
 *                              `_proxy/successor/notification`; the answer
 *                              gets `"proxy": true` merged into its `_meta`
 *                              (the G0 handshake).
 *
 * Incoming, every spelling of proxy/successor (`proxy/successor`,
 * `_proxy/successor`, `_proxy/successor/request`,
 * `_proxy/successor/notification`) is accepted at any time. The library
 * answers the initialize request itself, as the RFD requires: it forwards
 * `initialize` with the same params (byte for byte) to the successor, waits
 * for the successor's answer, and answers with it. An error is returned
 * unchanged. A successful result may be edited by the on_initialized
 * callback (acp_proxy_set_init_result()), but `protocolVersion` is always
 * the successor's: the library writes the successor's bytes back into any
 * replacement. A plain `initialize` without the G0 marker (this component is
 * not in a chain) and a second initialize are answered -32600.
 *
 * CANCELLATION. `$/cancel_request {"requestId": X}` is hop-scoped: X names a
 * request received on this connection. When that request was forwarded, the
 * library sends `$/cancel_request` for the id it used (plain, on the same
 * connection: for a request forwarded toward the agent that is the id of
 * the `proxy/successor` request), and the eventual answer (normally -32800)
 * travels back as usual. It is never forwarded as is. A `$/cancel_request`
 * that arrives wrapped is matched the same way against requests received
 * wrapped. The on_cancel callback is told in every case (a request held by
 * the proxy itself must still be answered).
 *
 * CALLBACKS return 0 (handled: the callback forwarded, answered, or kept the
 * message), ACP_PROXY_FORWARD (forward it unchanged; ignored when the
 * callback already forwarded or answered it), ACP_ERR_PAUSE (as 0, and make
 * the current recv return early), anything else is fatal
 * (ACP_ERR_CALLBACK_FAILURE from the recv). No callback set means
 * ACP_PROXY_FORWARD. A request that is neither forwarded nor answered stays
 * HELD: answer it later with acp_proxy_respond*() or forward it later with
 * acp_proxy_request_forward(). Callbacks may call every function here except
 * acp_proxy_recv/send/recv_eof/free.
 *
 * Thread-safety: one thread at a time per proxy.
 */
#ifndef ACP_PROXY_H
#define ACP_PROXY_H

#include "common.h"
#include "json.h"
#include "rpc.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The proxy role object. Opaque. */
typedef struct acp_proxy acp_proxy;

/**
 * A received request awaiting its answer. Owned by the library; valid from
 * the callback that delivers it until it is answered (by the proxy, or by
 * relaying the answer of the side it was forwarded to) or the proxy is
 * freed.
 */
typedef struct acp_proxy_request acp_proxy_request;

/** Callback set for acp_proxy_new(). Opaque; filled through setters. */
typedef struct acp_proxy_callbacks acp_proxy_callbacks;

/** Where a message came from (and so, where forwarding sends it). */
typedef enum acp_proxy_dir {
  /** From the predecessor (client side); forwarded toward the agent. */
  ACP_PROXY_FROM_CLIENT = 1,
  /** From the successor (agent side); forwarded toward the client. */
  ACP_PROXY_FROM_AGENT = 2
} acp_proxy_dir;

/** Proxy-method spelling in use (see INITIALIZATION). */
typedef enum acp_proxy_wire {
  /** `initialize` + `_meta.proxy`, `_proxy/successor/request|notification`.
   */
  ACP_PROXY_WIRE_G0 = 0,
  /** `_proxy/initialize`, `_proxy/successor`. */
  ACP_PROXY_WIRE_G1 = 1,
  /** `proxy/initialize`, `proxy/successor` (the RFD; the default). */
  ACP_PROXY_WIRE_G2 = 2
} acp_proxy_wire;

/** Callback verdict: forward the message unchanged. */
#define ACP_PROXY_FORWARD 1

/**
 * A request or notification as seen by on_from_client / on_from_agent.
 * Everything is borrowed and valid only during the callback (the request
 * object `req` lives on, see acp_proxy_request). For a message that arrived
 * wrapped, `method`/`params` are the INNER ones and `rpc` is the outer
 * envelope as received.
 */
typedef struct acp_proxy_msg {
  /** ACP_PROXY_FROM_CLIENT or ACP_PROXY_FROM_AGENT. */
  acp_proxy_dir from;
  /** ACP_RPC_REQUEST or ACP_RPC_NOTIFICATION. */
  acp_rpc_kind kind;
  /** Decoded method name, NUL-terminated (use method_len). */
  const char *method;
  size_t method_len;
  /** The params value (NULL if absent) and its exact bytes (NULL, 0). */
  const acp_json_val *params;
  const char *params_raw;
  size_t params_len;
  /** Hop-local `_meta` (or `meta`) of a proxy/successor envelope, or NULL. */
  const acp_json_val *envelope_meta;
  /** Requests: the request object (answer or forward it); else NULL. */
  acp_proxy_request *req;
  /** The message as received (outer envelope when wrapped). */
  const acp_rpc_msg *rpc;
  /** The parsed document, for acp_json_doc_str() on the values above. */
  acp_json_doc *doc;
} acp_proxy_msg;

/**
 * Handler for a request or notification from one side. Return 0,
 * ACP_PROXY_FORWARD, ACP_ERR_PAUSE, or a fatal code (see CALLBACKS).
 */
typedef int (*acp_proxy_msg_cb)(acp_proxy *p, const acp_proxy_msg *msg,
                                void *user_data);

/**
 * Called with the answer to a request this proxy FORWARDED (`req` is the
 * original request, still unanswered), before the answer is relayed. `msg`
 * is the response: a real one (result or error, already unwrapped), or a
 * local error (msg->local: -32099 connection closed). Return
 * ACP_PROXY_FORWARD to relay it unchanged; 0 after answering `req` yourself
 * with acp_proxy_respond*() (or to keep it held and answer later).
 */
typedef int (*acp_proxy_response_hook_cb)(acp_proxy *p, acp_proxy_request *req,
                                          const acp_rpc_msg *msg,
                                          void *user_data);

/**
 * Called when the peer cancels a request still unanswered here (after the
 * library forwarded the cancellation, if the request had been forwarded).
 */
typedef int (*acp_proxy_cancel_cb)(acp_proxy *p, acp_proxy_request *req,
                                   void *user_data);

/**
 * Called with the successor's successful InitializeResponse, before the
 * initialize request of this proxy is answered with it. May call
 * acp_proxy_set_init_result() to answer with an edited result. Return 0 to
 * continue (the verdict value is not otherwise used), or a fatal code.
 */
typedef int (*acp_proxy_init_cb)(acp_proxy *p, const acp_rpc_msg *response,
                                 void *user_data);

/**
 * Called with every message received (requests, notifications, responses;
 * not `$/cancel_request`, which the session consumes), before it is
 * dispatched. `from` is where it came from: wrapped messages and answers
 * to our proxy/successor requests come from the agent side, everything
 * else from the client side. A tap: the return value must be 0 (or a
 * fatal code).
 */
typedef int (*acp_proxy_receive_cb)(acp_proxy *p, acp_proxy_dir from,
                                    const acp_rpc_msg *msg, void *user_data);

/**
 * Called once with the response to a request injected with
 * acp_proxy_send_to_agent() / _send_to_client(): the real answer (already
 * unwrapped) or a local error (-32099 connection closed, -32800 cancelled
 * locally). `user_data` is the pointer given when sending.
 */
typedef int (*acp_proxy_response_cb)(acp_proxy *p, const acp_rpc_msg *msg,
                                     void *user_data);

/* MARK: - Callbacks */

/** @return 0, ACP_ERR_INVALID_ARGUMENT (out NULL) or ACP_ERR_NOMEM. */
ACP_EXTERN int acp_proxy_callbacks_new(acp_proxy_callbacks **out);
/** Accepts NULL. */
ACP_EXTERN void acp_proxy_callbacks_free(acp_proxy_callbacks *cbs);
/* Each setter replaces the previous callback; NULL clears it. A NULL `cbs`
 * is a no-op. */
ACP_EXTERN void acp_proxy_callbacks_set_on_from_client(acp_proxy_callbacks *cbs,
                                                       acp_proxy_msg_cb cb);
ACP_EXTERN void acp_proxy_callbacks_set_on_from_agent(acp_proxy_callbacks *cbs,
                                                      acp_proxy_msg_cb cb);
ACP_EXTERN void
acp_proxy_callbacks_set_on_response(acp_proxy_callbacks *cbs,
                                    acp_proxy_response_hook_cb cb);
ACP_EXTERN void acp_proxy_callbacks_set_on_cancel(acp_proxy_callbacks *cbs,
                                                  acp_proxy_cancel_cb cb);
ACP_EXTERN void acp_proxy_callbacks_set_on_initialized(acp_proxy_callbacks *cbs,
                                                       acp_proxy_init_cb cb);
ACP_EXTERN void acp_proxy_callbacks_set_on_receive(acp_proxy_callbacks *cbs,
                                                   acp_proxy_receive_cb cb);

/* MARK: - Lifetime */

/**
 * Create a proxy and its session.
 * @param out        receives the proxy (NULL on failure); free with
 *                   acp_proxy_free().
 * @param cbs        callbacks; copied. NULL: forward everything.
 * @param user_data  passed to every callback.
 * @param opts       session options (copied) or NULL.
 * @param mem        allocator or NULL. Copied.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (out NULL) or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_proxy_new(acp_proxy **out, const acp_proxy_callbacks *cbs,
                             void *user_data, const acp_rpc_options *opts,
                             const acp_mem *mem);

/**
 * Free the proxy, its session and every request object (unanswered requests
 * get no answer; injected requests get no response callback). Accepts NULL.
 */
ACP_EXTERN void acp_proxy_free(acp_proxy *p);

ACP_EXTERN void *acp_proxy_get_user_data(const acp_proxy *p);

/**
 * The underlying session (borrowed; lives as long as the proxy), for the
 * runtime: acp_uv_rpc_new(link, acp_proxy_session(p), ...). Do not replace
 * its user data.
 */
ACP_EXTERN acp_rpc_session *acp_proxy_session(acp_proxy *p);

/** acp_rpc_session_recv() on the proxy's session. */
ACP_EXTERN acp_ssize acp_proxy_recv(acp_proxy *p, const char *data, size_t len,
                                    uint64_t now_ms);
/** acp_rpc_session_send() on the proxy's session. */
ACP_EXTERN acp_ssize acp_proxy_send(acp_proxy *p, const char **data);
/** acp_rpc_session_recv_eof() on the proxy's session. */
ACP_EXTERN int acp_proxy_recv_eof(acp_proxy *p, uint64_t now_ms);

/* MARK: - State */

/** Nonzero once the initialize request was answered successfully. */
ACP_EXTERN int acp_proxy_is_initialized(const acp_proxy *p);

/**
 * The spelling learned from the initialize request (ACP_PROXY_WIRE_G2
 * before one arrived).
 */
ACP_EXTERN acp_proxy_wire acp_proxy_get_wire(const acp_proxy *p);

/**
 * The exact bytes of the successor's InitializeResponse result (before any
 * edit), or NULL (len 0) before it arrived. Borrowed; lives as long as the
 * proxy.
 */
ACP_EXTERN const char *acp_proxy_successor_init_result(const acp_proxy *p,
                                                       size_t *len);

/**
 * Only inside on_initialized: answer the initialize request with `result`
 * (one JSON object, copied) instead of the successor's result. Its
 * `protocolVersion` member is replaced by (or, when missing, set to) the
 * successor's exact bytes; every other member is kept as given.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (not a JSON object),
 *         ACP_ERR_INVALID_STATE (not inside on_initialized), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_proxy_set_init_result(acp_proxy *p, const char *result,
                                         size_t len);

/* MARK: - Forwarding */

/**
 * Forward `msg` to the other side unchanged (byte-exact params). Only during
 * the callback that delivered `msg`. For a request, its answer is relayed
 * back automatically (through on_response when set).
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL), ACP_ERR_INVALID_STATE (the
 *         request was already forwarded or answered, or the session
 *         failed), ACP_ERR_LIMIT, ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_proxy_forward(acp_proxy *p, const acp_proxy_msg *msg);

/**
 * As acp_proxy_forward() with new params: `params` (one valid JSON value,
 * copied verbatim, not checked) or NULL to omit params.
 */
ACP_EXTERN int acp_proxy_forward_transformed(acp_proxy *p,
                                             const acp_proxy_msg *msg,
                                             const char *params, size_t len);

/**
 * Forward a HELD request (one the callback kept) at any later time, with
 * `params` (one valid JSON value, copied; NULL to omit them: the original
 * bytes are not kept). Errors as acp_proxy_forward().
 */
ACP_EXTERN int acp_proxy_request_forward(acp_proxy *p, acp_proxy_request *req,
                                         const char *params, size_t len);

/* MARK: - Answering */

/**
 * Answer a request from either side with a result (one valid JSON value,
 * copied verbatim; NULL means `null`). The request object is released (at
 * the end of the current callback when called from one that received it).
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_INVALID_STATE (already
 *         answered, or forwarded and its answer not yet back),
 *         ACP_ERR_LIMIT, ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_proxy_respond(acp_proxy *p, acp_proxy_request *req,
                                 const char *result, size_t len);

/**
 * Answer with an error object: any code, a NUL-terminated UTF-8 message,
 * optional `data` (one JSON value, verbatim, or NULL). Errors as
 * acp_proxy_respond().
 */
ACP_EXTERN int acp_proxy_respond_error(acp_proxy *p, acp_proxy_request *req,
                                       int64_t code, const char *message,
                                       const char *data, size_t data_len);

/** Where the request came from. */
ACP_EXTERN acp_proxy_dir acp_proxy_request_from(const acp_proxy_request *req);
/** Its (inner) method name, NUL-terminated. Borrowed from `req`. */
ACP_EXTERN const char *acp_proxy_request_method(const acp_proxy_request *req);
/** Nonzero once the peer cancelled it ($/cancel_request). */
ACP_EXTERN int acp_proxy_request_is_cancelled(const acp_proxy_request *req);
/** Nonzero while it is forwarded and its answer not yet back. */
ACP_EXTERN int acp_proxy_request_is_forwarded(const acp_proxy_request *req);
/** A pointer of the caller's, kept with the request (NULL initially). */
ACP_EXTERN void acp_proxy_request_set_user_data(acp_proxy_request *req,
                                                void *user_data);
ACP_EXTERN void *acp_proxy_request_get_user_data(const acp_proxy_request *req);

/* MARK: - Injecting messages */

/**
 * Send a new request toward the agent (wrapped in proxy/successor, in the
 * learned spelling) or toward the client (plain).
 * @param method    NUL-terminated method name.
 * @param params    one valid JSON value (copied, not checked) or NULL.
 * @param cb        response callback or NULL (answer ignored).
 * @param id_out    optional: the id of the request on this connection
 *                  (for acp_proxy_cancel()).
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_LIMIT, ACP_ERR_NOMEM,
 *         ACP_ERR_INVALID_STATE (session failed).
 */
ACP_EXTERN int acp_proxy_send_to_agent(acp_proxy *p, const char *method,
                                       const char *params, size_t params_len,
                                       acp_proxy_response_cb cb,
                                       void *cb_user_data, int64_t *id_out);
ACP_EXTERN int acp_proxy_send_to_client(acp_proxy *p, const char *method,
                                        const char *params, size_t params_len,
                                        acp_proxy_response_cb cb,
                                        void *cb_user_data, int64_t *id_out);

/** Send a notification toward the agent / the client. Errors as above. */
ACP_EXTERN int acp_proxy_notify_agent(acp_proxy *p, const char *method,
                                      const char *params, size_t params_len);
ACP_EXTERN int acp_proxy_notify_client(acp_proxy *p, const char *method,
                                       const char *params, size_t params_len);

/**
 * Cancel a request injected with _send_to_agent / _send_to_client: sends
 * `$/cancel_request` for `id` on this connection; the answer still comes.
 * @return 0, ACP_ERR_NOT_FOUND (no such pending id), ACP_ERR_NOMEM,
 *         ACP_ERR_LIMIT, ACP_ERR_INVALID_STATE.
 */
ACP_EXTERN int acp_proxy_cancel(acp_proxy *p, int64_t id);

#ifdef __cplusplus
}
#endif

#endif /* ACP_PROXY_H */
