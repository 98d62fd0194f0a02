/*
 * A minimal MCP client: calls the tool `greet {"name":"world"}` on a server
 * over Streamable HTTP or stdio, prints the answer and checks it.
 *
 *     ./mcp_client http://127.0.0.1:8080/mcp
 *     ./mcp_client --stdio ./mcp_stdio_server [ARGS...]
 *
 * Exit status 0 when the answer is "Hello, world!", else 1.
 *
 * Build: cc mcp_client.c $(pkg-config --cflags --libs libacp-http)
 * This file is CC0: copy it and make it yours.
 */
#include <acp/http.h> /* first: it sets up the POSIX declarations libuv needs */
#include <acp/acp.h>
#include <stdio.h>
#include <string.h>

typedef struct app {
  uv_loop_t loop;
  acp_http_client *http;  /* over HTTP, or */
  acp_uv_process *server; /* over stdio: the server process */
  acp_uv_rpc *rpc;        /* and the session on its pipes */
  int status;             /* the exit status, once decided (-1 before) */
} app;

static void server_stopped(acp_uv_process *p, void *ud) {
  (void)ud;
  acp_uv_process_close(p, NULL);
}

static void finish(app *a, int status) {
  if (a->status >= 0)
    return;
  a->status = status;
  acp_http_client_close(a->http, 1000, NULL, NULL); /* DELETEs the session */
  acp_uv_rpc_close(a->rpc, NULL);
  if (a->server && acp_uv_process_shutdown(a->server, server_stopped) != 0)
    acp_uv_process_close(a->server, NULL);
}

static int on_result(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                     void *ud) {
  const acp_json_val *content = acp_json_obj_getz(msg->result, "content");
  const acp_json_val *text =
      acp_json_obj_getz(acp_json_arr_get(content, 0), "text");
  size_t n;
  const char *raw = acp_json_raw(text, &n);

  (void)c;
  printf("greet: %.*s\n", raw ? (int)n : 0, raw ? raw : "");
  finish(ud, status == 0 && acp_json_str_eq(text, "Hello, world!", 13) ? 0 : 1);
  return 0;
}

static int on_initialized(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                          void *ud) {
  app *a = ud;
  (void)msg;
  if (status != 0 ||
      acp_mcp_client_call_tool(c, "greet", "{\"name\":\"world\"}", 16, NULL,
                               uv_now(&a->loop), on_result, a, NULL) != 0)
    finish(a, 1);
  return 0;
}

static void on_http_end(acp_http_client *hc, int reason, void *ud) {
  fprintf(stderr, "mcp_client: %s (%s)\n", acp_strerror(reason),
          acp_http_client_error(hc));
  finish(ud, 1);
}

static void on_rpc_end(acp_uv_rpc *r, int reason, void *ud) {
  (void)r;
  fprintf(stderr, "mcp_client: the server left (%s)\n", acp_strerror(reason));
  finish(ud, 1);
}

int main(int argc, char **argv) {
  app a = {.status = -1};
  acp_mcp_client *client = NULL;
  acp_uv_process_options *opts = NULL;
  int rv;

  if (argc < 2 || (strcmp(argv[1], "--stdio") == 0 && argc < 3)) {
    fprintf(stderr, "usage: mcp_client URL | --stdio COMMAND [ARGS...]\n");
    return 2;
  }
  uv_loop_init(&a.loop);
  acp_uv_ignore_sigpipe();
  rv = acp_mcp_client_new(&client, NULL, "mcp_client", "1.0.0", &a, NULL);
  if (rv == 0 && strcmp(argv[1], "--stdio") == 0) {
    rv = acp_uv_process_options_new(&opts, NULL);
    if (rv == 0)
      rv = acp_uv_process_options_set_argv(opts, (const char *const *)argv + 2);
    if (rv == 0)
      rv = acp_uv_process_spawn(&a.server, &a.loop, opts, &a, NULL, NULL);
    if (rv == 0)
      rv = acp_uv_rpc_new(&a.rpc, acp_uv_process_link(a.server),
                          acp_mcp_client_session(client), on_rpc_end, &a, NULL);
  } else if (rv == 0) {
    rv = acp_http_client_new(&a.http, &a.loop, client, argv[1], ACP_HTTP_AUTO,
                             on_http_end, &a, NULL);
  }
  if (rv == 0)
    rv = acp_mcp_client_initialize(client, uv_now(&a.loop), on_initialized, &a);
  if (rv != 0) {
    fprintf(stderr, "mcp_client: %s\n", acp_strerror(rv));
    finish(&a, 1);
  }
  uv_run(&a.loop, UV_RUN_DEFAULT);
  acp_mcp_client_free(client);
  acp_uv_process_options_free(opts);
  return uv_loop_close(&a.loop) == 0 ? a.status : 1;
}
