/*
 * acp-mcp: the MCP commands of `acp` (`acp mcp ...` execs this program), in
 * their own executable so that only they load the HTTP stack.
 */
#include <string.h>

#include "cli.h"

int main(int argc, char **argv) {
  /* Called as `acp-mcp mcp ARGS` by acp, or directly as `acp-mcp ARGS`. */
  if (argc >= 2 && strcmp(argv[1], "mcp") == 0)
    return cmd_mcp(argc - 1, argv + 1);
  argv[0] = "mcp";
  return cmd_mcp(argc, argv);
}
