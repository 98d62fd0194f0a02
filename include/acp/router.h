/*
 * libacp - the conductor's routing core (sans I/O).
 *
 * An acp_router moves JSON-RPC messages between the links of one proxy chain
 * as the Proxy Chains RFD describes. It does no I/O, spawns nothing and reads
 * no clock: the runtime (`acp conductor`) frames lines, feeds each complete
 * line with acp_router_recv() (or acp_router_recv_framed(), or lends it with
 * acp_router_recv_framed_ref()), drains each link's output with
 * acp_router_send() (or acp_router_send_iov()), and reports component
 * deaths with acp_router_link_closed().
 *
 * LINKS. A router for N components has N + 1 links:
 *
 *   - link 0 is the upstream side. In ACP_ROUTER_MODE_AGENT it is the client
 *     (the conductor looks like an ordinary agent to it). In
 *     ACP_ROUTER_MODE_PROXY it is the conductor's parent, to which the whole
 *     chain looks like one proxy (nesting, RFD "trees of proxy chains").
 *   - links 1..N are the components, in chain order. In agent mode 1..N-1 are
 *     proxies and N is the agent (N >= 1). In proxy mode all N are proxies
 *     (N >= 0; 0 is a pure pass-through).
 *
 * ROUTING RULES (the RFD's, made exact). "Right" is toward the agent, "left"
 * toward the client. right(k) is the next live (not bypassed) component after
 * k; in proxy mode past the last component it is link 0 (the parent, which
 * owns our successor). left(k) is the previous live component, or link 0.
 *
 *   1. A message from link 0 that is not a proxy method goes to right(0),
 *      plain (a proxy receives its predecessor's traffic as plain ACP).
 *   2. `proxy/successor` from component k goes to right(k) UNWRAPPED
 *      (request or notification as the outer envelope had an `id` or not).
 *      When right(k) is link 0 (proxy mode) it stays WRAPPED, re-spelled for
 *      the parent: the parent is our conductor and unwraps it.
 *   3. Any other request or notification from component k goes to left(k),
 *      WRAPPED in `proxy/successor {method, params}` when left(k) is a proxy,
 *      plain when left(k) is link 0 (the client, or in proxy mode the parent:
 *      to it we are a proxy talking to our predecessor).
 *   4. In proxy mode, `proxy/successor` from link 0 carries traffic of the
 *      parent's successor toward us: it goes, still wrapped, to left(N+1)
 *      (the last live proxy), or unwrapped to link 0 when none is live.
 *   5. `initialize` delivered to a component becomes `proxy/initialize` (in
 *      the link's spelling, see WIRE GENERATIONS) when the component is a
 *      proxy and stays `initialize` for the agent. This applies both to the
 *      client's `initialize` and to one a proxy forwards through
 *      `proxy/successor`. In proxy mode link 0 must open with
 *      `proxy/initialize` (any spelling, or G0's `initialize` with
 *      `_meta.proxy: true`); in agent mode with `initialize`.
 *   6. `proxy/initialize` (any spelling) sent BY a component, plainly or
 *      wrapped, is answered -32600 and never routed; so is `proxy/successor`
 *      from the agent (it has no successor) or from the client in agent mode
 *      (it is not a proxy), and `proxy/initialize` from the client in agent
 *      mode / plain `initialize` from the parent in proxy mode.
 *   7. Responses go back by id mapping (IDS below); the answer to a
 *      `proxy/successor` request is the inner result or error, unwrapped:
 *      it is delivered as the response to the outer request.
 *
 * Envelopes are rebuilt as {"jsonrpc":"2.0", "id", "method", "params"} or
 * {"jsonrpc":"2.0", "id", "result"|"error"}; other top-level members of a
 * message are dropped. `params`, `result`, `error`, the method name and the
 * original ids are spliced from the input byte for byte (acp_json_raw()):
 * numbers, key order, escapes, unknown fields and inner `_meta` arrive
 * exactly as sent. The `_meta` (or `meta`) member of the proxy/successor
 * params object itself is hop-local: dropped when unwrapping, never added
 * when wrapping.
 *
 * IDS. Every hop has its own id space. A request forwarded to link j gets a
 * fresh integer id allocated by the router for j (1, 2, 3... per link; ids
 * are rewritten even in a one-component chain, so every hop behaves alike).
 * The router keeps (j, new id) -> (source link, original id bytes) and
 * restores the original id bytes exactly on the way back (never through a
 * double). A response naming no pending id of that link is dropped.
 *
 * CANCELLATION. `$/cancel_request {"requestId": X}` from link k (plain, or
 * wrapped in proxy/successor: same meaning) names a request k sent. It is
 * translated to the hop that request went to: `$/cancel_request
 * {"requestId": <the id used there>}`, always plain (cancellation is
 * hop-scoped; for a request delivered as proxy/successor the id is that of
 * the outer request, as the schema says). Never forwarded as is; dropped if
 * X names no pending request of k. Matching compares the raw id bytes, and
 * strings also after decoding escapes. The target still answers the request
 * (normally -32800) and that answer travels back as usual.
 *
 * BATCHES. A JSON array from link k is routed element by element. Elements
 * that go to the same link j are written to j as ONE array line, in input
 * order; when elements go to several links each gets its own array line
 * (the batch is split by destination; order within each is kept). Answers
 * the router itself gives to elements (e.g. -32600) go back to k as one
 * array. Responses are not re-assembled into batches: a response travels in
 * the shape its responder chose. An empty array is answered -32600.
 *
 * WIRE GENERATIONS. Three spellings exist (spec/acp/METHODS.md):
 *   G2 `proxy/initialize`, `proxy/successor` (the RFD; emitted by default);
 *   G1 `_proxy/initialize`, `_proxy/successor`;
 *   G0 `initialize` + `_meta.proxy: true`, `_proxy/successor/request` and
 *      `_proxy/successor/notification`.
 * All are accepted from any link, always. Each link has an outgoing
 * spelling, used whenever the router addresses it with a proxy method. Link
 * 0 (proxy mode) is addressed as the parent spoke to us first (its
 * initialize). Component links start with G2 (ACP_ROUTER_PROXY_METHODS_AUTO,
 * _SPEC) or G1 (_UNDERSCORE). With AUTO, a component link also adopts the
 * spelling of any proxy/successor it sends, and when a proxy answers
 * `proxy/initialize` with -32601 the same initialize is re-sent as
 * `_proxy/initialize` (and, on a second -32601, as G0's `initialize` with
 * `"_meta":{"proxy":true}` merged into params), the link keeping the
 * spelling that worked. SPEC and UNDERSCORE never change a component's
 * spelling.
 *
 * COMPONENT DEATH AND POLICIES. acp_router_link_closed() answers every
 * request pending THROUGH the link (sent to it, awaiting its answer) with
 * {"code": -32603, "message": <reason>, "data": <caller's JSON>}, sends
 * `$/cancel_request` downstream for every request the dead link had sent (its
 * answer has nowhere to go) and forgets them; later requests routed to the
 * closed link get the same error at once, notifications to it are dropped.
 *
 * CUT-OFF TURNS. `$/cancel_request` is optional in ACP, and agents ignore
 * it, so a `session/prompt` (with a string params.sessionId) that the dead
 * link had sent toward the agent also gets `session/cancel {"sessionId"}`
 * sent after it, on the same hop. The router then keeps that request
 * pending (acp_router_pending() counts it) until the hop answers it, which
 * ends the cut-off turn; the answer is consumed. Until then, for that
 * session on that hop:
 *   - `session/update` notifications coming back are dropped: the client
 *     was told the prompt failed, and they must not show up in its next
 *     turn;
 *   - `session/request_permission` requests coming back are answered
 *     {"outcome":{"outcome":"cancelled"}} by the router;
 *   - the next `session/prompt` for the session waits in the router and is
 *     sent once the turn has ended, so that it starts a turn of its own; a
 *     second one meanwhile is answered -32603. The waiting prompt is
 *     answered {"stopReason":"cancelled"} if its sender sends
 *     `session/cancel` for the session or `$/cancel_request` for it, and
 *     the closed-link error if the hop dies. An agent that never ends the
 *     cut-off turn holds that session's next prompt until one of these.
 *
 * Then the runtime applies its policy:
 *   - fail: it answers, then shuts the chain down. Sessions end with it.
 *   - bypass (acp_router_link_bypass()): the dead proxy leaves the chain and
 *     routing joins its neighbours. Sessions continue (the agent holds
 *     them), but whatever the bypassed proxy contributed (context it
 *     injected, MCP servers it provided, rewrites) is gone.
 *   - restart (acp_router_link_restart()): the respawned proxy is sent
 *     `proxy/initialize` again with the exact params it got the first time.
 *     Its successor is NOT initialized again: when the new process forwards
 *     its initialize, the router answers with the successor's original
 *     InitializeResponse bytes. Sessions continue; the new process sees
 *     traffic for sessions it never saw created (session/new is not
 *     replayed), so a proxy with per-session state must tolerate that (a
 *     forward-by-default proxy does). Messages routed to it meanwhile queue
 *     behind the proxy/initialize, in order.
 *   The agent (agent mode) can be neither bypassed nor restarted.
 *
 * MCP-OVER-ACP PROVIDERS. The router remembers which link offers each
 * MCP-over-ACP server: the link a session/new (load, resume, fork) came
 * from when an `"type":"acp"` declaration (any form of
 * acp_mcp_acp_decl_parse()) first appears in its `mcpServers`, and the
 * connection ids its mcp/connect answers give the agent. Once that link
 * is closed, whatever the policy, the agent's mcp/connect, mcp/message and
 * mcp/disconnect (and `_mcp/...`) for those servers and connections are
 * answered {"code": -33001, "message": "MCP server unavailable", "data":
 * "its provider (component K) is gone"} (notifications dropped) instead of
 * travelling on toward a component that never declared them.
 * acp_router_mcp_server() lists a link's servers (a runtime bridging them
 * closes their connections, see mcp_bridge.h).
 *
 * Router answers: -32700 "Parse error" (id null) for a line that is not JSON
 * or contains a newline; -32600 "Invalid Request" with a reason string as
 * `data` for an invalid message (id echoed when usable) and the cases of
 * rule 6; -32602 "Invalid params" for a proxy/successor without a string
 * `method`; -32603 "Too many pending requests" past max_pending, -32603
 * "Message too large" when the destination's output cap is hit. Invalid
 * notifications and unroutable responses are dropped. Each of these is also
 * reported through the event callback.
 *
 * Callbacks (trace, event) run inside router calls and must not call any
 * acp_router_* function on the same router (such calls return
 * ACP_ERR_INVALID_STATE).
 *
 * Memory: per-object allocator; one JSON tape reused for every line; one
 * output buffer per link (capped); the pending table is capped. A forwarded
 * message costs one parse and one copy into its destination buffer, or no
 * copy at all for its large spans when the caller lends the line
 * (acp_router_recv_framed_ref(), acp_router_send_iov()).
 * ACP_ERR_NOMEM is fatal: afterwards only acp_router_free() is valid.
 *
 * Thread-safety: one thread at a time per router.
 */
#ifndef ACP_ROUTER_H
#define ACP_ROUTER_H

#include "common.h"
#include "ndjson.h"
#include "rpc.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The router. Opaque. */
typedef struct acp_router acp_router;

/** What link 0 is. */
typedef enum acp_router_mode {
  /** Link 0 is a client; the last component is the agent. */
  ACP_ROUTER_MODE_AGENT = 0,
  /** Link 0 is a parent conductor; every component is a proxy. */
  ACP_ROUTER_MODE_PROXY = 1
} acp_router_mode;

/** How proxy methods are spelled toward components (see WIRE GENERATIONS). */
typedef enum acp_router_proxy_methods {
  /** G2 first; adapt per link, fall back on -32601 (default). */
  ACP_ROUTER_PROXY_METHODS_AUTO = 0,
  /** G2 only. */
  ACP_ROUTER_PROXY_METHODS_SPEC = 1,
  /** G1 (`_proxy/...`) only. */
  ACP_ROUTER_PROXY_METHODS_UNDERSCORE = 2
} acp_router_proxy_methods;

/** A wire generation of the proxy methods. */
typedef enum acp_router_wire {
  ACP_ROUTER_WIRE_G2 = 0, /**< proxy/initialize, proxy/successor */
  ACP_ROUTER_WIRE_G1 = 1, /**< _proxy/initialize, _proxy/successor */
  ACP_ROUTER_WIRE_G0 = 2  /**< initialize+_meta.proxy, _proxy/successor/... */
} acp_router_wire;

/** State of a link. */
typedef enum acp_router_link_state {
  ACP_ROUTER_LINK_OPEN = 0,
  /** acp_router_link_closed() was called; requests to it fail at once. */
  ACP_ROUTER_LINK_CLOSED = 1,
  /** Removed from the chain (acp_router_link_bypass()). */
  ACP_ROUTER_LINK_BYPASSED = 2,
  /** Restarted, its proxy/initialize not answered yet (routing continues). */
  ACP_ROUTER_LINK_RESTARTING = 3
} acp_router_link_state;

/** `from` of a hop the router generated itself (errors, cancels, re-init). */
#define ACP_ROUTER_SELF ((size_t)-1)

/**
 * One message written to a link, for tracing. All pointers borrowed, valid
 * during the callback only. `data` is the exact message written (one element
 * when inside a batch array), without the newline.
 */
typedef struct acp_router_hop {
  size_t from; /**< source link, or ACP_ROUTER_SELF */
  size_t to;   /**< destination link */
  const char *data;
  size_t len;
  bool in_batch; /**< written as an element of an array line */
  /**
   * For a response to a request the router had written to a link (the
   * answer routed back, or the error the router made because that link
   * closed): that link and the id the request carried on it, so that a
   * tracer can pair the two although ids are rewritten on every hop.
   * ACP_ROUTER_SELF (and 0) for anything else.
   */
  size_t answers_link;
  int64_t answers_id;
} acp_router_hop;

/** Called for every message written to any link. */
typedef void (*acp_router_trace_cb)(acp_router *r, const acp_router_hop *hop,
                                    void *user_data);

/** Things the runtime may want to log or act on. */
typedef enum acp_router_event_type {
  /** A message from `link` was dropped (detail says why). */
  ACP_ROUTER_EVENT_DROPPED = 1,
  /** A message from `link` was answered with an error by the router. */
  ACP_ROUTER_EVENT_REJECTED = 2,
  /** `link` answered its (proxy/)initialize successfully. */
  ACP_ROUTER_EVENT_INITIALIZED = 3,
  /** `link` answered -32601 and is now spoken to in another spelling. */
  ACP_ROUTER_EVENT_WIRE_FALLBACK = 4,
  /** A restarted `link` answered its proxy/initialize with an error. */
  ACP_ROUTER_EVENT_REINIT_FAILED = 5
} acp_router_event_type;

/**
 * Event callback. `detail` is a static or borrowed NUL-terminated English
 * string, valid during the call.
 */
typedef void (*acp_router_event_cb)(acp_router *r, acp_router_event_type type,
                                    size_t link, const char *detail,
                                    void *user_data);

/**
 * Router options. Opaque; NULL means all defaults. Setters accept a NULL
 * `opts` (no-op); the router copies the options at creation.
 */
typedef struct acp_router_options acp_router_options;

/** @return 0, ACP_ERR_INVALID_ARGUMENT (out NULL) or ACP_ERR_NOMEM. */
ACP_EXTERN int acp_router_options_new(acp_router_options **out);
/** Accepts NULL. */
ACP_EXTERN void acp_router_options_free(acp_router_options *opts);
/** Default ACP_ROUTER_MODE_AGENT. Unknown values are ignored. */
ACP_EXTERN void acp_router_options_set_mode(acp_router_options *opts,
                                            acp_router_mode mode);
/** Default ACP_ROUTER_PROXY_METHODS_AUTO. Unknown values are ignored. */
ACP_EXTERN void
acp_router_options_set_proxy_methods(acp_router_options *opts,
                                     acp_router_proxy_methods pm);
/**
 * Most requests in flight through the router (all links together). Default
 * 65536; 0 restores it. Past it a request is answered -32603 at once.
 */
ACP_EXTERN void acp_router_options_set_max_pending(acp_router_options *opts,
                                                   size_t max);
/**
 * Cap on the undrained output of one link, in bytes. Default 1 GiB; 0
 * restores it. A message that would pass it is not written: a request is
 * answered -32603 "Message too large", anything else is dropped.
 */
ACP_EXTERN void acp_router_options_set_max_output(acp_router_options *opts,
                                                  size_t max);
/** Maximum JSON nesting depth of an input line (0: the JSON default). */
ACP_EXTERN void acp_router_options_set_max_depth(acp_router_options *opts,
                                                 uint32_t depth);
/** Trace callback (NULL: none). */
ACP_EXTERN void acp_router_options_set_trace_cb(acp_router_options *opts,
                                                acp_router_trace_cb cb);
/** Event callback (NULL: none). */
ACP_EXTERN void acp_router_options_set_event_cb(acp_router_options *opts,
                                                acp_router_event_cb cb);

/**
 * Create a router for a chain of `ncomponents` components.
 *
 * @param out          receives the router (NULL on failure); free with
 *                     acp_router_free().
 * @param ncomponents  N. Agent mode needs N >= 1 (the agent); proxy mode
 *                     accepts N >= 0. At most 65535.
 * @param opts         options (copied) or NULL.
 * @param user_data    passed to the callbacks.
 * @param mem          allocator or NULL. Copied.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (out NULL, N out of range) or
 *         ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_router_new(acp_router **out, size_t ncomponents,
                              const acp_router_options *opts, void *user_data,
                              const acp_mem *mem);

/** Free a router and every buffer it owns. Accepts NULL. */
ACP_EXTERN void acp_router_free(acp_router *r);

/** Number of links (N + 1). */
ACP_EXTERN size_t acp_router_link_count(const acp_router *r);

/**
 * Route one message (or batch) that arrived from `link`.
 *
 * @param line, len  exactly one JSON text: the line without its newline (a
 *                   trailing "\n" or "\r\n" is tolerated). Not kept after the
 *                   call. Bad input is answered or dropped as described
 *                   above and still returns 0.
 * @return 0; ACP_ERR_INVALID_ARGUMENT (r NULL, link out of range, line NULL
 *         with len > 0); ACP_ERR_INVALID_STATE (link closed or bypassed:
 *         the line is ignored; or called from a callback; or after a fatal
 *         error); ACP_ERR_NOMEM (fatal).
 */
ACP_EXTERN int acp_router_recv(acp_router *r, size_t link, const char *line,
                               size_t len);

/**
 * As acp_router_recv(), for a line that acp_ndjson_next() has just handed
 * out from `framer`, passed unchanged (same pointer and length) before the
 * framer's next call. What the framer already knows about the line is not
 * computed again: it holds no line feed (the check is skipped), and the
 * long run of plain bytes its line feed search found (a 1 MiB message split
 * across reads) is jumped over by the parse instead of scanned a second
 * time. Routing, answers and errors are those of acp_router_recv().
 *
 * @param framer  the framer that produced `line`, or NULL (then this is
 *                acp_router_recv()). Read only, not kept. Passing a line
 *                the framer did not just produce is a contract violation:
 *                bytes the framer saw as plain are taken as such.
 * @return as acp_router_recv().
 */
ACP_EXTERN int acp_router_recv_framed(acp_router *r, size_t link,
                                      const acp_ndjson *framer,
                                      const char *line, size_t len);

/**
 * As acp_router_recv_framed(), and the line is lent rather than copied:
 * the spans of it that are forwarded unchanged (params, result, error) and
 * are 4 KiB or longer are not copied into the output but handed out where
 * they lie by acp_router_send_iov(), so that a runtime writes a 1 MiB
 * message from its read buffer with one writev. Routing, answers and the
 * bytes written are those of acp_router_recv().
 *
 * Lifetime: `line` must stay valid and unchanged until the output that
 * borrows from it has been taken or copied: acp_router_borrowed() says
 * whether any does; take it with acp_router_send_iov() (or
 * acp_router_send(), which copies) for every link, or call
 * acp_router_copy_borrowed(), before the line's bytes change (before the
 * framer's next call, when the line lies in the framer). Pieces already
 * handed out by acp_router_send_iov() live as that call says.
 *
 * Nothing is borrowed while a trace callback is set (a hop is shown as one
 * stretch of bytes).
 *
 * @param framer  as for acp_router_recv_framed(): the framer that produced
 *                `line`, or NULL (the line is then checked for line feeds
 *                as acp_router_recv() does).
 * @return as acp_router_recv().
 */
ACP_EXTERN int acp_router_recv_framed_ref(acp_router *r, size_t link,
                                          const acp_ndjson *framer,
                                          const char *line, size_t len);

/**
 * Nonzero while output not yet taken borrows from a line lent to
 * acp_router_recv_framed_ref() (0 for NULL).
 */
ACP_EXTERN int acp_router_borrowed(const acp_router *r);

/**
 * Copy every borrowed span of the output not yet taken into the router's
 * own buffers: afterwards the lent lines may change. Ends the validity of
 * what acp_router_send() and acp_router_send_iov() handed out.
 * @return 0; ACP_ERR_INVALID_ARGUMENT (r NULL); ACP_ERR_INVALID_STATE
 *         (from a callback); ACP_ERR_NOMEM (fatal).
 */
ACP_EXTERN int acp_router_copy_borrowed(acp_router *r);

/**
 * Take every byte waiting to be written to `link`: whole lines, each ending
 * in '\n'. *data points into the router and stays valid until the next call
 * on this router other than acp_router_send() for another link or a const
 * getter; the bytes count as written once returned (copy them). Spans
 * borrowed from a lent line (acp_router_recv_framed_ref()) are copied in
 * first, to hand out one buffer.
 * @return the number of bytes (0 when nothing waits; *data then NULL), or
 *         ACP_ERR_INVALID_ARGUMENT (bad link or data NULL), ACP_ERR_NOMEM
 *         (only while output borrows, copying it in failed; fatal).
 */
ACP_EXTERN acp_ssize acp_router_send(acp_router *r, size_t link,
                                     const char **data);

/**
 * As acp_router_send(), as a list of pieces: *iov gets *niov pieces whose
 * concatenation is the output for `link` (whole lines). Pieces borrowed from
 * a lent line (acp_router_recv_framed_ref()) point into it, the others into
 * the router. The array and the router's pieces stay valid as
 * acp_router_send()'s data does; a borrowed piece as long as its line too.
 * Without borrowed output, one piece. Write them (a writev) or copy them before
 * the lent line changes.
 * @return the total number of bytes (0 when nothing waits; then *iov NULL
 *         and *niov 0), or ACP_ERR_INVALID_ARGUMENT (bad link, an argument
 *         NULL), ACP_ERR_INVALID_STATE (from a callback), ACP_ERR_NOMEM
 *         (fatal; only when the piece array could not grow and joining
 *         the output failed too).
 */
ACP_EXTERN acp_ssize acp_router_send_iov(acp_router *r, size_t link,
                                         const acp_rpc_iov **iov, size_t *niov);

/** Nonzero while output waits for `link` (0 for a bad link). */
ACP_EXTERN int acp_router_want_write(const acp_router *r, size_t link);

/**
 * Report that `link` is gone (process exited, pipe closed). See COMPONENT
 * DEATH. Undrained output for the link is discarded.
 *
 * @param reason     NUL-terminated text used as the error `message`, e.g.
 *                   "component 2 'arrow' exited with status 1: <stderr>".
 *                   Copied; bytes that are not valid UTF-8 become '?'. NULL
 *                   gives "component N closed".
 * @param data, data_len  one valid JSON value used as the error `data`
 *                   (typically {"component":…, "exitStatus":…,
 *                   "stderr":…}); copied. NULL to omit `data`.
 * @return 0; ACP_ERR_INVALID_ARGUMENT (bad link, or data not valid JSON);
 *         ACP_ERR_INVALID_STATE (already closed or bypassed; from a
 *         callback; after a fatal error); ACP_ERR_NOMEM (fatal).
 */
ACP_EXTERN int acp_router_link_closed(acp_router *r, size_t link,
                                      const char *reason, const char *data,
                                      size_t data_len);

/**
 * Remove a closed proxy from the chain: routing skips it from now on.
 * @return 0; ACP_ERR_INVALID_ARGUMENT (link 0, the agent in agent mode, out
 *         of range); ACP_ERR_INVALID_STATE (the link is not CLOSED).
 */
ACP_EXTERN int acp_router_link_bypass(acp_router *r, size_t link);

/**
 * Re-open a closed (or bypassed) proxy after the runtime respawned it. If
 * the link had received an initialize, the router queues `proxy/initialize`
 * (in the link's spelling) with the exact params it got then; the link is
 * RESTARTING until the answer comes (the answer is consumed, not routed;
 * an error is reported as ACP_ROUTER_EVENT_REINIT_FAILED and the link is
 * open anyway). Otherwise the link simply becomes OPEN.
 * @return 0; ACP_ERR_INVALID_ARGUMENT (link 0, the agent, out of range);
 *         ACP_ERR_INVALID_STATE (link open or restarting; from a callback;
 *         after a fatal error); ACP_ERR_LIMIT (max_pending or max_output);
 *         ACP_ERR_NOMEM (fatal).
 */
ACP_EXTERN int acp_router_link_restart(acp_router *r, size_t link);

/**
 * The `index`-th (from 0) MCP-over-ACP server id that `link` declared (see
 * MCP-OVER-ACP PROVIDERS), decoded, not NUL-terminated; `*len` gets its
 * length. Borrowed: valid until the next call that routes a message.
 * @return the id, or NULL past the last one (or for bad arguments).
 */
ACP_EXTERN const char *acp_router_mcp_server(const acp_router *r, size_t link,
                                             size_t index, size_t *len);

/** State of a link (ACP_ROUTER_LINK_CLOSED for a bad link). */
ACP_EXTERN acp_router_link_state acp_router_link_state_of(const acp_router *r,
                                                          size_t link);

/** Outgoing proxy-method spelling of a link (G2 for a bad link). */
ACP_EXTERN acp_router_wire acp_router_link_wire(const acp_router *r,
                                                size_t link);

/** Number of requests in flight through the router. */
ACP_EXTERN size_t acp_router_pending(const acp_router *r);

/**
 * Free the output buffers of links with nothing waiting, and other spare
 * capacity (call when idle to return memory after large messages).
 * Invalidates data returned by acp_router_send().
 */
ACP_EXTERN void acp_router_release_memory(acp_router *r);

#ifdef __cplusplus
}
#endif

#endif /* ACP_ROUTER_H */
