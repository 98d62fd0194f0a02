/*
 * A minimal MCP server over Streamable HTTP: one tool, `greet {name}`,
 * answering "Hello, NAME!", on http://127.0.0.1:PORT/mcp. Prints the URL,
 * then serves until SIGTERM or SIGINT.
 *
 *     ./mcp_http_server 8080 &
 *     ./mcp_client http://127.0.0.1:8080/mcp
 *
 * Build: cc mcp_http_server.c $(pkg-config --cflags --libs libacp-http)
 * This file is CC0: copy it and make it yours.
 */
#include <acp/http.h> /* first: it sets up the POSIX declarations libuv needs */
#include <acp/acp.h>
#include <stdio.h>
#include <stdlib.h>

static acp_http_server *http;

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

static void on_signal(acp_uv_signals *sig, int signum, void *ud) {
  (void)signum;
  (void)ud;
  acp_http_server_close(http, NULL, NULL);
  acp_uv_signals_close(sig);
}

int main(int argc, char **argv) {
  static const acp_mcp_tool_def tool = {
      .version = ACP_MCP_DEF_VERSION,
      .name = "greet",
      .description = "Greet someone by name",
      .input_schema = "{\"type\":\"object\",\"properties\":{\"name\":"
                      "{\"type\":\"string\"}},\"required\":[\"name\"]}",
      .handler = greet};
  uv_loop_t loop;
  acp_mcp_server *server = NULL;
  acp_http_server_options *opts = NULL;
  acp_uv_signals *sig = NULL;
  int rv;

  uv_loop_init(&loop);
  acp_uv_ignore_sigpipe();
  rv = acp_mcp_server_new(&server, "greeter", "1.0.0", NULL, NULL);
  if (rv == 0)
    rv = acp_mcp_server_add_tool(server, &tool);
  if (rv == 0)
    rv = acp_http_server_options_new(&opts, NULL);
  if (rv == 0) /* port 0: any free port */
    rv = acp_http_server_options_set_address(
        opts, "127.0.0.1", (uint16_t)(argc > 1 ? atoi(argv[1]) : 0));
  if (rv == 0)
    rv = acp_http_server_new(&http, &loop, server, opts, NULL);
  if (rv == 0)
    rv = acp_uv_signals_new(&sig, &loop, on_signal, NULL, NULL);
  if (rv == 0) {
    printf("http://127.0.0.1:%u/mcp\n", acp_http_server_port(http));
    fflush(stdout);
    uv_run(&loop, UV_RUN_DEFAULT);
  } else {
    fprintf(stderr, "mcp_http_server: %s\n", acp_strerror(rv));
    acp_http_server_close(http, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  acp_http_server_options_free(opts);
  acp_mcp_server_free(server);
  return uv_loop_close(&loop) == 0 && rv == 0 ? 0 : 1;
}
