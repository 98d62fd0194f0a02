/*
 * MCP client at 2026-07-28 against scripted server lines: the discover
 * probe and its fallback to initialize, the per-request _meta, multi
 * round-trip retries, and the list cache. Each test plays the server by
 * feeding JSON lines to acp_mcp_client_recv() and reading what the client
 * sends.
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
#include "failmem.h"

/* MARK: - Harness */

typedef struct rec {
  int status;
  int calls;
  bool had_msg;
  char text[2048];
} rec;

typedef struct world {
  acp_mcp_client *c;
  uint64_t now;
  char out[8192]; /* what the client sent since the last take() */
  int elicits;
  int samplings;
  acp_mcp_client_request *held; /* a sampling answered later */
  bool elicit_error;            /* answer elicitation with an error */
} world;

static world W;

#define HAS(s, needle)                                                         \
  do {                                                                         \
    if (strstr((s), (needle)) == NULL)                                         \
      fail_msg("expected %s in: %s", needle, s);                               \
  } while (0)
#define LACKS(s, needle)                                                       \
  do {                                                                         \
    if (strstr((s), (needle)) != NULL)                                         \
      fail_msg("did not expect %s in: %s", needle, s);                         \
  } while (0)

/* Everything the client has to send, into W.out. Returns its length. */
static size_t take(void) {
  size_t len = 0;
  const char *d;
  acp_ssize n;

  W.out[0] = '\0';
  while ((n = acp_mcp_client_send(W.c, &d)) > 0) {
    assert_true(len + (size_t)n < sizeof(W.out));
    memcpy(W.out + len, d, (size_t)n);
    len += (size_t)n;
    W.out[len] = '\0';
  }
  assert_true(n == 0);
  return len;
}

/* The id of the last request in W.out ("id":N). */
static long last_id(void) {
  const char *p = W.out;
  const char *hit = NULL;
  while ((p = strstr(p, "\"id\":")) != NULL)
    hit = p++;
  assert_non_null(hit);
  return strtol(hit + 5, NULL, 10);
}

/* Feed one server line (printf format). */
static void feed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void feed(const char *fmt, ...) {
  char line[4096];
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
  va_end(ap);
  assert_true(n > 0 && n < (int)sizeof(line) - 1);
  line[n++] = '\n';
  assert_int_equal(acp_mcp_client_recv(W.c, line, (size_t)n, W.now), n);
}

static int on_result(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                     void *ud) {
  rec *r = ud;
  (void)c;
  r->status = status;
  r->calls++;
  r->had_msg = msg != NULL;
  r->text[0] = '\0';
  if (status == 0) {
    size_t n;
    const char *raw = acp_json_raw(msg->result, &n);
    snprintf(r->text, sizeof(r->text), "%.*s", (int)n, raw);
  } else if (msg != NULL && msg->error != NULL) {
    snprintf(r->text, sizeof(r->text), "%lld", (long long)msg->error_code);
  }
  return 0;
}

static int on_elicit(acp_mcp_client *c, acp_mcp_client_request *req,
                     const acp_json_val *params, void *ud) {
  const char *a = "{\"action\":\"accept\",\"content\":{\"name\":\"octocat\"}}";
  (void)ud;
  W.elicits++;
  assert_string_equal(acp_mcp_client_request_method(req), "elicitation/create");
  assert_non_null(acp_json_obj_getz(params, "message"));
  if (W.elicit_error)
    return acp_mcp_client_respond_error(c, req, -1, "declined");
  return acp_mcp_client_respond(c, req, a, strlen(a));
}

static int on_sampling(acp_mcp_client *c, acp_mcp_client_request *req,
                       const acp_json_val *params, void *ud) {
  (void)c;
  (void)params;
  (void)ud;
  W.samplings++;
  W.held = req; /* answered later, outside the callback */
  return 0;
}

static void make_client(const acp_mem *mem, bool with_cbs) {
  acp_mcp_client_callbacks *cbs = NULL;

  assert_int_equal(acp_mcp_client_callbacks_new(&cbs), 0);
  if (with_cbs) {
    acp_mcp_client_callbacks_set_on_elicitation(cbs, on_elicit);
    acp_mcp_client_callbacks_set_on_sampling(cbs, on_sampling);
  }
  assert_int_equal(acp_mcp_client_new(&W.c, cbs, "t2026", "1.2", NULL, mem), 0);
  acp_mcp_client_callbacks_free(cbs);
}

static int setup(void **state) {
  (void)state;
  memset(&W, 0, sizeof(W));
  W.now = 1000;
  make_client(NULL, true);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  acp_mcp_client_free(W.c);
  W.c = NULL;
  return 0;
}

#define DISCOVER_2026                                                          \
  "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"resultType\":\"complete\","   \
  "\"supportedVersions\":[\"2026-07-28\",\"2025-11-25\"],"                     \
  "\"capabilities\":{\"tools\":{}},\"instructions\":\"hi\",\"ttlMs\":0,"       \
  "\"cacheScope\":\"private\",\"_meta\":{\"io.modelcontextprotocol/"           \
  "serverInfo\":{\"name\":\"srv\",\"version\":\"9\"}}}}"

/* Handshake to the stateless era. */
static void go_stateless(void) {
  rec r = {0};
  size_t n;

  assert_int_equal(acp_mcp_client_set_protocol(W.c, NULL), 0);
  assert_int_equal(acp_mcp_client_initialize(W.c, W.now, on_result, &r), 0);
  take();
  HAS(W.out, "\"method\":\"server/discover\"");
  feed(DISCOVER_2026, last_id());
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, 0);
  assert_int_equal(take(), 0); /* no notifications/initialized */
  assert_int_equal(acp_mcp_client_era(W.c), ACP_MCP_ERA_STATELESS);
  assert_string_equal(acp_mcp_client_protocol(W.c), "2026-07-28");
  assert_string_equal(acp_mcp_client_server_info(W.c, &n),
                      "{\"name\":\"srv\",\"version\":\"9\"}");
  assert_string_equal(acp_mcp_client_instructions(W.c), "hi");
}

/* MARK: - Negotiation */

static void test_discover_then_stateless_requests(void **state) {
  rec r = {0};
  const char *args = "{\"x\":1}";
  (void)state;

  go_stateless();
  assert_int_equal(acp_mcp_client_call_tool(W.c, "echo", args, strlen(args),
                                            NULL, W.now, on_result, &r, NULL),
                   0);
  take();
  HAS(W.out, "\"method\":\"tools/call\"");
  HAS(W.out, "\"arguments\":{\"x\":1}");
  HAS(W.out, "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"");
  HAS(W.out, "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"t2026\","
             "\"version\":\"1.2\"}");
  /* The callbacks declared elicitation and sampling, as initialize would. */
  HAS(W.out, "\"io.modelcontextprotocol/clientCapabilities\":{\"sampling\":{}"
             ",\"elicitation\":{}}");
  LACKS(W.out, "initialize");
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"resultType\":"
       "\"complete\",\"content\":[]}}",
       last_id());
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, 0);
  HAS(r.text, "\"content\":[]");
}

static int on_prog(acp_mcp_client *c, double progress, double total,
                   const char *message, size_t message_len, void *ud) {
  (void)c;
  (void)progress;
  (void)total;
  (void)message;
  (void)message_len;
  (void)ud;
  return 0;
}

static void test_caller_meta_and_progress_kept(void **state) {
  rec r = {0};
  acp_mcp_request_opts o = ACP_MCP_REQUEST_OPTS_INIT;
  const char *params = "{\"name\":\"a\",\"_meta\":{\"k\":\"v\"}}";
  (void)state;

  go_stateless();
  o.on_progress = on_prog;
  assert_int_equal(acp_mcp_client_send_request(W.c, "tools/call", params,
                                               strlen(params), &o, W.now,
                                               on_result, &r, NULL),
                   0);
  take();
  /* The caller's _meta keeps its member, the 2026 ones follow. */
  HAS(W.out, "\"_meta\":{\"progressToken\":");
  HAS(W.out, "\"k\":\"v\",\"io.modelcontextprotocol/"
             "protocolVersion\":\"2026-07-28\"");
}

static void test_fallback_to_initialize_on_method_not_found(void **state) {
  rec r = {0};
  (void)state;

  assert_int_equal(acp_mcp_client_set_protocol(W.c, "auto"), 0);
  assert_int_equal(acp_mcp_client_initialize(W.c, W.now, on_result, &r), 0);
  take();
  HAS(W.out, "server/discover");
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"error\":{\"code\":-32601,"
       "\"message\":\"Method not found\"}}",
       last_id());
  assert_int_equal(r.calls, 0); /* the callback waits for initialize */
  take();
  HAS(W.out, "\"method\":\"initialize\"");
  HAS(W.out, "\"protocolVersion\":\"2025-11-25\"");
  LACKS(W.out, "io.modelcontextprotocol/protocolVersion");
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"protocolVersion\":"
       "\"2025-06-18\",\"capabilities\":{},\"serverInfo\":{\"name\":\"old\","
       "\"version\":\"1\"}}}",
       last_id());
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, 0);
  take();
  HAS(W.out, "notifications/initialized");
  assert_int_equal(acp_mcp_client_era(W.c), ACP_MCP_ERA_STATEFUL);
  assert_string_equal(acp_mcp_client_protocol(W.c), "2025-06-18");
  assert_int_equal(acp_mcp_client_version(W.c), ACP_MCP_VERSION_2025_06_18);
  /* Stateful requests carry no 2026 _meta. */
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, NULL, NULL,
                                       W.now, on_result, &r, NULL),
                   0);
  take();
  LACKS(W.out, "io.modelcontextprotocol");
}

static void test_fallback_when_2026_not_listed(void **state) {
  rec r = {0};
  (void)state;

  assert_int_equal(acp_mcp_client_set_mode(W.c, ACP_MCP_CLIENT_AUTO), 0);
  assert_int_equal(acp_mcp_client_initialize(W.c, W.now, on_result, &r), 0);
  take();
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"supportedVersions\":"
       "[\"2027-01-01\"],\"capabilities\":{}}}",
       last_id());
  take();
  HAS(W.out, "\"method\":\"initialize\"");
  /* The -32022 answer of a newer-only server falls back the same way. */
  assert_int_equal(r.calls, 0);
}

static void test_discover_retried_once_on_unsupported_version(void **state) {
  rec r = {0};
  (void)state;

  assert_int_equal(acp_mcp_client_set_protocol(W.c, "2026-07-28"), 0);
  assert_int_equal(acp_mcp_client_initialize(W.c, W.now, on_result, &r), 0);
  take();
  /* -32022 naming 2026-07-28 as supported: asked again, once. */
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"error\":{\"code\":-32022,"
       "\"message\":\"Unsupported protocol version\",\"data\":{\"supported\":"
       "[\"2026-07-28\"],\"requested\":\"x\"}}}",
       last_id());
  assert_int_equal(r.calls, 0);
  take();
  HAS(W.out, "\"method\":\"server/discover\"");
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"error\":{\"code\":-32022,"
       "\"message\":\"Unsupported protocol version\",\"data\":{\"supported\":"
       "[\"2026-07-28\"]}}}",
       last_id());
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, ACP_ERR_UNSUPPORTED);
  assert_int_equal(take(), 0);
}

static void test_forced_versions(void **state) {
  rec r = {0};
  (void)state;

  /* Forced 2026: an old server's error is ACP_ERR_UNSUPPORTED. */
  assert_int_equal(acp_mcp_client_set_protocol(W.c, "2026-07-28"), 0);
  assert_int_equal(acp_mcp_client_set_protocol(W.c, "1999-01-01"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_client_initialize(W.c, W.now, on_result, &r), 0);
  assert_int_equal(acp_mcp_client_set_protocol(W.c, "auto"),
                   ACP_ERR_INVALID_STATE);
  take();
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"error\":{\"code\":-32600,"
       "\"message\":\"Server not initialized\"}}",
       last_id());
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, ACP_ERR_UNSUPPORTED);
  assert_int_equal(take(), 0);
  assert_int_equal(acp_mcp_client_era(W.c), ACP_MCP_ERA_NONE);
  assert_null(acp_mcp_client_protocol(W.c));
  acp_mcp_client_free(W.c);

  /* Forced stateful: initialize first, with that version. */
  make_client(NULL, false);
  assert_int_equal(acp_mcp_client_set_protocol(W.c, "2025-03-26"), 0);
  assert_int_equal(acp_mcp_client_initialize(W.c, W.now, on_result, &r), 0);
  take();
  HAS(W.out, "\"method\":\"initialize\"");
  HAS(W.out, "\"protocolVersion\":\"2025-03-26\"");
  LACKS(W.out, "server/discover");
}

/* MARK: - Multi round-trip requests */

#define INPUT_REQUIRED                                                         \
  "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"resultType\":"                \
  "\"input_required\",\"inputRequests\":{\"login\":{\"method\":"               \
  "\"elicitation/create\",\"params\":{\"mode\":\"form\",\"message\":\"Who?"    \
  "\",\"requestedSchema\":{\"type\":\"object\"}}},\"cap\":{\"method\":"        \
  "\"sampling/createMessage\",\"params\":{\"messages\":[],\"maxTokens\":5}}}"  \
  ",\"requestState\":\"s\\u0074ate+/=\\\"1\"}}"

static void test_input_required_retry(void **state) {
  rec r = {0};
  const char *ans = "{\"role\":\"assistant\",\"content\":{\"type\":\"text\","
                    "\"text\":\"Paris\"},\"model\":\"m\"}";
  long first;
  (void)state;

  go_stateless();
  assert_int_equal(acp_mcp_client_call_tool(W.c, "book", "{\"n\":2}", 7, NULL,
                                            W.now, on_result, &r, NULL),
                   0);
  take();
  first = last_id();
  feed(INPUT_REQUIRED, first);
  assert_int_equal(r.calls, 0);
  assert_int_equal(W.elicits, 1);
  assert_int_equal(W.samplings, 1);
  assert_non_null(W.held);
  assert_string_equal(acp_mcp_client_request_method(W.held),
                      "sampling/createMessage");
  assert_int_equal(take(), 0); /* waits for the held answer */
  assert_int_equal(acp_mcp_client_respond(W.c, W.held, ans, strlen(ans)), 0);
  take();
  HAS(W.out, "\"method\":\"tools/call\"");
  HAS(W.out, "\"name\":\"book\"");
  HAS(W.out, "\"arguments\":{\"n\":2}");
  HAS(W.out, "\"inputResponses\":{\"login\":{\"action\":\"accept\","
             "\"content\":{\"name\":\"octocat\"}},\"cap\":{\"role\":");
  /* requestState echoed byte for byte, escapes included. */
  HAS(W.out, "\"requestState\":\"s\\u0074ate+/=\\\"1\"");
  HAS(W.out, "io.modelcontextprotocol/protocolVersion");
  assert_true(last_id() != first);
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"resultType\":"
       "\"complete\",\"content\":[{\"type\":\"text\",\"text\":\"booked\"}]}}",
       last_id());
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, 0);
  HAS(r.text, "booked");
}

static void test_input_required_state_only_and_limit(void **state) {
  rec r = {0};
  int i;
  (void)state;

  go_stateless();
  assert_int_equal(acp_mcp_client_read_resource(W.c, "x://a", NULL, W.now,
                                                on_result, &r, NULL),
                   0);
  take();
  /* requestState alone: retried at once, without inputResponses. */
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"resultType\":"
       "\"input_required\",\"requestState\":\"again\"}}",
       last_id());
  take();
  HAS(W.out, "\"method\":\"resources/read\"");
  HAS(W.out, "\"uri\":\"x://a\"");
  HAS(W.out, "\"requestState\":\"again\"");
  LACKS(W.out, "inputResponses");
  /* The server keeps asking: the client gives up after the limit. */
  for (i = 1; i < ACP_MCP_CLIENT_MAX_ROUNDS; i++) {
    feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"resultType\":"
         "\"input_required\",\"requestState\":\"again\"}}",
         last_id());
    assert_int_equal(r.calls, 0);
    take();
    /* the retry's requestState replaces the previous one, not added */
    assert_non_null(strstr(W.out, "requestState"));
    assert_null(strstr(strstr(W.out, "requestState") + 1, "requestState"));
  }
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"resultType\":"
       "\"input_required\",\"requestState\":\"again\"}}",
       last_id());
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, ACP_ERR_PROTOCOL);
  assert_false(r.had_msg);
  assert_int_equal(take(), 0);
}

static void test_input_required_failures(void **state) {
  rec r = {0};
  (void)state;

  go_stateless();
  /* roots/list has no callback here: ACP_ERR_UNSUPPORTED, no retry. */
  assert_int_equal(acp_mcp_client_get_prompt(W.c, "p", NULL, 0, NULL, W.now,
                                             on_result, &r, NULL),
                   0);
  take();
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"resultType\":"
       "\"input_required\",\"inputRequests\":{\"r\":{\"method\":"
       "\"roots/list\"}}}}",
       last_id());
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, ACP_ERR_UNSUPPORTED);
  assert_int_equal(take(), 0);

  /* An error answer ends the request with ACP_ERR_CANCELLED. */
  memset(&r, 0, sizeof(r));
  W.elicit_error = true;
  assert_int_equal(acp_mcp_client_call_tool(W.c, "t", NULL, 0, NULL, W.now,
                                            on_result, &r, NULL),
                   0);
  take();
  feed(INPUT_REQUIRED, last_id());
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, ACP_ERR_CANCELLED);
  /* The user is asked nothing more once one answer failed; no retry. */
  assert_int_equal(W.samplings, 0);
  assert_null(W.held);
  assert_int_equal(take(), 0);
  assert_int_equal(r.calls, 1);

  /* Neither inputRequests nor requestState: a protocol error. */
  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_call_tool(W.c, "t", NULL, 0, NULL, W.now,
                                            on_result, &r, NULL),
                   0);
  take();
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"resultType\":"
       "\"input_required\"}}",
       last_id());
  assert_int_equal(r.status, ACP_ERR_PROTOCOL);
}

/* MARK: - List cache */

static void list_answer(long ttl, const char *scope, const char *tool) {
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"resultType\":"
       "\"complete\",\"tools\":[{\"name\":\"%s\",\"inputSchema\":{}}],"
       "\"ttlMs\":%ld,\"cacheScope\":\"%s\"}}",
       last_id(), tool, ttl, scope);
}

static void test_list_cache(void **state) {
  rec r = {0};
  int64_t id = 0;
  (void)state;

  go_stateless();
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, NULL, NULL,
                                       W.now, on_result, &r, &id),
                   0);
  assert_true(id > 0);
  take();
  HAS(W.out, "tools/list");
  list_answer(1000, "public", "one");
  assert_int_equal(r.calls, 1);

  /* Fresh: answered from the cache, nothing sent. */
  W.now += 999;
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, NULL, NULL,
                                       W.now, on_result, &r, &id),
                   0);
  assert_int_equal(id, -1);
  assert_int_equal(r.calls, 2);
  assert_int_equal(r.status, 0);
  HAS(r.text, "\"one\"");
  assert_int_equal(take(), 0);

  /* Another cursor is another entry. */
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, "c2", NULL,
                                       W.now, on_result, &r, NULL),
                   0);
  take();
  HAS(W.out, "\"cursor\":\"c2\"");
  list_answer(0, "public", "x");

  /* Stale at ttlMs: asked again. */
  W.now += 1;
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, NULL, NULL,
                                       W.now, on_result, &r, NULL),
                   0);
  take();
  HAS(W.out, "tools/list");
  list_answer(5000, "private", "two");
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, NULL, NULL,
                                       W.now, on_result, &r, NULL),
                   0);
  assert_int_equal(take(), 0);
  HAS(r.text, "\"two\"");

  /* list_changed drops it. */
  feed("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}");
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, NULL, NULL,
                                       W.now, on_result, &r, NULL),
                   0);
  take();
  HAS(W.out, "tools/list");
  /* A cacheScope we do not know: not cached. */
  list_answer(5000, "shared", "three");
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, NULL, NULL,
                                       W.now, on_result, &r, NULL),
                   0);
  take();
  HAS(W.out, "tools/list");
  list_answer(5000, "public", "four");
  acp_mcp_client_cache_clear(W.c);
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, NULL, NULL,
                                       W.now, on_result, &r, NULL),
                   0);
  take();
  HAS(W.out, "tools/list");
}

/* The cache is bounded whatever TTLs and cursors the server hands out:
 * 257 pages with a TTL of a year, then the first page is asked again (it
 * was the oldest and went), the newest is still answered from the cache. */
static void test_list_cache_bounded(void **state) {
  rec r = {0};
  char cur[16];
  int i;
  (void)state;

  go_stateless();
  for (i = 0; i <= 256; i++) {
    snprintf(cur, sizeof(cur), "c%d", i);
    assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, cur, NULL,
                                         W.now, on_result, &r, NULL),
                     0);
    assert_true(take() > 0);
    list_answer(31536000000L, "public", "t");
  }
  assert_int_equal(r.calls, 257);
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, "c256", NULL,
                                       W.now, on_result, &r, NULL),
                   0);
  assert_int_equal(take(), 0);
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, "c0", NULL,
                                       W.now, on_result, &r, NULL),
                   0);
  assert_true(take() > 0);
  HAS(W.out, "\"cursor\":\"c0\"");
  list_answer(1000, "public", "t");
}

/* A page of tools/list answered by the server with `next` as nextCursor
 * (NULL: the last page), kept in the cache for a year. */
static void cached_page(const char *cursor, const char *next) {
  rec r = {0};
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, cursor, NULL,
                                       W.now, on_result, &r, NULL),
                   0);
  assert_true(take() > 0);
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"resultType\":"
       "\"complete\",\"tools\":[],%s%s%s\"ttlMs\":31536000000,"
       "\"cacheScope\":\"public\"}}",
       last_id(), next ? "\"nextCursor\":\"" : "", next ? next : "",
       next ? "\"," : "");
  assert_int_equal(r.status, 0);
}

typedef struct walk {
  int pages;
  int lasts;
  int status;
  int stop_at; /* the callback fails on this page (0: never) */
} walk;

static int on_walk(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                   bool last, void *ud) {
  walk *w = ud;
  (void)c;
  (void)msg;
  w->pages++;
  w->lasts += last;
  w->status = status;
  return w->pages == w->stop_at ? -1 : 0;
}

/* list_all over pages the cache holds: each comes back while the next is
 * being asked for. The walk goes page by page without sending anything
 * and ends once; a cycle of cached cursors ends at the page bound as a
 * protocol error, in a loop (it used to recurse a level per page, and a
 * walk ending inside a cached page freed the pager its caller went on
 * using: found by fuzz_mcp_client). */
static void test_list_all_from_the_cache(void **state) {
  walk w = {0};
  (void)state;

  go_stateless();
  cached_page(NULL, "c2");
  cached_page("c2", "c3");
  cached_page("c3", NULL);
  assert_int_equal(acp_mcp_client_list_all(W.c, ACP_MCP_LIST_TOOLS, NULL, W.now,
                                           on_walk, &w),
                   0);
  assert_int_equal(take(), 0);
  assert_int_equal(w.pages, 3);
  assert_int_equal(w.lasts, 1);
  assert_int_equal(w.status, 0);

  /* c3 -> c2 -> c3 ...: 10,000 pages, then the end. */
  acp_mcp_client_cache_clear(W.c);
  cached_page(NULL, "c2");
  cached_page("c2", "c3");
  cached_page("c3", "c2");
  memset(&w, 0, sizeof(w));
  assert_int_equal(acp_mcp_client_list_all(W.c, ACP_MCP_LIST_TOOLS, NULL, W.now,
                                           on_walk, &w),
                   0);
  assert_int_equal(take(), 0);
  assert_int_equal(w.pages, 10000);
  assert_int_equal(w.lasts, 1);
  assert_int_equal(w.status, ACP_ERR_PROTOCOL);

  /* The callback fails on a cached page: the walk ends there, once. */
  memset(&w, 0, sizeof(w));
  w.stop_at = 2;
  assert_int_not_equal(acp_mcp_client_list_all(W.c, ACP_MCP_LIST_TOOLS, NULL,
                                               W.now, on_walk, &w),
                       0);
  assert_int_equal(take(), 0);
  assert_int_equal(w.pages, 2);

  /* Cached pages, then one the cache lacks: asked of the server. */
  acp_mcp_client_cache_clear(W.c);
  cached_page(NULL, "c2");
  cached_page("c2", "c3");
  memset(&w, 0, sizeof(w));
  assert_int_equal(acp_mcp_client_list_all(W.c, ACP_MCP_LIST_TOOLS, NULL, W.now,
                                           on_walk, &w),
                   0);
  assert_true(take() > 0);
  HAS(W.out, "\"cursor\":\"c3\"");
  assert_int_equal(w.pages, 2);
  assert_int_equal(w.lasts, 0);
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"resultType\":"
       "\"complete\",\"tools\":[]}}",
       last_id());
  assert_int_equal(w.pages, 3);
  assert_int_equal(w.lasts, 1);
  assert_int_equal(w.status, 0);
}

/* MARK: - x-mcp-header */

static int collect_header(const char *name, size_t nl, const char *value,
                          size_t vl, void *ud) {
  char *acc = ud;
  size_t len = strlen(acc);
  snprintf(acc + len, 512 - len, "%.*s=%.*s;", (int)nl, name, (int)vl, value);
  return 0;
}

static void test_x_mcp_header(void **state) {
  rec r = {0};
  char acc[512] = "";
  acp_json_doc *doc = NULL;
  const char *params =
      "{\"name\":\"good\",\"arguments\":{\"region\":\"eu west\",\"count\":7,"
      "\"flag\":false,\"obj\":{\"inner\":\"x\"},\"other\":1,\"big\":"
      "9007199254740992}}";
  (void)state;

  go_stateless();
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, NULL, NULL,
                                       W.now, on_result, &r, NULL),
                   0);
  take();
  feed(
      "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"tools\":["
      "{\"name\":\"good\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
      "\"region\":{\"type\":\"string\",\"x-mcp-header\":\"Region\"},"
      "\"count\":{\"type\":\"integer\",\"x-mcp-header\":\"Count\"},"
      "\"flag\":{\"type\":\"boolean\",\"x-mcp-header\":\"Flag\"},"
      "\"big\":{\"type\":\"integer\",\"x-mcp-header\":\"Big\"},"
      "\"obj\":{\"type\":\"object\",\"properties\":{\"inner\":{\"type\":"
      "\"string\",\"x-mcp-header\":\"Inner\"}}},\"other\":{\"type\":"
      "\"integer\"}"
      "}}},"
      "{\"name\":\"plain\",\"inputSchema\":{\"type\":\"object\"}},"
      "{\"name\":\"bad_number\",\"inputSchema\":{\"properties\":{\"a\":{"
      "\"type\":\"number\",\"x-mcp-header\":\"A\"}}}},"
      "{\"name\":\"bad_dup\",\"inputSchema\":{\"properties\":{\"a\":{"
      "\"type\":\"string\",\"x-mcp-header\":\"A\"},\"b\":{\"type\":"
      "\"string\",\"x-mcp-header\":\"a\"}}}},"
      "{\"name\":\"bad_items\",\"inputSchema\":{\"properties\":{\"a\":{"
      "\"type\":\"array\",\"items\":{\"type\":\"string\",\"x-mcp-header\":"
      "\"A\"}}}}},"
      "{\"name\":\"bad_char\",\"inputSchema\":{\"properties\":{\"a\":{"
      "\"type\":\"string\",\"x-mcp-header\":\"A B\"}}}}"
      "],\"resultType\":\"complete\"}}",
      last_id());
  assert_int_equal(r.status, 0);
  HAS(r.text, "\"name\":\"good\"");
  HAS(r.text, "\"name\":\"plain\"");
  LACKS(r.text, "bad_");
  HAS(r.text, "\"resultType\":\"complete\"");

  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  assert_int_equal(acp_json_doc_parse(doc, params, strlen(params), NULL), 0);
  assert_int_equal(acp_mcp_client_param_headers(
                       W.c, doc, acp_json_doc_root(doc), collect_header, acc),
                   0);
  /* In schema order; 2^53 is outside the safe range: no header. */
  assert_string_equal(acc, "Region=eu west;Count=7;Flag=false;Inner=x;");
  acp_json_doc_free(doc);
}

/* The headers of `tool` called with {"v":"x"}, in acc. */
static void headers_of(const char *tool, char *acc) {
  acp_json_doc *doc = NULL;
  char params[128];
  snprintf(params, sizeof(params),
           "{\"name\":\"%s\",\"arguments\":{\"v\":\"x\"}}", tool);
  acc[0] = '\0';
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  assert_int_equal(acp_json_doc_parse(doc, params, strlen(params), NULL), 0);
  assert_int_equal(acp_mcp_client_param_headers(
                       W.c, doc, acp_json_doc_root(doc), collect_header, acc),
                   0);
  acp_json_doc_free(doc);
}

/* One tools/list (cursor or NULL), answered by the server unless the
 * cache has it, with tools named in `names` (space-separated), each with
 * header H-<name> on "v", `next` as the nextCursor member (or none) and
 * `ttl` as its ttlMs (0: not cached). Returns whether the server was
 * asked. */
static bool hdr_page(const char *cursor, const char *names, const char *next,
                     long ttl) {
  rec r = {0};
  char tools[1024] = "";
  char cache[64] = "";
  char copy[128];
  char *save = NULL;
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, cursor, NULL,
                                       W.now, on_result, &r, NULL),
                   0);
  if (take() == 0) {
    assert_int_equal(r.calls, 1); /* from the cache */
    assert_int_equal(r.status, 0);
    return false;
  }
  snprintf(copy, sizeof(copy), "%s", names);
  for (char *n = strtok_r(copy, " ", &save); n; n = strtok_r(NULL, " ", &save))
    snprintf(tools + strlen(tools), sizeof(tools) - strlen(tools),
             "%s{\"name\":\"%s\",\"inputSchema\":{\"type\":\"object\","
             "\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":"
             "\"H-%s\"}}}}",
             tools[0] ? "," : "", n, n);
  if (ttl > 0)
    snprintf(cache, sizeof(cache), ",\"ttlMs\":%ld,\"cacheScope\":\"private\"",
             ttl);
  feed("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"tools\":[%s]%s%s%s,"
       "\"resultType\":\"complete\"}}",
       last_id(), tools, next ? ",\"nextCursor\":" : "", next ? next : "",
       cache);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, 0);
  return true;
}

/* hdr_page() with the cache cleared first. */
static void hdr_list(const char *cursor, const char *names, const char *next) {
  acp_mcp_client_cache_clear(W.c);
  assert_true(hdr_page(cursor, names, next, 0));
}

/* Whether tool `name` has its header kept. */
static bool hdr_kept(const char *name) {
  char acc[512];
  char want[64];
  headers_of(name, acc);
  snprintf(want, sizeof(want), "H-%s=x;", name);
  if (acc[0] != '\0' && strcmp(acc, want) != 0)
    fail_msg("%s: headers %s", name, acc);
  return acc[0] != '\0';
}

/* What a tool's x-mcp-header says is kept from tools/list to tools/call; a
 * whole list (no cursor asked, none given) replaces what was kept, so a
 * tool the server dropped is forgotten; a page of a longer list only adds
 * to it. */
static void test_x_mcp_header_follows_the_tool_list(void **state) {
  char acc[512];
  (void)state;

  go_stateless();
  hdr_list(NULL, "a b", NULL);
  headers_of("a", acc);
  assert_string_equal(acc, "H-a=x;");
  headers_of("b", acc);
  assert_string_equal(acc, "H-b=x;");
  /* The server's list changed: a went away. */
  hdr_list(NULL, "b", "null");
  headers_of("a", acc);
  assert_string_equal(acc, "");
  headers_of("b", acc);
  assert_string_equal(acc, "H-b=x;");
  /* Pages: the first (more to come) adds and forgets nothing yet... */
  hdr_list(NULL, "c", "\"p2\"");
  assert_true(hdr_kept("b"));
  assert_true(hdr_kept("c"));
  /* ...the last page of the walk forgets what the walk did not name. */
  hdr_list("p2", "d", NULL);
  assert_false(hdr_kept("b"));
  assert_true(hdr_kept("c"));
  assert_true(hdr_kept("d"));
}

/* Walks of a paginated list: only a walk that goes from the first page to
 * the last along the cursors it was given forgets anything, and a page the
 * cache answers counts in it. */
static void test_x_mcp_header_walks(void **state) {
  (void)state;

  go_stateless();
  hdr_list(NULL, "a b", NULL);
  /* A page asked with a cursor no walk gave: adds, ends nothing. */
  hdr_list(NULL, "c", "\"p2\"");
  hdr_list("zz", "d", NULL);
  assert_true(hdr_kept("a"));
  assert_true(hdr_kept("b"));
  assert_true(hdr_kept("d"));
  /* The walk goes on from where it was: what it and the other page
   * named is kept, a and b go. */
  hdr_list("p2", "e", NULL);
  assert_false(hdr_kept("a"));
  assert_false(hdr_kept("b"));
  assert_true(hdr_kept("c"));
  assert_true(hdr_kept("d"));
  assert_true(hdr_kept("e"));
  /* A first page whose next cursor is not one: the walk stops there, and
   * its "next page" forgets nothing. */
  hdr_list(NULL, "f", "7");
  hdr_list("7", "g", NULL);
  assert_true(hdr_kept("c"));
  assert_true(hdr_kept("f"));
  assert_true(hdr_kept("g"));

  /* A walk whose second page the cache holds (kept for a year). */
  acp_mcp_client_cache_clear(W.c);
  assert_true(hdr_page(NULL, "h", "\"q2\"", 0));
  assert_true(hdr_page("q2", "i", NULL, 31536000000L));
  assert_false(hdr_kept("c"));
  assert_false(hdr_kept("g"));
  assert_true(hdr_kept("h"));
  assert_true(hdr_kept("i"));
  /* The server's first page changed; its second comes from the cache, and
   * ends the walk: h goes, i stays. */
  assert_true(hdr_page(NULL, "j", "\"q2\"", 0));
  assert_false(hdr_page("q2", "(cached)", NULL, 0));
  assert_false(hdr_kept("h"));
  assert_true(hdr_kept("i"));
  assert_true(hdr_kept("j"));
}

/* Thousands of annotated tools: each is found by its name, and a later
 * whole list keeps just those it names. */
static void test_x_mcp_header_many_tools(void **state) {
  enum { N = 3000, TOOL = 160 };
  char *line = malloc((size_t)N * TOOL + 256);
  rec r = {0};
  int round;
  (void)state;

  assert_non_null(line);
  go_stateless();
  for (round = 0; round < 2; round++) {
    int first = round * N / 2; /* t0..t2999, then t1500..t4499 */
    size_t len;
    int i;

    assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, NULL, NULL,
                                         W.now, on_result, &r, NULL),
                     0);
    assert_true(take() > 0);
    len = (size_t)snprintf(line, 256,
                           "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{"
                           "\"resultType\":\"complete\",\"tools\":[",
                           last_id());
    for (i = first; i < first + N; i++)
      len += (size_t)snprintf(
          line + len, TOOL,
          "%s{\"name\":\"t%d\",\"inputSchema\":{\"type\":\"object\","
          "\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":"
          "\"H-t%d\"}}}}",
          i > first ? "," : "", i, i);
    len += (size_t)snprintf(line + len, 8, "]}}\n");
    assert_int_equal(acp_mcp_client_recv(W.c, line, len, W.now),
                     (acp_ssize)len);
    assert_int_equal(r.status, 0);
  }
  assert_int_equal(r.calls, 2);
  assert_false(hdr_kept("t0"));
  assert_false(hdr_kept("t1499"));
  assert_true(hdr_kept("t1500"));
  assert_true(hdr_kept("t2999"));
  assert_true(hdr_kept("t3000"));
  assert_true(hdr_kept("t4499"));
  assert_false(hdr_kept("t4500"));
  free(line);
}

/* MARK: - Allocation failures */

static int scenario(const acp_mem *mem) {
  rec r = {0};
  const char *ans = "{\"model\":\"m\",\"role\":\"assistant\",\"content\":{}}";
  const char *d;
  acp_ssize n;
  int rv;
  char line[2048];

  memset(&W, 0, sizeof(W));
  W.now = 1;
  {
    acp_mcp_client_callbacks *cbs = NULL;
    rv = acp_mcp_client_callbacks_new(&cbs);
    if (rv != 0)
      return rv;
    acp_mcp_client_callbacks_set_on_elicitation(cbs, on_elicit);
    acp_mcp_client_callbacks_set_on_sampling(cbs, on_sampling);
    rv = acp_mcp_client_new(&W.c, cbs, "t", "1", NULL, mem);
    acp_mcp_client_callbacks_free(cbs);
    if (rv != 0)
      return rv;
  }
#define STEP(x)                                                                \
  do {                                                                         \
    rv = (x);                                                                  \
    if (rv < 0)                                                                \
      goto done;                                                               \
  } while (0)
#define DRAIN()                                                                \
  do {                                                                         \
    W.out[0] = '\0';                                                           \
    while ((n = acp_mcp_client_send(W.c, &d)) > 0)                             \
      snprintf(W.out, sizeof(W.out), "%.*s", (int)n, d);                       \
    if (n < 0) {                                                               \
      rv = (int)n;                                                             \
      goto done;                                                               \
    }                                                                          \
  } while (0)
#define FEED(...)                                                              \
  do {                                                                         \
    int len_ = snprintf(line, sizeof(line), __VA_ARGS__);                      \
    STEP((int)acp_mcp_client_recv(W.c, line, (size_t)len_, W.now));            \
  } while (0)
  STEP(acp_mcp_client_set_protocol(W.c, NULL));
  STEP(acp_mcp_client_initialize(W.c, W.now, on_result, &r));
  DRAIN();
  FEED("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"supportedVersions\":"
       "[\"2026-07-28\"],\"capabilities\":{},\"_meta\":{\"io."
       "modelcontextprotocol/serverInfo\":{\"name\":\"s\",\"version\":\"1\""
       "}}}}\n",
       last_id());
  if (r.status != 0) {
    rv = r.status;
    goto done;
  }
  STEP(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, NULL, NULL, W.now,
                           on_result, &r, NULL));
  DRAIN();
  FEED("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"tools\":[],\"ttlMs\":9,"
       "\"cacheScope\":\"private\"}}\n",
       last_id());
  STEP(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, NULL, NULL, W.now,
                           on_result, &r, NULL));
  STEP(acp_mcp_client_call_tool(W.c, "t", "{}", 2, NULL, W.now, on_result, &r,
                                NULL));
  DRAIN();
  FEED(INPUT_REQUIRED "\n", last_id());
  if (W.held == NULL) {
    rv = ACP_ERR_NOMEM;
    goto done;
  }
  STEP(acp_mcp_client_respond(W.c, W.held, ans, strlen(ans)));
  DRAIN();
  FEED("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"content\":[]}}\n",
       last_id());
  rv = r.status == 0 && r.calls == 4 ? 1 : (r.status ? r.status : -1);
done:
  acp_mcp_client_free(W.c);
  W.c = NULL;
  return rv;
}

static void test_allocation_failure_loop(void **state) {
  failmem fm;
  acp_mem mem;
  long total;
  long i;
  (void)state;

  memset(&fm, 0, sizeof(fm));
  mem = failmem_start(&fm, -1);
  assert_int_equal(scenario(&mem), 1);
  assert_int_equal(fm.live, 0);
  total = fm.count;
  assert_true(total > 20);
  for (i = 0; i < total; i++) {
    mem = failmem_start(&fm, i);
    (void)scenario(&mem);
    assert_int_equal(fm.live, 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_discover_then_stateless_requests,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_caller_meta_and_progress_kept, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          test_fallback_to_initialize_on_method_not_found, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fallback_when_2026_not_listed, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_forced_versions, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_discover_retried_once_on_unsupported_version, setup, teardown),
      cmocka_unit_test_setup_teardown(test_input_required_retry, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_input_required_state_only_and_limit,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_input_required_failures, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_list_cache, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list_cache_bounded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list_all_from_the_cache, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_x_mcp_header, setup, teardown),
      cmocka_unit_test_setup_teardown(test_x_mcp_header_walks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_x_mcp_header_many_tools, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_x_mcp_header_follows_the_tool_list,
                                      setup, teardown),
      cmocka_unit_test(test_allocation_failure_loop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
