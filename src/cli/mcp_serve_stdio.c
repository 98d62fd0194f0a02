/*
 * `acp mcp serve` over stdio, shared by acp and acp-mcp. Serving stdio
 * needs no HTTP stack, so acp runs it itself (main.c) instead of exec'ing
 * acp-mcp, whose libcurl and libmicrohttpd bring some thirty shared
 * libraries: a stdio MCP server, which an agent may start one of per
 * session, maps libuv and libc only, and starts in a quarter of the time.
 * acp-mcp runs the same code for a stdio serve it is asked for directly.
 */
#include "cli.h"
#include "mcp_everything.h"

#include "acp/json.h"
#include "acp/mcp.h"
#include "acp/uv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define SUB "mcp"

/* MARK: - Default server set */

static int tool_echo(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  (void)ud;
  return cli_mcp_echo(call, args, "message must be a string");
}

static int tool_add(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  double a, b;
  char buf[64], st[96], content[160];
  int cn;
  (void)ud;
  if (acp_json_get_double(acp_json_obj_getz(args, "a"), &a) != 0 ||
      acp_json_get_double(acp_json_obj_getz(args, "b"), &b) != 0)
    return acp_mcp_call_respond_text(call, "a and b must be numbers", 23, true);
  snprintf(buf, sizeof(buf), "%.17g", a + b);
  snprintf(st, sizeof(st), "{\"sum\":%s}", buf);
  cn = snprintf(content, sizeof(content),
                "[{\"type\":\"text\",\"text\":\"%s\"}]", buf);
  return acp_mcp_call_respond_tool(call, content, (size_t)cn, st, strlen(st),
                                   false);
}

/* `ping`: pings the client with a 10 s timeout and reports the outcome
 * (a server->client request whose deadline runs on the transport's clock). */
static int on_client_pong(acp_mcp_call *call, int status,
                          const acp_rpc_msg *msg, void *ud) {
  char text[128];
  int n;
  (void)msg;
  (void)ud;
  if (status == 0)
    return acp_mcp_call_respond_text(call, "pong", 4, false);
  n = snprintf(text, sizeof(text), "ping failed: %s", acp_strerror(status));
  return acp_mcp_call_respond_text(call, text, (size_t)n, true);
}

static int tool_ping(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  int rv;
  (void)args;
  (void)ud;
  rv = acp_mcp_call_request(call, "ping", NULL, 0, 10000, on_client_pong, NULL);
  if (rv == ACP_ERR_NOMEM)
    return rv;
  if (rv != 0)
    return on_client_pong(call, rv, NULL, NULL);
  return 0;
}

static const char readme_text[] =
    "This is acp mcp serve: an MCP server built on libacp.\n";

static int read_readme(acp_mcp_call *call, const char *uri, size_t len,
                       void *ud) {
  (void)len;
  (void)ud;
  return acp_mcp_call_respond_resource_text(
      call, uri, "text/plain", readme_text, sizeof(readme_text) - 1);
}

static int prompt_greet(acp_mcp_call *call, const acp_json_val *args,
                        void *ud) {
  const acp_json_val *nv = acp_json_obj_getz(args, "name");
  const char *name = "there";
  size_t nl = 5;
  acp_json_writer *w;
  const char *out;
  size_t olen;
  char text[256];
  int n, rv;
  (void)ud;
  if (nv)
    acp_json_doc_str(acp_mcp_call_doc(call), nv, &name, &nl);
  if (nl > 200)
    nl = 200;
  n = snprintf(text, sizeof(text), "Please greet %.*s warmly.", (int)nl, name);
  if (acp_json_writer_new(&w, 0, NULL) != 0)
    return ACP_ERR_NOMEM;
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "description");
  acp_json_write_strz(w, "A greeting");
  acp_json_write_keyz(w, "messages");
  acp_json_write_arr_begin(w);
  mcp_write_user_text(w, text, (size_t)n);
  acp_json_write_arr_end(w);
  acp_json_write_obj_end(w);
  out = acp_json_writer_data(w, &olen);
  rv = acp_json_writer_error(w) ? ACP_ERR_NOMEM
                                : acp_mcp_call_respond_raw(call, out, olen);
  acp_json_writer_free(w);
  return rv;
}

int cli_mcp_register_default(acp_mcp_server *s) {
  acp_mcp_tool_def echo, add, ping;
  acp_mcp_resource_def res;
  acp_mcp_prompt_def pr;
  int rv;
  memset(&echo, 0, sizeof(echo));
  memset(&add, 0, sizeof(add));
  memset(&ping, 0, sizeof(ping));
  memset(&res, 0, sizeof(res));
  memset(&pr, 0, sizeof(pr));
  ping.version = ACP_MCP_DEF_VERSION;
  ping.name = "ping";
  ping.description = "Pings the client (10 s timeout) and says pong";
  ping.input_schema = "{\"type\":\"object\"}";
  ping.handler = tool_ping;
  echo.version = add.version = res.version = pr.version = ACP_MCP_DEF_VERSION;
  echo.name = "echo";
  echo.description = "Echoes back the message";
  echo.input_schema = "{\"type\":\"object\",\"properties\":{\"message\":"
                      "{\"type\":\"string\"}},\"required\":[\"message\"]}";
  echo.handler = tool_echo;
  add.name = "add";
  add.description = "Adds two numbers";
  add.input_schema =
      "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},"
      "\"b\":{\"type\":\"number\"}},\"required\":[\"a\",\"b\"]}";
  add.output_schema = "{\"type\":\"object\",\"properties\":{\"sum\":{\"type\":"
                      "\"number\"}},\"required\":[\"sum\"]}";
  add.handler = tool_add;
  res.uri = "acp://readme";
  res.name = "readme";
  res.description = "About this server";
  res.mime_type = "text/plain";
  res.size = (int64_t)sizeof(readme_text) - 1;
  res.handler = read_readme;
  pr.name = "greet";
  pr.description = "Greets someone";
  pr.arguments = "[{\"name\":\"name\",\"description\":\"who\","
                 "\"required\":false}]";
  pr.handler = prompt_greet;
  rv = acp_mcp_server_add_tool(s, &echo);
  if (rv == 0)
    rv = acp_mcp_server_add_tool(s, &add);
  if (rv == 0)
    rv = acp_mcp_server_add_tool(s, &ping);
  if (rv == 0)
    rv = acp_mcp_server_add_resource(s, &res);
  if (rv == 0)
    rv = acp_mcp_server_add_prompt(s, &pr);
  return rv;
}

/* A fresh key for the requestState of 2026 multi round-trip results: the
 * core reads no entropy, the program gives it the OS's. */
int cli_mcp_set_state_key(acp_mcp_server *reg) {
  unsigned char key[32];
  size_t got = 0;

  while (got < sizeof(key)) {
    ssize_t n = getrandom(key + got, sizeof(key) - got, 0);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return ACP_ERR_SYSTEM;
    }
    got += (size_t)n;
  }
  return acp_mcp_server_set_state_key(reg, key, sizeof(key));
}

/* The Unix time at uv's clock 0, for the task timestamps (the core
 * reads no clock). uv_now() counts from uv_hrtime() in ms. */
int64_t cli_mcp_epoch_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 -
         (int64_t)(uv_hrtime() / 1000000);
}

/* MARK: - serve over stdio */

int cli_mcp_serve_stdio(int everything, uint32_t read_spin_us, int read_block) {
  acp_mcp_server *reg = NULL;
  acp_mcp_conn *conn = NULL;
  int status = CLI_EXIT_OK;
  int rv;

  rv = acp_mcp_server_new(&reg, "acp-mcp", "0.1.0", NULL, NULL);
  /* No stream to close on stdio: test_reconnection answers on it. */
  if (rv == 0)
    rv = everything ? mcp_everything_register_with(reg, NULL)
                    : cli_mcp_register_default(reg);
  if (rv == 0)
    rv = cli_mcp_set_state_key(reg);
  if (rv != 0) {
    cli_err(SUB, "cannot create the server: %s", acp_strerror(rv));
    acp_mcp_server_free(reg);
    return CLI_EXIT_FAILURE;
  }
  acp_mcp_server_set_epoch(reg, cli_mcp_epoch_ms());
  rv = acp_mcp_conn_new(&conn, reg, NULL);
  if (rv == 0)
    rv = acp_mcp_run_fds_ex(conn, 0, 1, 5000, read_spin_us, read_block);
  if (rv != 0 && acp_is_fatal(rv)) {
    cli_err(SUB, "%s", acp_strerror(rv));
    status = CLI_EXIT_FAILURE;
  }
  acp_mcp_conn_free(conn);
  acp_mcp_server_free(reg);
  return status;
}

int cli_mcp_serve_stdio_args(int argc, char **argv, int *everything,
                             unsigned long *read_spin_us, int *no_block) {
  int i;

  *everything = 0;
  *read_spin_us = CLI_READ_SPIN_US;
  *no_block = 0;
  if (argc < 2 || strcmp(argv[1], "serve") != 0)
    return 0;
  for (i = 2; i < argc; i++) {
    const char *v;
    char *end;
    int ok = 0;

    if (strcmp(argv[i], "--everything") == 0) {
      *everything = 1;
    } else if (strcmp(argv[i], "--stdio") == 0) {
      continue;
    } else if (strcmp(argv[i], "--no-read-block") == 0) {
      *no_block = 1;
    } else if (strncmp(argv[i], "--read-spin-us", 14) == 0 &&
               (argv[i][14] == '=' || (argv[i][14] == 0 && i + 1 < argc)) &&
               (v = cli_opt_value(argc, argv, &i, "--read-spin-us", &ok)) !=
                   NULL) {
      errno = 0;
      *read_spin_us = strtoul(v, &end, 10);
      if (*v == 0 || *v == '-' || *end != 0 || errno != 0 ||
          *read_spin_us > 1000000)
        return 0; /* acp-mcp says what is wrong */
    } else {
      return 0; /* HTTP, auth, help, or a mistake: acp-mcp's */
    }
  }
  return 1;
}
