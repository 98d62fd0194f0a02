/*
 * The `acp` program: subcommand dispatch, --help and --version. Logic a
 * library user would want lives in libacp and libacp-uv; the subcommands
 * only parse arguments, wire objects together and print.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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
    "  proxy         example ACP proxies: arrow, context, guard, trace\n"
    "  mcp           MCP server (stdio, HTTP) and command-line MCP client\n"
    "\n"
    "options:\n"
    "  -h, --help     show this help (also: acp <command> --help)\n"
    "  -V, --version  print the version\n"
    "\n"
    "See acp(1) for the full manual.\n";

struct command {
  const char *name;
  int (*run)(int argc, char **argv);
};

static const struct command commands[] = {
    {"agent", cmd_agent}, {"client", cmd_client},
    {"demo", cmd_demo},   {"bench-client", cmd_bench_client},
    {"proxy", cmd_proxy},
    {"conductor", cmd_conductor},
    {"mcp", cmd_mcp},
};

const char *cli_self_path(void) {
  static char path[PATH_MAX];
  ssize_t n;

  if (path[0] != '\0')
    return path;
  n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) {
    strcpy(path, "acp");
    return path;
  }
  path[n] = '\0';
  return path;
}

const char *cli_opt_value(int argc, char **argv, int *i, const char *name,
                          int *ok) {
  const char *arg = argv[*i];
  size_t n = strlen(name);

  *ok = 0;
  if (strncmp(arg, name, n) != 0)
    return NULL;
  if (arg[n] == '=') {
    *ok = 1;
    return arg + n + 1;
  }
  if (arg[n] != '\0')
    return NULL;
  if (*i + 1 >= argc) {
    fprintf(stderr, "acp: option %s needs a value\n", name);
    *ok = -1;
    return NULL;
  }
  *ok = 1;
  (*i)++;
  return argv[*i];
}

void cli_err(const char *sub, const char *fmt, ...) {
  va_list ap;

  fprintf(stderr, "acp %s: ", sub);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
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
