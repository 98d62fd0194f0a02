/*
 * Shared pieces of the `acp` program: one cmd_<name>.c per subcommand, each
 * exposing `int cmd_<name>(int argc, char **argv)` with argv[0] being the
 * subcommand's name.
 */
#ifndef ACP_CLI_H
#define ACP_CLI_H

#include <stddef.h>
#include <stdio.h>

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

/* The absolute path of the running `acp` executable (for spawning itself
 * as the default agent). Static storage; never NULL (falls back to "acp"). */
const char *cli_self_path(void);

/* If argv[*i] is --name or --name=value, return its value (advancing *i
 * past a separate value) and set *ok to 1; on a missing value print an
 * error and set *ok to -1. Return NULL and leave *ok 0 when not matched. */
const char *cli_opt_value(int argc, char **argv, int *i, const char *name,
                          int *ok);

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
