/*
 * libacp - the ACP client role (sans I/O).
 *
 * The mirror of agent.h: an acp_client wraps one acp_rpc_session, routes
 * the client-side ACP methods (session/request_permission, fs/...,
 * terminal/..., elicitation/..., session/update, unstable mcp/...) to typed
 * handlers, and offers one call helper per agent method.
 *
 * Routing is the same as for the agent: a known client-side method goes to
 * its handler; anything else (no handler, extension `_` methods, unknown
 * names) goes to on_ext_request / on_ext_notification when set, else a
 * request is answered -32601 and a notification ignored. Params of known
 * methods are checked for the schema's required members (-32602 with the
 * path for requests; notifications failing the check are dropped).
 *
 * The client sends `initialize` with protocolVersion 1 and records the
 * version and agentCapabilities of the response (acp_client_protocol_version
 * and acp_client_agent_capabilities). If the agent answers a version other
 * than 1 the response is still delivered; the application SHOULD close.
 *
 * Callback rules, lifetimes and thread-safety are those of agent.h.
 */
#ifndef ACP_CLIENT_H
#define ACP_CLIENT_H

#include "common.h"
#include "json.h"
#include "rpc.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The client role object. Opaque. */
typedef struct acp_client acp_client;

/** An incoming request awaiting its answer; see acp_agent_request. */
typedef struct acp_incoming_request acp_client_request;

/** Callback set for acp_client_new(). Opaque. */
typedef struct acp_client_callbacks acp_client_callbacks;

/** Kind of a `session/update` (its `sessionUpdate` discriminator). */
typedef enum acp_update_kind {
  /** Unrecognized (newer or extension) kind; see kind_name. */
  ACP_UPDATE_UNKNOWN = 0,
  ACP_UPDATE_USER_MESSAGE_CHUNK,
  ACP_UPDATE_AGENT_MESSAGE_CHUNK,
  ACP_UPDATE_AGENT_THOUGHT_CHUNK,
  ACP_UPDATE_TOOL_CALL,
  ACP_UPDATE_TOOL_CALL_UPDATE,
  ACP_UPDATE_PLAN,
  ACP_UPDATE_AVAILABLE_COMMANDS_UPDATE,
  ACP_UPDATE_CURRENT_MODE_UPDATE,
  ACP_UPDATE_CONFIG_OPTION_UPDATE,
  ACP_UPDATE_SESSION_INFO_UPDATE,
  ACP_UPDATE_USAGE_UPDATE,
  /* Unstable kinds. */
  ACP_UPDATE_PLAN_UPDATE,
  ACP_UPDATE_PLAN_REMOVED,
  ACP_UPDATE_NOTICE,
  ACP_UPDATE_COMPACTION_UPDATE,
  ACP_UPDATE_COMPACTION_SUMMARY_CHUNK,
  /* Unstable kinds of the newer schema (spec/acp/schema-sdk-2.4.0). */
  ACP_UPDATE_SUBAGENT_UPDATE,
  ACP_UPDATE_SESSION_MESSAGE,
  ACP_UPDATE_SESSION_MESSAGE_CHUNK
} acp_update_kind;

/** Wire name of a kind ("agent_message_chunk"), or NULL for UNKNOWN. */
ACP_EXTERN const char *acp_update_kind_name(acp_update_kind kind);
/** Kind of a wire name; ACP_UPDATE_UNKNOWN if not recognized. */
ACP_EXTERN acp_update_kind acp_update_kind_from_name(const char *name,
                                                     size_t len);

/**
 * A decoded `session/update`, valid only during the handler call. All
 * pointers borrow from the message.
 */
typedef struct acp_client_update {
  /** Decoded sessionId (not NUL-terminated). */
  const char *session_id;
  size_t session_id_len;
  acp_update_kind kind;
  /** Decoded `sessionUpdate` string (not NUL-terminated). */
  const char *kind_name;
  size_t kind_name_len;
  /** The `update` object (all its fields, unknown ones included). */
  const acp_json_val *update;
  /**
   * For chunk kinds whose content is a text block: the decoded text, else
   * NULL.
   */
  const char *text;
  size_t text_len;
  /** The whole raw notification. */
  const acp_rpc_msg *msg;
} acp_client_update;

/** Handler for an incoming request; answer `req` now or later. */
typedef int (*acp_client_request_cb)(acp_client *client,
                                     acp_client_request *req, void *user_data);
/** Handler for an incoming notification (msg valid during the call). */
typedef int (*acp_client_notification_cb)(acp_client *client,
                                          const acp_rpc_msg *msg,
                                          void *user_data);
/** Handler for `session/update`. */
typedef int (*acp_client_session_update_cb)(acp_client *client,
                                            const acp_client_update *update,
                                            void *user_data);
/** Handler for `$/cancel_request` naming an unanswered incoming request. */
typedef int (*acp_client_cancel_request_cb)(acp_client *client,
                                            acp_client_request *req,
                                            void *user_data);
/** Called once with the response to a call (see acp_agent_response_cb). */
typedef int (*acp_client_response_cb)(acp_client *client,
                                      const acp_rpc_msg *msg, void *user_data);

/* MARK: - Callbacks */

/** @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM. */
ACP_EXTERN int acp_client_callbacks_new(acp_client_callbacks **out);
/** Accepts NULL. */
ACP_EXTERN void acp_client_callbacks_free(acp_client_callbacks *cbs);

ACP_EXTERN void
acp_client_callbacks_set_on_request_permission(acp_client_callbacks *cbs,
                                               acp_client_request_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_fs_read_text_file(acp_client_callbacks *cbs,
                                              acp_client_request_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_fs_write_text_file(acp_client_callbacks *cbs,
                                               acp_client_request_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_terminal_create(acp_client_callbacks *cbs,
                                            acp_client_request_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_terminal_output(acp_client_callbacks *cbs,
                                            acp_client_request_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_terminal_wait_for_exit(acp_client_callbacks *cbs,
                                                   acp_client_request_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_terminal_kill(acp_client_callbacks *cbs,
                                          acp_client_request_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_terminal_release(acp_client_callbacks *cbs,
                                             acp_client_request_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_elicitation_create(acp_client_callbacks *cbs,
                                               acp_client_request_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_session_update(acp_client_callbacks *cbs,
                                           acp_client_session_update_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_elicitation_complete(acp_client_callbacks *cbs,
                                                 acp_client_notification_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_cancel_request(acp_client_callbacks *cbs,
                                           acp_client_cancel_request_cb cb);
/* Unstable. */
/** `auth/status_update` {state, accounts?} (notification). */
ACP_EXTERN void
acp_client_callbacks_set_on_auth_status_update(acp_client_callbacks *cbs,
                                               acp_client_notification_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_mcp_connect(acp_client_callbacks *cbs,
                                        acp_client_request_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_mcp_disconnect(acp_client_callbacks *cbs,
                                           acp_client_request_cb cb);
/** `mcp/message` sent as a request. */
ACP_EXTERN void
acp_client_callbacks_set_on_mcp_message(acp_client_callbacks *cbs,
                                        acp_client_request_cb cb);
/** `mcp/message` sent as a notification. */
ACP_EXTERN void acp_client_callbacks_set_on_mcp_message_notification(
    acp_client_callbacks *cbs, acp_client_notification_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_ext_request(acp_client_callbacks *cbs,
                                        acp_client_request_cb cb);
ACP_EXTERN void
acp_client_callbacks_set_on_ext_notification(acp_client_callbacks *cbs,
                                             acp_client_notification_cb cb);

/* MARK: - Lifecycle (as for acp_agent) */

/** @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM. */
ACP_EXTERN int acp_client_new(acp_client **out, const acp_client_callbacks *cbs,
                              void *user_data, const acp_rpc_options *opts,
                              const acp_mem *mem);
/** Accepts NULL. Pending calls are dropped without callbacks. */
ACP_EXTERN void acp_client_free(acp_client *client);
ACP_EXTERN void *acp_client_get_user_data(const acp_client *client);
/** The underlying session (borrowed). */
ACP_EXTERN acp_rpc_session *acp_client_session(acp_client *client);
ACP_EXTERN acp_ssize acp_client_recv(acp_client *client, const char *data,
                                     size_t len, uint64_t now_ms);
ACP_EXTERN acp_ssize acp_client_send(acp_client *client, const char **data);
ACP_EXTERN int acp_client_recv_eof(acp_client *client, uint64_t now_ms);
ACP_EXTERN int acp_client_handle_expiry(acp_client *client, uint64_t now_ms);
ACP_EXTERN void acp_client_set_call_timeout(acp_client *client,
                                            uint64_t timeout_ms);

/**
 * Opt in to the ACP v2 draft: acp_client_initialize() then asks for
 * protocolVersion 2 (sending the v1 and the v2 member names, so that a v1
 * agent can answer 1), and once the agent answers 2 incoming messages are
 * checked and dispatched with the v2 method table. Whatever was asked, the
 * client speaks the version the agent answered; an answer it did not
 * enable (above the maximum) leaves it on v1 and the application should
 * close (acp_client_protocol_version() tells). Default ACP_PROTOCOL_V1.
 *
 * @return 0, or ACP_ERR_INVALID_ARGUMENT for NULL or a version other than
 *         1 or 2.
 */
ACP_EXTERN int acp_client_set_max_protocol_version(acp_client *client,
                                                   int version);

/**
 * The protocolVersion of the agent's successful initialize response, or 0
 * before one arrived.
 */
ACP_EXTERN int64_t acp_client_protocol_version(const acp_client *client);
/**
 * The raw `agentCapabilities` JSON of the initialize response (a copy owned
 * by the client, valid until the next initialize response or free), or
 * NULL (len 0) if none.
 */
ACP_EXTERN const char *acp_client_agent_capabilities(const acp_client *client,
                                                     size_t *len);

/* MARK: - Incoming requests (see the acp_agent_request functions) */

ACP_EXTERN const acp_rpc_msg *
acp_client_request_msg(const acp_client_request *req);
ACP_EXTERN const acp_json_val *
acp_client_request_params(const acp_client_request *req);
ACP_EXTERN const char *acp_client_request_method(const acp_client_request *req);
ACP_EXTERN const char *
acp_client_request_session_id(const acp_client_request *req);
ACP_EXTERN int acp_client_request_param_str(const acp_client_request *req,
                                            const char *key, const char **s,
                                            size_t *len);
ACP_EXTERN int acp_client_request_is_cancelled(const acp_client_request *req);
/** Typed params of an incoming request: see acp_agent_request_decode(). */
ACP_EXTERN int acp_client_request_decode(const acp_client_request *req,
                                         acp_arena *arena, const void **out);

/**
 * Decode a `session/update`'s `update` into the generated union of the
 * negotiated version: `acp_session_update` (types.h) under v1,
 * `acp_v2_session_update` (types_v2.h) under v2, whose kinds carry the v2
 * members (messageId of message chunks, state_update with its state and
 * stop reason...). An unknown kind decodes with kind _UNKNOWN.
 *
 * @param arena  receives the union and unescaped strings; it also points into
 *               update->msg, so use it during the update callback only.
 * @param out    receives a pointer to the union (NULL on failure).
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_PARSE (the update does not
 *         match the schema; the error names the member) or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_client_update_decode(const acp_client *client,
                                        const acp_client_update *update,
                                        acp_arena *arena, const void **out);

/* MARK: - Answers (errors as for acp_agent_respond) */

ACP_EXTERN int acp_client_respond(acp_client *client, acp_client_request *req,
                                  const char *result, size_t result_len);
ACP_EXTERN int acp_client_respond_error(acp_client *client,
                                        acp_client_request *req, int64_t code,
                                        const char *message, const char *data,
                                        size_t data_len);
ACP_EXTERN int acp_client_respond_cancelled(acp_client *client,
                                            acp_client_request *req);
ACP_EXTERN int acp_client_respond_empty(acp_client *client,
                                        acp_client_request *req);
/**
 * Answer `session/request_permission`: outcome {"outcome":"selected",
 * "optionId": option_id}, or {"outcome":"cancelled"} when option_id is NULL.
 */
ACP_EXTERN int acp_client_respond_permission(acp_client *client,
                                             acp_client_request *req,
                                             const char *option_id);
/** Answer `fs/read_text_file` with {"content": content}. */
ACP_EXTERN int acp_client_respond_read_text_file(acp_client *client,
                                                 acp_client_request *req,
                                                 const char *content,
                                                 size_t content_len);
/** Answer `terminal/create` with {"terminalId": id}. */
ACP_EXTERN int acp_client_respond_terminal_create(acp_client *client,
                                                  acp_client_request *req,
                                                  const char *terminal_id);

/* MARK: - Calls to the agent
 *
 * Conventions and errors as for the agent's calls: strings NUL-terminated,
 * raw JSON as (ptr, len) spliced unchanged (NULL omits, or gives the stated
 * default), `cb` may be NULL, `id_out` optional.
 */

ACP_EXTERN int acp_client_call(acp_client *client, const char *method,
                               const char *params, size_t params_len,
                               acp_client_response_cb cb, void *cb_user_data,
                               int64_t *id_out);
ACP_EXTERN int acp_client_notify(acp_client *client, const char *method,
                                 const char *params, size_t params_len);
/** Send `$/cancel_request` for one of our pending calls. */
ACP_EXTERN int acp_client_cancel_call(acp_client *client, int64_t id);

/**
 * `initialize` {protocolVersion: 1, clientCapabilities: caps (default
 * {}), clientInfo: info (omitted if NULL)}.
 */
ACP_EXTERN int acp_client_initialize(acp_client *client, const char *caps,
                                     size_t caps_len, const char *info,
                                     size_t info_len, acp_client_response_cb cb,
                                     void *cb_user_data, int64_t *id_out);
/** `authenticate` {methodId}. */
ACP_EXTERN int acp_client_authenticate(acp_client *client,
                                       const char *method_id,
                                       acp_client_response_cb cb,
                                       void *cb_user_data, int64_t *id_out);
/** `logout` {}. */
ACP_EXTERN int acp_client_logout(acp_client *client, acp_client_response_cb cb,
                                 void *cb_user_data, int64_t *id_out);
/** `session/new` {cwd, mcpServers (default [])}. */
ACP_EXTERN int acp_client_session_new(acp_client *client, const char *cwd,
                                      const char *mcp_servers,
                                      size_t mcp_servers_len,
                                      acp_client_response_cb cb,
                                      void *cb_user_data, int64_t *id_out);
/** `session/load` {sessionId, cwd, mcpServers (default [])}. */
ACP_EXTERN int acp_client_session_load(acp_client *client,
                                       const char *session_id, const char *cwd,
                                       const char *mcp_servers,
                                       size_t mcp_servers_len,
                                       acp_client_response_cb cb,
                                       void *cb_user_data, int64_t *id_out);
/** `session/resume` {sessionId, cwd, mcpServers (omitted if NULL)}. */
ACP_EXTERN int
acp_client_session_resume(acp_client *client, const char *session_id,
                          const char *cwd, const char *mcp_servers,
                          size_t mcp_servers_len, acp_client_response_cb cb,
                          void *cb_user_data, int64_t *id_out);
/** `session/list` {cwd?, cursor?}; NULL omits. */
ACP_EXTERN int acp_client_session_list(acp_client *client, const char *cwd,
                                       const char *cursor,
                                       acp_client_response_cb cb,
                                       void *cb_user_data, int64_t *id_out);
/** `session/delete` {sessionId}. */
ACP_EXTERN int acp_client_session_delete(acp_client *client,
                                         const char *session_id,
                                         acp_client_response_cb cb,
                                         void *cb_user_data, int64_t *id_out);
/** `session/close` {sessionId}. */
ACP_EXTERN int acp_client_session_close(acp_client *client,
                                        const char *session_id,
                                        acp_client_response_cb cb,
                                        void *cb_user_data, int64_t *id_out);
/** `session/set_mode` {sessionId, modeId}. */
ACP_EXTERN int acp_client_set_mode(acp_client *client, const char *session_id,
                                   const char *mode_id,
                                   acp_client_response_cb cb,
                                   void *cb_user_data, int64_t *id_out);
/**
 * `session/set_config_option` {sessionId, configId, value}: `value` raw
 * JSON (a string id, or true/false; for booleans add "type":"boolean"
 * through acp_client_call()). Under v2, which requires the value's type,
 * "type" is added: "boolean" for true/false, else "id".
 */
ACP_EXTERN int
acp_client_set_config_option(acp_client *client, const char *session_id,
                             const char *config_id, const char *value,
                             size_t value_len, acp_client_response_cb cb,
                             void *cb_user_data, int64_t *id_out);
/** `session/prompt` with one text content block. */
ACP_EXTERN int acp_client_prompt_text(acp_client *client,
                                      const char *session_id, const char *text,
                                      size_t text_len,
                                      acp_client_response_cb cb,
                                      void *cb_user_data, int64_t *id_out);
/**
 * As acp_client_prompt_text(), but the text is referenced, not copied,
 * where that saves a copy: a text of 4 KiB or more that needs no escaping
 * (no quote, backslash or control byte; valid UTF-8), sent on a session
 * that borrows its output (acp_rpc_session_set_borrow_output(), which
 * libacp-uv's acp_uv_rpc turns on for pipes and sockets), is handed to the
 * runtime in place and written from the caller's memory (one writev, no
 * copy into the session's output). Anything else is copied at the call,
 * as acp_client_prompt_text() does; the bytes sent are the same either
 * way.
 *
 * Lifetime: `text` must stay valid and unchanged until `cb` runs for this
 * request (the agent's answer, or a local error such as a timeout or the
 * connection's end), or until the client is freed if it never runs. From
 * inside `cb` on, the text is the caller's again: the session copies what
 * it still references before it calls back.
 *
 * @param cb  required (not NULL): it is what tells the caller the text is
 *            free again.
 * @return 0, or the codes of acp_client_prompt_text();
 *         ACP_ERR_INVALID_ARGUMENT also if cb is NULL or the text is not
 *         valid UTF-8. On any error nothing was queued and nothing is
 *         referenced.
 */
ACP_EXTERN int acp_client_prompt_text_ref(acp_client *client,
                                          const char *session_id,
                                          const char *text, size_t text_len,
                                          acp_client_response_cb cb,
                                          void *cb_user_data, int64_t *id_out);
/** `session/prompt` with a raw ContentBlock[] array. */
ACP_EXTERN int acp_client_prompt(acp_client *client, const char *session_id,
                                 const char *blocks, size_t blocks_len,
                                 acp_client_response_cb cb, void *cb_user_data,
                                 int64_t *id_out);
/** `session/cancel` notification {sessionId}. */
ACP_EXTERN int acp_client_cancel(acp_client *client, const char *session_id);

/* Unstable calls (the agent advertises each under sessionCapabilities or
 * agentCapabilities.auth; the answer's shape is the schema's *Response). */

/** `session/fork` {sessionId, cwd, mcpServers (omitted if NULL)}. */
ACP_EXTERN int acp_client_session_fork(acp_client *client,
                                       const char *session_id, const char *cwd,
                                       const char *mcp_servers,
                                       size_t mcp_servers_len,
                                       acp_client_response_cb cb,
                                       void *cb_user_data, int64_t *id_out);
/** `session/set_title` {sessionId, title}. */
ACP_EXTERN int
acp_client_session_set_title(acp_client *client, const char *session_id,
                             const char *title, acp_client_response_cb cb,
                             void *cb_user_data, int64_t *id_out);
/** `session/archive` {sessionId}. */
ACP_EXTERN int acp_client_session_archive(acp_client *client,
                                          const char *session_id,
                                          acp_client_response_cb cb,
                                          void *cb_user_data, int64_t *id_out);
/** `session/unarchive` {sessionId}. */
ACP_EXTERN int acp_client_session_unarchive(acp_client *client,
                                            const char *session_id,
                                            acp_client_response_cb cb,
                                            void *cb_user_data,
                                            int64_t *id_out);
/** `session/status` {sessionId}: answered {status: "open"|"saved"}. */
ACP_EXTERN int acp_client_session_status(acp_client *client,
                                         const char *session_id,
                                         acp_client_response_cb cb,
                                         void *cb_user_data, int64_t *id_out);
/** `auth/status` {}: answered {state, accounts?}. */
ACP_EXTERN int acp_client_auth_status(acp_client *client,
                                      acp_client_response_cb cb,
                                      void *cb_user_data, int64_t *id_out);

/*
 * Unstable v1 providers, next edit suggestions (NES) and documents. The
 * agent advertises them in agentCapabilities (`providers`, `nes`); one that
 * does not answers -32601. Raw JSON arguments must be valid JSON of the
 * schema's type; NULL omits an optional one. Errors as for the calls above.
 */

/** `providers/list` {}: answered {providers: [{providerId, supported,
 * required, current?}]}. */
ACP_EXTERN int acp_client_providers_list(acp_client *client,
                                         acp_client_response_cb cb,
                                         void *cb_user_data, int64_t *id_out);
/** `providers/set` {providerId, apiType, baseUrl, headers?}: `api_type` is
 * an LlmProtocol ("anthropic", "openai"...), `headers` a raw JSON object of
 * strings or NULL. */
ACP_EXTERN int acp_client_providers_set(
    acp_client *client, const char *provider_id, const char *api_type,
    const char *base_url, const char *headers, size_t headers_len,
    acp_client_response_cb cb, void *cb_user_data, int64_t *id_out);
/** `providers/disable` {providerId}. */
ACP_EXTERN int acp_client_providers_disable(acp_client *client,
                                            const char *provider_id,
                                            acp_client_response_cb cb,
                                            void *cb_user_data,
                                            int64_t *id_out);
/** `nes/start` {workspaceUri?, workspaceFolders?}: answered {sessionId}, the
 * NES session the nes/ and document/ messages name. `workspace_folders` is
 * a raw JSON array of {uri, name} or NULL. */
ACP_EXTERN int acp_client_nes_start(acp_client *client,
                                    const char *workspace_uri,
                                    const char *workspace_folders,
                                    size_t workspace_folders_len,
                                    acp_client_response_cb cb,
                                    void *cb_user_data, int64_t *id_out);
/** `nes/suggest` {sessionId, uri, version, position: {line, character},
 * triggerKind, context?}: answered {suggestions}. `trigger_kind` is
 * "automatic", "diagnostic" or "manual"; `context` raw JSON or NULL. */
ACP_EXTERN int acp_client_nes_suggest(
    acp_client *client, const char *session_id, const char *uri,
    int64_t version, int64_t line, int64_t character, const char *trigger_kind,
    const char *context, size_t context_len, acp_client_response_cb cb,
    void *cb_user_data, int64_t *id_out);
/** `nes/close` {sessionId}. */
ACP_EXTERN int acp_client_nes_close(acp_client *client, const char *session_id,
                                    acp_client_response_cb cb,
                                    void *cb_user_data, int64_t *id_out);
/** Notification `nes/accept` {sessionId, id}: the suggestion was applied. */
ACP_EXTERN int acp_client_nes_accept(acp_client *client, const char *session_id,
                                     const char *suggestion_id);
/** Notification `nes/reject` {sessionId, id, reason?}: `reason` is
 * "rejected", "ignored", "replaced", "cancelled" or NULL. */
ACP_EXTERN int acp_client_nes_reject(acp_client *client, const char *session_id,
                                     const char *suggestion_id,
                                     const char *reason);
/** Notification `document/didOpen` {sessionId, uri, languageId, version,
 * text}. `text` is `text_len` bytes of UTF-8. */
ACP_EXTERN int acp_client_document_did_open(acp_client *client,
                                            const char *session_id,
                                            const char *uri,
                                            const char *language_id,
                                            int64_t version, const char *text,
                                            size_t text_len);
/** Notification `document/didChange` {sessionId, uri, version,
 * contentChanges}: `content_changes` a raw JSON array of {range?, text}. */
ACP_EXTERN int acp_client_document_did_change(acp_client *client,
                                              const char *session_id,
                                              const char *uri, int64_t version,
                                              const char *content_changes,
                                              size_t content_changes_len);
/** Notification `document/didClose` {sessionId, uri}. */
ACP_EXTERN int acp_client_document_did_close(acp_client *client,
                                             const char *session_id,
                                             const char *uri);
/** Notification `document/didSave` {sessionId, uri}. */
ACP_EXTERN int acp_client_document_did_save(acp_client *client,
                                            const char *session_id,
                                            const char *uri);
/** Notification `document/didFocus` {sessionId, uri, version, position,
 * visibleRange}: `visible_range` a raw JSON Range {start, end}. */
ACP_EXTERN int acp_client_document_did_focus(acp_client *client,
                                             const char *session_id,
                                             const char *uri, int64_t version,
                                             int64_t line, int64_t character,
                                             const char *visible_range,
                                             size_t visible_range_len);

/* ACP v2 calls (after a v2 initialize, see
 * acp_client_set_max_protocol_version(); a v1 agent answers -32601).
 * Errors as for the calls above. */

/** `auth/login` {methodId} (one of the agent's authMethods). */
ACP_EXTERN int acp_client_auth_login(acp_client *client, const char *method_id,
                                     acp_client_response_cb cb,
                                     void *cb_user_data, int64_t *id_out);
/** `auth/logout` {}. */
ACP_EXTERN int acp_client_auth_logout(acp_client *client,
                                      acp_client_response_cb cb,
                                      void *cb_user_data, int64_t *id_out);
/**
 * `tool_call/cancel` {sessionId, toolCallId}: only for a tool call whose
 * last update advertised `capabilities.cancel`. The answer means the agent
 * accepted; a tool_call_update with a final status confirms it. -32602 for
 * a call unknown, final or not cancellable.
 */
ACP_EXTERN int acp_client_tool_call_cancel(acp_client *client,
                                           const char *session_id,
                                           const char *tool_call_id,
                                           acp_client_response_cb cb,
                                           void *cb_user_data, int64_t *id_out);
/**
 * `terminal/cancel` {sessionId, terminalId}: only for a terminal whose
 * last terminal_update advertised `capabilities.cancel`; confirmed by a
 * terminal_update with exitStatus. The terminal is not released.
 */
ACP_EXTERN int acp_client_terminal_cancel(acp_client *client,
                                          const char *session_id,
                                          const char *terminal_id,
                                          acp_client_response_cb cb,
                                          void *cb_user_data, int64_t *id_out);
/**
 * `session/resume` {sessionId, cwd, mcpServers?, replayFrom?}: v2 replays
 * history only when asked, from the raw cursor `replay_from` (e.g.
 * {"type":"start"}; NULL omits: no replay). The agent sends the replayed
 * updates, then a state_update snapshot, then the answer; an unsupported
 * cursor is refused with -32602.
 */
ACP_EXTERN int acp_client_session_resume_replay(
    acp_client *client, const char *session_id, const char *cwd,
    const char *mcp_servers, size_t mcp_servers_len, const char *replay_from,
    size_t replay_from_len, acp_client_response_cb cb, void *cb_user_data,
    int64_t *id_out);

#ifdef __cplusplus
}
#endif

#endif /* ACP_CLIENT_H */
