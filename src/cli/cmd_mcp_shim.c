/*
 * `acp mcp-shim SOCKET TOKEN`: the stdio MCP server a conductor puts in an
 * agent's session when it bridges an MCP-over-ACP server (see
 * docs/conductor.md, "Bridging"). It connects to the conductor's private
 * unix socket, sends TOKEN and a newline, then copies bytes both ways:
 * stdin -> socket, socket -> stdout. It exits when either side ends.
 * Faster path (the default): the token goes with our stdin and stdout
 * attached (SCM_RIGHTS); the conductor then reads and writes the agent's
 * pipes itself and we only wait for the control connection to end.
 * ACP_MCP_SHIM_RELAY=1 forces the relay. The handshake and the relay are
 * acp_uv_bridge_shim_run() (acp/uv.h); this is its command line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/uv.h"
#include "cli.h"

static const char shim_usage[] =
    "usage: acp mcp-shim SOCKET TOKEN\n"
    "\n"
    "Relay an MCP stdio connection to an ACP conductor's MCP bridge: connect\n"
    "to the unix socket SOCKET, send TOKEN as the first line, then copy\n"
    "stdin to the socket and the socket to stdout until either ends.\n"
    "Written into session/new by `acp conductor`; not meant to be run by "
    "hand.\n";

int cmd_mcp_shim(int argc, char **argv) {
  const char *relay = getenv("ACP_MCP_SHIM_RELAY");
  int rv;

  if (argc >= 2 &&
      (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
    fputs(shim_usage, stdout);
    return CLI_EXIT_OK;
  }
  if (argc != 3) {
    fputs(shim_usage, stderr);
    return CLI_EXIT_USAGE;
  }
  rv = acp_uv_bridge_shim_run(argv[1], argv[2],
                              relay != NULL && strcmp(relay, "1") == 0);
  if (rv == ACP_ERR_INVALID_ARGUMENT) {
    cli_err("mcp-shim", "socket path too long");
    return CLI_EXIT_USAGE;
  }
  if (rv != 0) {
    cli_err("mcp-shim", "cannot reach %s: %s", argv[1], strerror(errno));
    return CLI_EXIT_FAILURE;
  }
  return CLI_EXIT_OK;
}
