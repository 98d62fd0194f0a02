/*
 * `acp demo`: what `make demo` runs. A scripted conversation between
 * `acp client` and `acp agent` in a scratch directory, showing streaming, a
 * plan, tool calls, a permission request, a file read and a file write. The
 * client talks to the agent through `acp conductor` with two proxies in
 * front of it: `context` (injects the directory's AGENTS.md into the first
 * prompt) and `arrow` (prefixes '>' to each message of the agent).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char demo_usage[] =
    "usage: acp demo [--keep]\n"
    "\n"
    "Run a short scripted conversation between `acp client` and `acp agent`\n"
    "in a scratch directory, through `acp conductor` with the `context` and\n"
    "`arrow` proxies in front of the agent. The agent's words go to stdout\n"
    "(each message prefixed '>' by arrow; the first lines are AGENTS.md,\n"
    "injected by context); the client's notes (plan, tool calls, the\n"
    "permission request, file access) to stderr.\n"
    "\n"
    "  --keep   keep the scratch directory and print its path\n";

static const char demo_script[] =
    "Hello! I am the libacp reference agent. Each line you see arrived as an\n"
    "agent_message_chunk, streamed over ACP (JSON-RPC on a pipe).\n"
    "/think The user wants a tour: plan, tools, permission, files.\n"
    "/plan Look around; Read the notes; Write a summary\n"
    "/tool:search Search the workspace for notes\n"
    "/ask:edit Update notes.txt\n"
    "/read notes.txt\n"
    "/write summary.txt The demo ran: streaming, a plan, tool calls, a "
    "permission request and file access.\n"
    "/mcp-tools\n"
    "/mcp-call tools echo {\"message\":\"This line is the answer of the echo "
    "tool of an MCP server that the tools proxy offers over ACP "
    "(MCP-over-ACP).\\n\"}\n"
    "/title libacp demo\n"
    "That is the tour. The client answered the permission request, served\n"
    "the file read from its working directory and stored summary.txt.\n";

static int write_file(const char *dir, const char *name, const char *text) {
  char path[4096];
  FILE *f;

  snprintf(path, sizeof(path), "%s/%s", dir, name);
  f = fopen(path, "w");
  if (f == NULL)
    return -1;
  fputs(text, f);
  return fclose(f);
}

int cmd_demo(int argc, char **argv) {
  char dir[] = "/tmp/acp-demo-XXXXXX";
  char path[4200];
  const char *self = cli_self_path();
  bool keep = false;
  int rv;
  int i;
  char *args[16];
  char context[4200], arrow[4200], tools[4200], agent[4200];

  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(demo_usage, stdout);
      return CLI_EXIT_OK;
    } else if (strcmp(argv[i], "--keep") == 0) {
      keep = true;
    } else {
      cli_err("demo", "unknown option '%s'", argv[i]);
      return CLI_EXIT_USAGE;
    }
  }
  if (mkdtemp(dir) == NULL) {
    cli_err("demo", "cannot create a scratch directory: %s", strerror(errno));
    return CLI_EXIT_FAILURE;
  }
  if (write_file(dir, "notes.txt",
                 "notes.txt, read by the agent through the client:\n"
                 "  - ACP carries prompts, updates, permissions and files.\n"
                 "  - libacp's core does no I/O and builds for wasm32.\n") !=
      0) {
    cli_err("demo", "cannot write in %s", dir);
    return CLI_EXIT_FAILURE;
  }
  if (write_file(dir, "AGENTS.md",
                 "(AGENTS.md, put in front of the prompt by the context "
                 "proxy: be brief.)\n") != 0) {
    cli_err("demo", "cannot write in %s", dir);
    return CLI_EXIT_FAILURE;
  }
  /* Components are shell-split by the conductor: quote our path. */
  snprintf(context, sizeof(context), "'%s' proxy context", self);
  snprintf(arrow, sizeof(arrow), "'%s' proxy arrow", self);
  snprintf(tools, sizeof(tools), "'%s' proxy tools", self);
  snprintf(agent, sizeof(agent), "'%s' agent", self);
  fprintf(stderr,
          "== acp demo: `acp client --yes -p SCRIPT` driving `acp agent` "
          "through\n== `acp conductor agent \"acp proxy context\" \"acp proxy "
          "arrow\" \"acp proxy tools\" \"acp agent\"` in %s\n\n",
          dir);
  args[0] = (char *)self;
  args[1] = "client";
  args[2] = "--yes";
  args[3] = "--cwd";
  args[4] = dir;
  args[5] = "-p";
  args[6] = (char *)demo_script;
  args[7] = "--";
  args[8] = (char *)self;
  args[9] = "conductor";
  args[10] = "agent";
  args[11] = context;
  args[12] = arrow;
  args[13] = tools;
  args[14] = agent;
  args[15] = NULL;
  /* The client runs in this process: the only children are the ones the
   * client and the conductor spawn through acp_uv_process. */
  rv = cmd_client(14, args + 1);
  snprintf(path, sizeof(path), "%s/summary.txt", dir);
  {
    FILE *f = fopen(path, "r");
    char buf[512];
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f != NULL)
      fclose(f);
    buf[n] = '\0';
    fprintf(stderr,
            "\n== summary.txt, written by the client for the agent: "
            "%s\n",
            n ? buf : "(missing!)");
    if (n == 0)
      rv = CLI_EXIT_FAILURE;
  }
  if (keep) {
    fprintf(stderr, "== kept %s\n", dir);
  } else {
    snprintf(path, sizeof(path), "%s/notes.txt", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/summary.txt", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/AGENTS.md", dir);
    unlink(path);
    rmdir(dir);
  }
  if (rv != CLI_EXIT_OK) {
    cli_err("demo", "the conversation failed");
    return CLI_EXIT_FAILURE;
  }
  fprintf(stderr, "== demo finished\n");
  return CLI_EXIT_OK;
}
