/*
 * Shared pieces of the `acp` program: one cmd_<name>.c per subcommand, each
 * exposing `int cmd_<name>(int argc, char **argv)` with argv[0] being the
 * subcommand's name.
 */
#ifndef ACP_CLI_H
#define ACP_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "acp/remote.h"

/* acp_json_obj_getz() with a string literal key, its length known at
 * compile time: no strlen() per lookup on the agent's per-message paths
 * (as ACP__OBJ_GETL in the libraries; `"" lit ""` takes only a literal). */
#define OBJ_GETL(obj, lit) acp_json_obj_get((obj), "" lit "", sizeof(lit) - 1)

int cmd_agent(int argc, char **argv);
int cmd_client(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_bench_client(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_conductor(int argc, char **argv);
int cmd_proxy(int argc, char **argv);
int cmd_mcp_shim(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_acp_serve(int argc, char **argv);
/* acp-mcp only: `acp mcp relay` (stdio to HTTP) and `acp mcp http-bridge`
 * (the conductor's HTTP bridge helper). */
int cmd_mcp_relay(int argc, char **argv);
int cmd_mcp_http_bridge(int argc, char **argv);
/* acp-mcp only: add a --header 'Name: value' to an HTTP MCP client
 * (cmd_mcp_relay.c). 0, ACP_ERR_INVALID_ARGUMENT (no ':', bad name, CR/LF),
 * ACP_ERR_INVALID_STATE, ACP_ERR_NOMEM (acp_http_client_add_header()). */
struct acp_http_client;
int cli_http_add_header(struct acp_http_client *hc, const char *spec);
/* acp-mcp only (cmd_mcp_login.c): `acp mcp login` / `logout`, and the
 * stored tokens of `url`: *header gets "Authorization: Bearer ..."
 * (malloc'ed; refreshed and stored again when about to expire). Returns 1
 * when there is one, 0 when not logged in. */
int cmd_mcp_login(int argc, char **argv);
int cmd_mcp_logout(int argc, char **argv);
int cli_mcp_stored_auth(const char *url, char **header);
/* acp and acp-mcp (mcp_serve_stdio.c): `acp mcp serve` over stdio, which
 * needs no HTTP stack. cli_mcp_serve_stdio_args() returns 1 when argv
 * ("mcp" "serve" ...) asks for nothing else (--everything, --stdio,
 * --read-spin-us N, --no-read-block, all valid), else 0: acp then leaves
 * the command to acp-mcp. cli_mcp_serve_stdio() serves stdin/stdout until
 * the input ends and returns the exit status. The default set, the state
 * key and the task clock are acp-mcp's HTTP serve's too. */
struct acp_mcp_server;
/* --read-spin-us's default in the programs that serve one peer on stdio
 * (acp agent, acp bench-client, acp mcp serve): a spin that backs off
 * while it misses and never runs on a machine with no idle CPU (link.c,
 * "Spinning reads"; docs/decisions.md, "Spinning reads by default"). */
#define CLI_READ_SPIN_US 20u

int cli_mcp_serve_stdio_args(int argc, char **argv, int *everything,
                             unsigned long *read_spin_us, int *no_block);
int cli_mcp_serve_stdio(int everything, uint32_t read_spin_us, int read_block);
int cli_mcp_register_default(struct acp_mcp_server *s);
int cli_mcp_set_state_key(struct acp_mcp_server *reg);
int64_t cli_mcp_epoch_ms(void);

/* Exit statuses shared by the subcommands. */
enum {
  CLI_EXIT_OK = 0,
  CLI_EXIT_FAILURE = 1, /* runtime failure (peer died, protocol error) */
  CLI_EXIT_USAGE = 2,   /* bad command line */
  /* acp client -p: the turn ended with a stop reason other than end_turn */
  CLI_EXIT_CANCELLED = 3,
  CLI_EXIT_REFUSAL = 4,
  CLI_EXIT_MAX_TOKENS = 5,
  CLI_EXIT_MAX_TURN_REQUESTS = 6
};

/* The absolute path of the running executable. Static storage; never NULL
 * (falls back to "acp"). */
const char *cli_self_path(void);

/* The acp program, for spawning it (the client's default agent, the
 * conductor's MCP shim): cli_self_path() in acp, the acp beside it in
 * acp-remote (main.c, remote_main.c). Static storage; never NULL. */
const char *cli_acp_path(void);

/*
 * Three programs share these sources: acp, acp-mcp (`acp mcp ...`, the HTTP
 * stack) and acp-remote, which holds what needs libacp-remote (OpenSSL,
 * nghttp2) or the line editor (libedit), so that a stdio agent, client,
 * conductor or proxy maps none of them (docs/decisions.md). acp runs a
 * command in acp-remote when it needs them: `acp serve` always, `acp client`
 * with --url or on a terminal, `acp conductor` with a URL component, `acp
 * bench-client --url`. Each such command decides after parsing its
 * arguments, before it has done anything, and execs acp-remote with the
 * same arguments, which parses them again and runs the command there.
 */

/* What those commands use of libacp-remote: its functions in acp-remote
 * (remote_main.c); acp has none (cli_remote is NULL there). */
typedef struct cli_remote_ops {
  /* acp_remote_connect(). */
  int (*connect)(struct acp_uv_link **out, uv_loop_t *loop, const char *url,
                 const acp_remote_client_options *opts,
                 acp_remote_connect_cb cb, void *user_data, const acp_mem *mem);
  /* acp_remote_http_version(). */
  const char *(*http_version)(const struct acp_uv_link *link);
  /* A client TLS configuration (for ro.tls) trusting the CAs in `ca` (NULL:
   * the system's) and presenting `cert` with `key` (NULL: no client
   * certificate). 0, or the ACP_ERR_* code of acp_remote_tls_new() or its
   * setters with the reason (OpenSSL's, or "out of memory") in err and
   * *out NULL. Free it with tls_free. */
  int (*tls_new)(acp_remote_tls **out, const char *ca, const char *cert,
                 const char *key, char *err, size_t errcap);
  /* acp_remote_tls_free(). */
  void (*tls_free)(acp_remote_tls *tls);
  /* acp agent under `acp serve --handoff`: read the handoff message from
   * `control_fd` and adopt its WebSocket as *out
   * (acp_remote_handoff_open(): with serve's session grace the link
   * outlives a dropped connection and on_park says when it parks, 1, and
   * resumes, 0). 0, or an ACP_ERR_* code with the reason in err. */
  int (*handoff_link)(struct acp_uv_link **out, uv_loop_t *loop, int control_fd,
                      void (*on_park)(struct acp_uv_link *link, int parked,
                                      void *user_data),
                      void *user_data, char *err, size_t errcap);
} cli_remote_ops;

/* NULL in acp: a command that needs the remote stack must exec acp-remote
 * (cli_exec_beside()). */
extern const cli_remote_ops *const cli_remote;

/* In acp: whether the acp-remote built with it has the line editor, so that
 * `acp client` on a terminal runs there. */
extern const bool cli_helper_has_editor;

/* Exec the program `prog` installed beside this one (else found in PATH)
 * with argv[0..argc) after its name: `prog argv[0] argv[1] ...`, argv[0]
 * being the subcommand. Returns only when it cannot, after printing
 * "acp SUB: cannot run PATH: REASON" on stderr: CLI_EXIT_FAILURE. */
int cli_exec_beside(const char *prog, int argc, char **argv);

/* If argv[*i] is --name or --name=value, return its value (advancing *i
 * past a separate value) and set *ok to 1; on a missing value print an
 * error and set *ok to -1. Return NULL and leave *ok 0 when not matched. */
const char *cli_opt_value(int argc, char **argv, int *i, const char *name,
                          int *ok);

/* Parse a whole decimal number 0..max (digits only: no sign, no spaces, no
 * suffix, no overflow) into *out. Returns 0, or -1 (after printing
 * "acp SUB: OPT: expected a number 0..MAX, not 'V'") with *out untouched.
 * `min` > 0 narrows the range (then the message says MIN..MAX). */
int cli_opt_uint(const char *sub, const char *opt, const char *v,
                 unsigned long long min, unsigned long long max,
                 unsigned long long *out);

/* FNV-1a (64 bits) of the string `s`: file names and hash tables of the
 * CLI (not a security property). */
uint64_t cli_fnv1a(const char *s);

/* printf to stderr prefixed with "acp <sub>: ". */
void cli_err(const char *sub, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* An MCP "echo" tool handler's body: answer the call with its "message"
 * argument as text, or with the tool error `bad_message` when "message" is
 * not a string. Returns what acp_mcp_call_respond_text() returns. */
struct acp_mcp_call;
struct acp_json_val;
int cli_mcp_echo(struct acp_mcp_call *call, const struct acp_json_val *args,
                 const char *bad_message);

#endif /* ACP_CLI_H */
