/*
 * libacp - Model Context Protocol (MCP) server and client (sans I/O).
 *
 * Both roles sit on an acp_rpc_session (cancel style
 * ACP_RPC_CANCEL_STYLE_MCP) and never see a file descriptor or a clock: feed
 * bytes with *_recv(), take bytes with *_send(), pass time in, drive
 * deadlines with *_get_expiry() / *_handle_expiry(). Stateful revisions
 * 2024-11-05, 2025-03-26, 2025-06-18 and 2025-11-25 are spoken; the server
 * also serves stateless 2026-07-28 requests (see STATELESS REQUESTS).
 *
 * SERVER. Two objects:
 *
 *   - acp_mcp_server: the registry (tools, resources, resource templates,
 *     prompts, the completion handler, serverInfo, instructions, page size).
 *     It knows no transport and holds no per-peer state, so one registry
 *     serves any number of peers at once: stdio, every Streamable HTTP
 *     session, an MCP-over-ACP connection.
 *   - acp_mcp_conn: one peer (one MCP session) of a server: its rpc session,
 *     negotiated version, client capabilities, log level, subscriptions and
 *     requests in progress. acp_mcp_conn_session() returns the rpc session
 *     for the runtime to drive.
 *
 * Incoming requests that reach a handler (tools/call, resources/read,
 * prompts/get, completion/complete) are represented by an acp_mcp_call,
 * owned by the library, valid from the handler call until the handler
 * answers it (acp_mcp_call_respond*()), now or later. A call can send
 * progress, log messages, and server->client requests (sampling,
 * elicitation, roots) whose responses come back to a callback that receives
 * the same call.
 *
 * Behaviour of the server connection (documented contract, all tested):
 *   - Lifecycle. Before `initialize` has been answered every request other
 *     than `initialize` and `ping` is answered -32600 (Invalid Request) with
 *     message "Server not initialized" (the MCP spec names no code; -32600
 *     is the JSON-RPC code for a request that is not valid now). A second
 *     `initialize` is answered -32600 "Already initialized". Requests are
 *     accepted as soon as `initialize` was answered (without waiting for
 *     notifications/initialized, which clients over HTTP may send
 *     concurrently). Notifications before `initialize` are ignored.
 *   - Version negotiation: `protocolVersion` must be a string (else -32602).
 *     A version we speak is echoed; any other gets our latest, 2025-11-25.
 *   - Batches (JSON arrays) are accepted only once 2025-03-26 was
 *     negotiated, the only revision that has them; otherwise an array is
 *     answered with one -32600 (id null).
 *   - Capabilities are derived from the registry when `initialize` is
 *     answered: tools {listChanged} if a tool is registered, resources
 *     {subscribe, listChanged} if a resource or template is registered,
 *     prompts {listChanged} if a prompt is, completions {} if a completion
 *     handler is set, logging {} if acp_mcp_server_set_logging() enabled it.
 *     acp_mcp_server_declare() forces a family on even while empty.
 *   - resources/subscribe takes any URI (a resource may be registered
 *     later), up to ACP_MCP_MAX_SUBSCRIPTIONS per connection; one more is
 *     answered -32603 "Too many subscriptions" until some are unsubscribed.
 *     A subscriptions/listen may name as many URIs and as many task ids
 *     (more: -32603 "Too many subscriptions"); a connection keeps at most
 *     ACP_MCP_MAX_LISTENS open (one more: -32603 "Too many open listens"
 *     until one ends).
 *   - Errors: unknown method or a family not offered -32601; params that
 *     are not an object, a missing or mistyped member, an unknown tool or
 *     prompt, a missing required prompt argument, a bad log level or an
 *     invalid cursor -32602; an unknown resource -32002 with data {"uri"}.
 *   - Tool handler failure: a tool handler that returns a negative code
 *     other than ACP_ERR_PAUSE without having answered gets the result
 *     {"content":[{"type":"text","text":"<reason>"}],"isError":true}; other
 *     handlers get -32603. The connection continues in both cases.
 *   - Cancellation: notifications/cancelled naming a call in progress marks
 *     it cancelled, cancels (locally and at the peer) the server->client
 *     requests it issued, calls its cancel callback, and releases the
 *     JSON-RPC request: no response is ever sent for it. The handler still
 *     answers the call to release it; that answer is dropped (returns 0).
 *   - Pagination: with a page size n > 0 (acp_mcp_server_set_page_size())
 *     lists return n items and an opaque `nextCursor`; a cursor that is not
 *     one we issued for that list, or points past its end, is -32602.
 *
 * CLIENT. acp_mcp_client wraps one rpc session: initialize (asks
 * 2025-11-25 by default, accepts any version above; or, by choice, the
 * stateless 2026-07-28 found with server/discover: see MARK: - Client:
 * eras), list helpers with
 * automatic paging, tools/call with progress, reads, prompts, subscriptions,
 * completion, logging level, ping, and handlers for the server's requests
 * (roots/list, sampling/createMessage, elicitation/create) that may answer
 * later. Each request may carry a timeout; on expiry the client sends
 * notifications/cancelled and completes the request with ACP_ERR_TIMEOUT.
 * A progress notification resets the timeout, never beyond a maximum total.
 *
 * Callback contract (as rpc.h): return 0 to continue, ACP_ERR_PAUSE to make
 * the current recv return early, anything else is fatal
 * (ACP_ERR_CALLBACK_FAILURE), except tool and resource/prompt/completion
 * handlers (see "handler failure" above). Callbacks may call any function
 * here except *_recv, *_send, *_recv_eof, *_handle_expiry and *_free on
 * the same object.
 *
 * STATELESS REQUESTS (2026-07-28). The server speaks the stateless
 * revision and the stateful ones at once, from the same registry and
 * handlers, choosing per request:
 *   - A request whose params carry
 *     `_meta["io.modelcontextprotocol/protocolVersion"]`, and every
 *     `server/discover`, is served statelessly whatever the conn negotiated
 *     (a conn with an initialized 2025 session may carry both). Its `_meta`
 *     must be an object with `protocolVersion` (a string) and
 *     `clientCapabilities` (an object), `clientInfo` an object when present,
 *     `logLevel` a level name when present; else -32602. A version other
 *     than "2026-07-28" is answered -32022 (UnsupportedProtocolVersionError)
 *     with data {"supported": ["2026-07-28"], "requested": V}: the stateful
 *     revisions are reached with initialize, not per request.
 *   - Methods: server/discover ({"supportedVersions", "capabilities",
 *     "instructions"?}), the lists, tools/call, resources/read, prompts/get,
 *     completion/complete, subscriptions/listen. initialize, ping,
 *     logging/setLevel and resources/(un)subscribe are -32601.
 *     Capabilities are the same as at 2025 (listChanged, subscribe).
 *   - subscriptions/listen {"notifications": SubscriptionFilter}: -32602
 *     unless `notifications` is an object whose toolsListChanged,
 *     promptsListChanged, resourcesListChanged are booleans and
 *     resourceSubscriptions an array of strings, when present. The request
 *     stays unanswered; the conn first sends
 *     notifications/subscriptions/acknowledged with the honored subset
 *     (list kinds the registry offers; resourceSubscriptions, echoed, when
 *     resources and acp_mcp_server_set_subscribe() are on), then
 *     acp_mcp_server_list_changed() and acp_mcp_server_resource_updated()
 *     (exact URI match) send the matching notifications to it, every one
 *     with `_meta[ACP_MCP_META_SUBSCRIPTION_ID]` = the request's id. It
 *     ends, unanswered, on notifications/cancelled for that id or when the
 *     conn is freed (Streamable HTTP: when the client drops the POST).
 *   - Every result gets `resultType: "complete"` (unless the handler set
 *     one) and `_meta["io.modelcontextprotocol/serverInfo"]` (a `_meta` the
 *     handler wrote keeps its members); discover, the lists and reads get
 *     the CacheableResult hints of acp_mcp_server_set_cache(). Lists are in
 *     registration order, so the same registry gives the same list.
 *   - An unknown resource is -32602 with data {"uri"} (not -32002).
 *   - Logging: acp_mcp_call_log() on a stateless call sends
 *     notifications/message only when the request set a `logLevel` (and
 *     logging is on), at or above it; acp_mcp_server_log() reaches
 *     initialized sessions only, list_changed and resources/updated reach
 *     sessions and open subscriptions/listen requests.
 *   - Multi round-trip: acp_mcp_call_request() and its wrappers on a
 *     stateless call become input requests of an InputRequiredResult, the
 *     retry's answers reach the same callbacks (see
 *     acp_mcp_call_request_named(), acp_mcp_server_set_state_key()).
 *   - acp_mcp_call_is_stateless() and acp_mcp_call_client_capabilities()
 *     tell a handler which era and capabilities apply.
 * The conn stays the unit of transport: a stateless request needs no
 * initialize on it, and acp_mcp_conn_version() stays
 * ACP_MCP_VERSION_UNKNOWN for a conn that only served stateless ones.
 * The era writers (MARK: - Eras) let a component between a 2025 client and
 * a 2026-only server translate the two.
 *
 * Thread-safety: one thread at a time per server and all its conns; one
 * thread at a time per client.
 */
#ifndef ACP_MCP_H
#define ACP_MCP_H

#include "common.h"
#include "json.h"
#include "rpc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* MARK: - Common */

/** Protocol revisions this library speaks (ordered, oldest first). */
typedef enum acp_mcp_version {
  ACP_MCP_VERSION_UNKNOWN = 0,
  ACP_MCP_VERSION_2024_11_05 = 1,
  ACP_MCP_VERSION_2025_03_26 = 2,
  ACP_MCP_VERSION_2025_06_18 = 3,
  ACP_MCP_VERSION_2025_11_25 = 4,
  /** The latest revision spoken. */
  ACP_MCP_VERSION_LATEST = ACP_MCP_VERSION_2025_11_25
} acp_mcp_version;

/** "2025-11-25" etc.; NULL for ACP_MCP_VERSION_UNKNOWN or out of range. */
ACP_EXTERN const char *acp_mcp_version_str(acp_mcp_version v);
/** Parse a revision string; ACP_MCP_VERSION_UNKNOWN if not one we speak. */
ACP_EXTERN acp_mcp_version acp_mcp_version_parse(const char *s, size_t len);

/** Log levels (RFC 5424 order, least severe first). */
typedef enum acp_mcp_log_level {
  ACP_MCP_LOG_DEBUG = 0,
  ACP_MCP_LOG_INFO,
  ACP_MCP_LOG_NOTICE,
  ACP_MCP_LOG_WARNING,
  ACP_MCP_LOG_ERROR,
  ACP_MCP_LOG_CRITICAL,
  ACP_MCP_LOG_ALERT,
  ACP_MCP_LOG_EMERGENCY
} acp_mcp_log_level;

/** "debug" ... "emergency"; NULL if out of range. */
ACP_EXTERN const char *acp_mcp_log_level_str(acp_mcp_log_level level);
/** @return the level, or -1 if `s` names none. */
ACP_EXTERN int acp_mcp_log_level_parse(const char *s, size_t len);

/** The lists that have list_changed notifications and pagination. */
typedef enum acp_mcp_list {
  ACP_MCP_LIST_TOOLS = 0,
  ACP_MCP_LIST_RESOURCES = 1,
  ACP_MCP_LIST_RESOURCE_TEMPLATES = 2,
  ACP_MCP_LIST_PROMPTS = 3
} acp_mcp_list;

/** MCP error code: resource not found (2024-11-05 .. 2025-11-25). */
#define ACP_MCP_RESOURCE_NOT_FOUND (-32002)

/** resources/subscribe: distinct URIs one connection may hold; also the
 * most URIs, and task ids, one subscriptions/listen may name. */
#define ACP_MCP_MAX_SUBSCRIPTIONS 1024

/** subscriptions/listen (2026-07-28): requests one connection may keep
 * open at once. */
#define ACP_MCP_MAX_LISTENS 64

/**
 * Match `uri` against an RFC 6570 level-1 template ("file:///{path}",
 * "db://{table}/{id}"). Literal text must match exactly; each {name}
 * matches one or more characters other than '/', '?' and '#' (what a
 * level-1 expansion can produce); backtracking resolves adjacent variables.
 *
 * @param starts, lens  optional arrays of max_vars entries receiving each
 *              variable's value as an offset and length into `uri`.
 * @param nvars optional; receives the number of variables.
 * @return 1 on match, 0 on no match, ACP_ERR_INVALID_ARGUMENT for a
 *         malformed template (unbalanced braces, empty name, more than
 *         max_vars or 16 variables).
 */
ACP_EXTERN int acp_mcp_uri_template_match(const char *tpl, size_t tpl_len,
                                          const char *uri, size_t uri_len,
                                          size_t *starts, size_t *lens,
                                          size_t max_vars, size_t *nvars);

/* MARK: - Eras: 2025 revisions <-> 2026-07-28 */

/*
 * The stateless revision 2026-07-28 has no `initialize`: each request
 * carries the protocol version and the client's capabilities (and,
 * optionally, its info) in `params._meta`; `server/discover` tells the
 * version list, capabilities and identity; every result carries
 * `resultType`. A component that stands between a client of a 2025 revision
 * (which sends `initialize`) and a server that speaks only 2026-07-28 (the
 * MCP-over-ACP provider of the TypeScript SDK 2.4) translates with the three
 * writers below:
 *
 *   client -> initialize {P}         keep P; send server/discover with
 *                                    acp_mcp_era_write_request_params(P)
 *   server -> discover result D      answer initialize with
 *                                    acp_mcp_era_write_initialize_result(P, D)
 *   client -> request {params Q}     send Q as
 *                                    acp_mcp_era_write_request_params(Q, P)
 *   server -> result R               answer with acp_mcp_era_write_result(R)
 *
 * Each writer APPENDS one JSON value to the caller's writer `w` (it does
 * not reset it), so it can write a whole message or one member's value of
 * a larger one. Input values are borrowed from the caller's parsed
 * documents and not kept. Members not named here are copied byte for byte
 * (keys included, escapes and number spelling unchanged). When an argument
 * is refused up front (ACP_ERR_INVALID_ARGUMENT) or ACP_ERR_UNSUPPORTED is
 * returned nothing was written; on a writer error (ACP_ERR_NOMEM,
 * ACP_ERR_LIMIT, a string that is not UTF-8) the writer holds that sticky
 * error and partial output, to be reset by the caller.
 * No allocation besides the writer's buffer; thread-safe as far as the
 * writer and documents are not shared.
 */

/** The stateless revision's version string. */
#define ACP_MCP_PROTOCOL_2026_07_28 "2026-07-28"
/** `_meta` key of a 2026 request: the protocol version (required). */
#define ACP_MCP_META_PROTOCOL_VERSION "io.modelcontextprotocol/protocolVersion"
/** `_meta` key of a 2026 request: the client's Implementation (optional). */
#define ACP_MCP_META_CLIENT_INFO "io.modelcontextprotocol/clientInfo"
/** `_meta` key of a 2026 request: the client's capabilities (required). */
#define ACP_MCP_META_CLIENT_CAPABILITIES                                       \
  "io.modelcontextprotocol/clientCapabilities"
/** `_meta` key of a 2026 result: the server's Implementation. */
#define ACP_MCP_META_SERVER_INFO "io.modelcontextprotocol/serverInfo"
/** `_meta` key of a 2026 request: the minimum log level for that request
 * (optional; without it the server sends no notifications/message). */
#define ACP_MCP_META_LOG_LEVEL "io.modelcontextprotocol/logLevel"
/** `_meta` key of a 2026 notification on a subscriptions/listen stream: the
 * JSON-RPC id of that listen request. */
#define ACP_MCP_META_SUBSCRIPTION_ID "io.modelcontextprotocol/subscriptionId"
/** MCP error code (2026-07-28): UnsupportedProtocolVersionError. */
#define ACP_MCP_UNSUPPORTED_PROTOCOL_VERSION (-32022)
/** MCP error code (2026-07-28): HeaderMismatchError (Streamable HTTP: an
 * `Mcp-Method`, `Mcp-Name` or `MCP-Protocol-Version` header that is missing
 * or disagrees with the body). */
#define ACP_MCP_HEADER_MISMATCH (-32020)
/** The 2026-07-28 tasks extension's identifier (capabilities.extensions). */
#define ACP_MCP_EXT_TASKS "io.modelcontextprotocol/tasks"
/** `_meta` key tying a 2025-11-25 message to a task ({"taskId"}). */
#define ACP_MCP_META_RELATED_TASK "io.modelcontextprotocol/related-task"
/** MCP error code (2026-07-28): MissingRequiredClientCapabilityError, data
 * {"requiredCapabilities": ClientCapabilities}. */
#define ACP_MCP_MISSING_REQUIRED_CLIENT_CAPABILITY (-32021)

/**
 * Write the result of a 2025-era `initialize` from a 2026 `server/discover`
 * result:
 *
 *   {"protocolVersion": V, "capabilities": C, "serverInfo": S
 *    [, "instructions": I]}
 *
 * V is `init_params.protocolVersion` when it is a stateful revision this
 * library speaks (acp_mcp_version_parse()), else our latest
 * (ACP_MCP_VERSION_LATEST), as a server answers version negotiation.
 * C is the discover result's `capabilities` copied byte for byte ({} when
 * absent). S is its `_meta["io.modelcontextprotocol/serverInfo"]` copied
 * byte for byte, or {"name": fallback_name, "version": "0"} when absent.
 * I is its `instructions`, when a string, copied byte for byte.
 *
 * With `discover` NULL (the server has no server/discover: it answered
 * -32601), the result is synthesized: C is {"tools":{}} (MCP-over-ACP
 * servers are offered for their tools; a client then lists them) and S the
 * fallback.
 *
 * @param w              caller's writer; one value is appended.
 * @param init_params    the `params` of the client's initialize (an object),
 *                       or NULL (V is then our latest).
 * @param discover       the server/discover result (an object), or NULL.
 * @param fallback_name  NUL-terminated serverInfo name when the server gives
 *                       none (e.g. the name it was declared under); NULL
 *                       means "mcp-server".
 * @return 0; ACP_ERR_INVALID_ARGUMENT (w NULL, init_params or discover not
 *         an object; or, from the writer, fallback_name not UTF-8);
 *         ACP_ERR_NOMEM or ACP_ERR_LIMIT from the writer.
 */
ACP_EXTERN int acp_mcp_era_write_initialize_result(
    acp_json_writer *w, const acp_json_val *init_params,
    const acp_json_val *discover, const char *fallback_name);

/**
 * Write the `params` of an outgoing 2026 request: `params` with the
 * required `_meta` members added,
 *
 *   "io.modelcontextprotocol/protocolVersion": "2026-07-28",
 *   "io.modelcontextprotocol/clientCapabilities": init_params.capabilities
 *                                                 (or {} when absent),
 *   "io.modelcontextprotocol/clientInfo": init_params.clientInfo
 *                                         (only when present),
 *
 * each only when `_meta` does not already have it (a value the caller set
 * wins). An existing `_meta` object keeps its place and its members, byte
 * for byte, the new ones appended after them; without one, `_meta` is
 * appended as the last member. Every other member is copied byte for byte,
 * in order.
 *
 * @param w            caller's writer; one object is appended.
 * @param params       the request's params (an object), or NULL for none
 *                     (then the output is {"_meta":{...}}).
 * @param init_params  the `params` of the 2025 initialize the client sent
 *                     (an object), or NULL (no client info, capabilities
 *                     {}).
 * @return 0; ACP_ERR_INVALID_ARGUMENT (w NULL, params not an object or NULL,
 *         `_meta` present but not an object, init_params not an object);
 *         ACP_ERR_NOMEM or ACP_ERR_LIMIT from the writer.
 */
ACP_EXTERN int
acp_mcp_era_write_request_params(acp_json_writer *w, const acp_json_val *params,
                                 const acp_json_val *init_params);

/**
 * Write a 2026 result for a client of a 2025 revision: `result` without
 * the members 2026-07-28 added to results, `resultType` (every result) and
 * `ttlMs` / `cacheScope` (CacheableResult: lists, reads, discover). Every
 * other member is copied byte for byte, in order (`_meta`, including
 * `io.modelcontextprotocol/serverInfo`, is kept: 2025 allows any key in
 * `_meta`).
 *
 * A result whose `resultType` is not "complete" (an "input_required" interim
 * result of a multi round-trip request) has no 2025 form: nothing is
 * written and ACP_ERR_UNSUPPORTED is returned, so the caller can answer the
 * request with an error.
 *
 * @param w       caller's writer; one object is appended.
 * @param result  the result (an object).
 * @return 0; ACP_ERR_INVALID_ARGUMENT (w NULL, result not an object);
 *         ACP_ERR_UNSUPPORTED (resultType present and not "complete");
 *         ACP_ERR_NOMEM or ACP_ERR_LIMIT from the writer.
 */
ACP_EXTERN int acp_mcp_era_write_result(acp_json_writer *w,
                                        const acp_json_val *result);

/**
 * The params member a 2026-07-28 Streamable HTTP `Mcp-Name` header mirrors:
 * the `name` of tools/call and prompts/get, the `uri` of resources/read,
 * the `taskId` of tasks/get, tasks/update and tasks/cancel. The client writes
 * the header from it and the server checks the header against it, so both sides
 * share this one rule.
 *
 * @param method  the request's `method` value (may be NULL).
 * @param params  the request's `params` value (may be NULL).
 * @return the member's value, borrowed from params' document; NULL for any
 *         other method or when the member is absent. Its type is not
 *         checked.
 */
ACP_EXTERN const acp_json_val *acp_mcp_named_param(const acp_json_val *method,
                                                   const acp_json_val *params);

/* MARK: - Server: registry */

/** The registry. Opaque. */
typedef struct acp_mcp_server acp_mcp_server;
/** One peer of a server. Opaque. */
typedef struct acp_mcp_conn acp_mcp_conn;
/** A request in progress (tools/call, resources/read, ...). Opaque. */
typedef struct acp_mcp_call acp_mcp_call;
/** Sink for the resources a template's list handler enumerates. Opaque. */
typedef struct acp_mcp_resource_list acp_mcp_resource_list;

/**
 * Tool handler. `arguments` is the `arguments` object of the request, or
 * NULL when absent; like everything reachable from the call's message it
 * is valid only during this call (use acp_mcp_call_doc() to decode strings,
 * copy what you need later). Answer `call` now or later.
 */
typedef int (*acp_mcp_tool_cb)(acp_mcp_call *call,
                               const acp_json_val *arguments, void *user_data);
/**
 * resources/read handler. `uri` is the decoded URI, NUL-terminated, valid
 * during the call. For a template, acp_mcp_call_uri_var() gives the
 * variables.
 */
typedef int (*acp_mcp_read_cb)(acp_mcp_call *call, const char *uri,
                               size_t uri_len, void *user_data);
/**
 * A template's list handler: called synchronously during resources/list to
 * enumerate concrete resources (acp_mcp_resource_list_add()). Must not
 * answer anything. Return 0, or a negative code (the list request is then
 * answered -32603).
 */
typedef int (*acp_mcp_template_list_cb)(acp_mcp_server *server,
                                        acp_mcp_resource_list *list,
                                        void *user_data);
/**
 * prompts/get handler. `arguments` is the arguments object (string values,
 * required ones checked present) or NULL.
 */
typedef int (*acp_mcp_prompt_cb)(acp_mcp_call *call,
                                 const acp_json_val *arguments,
                                 void *user_data);
/**
 * completion/complete handler. `ref` ({"type":"ref/prompt","name"} or
 * {"type":"ref/resource","uri"}, checked to name a registered prompt or a
 * registered resource or template), `argument` ({"name","value"}, strings),
 * `context` (the `context` object or NULL). Answer with
 * acp_mcp_call_respond_completion() or _respond_raw().
 */
typedef int (*acp_mcp_complete_cb)(acp_mcp_call *call, const acp_json_val *ref,
                                   const acp_json_val *argument,
                                   const acp_json_val *context,
                                   void *user_data);
/** Called when the peer cancels `call` (notifications/cancelled). */
typedef int (*acp_mcp_cancel_cb)(acp_mcp_call *call, void *user_data);
/**
 * Response to a server->client request issued from a call. `status` is 0
 * (msg->result is the result), ACP_ERR_PROTOCOL (the peer answered an
 * error: msg->error_code, msg->error_message, msg->error_data),
 * ACP_ERR_TIMEOUT, ACP_ERR_CANCELLED (the call was cancelled) or
 * ACP_ERR_CLOSED. `msg` is valid only during the callback.
 */
typedef int (*acp_mcp_call_response_cb)(acp_mcp_call *call, int status,
                                        const acp_rpc_msg *msg,
                                        void *user_data);
/** Connection-level events. */
typedef int (*acp_mcp_conn_cb)(acp_mcp_conn *conn, void *user_data);
/** Notifications the server does not handle itself (roots/list_changed,
 * extensions). */
typedef int (*acp_mcp_conn_notification_cb)(acp_mcp_conn *conn,
                                            const acp_rpc_msg *msg,
                                            void *user_data);

/** Version of the definition structs below. */
#define ACP_MCP_DEF_VERSION 1

/**
 * A tool. All strings are NUL-terminated and COPIED by
 * acp_mcp_server_add_tool(); JSON members must each be one valid JSON text
 * of the stated type (checked). NULL members are omitted.
 */
typedef struct acp_mcp_tool_def {
  unsigned version;          /**< ACP_MCP_DEF_VERSION */
  const char *name;          /**< required, unique */
  const char *title;         /**< optional display name */
  const char *description;   /**< optional */
  const char *input_schema;  /**< JSON object; NULL: {"type":"object"} */
  const char *output_schema; /**< JSON object or NULL */
  const char *annotations;   /**< JSON object or NULL */
  const char *icons;         /**< JSON array or NULL */
  const char *meta;          /**< JSON object for `_meta`, or NULL */
  acp_mcp_tool_cb handler;   /**< required */
  void *user_data;
} acp_mcp_tool_def;

/** A static resource (copied like acp_mcp_tool_def). */
typedef struct acp_mcp_resource_def {
  unsigned version;        /**< ACP_MCP_DEF_VERSION */
  const char *uri;         /**< required, unique */
  const char *name;        /**< required */
  const char *title;       /**< optional */
  const char *description; /**< optional */
  const char *mime_type;   /**< optional */
  int64_t size;            /**< bytes, or -1 to omit */
  const char *annotations; /**< JSON object or NULL */
  const char *icons;       /**< JSON array or NULL */
  acp_mcp_read_cb handler; /**< required */
  void *user_data;
} acp_mcp_resource_def;

/** A resource template (copied like acp_mcp_tool_def). */
typedef struct acp_mcp_template_def {
  unsigned version;                /**< ACP_MCP_DEF_VERSION */
  const char *uri_template;        /**< required, RFC 6570 level 1 */
  const char *name;                /**< required */
  const char *title;               /**< optional */
  const char *description;         /**< optional */
  const char *mime_type;           /**< optional */
  const char *annotations;         /**< JSON object or NULL */
  const char *icons;               /**< JSON array or NULL */
  acp_mcp_read_cb handler;         /**< required */
  acp_mcp_template_list_cb lister; /**< optional */
  void *user_data;
} acp_mcp_template_def;

/** A prompt (copied like acp_mcp_tool_def). */
typedef struct acp_mcp_prompt_def {
  unsigned version;        /**< ACP_MCP_DEF_VERSION */
  const char *name;        /**< required, unique */
  const char *title;       /**< optional */
  const char *description; /**< optional */
  /** JSON array of {"name", "description"?, "required"?} or NULL. */
  const char *arguments;
  const char *icons;         /**< JSON array or NULL */
  acp_mcp_prompt_cb handler; /**< required */
  void *user_data;
} acp_mcp_prompt_def;

/**
 * Create a registry.
 * @param out        receives the server (NULL on failure).
 * @param name, version  serverInfo name and version (copied; required).
 * @param user_data  returned by acp_mcp_server_get_user_data().
 * @param mem        allocator or NULL; copied; used by every conn too.
 * @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_mcp_server_new(acp_mcp_server **out, const char *name,
                                  const char *version, void *user_data,
                                  const acp_mem *mem);
/**
 * Free the registry and every conn still attached to it (their pointers
 * become invalid). Accepts NULL.
 */
ACP_EXTERN void acp_mcp_server_free(acp_mcp_server *server);
ACP_EXTERN void *acp_mcp_server_get_user_data(const acp_mcp_server *server);

/**
 * Optional serverInfo `title` and the `instructions` of the initialize
 * result (copied; NULL clears).
 * @return 0, ACP_ERR_INVALID_ARGUMENT (server NULL) or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_mcp_server_set_title(acp_mcp_server *server,
                                        const char *title);
ACP_EXTERN int acp_mcp_server_set_instructions(acp_mcp_server *server,
                                               const char *instructions);
/** Items per list page; 0 (the default) means everything in one page. */
ACP_EXTERN void acp_mcp_server_set_page_size(acp_mcp_server *server, size_t n);
/** Offer logging (capability `logging`, logging/setLevel). Default off. */
ACP_EXTERN void acp_mcp_server_set_logging(acp_mcp_server *server, int on);
/** Offer resources/subscribe (resources.subscribe). Default on. */
ACP_EXTERN void acp_mcp_server_set_subscribe(acp_mcp_server *server, int on);
/** Capability families, for acp_mcp_server_declare(). */
enum {
  ACP_MCP_CAP_TOOLS = 1,
  ACP_MCP_CAP_RESOURCES = 2,
  ACP_MCP_CAP_PROMPTS = 4
};
/** Declare families (ACP_MCP_CAP_* bits) even while nothing is registered. */
ACP_EXTERN void acp_mcp_server_declare(acp_mcp_server *server, unsigned caps);
/** The completion/complete handler (NULL: not offered, -32601). */
ACP_EXTERN void acp_mcp_server_set_completion(acp_mcp_server *server,
                                              acp_mcp_complete_cb cb,
                                              void *user_data);
/** What a CacheableResult hint (2026-07-28 `ttlMs` / `cacheScope`) is set
 * for, with acp_mcp_server_set_cache(). */
typedef enum acp_mcp_cache_target {
  ACP_MCP_CACHE_TOOLS_LIST = ACP_MCP_LIST_TOOLS,
  ACP_MCP_CACHE_RESOURCES_LIST = ACP_MCP_LIST_RESOURCES,
  ACP_MCP_CACHE_TEMPLATES_LIST = ACP_MCP_LIST_RESOURCE_TEMPLATES,
  ACP_MCP_CACHE_PROMPTS_LIST = ACP_MCP_LIST_PROMPTS,
  ACP_MCP_CACHE_DISCOVER = 4,
  /** resources/read: of every resource (key NULL), or of one registered
   * resource or template (key its uri or uri template). */
  ACP_MCP_CACHE_READ = 5
} acp_mcp_cache_target;

/** `cacheScope` of a CacheableResult. */
typedef enum acp_mcp_cache_scope {
  ACP_MCP_CACHE_PRIVATE = 0, /**< "private": only the requesting client */
  ACP_MCP_CACHE_PUBLIC = 1   /**< "public": shared intermediaries too */
} acp_mcp_cache_scope;

/**
 * Set the caching hints sent on 2026-07-28 results (CacheableResult:
 * server/discover, the four lists, resources/read). Every such result
 * carries them; until set they are `"ttlMs": 0, "cacheScope": "private"`
 * (immediately stale). Results to a stateful (2025) client never carry
 * them. A read of a resource or template with its own setting uses it,
 * others the ACP_MCP_CACHE_READ default (key NULL). A per-registration
 * setting is dropped with its registration.
 *
 * @param key     NULL, or for ACP_MCP_CACHE_READ the uri of a registered
 *                resource or the uri template of a registered template.
 * @param ttl_ms  freshness in milliseconds (<= INT64_MAX).
 * @return 0; ACP_ERR_INVALID_ARGUMENT (server NULL, target or scope out of
 *         range, key given for a list, ttl_ms too large);
 *         ACP_ERR_NOT_FOUND (key names no registration).
 */
ACP_EXTERN int acp_mcp_server_set_cache(acp_mcp_server *server,
                                        acp_mcp_cache_target target,
                                        const char *key, uint64_t ttl_ms,
                                        acp_mcp_cache_scope scope);
/**
 * The key that integrity-protects the `requestState` of 2026-07-28 multi
 * round-trip results (HMAC-SHA256), copied. The core reads no entropy:
 * the caller passes random bytes from the OS (acp mcp serve uses
 * getrandom), one key per server; a state is valid only for the server
 * that made it (or the workers that share its key). Without a key (the
 * default, or len 0) stateless calls cannot ask for input
 * (acp_mcp_call_request_named() returns ACP_ERR_UNSUPPORTED).
 * @param len  0, or 16 to 64 bytes.
 * @return 0 or ACP_ERR_INVALID_ARGUMENT.
 */
ACP_EXTERN int acp_mcp_server_set_state_key(acp_mcp_server *server,
                                            const void *key, size_t len);
/**
 * Tasks: a tools/call of a task-capable tool (see
 * acp_mcp_server_set_tool_task_support()) from a client that asked for one
 * is answered at once with a task handle and runs on; the client polls.
 * Both wire forms are served from the same tools:
 *   - 2025-11-25 (a session that negotiated it): capability `tasks`
 *     (list, cancel, requests.tools.call); the request carries a `task`
 *     param; answered {"task":{taskId,status,createdAt,lastUpdatedAt,ttl,
 *     pollInterval?}}; tasks/get (the Task), tasks/result (the tool's
 *     result with _meta[ACP_MCP_META_RELATED_TASK], or its error; held
 *     until the task ends), tasks/list (the session's tasks, newest
 *     first, in pages of acp_mcp_server_set_page_size() with an opaque
 *     nextCursor that stays valid while tasks come and go; a bad cursor
 *     is -32602),
 *     tasks/cancel (the cancelled Task; -32602 when it already ended);
 *     notifications/tasks/status to the session on each final status.
 *     Tasks belong to the session that made them.
 *   - 2026-07-28 (stateless requests): capabilities.extensions
 *     [ACP_MCP_EXT_TASKS]; a request whose clientCapabilities declare the
 *     extension may get {"resultType":"task",taskId,status,createdAt,
 *     lastUpdatedAt,ttlMs,pollIntervalMs?}; tasks/get answers the task with
 *     its `result`, `error` or pending `inputRequests` inlined;
 *     tasks/update {taskId,inputResponses} answers input requests;
 *     tasks/cancel acks (also for an ended task). tasks/get, tasks/update
 *     and tasks/cancel without the extension declared: -32021;
 *     tasks/result and tasks/list: -32601. A subscriptions/listen whose
 *     request declares the extension may name tasks in its filter
 *     (`"taskIds": [...]`, acknowledged back; ignored without the
 *     extension): it gets `notifications/tasks`, the task as tasks/get
 *     shows it, tagged with the listen's id, at once for each named task
 *     that exists and then on each status change (input_required, back to
 *     working, completed, failed, cancelled).
 * A task is created when the handler calls acp_mcp_call_start_task(), or
 * when it returns with the call unanswered and no input pending; a 2025
 * task-augmented call the handler answers at once gets a task too. The
 * handler then answers the call later with the usual respond functions:
 * a result makes the task `completed` (a tool error too, with isError),
 * acp_mcp_call_respond_error() makes it `failed`. tasks/cancel marks it
 * `cancelled`, sets the call cancelled and runs its cancel callback; a
 * later answer is dropped (and releases the call). In a 2026 task,
 * acp_mcp_call_request_named() (elicit, sample, roots) puts the task in
 * `input_required` with the request under its key; tasks/update runs
 * `cb` with the answer. In a 2025 task, the same call sends the request
 * to the session that made the task (ACP_ERR_INVALID_STATE once it is
 * gone; ACP_ERR_UNSUPPORTED without the client capability), with
 * _meta[ACP_MCP_META_RELATED_TASK] = {taskId} merged into its params; the
 * task is `input_required` (notifications/tasks/status) until every such
 * request is answered, then `working` again, and `cb` gets the answer.
 *
 * Task ids are 128 bits of HMAC-SHA256 under the state key (so tasks need
 * acp_mcp_server_set_state_key(); without a key none are offered). Ended
 * tasks are kept `ttl_ms` from their creation, measured on the now_ms the
 * conns are given (the server uses the latest seen); running ones are
 * kept until they end. At most `max_tasks` exist at once: past that a
 * 2026 call runs as an ordinary call, a 2025 task request is answered
 * -32603, and acp_mcp_call_start_task() returns ACP_ERR_LIMIT.
 * @param max_tasks         0 turns tasks off (the default).
 * @param ttl_ms            > 0.
 * @param poll_interval_ms  suggested poll interval; 0 omits it.
 * @return 0 or ACP_ERR_INVALID_ARGUMENT.
 */
ACP_EXTERN int acp_mcp_server_set_tasks(acp_mcp_server *server,
                                        size_t max_tasks, uint64_t ttl_ms,
                                        uint64_t poll_interval_ms);
/**
 * The Unix time in milliseconds at which the conns' now_ms clock read 0,
 * for the ISO 8601 createdAt / lastUpdatedAt of tasks (the core reads no
 * clock; acp mcp serve passes the wall clock minus uv_now()). Default 0.
 */
ACP_EXTERN void acp_mcp_server_set_epoch(acp_mcp_server *server,
                                         int64_t epoch_ms);
/** A tool's `execution.taskSupport`. */
typedef enum acp_mcp_task_support {
  ACP_MCP_TASK_FORBIDDEN = 0, /**< never a task (the default; not listed) */
  ACP_MCP_TASK_OPTIONAL = 1,  /**< a task when the client asks */
  ACP_MCP_TASK_REQUIRED = 2   /**< only as a task */
} acp_mcp_task_support;
/**
 * Set a registered tool's task support; tools/list shows it as
 * `execution: {"taskSupport": ...}` (nothing for FORBIDDEN).
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOT_FOUND (no such tool) or
 *         ACP_ERR_NOMEM.
 */
ACP_EXTERN int
acp_mcp_server_set_tool_task_support(acp_mcp_server *server, const char *name,
                                     acp_mcp_task_support support);
/** Tasks held now (running and ended ones not yet expired). */
ACP_EXTERN size_t acp_mcp_server_task_count(const acp_mcp_server *server);
/** Called when a conn receives notifications/initialized. */
ACP_EXTERN void acp_mcp_server_set_on_initialized(acp_mcp_server *server,
                                                  acp_mcp_conn_cb cb);
/** Called with notifications the server does not handle itself. */
ACP_EXTERN void
acp_mcp_server_set_on_notification(acp_mcp_server *server,
                                   acp_mcp_conn_notification_cb cb);

/**
 * Register a tool, resource, template or prompt. Registration order is list
 * order. Changes are visible to every conn at once; tell peers with
 * acp_mcp_server_list_changed().
 * @return 0, ACP_ERR_INVALID_ARGUMENT (missing required member, wrong
 *         version, JSON member invalid or of the wrong type, malformed
 *         template), ACP_ERR_INVALID_STATE (the name / uri / template is
 *         already registered) or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_mcp_server_add_tool(acp_mcp_server *server,
                                       const acp_mcp_tool_def *def);
ACP_EXTERN int acp_mcp_server_add_resource(acp_mcp_server *server,
                                           const acp_mcp_resource_def *def);
ACP_EXTERN int acp_mcp_server_add_template(acp_mcp_server *server,
                                           const acp_mcp_template_def *def);
ACP_EXTERN int acp_mcp_server_add_prompt(acp_mcp_server *server,
                                         const acp_mcp_prompt_def *def);
/**
 * Remove by name (tools, prompts), uri (resources) or uri template. Calls in
 * progress are not affected.
 * @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOT_FOUND.
 */
ACP_EXTERN int acp_mcp_server_remove_tool(acp_mcp_server *server,
                                          const char *name);
ACP_EXTERN int acp_mcp_server_remove_resource(acp_mcp_server *server,
                                              const char *uri);
ACP_EXTERN int acp_mcp_server_remove_template(acp_mcp_server *server,
                                              const char *uri_template);
ACP_EXTERN int acp_mcp_server_remove_prompt(acp_mcp_server *server,
                                            const char *name);

/**
 * The registered tool `name`'s entry as tools/list shows it (one JSON
 * object: name, inputSchema, ...), borrowed: valid until the tool is
 * removed or the server freed. For transports that check a request against
 * the tool's schema (Streamable HTTP's x-mcp-header parameters).
 * @param len  receives the length (0 when not found); may be NULL.
 * @return the JSON, or NULL when no such tool is registered.
 */
ACP_EXTERN const char *acp_mcp_server_tool_json(const acp_mcp_server *server,
                                                const char *name,
                                                size_t name_len, size_t *len);

/**
 * Add one resource to a resources/list answer (from a template's lister).
 * Strings are copied into the answer; mime_type and description may be
 * NULL.
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM or ACP_ERR_LIMIT.
 */
ACP_EXTERN int acp_mcp_resource_list_add(acp_mcp_resource_list *list,
                                         const char *uri, const char *name,
                                         const char *mime_type,
                                         const char *description);

/**
 * Send notifications/<list>/list_changed to every initialized conn and
 * every open subscriptions/listen that asked for it (the resource-templates
 * list shares notifications/resources/list_changed).
 * @return 0 or the first error from a conn (ACP_ERR_NOMEM, ACP_ERR_LIMIT);
 *         every conn is tried.
 */
ACP_EXTERN int acp_mcp_server_list_changed(acp_mcp_server *server,
                                           acp_mcp_list which);
/**
 * Send notifications/resources/updated {"uri"} to every conn subscribed to
 * `uri` (exact match), by resources/subscribe or a subscriptions/listen.
 * @return 0 or the first error from a conn.
 */
ACP_EXTERN int acp_mcp_server_resource_updated(acp_mcp_server *server,
                                               const char *uri);
/**
 * End every open 2026-07-28 subscriptions/listen (of every conn, or of one)
 * gracefully: each is answered with its result, an empty
 * {"resultType":"complete"}, and stops receiving notifications. For a
 * server shutting down; over Streamable HTTP the answer ends the listen's
 * SSE stream.
 * @return 0, ACP_ERR_INVALID_ARGUMENT or the first error answering (every
 *         listen is ended anyway).
 */
ACP_EXTERN int acp_mcp_server_close_listens(acp_mcp_server *server);
ACP_EXTERN int acp_mcp_conn_close_listens(acp_mcp_conn *conn);
/**
 * Send notifications/message to every initialized conn whose level allows
 * it. `data` is one JSON value (verbatim) or NULL for null; `logger` may be
 * NULL. Silently does nothing when logging is off.
 * @return 0, ACP_ERR_INVALID_ARGUMENT or the first error from a conn.
 */
ACP_EXTERN int acp_mcp_server_log(acp_mcp_server *server,
                                  acp_mcp_log_level level, const char *logger,
                                  const char *data, size_t data_len);

/* MARK: - Server: connections */

/**
 * Attach a new peer to `server`. The conn owns an rpc session (MCP cancel
 * style, batches off until 2025-03-26 is negotiated, other options default).
 * @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_mcp_conn_new(acp_mcp_conn **out, acp_mcp_server *server,
                                void *user_data);
/**
 * Detach and free a conn. Calls in progress are freed without an answer
 * (their handles become invalid); before that, each one with a cancel
 * callback (acp_mcp_call_set_on_cancel()) gets it, as if the peer had
 * cancelled it, so that a handler holding the call can let go of it (what
 * it answers from there is dropped). Accepts NULL.
 */
ACP_EXTERN void acp_mcp_conn_free(acp_mcp_conn *conn);
ACP_EXTERN void *acp_mcp_conn_get_user_data(const acp_mcp_conn *conn);
ACP_EXTERN acp_mcp_server *acp_mcp_conn_server(const acp_mcp_conn *conn);
/** The conn's rpc session (borrowed; lives as long as the conn). */
ACP_EXTERN acp_rpc_session *acp_mcp_conn_session(acp_mcp_conn *conn);

/** As acp_rpc_session_recv() / _send() / _recv_eof() on the conn's session,
 * with the same return values. */
ACP_EXTERN acp_ssize acp_mcp_conn_recv(acp_mcp_conn *conn, const char *data,
                                       size_t len, uint64_t now_ms);
ACP_EXTERN acp_ssize acp_mcp_conn_send(acp_mcp_conn *conn, const char **data);
ACP_EXTERN int acp_mcp_conn_recv_eof(acp_mcp_conn *conn, uint64_t now_ms);
/** Earliest deadline of a server->client request, UINT64_MAX if none. */
ACP_EXTERN uint64_t acp_mcp_conn_get_expiry(const acp_mcp_conn *conn);
/** Expire server->client requests (their callbacks get ACP_ERR_TIMEOUT).
 * @return 0 or a fatal code. */
ACP_EXTERN int acp_mcp_conn_handle_expiry(acp_mcp_conn *conn, uint64_t now_ms);

/** The negotiated version, ACP_MCP_VERSION_UNKNOWN before initialize. */
ACP_EXTERN acp_mcp_version acp_mcp_conn_version(const acp_mcp_conn *conn);
/** Nonzero once notifications/initialized was received. */
ACP_EXTERN int acp_mcp_conn_is_initialized(const acp_mcp_conn *conn);
/**
 * The raw JSON of the client's `capabilities` / `clientInfo` from
 * initialize (borrowed, valid while the conn lives), or NULL (*len 0)
 * before initialize or when absent.
 */
ACP_EXTERN const char *acp_mcp_conn_client_capabilities(const acp_mcp_conn *c,
                                                        size_t *len);
ACP_EXTERN const char *acp_mcp_conn_client_info(const acp_mcp_conn *c,
                                                size_t *len);
/** The level set by logging/setLevel (ACP_MCP_LOG_DEBUG until then). */
ACP_EXTERN acp_mcp_log_level acp_mcp_conn_log_level(const acp_mcp_conn *c);
/** Nonzero if the conn subscribed to `uri`. */
ACP_EXTERN int acp_mcp_conn_is_subscribed(const acp_mcp_conn *c,
                                          const char *uri);
/**
 * Send notifications/message on this conn if logging is on, the conn was
 * initialized and `level` passes the conn's level (filtered messages
 * return 0).
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM, ACP_ERR_LIMIT.
 */
ACP_EXTERN int acp_mcp_conn_log(acp_mcp_conn *conn, acp_mcp_log_level level,
                                const char *logger, const char *data,
                                size_t data_len);
/**
 * Send a notification on this conn (params one JSON value or NULL).
 * @return as acp_rpc_session_notify().
 */
ACP_EXTERN int acp_mcp_conn_notify(acp_mcp_conn *conn, const char *method,
                                   const char *params, size_t params_len);

/* MARK: - Server: calls */

ACP_EXTERN acp_mcp_conn *acp_mcp_call_conn(const acp_mcp_call *call);
/** The request message; only while the handler runs, else NULL. */
ACP_EXTERN const acp_rpc_msg *acp_mcp_call_msg(const acp_mcp_call *call);
/** The message's document (for acp_json_doc_str()); only during the
 * handler, else NULL. */
ACP_EXTERN acp_json_doc *acp_mcp_call_doc(const acp_mcp_call *call);
/** The method ("tools/call", ...), static string. */
ACP_EXTERN const char *acp_mcp_call_method(const acp_mcp_call *call);
/** The tool or prompt name (copied; valid while the call lives). */
ACP_EXTERN const char *acp_mcp_call_name(const acp_mcp_call *call);
/**
 * The value of a template variable of a resources/read call (as it appears
 * in the URI, not percent-decoded; NUL-terminated; valid while the call
 * lives).
 * @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOT_FOUND.
 */
ACP_EXTERN int acp_mcp_call_uri_var(const acp_mcp_call *call, const char *name,
                                    const char **value, size_t *len);
/**
 * Nonzero if the call's request was a 2026-07-28 (stateless) one, carrying
 * `_meta["io.modelcontextprotocol/protocolVersion"]`; 0 for a call of a
 * conn that negotiated a stateful revision with initialize.
 */
ACP_EXTERN int acp_mcp_call_is_stateless(const acp_mcp_call *call);
/**
 * The raw JSON of the client capabilities that apply to this call: the
 * request's `_meta["io.modelcontextprotocol/clientCapabilities"]` for a
 * stateless call, else the conn's from initialize. Valid while the call
 * lives; NULL (*len 0) when absent.
 */
ACP_EXTERN const char *acp_mcp_call_client_capabilities(const acp_mcp_call *c,
                                                        size_t *len);
/**
 * Make a task-capable tools/call a task now (see acp_mcp_server_set_tasks()):
 * its request is answered with the task handle, and the call (same handle)
 * runs on until answered. From the handler, or later from a callback of
 * the call.
 * @return 0; ACP_ERR_INVALID_ARGUMENT (call NULL); ACP_ERR_UNSUPPORTED (not
 *         a tools/call of a task-capable tool whose client asked for tasks);
 *         ACP_ERR_INVALID_STATE (answered, cancelled, already a task, or
 *         requests of the call pending); ACP_ERR_LIMIT (max_tasks reached);
 *         ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_mcp_call_start_task(acp_mcp_call *call);
/** The call's task id (32 hex digits) while it runs as a task, or NULL. */
ACP_EXTERN const char *acp_mcp_call_task_id(const acp_mcp_call *call);
/** Handler-owned pointer stored on the call. */
ACP_EXTERN void acp_mcp_call_set_user_data(acp_mcp_call *call, void *ud);
ACP_EXTERN void *acp_mcp_call_get_user_data(const acp_mcp_call *call);
/** Nonzero if the request carried _meta.progressToken. */
ACP_EXTERN int acp_mcp_call_has_progress_token(const acp_mcp_call *call);
/** Nonzero once the peer cancelled the call. */
ACP_EXTERN int acp_mcp_call_is_cancelled(const acp_mcp_call *call);
/** The callback run when the peer cancels this call (NULL clears). */
ACP_EXTERN void acp_mcp_call_set_on_cancel(acp_mcp_call *call,
                                           acp_mcp_cancel_cb cb,
                                           void *user_data);

/**
 * Answer a tool call.
 * @param content     JSON array of content blocks (verbatim), or NULL for [].
 * @param structured  JSON value for `structuredContent`, or NULL to omit.
 * @param is_error    true: `isError: true` (a tool execution error).
 * After any respond function returns 0 the call is released (the handle is
 * invalid once the handler returns, or at once outside a handler). On a
 * cancelled call the answer is dropped and 0 returned.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (call NULL), ACP_ERR_INVALID_STATE
 *         (already answered, or not a tools/call for the typed helpers),
 *         ACP_ERR_NOMEM, ACP_ERR_LIMIT. On error the call stays unanswered.
 */
ACP_EXTERN int acp_mcp_call_respond_tool(acp_mcp_call *call,
                                         const char *content,
                                         size_t content_len,
                                         const char *structured,
                                         size_t structured_len, bool is_error);
/** A tool result with one text block. */
ACP_EXTERN int acp_mcp_call_respond_text(acp_mcp_call *call, const char *text,
                                         size_t len, bool is_error);
/** Any call: answer with a whole result object (verbatim JSON). */
ACP_EXTERN int acp_mcp_call_respond_raw(acp_mcp_call *call, const char *result,
                                        size_t len);
/** Any call: answer with a JSON-RPC error (data: JSON or NULL). */
ACP_EXTERN int acp_mcp_call_respond_error(acp_mcp_call *call, int64_t code,
                                          const char *message, const char *data,
                                          size_t data_len);
/** resources/read: {"contents":[{"uri","mimeType"?,"text"}]}. */
ACP_EXTERN int acp_mcp_call_respond_resource_text(acp_mcp_call *call,
                                                  const char *uri,
                                                  const char *mime_type,
                                                  const char *text, size_t len);
/**
 * completion/complete: {"completion":{"values","total"?,"hasMore"}}. At most
 * 100 values are sent (the spec's cap); more set hasMore.
 * @param total  total matches, or -1 to omit.
 */
ACP_EXTERN int acp_mcp_call_respond_completion(acp_mcp_call *call,
                                               const char *const *values,
                                               size_t n, int64_t total,
                                               bool has_more);

/**
 * Send notifications/progress for the call's progressToken. Does nothing
 * (returns 0) when the request had no token or the call was cancelled.
 * @param total    < 0 to omit. @param message  NULL to omit.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (progress not greater than the
 *         previous one, or not finite), ACP_ERR_NOMEM, ACP_ERR_LIMIT.
 */
ACP_EXTERN int acp_mcp_call_progress(acp_mcp_call *call, double progress,
                                     double total, const char *message);
/** As acp_mcp_conn_log() on the call's conn. */
ACP_EXTERN int acp_mcp_call_log(acp_mcp_call *call, acp_mcp_log_level level,
                                const char *logger, const char *data,
                                size_t data_len);

/**
 * Send a server->client request on behalf of `call`; `cb` gets the result
 * with the same call (which stays valid until both the call is answered
 * and every such request completed). The client capability is checked for
 * the three standard methods, and for elicitation/create its mode: `form`
 * (or no mode) needs `elicitation: {}` or `{form}`, `url` needs `{url}`.
 * @param params      JSON object (verbatim) or NULL.
 * @param timeout_ms  0 for none.
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_INVALID_STATE (call answered
 *         or cancelled), ACP_ERR_UNSUPPORTED (the client did not declare
 *         sampling / elicitation / roots), ACP_ERR_NOMEM, ACP_ERR_LIMIT.
 */
ACP_EXTERN int acp_mcp_call_request(acp_mcp_call *call, const char *method,
                                    const char *params, size_t params_len,
                                    uint64_t timeout_ms,
                                    acp_mcp_call_response_cb cb,
                                    void *user_data);
/**
 * acp_mcp_call_request() with a name for the request. On a stateful conn
 * the key is ignored. On a stateless (2026-07-28) call the request becomes
 * the input request `key` of a multi round-trip result (key NULL: "1",
 * "2", ... in the order the call issues them):
 *   - Only sampling/createMessage, elicitation/create and roots/list, from
 *     a tools/call or prompts/get call, once a state key is set
 *     (acp_mcp_server_set_state_key()), and only when the request's
 *     clientCapabilities declare the capability; else ACP_ERR_UNSUPPORTED.
 *   - When the retry carries the answer (its `inputResponses`, or the
 *     answers of earlier rounds kept in `requestState`), `cb` runs with
 *     status 0 and msg->result the answer, after the handler returned
 *     (never from inside this function).
 *   - Otherwise the request joins the call's `inputRequests`; when the
 *     handler and the callbacks above return with the call unanswered, it
 *     is answered {"resultType":"input_required","inputRequests":{...},
 *     "requestState":S} and released (`cb` never runs: the client retries
 *     the whole request and the handler runs again, so it must issue the
 *     same requests under the same keys). Issued after the handler
 *     returned, the call is answered input_required at once.
 *   S is base64url(JSON of every answer so far, the method and the name)
 *   "." base64url(HMAC-SHA256 under the state key): a retry whose
 *   requestState was altered, forged or made for another tool or prompt
 *   is answered -32602; `inputResponses` that is not an object of objects
 *   too.
 * @param key  NUL-terminated, or NULL.
 * @return as acp_mcp_call_request().
 */
ACP_EXTERN int acp_mcp_call_request_named(acp_mcp_call *call, const char *key,
                                          const char *method,
                                          const char *params, size_t params_len,
                                          uint64_t timeout_ms,
                                          acp_mcp_call_response_cb cb,
                                          void *user_data);
/** MCP error code (2025-11-25): URLElicitationRequiredError. */
#define ACP_MCP_URL_ELICITATION_REQUIRED (-32042)
/**
 * Answer a call with URLElicitationRequiredError (-32042): the request can
 * proceed only once the user completed the URL mode elicitations given,
 * `elicitations` a JSON array of {"mode":"url","elicitationId","url",
 * "message"} (checked; sent as data.elicitations). Only to a client that
 * declared URL mode (elicitation.url).
 * @return as acp_mcp_call_respond_error(), ACP_ERR_INVALID_ARGUMENT (not
 *         such an array), ACP_ERR_UNSUPPORTED (the client did not declare
 *         URL mode).
 */
ACP_EXTERN int acp_mcp_call_respond_url_elicitation_required(
    acp_mcp_call *call, const char *elicitations, size_t len);
/**
 * Send notifications/elicitation/complete {elicitationId} on `conn`: the
 * out-of-band interaction of a URL mode elicitation finished. Only to the
 * client that got the elicitation (the caller's to know).
 * @return as acp_mcp_conn_notify(), ACP_ERR_UNSUPPORTED (the client did
 *         not declare URL mode).
 */
ACP_EXTERN int acp_mcp_conn_elicitation_complete(acp_mcp_conn *conn,
                                                 const char *elicitation_id);
/** sampling/createMessage with the given params object. */
ACP_EXTERN int
acp_mcp_call_create_message(acp_mcp_call *call, const char *params,
                            size_t params_len, uint64_t timeout_ms,
                            acp_mcp_call_response_cb cb, void *user_data);
/** elicitation/create with the given params object. */
ACP_EXTERN int acp_mcp_call_elicit(acp_mcp_call *call, const char *params,
                                   size_t params_len, uint64_t timeout_ms,
                                   acp_mcp_call_response_cb cb,
                                   void *user_data);
/** roots/list. */
ACP_EXTERN int acp_mcp_call_list_roots(acp_mcp_call *call, uint64_t timeout_ms,
                                       acp_mcp_call_response_cb cb,
                                       void *user_data);

/* MARK: - Client */

/** The client. Opaque. */
typedef struct acp_mcp_client acp_mcp_client;
/** A request from the server awaiting the client's answer. Opaque; valid
 * until answered (or the client is freed). */
typedef struct acp_mcp_client_request acp_mcp_client_request;
/** Callback set for acp_mcp_client_new(). Opaque. */
typedef struct acp_mcp_client_callbacks acp_mcp_client_callbacks;

/**
 * Completion of a client request. `status`: 0 (msg->result holds the
 * result), ACP_ERR_PROTOCOL (error response: msg->error_code ...),
 * ACP_ERR_TIMEOUT, ACP_ERR_CANCELLED (acp_mcp_client_cancel()),
 * ACP_ERR_CLOSED (connection ended), ACP_ERR_UNSUPPORTED (initialize only:
 * the server answered a version we do not speak; msg is the response).
 * `msg` is valid only during the callback.
 */
typedef int (*acp_mcp_result_cb)(acp_mcp_client *c, int status,
                                 const acp_rpc_msg *msg, void *user_data);
/** One page of an acp_mcp_client_list_all() walk; `last` on the final
 * call (also set with a non-zero status, which ends the walk). */
typedef int (*acp_mcp_page_cb)(acp_mcp_client *c, int status,
                               const acp_rpc_msg *msg, bool last,
                               void *user_data);
/** notifications/progress for a request made with a progress callback. */
typedef int (*acp_mcp_progress_cb)(acp_mcp_client *c, double progress,
                                   double total /* <0: none */,
                                   const char *message /* or NULL */,
                                   size_t message_len, void *user_data);
/** A server request (roots/list, sampling/createMessage,
 * elicitation/create). `params` valid during the call. Answer later. */
typedef int (*acp_mcp_client_request_cb)(acp_mcp_client *c,
                                         acp_mcp_client_request *req,
                                         const acp_json_val *params,
                                         void *user_data);
/** notifications/message. `logger` NULL if absent; `data` may be NULL. */
typedef int (*acp_mcp_log_cb)(acp_mcp_client *c, acp_mcp_log_level level,
                              const char *logger, size_t logger_len,
                              const acp_json_val *data, void *user_data);
/** notifications/<list>/list_changed (resources covers templates). */
typedef int (*acp_mcp_list_changed_cb)(acp_mcp_client *c, acp_mcp_list which,
                                       void *user_data);
/** notifications/resources/updated. */
typedef int (*acp_mcp_updated_cb)(acp_mcp_client *c, const char *uri,
                                  size_t uri_len, void *user_data);
/** Any other notification. */
typedef int (*acp_mcp_client_notification_cb)(acp_mcp_client *c,
                                              const acp_rpc_msg *msg,
                                              void *user_data);

ACP_EXTERN int acp_mcp_client_callbacks_new(acp_mcp_client_callbacks **out);
ACP_EXTERN void acp_mcp_client_callbacks_free(acp_mcp_client_callbacks *cbs);
/** notifications/elicitation/complete: the URL mode elicitation
 * `elicitation_id` finished out of band (ids the client does not know must
 * be ignored). */
typedef int (*acp_mcp_elicitation_complete_cb)(acp_mcp_client *c,
                                               const char *elicitation_id,
                                               size_t len, void *user_data);
/** Elicitation modes (2025-11-25), for
 * acp_mcp_client_callbacks_set_elicitation_modes(). */
enum { ACP_MCP_ELICIT_FORM = 1, ACP_MCP_ELICIT_URL = 2 };
/**
 * The modes the elicitation callback handles (default ACP_MCP_ELICIT_FORM):
 * the capability declares them (form only: `elicitation: {}`; with URL:
 * `{"form":{},"url":{}}`; URL only: `{"url":{}}`), and an elicitation/create
 * of another mode is answered -32602 without calling the callback.
 * @return 0 or ACP_ERR_INVALID_ARGUMENT (0 or unknown bits).
 */
ACP_EXTERN int
acp_mcp_client_callbacks_set_elicitation_modes(acp_mcp_client_callbacks *cbs,
                                               unsigned modes);
/** notifications/elicitation/complete (else it reaches the generic
 * notification callback). */
ACP_EXTERN void acp_mcp_client_callbacks_set_on_elicitation_complete(
    acp_mcp_client_callbacks *cbs, acp_mcp_elicitation_complete_cb cb);
/** Setting one of these three declares the matching client capability. */
ACP_EXTERN void
acp_mcp_client_callbacks_set_on_roots_list(acp_mcp_client_callbacks *cbs,
                                           acp_mcp_client_request_cb cb);
ACP_EXTERN void
acp_mcp_client_callbacks_set_on_sampling(acp_mcp_client_callbacks *cbs,
                                         acp_mcp_client_request_cb cb);
ACP_EXTERN void
acp_mcp_client_callbacks_set_on_elicitation(acp_mcp_client_callbacks *cbs,
                                            acp_mcp_client_request_cb cb);
/** Called when the server cancels one of its requests (the answer will be
 * dropped). */
ACP_EXTERN void
acp_mcp_client_callbacks_set_on_request_cancelled(acp_mcp_client_callbacks *cbs,
                                                  acp_mcp_client_request_cb cb);
ACP_EXTERN void
acp_mcp_client_callbacks_set_on_log(acp_mcp_client_callbacks *cbs,
                                    acp_mcp_log_cb cb);
ACP_EXTERN void
acp_mcp_client_callbacks_set_on_list_changed(acp_mcp_client_callbacks *cbs,
                                             acp_mcp_list_changed_cb cb);
ACP_EXTERN void
acp_mcp_client_callbacks_set_on_resource_updated(acp_mcp_client_callbacks *cbs,
                                                 acp_mcp_updated_cb cb);
ACP_EXTERN void
acp_mcp_client_callbacks_set_on_notification(acp_mcp_client_callbacks *cbs,
                                             acp_mcp_client_notification_cb cb);

/**
 * Create a client (its rpc session uses MCP cancel style).
 * @param cbs  copied; may be NULL.
 * @param name, version  clientInfo (copied; required).
 * @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_mcp_client_new(acp_mcp_client **out,
                                  const acp_mcp_client_callbacks *cbs,
                                  const char *name, const char *version,
                                  void *user_data, const acp_mem *mem);
/** Pending requests are dropped without callbacks. Accepts NULL. */
ACP_EXTERN void acp_mcp_client_free(acp_mcp_client *c);
ACP_EXTERN void *acp_mcp_client_get_user_data(const acp_mcp_client *c);
/** The rpc session (borrowed). */
ACP_EXTERN acp_rpc_session *acp_mcp_client_session(acp_mcp_client *c);
ACP_EXTERN acp_ssize acp_mcp_client_recv(acp_mcp_client *c, const char *data,
                                         size_t len, uint64_t now_ms);
ACP_EXTERN acp_ssize acp_mcp_client_send(acp_mcp_client *c, const char **data);
/** Every pending request completes with ACP_ERR_CLOSED. */
ACP_EXTERN int acp_mcp_client_recv_eof(acp_mcp_client *c, uint64_t now_ms);
/** Earliest request deadline (timeouts), UINT64_MAX if none. */
ACP_EXTERN uint64_t acp_mcp_client_get_expiry(const acp_mcp_client *c);
/**
 * Expire requests whose deadline passed: each sends notifications/cancelled
 * and completes with ACP_ERR_TIMEOUT.
 * @return 0 or a fatal code.
 */
ACP_EXTERN int acp_mcp_client_handle_expiry(acp_mcp_client *c, uint64_t now_ms);

/**
 * Default timeouts for requests made without explicit ones: `timeout_ms`
 * of inactivity (0: none), reset by progress, never beyond `max_total_ms`
 * after the request was sent (0: no maximum). Defaults 0 / 0.
 */
ACP_EXTERN void acp_mcp_client_set_timeouts(acp_mcp_client *c,
                                            uint64_t timeout_ms,
                                            uint64_t max_total_ms);
/** The version asked in initialize (default ACP_MCP_VERSION_LATEST).
 * @return 0 or ACP_ERR_INVALID_ARGUMENT. */
ACP_EXTERN int acp_mcp_client_set_protocol_version(acp_mcp_client *c,
                                                   acp_mcp_version v);
/** Declare roots.listChanged (default off). */
ACP_EXTERN void acp_mcp_client_set_roots_list_changed(acp_mcp_client *c,
                                                      int on);

/** Per-request options; zero-initialize with ACP_MCP_REQUEST_OPTS_INIT. */
typedef struct acp_mcp_request_opts {
  unsigned version;      /**< ACP_MCP_REQUEST_OPTS_VERSION */
  uint64_t timeout_ms;   /**< 0: the client default */
  uint64_t max_total_ms; /**< 0: the client default */
  /** Non-NULL: add _meta.progressToken and deliver progress here. */
  acp_mcp_progress_cb on_progress;
  void *progress_user_data;
} acp_mcp_request_opts;
#define ACP_MCP_REQUEST_OPTS_VERSION 1
#define ACP_MCP_REQUEST_OPTS_INIT                                              \
  { ACP_MCP_REQUEST_OPTS_VERSION, 0, 0, NULL, NULL }

/**
 * Send `initialize`, then on a good answer notifications/initialized. `cb`
 * gets status 0 once the version was accepted.
 * @return 0, ACP_ERR_INVALID_STATE (already sent), ACP_ERR_NOMEM,
 *         ACP_ERR_LIMIT.
 */
ACP_EXTERN int acp_mcp_client_initialize(acp_mcp_client *c, uint64_t now_ms,
                                         acp_mcp_result_cb cb, void *user_data);
/** The negotiated version (UNKNOWN before initialize completed). */
ACP_EXTERN acp_mcp_version acp_mcp_client_version(const acp_mcp_client *c);
/** Raw `capabilities`, `serverInfo` JSON and decoded `instructions` from
 * the initialize result (borrowed, NULL when absent). */
ACP_EXTERN const char *
acp_mcp_client_server_capabilities(const acp_mcp_client *c, size_t *len);
ACP_EXTERN const char *acp_mcp_client_server_info(const acp_mcp_client *c,
                                                  size_t *len);
ACP_EXTERN const char *acp_mcp_client_instructions(const acp_mcp_client *c);

/**
 * Send any request (params: JSON object or NULL). Every helper below is this
 * with a fixed method and params. Before initialize completed only
 * `initialize`, `ping` and `server/discover` may be sent. Once the client
 * is stateless (acp_mcp_client_era()), the 2026 `_meta` is added to
 * `params` (see MARK: - Client: eras).
 * @param opts    NULL for defaults.
 * @param id_out  optional; the request id (for acp_mcp_client_cancel()).
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_INVALID_STATE, ACP_ERR_NOMEM,
 *         ACP_ERR_LIMIT.
 */
ACP_EXTERN int acp_mcp_client_send_request(
    acp_mcp_client *c, const char *method, const char *params,
    size_t params_len, const acp_mcp_request_opts *opts, uint64_t now_ms,
    acp_mcp_result_cb cb, void *user_data, int64_t *id_out);
/** tools/list, resources/list, resources/templates/list, prompts/list with
 * an optional cursor (NUL-terminated, NULL for the first page). */
ACP_EXTERN int acp_mcp_client_list(acp_mcp_client *c, acp_mcp_list which,
                                   const char *cursor,
                                   const acp_mcp_request_opts *opts,
                                   uint64_t now_ms, acp_mcp_result_cb cb,
                                   void *user_data, int64_t *id_out);
/** Walk every page of a list, following nextCursor (at most 10000 pages;
 * a repeated cursor ends the walk with ACP_ERR_PROTOCOL). */
ACP_EXTERN int acp_mcp_client_list_all(acp_mcp_client *c, acp_mcp_list which,
                                       const acp_mcp_request_opts *opts,
                                       uint64_t now_ms, acp_mcp_page_cb cb,
                                       void *user_data);
/** tools/call. `arguments`: JSON object or NULL. */
ACP_EXTERN int acp_mcp_client_call_tool(acp_mcp_client *c, const char *name,
                                        const char *arguments, size_t args_len,
                                        const acp_mcp_request_opts *opts,
                                        uint64_t now_ms, acp_mcp_result_cb cb,
                                        void *user_data, int64_t *id_out);
ACP_EXTERN int acp_mcp_client_read_resource(acp_mcp_client *c, const char *uri,
                                            const acp_mcp_request_opts *opts,
                                            uint64_t now_ms,
                                            acp_mcp_result_cb cb,
                                            void *user_data, int64_t *id_out);
/** prompts/get. `arguments`: JSON object of strings or NULL. */
ACP_EXTERN int acp_mcp_client_get_prompt(acp_mcp_client *c, const char *name,
                                         const char *arguments, size_t args_len,
                                         const acp_mcp_request_opts *opts,
                                         uint64_t now_ms, acp_mcp_result_cb cb,
                                         void *user_data, int64_t *id_out);
ACP_EXTERN int acp_mcp_client_subscribe(acp_mcp_client *c, const char *uri,
                                        uint64_t now_ms, acp_mcp_result_cb cb,
                                        void *user_data);
ACP_EXTERN int acp_mcp_client_unsubscribe(acp_mcp_client *c, const char *uri,
                                          uint64_t now_ms, acp_mcp_result_cb cb,
                                          void *user_data);
/**
 * completion/complete. `ref`: JSON object ({"type":"ref/prompt","name"} or
 * {"type":"ref/resource","uri"}); `context_args`: JSON object or NULL.
 */
ACP_EXTERN int acp_mcp_client_complete(acp_mcp_client *c, const char *ref,
                                       const char *arg_name,
                                       const char *arg_value,
                                       const char *context_args,
                                       uint64_t now_ms, acp_mcp_result_cb cb,
                                       void *user_data);
ACP_EXTERN int acp_mcp_client_set_log_level(acp_mcp_client *c,
                                            acp_mcp_log_level level,
                                            uint64_t now_ms,
                                            acp_mcp_result_cb cb,
                                            void *user_data);
ACP_EXTERN int acp_mcp_client_ping(acp_mcp_client *c, uint64_t now_ms,
                                   acp_mcp_result_cb cb, void *user_data);
/**
 * Cancel a pending request: sends notifications/cancelled (with `reason`
 * if not NULL) and completes it now with ACP_ERR_CANCELLED; a late answer
 * is ignored. `initialize` cannot be cancelled.
 * @return 0, ACP_ERR_NOT_FOUND, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM,
 *         ACP_ERR_LIMIT, or a fatal code from the callback.
 */
ACP_EXTERN int acp_mcp_client_cancel(acp_mcp_client *c, int64_t id,
                                     const char *reason, uint64_t now_ms);
/** Send notifications/roots/list_changed. */
ACP_EXTERN int acp_mcp_client_roots_changed(acp_mcp_client *c);

/* MARK: - Client: tasks */

/*
 * Tasks of the server (see acp_mcp_server_set_tasks() for both wire
 * forms). A task-augmented tools/call is answered with a task handle
 * (acp_mcp_result_task() reads it: 2025 {"task":{...}}, 2026 a flat
 * CreateTaskResult with resultType "task") or, when the server chose to
 * answer at once, with the ordinary result. Then poll with
 * acp_mcp_client_task_get(): a 2026 task's answer is inlined there
 * (`result` or `error`, or `inputRequests` to answer with
 * acp_mcp_client_task_update()); a 2025 task's with
 * acp_mcp_client_task_result(), which the server holds until the task
 * ends. The callbacks get the raw results.
 */

/**
 * Declare the 2026 tasks extension (capabilities.extensions
 * ["io.modelcontextprotocol/tasks"] in each request's _meta) so that the
 * server may answer task-capable tools with tasks. Before
 * acp_mcp_client_initialize(). No effect on a 2025 session (there the
 * request asks, see acp_mcp_client_call_tool_task()).
 * @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_INVALID_STATE.
 */
ACP_EXTERN int acp_mcp_client_set_tasks(acp_mcp_client *c, int on);
/**
 * tools/call as a task: 2025-11-25 adds `"task":{"ttl":ttl_ms}` (ttl_ms 0
 * omits it); 2026 sends an ordinary tools/call (the server decides; needs
 * acp_mcp_client_set_tasks()).
 * @return as acp_mcp_client_call_tool(), or ACP_ERR_UNSUPPORTED (a session
 *         of a revision before 2025-11-25), ACP_ERR_INVALID_STATE (2026
 *         without acp_mcp_client_set_tasks()).
 */
ACP_EXTERN int acp_mcp_client_call_tool_task(
    acp_mcp_client *c, const char *name, const char *arguments, size_t args_len,
    uint64_t ttl_ms, const acp_mcp_request_opts *opts, uint64_t now_ms,
    acp_mcp_result_cb cb, void *user_data, int64_t *id_out);
/** tasks/get {taskId}. */
ACP_EXTERN int acp_mcp_client_task_get(acp_mcp_client *c, const char *task_id,
                                       uint64_t now_ms, acp_mcp_result_cb cb,
                                       void *user_data);
/** tasks/cancel {taskId}. */
ACP_EXTERN int acp_mcp_client_task_cancel(acp_mcp_client *c,
                                          const char *task_id, uint64_t now_ms,
                                          acp_mcp_result_cb cb,
                                          void *user_data);
/** tasks/result {taskId} (2025 only; ACP_ERR_UNSUPPORTED at 2026). */
ACP_EXTERN int acp_mcp_client_task_result(acp_mcp_client *c,
                                          const char *task_id, uint64_t now_ms,
                                          acp_mcp_result_cb cb,
                                          void *user_data);
/** tasks/update {taskId, inputResponses} (2026 only; ACP_ERR_UNSUPPORTED
 * otherwise). `input_responses`: a JSON object keyed like the task's
 * inputRequests. */
ACP_EXTERN int acp_mcp_client_task_update(
    acp_mcp_client *c, const char *task_id, const char *input_responses,
    size_t len, uint64_t now_ms, acp_mcp_result_cb cb, void *user_data);
/**
 * Answer a 2026 task's input: `task` is a tasks/get answer (or a
 * notifications/tasks message's task as a result) whose status is
 * input_required; each of its inputRequests goes to the elicitation,
 * sampling or roots callback registered for it, as for an input_required
 * result, and once every one was answered the answers go back in one
 * tasks/update {taskId, inputResponses}, whose answer reaches `cb` (or an
 * error status with msg NULL: ACP_ERR_UNSUPPORTED when a request has no
 * callback, ACP_ERR_PROTOCOL for malformed inputRequests). Then poll
 * again. `task` is read during the call only.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULLs, no inputRequests object),
 *         ACP_ERR_UNSUPPORTED (not 2026), ACP_ERR_NOMEM, or the first
 *         callback's failure.
 */
ACP_EXTERN int acp_mcp_client_task_answer(acp_mcp_client *c,
                                          const char *task_id,
                                          const acp_rpc_msg *task,
                                          uint64_t now_ms, acp_mcp_result_cb cb,
                                          void *user_data);
/** tasks/list with an optional cursor (2025 only). */
ACP_EXTERN int acp_mcp_client_task_list(acp_mcp_client *c, const char *cursor,
                                        uint64_t now_ms, acp_mcp_result_cb cb,
                                        void *user_data);
/**
 * Whether a result is a task (a CreateTaskResult of either form, a
 * tasks/get or tasks/cancel result): 1 with its taskId and status
 * (borrowed, decoded, valid while msg is), else 0. Any output may be NULL.
 */
ACP_EXTERN int acp_mcp_result_task(const acp_rpc_msg *msg, const char **task_id,
                                   size_t *id_len, const char **status,
                                   size_t *status_len);

/* MARK: - Client: eras (2026-07-28) */

/*
 * The client speaks the stateless revision 2026-07-28 as well as the
 * stateful ones. Which one acp_mcp_client_initialize() uses is the client's
 * mode (acp_mcp_client_set_mode()):
 *
 *   - ACP_MCP_CLIENT_STATEFUL (the default, as before this revision
 *     existed): `initialize` with the version of
 *     acp_mcp_client_set_protocol_version(), then notifications/initialized.
 *   - ACP_MCP_CLIENT_AUTO: probe with `server/discover` (carrying the 2026
 *     `_meta`). A result whose `supportedVersions` lists "2026-07-28" makes
 *     the client stateless; any error answer (-32601 from a server that
 *     does not know the method, -32022 UnsupportedProtocolVersion, -32600
 *     "not initialized", ...) or a result without "2026-07-28" makes it
 *     fall back to `initialize` as in STATEFUL mode (the 2026 client
 *     negotiates down). The callback of acp_mcp_client_initialize() runs
 *     once, when either handshake finished.
 *   - ACP_MCP_CLIENT_STATELESS: 2026-07-28 only: `server/discover`, and the
 *     callback gets ACP_ERR_UNSUPPORTED (msg the response) when the server
 *     answers an error or does not list "2026-07-28".
 *
 * Once stateless (acp_mcp_client_era() is ACP_MCP_ERA_STATELESS):
 *   - every request carries `_meta` with
 *     "io.modelcontextprotocol/protocolVersion": "2026-07-28",
 *     "io.modelcontextprotocol/clientCapabilities" (what the callbacks
 *     declare, as initialize would) and "io.modelcontextprotocol/clientInfo"
 *     (name and version of acp_mcp_client_new()); members the caller put in
 *     `_meta` are kept. No initialize, no notifications/initialized.
 *   - acp_mcp_client_server_capabilities(), _server_info() and
 *     _instructions() come from the discover result (serverInfo from its
 *     `_meta["io.modelcontextprotocol/serverInfo"]`).
 *   - Multi round-trip requests: a tools/call, resources/read or prompts/get
 *     answered with `resultType: "input_required"` does not reach the
 *     caller's callback. Each entry of `inputRequests` is handed to the
 *     roots / sampling / elicitation callback (the same ones a stateful
 *     server's requests reach; acp_mcp_client_request_method() names it),
 *     which answers with acp_mcp_client_respond(), now or later. When every
 *     entry is answered the original request is sent again (a new id) with
 *     `inputResponses` (the answers under the server's keys) and the exact
 *     `requestState` of the interim result (omitted when it had none); the
 *     final result reaches the callback. An entry whose method has no
 *     callback, an answer with acp_mcp_client_respond_error(), or more than
 *     ACP_MCP_CLIENT_MAX_ROUNDS interim results in a row complete the
 *     request with ACP_ERR_UNSUPPORTED, ACP_ERR_CANCELLED or
 *     ACP_ERR_PROTOCOL respectively, with msg NULL. The id given by
 *     id_out names the first attempt only.
 *   - List caching: a complete tools/list, resources/list,
 *     resources/templates/list or prompts/list result with `ttlMs` > 0 and
 *     a `cacheScope` of "private" or "public" is kept for ttlMs (by method
 *     and cursor), up to 256 entries (storing one more drops the oldest).
 *     The cache belongs to this one client object and is never
 *     shared, which both scopes allow. A list request while its entry is
 *     fresh is answered from it: the callback runs before the list function
 *     returns, with a synthesized msg (msg->local set, -1 in id_out). A
 *     notifications/<list>/list_changed drops the matching entries;
 *     acp_mcp_client_cache_clear() drops all.
 *   - Results that omit `resultType` are taken as "complete" (a server of
 *     an earlier revision).
 */

/** How acp_mcp_client_initialize() chooses the protocol revision. */
typedef enum acp_mcp_client_mode {
  ACP_MCP_CLIENT_STATEFUL = 0, /**< initialize only (the default) */
  ACP_MCP_CLIENT_AUTO = 1,     /**< server/discover, else initialize */
  ACP_MCP_CLIENT_STATELESS = 2 /**< 2026-07-28 only */
} acp_mcp_client_mode;

/** Which family of revisions a client or conn speaks. */
typedef enum acp_mcp_era {
  ACP_MCP_ERA_NONE = 0,     /**< not negotiated yet */
  ACP_MCP_ERA_STATEFUL = 1, /**< 2024-11-05 .. 2025-11-25, after initialize */
  ACP_MCP_ERA_STATELESS = 2 /**< 2026-07-28, per-request _meta */
} acp_mcp_era;

/** Interim input_required results followed in a row before giving up. */
#define ACP_MCP_CLIENT_MAX_ROUNDS 16

/**
 * Set the mode (before acp_mcp_client_initialize()).
 * @return 0, ACP_ERR_INVALID_ARGUMENT (c NULL, mode out of range),
 *         ACP_ERR_INVALID_STATE (the handshake was already sent).
 */
ACP_EXTERN int acp_mcp_client_set_mode(acp_mcp_client *c,
                                       acp_mcp_client_mode mode);
/**
 * Force one revision by its string: "2026-07-28" is ACP_MCP_CLIENT_STATELESS;
 * a stateful revision is ACP_MCP_CLIENT_STATEFUL asking that version; NULL
 * or "auto" is ACP_MCP_CLIENT_AUTO (asking ACP_MCP_VERSION_LATEST if it
 * falls back).
 * @return 0, ACP_ERR_INVALID_ARGUMENT (unknown revision), or
 *         ACP_ERR_INVALID_STATE (the handshake was already sent).
 */
ACP_EXTERN int acp_mcp_client_set_protocol(acp_mcp_client *c,
                                           const char *version);
/** The negotiated era (ACP_MCP_ERA_NONE before the handshake completed). */
ACP_EXTERN acp_mcp_era acp_mcp_client_era(const acp_mcp_client *c);
/**
 * The negotiated revision as a static string ("2026-07-28", "2025-11-25",
 * ...), NULL before the handshake completed. acp_mcp_client_version() is
 * ACP_MCP_VERSION_UNKNOWN for 2026-07-28 (its enum lists the stateful
 * revisions).
 */
ACP_EXTERN const char *acp_mcp_client_protocol(const acp_mcp_client *c);
/** Drop every cached list result. Accepts NULL. */
ACP_EXTERN void acp_mcp_client_cache_clear(acp_mcp_client *c);

/**
 * Receives one `Mcp-Param-{name}` header of a tools/call: `name` is the
 * x-mcp-header value, `value` the argument as text (a string as is, an
 * integer in decimal, a boolean "true" / "false"); neither NUL-terminated,
 * valid during the call. Encoding for HTTP (the Base64 sentinel for a value
 * that is not header-safe) is the transport's. Return 0 to go on; anything
 * else stops the walk and is returned.
 */
typedef int (*acp_mcp_param_header_cb)(const char *name, size_t name_len,
                                       const char *value, size_t value_len,
                                       void *user_data);
/**
 * The custom headers (2026-07-28 `x-mcp-header`) of a tools/call request:
 * for `params` (the request's params object, parsed in `doc`), the
 * annotated parameters of the named tool present in `arguments`, as the
 * client learnt them from the stateless tools/list pages it saw, the
 * cache's included (tools with an invalid annotation were removed from
 * those results, as the spec requires). A page updates the tools it names;
 * a walk from the first page (no cursor) along the cursors the pages gave
 * to a last page (no nextCursor) also forgets every tool it did not name.
 * Integers outside +-(2^53-1) and values of other types are skipped. A
 * tool not listed, or without annotations, gives no header. Used by the
 * Streamable HTTP transport (acp/http.h).
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM, or what `cb` returned.
 */
ACP_EXTERN int acp_mcp_client_param_headers(acp_mcp_client *c,
                                            acp_json_doc *doc,
                                            const acp_json_val *params,
                                            acp_mcp_param_header_cb cb,
                                            void *user_data);

/** The method of a server request ("roots/list", ...; static). */
ACP_EXTERN const char *
acp_mcp_client_request_method(const acp_mcp_client_request *req);
/** Nonzero once the server cancelled it. */
ACP_EXTERN int
acp_mcp_client_request_is_cancelled(const acp_mcp_client_request *req);
/**
 * Answer a server request (result: JSON object, verbatim) or fail it. The
 * request is released. After the server cancelled it the answer is dropped
 * and 0 returned.
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM, ACP_ERR_LIMIT.
 */
ACP_EXTERN int acp_mcp_client_respond(acp_mcp_client *c,
                                      acp_mcp_client_request *req,
                                      const char *result, size_t len);
ACP_EXTERN int acp_mcp_client_respond_error(acp_mcp_client *c,
                                            acp_mcp_client_request *req,
                                            int64_t code, const char *message);

#ifdef __cplusplus
}
#endif

#endif /* ACP_MCP_H */
