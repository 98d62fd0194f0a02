/*
 * `acp proxy NAME [options]`: run one of the example proxies
 * (examples/proxies/) on stdin/stdout, to be placed in a chain by a
 * conductor.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "proxy_run.h"

static const struct proxy_entry {
  const char *name;
  int (*main)(int argc, char **argv);
  const char *summary;
} proxies[] = {
    {"arrow", proxy_arrow_main,
     "prefix '>' to the text of every agent_message_chunk"},
    {"context", proxy_context_main,
     "prepend a file (default: AGENTS.md in the session cwd) to the first "
     "prompt of each session"},
    {"guard", proxy_guard_main,
     "reject permission requests for tool calls matching --deny PATTERN"},
    {"tools", proxy_tools_main,
     "offer an MCP server over ACP (echo, read_lines) on every session"},
    {"trace", proxy_trace_main,
     "append every message received to --file PATH, forward unchanged"},
};

static void proxy_usage(FILE *f) {
  size_t i;

  fputs("usage: acp proxy NAME [options]\n"
        "\n"
        "Run an example ACP proxy on stdin/stdout. A proxy is a component of\n"
        "a proxy chain: a conductor starts it and initializes it with\n"
        "proxy/initialize (also _proxy/initialize, or initialize with\n"
        "_meta.proxy). It ends cleanly at end of input.\n"
        "\n"
        "proxies:\n",
        f);
  for (i = 0; i < sizeof(proxies) / sizeof(proxies[0]); i++)
    fprintf(f, "  %-8s %s\n", proxies[i].name, proxies[i].summary);
  fputs("\n`acp proxy NAME --help` describes the options of each.\n", f);
}

int cmd_proxy(int argc, char **argv) {
  size_t i;

  if (argc < 2) {
    proxy_usage(stderr);
    return CLI_EXIT_USAGE;
  }
  if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    proxy_usage(stdout);
    return CLI_EXIT_OK;
  }
  for (i = 0; i < sizeof(proxies) / sizeof(proxies[0]); i++)
    if (strcmp(argv[1], proxies[i].name) == 0)
      return proxies[i].main(argc - 1, argv + 1);
  cli_err("proxy", "unknown proxy '%s'", argv[1]);
  proxy_usage(stderr);
  return CLI_EXIT_USAGE;
}
