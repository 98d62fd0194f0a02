/*
 * A tiny MCP fixture shared by the MCP tests (and the benchmarks): an
 * `echo` tool that answers {"content":[{"type":"text","text":"Echo: <msg>"}]}
 * for arguments {"message": "<msg>"}, as the reference "everything" server
 * does. Header-only so any test or bench program can include it.
 */
#ifndef ACP_TEST_MCP_FIXTURE_H
#define ACP_TEST_MCP_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "acp/mcp.h"

static int mcp_fixture_echo(acp_mcp_call *call, const acp_json_val *args,
                            void *user_data) {
  const acp_json_val *m = acp_json_obj_getz(args, "message");
  const char *p;
  size_t n;
  char stackbuf[256];
  char *buf = stackbuf;
  int rv;

  (void)user_data;
  if (acp_json_type_of(m) != ACP_JSON_STRING)
    return acp_mcp_call_respond_text(call, "message must be a string", 24,
                                     true);
  rv = acp_json_doc_str(acp_mcp_call_doc(call), m, &p, &n);
  if (rv != 0)
    return rv;
  if (n + 6 > sizeof(stackbuf)) {
    buf = malloc(n + 6);
    if (buf == NULL)
      return ACP_ERR_NOMEM;
  }
  memcpy(buf, "Echo: ", 6);
  memcpy(buf + 6, p, n);
  rv = acp_mcp_call_respond_text(call, buf, n + 6, false);
  if (buf != stackbuf)
    free(buf);
  return rv;
}

/* Register the echo tool on `s`. */
static int mcp_fixture_add_echo(acp_mcp_server *s) {
  acp_mcp_tool_def d;

  memset(&d, 0, sizeof(d));
  d.version = ACP_MCP_DEF_VERSION;
  d.name = "echo";
  d.description = "Echoes back the input";
  d.input_schema = "{\"type\":\"object\",\"properties\":{\"message\":"
                   "{\"type\":\"string\",\"description\":\"Message to echo\"}},"
                   "\"required\":[\"message\"]}";
  d.handler = mcp_fixture_echo;
  return acp_mcp_server_add_tool(s, &d);
}

#endif /* ACP_TEST_MCP_FIXTURE_H */
