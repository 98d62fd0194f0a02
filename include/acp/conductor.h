/*
 * libacp-uv - an embeddable conductor: runs a proxy chain of child
 * processes (the Proxy Chains RFD) on a private libuv loop.
 *
 * This is what `acp conductor` runs. The routing is acp/router.h's; this
 * layer adds processes, pipes, line framing, backpressure, fault handling,
 * tracing and an orderly shutdown. The header names no libuv type.
 *
 * LIFECYCLE. acp_conductor_run() reads messages, one JSON text per line,
 * from `in_fd` (link 0: the client in ACP_ROUTER_MODE_AGENT, the parent
 * conductor in ACP_ROUTER_MODE_PROXY) and writes to `out_fd`. The
 * components are spawned when the first line arrives (normally
 * `initialize`, or `proxy/initialize` in proxy mode), each in its own
 * process group (acp_uv_process_spawn()), with stderr captured: every line
 * a component writes to stderr is copied to the conductor's stderr as
 * "[name] line" (unless turned off) and the last bytes are kept for error
 * reports. End of input on `in_fd` waits until no request is in flight (at
 * most the stdin grace), then shuts the chain down; SIGTERM or SIGINT shuts
 * it down at once (a second signal kills every component). Shutdown goes
 * component by component in chain order: close its stdin, wait the stdin
 * grace, SIGTERM to its process group, wait the term grace, SIGKILL. Every
 * child is reaped before acp_conductor_run() returns.
 *
 * FAULTS. When a component exits (or cannot be spawned) while the chain
 * runs, the conductor reads what is left of its stdout, then calls
 * acp_router_link_closed() with a reason naming it: "component K 'NAME'
 * (COMMAND) exited with status S" or "was killed by signal SIG", followed
 * by the last lines of its stderr; the error `data` is
 * {"component": K, "name", "command", "exitStatus", "signal", "stderr"}.
 * Every request pending through it is answered with that error at once.
 * Then the crash policy applies (acp_conductor_on_crash). The agent's
 * death (agent mode) always ends the chain.
 *
 * Memory: one line buffer per link (capped by the max line), the router's
 * buffers and the write queues, which backpressure bounds: a link whose
 * destination's write queue is above the high-water mark is not read until
 * it drains below half of it.
 */
#ifndef ACP_CONDUCTOR_H
#define ACP_CONDUCTOR_H

#include "common.h"
#include "router.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What happens when a proxy dies while the chain runs. */
typedef enum acp_conductor_on_crash {
  /**
   * Answer every request pending through it with an error naming it, then
   * shut the whole chain down; acp_conductor_run() reports exit status 1.
   * Sessions end with the chain (the reference behaviour; default).
   */
  ACP_CONDUCTOR_ON_CRASH_FAIL = 0,
  /**
   * Answer the pending requests, then remove the dead proxy from the chain
   * (acp_router_link_bypass()): its neighbours talk directly. Sessions go
   * on (the agent holds them) without what the proxy contributed.
   */
  ACP_CONDUCTOR_ON_CRASH_BYPASS = 1,
  /**
   * Answer the pending requests, respawn the proxy and initialize it again
   * with its original `proxy/initialize` params (acp_router_link_restart()).
   * Sessions go on; the new process sees traffic for sessions it never saw
   * created. After max_restarts restarts of one component, FAIL applies.
   */
  ACP_CONDUCTOR_ON_CRASH_RESTART = 2
} acp_conductor_on_crash;

/** Conductor options. Opaque; setters accept a NULL `opts` (no-op). */
typedef struct acp_conductor_options acp_conductor_options;

/**
 * @param out  receives the options (NULL on failure).
 * @param mem  allocator (copied) or NULL; also used by acp_conductor_run().
 * @return 0, ACP_ERR_INVALID_ARGUMENT (out NULL) or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_conductor_options_new(acp_conductor_options **out,
                                         const acp_mem *mem);

/** Free the options. Accepts NULL. */
ACP_EXTERN void acp_conductor_options_free(acp_conductor_options *opts);

/**
 * Append a component to the chain (the last one added is the agent in
 * agent mode).
 * @param argv  program and arguments, NULL-terminated; argv[0] is looked
 *              up in PATH when it has no '/'. Copied.
 * @param env   "NAME=value" strings added to the inherited environment,
 *              NULL-terminated, or NULL. Copied.
 * @param name  short name used in logs, traces and errors (copied), or
 *              NULL to derive one from argv (e.g. "arrow" for
 *              `acp proxy arrow`).
 * @return 0, ACP_ERR_INVALID_ARGUMENT (opts/argv NULL, argv empty, an env
 *         string without '='), ACP_ERR_LIMIT (65535 components) or
 *         ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_conductor_options_add_component(acp_conductor_options *opts,
                                                   const char *const *argv,
                                                   const char *const *env,
                                                   const char *name);

/**
 * Append a component given as text, as `acp conductor` takes it: either a
 * command line split as a POSIX shell would (blanks separate words; '...'
 * is literal; "..." allows \" \\ \$ \` escapes; a backslash outside quotes
 * escapes the next character), whose leading NAME=value words set
 * environment variables; or a JSON object {"command": "...", "args":
 * [...], "env": {"NAME": "value", ...}} (env may also be an array of
 * {"name", "value"} objects; an optional "name" sets the display name).
 * No expansion, globbing or redirection is done.
 *
 * @param spec    NUL-terminated text.
 * @param err     optional buffer receiving an English message on
 *                ACP_ERR_PARSE (NUL-terminated, truncated to errcap).
 * @return 0; ACP_ERR_INVALID_ARGUMENT (opts/spec NULL);
 *         ACP_ERR_PARSE (unterminated quote, no command, bad JSON or a
 *         member of the wrong type); ACP_ERR_LIMIT; ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_conductor_options_add_component_spec(
    acp_conductor_options *opts, const char *spec, char *err, size_t errcap);

/** Number of components added so far (0 for NULL). */
ACP_EXTERN size_t
acp_conductor_options_component_count(const acp_conductor_options *opts);

/**
 * Number of the components added so far that are URLs (one word starting
 * with ws://, wss://, http:// or https://): remote peers that the connector
 * opens (acp_conductor_options_set_connector()) instead of processes. A
 * program can tell from it, before it runs the chain, whether it needs a
 * remote transport at all. 0 for NULL.
 */
ACP_EXTERN size_t
acp_conductor_options_url_component_count(const acp_conductor_options *opts);

/** Default ACP_ROUTER_MODE_AGENT. */
ACP_EXTERN void acp_conductor_options_set_mode(acp_conductor_options *opts,
                                               acp_router_mode mode);

/** Default ACP_ROUTER_PROXY_METHODS_AUTO. */
ACP_EXTERN void
acp_conductor_options_set_proxy_methods(acp_conductor_options *opts,
                                        acp_router_proxy_methods pm);

/** Default ACP_CONDUCTOR_ON_CRASH_FAIL. Unknown values are ignored. */
ACP_EXTERN void acp_conductor_options_set_on_crash(acp_conductor_options *opts,
                                                   acp_conductor_on_crash p);

/** Restarts allowed per component under RESTART (default 3). */
ACP_EXTERN void
acp_conductor_options_set_max_restarts(acp_conductor_options *opts,
                                       unsigned max);

/**
 * Write one JSON line per message hop to `path` (created or truncated):
 * {"time": ms since start, "from": name, "fromLink": k, "to": name,
 * "toLink": k, "dir": "right"|"left", "message": <the message written,
 * spliced byte for byte>}. Link 0 is named "client" (agent mode) or
 * "parent" (proxy mode); messages the router makes itself come from
 * "conductor" (fromLink -1). NULL turns tracing off. Copied.
 * @return 0 or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_conductor_options_set_trace_file(acp_conductor_options *opts,
                                                    const char *path);

/**
 * Log every component's stdin, stdout and stderr to files in `dir`
 * (created if missing): K-NAME.stdin, K-NAME.stdout, K-NAME.stderr, and
 * 0-client.in / 0-client.out for link 0. NULL turns it off. Copied.
 * @return 0 or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_conductor_options_set_debug_dir(acp_conductor_options *opts,
                                                   const char *dir);

/**
 * Waits of the shutdown ladder, in milliseconds (default 1000 each; see
 * acp_uv_process_options_set_grace()).
 */
ACP_EXTERN void acp_conductor_options_set_grace(acp_conductor_options *opts,
                                                uint64_t stdin_grace_ms,
                                                uint64_t term_grace_ms);

/**
 * Backpressure high-water mark of every link's write queue in bytes (0:
 * 1 MiB). Reading resumes below half of it.
 */
ACP_EXTERN void
acp_conductor_options_set_high_water(acp_conductor_options *opts, size_t bytes);

/**
 * Longest line accepted from any link (0: 256 MiB), line ending excluded. A
 * longer line is dropped up to its newline and answered on the link that
 * sent it with acp_ndjson_overlong_reply(), as a JSON-RPC session answers it
 * (acp/ndjson.h, rule 3).
 */
ACP_EXTERN void acp_conductor_options_set_max_line(acp_conductor_options *opts,
                                                   size_t bytes);

struct acp_uv_link;

/**
 * Opens a remote component: a component given as one word that starts
 * with ws://, wss://, http:// or https:// (typically the agent at the end
 * of a local chain) is not spawned but connected by this callback.
 * @param uv_loop    the conductor's loop (a uv_loop_t *; acp/uv.h).
 * @param url        the component's URL.
 * @param link_out   receives a link on `uv_loop` (e.g. from
 *                   acp_remote_connect() of libacp-remote) that carries the
 *                   component's messages, one per line; the conductor
 *                   owns and closes it.
 * @return 0, or an ACP_ERR_* code: the component then counts as one that
 *         could not be started. The end of the link's read side counts as
 *         its death (the crash policy applies); when the chain shuts down
 *         the link is closed.
 */
typedef int (*acp_conductor_connect_cb)(void *uv_loop, const char *url,
                                        struct acp_uv_link **link_out,
                                        void *user_data);

/** Set the connector of URL components (none by default: such a component
 *  cannot be started). */
ACP_EXTERN void acp_conductor_options_set_connector(acp_conductor_options *opts,
                                                    acp_conductor_connect_cb cb,
                                                    void *user_data);

/** Copy components' stderr lines to ours as "[name] line" (default true). */
ACP_EXTERN void
acp_conductor_options_set_stderr_passthrough(acp_conductor_options *opts,
                                             bool on);

/**
 * Run a conductor until the chain has shut down (blocking, on a private
 * libuv loop). Ignores SIGPIPE for the process and watches SIGTERM/SIGINT
 * while it runs. `in_fd` and `out_fd` are dup()ed, not closed.
 *
 * @param opts         options with at least one component in agent mode
 *                     (proxy mode accepts none: a pass-through).
 * @param exit_status  receives 0 when the chain ended normally (end of
 *                     input or a signal), 1 when it failed (a component
 *                     died under FAIL, the agent died, restarts exhausted).
 * @return 0 (see exit_status); ACP_ERR_INVALID_ARGUMENT (NULL opts or
 *         exit_status, no component in agent mode); ACP_ERR_SYSTEM (the
 *         loop, the descriptors, the trace file or the debug directory
 *         could not be set up); ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_conductor_run(const acp_conductor_options *opts, int in_fd,
                                 int out_fd, int *exit_status);

/**
 * How MCP-over-ACP servers are offered to an agent that does not advertise
 * `mcpCapabilities.acp` (agent mode only). Whatever the mode, the
 * conductor advertises `mcpCapabilities.acp: true` to its client (the
 * agent's initialize answer is rewritten on the way back, every other byte
 * kept). When the agent advertises it too, declarations pass untouched.
 */
typedef enum acp_conductor_mcp_bridge {
  /**
   * Each `type: "acp"` declaration in session/new, load, resume and fork is
   * rewritten into a stdio server whose command is `acp mcp-shim SOCKET
   * TOKEN` (the running program's absolute path): SOCKET is a private unix
   * socket (mode 0600 in a 0700 directory under $TMPDIR) the conductor
   * listens on, TOKEN a random per-declaration secret the shim sends as its
   * first line (with its stdin and stdout attached by SCM_RIGHTS, which
   * the conductor then reads and writes directly; or alone, the shim then
   * relaying bytes). Each accepted shim connection becomes one MCP-over-ACP
   * connection (mcp/connect, mcp/message both ways, mcp/disconnect), sent
   * as if the agent had sent it, so it reaches the component that declared
   * the server through the chain. A wrong token is refused (closed).
   * session/close closes the connections of that session's servers and
   * revokes their tokens; everything (connections, listener, socket and
   * its directory) goes away when acp_conductor_run() returns. Default.
   */
  ACP_CONDUCTOR_MCP_BRIDGE_STDIO = 0,
  /** No rewriting: declarations reach the agent as sent (the conductor
   * still advertises mcpCapabilities.acp). */
  ACP_CONDUCTOR_MCP_BRIDGE_OFF = 1,
  /**
   * As STDIO, but when the agent advertises mcpCapabilities.http each
   * declaration becomes a Streamable HTTP server instead:
   * `{"type":"http","name":N,"url":"http://127.0.0.1:PORT/mcp",
   * "headers":[{"name":"Authorization","value":"Bearer TOKEN"}]}`. The
   * conductor binds the port on 127.0.0.1 (random) and runs the shim
   * program as `PROGRAM mcp http-bridge --socket SOCKET --listen-fd 3`
   * (needs the acp-mcp program beside it), which answers 401 to a missing
   * or wrong token and relays each HTTP session as one bridged
   * connection. One helper serves every session of the chain; tokens are
   * revoked with their session; it is stopped when acp_conductor_run()
   * returns. An agent without mcpCapabilities.http is bridged over stdio
   * (noted on stderr).
   */
  ACP_CONDUCTOR_MCP_BRIDGE_HTTP = 2
} acp_conductor_mcp_bridge;

/** Default ACP_CONDUCTOR_MCP_BRIDGE_STDIO. Unknown values are ignored. */
ACP_EXTERN void
acp_conductor_options_set_mcp_bridge(acp_conductor_options *opts,
                                     acp_conductor_mcp_bridge mode);

/**
 * The `acp` program the MCP bridge runs (absolute path, copied): the agent
 * is given `PROGRAM mcp-shim SOCKET TOKEN` for each bridged server, and the
 * HTTP bridge runs `PROGRAM mcp http-bridge ...`. NULL (the default): no
 * program, so nothing is bridged (declarations reach the agent unchanged,
 * noted once on stderr); an embedder never execs its own binary by
 * accident. `acp conductor` passes its own path.
 * @return 0 or ACP_ERR_NOMEM.
 */
ACP_EXTERN int
acp_conductor_options_set_shim_program(acp_conductor_options *opts,
                                       const char *path);

#ifdef __cplusplus
}
#endif

#endif /* ACP_CONDUCTOR_H */
