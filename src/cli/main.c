/*
 * The `acp` program: subcommand dispatch, --help and --version. Logic a
 * library user would want lives in libacp and libacp-uv; the subcommands
 * only parse arguments, wire objects together and print.
 */
#include <stdio.h>
#include <string.h>

#include "acp/version.h"
#include "cli.h"

static const char usage_text[] =
    "usage: acp <command> [options]\n"
    "\n"
    "ACP and MCP from the command line, built on libacp.\n"
    "\n"
    "commands:\n"
    "  agent         the reference ACP agent (deterministic, no model)\n"
    "  client        a terminal ACP client for any agent\n"
    "  demo          a scripted client/agent conversation (what make demo "
    "runs)\n"
    "  bench-client  the prompt-turn benchmark client (see bench/)\n"
    "  conductor     run a proxy chain in front of an agent (Proxy Chains)\n"
    "  serve         expose a stdio agent at ws://HOST:PORT/acp (remote ACP)\n"
    "  proxy         example ACP proxies: arrow, context, guard, trace\n"
    "  mcp           MCP server (stdio, HTTP) and command-line MCP client\n"
    "  trace         summarise a conductor trace, or draw it as an HTML page\n"
    "\n"
    "options:\n"
    "  -h, --help     show this help (also: acp <command> --help)\n"
    "  -V, --version  print the version\n"
    "\n"
    "See acp(1) for the full manual.\n";

static int cmd_mcp_exec(int argc, char **argv);
static int cmd_serve_exec(int argc, char **argv);

struct command {
  const char *name;
  int (*run)(int argc, char **argv);
};

static const struct command commands[] = {
    {"agent", cmd_agent},  {"client", cmd_client},
    {"demo", cmd_demo},    {"bench-client", cmd_bench_client},
    {"proxy", cmd_proxy},  {"conductor", cmd_conductor},
    {"mcp", cmd_mcp_exec}, {"mcp-shim", cmd_mcp_shim},
    {"trace", cmd_trace},  {"serve", cmd_serve_exec},
};

/* This program has no remote transport and no line editor (cli.h says
 * which commands run in acp-remote instead). */
const cli_remote_ops *const cli_remote = NULL;
#ifdef ACP_HELPER_HAS_LIBEDIT
const bool cli_helper_has_editor = true;
#else
const bool cli_helper_has_editor = false;
#endif

const char *cli_acp_path(void) {
  return cli_self_path();
}

/* `acp mcp ...` runs the acp-mcp program installed beside acp: the MCP
 * commands need the HTTP stack (libcurl, libmicrohttpd), which the other
 * commands should not load. All but a stdio server, which needs none and
 * runs here (mcp_serve_stdio.c). */
static int cmd_mcp_exec(int argc, char **argv) {
  unsigned long spin_us;
  int everything, no_block;

  if (cli_mcp_serve_stdio_args(argc, argv, &everything, &spin_us, &no_block))
    return cli_mcp_serve_stdio(everything, (uint32_t)spin_us, !no_block);
  return cli_exec_beside("acp-mcp", argc, argv);
}

/* `acp serve` is all remote ACP: it runs in acp-remote. */
static int cmd_serve_exec(int argc, char **argv) {
  return cli_exec_beside("acp-remote", argc, argv);
}

int main(int argc, char **argv) {
  size_t i;

  if (argc < 2) {
    fputs(usage_text, stderr);
    return CLI_EXIT_USAGE;
  }
  if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
      strcmp(argv[1], "help") == 0) {
    fputs(usage_text, stdout);
    return CLI_EXIT_OK;
  }
  if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
    printf("acp %s (libacp %s)\n", ACP_VERSION, acp_version());
    return CLI_EXIT_OK;
  }
  for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
    if (strcmp(argv[1], commands[i].name) == 0)
      return commands[i].run(argc - 1, argv + 1);
  }
  fprintf(stderr, "acp: unknown command '%s'\n\n%s", argv[1], usage_text);
  return CLI_EXIT_USAGE;
}
