/*
 * libacp - the ACP agent role (sans I/O).
 *
 * An acp_agent wraps one acp_rpc_session and turns JSON-RPC traffic into
 * calls to typed handlers, one per agent-side ACP method. It does no I/O and
 * reads no clock: feed bytes with acp_agent_recv(), drain output with
 * acp_agent_send() (or drive the session returned by acp_agent_session()).
 *
 * Incoming requests. Every request handler receives an acp_agent_request,
 * a library-owned object that stays valid until the request is answered with
 * one of the acp_agent_respond*() functions, which may happen inside the
 * handler or any time later (a prompt turn answers only when the turn ends).
 * While the handler runs, acp_agent_request_msg() exposes the whole raw
 * message (bytes, params value, document), so unknown fields and `_meta` are
 * never lost.
 *
 * Routing (documented behaviour):
 *   - a known agent-side method with a handler set goes to that handler;
 *   - a known method without a handler, an extension (`_`-prefixed) method
 *     or any other name goes to on_ext_request / on_ext_notification when
 *     set; otherwise requests are answered -32601 (Method not found) and
 *     notifications ignored;
 *   - `initialize` without a handler is answered by the library with
 *     protocolVersion 1, empty agentCapabilities, empty authMethods and an
 *     agentInfo naming libacp;
 *   - params of a known method are checked against the required members of
 *     the schema type (presence and JSON type). A request that fails is
 *     answered -32602 (Invalid params) with message "Invalid params: <path>:
 *     <reason>" and data {"path": "<path>"}; the handler is not called. A
 *     notification that fails is dropped.
 *   - requests that arrive before `initialize` succeeded are accepted and
 *     routed normally (as the TypeScript and Rust SDKs do); use
 *     acp_agent_is_initialized() to refuse them if you want.
 *
 * Version negotiation: `protocolVersion` must be an integer in [0, 65535]
 * (anything else is -32602). The library answers 1 whatever the client
 * asked for (asking 1 gives 1, asking 65535 gives 1), unless the
 * application opted in to the v2 draft with
 * acp_agent_set_max_protocol_version(): then a client asking 2 or more gets
 * 2. The handler cannot change that: acp_agent_respond() on an initialize
 * request rewrites `protocolVersion` to the negotiated version.
 *
 * Prompt turns. The library tracks the pending `session/prompt` of each ACP
 * session. `session/cancel` for that session marks the turn cancelled and
 * calls on_session_cancel; the handler must then answer the prompt, and
 * acp_agent_respond_prompt() sends stopReason "cancelled" for a cancelled
 * turn whatever reason it is given. Between the response to a CANCELLED
 * prompt and the next `session/prompt` (or `session/load` /
 * `session/resume`) of that session, session/update senders fail with
 * ACP_ERR_INVALID_STATE: the spec requires every update of a cancelled turn
 * to precede its response. Updates outside a turn are otherwise allowed
 * (available_commands_update after session/new, replay in session/load).
 *
 * Under v2 the library answers `session/prompt` itself once the prompt is
 * accepted ({messageId}, then the `user_message` update and `state_update`
 * running), and acp_agent_respond_prompt() ends the turn with `state_update`
 * idle. The prompt counts as accepted as soon as the on_session_prompt
 * handler sends anything (an update, a call, another answer) or returns
 * without having answered; a handler that refuses it first (an unknown
 * session, a busy one) with acp_agent_respond_error() sends a plain JSON-RPC
 * error and no turn. After acceptance acp_agent_respond_error() ends the
 * turn with stopReason "error" (or "cancelled").
 *
 * Callbacks return 0 to continue, ACP_ERR_PAUSE to make the current recv
 * return early, anything else is fatal (ACP_ERR_CALLBACK_FAILURE). They may
 * call every function here except acp_agent_recv/send/recv_eof/
 * handle_expiry/free.
 *
 * Thread-safety: one thread at a time per agent.
 */
#ifndef ACP_AGENT_H
#define ACP_AGENT_H

#include "common.h"
#include "json.h"
#include "rpc.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The agent role object. Opaque. */
typedef struct acp_agent acp_agent;

/**
 * An incoming request awaiting its answer. Owned by the library; valid from
 * the handler call until it is answered (or the agent is freed).
 */
typedef struct acp_incoming_request acp_agent_request;

/** Callback set for acp_agent_new(). Opaque; filled through setters. */
typedef struct acp_agent_callbacks acp_agent_callbacks;

/** Handler for an incoming request. Answer `req` now or later. */
typedef int (*acp_agent_request_cb)(acp_agent *agent, acp_agent_request *req,
                                    void *user_data);

/**
 * Handler for an incoming notification. `msg` and everything it points to
 * are valid only during the call.
 */
typedef int (*acp_agent_notification_cb)(acp_agent *agent,
                                         const acp_rpc_msg *msg,
                                         void *user_data);

/**
 * Handler for `session/cancel`.
 * @param session_id, len  decoded sessionId (not NUL-terminated; valid
 *                          during the call).
 * @param prompt           the pending session/prompt of that session (now
 *                          marked cancelled), or NULL if none is pending.
 * @param msg              the raw notification.
 */
typedef int (*acp_agent_session_cancel_cb)(
    acp_agent *agent, const char *session_id, size_t session_id_len,
    acp_agent_request *prompt, const acp_rpc_msg *msg, void *user_data);

/**
 * Handler for `$/cancel_request` naming a request still unanswered here.
 * The request is marked cancelled and must still be answered (a result or
 * -32800, see acp_agent_respond_cancelled()).
 */
typedef int (*acp_agent_cancel_request_cb)(acp_agent *agent,
                                           acp_agent_request *req,
                                           void *user_data);

/**
 * Called once with the response to a request the agent sent (a real
 * response, or a local error: -32001 timeout, -32800 cancelled, -32099
 * connection closed). `msg` is valid only during the call.
 */
typedef int (*acp_agent_response_cb)(acp_agent *agent, const acp_rpc_msg *msg,
                                     void *user_data);

/**
 * Observer of the `session/update` notifications this agent sends, called
 * once per update after it was queued (never for one that failed), from
 * inside the acp_agent_send_*() call that sent it. For an agent that keeps
 * or persists its sessions' history: the update is exactly the object sent
 * as `params.update` (under v2 with the messageId the library gave a chunk
 * sent without one, so a replay can repeat the id the client saw).
 * @param session_id  NUL-terminated; valid during the call.
 * @param update, len the update object's JSON; valid during the call.
 * The observer must not send anything on `agent` (no re-entrancy).
 */
typedef void (*acp_agent_update_sent_cb)(acp_agent *agent,
                                         const char *session_id,
                                         const char *update, size_t len,
                                         void *user_data);

/* MARK: - Callbacks */

/** @return 0, ACP_ERR_INVALID_ARGUMENT (out NULL) or ACP_ERR_NOMEM. */
ACP_EXTERN int acp_agent_callbacks_new(acp_agent_callbacks **out);
/** Accepts NULL. */
ACP_EXTERN void acp_agent_callbacks_free(acp_agent_callbacks *cbs);

/* Stable request handlers. Each setter replaces the previous handler; NULL
 * clears it. */
ACP_EXTERN void acp_agent_callbacks_set_on_initialize(acp_agent_callbacks *cbs,
                                                      acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_authenticate(acp_agent_callbacks *cbs,
                                        acp_agent_request_cb cb);
ACP_EXTERN void acp_agent_callbacks_set_on_logout(acp_agent_callbacks *cbs,
                                                  acp_agent_request_cb cb);
ACP_EXTERN void acp_agent_callbacks_set_on_session_new(acp_agent_callbacks *cbs,
                                                       acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_session_load(acp_agent_callbacks *cbs,
                                        acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_session_resume(acp_agent_callbacks *cbs,
                                          acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_session_list(acp_agent_callbacks *cbs,
                                        acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_session_delete(acp_agent_callbacks *cbs,
                                          acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_session_close(acp_agent_callbacks *cbs,
                                         acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_session_set_mode(acp_agent_callbacks *cbs,
                                            acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_session_set_config_option(acp_agent_callbacks *cbs,
                                                     acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_session_prompt(acp_agent_callbacks *cbs,
                                          acp_agent_request_cb cb);
/** `session/cancel` (notification). */
ACP_EXTERN void
acp_agent_callbacks_set_on_session_cancel(acp_agent_callbacks *cbs,
                                          acp_agent_session_cancel_cb cb);
/** `$/cancel_request` for an unanswered incoming request. */
ACP_EXTERN void
acp_agent_callbacks_set_on_cancel_request(acp_agent_callbacks *cbs,
                                          acp_agent_cancel_request_cb cb);

/** Observe every `session/update` sent (acp_agent_update_sent_cb). */
ACP_EXTERN void
acp_agent_callbacks_set_on_update_sent(acp_agent_callbacks *cbs,
                                       acp_agent_update_sent_cb cb);

/* Unstable request handlers (schema.unstable.json; the session/set_title,
 * archive, unarchive, status and auth/status ones from the newer copy in
 * spec/acp/schema-sdk-2.4.0). */
ACP_EXTERN void
acp_agent_callbacks_set_on_session_set_title(acp_agent_callbacks *cbs,
                                             acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_session_archive(acp_agent_callbacks *cbs,
                                           acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_session_unarchive(acp_agent_callbacks *cbs,
                                             acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_session_status(acp_agent_callbacks *cbs,
                                          acp_agent_request_cb cb);
ACP_EXTERN void acp_agent_callbacks_set_on_auth_status(acp_agent_callbacks *cbs,
                                                       acp_agent_request_cb cb);
/*
 * ACP v2 only (reached once v2 is negotiated, see
 * acp_agent_set_max_protocol_version()): `auth/login` {methodId},
 * `auth/logout` {}, `tool_call/cancel` {sessionId, toolCallId} and
 * `terminal/cancel` {sessionId, terminalId}. Under v1 these names are
 * extension methods (on_ext_request).
 */
ACP_EXTERN void acp_agent_callbacks_set_on_auth_login(acp_agent_callbacks *cbs,
                                                      acp_agent_request_cb cb);
ACP_EXTERN void acp_agent_callbacks_set_on_auth_logout(acp_agent_callbacks *cbs,
                                                       acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_tool_call_cancel(acp_agent_callbacks *cbs,
                                            acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_terminal_cancel(acp_agent_callbacks *cbs,
                                           acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_session_fork(acp_agent_callbacks *cbs,
                                        acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_providers_list(acp_agent_callbacks *cbs,
                                          acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_providers_set(acp_agent_callbacks *cbs,
                                         acp_agent_request_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_providers_disable(acp_agent_callbacks *cbs,
                                             acp_agent_request_cb cb);
ACP_EXTERN void acp_agent_callbacks_set_on_nes_start(acp_agent_callbacks *cbs,
                                                     acp_agent_request_cb cb);
ACP_EXTERN void acp_agent_callbacks_set_on_nes_suggest(acp_agent_callbacks *cbs,
                                                       acp_agent_request_cb cb);
ACP_EXTERN void acp_agent_callbacks_set_on_nes_close(acp_agent_callbacks *cbs,
                                                     acp_agent_request_cb cb);
/** `mcp/message` sent as a request. */
ACP_EXTERN void acp_agent_callbacks_set_on_mcp_message(acp_agent_callbacks *cbs,
                                                       acp_agent_request_cb cb);

/* Unstable notification handlers. */
ACP_EXTERN void
acp_agent_callbacks_set_on_nes_accept(acp_agent_callbacks *cbs,
                                      acp_agent_notification_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_nes_reject(acp_agent_callbacks *cbs,
                                      acp_agent_notification_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_document_did_open(acp_agent_callbacks *cbs,
                                             acp_agent_notification_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_document_did_change(acp_agent_callbacks *cbs,
                                               acp_agent_notification_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_document_did_close(acp_agent_callbacks *cbs,
                                              acp_agent_notification_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_document_did_save(acp_agent_callbacks *cbs,
                                             acp_agent_notification_cb cb);
ACP_EXTERN void
acp_agent_callbacks_set_on_document_did_focus(acp_agent_callbacks *cbs,
                                              acp_agent_notification_cb cb);
/** `mcp/message` sent as a notification. */
ACP_EXTERN void acp_agent_callbacks_set_on_mcp_message_notification(
    acp_agent_callbacks *cbs, acp_agent_notification_cb cb);

/** Any request not routed to a typed handler (see routing above). */
ACP_EXTERN void acp_agent_callbacks_set_on_ext_request(acp_agent_callbacks *cbs,
                                                       acp_agent_request_cb cb);
/** Any notification not routed to a typed handler. */
ACP_EXTERN void
acp_agent_callbacks_set_on_ext_notification(acp_agent_callbacks *cbs,
                                            acp_agent_notification_cb cb);

/* MARK: - Lifecycle */

/**
 * Create an agent with its own JSON-RPC session.
 * @param out        receives the agent (NULL on failure); free with
 *                   acp_agent_free().
 * @param cbs        handlers; copied (may be freed after the call). NULL
 *                   means none (initialize answered by default, all other
 *                   requests -32601).
 * @param user_data  passed to every handler.
 * @param opts       options of the underlying session, or NULL. Copied.
 * @param mem        allocator or NULL. Copied.
 * @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_agent_new(acp_agent **out, const acp_agent_callbacks *cbs,
                             void *user_data, const acp_rpc_options *opts,
                             const acp_mem *mem);

/**
 * Opt in to the ACP v2 draft. With version ACP_PROTOCOL_V2 an `initialize`
 * that asks for 2 or more is answered 2 (one that asks for 1 or 0 still gets
 * 1); with ACP_PROTOCOL_V1 (the default) every initialize is answered 1.
 * Once a v2 initialize is answered, incoming messages are checked and
 * dispatched with the v2 method table (acp_method_by_name_version()): v1-only
 * methods (session/load, authenticate...) go to on_ext_request or get
 * -32601, and the default initialize answer uses the v2 member names
 * (`capabilities`, `info`). Call before the initialize request arrives.
 *
 * @return 0, or ACP_ERR_INVALID_ARGUMENT for a NULL agent or a version other
 *         than 1 or 2.
 */
ACP_EXTERN int acp_agent_set_max_protocol_version(acp_agent *agent,
                                                  int version);

/**
 * Free the agent, its session and every unanswered request object. Pending
 * outgoing calls are dropped without calling their callbacks (call
 * acp_agent_recv_eof() first to complete them). Accepts NULL.
 */
ACP_EXTERN void acp_agent_free(acp_agent *agent);

/** The user_data given to acp_agent_new(). */
ACP_EXTERN void *acp_agent_get_user_data(const acp_agent *agent);

/**
 * The underlying session (borrowed, lives as long as the agent). A runtime
 * may drive it directly (recv, send, expiry). Do not replace its callbacks
 * or user data.
 */
ACP_EXTERN acp_rpc_session *acp_agent_session(acp_agent *agent);

/**
 * Feed received bytes; see acp_rpc_session_recv(). `now_ms` is also kept as
 * the time base of deadlines of later calls (acp_agent_set_call_timeout()).
 * @return bytes consumed or a fatal code.
 */
ACP_EXTERN acp_ssize acp_agent_recv(acp_agent *agent, const char *data,
                                    size_t len, uint64_t now_ms);
/** Take bytes to transmit; see acp_rpc_session_send(). */
ACP_EXTERN acp_ssize acp_agent_send(acp_agent *agent, const char **data);
/** The peer closed; see acp_rpc_session_recv_eof(). */
ACP_EXTERN int acp_agent_recv_eof(acp_agent *agent, uint64_t now_ms);
/**
 * The client went away and another may come back to this agent (a parked
 * remote connection): the agent's calls to it (permission questions, file
 * and terminal requests...) complete with -32099 "Connection closed"; see
 * acp_rpc_session_drop_pending().
 */
ACP_EXTERN int acp_agent_drop_calls(acp_agent *agent);
/** Handle call deadlines; see acp_rpc_session_handle_expiry(). */
ACP_EXTERN int acp_agent_handle_expiry(acp_agent *agent, uint64_t now_ms);
/**
 * Deadline of later outgoing calls, in ms after the last `now_ms` passed to
 * acp_agent_recv() or acp_agent_handle_expiry(). 0 (default) = none.
 */
ACP_EXTERN void acp_agent_set_call_timeout(acp_agent *agent,
                                           uint64_t timeout_ms);

/** Nonzero once an `initialize` request was answered successfully. */
ACP_EXTERN int acp_agent_is_initialized(const acp_agent *agent);
/** The negotiated protocol version (1), or 0 before initialize. */
ACP_EXTERN int acp_agent_protocol_version(const acp_agent *agent);

/* MARK: - Incoming requests */

/**
 * The raw request (kind, method, id, params, exact bytes, document).
 * Borrowed; non-NULL only while the request's handler (or the cancel
 * handler) runs, NULL afterwards.
 */
ACP_EXTERN const acp_rpc_msg *
acp_agent_request_msg(const acp_agent_request *req);
/** `params` of the request while its handler runs, else NULL. */
ACP_EXTERN const acp_json_val *
acp_agent_request_params(const acp_agent_request *req);
/**
 * The method name, NUL-terminated, valid until the request is answered.
 */
ACP_EXTERN const char *acp_agent_request_method(const acp_agent_request *req);
/**
 * The decoded `sessionId` param (NUL-terminated copy) or NULL if the
 * request has none. Valid until the request is answered.
 */
ACP_EXTERN const char *
acp_agent_request_session_id(const acp_agent_request *req);
/**
 * Decode a top-level string param while the handler runs.
 * @param s, len  receive the decoded bytes (borrowed, valid during the
 *                handler, not NUL-terminated).
 * @return 0, ACP_ERR_NOT_FOUND (absent), ACP_ERR_TYPE (not a string),
 *         ACP_ERR_INVALID_STATE (handler returned) or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_agent_request_param_str(const acp_agent_request *req,
                                           const char *key, const char **s,
                                           size_t *len);
/**
 * Decode the request's params into the generated struct of its method in
 * the negotiated protocol version: types.h for v1, types_v2.h for v2 (e.g.
 * `acp_v2_cancel_tool_call_request` for `tool_call/cancel`, see
 * acp_method_params_desc_version()). Only while the handler runs.
 *
 * @param arena  receives the struct and unescaped strings; the struct also
 *               points into the message, so use it only during the handler.
 * @param out    receives a pointer to the struct (NULL on failure); cast it
 *               to the method's type.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (a NULL argument),
 *         ACP_ERR_INVALID_STATE (handler returned), ACP_ERR_NOT_FOUND (an
 *         extension method, or params that are free-form JSON),
 *         ACP_ERR_PARSE (params do not match the schema; under v2 the role
 *         already answered such a request -32602) or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_agent_request_decode(const acp_agent_request *req,
                                        acp_arena *arena, const void **out);
/** For `initialize`: the protocolVersion the client asked for, else -1. */
ACP_EXTERN int64_t
acp_agent_request_protocol_version(const acp_agent_request *req);
/** Nonzero if the request was cancelled (`$/cancel_request`, or
 * `session/cancel` for a prompt). */
ACP_EXTERN int acp_agent_request_is_cancelled(const acp_agent_request *req);

/* MARK: - Answers
 *
 * Each function answers `req` once; afterwards `req` is freed (at once, or
 * when its handler returns if answered inside it). Errors: 0,
 * ACP_ERR_INVALID_ARGUMENT (NULL or non-JSON-compatible text),
 * ACP_ERR_INVALID_STATE (already answered, or session failed),
 * ACP_ERR_LIMIT, ACP_ERR_NOMEM. On error `req` stays unanswered.
 */

/**
 * Answer with a result: one valid JSON value (not checked; NULL means
 * `null`). For `initialize` the value must be an object; its
 * `protocolVersion` is set to the negotiated version (added or rewritten).
 * A v2 `session/prompt` is answered by the library (see above):
 * ACP_ERR_INVALID_STATE; end its turn with acp_agent_respond_prompt().
 */
ACP_EXTERN int acp_agent_respond(acp_agent *agent, acp_agent_request *req,
                                 const char *result, size_t result_len);
/**
 * Answer with an error object: any code, a message (NUL-terminated, NULL
 * for a standard one), optional `data` (one JSON value or NULL).
 */
ACP_EXTERN int acp_agent_respond_error(acp_agent *agent, acp_agent_request *req,
                                       int64_t code, const char *message,
                                       const char *data, size_t data_len);
/** Answer -32800 "Request cancelled". */
ACP_EXTERN int acp_agent_respond_cancelled(acp_agent *agent,
                                           acp_agent_request *req);
/** Answer `{}`. */
ACP_EXTERN int acp_agent_respond_empty(acp_agent *agent,
                                       acp_agent_request *req);
/**
 * The `clientCapabilities` object the client sent in `initialize`: its exact
 * bytes (not NUL-terminated), borrowed until the next initialize or
 * acp_agent_free(); NULL (and *len 0) before initialize or when absent.
 */
ACP_EXTERN const char *acp_agent_client_capabilities(const acp_agent *agent,
                                                     size_t *len);
/**
 * Did the client say it handles `path` (dot-separated members of its
 * clientCapabilities, e.g. "session.configOptions.boolean", "terminal",
 * "fs.readTextFile")? Nonzero when that member is present and is neither
 * null nor false; 0 before initialize. What an agent offers must follow
 * this: for example a `type: "boolean"` config option goes only to clients
 * for which "session.configOptions.boolean" holds. Uses the agent's scratch
 * document: not from inside a callback that still reads a value parsed
 * with acp_json_doc_* on that document (the request's own params are safe).
 */
ACP_EXTERN int acp_agent_client_supports(acp_agent *agent, const char *path);

/**
 * Answer `initialize` with {"protocolVersion":1, "agentCapabilities":
 * caps, "agentInfo": info, "authMethods": auth}. Each raw JSON value may be
 * NULL for the default ({}; libacp's name and version; []).
 */
ACP_EXTERN int acp_agent_respond_initialize(acp_agent *agent,
                                            acp_agent_request *req,
                                            const char *caps, size_t caps_len,
                                            const char *info, size_t info_len,
                                            const char *auth, size_t auth_len);
/**
 * Answer `session/new` (or session/fork) with {"sessionId": id} plus the
 * members of `extra` (a raw JSON object such as {"modes":...}, or NULL).
 */
ACP_EXTERN int acp_agent_respond_session_new(acp_agent *agent,
                                             acp_agent_request *req,
                                             const char *session_id,
                                             const char *extra,
                                             size_t extra_len);
/**
 * End a prompt turn: answer `session/prompt` with {"stopReason": reason}
 * and, when `usage` (raw JSON object) is not NULL, "usage": usage. If the
 * turn was cancelled, "cancelled" is sent whatever `stop_reason` says.
 * @param stop_reason  "end_turn", "max_tokens", "max_turn_requests",
 *                     "refusal" or "cancelled" (others are sent as given).
 */
ACP_EXTERN int acp_agent_respond_prompt(acp_agent *agent,
                                        acp_agent_request *req,
                                        const char *stop_reason,
                                        const char *usage, size_t usage_len);

/* MARK: - Calls to the client
 *
 * Each sends one request and calls `cb` once with its response; `cb` may be
 * NULL. `id_out` (optional) receives the request id, usable with
 * acp_agent_cancel_call(). String arguments are NUL-terminated UTF-8;
 * `_json` arguments are one raw JSON value (ptr, len), spliced unchanged,
 * NULL to omit. Errors: 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_LIMIT,
 * ACP_ERR_NOMEM, ACP_ERR_INVALID_STATE (session failed or closed).
 */

/** Any request: `params` raw JSON or NULL. */
ACP_EXTERN int acp_agent_call(acp_agent *agent, const char *method,
                              const char *params, size_t params_len,
                              acp_agent_response_cb cb, void *cb_user_data,
                              int64_t *id_out);
/** Any notification. */
ACP_EXTERN int acp_agent_notify(acp_agent *agent, const char *method,
                                const char *params, size_t params_len);
/** Send `$/cancel_request` for one of our pending calls (kept pending). */
ACP_EXTERN int acp_agent_cancel_call(acp_agent *agent, int64_t id);

/**
 * `session/request_permission` {sessionId, toolCall, options}. Under v2 the
 * same call sends the v2 shape {sessionId, title, subject: {type:
 * "tool_call", toolCall}, options}, `title` taken from the tool call's
 * (else "Permission requested"); `tool_call_json` must then be a JSON
 * object (else ACP_ERR_INVALID_ARGUMENT). A v2 agent whose turn cannot go
 * on without the answer should report it with acp_agent_send_state()
 * "requires_action" before and "running" after.
 */
ACP_EXTERN int acp_agent_request_permission(
    acp_agent *agent, const char *session_id, const char *tool_call_json,
    size_t tool_call_len, const char *options_json, size_t options_len,
    acp_agent_response_cb cb, void *cb_user_data, int64_t *id_out);
/** `fs/read_text_file` {sessionId, path, line?, limit?}; 0 omits. */
ACP_EXTERN int acp_agent_fs_read_text_file(acp_agent *agent,
                                           const char *session_id,
                                           const char *path, uint32_t line,
                                           uint32_t limit,
                                           acp_agent_response_cb cb,
                                           void *cb_user_data, int64_t *id_out);
/** `fs/write_text_file` {sessionId, path, content}. */
ACP_EXTERN int
acp_agent_fs_write_text_file(acp_agent *agent, const char *session_id,
                             const char *path, const char *content,
                             size_t content_len, acp_agent_response_cb cb,
                             void *cb_user_data, int64_t *id_out);
/**
 * `terminal/create` {sessionId, command, args?} plus the members of
 * `extra` (raw object: env, cwd, outputByteLimit, _meta...) or NULL.
 */
ACP_EXTERN int acp_agent_terminal_create(
    acp_agent *agent, const char *session_id, const char *command,
    const char *args_json, size_t args_len, const char *extra, size_t extra_len,
    acp_agent_response_cb cb, void *cb_user_data, int64_t *id_out);
/** `terminal/output` {sessionId, terminalId}. */
ACP_EXTERN int acp_agent_terminal_output(acp_agent *agent,
                                         const char *session_id,
                                         const char *terminal_id,
                                         acp_agent_response_cb cb,
                                         void *cb_user_data, int64_t *id_out);
/** `terminal/wait_for_exit` {sessionId, terminalId}. */
ACP_EXTERN int acp_agent_terminal_wait_for_exit(
    acp_agent *agent, const char *session_id, const char *terminal_id,
    acp_agent_response_cb cb, void *cb_user_data, int64_t *id_out);
/** `terminal/kill` {sessionId, terminalId}. */
ACP_EXTERN int acp_agent_terminal_kill(acp_agent *agent, const char *session_id,
                                       const char *terminal_id,
                                       acp_agent_response_cb cb,
                                       void *cb_user_data, int64_t *id_out);
/** `terminal/release` {sessionId, terminalId}. */
ACP_EXTERN int acp_agent_terminal_release(acp_agent *agent,
                                          const char *session_id,
                                          const char *terminal_id,
                                          acp_agent_response_cb cb,
                                          void *cb_user_data, int64_t *id_out);
/** `elicitation/create` with raw params (form or url mode). */
ACP_EXTERN int
acp_agent_elicitation_create(acp_agent *agent, const char *params,
                             size_t params_len, acp_agent_response_cb cb,
                             void *cb_user_data, int64_t *id_out);
/** `elicitation/complete` notification {elicitationId}. */
ACP_EXTERN int acp_agent_elicitation_complete(acp_agent *agent,
                                              const char *elicitation_id);

/**
 * `auth/status_update` notification {state, accounts?} (unstable): `state`
 * one of "authenticated", "unauthenticated", "not_required", "unknown" (or
 * an `_`-prefixed extension), `accounts` a raw AuthAccount[] array or NULL
 * to omit. Send it only to a client after `initialize`, when the state
 * differs from the last one sent. Errors: 0, ACP_ERR_INVALID_ARGUMENT
 * (agent or state NULL), ACP_ERR_INVALID_STATE (the rpc session failed),
 * ACP_ERR_LIMIT, ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_agent_send_auth_status_update(acp_agent *agent,
                                                 const char *state,
                                                 const char *accounts,
                                                 size_t accounts_len);

/* MARK: - session/update senders
 *
 * Each sends one `session/update` notification {sessionId, update}. The
 * update object holds `sessionUpdate`, the minimal fields given, then the
 * members of `extra` (a raw JSON object such as {"messageId":"m1",
 * "_meta":{...}}, or NULL) spliced unchanged. Errors: 0,
 * ACP_ERR_INVALID_ARGUMENT (NULL where required, extra not an object, text
 * not UTF-8), ACP_ERR_INVALID_STATE (the session's last prompt was
 * cancelled and answered, see above; or the rpc session failed),
 * ACP_ERR_LIMIT, ACP_ERR_NOMEM.
 */

/**
 * Any update: `update` is the raw update object, spliced unchanged after it
 * is checked to be one valid JSON object (ACP_ERR_INVALID_ARGUMENT if not).
 */
ACP_EXTERN int acp_agent_send_update_raw(acp_agent *agent,
                                         const char *session_id,
                                         const char *update, size_t update_len);
/** `agent_message_chunk` with a text content block. */
ACP_EXTERN int acp_agent_send_message_chunk(acp_agent *agent,
                                            const char *session_id,
                                            const char *text, size_t text_len,
                                            const char *extra,
                                            size_t extra_len);
/**
 * `agent_message_chunk` whose text is `text`, a string value of a parsed
 * message and `doc` its document (an echo of a prompt's text block: the
 * request's acp_rpc_msg doc). The raw text is spliced as it came, without
 * decoding and escaping it again, when acp_json_str_passthrough() allows
 * (a 1 MiB text then costs one copy and no scan); otherwise it is decoded
 * and sent as acp_agent_send_message_chunk() would. `doc` must outlive the
 * call only. Errors as above, and ACP_ERR_TYPE (text not a string).
 */
ACP_EXTERN int
acp_agent_send_message_chunk_val(acp_agent *agent, const char *session_id,
                                 acp_json_doc *doc, const acp_json_val *text,
                                 const char *extra, size_t extra_len);
/** `agent_thought_chunk` with a text content block. */
ACP_EXTERN int acp_agent_send_thought_chunk(acp_agent *agent,
                                            const char *session_id,
                                            const char *text, size_t text_len,
                                            const char *extra,
                                            size_t extra_len);
/** `user_message_chunk` with a text content block (history replay). */
ACP_EXTERN int
acp_agent_send_user_message_chunk(acp_agent *agent, const char *session_id,
                                  const char *text, size_t text_len,
                                  const char *extra, size_t extra_len);
/** `tool_call` {toolCallId, title, kind?, status?}; NULL omits. Under v2
 * the update kind is `tool_call_update` (v2's one tool call upsert). */
ACP_EXTERN int acp_agent_send_tool_call(acp_agent *agent,
                                        const char *session_id,
                                        const char *tool_call_id,
                                        const char *title, const char *kind,
                                        const char *status, const char *extra,
                                        size_t extra_len);
/** `tool_call_update` {toolCallId, status?}. */
ACP_EXTERN int
acp_agent_send_tool_call_update(acp_agent *agent, const char *session_id,
                                const char *tool_call_id, const char *status,
                                const char *extra, size_t extra_len);
/** `plan` {entries}: `entries` raw JSON array. Under v2 (which has no
 * bare `plan`): acp_agent_send_plan_update() with plan id "plan". */
ACP_EXTERN int acp_agent_send_plan(acp_agent *agent, const char *session_id,
                                   const char *entries, size_t entries_len);
/** `plan_update` {plan: {type: "items", planId, entries}}: one of several
 * plans, told apart by `plan_id` (v2; v1 unstable). Each update carries
 * the plan's complete entry list (raw JSON array). */
ACP_EXTERN int acp_agent_send_plan_update(acp_agent *agent,
                                          const char *session_id,
                                          const char *plan_id,
                                          const char *entries,
                                          size_t entries_len);
/**
 * v2 only: `state_update` {state} without a stop reason, for the states the
 * application decides: "requires_action" (the turn waits on the user, e.g.
 * around a permission request) and "running" (it goes on). The library
 * itself reports "running" when it accepts a prompt and "idle" with the
 * stop reason when acp_agent_respond_prompt() ends the turn. Errors as
 * above, and ACP_ERR_INVALID_STATE when the connection speaks v1.
 */
ACP_EXTERN int acp_agent_send_state(acp_agent *agent, const char *session_id,
                                    const char *state);
/** `available_commands_update` {availableCommands}: raw array. */
ACP_EXTERN int acp_agent_send_available_commands(acp_agent *agent,
                                                 const char *session_id,
                                                 const char *commands,
                                                 size_t commands_len);
/** `current_mode_update` {currentModeId}. */
ACP_EXTERN int acp_agent_send_current_mode(acp_agent *agent,
                                           const char *session_id,
                                           const char *mode_id);
/** `config_option_update` {configOptions}: raw array. */
ACP_EXTERN int acp_agent_send_config_options(acp_agent *agent,
                                             const char *session_id,
                                             const char *options,
                                             size_t options_len);
/** `session_info_update` {title?} plus extra (updatedAt, _meta). */
ACP_EXTERN int acp_agent_send_session_info(acp_agent *agent,
                                           const char *session_id,
                                           const char *title, const char *extra,
                                           size_t extra_len);
/** `usage_update` {used, size} plus extra (cost). */
ACP_EXTERN int acp_agent_send_usage(acp_agent *agent, const char *session_id,
                                    uint64_t used, uint64_t size,
                                    const char *extra, size_t extra_len);

#ifdef __cplusplus
}
#endif

#endif /* ACP_AGENT_H */
