/*
 * MCP client against the MCP server, back to back in memory: each side's
 * send() output is fed into the other's recv().
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/mcp.h"
#include "mcp_fixture.h"
#include "failmem.h"

static failmem fm;

/* MARK: - Harness */

typedef struct rec {
  int status;
  int calls;
  char text[1024];
} rec;

typedef struct world {
  acp_mcp_server *s;
  acp_mcp_conn *conn;
  acp_mcp_client *c;
  uint64_t now;
  /* what the client saw */
  int progress_calls;
  double last_progress;
  int logs;
  int list_changed[4];
  int updated;
  acp_mcp_client_request *held; /* a server request answered later */
  int held_cancelled;
  /* what the server saw */
  acp_mcp_call *slow;
  int server_cancels;
  char to_server[4096];  /* last bytes the client sent */
  unsigned elicit_modes; /* set before build_world(); 0: the default */
  char completed[64];    /* elicitation ids the client heard completed */
} world;

static world W;

/* Shuttle bytes until both sides are quiet. Returns 0 or an error. */
static int pump(void) {
  int rounds;

  for (rounds = 0; rounds < 100; rounds++) {
    const char *d;
    acp_ssize n1;
    acp_ssize n2;
    acp_ssize r;

    n1 = acp_mcp_client_send(W.c, &d);
    if (n1 < 0)
      return (int)n1;
    if (n1 > 0) {
      snprintf(W.to_server, sizeof(W.to_server), "%.*s", (int)n1, d);
      r = acp_mcp_conn_recv(W.conn, d, (size_t)n1, W.now);
      if (r < 0)
        return (int)r;
    }
    n2 = acp_mcp_conn_send(W.conn, &d);
    if (n2 < 0)
      return (int)n2;
    if (n2 > 0) {
      r = acp_mcp_client_recv(W.c, d, (size_t)n2, W.now);
      if (r < 0)
        return (int)r;
    }
    if (n1 == 0 && n2 == 0)
      return 0;
  }
  return ACP_ERR_INTERNAL;
}

static int on_result(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                     void *ud) {
  rec *r = ud;
  (void)c;
  r->status = status;
  r->calls++;
  r->text[0] = '\0';
  if (status == 0) {
    size_t n;
    const char *raw = acp_json_raw(msg->result, &n);
    snprintf(r->text, sizeof(r->text), "%.*s", (int)n, raw);
  } else if (status == ACP_ERR_PROTOCOL) {
    size_t n = 0;
    const char *raw = msg->error_data ? acp_json_raw(msg->error_data, &n) : "";
    snprintf(r->text, sizeof(r->text), "%lld %s %.*s",
             (long long)msg->error_code, msg->error_message, (int)n, raw);
  }
  return 0;
}

#define RESPOND(c, req, lit)                                                   \
  acp_mcp_client_respond((c), (req), (lit), strlen(lit))

#define HAS(s, needle)                                                         \
  do {                                                                         \
    if (strstr((s), (needle)) == NULL)                                         \
      fail_msg("expected %s in: %s", needle, s);                               \
  } while (0)

/* MARK: - Server fixtures */

static int tool_slow(acp_mcp_call *call, const acp_json_val *a, void *ud);

static int server_cancel(acp_mcp_call *call, void *ud) {
  (void)call;
  (void)ud;
  W.server_cancels++;
  return 0;
}

static int tool_slow(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  (void)a;
  (void)ud;
  W.slow = call;
  acp_mcp_call_set_on_cancel(call, server_cancel, NULL);
  return 0;
}

/* Ask the client something, relay its answer as the tool result. */
static int relay(acp_mcp_call *call, int status, const acp_rpc_msg *msg,
                 void *ud) {
  (void)ud;
  if (status != 0)
    return acp_mcp_call_respond_text(call, "failed", 6, true);
  {
    size_t n;
    const char *raw = acp_json_raw(msg->result, &n);
    return acp_mcp_call_respond_tool(call, "[]", 2, raw, n, false);
  }
}

/* URL mode elicitation: "url" asks, "urlneed" answers -32042, "urldone"
 * sends notifications/elicitation/complete; "no url mode" when the client
 * did not declare it. */
static int tool_url(acp_mcp_call *call, const acp_json_val *what) {
  static const char up[] =
      "{\"mode\":\"url\",\"message\":\"Sign in\",\"url\":"
      "\"https://example.com/x\",\"elicitationId\":\"e1\"}";
  static const char list[] =
      "[{\"mode\":\"url\",\"elicitationId\":\"e2\",\"url\":"
      "\"https://example.com/y\",\"message\":\"Authorize\"}]";
  int rv;
  if (ACP_JSON_STR_EQ_LIT(what, "url"))
    rv = acp_mcp_call_elicit(call, up, strlen(up), 0, relay, NULL);
  else if (ACP_JSON_STR_EQ_LIT(what, "urlneed")) {
    rv = acp_mcp_call_respond_url_elicitation_required(call, "[]", 2);
    if (rv != ACP_ERR_UNSUPPORTED) {
      /* An empty list, or one without ids, is refused. */
      if (rv != ACP_ERR_INVALID_ARGUMENT ||
          acp_mcp_call_respond_url_elicitation_required(
              call, "[{\"mode\":\"url\"}]", 16) != ACP_ERR_INVALID_ARGUMENT)
        return acp_mcp_call_respond_text(call, "bad check", 9, true);
      rv = acp_mcp_call_respond_url_elicitation_required(call, list,
                                                         strlen(list));
    }
  } else {
    rv = acp_mcp_conn_elicitation_complete(acp_mcp_call_conn(call), "e1");
    if (rv == 0)
      rv = acp_mcp_call_respond_text(call, "sent", 4, false);
  }
  if (rv == ACP_ERR_UNSUPPORTED)
    return acp_mcp_call_respond_text(call, "no url mode", 11, true);
  return rv;
}

static int tool_ask(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  const acp_json_val *what = acp_json_obj_getz(a, "what");
  (void)ud;
  if (ACP_JSON_STR_EQ_LIT(what, "url") ||
      ACP_JSON_STR_EQ_LIT(what, "urlneed") ||
      ACP_JSON_STR_EQ_LIT(what, "urldone"))
    return tool_url(call, what);
  static const char sp[] = "{\"messages\":[],\"maxTokens\":5}";
  static const char ep[] =
      "{\"message\":\"name?\",\"requestedSchema\":{\"type\":\"object\","
      "\"properties\":{}}}";
  if (ACP_JSON_STR_EQ_LIT(what, "sampling"))
    return acp_mcp_call_create_message(call, sp, strlen(sp), 0, relay, NULL);
  if (ACP_JSON_STR_EQ_LIT(what, "elicitation"))
    return acp_mcp_call_elicit(call, ep, strlen(ep), 0, relay, NULL);
  return acp_mcp_call_list_roots(call, 0, relay, NULL);
}

static int read_res(acp_mcp_call *call, const char *uri, size_t n, void *ud) {
  (void)ud;
  (void)n;
  return acp_mcp_call_respond_resource_text(call, uri, "text/plain", "hello",
                                            5);
}

static int get_prompt(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  (void)a;
  (void)ud;
  return acp_mcp_call_respond_raw(call, "{\"messages\":[]}", 15);
}

static int complete(acp_mcp_call *call, const acp_json_val *ref,
                    const acp_json_val *arg, const acp_json_val *ctx,
                    void *ud) {
  static const char *const v[] = {"one"};
  (void)ref;
  (void)arg;
  (void)ud;
  if (ctx == NULL)
    return acp_mcp_call_respond_completion(call, NULL, 0, -1, false);
  return acp_mcp_call_respond_completion(call, v, 1, 1, false);
}

static int add_tool(acp_mcp_server *s, const char *name, acp_mcp_tool_cb cb) {
  acp_mcp_tool_def d;
  memset(&d, 0, sizeof(d));
  d.version = ACP_MCP_DEF_VERSION;
  d.name = name;
  d.handler = cb;
  return acp_mcp_server_add_tool(s, &d);
}

/* MARK: - Client callbacks */

static int c_progress(acp_mcp_client *c, double p, double total, const char *m,
                      size_t mn, void *ud) {
  (void)c;
  (void)total;
  (void)m;
  (void)mn;
  (void)ud;
  W.progress_calls++;
  W.last_progress = p;
  return 0;
}

static int c_request(acp_mcp_client *c, acp_mcp_client_request *req,
                     const acp_json_val *params, void *ud) {
  (void)params;
  (void)ud;
  if (strcmp(acp_mcp_client_request_method(req), "roots/list") == 0)
    return RESPOND(c, req,
                   "{\"roots\":[{\"uri\":\"file:///w\",\"name\":\"w\"}]}");
  W.held = req; /* answered later by the test */
  return 0;
}

static int c_cancelled(acp_mcp_client *c, acp_mcp_client_request *req,
                       const acp_json_val *params, void *ud) {
  (void)c;
  (void)params;
  (void)ud;
  assert_true(acp_mcp_client_request_is_cancelled(req));
  W.held_cancelled++;
  return 0;
}

static int c_log(acp_mcp_client *c, acp_mcp_log_level level, const char *logger,
                 size_t ln, const acp_json_val *data, void *ud) {
  (void)c;
  (void)ud;
  (void)data;
  assert_int_equal(level, ACP_MCP_LOG_ERROR);
  assert_int_equal(ln, 2);
  assert_memory_equal(logger, "db", 2);
  W.logs++;
  return 0;
}

static int c_list_changed(acp_mcp_client *c, acp_mcp_list which, void *ud) {
  (void)c;
  (void)ud;
  W.list_changed[which]++;
  return 0;
}

static int c_updated(acp_mcp_client *c, const char *uri, size_t n, void *ud) {
  (void)c;
  (void)ud;
  assert_int_equal(n, 7);
  assert_memory_equal(uri, "mem://r", 7);
  W.updated++;
  return 0;
}

static int c_elicit_done(acp_mcp_client *c, const char *id, size_t n,
                         void *ud) {
  (void)c;
  (void)ud;
  snprintf(W.completed + strlen(W.completed),
           sizeof(W.completed) - strlen(W.completed), "%.*s;", (int)n, id);
  return 0;
}

/* Set by a test that counts only the client's allocations. */
static int server_default_mem;

static int build_world(const acp_mem *mem, acp_mcp_version asked) {
  acp_mcp_client_callbacks *cbs = NULL;
  acp_mcp_resource_def r;
  acp_mcp_prompt_def p;
  unsigned modes = W.elicit_modes;
  int rv;
  int i;

  memset(&W, 0, sizeof(W));
  W.elicit_modes = modes;
  rv = acp_mcp_server_new(&W.s, "srv", "1", NULL,
                          server_default_mem ? NULL : mem);
  if (rv != 0)
    return rv;
  rv = mcp_fixture_add_echo(W.s);
  if (rv == 0)
    rv = add_tool(W.s, "slow", tool_slow);
  if (rv == 0)
    rv = add_tool(W.s, "ask", tool_ask);
  for (i = 0; rv == 0 && i < 3; i++) {
    char name[16];
    snprintf(name, sizeof(name), "extra%d", i);
    rv = add_tool(W.s, name, tool_slow);
  }
  if (rv != 0)
    return rv;
  memset(&r, 0, sizeof(r));
  r.version = ACP_MCP_DEF_VERSION;
  r.uri = "mem://r";
  r.name = "r";
  r.size = -1;
  r.handler = read_res;
  rv = acp_mcp_server_add_resource(W.s, &r);
  if (rv != 0)
    return rv;
  memset(&p, 0, sizeof(p));
  p.version = ACP_MCP_DEF_VERSION;
  p.name = "p";
  p.handler = get_prompt;
  rv = acp_mcp_server_add_prompt(W.s, &p);
  if (rv != 0)
    return rv;
  acp_mcp_server_set_completion(W.s, complete, NULL);
  acp_mcp_server_set_logging(W.s, 1);
  acp_mcp_server_set_page_size(W.s, 2);
  rv = acp_mcp_conn_new(&W.conn, W.s, NULL);
  if (rv != 0)
    return rv;
  rv = acp_mcp_client_callbacks_new(&cbs);
  if (rv != 0)
    return rv;
  acp_mcp_client_callbacks_set_on_roots_list(cbs, c_request);
  acp_mcp_client_callbacks_set_on_sampling(cbs, c_request);
  acp_mcp_client_callbacks_set_on_elicitation(cbs, c_request);
  acp_mcp_client_callbacks_set_on_request_cancelled(cbs, c_cancelled);
  acp_mcp_client_callbacks_set_on_log(cbs, c_log);
  acp_mcp_client_callbacks_set_on_list_changed(cbs, c_list_changed);
  acp_mcp_client_callbacks_set_on_resource_updated(cbs, c_updated);
  acp_mcp_client_callbacks_set_on_elicitation_complete(cbs, c_elicit_done);
  if (modes != 0 &&
      acp_mcp_client_callbacks_set_elicitation_modes(cbs, modes) != 0) {
    acp_mcp_client_callbacks_free(cbs);
    return ACP_ERR_INTERNAL;
  }
  rv = acp_mcp_client_new(&W.c, cbs, "cli", "0.1", NULL, mem);
  acp_mcp_client_callbacks_free(cbs);
  if (rv != 0)
    return rv;
  if (asked != ACP_MCP_VERSION_UNKNOWN)
    rv = acp_mcp_client_set_protocol_version(W.c, asked);
  return rv;
}

static void free_world(void) {
  acp_mcp_client_free(W.c);
  acp_mcp_conn_free(W.conn);
  acp_mcp_server_free(W.s);
}

static int setup(void **state) {
  rec r;
  (void)state;
  W.elicit_modes = 0;
  memset(&r, 0, sizeof(r));
  assert_int_equal(build_world(NULL, ACP_MCP_VERSION_UNKNOWN), 0);
  assert_int_equal(acp_mcp_client_initialize(W.c, 0, on_result, &r), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, 0);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  free_world();
  return 0;
}

/* MARK: - Tests */

static void test_client_version_matrix(void **state) {
  acp_mcp_version v;
  (void)state;

  for (v = ACP_MCP_VERSION_2024_11_05; v <= ACP_MCP_VERSION_LATEST; v++) {
    rec r;
    memset(&r, 0, sizeof(r));
    assert_int_equal(build_world(NULL, v), 0);
    assert_int_equal(acp_mcp_client_version(W.c), ACP_MCP_VERSION_UNKNOWN);
    assert_int_equal(acp_mcp_client_initialize(W.c, 0, on_result, &r), 0);
    assert_int_equal(acp_mcp_client_initialize(W.c, 0, on_result, &r),
                     ACP_ERR_INVALID_STATE);
    assert_int_equal(pump(), 0);
    assert_int_equal(r.status, 0);
    assert_int_equal(acp_mcp_client_version(W.c), v);
    assert_int_equal(acp_mcp_conn_version(W.conn), v);
    assert_true(acp_mcp_conn_is_initialized(W.conn));
    free_world();
  }
}

static void test_client_initialize_details(void **state) {
  size_t n;
  const char *caps;
  (void)state;

  caps = acp_mcp_conn_client_capabilities(W.conn, &n);
  assert_non_null(caps);
  assert_memory_equal(caps,
                      "{\"roots\":{\"listChanged\":false},\"sampling\":{},"
                      "\"elicitation\":{}}",
                      n);
  caps = acp_mcp_client_server_capabilities(W.c, &n);
  assert_non_null(caps);
  assert_non_null(strstr(caps, "\"completions\":{}"));
  assert_non_null(acp_mcp_client_server_info(W.c, &n));
  assert_null(acp_mcp_client_instructions(W.c));
}

static void test_client_rejects_unknown_server_version(void **state) {
  acp_mcp_client *c;
  rec r;
  const char *d;
  static const char resp[] =
      "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":"
      "\"1999-01-01\",\"capabilities\":{},\"serverInfo\":{\"name\":\"x\","
      "\"version\":\"1\"}}}\n";
  (void)state;

  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_new(&c, NULL, "c", "1", NULL, NULL), 0);
  assert_int_equal(acp_mcp_client_initialize(c, 0, on_result, &r), 0);
  assert_true(acp_mcp_client_send(c, &d) > 0);
  assert_int_equal(acp_mcp_client_recv(c, resp, strlen(resp), 0),
                   (acp_ssize)strlen(resp));
  assert_int_equal(r.status, ACP_ERR_UNSUPPORTED);
  assert_int_equal(acp_mcp_client_version(c), ACP_MCP_VERSION_UNKNOWN);
  /* No notifications/initialized was sent. */
  assert_int_equal(acp_mcp_client_send(c, &d), 0);
  assert_int_equal(acp_mcp_client_ping(c, 0, NULL, NULL), 0);
  assert_int_equal(acp_mcp_client_call_tool(c, "echo", NULL, 0, NULL, 0,
                                            on_result, &r, NULL),
                   ACP_ERR_INVALID_STATE);
  acp_mcp_client_free(c);
}

static void test_client_before_initialize(void **state) {
  rec r;
  (void)state;

  memset(&r, 0, sizeof(r));
  assert_int_equal(build_world(NULL, ACP_MCP_VERSION_UNKNOWN), 0);
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, NULL, NULL, 0,
                                       on_result, &r, NULL),
                   ACP_ERR_INVALID_STATE);
  /* Raw request before initialize reaches the server: -32600. */
  {
    static const char line[] =
        "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\"}\n";
    const char *d;
    acp_ssize n;
    acp_mcp_conn_recv(W.conn, line, strlen(line), 0);
    n = acp_mcp_conn_send(W.conn, &d);
    assert_true(n > 0);
    assert_non_null(strstr(d, "-32600"));
  }
  assert_int_equal(acp_mcp_client_ping(W.c, 0, on_result, &r), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.text, "{}");
  free_world();
}

static void test_client_call_echo(void **state) {
  rec r;
  (void)state;

  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_call_tool(W.c, "echo",
                                            "{\"message\":\"hello\"}", 19, NULL,
                                            0, on_result, &r, NULL),
                   0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, 0);
  assert_string_equal(
      r.text, "{\"content\":[{\"type\":\"text\",\"text\":\"Echo: hello\"}]}");
  assert_int_equal(acp_mcp_client_call_tool(W.c, "nope", NULL, 0, NULL, 0,
                                            on_result, &r, NULL),
                   0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, ACP_ERR_PROTOCOL);
  HAS(r.text, "-32602 Unknown tool: nope");
}

typedef struct pages {
  int pages;
  int lasts;
  int status;
  int names;
} pages;

static int on_page(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                   bool last, void *ud) {
  pages *p = ud;
  (void)c;
  p->pages++;
  p->status = status;
  if (last)
    p->lasts++;
  if (status == 0) {
    size_t n;
    const char *raw = acp_json_raw(msg->result, &n);
    const char *q;
    char buf[2048];
    snprintf(buf, sizeof(buf), "%.*s", (int)n, raw);
    for (q = buf; (q = strstr(q, "\"name\":")) != NULL; q++)
      p->names++;
  }
  return 0;
}

static void test_client_list_all_pages(void **state) {
  pages p;
  (void)state;

  memset(&p, 0, sizeof(p));
  assert_int_equal(
      acp_mcp_client_list_all(W.c, ACP_MCP_LIST_TOOLS, NULL, 0, on_page, &p),
      0);
  assert_int_equal(pump(), 0);
  assert_int_equal(p.pages, 3); /* 6 tools, page size 2 */
  assert_int_equal(p.lasts, 1);
  assert_int_equal(p.status, 0);
  assert_int_equal(p.names, 6);
  memset(&p, 0, sizeof(p));
  assert_int_equal(
      acp_mcp_client_list_all(W.c, ACP_MCP_LIST_PROMPTS, NULL, 0, on_page, &p),
      0);
  assert_int_equal(pump(), 0);
  assert_int_equal(p.pages, 1);
  assert_int_equal(p.names, 1);
  /* A single page with an explicit (invalid) cursor. */
  {
    rec r;
    memset(&r, 0, sizeof(r));
    assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, "bogus", NULL,
                                         0, on_result, &r, NULL),
                     0);
    assert_int_equal(pump(), 0);
    assert_int_equal(r.status, ACP_ERR_PROTOCOL);
    HAS(r.text, "-32602");
  }
}

static void test_client_progress_and_timeout_reset(void **state) {
  acp_mcp_request_opts o = ACP_MCP_REQUEST_OPTS_INIT;
  rec r;
  (void)state;

  memset(&r, 0, sizeof(r));
  o.timeout_ms = 100;
  o.max_total_ms = 250;
  o.on_progress = c_progress;
  W.now = 1000;
  assert_int_equal(
      acp_mcp_client_send_request(W.c, "tools/call",
                                  "{\"name\":\"slow\",\"_meta\":{\"k\":1}}", 31,
                                  &o, W.now, on_result, &r, NULL),
      0);
  assert_int_equal(pump(), 0);
  HAS(W.to_server, "\"_meta\":{\"progressToken\":0,\"k\":1}");
  assert_non_null(W.slow);
  assert_int_equal(acp_mcp_client_get_expiry(W.c), 1100);
  /* Progress at t=1090 pushes the deadline to 1190. */
  W.now = 1090;
  assert_int_equal(acp_mcp_call_progress(W.slow, 0.5, 1, "half"), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(W.progress_calls, 1);
  assert_true(W.last_progress == 0.5);
  assert_int_equal(acp_mcp_client_get_expiry(W.c), 1190);
  assert_int_equal(acp_mcp_client_handle_expiry(W.c, 1150), 0);
  assert_int_equal(r.calls, 0);
  /* Progress at t=1180 would give 1280; the maximum caps it at 1250. */
  W.now = 1180;
  assert_int_equal(acp_mcp_call_progress(W.slow, 0.7, 1, NULL), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(acp_mcp_client_get_expiry(W.c), 1250);
  W.now = 1250;
  assert_int_equal(acp_mcp_client_handle_expiry(W.c, W.now), 0);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, ACP_ERR_TIMEOUT);
  assert_int_equal(acp_mcp_client_get_expiry(W.c), UINT64_MAX);
  /* The server got notifications/cancelled and sends nothing more. */
  assert_int_equal(pump(), 0);
  HAS(W.to_server, "notifications/cancelled");
  HAS(W.to_server, "Request timed out");
  assert_int_equal(W.server_cancels, 1);
  assert_int_equal(acp_mcp_call_respond_text(W.slow, "late", 4, false), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.calls, 1);
}

static void test_client_default_timeout(void **state) {
  rec r;
  (void)state;

  memset(&r, 0, sizeof(r));
  acp_mcp_client_set_timeouts(W.c, 50, 0);
  assert_int_equal(acp_mcp_client_call_tool(W.c, "slow", NULL, 0, NULL, 0,
                                            on_result, &r, NULL),
                   0);
  assert_int_equal(pump(), 0);
  assert_int_equal(acp_mcp_client_get_expiry(W.c), 50);
  assert_int_equal(acp_mcp_client_handle_expiry(W.c, 49), 0);
  assert_int_equal(r.calls, 0);
  assert_int_equal(acp_mcp_client_handle_expiry(W.c, 50), 0);
  assert_int_equal(r.status, ACP_ERR_TIMEOUT);
}

static void test_client_cancel(void **state) {
  rec r;
  int64_t id = -1;
  (void)state;

  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_call_tool(W.c, "slow", NULL, 0, NULL, 0,
                                            on_result, &r, &id),
                   0);
  assert_int_equal(pump(), 0);
  assert_int_equal(acp_mcp_client_cancel(W.c, id, "user", 0), 0);
  assert_int_equal(r.status, ACP_ERR_CANCELLED);
  assert_int_equal(acp_mcp_client_cancel(W.c, id, NULL, 0), ACP_ERR_NOT_FOUND);
  assert_int_equal(pump(), 0);
  HAS(W.to_server, "\"reason\":\"user\"");
  assert_int_equal(W.server_cancels, 1);
  assert_true(acp_mcp_call_is_cancelled(W.slow));
  assert_int_equal(acp_mcp_call_respond_text(W.slow, "x", 1, false), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.calls, 1);
}

static void ask(const char *what, rec *r) {
  char args[64];
  snprintf(args, sizeof(args), "{\"what\":\"%s\"}", what);
  memset(r, 0, sizeof(*r));
  assert_int_equal(acp_mcp_client_call_tool(W.c, "ask", args, strlen(args),
                                            NULL, 0, on_result, r, NULL),
                   0);
  assert_int_equal(pump(), 0);
}

static void test_client_server_requests_roundtrip(void **state) {
  rec r;
  (void)state;

  ask("roots", &r);
  assert_int_equal(r.status, 0);
  HAS(r.text, "\"structuredContent\":{\"roots\":[{\"uri\":\"file:///w\"");

  ask("sampling", &r);
  assert_int_equal(r.calls, 0);
  assert_non_null(W.held);
  assert_string_equal(acp_mcp_client_request_method(W.held),
                      "sampling/createMessage");
  assert_int_equal(RESPOND(W.c, W.held,
                           "{\"role\":\"assistant\",\"content\":"
                           "{\"type\":\"text\",\"text\":\"hi\"},"
                           "\"model\":\"m\"}"),
                   0);
  W.held = NULL;
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, 0);
  HAS(r.text, "\"model\":\"m\"");

  ask("elicitation", &r);
  assert_non_null(W.held);
  assert_string_equal(acp_mcp_client_request_method(W.held),
                      "elicitation/create");
  assert_int_equal(RESPOND(W.c, W.held,
                           "{\"action\":\"accept\",\"content\":"
                           "{\"name\":\"Al\"}}"),
                   0);
  W.held = NULL;
  assert_int_equal(pump(), 0);
  HAS(r.text, "\"action\":\"accept\"");

  /* An error answer from the client reaches the handler as a failure. */
  ask("sampling", &r);
  assert_int_equal(
      acp_mcp_client_respond_error(W.c, W.held, -1, "User rejected"), 0);
  W.held = NULL;
  assert_int_equal(pump(), 0);
  HAS(r.text, "failed");
}

static int setup_url(void **state) {
  rec r;
  (void)state;
  W.elicit_modes = ACP_MCP_ELICIT_FORM | ACP_MCP_ELICIT_URL;
  memset(&r, 0, sizeof(r));
  assert_int_equal(build_world(NULL, ACP_MCP_VERSION_UNKNOWN), 0);
  assert_int_equal(acp_mcp_client_initialize(W.c, 0, on_result, &r), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, 0);
  return 0;
}

static const char *client_caps(void) {
  static char buf[512];
  size_t n;
  const char *p = acp_mcp_conn_client_capabilities(W.conn, &n);
  snprintf(buf, sizeof(buf), "%.*s", (int)n, p ? p : "");
  return buf;
}

/* A client whose callback handles form only declares `elicitation: {}`,
 * and neither the server nor the client lets a URL elicitation through. */
static void test_url_elicitation_form_only(void **state) {
  acp_mcp_client_callbacks *cbs = NULL;
  const char *out;
  acp_ssize n;
  rec r;
  (void)state;
  HAS(client_caps(), "\"elicitation\":{}");
  ask("url", &r);
  assert_null(W.held);
  HAS(r.text, "no url mode");
  ask("urlneed", &r);
  HAS(r.text, "no url mode");
  ask("urldone", &r);
  HAS(r.text, "no url mode");
  /* A server that sends one anyway gets -32602 and the callback is not
   * called. */
  {
    static const char req[] =
        "{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"elicitation/create\","
        "\"params\":{\"mode\":\"url\",\"message\":\"m\",\"url\":"
        "\"https://e\",\"elicitationId\":\"x\"}}\n";
    assert_int_equal(acp_mcp_client_recv(W.c, req, strlen(req), 0),
                     (acp_ssize)strlen(req));
    assert_null(W.held);
    n = acp_mcp_client_send(W.c, &out);
    assert_true(n > 0);
    assert_non_null(strstr(out, "\"id\":77,\"error\":{\"code\":-32602"));
  }
  assert_int_equal(acp_mcp_client_callbacks_new(&cbs), 0);
  assert_int_equal(acp_mcp_client_callbacks_set_elicitation_modes(cbs, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_client_callbacks_set_elicitation_modes(cbs, 4),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(
      acp_mcp_client_callbacks_set_elicitation_modes(NULL, ACP_MCP_ELICIT_URL),
      ACP_ERR_INVALID_ARGUMENT);
  acp_mcp_client_callbacks_free(cbs);
}

static void test_url_elicitation(void **state) {
  rec r;
  (void)state;
  HAS(client_caps(), "\"elicitation\":{\"form\":{},\"url\":{}}");
  /* The request reaches the callback with its mode. */
  ask("url", &r);
  assert_non_null(W.held);
  assert_int_equal(RESPOND(W.c, W.held, "{\"action\":\"accept\"}"), 0);
  W.held = NULL;
  assert_int_equal(pump(), 0);
  HAS(r.text, "\"action\":\"accept\"");
  /* Form still works. */
  ask("elicitation", &r);
  assert_non_null(W.held);
  assert_int_equal(RESPOND(W.c, W.held, "{\"action\":\"decline\"}"), 0);
  W.held = NULL;
  assert_int_equal(pump(), 0);
  HAS(r.text, "decline");
  /* URLElicitationRequiredError with the elicitations in data. */
  ask("urlneed", &r);
  assert_int_equal(r.status, ACP_ERR_PROTOCOL);
  HAS(r.text, "-32042 This request requires more information. "
              "{\"elicitations\":[{\"mode\":\"url\",\"elicitationId\":\"e2\"");
  /* notifications/elicitation/complete reaches its callback. */
  ask("urldone", &r);
  HAS(r.text, "sent");
  assert_string_equal(W.completed, "e1;");
}

static void test_client_cancel_propagates_to_sampling(void **state) {
  rec r;
  int64_t id;
  (void)state;

  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_call_tool(W.c, "ask",
                                            "{\"what\":\"sampling\"}", 19, NULL,
                                            0, on_result, &r, &id),
                   0);
  assert_int_equal(pump(), 0);
  assert_non_null(W.held);
  assert_int_equal(acp_mcp_client_cancel(W.c, id, NULL, 0), 0);
  assert_int_equal(pump(), 0);
  /* The server cancelled its sampling request; the held one is marked. */
  assert_int_equal(W.held_cancelled, 1);
  assert_int_equal(acp_mcp_client_respond(W.c, W.held, "{}", 2), 0);
  W.held = NULL;
  assert_int_equal(pump(), 0);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, ACP_ERR_CANCELLED);
}

static void test_client_other_requests(void **state) {
  rec r;
  (void)state;

  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_read_resource(W.c, "mem://r", NULL, 0,
                                                on_result, &r, NULL),
                   0);
  assert_int_equal(pump(), 0);
  HAS(r.text, "\"text\":\"hello\"");
  assert_int_equal(acp_mcp_client_read_resource(W.c, "mem://x", NULL, 0,
                                                on_result, &r, NULL),
                   0);
  assert_int_equal(pump(), 0);
  HAS(r.text, "-32002");
  assert_int_equal(acp_mcp_client_get_prompt(W.c, "p", "{}", 2, NULL, 0,
                                             on_result, &r, NULL),
                   0);
  assert_int_equal(pump(), 0);
  assert_string_equal(r.text, "{\"messages\":[]}");
  assert_int_equal(acp_mcp_client_complete(W.c,
                                           "{\"type\":\"ref/prompt\",\"name\":"
                                           "\"p\"}",
                                           "a", "o", "{\"b\":\"c\"}", 0,
                                           on_result, &r),
                   0);
  assert_int_equal(pump(), 0);
  HAS(r.text, "\"values\":[\"one\"]");
  assert_int_equal(
      acp_mcp_client_set_log_level(W.c, ACP_MCP_LOG_ERROR, 0, on_result, &r),
      0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, 0);
  assert_int_equal(acp_mcp_client_subscribe(W.c, "mem://r", 0, on_result, &r),
                   0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, 0);
  assert_int_equal(acp_mcp_client_ping(W.c, 0, on_result, &r), 0);
  assert_int_equal(pump(), 0);
  assert_string_equal(r.text, "{}");
  /* Notifications. */
  assert_int_equal(acp_mcp_server_log(W.s, ACP_MCP_LOG_INFO, "db", "1", 1), 0);
  assert_int_equal(acp_mcp_server_log(W.s, ACP_MCP_LOG_ERROR, "db", "2", 1), 0);
  assert_int_equal(acp_mcp_server_resource_updated(W.s, "mem://r"), 0);
  assert_int_equal(acp_mcp_server_list_changed(W.s, ACP_MCP_LIST_TOOLS), 0);
  assert_int_equal(acp_mcp_server_list_changed(W.s, ACP_MCP_LIST_PROMPTS), 0);
  assert_int_equal(acp_mcp_server_list_changed(W.s, ACP_MCP_LIST_RESOURCES), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(W.logs, 1);
  assert_int_equal(W.updated, 1);
  assert_int_equal(W.list_changed[ACP_MCP_LIST_TOOLS], 1);
  assert_int_equal(W.list_changed[ACP_MCP_LIST_PROMPTS], 1);
  assert_int_equal(W.list_changed[ACP_MCP_LIST_RESOURCES], 1);
  assert_int_equal(acp_mcp_client_unsubscribe(W.c, "mem://r", 0, on_result, &r),
                   0);
  assert_int_equal(pump(), 0);
  assert_int_equal(acp_mcp_server_resource_updated(W.s, "mem://r"), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(W.updated, 1);
  assert_int_equal(acp_mcp_client_roots_changed(W.c), 0);
  assert_int_equal(pump(), 0);
}

static void test_client_eof_completes_pending(void **state) {
  rec r;
  (void)state;

  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_call_tool(W.c, "slow", NULL, 0, NULL, 0,
                                            on_result, &r, NULL),
                   0);
  assert_int_equal(pump(), 0);
  assert_int_equal(acp_mcp_client_recv_eof(W.c, 0), 0);
  assert_int_equal(r.status, ACP_ERR_CLOSED);
}

static void test_client_bad_arguments(void **state) {
  acp_mcp_request_opts o = ACP_MCP_REQUEST_OPTS_INIT;
  rec r;
  (void)state;

  o.on_progress = c_progress;
  assert_int_equal(acp_mcp_client_send_request(W.c, "tools/call", "[1]", 3, &o,
                                               0, on_result, &r, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  o.version = 77;
  assert_int_equal(acp_mcp_client_call_tool(W.c, "echo", NULL, 0, &o, 0,
                                            on_result, &r, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_client_send_request(W.c, "initialize", NULL, 0, NULL,
                                               0, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_client_list(W.c, (acp_mcp_list)9, NULL, NULL, 0,
                                       NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(
      acp_mcp_client_set_protocol_version(W.c, ACP_MCP_VERSION_UNKNOWN),
      ACP_ERR_INVALID_ARGUMENT);
  /* Garbage from the server does not break the client. */
  assert_int_equal(acp_mcp_client_recv(W.c, "{oops\n", 6, 0), 6);
  assert_int_equal(pump(), 0);
  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_ping(W.c, 0, on_result, &r), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, 0);
}

/* MARK: - Allocation failure */

static int scenario(const acp_mem *mem) {
  acp_mcp_request_opts o = ACP_MCP_REQUEST_OPTS_INIT;
  rec r;
  pages p;
  int rv;

  memset(&r, 0, sizeof(r));
  memset(&p, 0, sizeof(p));
  rv = build_world(mem, ACP_MCP_VERSION_UNKNOWN);
  if (rv == 0)
    rv = acp_mcp_client_initialize(W.c, 0, on_result, &r);
  if (rv == 0)
    rv = pump();
  if (rv == 0 && r.status != 0)
    rv = r.status;
  o.on_progress = c_progress;
  o.timeout_ms = 10;
  if (rv == 0)
    rv = acp_mcp_client_call_tool(W.c, "echo", "{\"message\":\"m\"}", 15, &o, 0,
                                  on_result, &r, NULL);
  if (rv == 0)
    rv = acp_mcp_client_list_all(W.c, ACP_MCP_LIST_TOOLS, NULL, 0, on_page, &p);
  if (rv == 0)
    rv = acp_mcp_client_call_tool(W.c, "ask", "{\"what\":\"roots\"}", 16, NULL,
                                  0, on_result, &r, NULL);
  if (rv == 0)
    rv = acp_mcp_client_call_tool(W.c, "slow", NULL, 0, &o, 0, on_result, &r,
                                  NULL);
  if (rv == 0)
    rv = pump();
  if (rv == 0 && W.slow)
    rv = acp_mcp_call_progress(W.slow, 1, -1, NULL);
  if (rv == 0)
    rv = pump();
  if (rv == 0)
    rv = acp_mcp_client_handle_expiry(W.c, 100);
  if (rv == 0)
    rv = pump();
  free_world();
  return rv;
}

/* Sequential calls reuse the finished call's record: once warm, the
 * client allocates nothing for a call and its answer. */
static void test_client_sequential_calls_reuse_records(void **state) {
  acp_mem mem = {&fm, fm_malloc, fm_free, fm_calloc, fm_realloc};
  rec r;
  long before = 0;
  int i;
  (void)state;

  memset(&fm, 0, sizeof(fm));
  fm.fail_at = -1;
  memset(&r, 0, sizeof(r));
  server_default_mem = 1;
  assert_int_equal(build_world(&mem, ACP_MCP_VERSION_UNKNOWN), 0);
  server_default_mem = 0;
  assert_int_equal(acp_mcp_client_initialize(W.c, 0, on_result, &r), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, 0);
  for (i = 0; i < 5; i++) {
    if (i == 2)
      before = fm.count;
    memset(&r, 0, sizeof(r));
    assert_int_equal(acp_mcp_client_call_tool(W.c, "echo",
                                              "{\"message\":\"hello\"}", 19,
                                              NULL, 0, on_result, &r, NULL),
                     0);
    assert_int_equal(pump(), 0);
    assert_int_equal(r.status, 0);
    assert_string_equal(
        r.text, "{\"content\":[{\"type\":\"text\",\"text\":\"Echo: hello\"}]}");
  }
  assert_int_equal(fm.count - before, 0);
  free_world();
  assert_int_equal(fm.live, 0);
}

static void test_client_allocation_failure_loop(void **state) {
  acp_mem mem = {&fm, fm_malloc, fm_free, fm_calloc, fm_realloc};
  long total;
  long i;
  (void)state;

  memset(&fm, 0, sizeof(fm));
  fm.fail_at = -1;
  assert_int_equal(scenario(&mem), 0);
  assert_int_equal(fm.live, 0);
  total = fm.count;
  assert_true(total > 50);
  for (i = 0; i < total; i++) {
    fm.count = 0;
    fm.fail_at = i;
    fm.live = 0;
    (void)scenario(&mem);
    assert_int_equal(fm.live, 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_client_version_matrix),
      cmocka_unit_test_setup_teardown(test_client_initialize_details, setup,
                                      teardown),
      cmocka_unit_test(test_client_rejects_unknown_server_version),
      cmocka_unit_test(test_client_before_initialize),
      cmocka_unit_test_setup_teardown(test_client_call_echo, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_list_all_pages, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_client_progress_and_timeout_reset,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_default_timeout, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_client_cancel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_server_requests_roundtrip,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_cancel_propagates_to_sampling,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_other_requests, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_client_eof_completes_pending, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_client_bad_arguments, setup,
                                      teardown),
      cmocka_unit_test(test_client_allocation_failure_loop),
      cmocka_unit_test(test_client_sequential_calls_reuse_records),
      cmocka_unit_test_setup_teardown(test_url_elicitation_form_only, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_url_elicitation, setup_url,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
