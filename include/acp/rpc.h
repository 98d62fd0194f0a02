/*
 * libacp - JSON-RPC 2.0 session over newline-delimited JSON (sans I/O).
 *
 * One acp_rpc_session per connection. It does no I/O and reads no clock:
 *
 *   - feed received bytes with acp_rpc_session_recv(s, data, len, now_ms);
 *   - take bytes to transmit with acp_rpc_session_send(s, &out);
 *   - stop when acp_rpc_session_want_read() and _want_write() both return 0;
 *   - drive request deadlines with acp_rpc_session_get_expiry() and
 *     acp_rpc_session_handle_expiry(s, now_ms).
 *
 * Framing is one JSON text per line ('\n'; a preceding '\r' is tolerated);
 * outgoing messages never contain a raw newline. The two directions have
 * independent id spaces: ids this session allocates for its own requests
 * (integers counting from 0) never collide with the peer's ids, whatever
 * they are.
 *
 * Bad input never ends a connection that can continue: an unparsable line
 * (or invalid UTF-8) is answered with -32700 and id null, a JSON value that
 * is not a valid message with -32600, a request with no handler with
 * -32601, an over-long line is skipped and answered with -32600 and id null;
 * unknown notifications are ignored. Each of these is also reported through
 * the on_protocol_error callback.
 *
 * Callbacks run inside acp_rpc_session_recv() (and _handle_expiry(),
 * _recv_eof()). They may submit messages (request, notify, respond, cancel)
 * but must not call _recv, _send, _handle_expiry, _recv_eof or _free on the
 * same session. A callback returns 0 to continue, ACP_ERR_PAUSE to make
 * _recv return early (the bytes not yet consumed are left to the caller),
 * anything else makes the session fail with the fatal
 * ACP_ERR_CALLBACK_FAILURE.
 *
 * Thread-safety: one thread at a time per session.
 */
#ifndef ACP_RPC_H
#define ACP_RPC_H

#include "common.h"
#include "json.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * JSON-RPC error codes used by ACP and MCP. These are protocol data carried
 * in error objects, never returned by a C function. Peers may use any other
 * integer.
 */
typedef enum acp_rpc_errcode {
  ACP_RPC_PARSE_ERROR = -32700,
  ACP_RPC_INVALID_REQUEST = -32600,
  ACP_RPC_METHOD_NOT_FOUND = -32601,
  ACP_RPC_INVALID_PARAMS = -32602,
  ACP_RPC_INTERNAL_ERROR = -32603,
  /** ACP: the request was cancelled ($/cancel_request). */
  ACP_RPC_REQUEST_CANCELLED = -32800,
  /** ACP: authentication required. */
  ACP_RPC_AUTH_REQUIRED = -32000,
  /** ACP and MCP: resource not found. */
  ACP_RPC_RESOURCE_NOT_FOUND = -32002,
  /** Local only: a request's deadline passed before its response came. */
  ACP_RPC_REQUEST_TIMEOUT = -32001,
  /** Local only: the connection closed before the response came. */
  ACP_RPC_CONNECTION_CLOSED = -32099
} acp_rpc_errcode;

/** Kind of a message handed to a callback. */
typedef enum acp_rpc_kind {
  ACP_RPC_REQUEST = 1,
  ACP_RPC_NOTIFICATION = 2,
  ACP_RPC_RESPONSE = 3
} acp_rpc_kind;

/**
 * A received (or locally synthesized) message, as seen by a callback. All
 * pointers are borrowed and valid only during the callback. Copy what you
 * need to keep (an incoming request is answered later through `handle`,
 * which stays valid until answered).
 */
typedef struct acp_rpc_msg {
  acp_rpc_kind kind;
  /** Decoded method name (requests, notifications); NULL for responses. */
  const char *method;
  size_t method_len;
  /** The id (requests, responses); NULL for notifications. */
  const acp_json_val *id;
  /** `params` (requests, notifications), NULL if absent. */
  const acp_json_val *params;
  /** `result` of a successful response, else NULL. */
  const acp_json_val *result;
  /** The `error` object of an error response, else NULL. */
  const acp_json_val *error;
  /** For error responses: code, decoded message, and `data` (or NULL). */
  int64_t error_code;
  const char *error_message;
  size_t error_message_len;
  const acp_json_val *error_data;
  /** The whole message object and its document (for acp_json_doc_str()). */
  const acp_json_val *root;
  acp_json_doc *doc;
  /** The exact bytes of this message (one element when in a batch). */
  const char *raw;
  size_t raw_len;
  /** Requests: the handle to answer with (acp_rpc_session_respond()). */
  uint64_t handle;
  /** True if this message arrived inside a batch (JSON array). */
  bool in_batch;
  /**
   * True if the library synthesized this response (timeout, cancellation
   * with ACP_RPC_CANCEL_COMPLETE, connection closed); `raw` then holds the
   * synthesized JSON.
   */
  bool local;
} acp_rpc_msg;

/** The session. Opaque. */
typedef struct acp_rpc_session acp_rpc_session;

/**
 * Called with each incoming request. Answer now or later with
 * acp_rpc_session_respond() / _respond_error() using msg->handle. If no
 * on_request callback is set, every request is answered -32601.
 */
typedef int (*acp_rpc_on_request_cb)(acp_rpc_session *s,
                                     const acp_rpc_msg *msg, void *user_data);
/** Called with each incoming notification (cancel notifications excluded). */
typedef int (*acp_rpc_on_notification_cb)(acp_rpc_session *s,
                                          const acp_rpc_msg *msg,
                                          void *user_data);
/**
 * Called when the peer cancels one of its requests still unanswered here
 * ($/cancel_request, or notifications/cancelled in MCP style). The request
 * must still be answered (a result, or an error such as -32800).
 */
typedef int (*acp_rpc_on_cancel_cb)(acp_rpc_session *s, uint64_t handle,
                                    void *user_data);
/**
 * Called when bad input was received and answered (or skipped). `code` is
 * the JSON-RPC code used (-32700, -32600, ...) or 0 when nothing was sent
 * (e.g. a response to an unknown id), `msg` a static description.
 */
typedef void (*acp_rpc_on_protocol_error_cb)(acp_rpc_session *s, int code,
                                             const char *msg,
                                             void *user_data);
/**
 * Called once with the response to a request this side sent. Also called
 * with a locally synthesized error response (msg->local) on timeout
 * (-32001), local cancellation (-32800) or connection close (-32099).
 * `user_data` is the pointer given to acp_rpc_session_request().
 */
typedef int (*acp_rpc_response_cb)(acp_rpc_session *s, const acp_rpc_msg *msg,
                                   void *user_data);

/** Callback set. Opaque; new callbacks get new setters (ABI-safe). */
typedef struct acp_rpc_callbacks acp_rpc_callbacks;

/** @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM. */
ACP_EXTERN int acp_rpc_callbacks_new(acp_rpc_callbacks **out);
/** Accepts NULL. */
ACP_EXTERN void acp_rpc_callbacks_free(acp_rpc_callbacks *cbs);
ACP_EXTERN void acp_rpc_callbacks_set_on_request(acp_rpc_callbacks *cbs,
                                                 acp_rpc_on_request_cb cb);
ACP_EXTERN void
acp_rpc_callbacks_set_on_notification(acp_rpc_callbacks *cbs,
                                      acp_rpc_on_notification_cb cb);
ACP_EXTERN void acp_rpc_callbacks_set_on_cancel(acp_rpc_callbacks *cbs,
                                                acp_rpc_on_cancel_cb cb);
ACP_EXTERN void
acp_rpc_callbacks_set_on_protocol_error(acp_rpc_callbacks *cbs,
                                        acp_rpc_on_protocol_error_cb cb);

/** How cancellation of a request is spelled on the wire. */
typedef enum acp_rpc_cancel_style {
  /** ACP: `$/cancel_request {"requestId": ID}` (default). */
  ACP_RPC_CANCEL_STYLE_ACP = 0,
  /** MCP: `notifications/cancelled {"requestId": ID, "reason": ...}`. */
  ACP_RPC_CANCEL_STYLE_MCP = 1
} acp_rpc_cancel_style;

/** Session options. Opaque; NULL options mean all defaults. */
typedef struct acp_rpc_options acp_rpc_options;

ACP_EXTERN int acp_rpc_options_new(acp_rpc_options **out);
ACP_EXTERN void acp_rpc_options_free(acp_rpc_options *opts);
/** Longest accepted line in bytes, newline excluded. Default 64 MiB. */
ACP_EXTERN void acp_rpc_options_set_max_line(acp_rpc_options *opts,
                                             size_t max);
/** Most outgoing requests awaiting a response. Default 65536. */
ACP_EXTERN void acp_rpc_options_set_max_pending(acp_rpc_options *opts,
                                                size_t max);
/** Most incoming requests not yet answered. Default 65536. Beyond it new
 * requests are answered -32603 at once. */
ACP_EXTERN void acp_rpc_options_set_max_incoming(acp_rpc_options *opts,
                                                 size_t max);
/** Cap on buffered, not yet sent output. Default 1 GiB. */
ACP_EXTERN void acp_rpc_options_set_max_output(acp_rpc_options *opts,
                                               size_t max);
/** Accept JSON arrays as batches (default 1). When 0 an array is answered
 * with a single -32600 (as the ACP TypeScript SDK does). */
ACP_EXTERN void acp_rpc_options_set_batches(acp_rpc_options *opts, int on);
/** Maximum JSON nesting depth. Default ACP_JSON_DEFAULT_MAX_DEPTH. */
ACP_EXTERN void acp_rpc_options_set_max_depth(acp_rpc_options *opts,
                                              uint32_t depth);
ACP_EXTERN void acp_rpc_options_set_cancel_style(acp_rpc_options *opts,
                                                 acp_rpc_cancel_style style);

/**
 * Create a session.
 * @param out        receives the session (NULL on failure).
 * @param cbs        callbacks; copied, may be freed after this call. NULL
 *                   means none (every request answered -32601).
 * @param user_data  passed to every session-level callback.
 * @param opts       options; copied. NULL for defaults.
 * @param mem        allocator or NULL. Copied.
 * @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_rpc_session_new(acp_rpc_session **out,
                                   const acp_rpc_callbacks *cbs,
                                   void *user_data,
                                   const acp_rpc_options *opts,
                                   const acp_mem *mem);

/**
 * Free a session. Pending requests are dropped WITHOUT calling their
 * response callbacks (call acp_rpc_session_recv_eof() first to have them
 * completed). Accepts NULL.
 */
ACP_EXTERN void acp_rpc_session_free(acp_rpc_session *s);

ACP_EXTERN void *acp_rpc_session_get_user_data(const acp_rpc_session *s);
ACP_EXTERN void acp_rpc_session_set_user_data(acp_rpc_session *s,
                                              void *user_data);

/**
 * Feed received bytes. Complete lines are parsed and dispatched in order;
 * an incomplete tail is buffered (copied) until its newline arrives. `data`
 * is not kept after the call returns.
 *
 * @return the number of bytes consumed (len, unless a callback returned
 *         ACP_ERR_PAUSE, in which case it is the count up to and including
 *         the line being dispatched), or a fatal code: ACP_ERR_NOMEM,
 *         ACP_ERR_CALLBACK_FAILURE, ACP_ERR_INVALID_STATE (after EOF or a
 *         fatal error).
 */
ACP_EXTERN acp_ssize acp_rpc_session_recv(acp_rpc_session *s,
                                          const char *data, size_t len,
                                          uint64_t now_ms);

/**
 * Tell the session the peer closed its side. A buffered partial line is
 * discarded (reported as a protocol error), then every pending outgoing
 * request completes with a local -32099 error response. Afterwards
 * want_read is 0.
 * @return 0 or a fatal code.
 */
ACP_EXTERN int acp_rpc_session_recv_eof(acp_rpc_session *s, uint64_t now_ms);

/**
 * Take all bytes waiting to be transmitted (whole lines). *data points to
 * memory owned by the session, valid until the next call on this session;
 * the bytes count as sent once returned.
 * @return the number of bytes (0 if nothing is waiting) or a fatal code.
 */
ACP_EXTERN acp_ssize acp_rpc_session_send(acp_rpc_session *s,
                                          const char **data);

/** Nonzero while the session expects more input (not after EOF or fatal). */
ACP_EXTERN int acp_rpc_session_want_read(const acp_rpc_session *s);
/** Nonzero while output is waiting. */
ACP_EXTERN int acp_rpc_session_want_write(const acp_rpc_session *s);

/**
 * Send a request.
 * @param method, method_len  the method name (any bytes; escaped).
 * @param params, params_len  one valid JSON value (copied verbatim, not
 *                            checked), or NULL to omit `params`.
 * @param timeout_ms          0 for no deadline; otherwise the request
 *                            completes with a local -32001 error if no
 *                            response came by now_ms + timeout_ms.
 * @param cb, cb_user_data    response callback (may be NULL to ignore it).
 * @param id_out              optional; receives the id allocated.
 * @return 0, ACP_ERR_LIMIT (max_pending or max_output), ACP_ERR_NOMEM,
 *         ACP_ERR_INVALID_STATE (session failed or closed).
 */
ACP_EXTERN int acp_rpc_session_request(acp_rpc_session *s, const char *method,
                                       size_t method_len, const char *params,
                                       size_t params_len, uint64_t timeout_ms,
                                       uint64_t now_ms, acp_rpc_response_cb cb,
                                       void *cb_user_data, int64_t *id_out);

/** Send a notification. Same params rules and errors as _request(). */
ACP_EXTERN int acp_rpc_session_notify(acp_rpc_session *s, const char *method,
                                      size_t method_len, const char *params,
                                      size_t params_len);

/**
 * Answer an incoming request with a result (one valid JSON value, copied
 * verbatim; NULL means `null`).
 * @return 0, ACP_ERR_NOT_FOUND (no unanswered request with that handle),
 *         ACP_ERR_LIMIT, ACP_ERR_NOMEM, ACP_ERR_INVALID_STATE.
 */
ACP_EXTERN int acp_rpc_session_respond(acp_rpc_session *s, uint64_t handle,
                                       const char *result, size_t result_len);

/**
 * Answer an incoming request with an error object: any integer code, a
 * message (escaped), and optional `data` (one valid JSON value, verbatim, or
 * NULL to omit). Errors as for _respond().
 */
ACP_EXTERN int acp_rpc_session_respond_error(acp_rpc_session *s,
                                             uint64_t handle, int64_t code,
                                             const char *message,
                                             size_t message_len,
                                             const char *data,
                                             size_t data_len);

/** Flags for acp_rpc_session_cancel(). */
enum {
  /** Send the cancel notification to the peer. */
  ACP_RPC_CANCEL_NOTIFY = 1,
  /**
   * Complete the request now with a local -32800 error response and ignore
   * the peer's later answer.
   */
  ACP_RPC_CANCEL_COMPLETE = 2
};

/**
 * Cancel one of this side's pending requests.
 * @return 0, ACP_ERR_NOT_FOUND (no such pending id), ACP_ERR_NOMEM,
 *         ACP_ERR_LIMIT, ACP_ERR_INVALID_STATE, or a fatal code from the
 *         response callback.
 */
ACP_EXTERN int acp_rpc_session_cancel(acp_rpc_session *s, int64_t id,
                                      unsigned flags, uint64_t now_ms);

/** Number of this side's requests awaiting a response. */
ACP_EXTERN size_t acp_rpc_session_pending(const acp_rpc_session *s);

/** Earliest request deadline in ms, or UINT64_MAX if none. */
ACP_EXTERN uint64_t acp_rpc_session_get_expiry(const acp_rpc_session *s);

/**
 * Complete every request whose deadline is <= now_ms with a local -32001
 * error response (and, with ACP style, send $/cancel_request for it).
 * @return 0 or a fatal code.
 */
ACP_EXTERN int acp_rpc_session_handle_expiry(acp_rpc_session *s,
                                             uint64_t now_ms);

/**
 * Queue one already-formed message verbatim (a proxy forwarding bytes). The
 * bytes must be one JSON text without raw newlines; a newline is appended.
 * Not checked beyond the newline rule.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (contains '\n'), ACP_ERR_LIMIT,
 *         ACP_ERR_NOMEM, ACP_ERR_INVALID_STATE.
 */
ACP_EXTERN int acp_rpc_session_send_raw(acp_rpc_session *s, const char *json,
                                        size_t len);

/** A description of the last error on this session ("" if none). */
ACP_EXTERN const char *acp_rpc_session_errmsg(const acp_rpc_session *s);

#ifdef __cplusplus
}
#endif

#endif /* ACP_RPC_H */
