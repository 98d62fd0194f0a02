/*
 * A minimal MCP server on stdio: one tool, `greet {name}`, answering
 * "Hello, NAME!". Links libacp-uv only (no HTTP stack).
 *
 *     ./mcp_client --stdio ./mcp_stdio_server
 *
 * Build: cc mcp_stdio_server.c $(pkg-config --cflags --libs libacp-uv)
 * This file is CC0: copy it and make it yours.
 */
#include <acp/uv.h> /* first: it sets up the POSIX declarations libuv needs */
#include <acp/acp.h>
#include <stdio.h>

static int greet(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  char name[256], text[300];
  size_t n;
  int len;

  (void)ud;
  if (acp_json_str_unescape(acp_json_obj_getz(args, "name"), name, sizeof(name),
                            &n) != 0 ||
      n >= sizeof(name))
    return acp_mcp_call_respond_text(call, "name: a short string expected", 29,
                                     true);
  len = snprintf(text, sizeof(text), "Hello, %s!", name);
  return acp_mcp_call_respond_text(call, text, (size_t)len, false);
}

int main(void) {
  static const acp_mcp_tool_def tool = {
      .version = ACP_MCP_DEF_VERSION,
      .name = "greet",
      .description = "Greet someone by name",
      .input_schema = "{\"type\":\"object\",\"properties\":{\"name\":"
                      "{\"type\":\"string\"}},\"required\":[\"name\"]}",
      .handler = greet};
  acp_mcp_server *server = NULL;
  acp_mcp_conn *conn = NULL;
  int rv;

  rv = acp_mcp_server_new(&server, "greeter", "1.0.0", NULL, NULL);
  if (rv == 0)
    rv = acp_mcp_server_add_tool(server, &tool);
  if (rv == 0)
    rv = acp_mcp_conn_new(&conn, server, NULL);
  /* Serve stdin/stdout until the client closes its side. */
  if (rv == 0)
    rv = acp_mcp_run_stdio(conn, 2000);
  if (rv != 0)
    fprintf(stderr, "mcp_stdio_server: %s\n", acp_strerror(rv));
  acp_mcp_server_free(server); /* frees the conn too */
  return rv == 0 ? 0 : 1;
}
