/*
 * MCP server: wire behaviour of acp_mcp_server / acp_mcp_conn, driven with
 * raw JSON lines (no client library involved).
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
#include "util.h"

static failmem fm;

/* MARK: - Harness */

static char outbuf[1 << 16];

/* Feed one line (newline appended) and return everything sent since. */
static const char *xchg_at(acp_mcp_conn *c, const char *line, uint64_t now) {
  const char *data;
  acp_ssize n;
  size_t len = strlen(line);
  char *tmp = malloc(len + 1);

  assert_non_null(tmp);
  memcpy(tmp, line, len);
  tmp[len] = '\n';
  assert_int_equal(acp_mcp_conn_recv(c, tmp, len + 1, now), (acp_ssize)len + 1);
  free(tmp);
  n = acp_mcp_conn_send(c, &data);
  assert_true(n >= 0 && (size_t)n < sizeof(outbuf));
  memcpy(outbuf, data, (size_t)n);
  outbuf[n] = '\0';
  return outbuf;
}

static const char *xchg(acp_mcp_conn *c, const char *line) {
  return xchg_at(c, line, 0);
}

static const char *drain(acp_mcp_conn *c) {
  const char *data;
  acp_ssize n = acp_mcp_conn_send(c, &data);

  assert_true(n >= 0 && (size_t)n < sizeof(outbuf));
  memcpy(outbuf, data, (size_t)n);
  outbuf[n] = '\0';
  return outbuf;
}

#define HAS(s, needle)                                                         \
  do {                                                                         \
    if (strstr((s), (needle)) == NULL)                                         \
      fail_msg("expected %s in: %s", needle, s);                               \
  } while (0)
#define HASNT(s, needle)                                                       \
  do {                                                                         \
    if (strstr((s), (needle)) != NULL)                                         \
      fail_msg("unexpected %s in: %s", needle, s);                             \
  } while (0)

/* 2026-07-28 request _meta, and the serverInfo of its results. */
#define META26                                                                 \
  "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","     \
  "\"io.modelcontextprotocol/clientCapabilities\":{}}"
#define SERVER_INFO26                                                          \
  "\"_meta\":{\"io.modelcontextprotocol/serverInfo\":{\"name\":\"test-"        \
  "server\",\"version\":\"1.2.3\"}}"
#define META26_ELICIT                                                          \
  "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","     \
  "\"io.modelcontextprotocol/clientCapabilities\":{\"elicitation\":{}}}"

/* Shared state the handlers below record into. */
typedef struct fx {
  acp_mcp_call *pending; /* the slow tool's call */
  int cancels;
  int answer_on_cancel; /* on_cancel answers the call */
  int sampling_status;
  char sampled[256];
  int lister_calls;
} fx;

static fx g;

static int tool_fail(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  (void)call;
  (void)a;
  (void)ud;
  return ACP_ERR_UNSUPPORTED;
}

static int tool_structured(acp_mcp_call *call, const acp_json_val *a,
                           void *ud) {
  static const char content[] =
      "[{\"type\":\"text\",\"text\":\"{\\\"t\\\":22}\"}]";
  (void)a;
  (void)ud;
  return acp_mcp_call_respond_tool(call, content, strlen(content), "{\"t\":22}",
                                   8, false);
}

static int on_cancel(acp_mcp_call *call, void *ud) {
  (void)ud;
  g.cancels++;
  /* A handler may answer from its cancel callback; the answer is dropped
   * (and must not touch a conn being freed). */
  if (g.answer_on_cancel)
    return acp_mcp_call_respond_text(call, "cancelled", 9, false);
  return 0;
}

static int tool_slow(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  (void)a;
  (void)ud;
  g.pending = call;
  acp_mcp_call_set_on_cancel(call, on_cancel, NULL);
  return 0;
}

static int tool_progress(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  (void)a;
  (void)ud;
  int rv = acp_mcp_call_progress(call, 1, 3, "one");
  if (rv == 0)
    rv = acp_mcp_call_progress(call, 2, -1, NULL);
  if (rv != 0)
    return rv; /* allocation failure: becomes an isError result */
  if (acp_mcp_call_has_progress_token(call) &&
      acp_mcp_call_progress(call, 2, 3, NULL) != ACP_ERR_INVALID_ARGUMENT)
    return acp_mcp_call_respond_text(call, "not monotonic", 13, true);
  return acp_mcp_call_respond_text(call, "done", 4, false);
}

static int sampled(acp_mcp_call *call, int status, const acp_rpc_msg *msg,
                   void *ud) {
  (void)ud;
  g.sampling_status = status;
  if (status == 0) {
    size_t n;
    const char *raw = acp_json_raw(msg->result, &n);
    snprintf(g.sampled, sizeof(g.sampled), "%.*s", (int)n, raw);
    return acp_mcp_call_respond_text(call, raw, n, false);
  }
  if (!acp_mcp_call_is_cancelled(call))
    return acp_mcp_call_respond_text(call, "failed", 6, true);
  return acp_mcp_call_respond_text(call, "late", 4, false); /* dropped */
}

static int tool_sample(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  static const char params[] =
      "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"text\","
      "\"text\":\"hi\"}}],\"maxTokens\":10}";
  int rv;
  (void)a;
  (void)ud;
  rv = acp_mcp_call_create_message(call, params, strlen(params), 0, sampled,
                                   NULL);
  if (rv == ACP_ERR_UNSUPPORTED)
    return acp_mcp_call_respond_text(call, "no sampling", 11, true);
  return rv;
}

/* Logs at info and warning, then answers which era served the call and the
 * client capabilities that applied to it. */
static int tool_log(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  char text[256];
  size_t n = 0;
  const char *caps = acp_mcp_call_client_capabilities(call, &n);
  int rv;
  (void)a;
  (void)ud;
  rv = acp_mcp_call_log(call, ACP_MCP_LOG_INFO, "t", "\"i\"", 3);
  if (rv == 0)
    rv = acp_mcp_call_log(call, ACP_MCP_LOG_WARNING, "t", "\"w\"", 3);
  if (rv != 0)
    return rv;
  snprintf(text, sizeof(text), "%s %.*s",
           acp_mcp_call_is_stateless(call) ? "stateless" : "stateful", (int)n,
           caps ? caps : "");
  return acp_mcp_call_respond_text(call, text, strlen(text), false);
}

/* Multi round-trip: "ask" wants a name; "two" wants step1, then step2. */
static int answer_with(acp_mcp_call *call, int status, const acp_rpc_msg *msg,
                       const char *prefix, const char *prop) {
  char text[256];
  const char *p = "";
  size_t n = 0;
  const acp_json_val *v =
      acp_json_obj_getz(acp_json_obj_getz(msg->result, "content"), prop);
  if (status != 0)
    return acp_mcp_call_respond_text(call, "failed", 6, true);
  if (acp_json_type_of(v) == ACP_JSON_STRING)
    acp_json_doc_str(msg->doc, v, &p, &n);
  snprintf(text, sizeof(text), "%s%.*s", prefix, (int)n, p);
  return acp_mcp_call_respond_text(call, text, strlen(text), false);
}

static int on_name(acp_mcp_call *call, int status, const acp_rpc_msg *msg,
                   void *ud) {
  (void)ud;
  return answer_with(call, status, msg, "Hello ", "name");
}

#define ASK_NAME                                                               \
  "{\"message\":\"Name?\",\"requestedSchema\":{\"type\":\"object\","           \
  "\"properties\":{\"name\":{\"type\":\"string\"}}}}"

static int tool_ask(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  int rv;
  (void)a;
  (void)ud;
  rv = acp_mcp_call_request_named(call, "name", "elicitation/create", ASK_NAME,
                                  strlen(ASK_NAME), 0, on_name, NULL);
  if (rv == ACP_ERR_UNSUPPORTED)
    return acp_mcp_call_respond_text(call, "no elicitation", 14, true);
  return rv;
}

static int on_step2(acp_mcp_call *call, int status, const acp_rpc_msg *msg,
                    void *ud) {
  (void)ud;
  return answer_with(call, status, msg, "color ", "color");
}

static int on_step1(acp_mcp_call *call, int status, const acp_rpc_msg *msg,
                    void *ud) {
  (void)ud;
  (void)msg;
  if (status != 0)
    return acp_mcp_call_respond_text(call, "failed", 6, true);
  /* Unnamed: keyed "1" (step1 was named, so the count starts here). */
  return acp_mcp_call_elicit(call, ASK_NAME, strlen(ASK_NAME), 0, on_step2,
                             NULL);
}

static int tool_two(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  (void)a;
  (void)ud;
  return acp_mcp_call_request_named(call, "step1", "elicitation/create",
                                    ASK_NAME, strlen(ASK_NAME), 0, on_step1,
                                    NULL);
}

static int read_static(acp_mcp_call *call, const char *uri, size_t n,
                       void *ud) {
  (void)n;
  (void)ud;
  return acp_mcp_call_respond_resource_text(call, uri, "text/plain", "alpha",
                                            5);
}

static int read_item(acp_mcp_call *call, const char *uri, size_t n, void *ud) {
  const char *id;
  size_t idn;
  char text[64];
  (void)n;
  (void)ud;
  assert_int_equal(acp_mcp_call_uri_var(call, "id", &id, &idn), 0);
  assert_int_equal(acp_mcp_call_uri_var(call, "nope", &id, &idn),
                   ACP_ERR_NOT_FOUND);
  acp_mcp_call_uri_var(call, "id", &id, &idn);
  snprintf(text, sizeof(text), "item %.*s", (int)idn, id);
  return acp_mcp_call_respond_resource_text(call, uri, NULL, text,
                                            strlen(text));
}

static int list_items(acp_mcp_server *s, acp_mcp_resource_list *l, void *ud) {
  (void)s;
  (void)ud;
  g.lister_calls++;
  acp_mcp_resource_list_add(l, "mem://items/1", "item1", "text/plain", NULL);
  return acp_mcp_resource_list_add(l, "mem://items/2", "item2", NULL, "two");
}

static int get_greet(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  const char *p;
  size_t n;
  char res[256];
  (void)ud;
  acp_json_doc_str(acp_mcp_call_doc(call), acp_json_obj_getz(args, "name"), &p,
                   &n);
  snprintf(res, sizeof(res),
           "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"text\","
           "\"text\":\"Hello %.*s\"}}]}",
           (int)n, p);
  return acp_mcp_call_respond_raw(call, res, strlen(res));
}

static int complete(acp_mcp_call *call, const acp_json_val *ref,
                    const acp_json_val *arg, const acp_json_val *ctx,
                    void *ud) {
  static const char *const vals[] = {"python", "pytorch"};
  (void)ref;
  (void)arg;
  (void)ctx;
  (void)ud;
  return acp_mcp_call_respond_completion(call, vals, 2, 10, true);
}

/* A server with everything registered. */
static int make_server(acp_mcp_server **out, const acp_mem *mem) {
  acp_mcp_server *s = NULL;
  acp_mcp_resource_def r;
  acp_mcp_template_def t;
  acp_mcp_prompt_def p;
  int rv;

  rv = acp_mcp_server_new(&s, "test-server", "1.2.3", NULL, mem);
  if (rv != 0)
    return rv;
  rv = mcp_fixture_add_echo(s);
  if (rv != 0)
    goto fail;
  {
    acp_mcp_tool_def d;
    memset(&d, 0, sizeof(d));
    d.version = ACP_MCP_DEF_VERSION;
    d.name = "structured";
    d.title = "Structured";
    d.output_schema = "{\"type\":\"object\"}";
    d.annotations = "{\"readOnlyHint\":true}";
    d.icons = "[{\"src\":\"https://example.com/i.png\"}]";
    d.handler = tool_structured;
    rv = acp_mcp_server_add_tool(s, &d);
    if (rv != 0)
      goto fail;
    d.title = NULL;
    d.output_schema = NULL;
    d.annotations = NULL;
    d.icons = NULL;
    d.name = "fail";
    d.handler = tool_fail;
    if ((rv = acp_mcp_server_add_tool(s, &d)) != 0)
      goto fail;
    d.name = "slow";
    d.handler = tool_slow;
    if ((rv = acp_mcp_server_add_tool(s, &d)) != 0)
      goto fail;
    d.name = "progress";
    d.handler = tool_progress;
    if ((rv = acp_mcp_server_add_tool(s, &d)) != 0)
      goto fail;
    d.name = "sample";
    d.handler = tool_sample;
    if ((rv = acp_mcp_server_add_tool(s, &d)) != 0)
      goto fail;
    d.name = "log";
    d.handler = tool_log;
    if ((rv = acp_mcp_server_add_tool(s, &d)) != 0)
      goto fail;
    d.name = "ask";
    d.handler = tool_ask;
    if ((rv = acp_mcp_server_add_tool(s, &d)) != 0)
      goto fail;
    d.name = "two";
    d.handler = tool_two;
    if ((rv = acp_mcp_server_add_tool(s, &d)) != 0)
      goto fail;
  }
  if ((rv = acp_mcp_server_set_state_key(s, "0123456789abcdef0123456789abcdef",
                                         32)) != 0)
    goto fail;
  memset(&r, 0, sizeof(r));
  r.version = ACP_MCP_DEF_VERSION;
  r.uri = "mem://a";
  r.name = "a";
  r.mime_type = "text/plain";
  r.size = 5;
  r.handler = read_static;
  if ((rv = acp_mcp_server_add_resource(s, &r)) != 0)
    goto fail;
  memset(&t, 0, sizeof(t));
  t.version = ACP_MCP_DEF_VERSION;
  t.uri_template = "mem://items/{id}";
  t.name = "items";
  t.handler = read_item;
  t.lister = list_items;
  if ((rv = acp_mcp_server_add_template(s, &t)) != 0)
    goto fail;
  memset(&p, 0, sizeof(p));
  p.version = ACP_MCP_DEF_VERSION;
  p.name = "greet";
  p.description = "Say hello";
  p.arguments = "[{\"name\":\"name\",\"required\":true},{\"name\":\"tone\"}]";
  p.handler = get_greet;
  if ((rv = acp_mcp_server_add_prompt(s, &p)) != 0)
    goto fail;
  acp_mcp_server_set_completion(s, complete, NULL);
  acp_mcp_server_set_logging(s, 1);
  if ((rv = acp_mcp_server_set_instructions(s, "Be nice")) != 0)
    goto fail;
  *out = s;
  return 0;
fail:
  acp_mcp_server_free(s);
  return rv;
}

#define INIT_FMT                                                               \
  "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"       \
  "\"protocolVersion\":\"%s\",\"capabilities\":%s,\"clientInfo\":{\"name\":"   \
  "\"t\",\"version\":\"1\"}}}"

static void do_init(acp_mcp_conn *c, const char *version, const char *caps) {
  char line[512];
  const char *out;

  snprintf(line, sizeof(line), INIT_FMT, version, caps);
  out = xchg(c, line);
  HAS(out, "\"protocolVersion\"");
  out =
      xchg(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
  assert_string_equal(out, "");
  assert_true(acp_mcp_conn_is_initialized(c));
}

typedef struct pair {
  acp_mcp_server *s;
  acp_mcp_conn *c;
} pair;

static int setup(void **state) {
  pair *p = calloc(1, sizeof(*p));
  memset(&g, 0, sizeof(g));
  assert_int_equal(make_server(&p->s, NULL), 0);
  assert_int_equal(acp_mcp_conn_new(&p->c, p->s, NULL), 0);
  *state = p;
  return 0;
}

static int teardown(void **state) {
  pair *p = *state;
  acp_mcp_conn_free(p->c);
  acp_mcp_server_free(p->s);
  free(p);
  return 0;
}

/* MARK: - Lifecycle */

static void test_initialize_negotiation_matrix(void **state) {
  static const struct {
    const char *asked;
    const char *got;
  } m[] = {{"2024-11-05", "2024-11-05"},
           {"2025-03-26", "2025-03-26"},
           {"2025-06-18", "2025-06-18"},
           {"2025-11-25", "2025-11-25"},
           {"2099-01-01", "2025-11-25"},
           {"1.0", "2025-11-25"},
           {"", "2025-11-25"}};
  pair *p = *state;
  size_t i;

  for (i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
    acp_mcp_conn *c;
    char line[512];
    char want[64];
    const char *out;

    assert_int_equal(acp_mcp_conn_new(&c, p->s, NULL), 0);
    snprintf(line, sizeof(line), INIT_FMT, m[i].asked, "{}");
    out = xchg(c, line);
    snprintf(want, sizeof(want), "\"protocolVersion\":\"%s\"", m[i].got);
    HAS(out, want);
    assert_string_equal(acp_mcp_version_str(acp_mcp_conn_version(c)), m[i].got);
    acp_mcp_conn_free(c);
  }
  (void)state;
}

static void test_initialize_result_capabilities(void **state) {
  pair *p = *state;
  char line[512];
  const char *out;

  snprintf(line, sizeof(line), INIT_FMT, "2025-11-25", "{\"sampling\":{}}");
  out = xchg(p->c, line);
  HAS(out, "\"tools\":{\"listChanged\":true}");
  HAS(out, "\"resources\":{\"subscribe\":true,\"listChanged\":true}");
  HAS(out, "\"prompts\":{\"listChanged\":true}");
  HAS(out, "\"logging\":{}");
  HAS(out, "\"completions\":{}");
  HAS(out, "\"serverInfo\":{\"name\":\"test-server\",\"version\":\"1.2.3\"}");
  HAS(out, "\"instructions\":\"Be nice\"");
  {
    size_t n;
    const char *caps = acp_mcp_conn_client_capabilities(p->c, &n);
    assert_non_null(caps);
    assert_memory_equal(caps, "{\"sampling\":{}}", n);
  }
}

static void test_empty_server_offers_nothing(void **state) {
  acp_mcp_server *s;
  acp_mcp_conn *c;
  char line[512];
  const char *out;
  (void)state;

  assert_int_equal(acp_mcp_server_new(&s, "e", "0", NULL, NULL), 0);
  assert_int_equal(acp_mcp_conn_new(&c, s, NULL), 0);
  snprintf(line, sizeof(line), INIT_FMT, "2025-06-18", "{}");
  out = xchg(c, line);
  HAS(out, "\"capabilities\":{}");
  out = xchg(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
  HAS(out, "-32601");
  out = xchg(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"logging/setLevel\","
                "\"params\":{\"level\":\"info\"}}");
  HAS(out, "-32601");
  out = xchg(c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"completion/"
                "complete\",\"params\":{}}");
  HAS(out, "-32601");
  acp_mcp_server_declare(s, ACP_MCP_CAP_TOOLS);
  out = xchg(c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\"}");
  HAS(out, "{\"tools\":[]}");
  acp_mcp_conn_free(c);
  acp_mcp_server_free(s);
}

static void test_requests_before_initialize(void **state) {
  pair *p = *state;
  const char *out;

  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
  HAS(out, "\"id\":1");
  HAS(out, "\"code\":-32600");
  HAS(out, "Server not initialized");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"echo\"}}");
  HAS(out, "-32600");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}");
  assert_string_equal(out, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n");
  /* Notifications before initialize are ignored. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                   "initialized\"}");
  assert_string_equal(out, "");
  assert_false(acp_mcp_conn_is_initialized(p->c));
  do_init(p->c, "2025-11-25", "{}");
}

static void test_initialize_bad_params(void **state) {
  pair *p = *state;
  const char *out;

  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
                   "\"params\":{\"protocolVersion\":20241105}}");
  HAS(out, "-32602");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\","
                   "\"params\":[1]}");
  HAS(out, "-32602");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\","
                   "\"params\":{\"protocolVersion\":\"2025-11-25\","
                   "\"capabilities\":7}}");
  HAS(out, "-32602");
  assert_int_equal(acp_mcp_conn_version(p->c), ACP_MCP_VERSION_UNKNOWN);
  do_init(p->c, "2025-11-25", "{}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"initialize\","
                   "\"params\":{\"protocolVersion\":\"2025-11-25\"}}");
  HAS(out, "-32600");
  HAS(out, "Already initialized");
}

static void test_malformed_json_keeps_serving(void **state) {
  pair *p = *state;
  const char *out;

  do_init(p->c, "2025-11-25", "{}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":");
  HAS(out, "-32700");
  out = xchg(p->c, "[]");
  HAS(out, "-32600");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"nope/nope\"}");
  HAS(out, "-32601");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":"
                   "\"hi\"}}}");
  assert_string_equal(out, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{"
                           "\"content\":[{\"type\":\"text\",\"text\":\"Echo: "
                           "hi\"}]}}\n");
}

/* MARK: - Tools */

static void test_tools_list_and_echo(void **state) {
  pair *p = *state;
  const char *out;

  do_init(p->c, "2025-06-18", "{}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
  HAS(out, "{\"name\":\"echo\",\"description\":\"Echoes back the input\","
           "\"inputSchema\":{");
  HAS(out, "\"name\":\"structured\",\"title\":\"Structured\"");
  HAS(out, "\"outputSchema\":{\"type\":\"object\"}");
  HAS(out, "\"annotations\":{\"readOnlyHint\":true}");
  HAS(out, "\"icons\":[{\"src\":");
  HAS(out, "\"name\":\"fail\",\"inputSchema\":{\"type\":\"object\"}");
  HASNT(out, "nextCursor");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"tools/"
                   "call\",\"params\":{\"name\":\"echo\",\"arguments\":{"
                   "\"message\":\"a\\nb\"}}}");
  HAS(out, "\"id\":\"s\"");
  HAS(out, "\"text\":\"Echo: a\\nb\"");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"structured\"}}");
  HAS(out, "\"structuredContent\":{\"t\":22}");
  HASNT(out, "isError");
}

static void test_unknown_tool_is_invalid_params(void **state) {
  pair *p = *state;
  const char *out;

  do_init(p->c, "2025-11-25", "{}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"nope\",\"arguments\":{}}}");
  HAS(out, "\"code\":-32602");
  HAS(out, "Unknown tool: nope");
}

static void test_wrong_param_types(void **state) {
  static const char *const lines[] = {
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
      "\"name\":5}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"echo\",\"arguments\":\"x\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":[]}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/read\","
      "\"params\":{\"uri\":1}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/subscribe\","
      "\"params\":{}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"logging/setLevel\","
      "\"params\":{\"level\":\"loud\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"logging/setLevel\","
      "\"params\":{\"level\":3}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/get\",\"params\":{"
      "\"name\":\"greet\",\"arguments\":{\"name\":3}}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/get\",\"params\":{"
      "\"name\":\"greet\",\"arguments\":[]}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"completion/complete\","
      "\"params\":{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"greet\"},"
      "\"argument\":{\"name\":\"x\"}}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"completion/complete\","
      "\"params\":{\"ref\":{\"type\":\"ref/other\"},\"argument\":{\"name\":"
      "\"x\",\"value\":\"\"}}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{"
      "\"cursor\":5}}",
  };
  pair *p = *state;
  size_t i;

  do_init(p->c, "2025-11-25", "{}");
  for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
    const char *out = xchg(p->c, lines[i]);
    HAS(out, "\"code\":-32602");
  }
  assert_int_equal(acp_rpc_session_incoming(acp_mcp_conn_session(p->c)), 0);
}

static void test_tool_handler_error_becomes_is_error(void **state) {
  pair *p = *state;
  const char *out;

  do_init(p->c, "2025-11-25", "{}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"fail\"}}");
  HAS(out, "\"result\":{\"content\":[{\"type\":\"text\",\"text\":");
  HAS(out, "\"isError\":true");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"echo\",\"arguments\":{}}}");
  HAS(out, "\"isError\":true");
}

/* MARK: - Pagination */

static void test_pagination_across_pages(void **state) {
  pair *p = *state;
  char line[256];
  char cursor[64];
  const char *out;
  const char *c1;
  int pages = 0;
  int names = 0;

  acp_mcp_server_set_page_size(p->s, 2);
  do_init(p->c, "2025-11-25", "{}");
  strcpy(line, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
  for (;;) {
    const char *q;
    out = xchg(p->c, line);
    pages++;
    for (q = out; (q = strstr(q, "\"name\":")) != NULL; q++)
      names++;
    c1 = strstr(out, "\"nextCursor\":\"");
    if (c1 == NULL)
      break;
    c1 += 14;
    snprintf(cursor, sizeof(cursor), "%.*s", (int)(strchr(c1, '"') - c1), c1);
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
             "\"params\":{\"cursor\":\"%s\"}}",
             cursor);
  }
  assert_int_equal(pages, 5); /* 9 tools, 2 per page */
  assert_int_equal(names, 9);
  /* A cursor of another list, garbage, and one past the end. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"prompts/list\","
                   "\"params\":{\"cursor\":\"t2\"}}");
  HAS(out, "-32602");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\","
                   "\"params\":{\"cursor\":\"garbage\"}}");
  HAS(out, "-32602");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\","
                   "\"params\":{\"cursor\":\"t99\"}}");
  HAS(out, "-32602");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\","
                   "\"params\":{\"cursor\":\"t99999999999999999999999\"}}");
  HAS(out, "-32602");
  /* Resources: 1 static + 2 listed by the template. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"resources/"
                   "list\"}");
  HAS(out, "\"uri\":\"mem://a\"");
  HAS(out, "\"uri\":\"mem://items/1\"");
  HASNT(out, "items/2");
  HAS(out, "\"nextCursor\":\"r2\"");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"resources/"
                   "list\",\"params\":{\"cursor\":\"r2\"}}");
  HAS(out, "{\"uri\":\"mem://items/2\",\"name\":\"item2\",\"description\":"
           "\"two\"}");
  HASNT(out, "nextCursor");
}

/* MARK: - Resources, prompts, completion */

static void test_resources(void **state) {
  pair *p = *state;
  const char *out;

  do_init(p->c, "2025-11-25", "{}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/"
                   "read\",\"params\":{\"uri\":\"mem://a\"}}");
  HAS(out, "{\"contents\":[{\"uri\":\"mem://a\",\"mimeType\":\"text/plain\","
           "\"text\":\"alpha\"}]}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/"
                   "read\",\"params\":{\"uri\":\"mem://items/42\"}}");
  HAS(out, "\"text\":\"item 42\"");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/"
                   "read\",\"params\":{\"uri\":\"mem://items/4/2\"}}");
  HAS(out, "\"code\":-32002");
  HAS(out, "\"data\":{\"uri\":\"mem://items/4/2\"}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/"
                   "templates/list\"}");
  HAS(out, "{\"resourceTemplates\":[{\"uriTemplate\":\"mem://items/{id}\","
           "\"name\":\"items\"}]}");
}

static void test_prompts(void **state) {
  pair *p = *state;
  const char *out;

  do_init(p->c, "2025-11-25", "{}");
  out =
      xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/list\"}");
  HAS(out, "\"name\":\"greet\"");
  HAS(out, "\"arguments\":[{\"name\":\"name\",\"required\":true}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"prompts/get\","
                   "\"params\":{\"name\":\"greet\",\"arguments\":{\"name\":"
                   "\"Bob\"}}}");
  HAS(out, "Hello Bob");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"prompts/get\","
                   "\"params\":{\"name\":\"greet\"}}");
  HAS(out, "-32602");
  HAS(out, "Missing required argument: name");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"prompts/get\","
                   "\"params\":{\"name\":\"nope\"}}");
  HAS(out, "-32602");
  HAS(out, "Unknown prompt: nope");
}

static void test_completion(void **state) {
  pair *p = *state;
  const char *out;

  do_init(p->c, "2025-11-25", "{}");
  out = xchg(p->c,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"completion/complete\","
             "\"params\":{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"greet\"},"
             "\"argument\":{\"name\":\"tone\",\"value\":\"py\"}}}");
  HAS(out, "{\"completion\":{\"values\":[\"python\",\"pytorch\"],\"total\":10,"
           "\"hasMore\":true}}");
  out = xchg(p->c,
             "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"completion/complete\","
             "\"params\":{\"ref\":{\"type\":\"ref/resource\",\"uri\":\"mem://"
             "items/{id}\"},\"argument\":{\"name\":\"id\",\"value\":\"\"}}}");
  HAS(out, "\"completion\"");
  out = xchg(p->c,
             "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"completion/complete\","
             "\"params\":{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"nope\"},"
             "\"argument\":{\"name\":\"a\",\"value\":\"b\"}}}");
  HAS(out, "-32602");
}

/* MARK: - Logging, progress, cancellation */

static void test_logging_level_filter(void **state) {
  pair *p = *state;
  const char *out;

  /* Nothing is sent before initialize. */
  assert_int_equal(acp_mcp_conn_log(p->c, ACP_MCP_LOG_ERROR, NULL, NULL, 0), 0);
  assert_string_equal(drain(p->c), "");
  do_init(p->c, "2025-11-25", "{}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"logging/"
                   "setLevel\",\"params\":{\"level\":\"warning\"}}");
  HAS(out, "\"result\":{}");
  assert_int_equal(acp_mcp_conn_log_level(p->c), ACP_MCP_LOG_WARNING);
  assert_int_equal(
      acp_mcp_server_log(p->s, ACP_MCP_LOG_INFO, "db", "\"quiet\"", 7), 0);
  assert_string_equal(drain(p->c), "");
  assert_int_equal(
      acp_mcp_server_log(p->s, ACP_MCP_LOG_ERROR, "db", "{\"x\":1}", 7), 0);
  out = drain(p->c);
  assert_string_equal(out, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                           "message\",\"params\":{\"level\":\"error\","
                           "\"logger\":\"db\",\"data\":{\"x\":1}}}\n");
  assert_int_equal(acp_mcp_conn_log(p->c, (acp_mcp_log_level)99, NULL, NULL, 0),
                   ACP_ERR_INVALID_ARGUMENT);
}

static void test_progress_notifications(void **state) {
  pair *p = *state;
  const char *out;

  do_init(p->c, "2025-11-25", "{}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"progress\",\"_meta\":{"
                   "\"progressToken\":\"tok\"}}}");
  HAS(out, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
           "\"params\":{\"progressToken\":\"tok\",\"progress\":1,\"total\":3,"
           "\"message\":\"one\"}}\n{\"jsonrpc\":\"2.0\",\"method\":"
           "\"notifications/progress\",\"params\":{\"progressToken\":\"tok\","
           "\"progress\":2}}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\"");
  /* Without a token, progress is silently skipped. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"progress\"}}");
  HASNT(out, "notifications/progress");
  HAS(out, "\"text\":\"done\"");
}

static void test_cancel_suppresses_response(void **state) {
  pair *p = *state;
  const char *out;

  do_init(p->c, "2025-11-25", "{}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"slow\",\"_meta\":{\"progressToken\":"
                   "5}}}");
  assert_string_equal(out, "");
  assert_non_null(g.pending);
  assert_int_equal(acp_rpc_session_incoming(acp_mcp_conn_session(p->c)), 1);
  out =
      xchg(p->c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                 "cancelled\",\"params\":{\"requestId\":7,\"reason\":\"x\"}}");
  assert_string_equal(out, "");
  assert_int_equal(g.cancels, 1);
  assert_true(acp_mcp_call_is_cancelled(g.pending));
  assert_int_equal(acp_rpc_session_incoming(acp_mcp_conn_session(p->c)), 0);
  /* Progress and the late answer are dropped. */
  assert_int_equal(acp_mcp_call_progress(g.pending, 1, -1, NULL), 0);
  assert_int_equal(acp_mcp_call_respond_text(g.pending, "late", 4, false), 0);
  assert_string_equal(drain(p->c), "");
  /* A second cancel for the same id is ignored. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                   "cancelled\",\"params\":{\"requestId\":7}}");
  assert_string_equal(out, "");
  assert_int_equal(g.cancels, 1);
}

/* A conn freed with a call in progress: the call's cancel callback runs
 * first (a handler holding it lets go), once; an answered call's does not. */
static void test_conn_free_cancels_calls(void **state) {
  pair *p = *state;
  const char *out;

  g.answer_on_cancel = 1;
  do_init(p->c, "2025-11-25", "{}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"slow\"}}");
  assert_string_equal(out, "");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"slow\"}}");
  assert_string_equal(out, "");
  /* The second one is answered: its cancel callback must not run. */
  assert_int_equal(acp_mcp_call_respond_text(g.pending, "done", 4, false), 0);
  HAS(drain(p->c), "\"id\":8,\"result\"");
  assert_int_equal(g.cancels, 0);
  acp_mcp_conn_free(p->c);
  p->c = NULL;
  assert_int_equal(g.cancels, 1);
}

static void test_late_answer_without_cancel(void **state) {
  pair *p = *state;
  const char *out;

  do_init(p->c, "2025-11-25", "{}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"tools/"
                   "call\",\"params\":{\"name\":\"slow\"}}");
  assert_string_equal(out, "");
  assert_int_equal(acp_mcp_call_respond_text(g.pending, "later", 5, false), 0);
  HAS(drain(p->c), "\"id\":\"q\",\"result\":{\"content\":[{\"type\":\"text\","
                   "\"text\":\"later\"}]}");
}

/* MARK: - Server->client requests */

static void test_sampling_roundtrip_raw(void **state) {
  pair *p = *state;
  const char *out;

  do_init(p->c, "2025-11-25", "{\"sampling\":{}}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"sample\"}}");
  HAS(out, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"sampling/"
           "createMessage\",\"params\":{\"messages\"");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"role\":"
                   "\"assistant\",\"content\":{\"type\":\"text\",\"text\":"
                   "\"yo\"},\"model\":\"m\"}}");
  HAS(out, "\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":");
  assert_int_equal(g.sampling_status, 0);
  HAS(g.sampled, "\"model\":\"m\"");
}

static void test_sampling_unsupported_by_client(void **state) {
  pair *p = *state;
  const char *out;

  do_init(p->c, "2025-11-25", "{}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"sample\"}}");
  HAS(out, "no sampling");
  HASNT(out, "createMessage");
}

static void test_cancel_cancels_sub_requests(void **state) {
  pair *p = *state;
  const char *out;

  do_init(p->c, "2025-11-25", "{\"sampling\":{}}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"sample\"}}");
  HAS(out, "createMessage");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                   "cancelled\",\"params\":{\"requestId\":1}}");
  /* The sampling request is cancelled at the client; nothing answers id 1. */
  HAS(out, "notifications/cancelled");
  HAS(out, "\"requestId\":0");
  HASNT(out, "\"id\":1");
  assert_int_equal(g.sampling_status, ACP_ERR_CANCELLED);
  /* The client's late sampling answer is ignored. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}");
  assert_string_equal(out, "");
}

/* MARK: - Subscriptions and list changes */

static void test_subscriptions(void **state) {
  pair *p = *state;
  const char *out;

  do_init(p->c, "2025-11-25", "{}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/"
                   "subscribe\",\"params\":{\"uri\":\"mem://a\"}}");
  HAS(out, "\"result\":{}");
  assert_true(acp_mcp_conn_is_subscribed(p->c, "mem://a"));
  assert_int_equal(acp_mcp_server_resource_updated(p->s, "mem://b"), 0);
  assert_string_equal(drain(p->c), "");
  assert_int_equal(acp_mcp_server_resource_updated(p->s, "mem://a"), 0);
  assert_string_equal(
      drain(p->c), "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                   "resources/updated\",\"params\":{\"uri\":\"mem://a\"}}\n");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/"
                   "unsubscribe\",\"params\":{\"uri\":\"mem://a\"}}");
  HAS(out, "\"result\":{}");
  assert_int_equal(acp_mcp_server_resource_updated(p->s, "mem://a"), 0);
  assert_string_equal(drain(p->c), "");
  /* At most ACP_MCP_MAX_SUBSCRIPTIONS URIs; the same one again is free,
   * and an unsubscribe makes room. */
  {
    char line[160];
    int i;
    for (i = 0; i < ACP_MCP_MAX_SUBSCRIPTIONS; i++) {
      snprintf(line, sizeof(line),
               "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"resources/"
               "subscribe\",\"params\":{\"uri\":\"mem://n/%d\"}}",
               100 + i, i);
      HAS(xchg(p->c, line), "\"result\":{}");
    }
    out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"resources/"
                     "subscribe\",\"params\":{\"uri\":\"mem://one-more\"}}");
    HAS(out, "\"code\":-32603,\"message\":\"Too many subscriptions\"");
    assert_false(acp_mcp_conn_is_subscribed(p->c, "mem://one-more"));
    out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"resources/"
                     "subscribe\",\"params\":{\"uri\":\"mem://n/7\"}}");
    HAS(out, "\"result\":{}");
    out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"resources/"
                     "unsubscribe\",\"params\":{\"uri\":\"mem://n/7\"}}");
    HAS(out, "\"result\":{}");
    out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"resources/"
                     "subscribe\",\"params\":{\"uri\":\"mem://one-more\"}}");
    HAS(out, "\"result\":{}");
    assert_true(acp_mcp_conn_is_subscribed(p->c, "mem://one-more"));
  }
  acp_mcp_server_set_subscribe(p->s, 0);
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/"
                   "subscribe\",\"params\":{\"uri\":\"mem://a\"}}");
  HAS(out, "-32601");
}

static void test_list_changed_and_remove(void **state) {
  pair *p = *state;
  const char *out;

  assert_int_equal(acp_mcp_server_list_changed(p->s, ACP_MCP_LIST_TOOLS), 0);
  assert_string_equal(drain(p->c), ""); /* not initialized yet */
  do_init(p->c, "2025-11-25", "{}");
  assert_int_equal(acp_mcp_server_remove_tool(p->s, "echo"), 0);
  assert_int_equal(acp_mcp_server_remove_tool(p->s, "echo"), ACP_ERR_NOT_FOUND);
  assert_int_equal(acp_mcp_server_list_changed(p->s, ACP_MCP_LIST_TOOLS), 0);
  assert_int_equal(acp_mcp_server_list_changed(p->s, ACP_MCP_LIST_PROMPTS), 0);
  assert_int_equal(
      acp_mcp_server_list_changed(p->s, ACP_MCP_LIST_RESOURCE_TEMPLATES), 0);
  out = drain(p->c);
  assert_string_equal(
      out, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/"
           "list_changed\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
           "prompts/list_changed\"}\n{\"jsonrpc\":\"2.0\",\"method\":"
           "\"notifications/resources/list_changed\"}\n");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"echo\"}}");
  HAS(out, "Unknown tool: echo");
  assert_int_equal(acp_mcp_server_remove_resource(p->s, "mem://a"), 0);
  assert_int_equal(acp_mcp_server_remove_template(p->s, "mem://items/{id}"), 0);
  assert_int_equal(acp_mcp_server_remove_prompt(p->s, "greet"), 0);
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/"
                   "list\"}");
  HAS(out, "-32601"); /* the family is no longer offered */
}

/* MARK: - Batches */

static void test_batches_only_with_2025_03_26(void **state) {
  static const char batch[] =
      "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},{\"jsonrpc\":"
      "\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
      "\"echo\",\"arguments\":{\"message\":\"b\"}}}]";
  pair *p = *state;
  acp_mcp_conn *c2;
  const char *out;

  /* Before initialize and with 2025-06-18: one -32600, id null. */
  out = xchg(p->c, batch);
  assert_string_equal(out, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{"
                           "\"code\":-32600,\"message\":\"Invalid Request\","
                           "\"data\":\"batches are not supported\"}}\n");
  do_init(p->c, "2025-06-18", "{}");
  out = xchg(p->c, batch);
  HAS(out, "\"id\":null");
  HAS(out, "-32600");

  assert_int_equal(acp_mcp_conn_new(&c2, p->s, NULL), 0);
  do_init(c2, "2025-03-26", "{}");
  out = xchg(c2, batch);
  assert_true(out[0] == '[');
  HAS(out, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
  HAS(out, "Echo: b");
  acp_mcp_conn_free(c2);
}

/* MARK: - Registration and helpers */

static int noop_tool(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  (void)a;
  (void)ud;
  return acp_mcp_call_respond_text(call, "", 0, false);
}

static void test_registration_errors(void **state) {
  pair *p = *state;
  acp_mcp_tool_def d;
  acp_mcp_template_def t;
  acp_mcp_prompt_def pr;

  memset(&d, 0, sizeof(d));
  d.version = ACP_MCP_DEF_VERSION;
  d.name = "echo";
  d.handler = noop_tool;
  assert_int_equal(acp_mcp_server_add_tool(p->s, &d), ACP_ERR_INVALID_STATE);
  d.name = "x";
  d.input_schema = "{\"type\":";
  assert_int_equal(acp_mcp_server_add_tool(p->s, &d), ACP_ERR_INVALID_ARGUMENT);
  d.input_schema = "[]";
  assert_int_equal(acp_mcp_server_add_tool(p->s, &d), ACP_ERR_INVALID_ARGUMENT);
  d.input_schema = NULL;
  d.icons = "{}";
  assert_int_equal(acp_mcp_server_add_tool(p->s, &d), ACP_ERR_INVALID_ARGUMENT);
  d.icons = NULL;
  d.version = 99;
  assert_int_equal(acp_mcp_server_add_tool(p->s, &d), ACP_ERR_INVALID_ARGUMENT);
  d.version = ACP_MCP_DEF_VERSION;
  d.handler = NULL;
  assert_int_equal(acp_mcp_server_add_tool(p->s, &d), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_server_add_tool(NULL, &d), ACP_ERR_INVALID_ARGUMENT);

  memset(&t, 0, sizeof(t));
  t.version = ACP_MCP_DEF_VERSION;
  t.uri_template = "mem://{a";
  t.name = "bad";
  t.handler = read_static;
  assert_int_equal(acp_mcp_server_add_template(p->s, &t),
                   ACP_ERR_INVALID_ARGUMENT);
  t.uri_template = "mem://{}";
  assert_int_equal(acp_mcp_server_add_template(p->s, &t),
                   ACP_ERR_INVALID_ARGUMENT);

  memset(&pr, 0, sizeof(pr));
  pr.version = ACP_MCP_DEF_VERSION;
  pr.name = "p2";
  pr.handler = get_greet;
  pr.arguments = "[{\"required\":true}]";
  assert_int_equal(acp_mcp_server_add_prompt(p->s, &pr),
                   ACP_ERR_INVALID_ARGUMENT);
  pr.arguments = "[{\"name\":\"a\",\"required\":\"yes\"}]";
  assert_int_equal(acp_mcp_server_add_prompt(p->s, &pr),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_server_new(NULL, "a", "b", NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
}

static void test_uri_template_match(void **state) {
  size_t st[4];
  size_t ln[4];
  size_t nv = 0;
  (void)state;

  assert_int_equal(acp_mcp_uri_template_match("db://{t}/{id}", 13, "db://u/7",
                                              8, st, ln, 4, &nv),
                   1);
  assert_int_equal(nv, 2);
  assert_int_equal(st[0], 5);
  assert_int_equal(ln[0], 1);
  assert_int_equal(st[1], 7);
  assert_int_equal(ln[1], 1);
  /* Adjacent variables with a literal between them: backtracking. */
  assert_int_equal(
      acp_mcp_uri_template_match("x:{a}.{b}", 9, "x:1.2.3", 7, st, ln, 4, &nv),
      1);
  assert_int_equal(ln[0], 3);
  assert_int_equal(ln[1], 1);
  assert_int_equal(
      acp_mcp_uri_template_match("x:{a}", 5, "x:", 2, NULL, NULL, 0, NULL), 0);
  assert_int_equal(
      acp_mcp_uri_template_match("x:{a}", 5, "x:a/b", 5, NULL, NULL, 0, NULL),
      0);
  assert_int_equal(
      acp_mcp_uri_template_match("x:{a}", 5, "y:a", 3, NULL, NULL, 0, NULL), 0);
  assert_int_equal(
      acp_mcp_uri_template_match("plain", 5, "plain", 5, NULL, NULL, 0, NULL),
      1);
  assert_int_equal(
      acp_mcp_uri_template_match("a}", 2, "a}", 2, NULL, NULL, 0, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(
      acp_mcp_uri_template_match("{a}{b}{c}", 9, "xyz", 3, st, ln, 2, &nv),
      ACP_ERR_INVALID_ARGUMENT);
}

static void test_versions_and_levels(void **state) {
  (void)state;
  assert_string_equal(acp_mcp_version_str(ACP_MCP_VERSION_2024_11_05),
                      "2024-11-05");
  assert_null(acp_mcp_version_str(ACP_MCP_VERSION_UNKNOWN));
  assert_int_equal(acp_mcp_version_parse("2025-03-26", 10),
                   ACP_MCP_VERSION_2025_03_26);
  assert_int_equal(acp_mcp_version_parse("2026-07-28", 10),
                   ACP_MCP_VERSION_UNKNOWN);
  assert_int_equal(acp_mcp_log_level_parse("emergency", 9),
                   ACP_MCP_LOG_EMERGENCY);
  assert_int_equal(acp_mcp_log_level_parse("Error", 5), -1);
  assert_string_equal(acp_mcp_log_level_str(ACP_MCP_LOG_NOTICE), "notice");
}

/* MARK: - Allocation failure */

/* The whole scenario; returns 0 when it ran to the end. Any failure must be
 * clean (an error code, no crash, no leak). */
static int failmem_scenario(const acp_mem *mem) {
  static const char *const lines[] = {
      "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
      "\"protocolVersion\":\"2025-03-26\",\"capabilities\":{\"sampling\":{}},"
      "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}",
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"echo\",\"arguments\":{\"message\":\"x\"}}}",
      "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"progress\",\"_meta\":{\"progressToken\":1}}}",
      "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/read\",\"params\":{"
      "\"uri\":\"mem://items/9\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"resources/list\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"prompts/get\",\"params\":{"
      "\"name\":\"greet\",\"arguments\":{\"name\":\"z\"}}}",
      "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"resources/subscribe\","
      "\"params\":{\"uri\":\"mem://a\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"slow\"}}",
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
      "{\"requestId\":8}}",
      "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"sample\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"model\":\"m\"}}",
      "[{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\"}]",
      "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"nope\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"server/discover\","
      "\"params\":{" META26 "}}",
      "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tools/list\","
      "\"params\":{" META26 "}}",
      "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"resources/read\","
      "\"params\":{\"uri\":\"mem://a\"," META26 "}}",
      "{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"tools/call\","
      "\"params\":{\"name\":\"two\"," META26_ELICIT "}}",
      "{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":\"tools/call\","
      "\"params\":{\"name\":\"two\",\"inputResponses\":{\"step1\":{}},"
      "\"requestState\":\"e30.AAAA\"," META26_ELICIT "}}",
      "{\"jsonrpc\":\"2.0\",\"id\":17,\"method\":\"tools/call\","
      "\"params\":{\"name\":\"two\",\"inputResponses\":{\"step1\":{},"
      "\"1\":{}}," META26_ELICIT "}}",
      "{\"jsonrpc\":\"2.0\",\"id\":18,\"method\":\"subscriptions/listen\","
      "\"params\":{\"notifications\":{\"toolsListChanged\":true,"
      "\"resourceSubscriptions\":[\"mem://a\",\"mem://b\"]}," META26 "}}",
      "{\"jsonrpc\":\"2.0\",\"id\":19,\"method\":\"subscriptions/listen\","
      "\"params\":{\"notifications\":{\"promptsListChanged\":true}," META26
      "}}",
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
      "{\"requestId\":19}}",
  };
  acp_mcp_server *s = NULL;
  acp_mcp_conn *c = NULL;
  size_t i;
  int rv;

  memset(&g, 0, sizeof(g));
  rv = make_server(&s, mem);
  if (rv != 0)
    return rv;
  rv = acp_mcp_conn_new(&c, s, NULL);
  if (rv != 0)
    goto done;
  for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
    char buf[512];
    const char *out;
    size_t n = strlen(lines[i]);
    acp_ssize r;

    memcpy(buf, lines[i], n);
    buf[n] = '\n';
    r = acp_mcp_conn_recv(c, buf, n + 1, 0);
    if (r < 0) {
      rv = (int)r;
      goto done;
    }
    r = acp_mcp_conn_send(c, &out);
    if (r < 0) {
      rv = (int)r;
      goto done;
    }
  }
  rv = acp_mcp_server_resource_updated(s, "mem://a");
  if (rv == 0)
    rv = acp_mcp_server_list_changed(s, ACP_MCP_LIST_TOOLS);
  if (rv == 0)
    rv = acp_mcp_server_log(s, ACP_MCP_LOG_ERROR, "x", "1", 1);
  if (rv == 0)
    rv = acp_mcp_server_close_listens(s);
done:
  acp_mcp_conn_free(c);
  acp_mcp_server_free(s);
  return rv;
}

static void test_allocation_failure_loop(void **state) {
  acp_mem mem = {&fm, fm_malloc, fm_free, fm_calloc, fm_realloc};
  long total;
  long i;
  int failures = 0;
  (void)state;

  memset(&fm, 0, sizeof(fm));
  fm.fail_at = -1;
  assert_int_equal(failmem_scenario(&mem), 0);
  assert_int_equal(fm.live, 0);
  total = fm.count;
  fm.count = 0;
  /* Counting happens only while failing is armed; count once armed. */
  fm.fail_at = 1L << 40;
  assert_int_equal(failmem_scenario(&mem), 0);
  total = fm.count;
  assert_true(total > 50);
  for (i = 0; i < total; i++) {
    int rv;
    fm.count = 0;
    fm.fail_at = i;
    fm.live = 0;
    rv = failmem_scenario(&mem);
    if (rv != 0)
      failures++;
    assert_int_equal(fm.live, 0);
  }
  assert_true(failures > 0);
}

/* MARK: - Registry index and call blocks */

/* Answers with the name it was called by (acp_mcp_call_name()). */
static int tool_named(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  const char *name = acp_mcp_call_name(call);
  (void)a;
  (void)ud;
  return acp_mcp_call_respond_text(call, name, strlen(name), false);
}

static int add_named(acp_mcp_server *s, const char *name) {
  acp_mcp_tool_def d;

  memset(&d, 0, sizeof(d));
  d.version = ACP_MCP_DEF_VERSION;
  d.name = name;
  d.handler = tool_named;
  return acp_mcp_server_add_tool(s, &d);
}

/* tools/call NAME (written as is: may hold escapes) on c; the output. */
static const char *call_named(acp_mcp_conn *c, const char *name) {
  static char line[1024];
  static int id = 100;

  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
           "\"params\":{\"name\":\"%s\",\"arguments\":{}}}",
           id++, name);
  return xchg(c, line);
}

/* The text a tool_named call answered, or "" for an error. */
static void expect_named(acp_mcp_conn *c, const char *name, const char *want) {
  const char *out = call_named(c, name);
  char text[600];

  if (want == NULL) {
    HAS(out, "Unknown tool");
    return;
  }
  snprintf(text, sizeof(text), "\"text\":\"%s\"}]}}", want);
  HAS(out, text);
}

static void name_of(char *out, size_t cap, int i) {
  /* Lengths 1 to ~150, shared prefixes, names that are prefixes of others
   * (t1, t12, t123...): every probe sequence of the index gets long keys
   * and near misses. */
  int k = i % 7;

  if (k == 0)
    snprintf(out, cap, "t%d", i);
  else if (k == 1)
    snprintf(out, cap, "tool_%d_%0*d", i, (i % 120) + 1, 0);
  else
    snprintf(out, cap, "%c%d", 'a' + k, i);
}

static void test_tool_index_many_tools(void **state) {
  acp_mcp_server *s = NULL;
  acp_mcp_conn *c = NULL;
  char name[200];
  int i;
  (void)state;

  assert_int_equal(acp_mcp_server_new(&s, "test-server", "1.2.3", NULL, NULL),
                   0);
  /* One tool stays: a server with no tools has no tools/call at all. */
  assert_int_equal(add_named(s, "keep"), 0);
  for (i = 0; i < 300; i++) {
    name_of(name, sizeof(name), i);
    assert_int_equal(add_named(s, name), 0);
  }
  /* A duplicate is refused (the index finds it). */
  assert_int_equal(add_named(s, "t0"), ACP_ERR_INVALID_STATE);
  assert_int_equal(acp_mcp_conn_new(&c, s, NULL), 0);
  do_init(c, "2025-11-25", "{}");
  for (i = 0; i < 300; i++) {
    name_of(name, sizeof(name), i);
    expect_named(c, name, name);
  }
  expect_named(c, "t300", NULL);
  expect_named(c, "t", NULL);
  expect_named(c, "", NULL);
  expect_named(c, "t00", NULL);
  /* Escaped names are compared decoded. */
  expect_named(c, "t\\u0037", "t7");
  expect_named(c, "\\u0074\\u0031\\u0034", "t14");
  expect_named(c, "t\\u0038", NULL);
  /* Removal moves the later positions: every name still finds its own. */
  assert_int_equal(acp_mcp_server_remove_tool(s, "t7"), 0);
  assert_int_equal(acp_mcp_server_remove_tool(s, "t7"), ACP_ERR_NOT_FOUND);
  expect_named(c, "t7", NULL);
  for (i = 0; i < 300; i++) {
    if (i == 7)
      continue;
    name_of(name, sizeof(name), i);
    expect_named(c, name, name);
  }
  assert_int_equal(add_named(s, "t7"), 0);
  expect_named(c, "t7", "t7");
  /* Remove all but the last, from the front (t7, re-added at the end, goes
   * at i = 7): the index follows. */
  for (i = 0; i < 299; i++) {
    name_of(name, sizeof(name), i);
    assert_int_equal(acp_mcp_server_remove_tool(s, name), 0);
    expect_named(c, name, NULL);
    name_of(name, sizeof(name), i + 1);
    expect_named(c, name, name);
  }
  name_of(name, sizeof(name), 299);
  assert_int_equal(acp_mcp_server_remove_tool(s, name), 0);
  expect_named(c, name, NULL);
  expect_named(c, "keep", "keep");
  acp_mcp_conn_free(c);
  acp_mcp_server_free(s);
}

/* The text tool_given answers, and whether as an error. */
static const char *given_text;
static size_t given_len;
static bool given_error;

static int tool_given(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  (void)a;
  (void)ud;
  return acp_mcp_call_respond_text(call, given_text, given_len, given_error);
}

/* acp_mcp_call_respond_text() answers the bytes a JSON writer writes for
 * {"content":[{"type":"text","text":T}]} (and "isError":true), whatever T
 * holds; text that is not UTF-8 becomes the handler's error. */
static void test_respond_text_bytes(void **state) {
  static const char *const texts[] = {
      "",
      "a",
      "hello",
      "quote \" backslash \\ end",
      "line\nfeed\ttab\x01\x1f",
      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
      "del \x7f",
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
      "0123456789abcdef0123456789abcdef\"0123456789abcdef"};
  acp_mcp_server *s = NULL;
  acp_mcp_conn *c = NULL;
  acp_mcp_tool_def d;
  acp_json_writer *w = NULL;
  char want[1024];
  const char *out;
  size_t i, n;
  int e;
  (void)state;

  assert_int_equal(acp_mcp_server_new(&s, "test-server", "1.2.3", NULL, NULL),
                   0);
  memset(&d, 0, sizeof(d));
  d.version = ACP_MCP_DEF_VERSION;
  d.name = "given";
  d.handler = tool_given;
  assert_int_equal(acp_mcp_server_add_tool(s, &d), 0);
  assert_int_equal(acp_mcp_conn_new(&c, s, NULL), 0);
  assert_int_equal(acp_json_writer_new(&w, 0, NULL), 0);
  do_init(c, "2025-11-25", "{}");
  for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
    for (e = 0; e < 2; e++) {
      const char *r;
      acp_json_writer_reset(w);
      acp_json_write_obj_begin(w);
      acp_json_write_keyz(w, "content");
      acp_json_write_arr_begin(w);
      acp_json_write_obj_begin(w);
      acp_json_write_keyz(w, "type");
      acp_json_write_strz(w, "text");
      acp_json_write_keyz(w, "text");
      acp_json_write_str(w, texts[i], strlen(texts[i]));
      acp_json_write_obj_end(w);
      acp_json_write_arr_end(w);
      if (e) {
        acp_json_write_keyz(w, "isError");
        acp_json_write_bool(w, true);
      }
      assert_int_equal(acp_json_write_obj_end(w), 0);
      r = acp_json_writer_data(w, &n);
      snprintf(want, sizeof(want),
               "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":%.*s}\n", (int)n, r);
      given_text = texts[i];
      given_len = strlen(texts[i]);
      given_error = e != 0;
      out = xchg(c, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\","
                    "\"params\":{\"name\":\"given\"}}");
      assert_string_equal(out, want);
    }
  }
  /* Not UTF-8: the handler's error, answered as a tool error. */
  given_text = "bad \xff";
  given_len = 5;
  given_error = false;
  out = xchg(c, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"given\"}}");
  HAS(out, "\"isError\":true");
  HAS(out, "\"id\":9");
  acp_json_writer_free(w);
  acp_mcp_conn_free(c);
  acp_mcp_server_free(s);
}

static void test_sequential_calls_allocate_nothing(void **state) {
  acp_mem mem = {&fm, fm_malloc, fm_free, fm_calloc, fm_realloc};
  acp_mcp_server *s = NULL;
  acp_mcp_conn *c = NULL;
  char longname[160];
  long before = 0;
  const char *out;
  int i;
  (void)state;

  memset(&fm, 0, sizeof(fm));
  fm.fail_at = -1;
  memset(longname, 'n', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = '\0';
  assert_int_equal(acp_mcp_server_new(&s, "test-server", "1.2.3", NULL, &mem),
                   0);
  assert_int_equal(mcp_fixture_add_echo(s), 0);
  assert_int_equal(add_named(s, "x"), 0);
  assert_int_equal(add_named(s, longname), 0);
  assert_int_equal(acp_mcp_conn_new(&c, s, NULL), 0);
  do_init(c, "2025-11-25", "{}");
  for (i = 0; i < 6; i++) {
    if (i == 2)
      before = fm.count;
    out = xchg(c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
                  "\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":"
                  "\"hello\"}}}");
    assert_string_equal(out, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{"
                             "\"content\":[{\"type\":\"text\",\"text\":"
                             "\"Echo: hello\"}]}}\n");
  }
  assert_int_equal(fm.count - before, 0);
  /* Each call keeps its own name, whatever block it got: a long name takes
   * a larger block (which becomes the spare), a short one reuses it. */
  expect_named(c, longname, longname);
  expect_named(c, "x", "x");
  expect_named(c, longname, longname);
  before = fm.count;
  expect_named(c, "x", "x");
  expect_named(c, longname, longname);
  assert_int_equal(fm.count - before, 0);
  acp_mcp_conn_free(c);
  acp_mcp_server_free(s);
  assert_int_equal(fm.live, 0);
}

/* MARK: - Stateless requests (2026-07-28) */

static void test_stateless_discover(void **state) {
  pair *p = *state;
  const char *out;

  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/"
                   "discover\",\"params\":{" META26 "}}");
  assert_string_equal(
      out, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"supportedVersions\":["
           "\"2026-07-28\"],\"capabilities\":{\"tools\":{\"listChanged\":true},"
           "\"resources\":{\"subscribe\":true,\"listChanged\":true},"
           "\"prompts\":{\"listChanged\":true},\"logging\":{},"
           "\"completions\":{}},"
           "\"instructions\":\"Be nice\",\"resultType\":\"complete\","
           "\"ttlMs\":0,\"cacheScope\":\"private\"," SERVER_INFO26 "}}\n");
  /* Nothing was negotiated: the conn is still without a stateful era. */
  assert_int_equal(acp_mcp_conn_version(p->c), ACP_MCP_VERSION_UNKNOWN);
  /* A stateful request on the same conn is still refused until initialize. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
  HAS(out, "\"code\":-32600");
  HAS(out, "Server not initialized");
}

#define SUBID(id)                                                              \
  "\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":" id "}"

/* subscriptions/listen: acknowledged with what is honored, never answered,
 * tagged notifications of the opted-in kinds only, ended by cancel. */
static void test_stateless_listen(void **state) {
  pair *p = *state;
  const char *out;

  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":\"L1\",\"method\":"
                   "\"subscriptions/listen\",\"params\":{" META26
                   ",\"notifications\":{\"toolsListChanged\":true,"
                   "\"promptsListChanged\":false,\"resourceSubscriptions\":["
                   "\"mem://a\",\"mem://items/7\"],\"other\":1}}}");
  assert_string_equal(
      out, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/"
           "acknowledged\",\"params\":{" SUBID(
               "\"L1\"") ",\"notifications\":{"
                         "\"toolsListChanged\":true,\"resourceSubscriptions\":["
                         "\"mem://a\","
                         "\"mem://items/7\"]}}}\n");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
                   "\"subscriptions/listen\",\"params\":{" META26
                   ",\"notifications\":{\"promptsListChanged\":true,"
                   "\"resourcesListChanged\":true}}}");
  assert_string_equal(
      out, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/"
           "acknowledged\",\"params\":{" SUBID(
               "2") ",\"notifications\":{"
                    "\"resourcesListChanged\":true,\"promptsListChanged\":true}"
                    "}}\n");
  /* Not a session: only the subscriptions hear the broadcasts. */
  assert_int_equal(acp_mcp_server_list_changed(p->s, ACP_MCP_LIST_TOOLS), 0);
  assert_string_equal(drain(p->c),
                      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/"
                      "list_changed\",\"params\":{" SUBID("\"L1\"") "}}\n");
  assert_int_equal(
      acp_mcp_server_list_changed(p->s, ACP_MCP_LIST_RESOURCE_TEMPLATES), 0);
  assert_int_equal(acp_mcp_server_list_changed(p->s, ACP_MCP_LIST_PROMPTS), 0);
  assert_string_equal(
      drain(p->c), "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/"
                   "list_changed\",\"params\":{" SUBID(
                       "2") "}}\n"
                            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                            "prompts/list_changed\","
                            "\"params\":{" SUBID("2") "}}\n");
  assert_int_equal(acp_mcp_server_resource_updated(p->s, "mem://b"), 0);
  assert_string_equal(drain(p->c), "");
  assert_int_equal(acp_mcp_server_resource_updated(p->s, "mem://items/7"), 0);
  assert_string_equal(
      drain(p->c), "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/"
                   "updated\",\"params\":{" SUBID("\"L1\"") ",\"uri\":\"mem://"
                                                            "items/7\"}}\n");
  /* Other requests are served meanwhile; the listens stay open. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
                   "\"params\":{" META26 ",\"name\":\"echo\",\"arguments\":{"
                   "\"text\":\"x\"}}}");
  HAS(out, "\"id\":3,\"result\"");
  /* Cancelling one ends it without a response. */
  out =
      xchg(p->c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                 "\"params\":{\"requestId\":\"L1\"}}");
  assert_string_equal(out, "");
  assert_int_equal(acp_mcp_server_list_changed(p->s, ACP_MCP_LIST_TOOLS), 0);
  assert_int_equal(acp_mcp_server_resource_updated(p->s, "mem://a"), 0);
  assert_string_equal(drain(p->c), "");
  assert_int_equal(acp_mcp_server_list_changed(p->s, ACP_MCP_LIST_PROMPTS), 0);
  HAS(drain(p->c), SUBID("2"));
  /* A 2025 session on another conn still gets its untagged form. */
  {
    acp_mcp_conn *c2 = NULL;
    assert_int_equal(acp_mcp_conn_new(&c2, p->s, NULL), 0);
    do_init(c2, "2025-11-25", "{}");
    assert_int_equal(acp_mcp_server_list_changed(p->s, ACP_MCP_LIST_PROMPTS),
                     0);
    assert_string_equal(drain(c2), "{\"jsonrpc\":\"2.0\",\"method\":"
                                   "\"notifications/prompts/list_changed\"}\n");
    HAS(drain(p->c), SUBID("2"));
    acp_mcp_conn_free(c2); /* frees its state; p->c's listen stays */
  }
  /* A graceful close answers the open listen: resultType complete; then
   * nothing more reaches it. */
  assert_int_equal(acp_mcp_server_close_listens(p->s), 0);
  assert_string_equal(drain(p->c),
                      "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{"
                      "\"resultType\":\"complete\"," SERVER_INFO26 "}}\n");
  assert_int_equal(acp_mcp_server_list_changed(p->s, ACP_MCP_LIST_PROMPTS), 0);
  assert_string_equal(drain(p->c), "");
  assert_int_equal(acp_mcp_conn_close_listens(p->c), 0);
  assert_string_equal(drain(p->c), "");
  assert_int_equal(acp_mcp_conn_close_listens(NULL), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_server_close_listens(NULL),
                   ACP_ERR_INVALID_ARGUMENT);
}

/* Bad filters are -32602 and open nothing; without resources.subscribe the
 * URIs are not acknowledged. */
static void test_stateless_listen_errors(void **state) {
  pair *p = *state;
  const char *out;
  static const char *const bad[] = {
      "",
      ",\"notifications\":true",
      ",\"notifications\":{\"toolsListChanged\":1}",
      ",\"notifications\":{\"resourceSubscriptions\":\"mem://a\"}",
      ",\"notifications\":{\"resourceSubscriptions\":[1]}",
      ",\"notifications\":{\"resourceSubscriptions\":[\"a\\u0000b\"]}"};
  char line[512];
  size_t i;

  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":\"subscriptions/"
             "listen\",\"params\":{" META26 "%s}}",
             (unsigned)i, bad[i]);
    out = xchg(p->c, line);
    HAS(out, "\"error\":{\"code\":-32602");
  }
  assert_int_equal(acp_mcp_server_list_changed(p->s, ACP_MCP_LIST_TOOLS), 0);
  assert_string_equal(drain(p->c), "");
  acp_mcp_server_set_subscribe(p->s, 0);
  out = xchg(p->c,
             "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":"
             "\"subscriptions/listen\",\"params\":{" META26
             ",\"notifications\":{\"resourceSubscriptions\":[\"mem://a\"]}}}");
  assert_string_equal(
      out,
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/"
      "acknowledged\",\"params\":{" SUBID("9") ",\"notifications\":{}}}\n");
  assert_int_equal(acp_mcp_server_resource_updated(p->s, "mem://a"), 0);
  assert_string_equal(drain(p->c), "");
  /* A session-era request on the same conn still needs initialize. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":"
                   "\"subscriptions/listen\",\"params\":{}}");
  HAS(out, "Server not initialized");
}

/* The filter a listen keeps is bounded (ACP_MCP_MAX_SUBSCRIPTIONS URIs,
 * as many task ids) and so is the number of listens open on one conn
 * (ACP_MCP_MAX_LISTENS); past either, -32603 and nothing is opened. */
static char *listen_line(const char *id, size_t nuris, const char *key) {
  size_t cap = 256 + nuris * 16;
  char *b = malloc(cap);
  size_t n;

  assert_non_null(b);
  n = (size_t)snprintf(b, cap,
                       "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":"
                       "\"subscriptions/listen\",\"params\":{" META26
                       ",\"notifications\":{\"toolsListChanged\":true,"
                       "\"%s\":[",
                       id, key ? key : "resourceSubscriptions");
  for (size_t i = 0; i < nuris; i++)
    n += (size_t)snprintf(b + n, cap - n, "%s\"u/%zu\"", i ? "," : "", i);
  snprintf(b + n, cap - n, "]}}}");
  return b;
}

static void test_stateless_listen_bounds(void **state) {
  pair *p = *state;
  const char *out;
  char *line;
  char id[16];
  unsigned i;

  line = listen_line("\"big\"", ACP_MCP_MAX_SUBSCRIPTIONS + 1, NULL);
  out = xchg(p->c, line);
  free(line);
  HAS(out, "\"id\":\"big\",\"error\":{\"code\":-32603");
  HAS(out, "Too many subscriptions");
  line = listen_line("\"tasks\"", ACP_MCP_MAX_SUBSCRIPTIONS + 1, "taskIds");
  out = xchg(p->c, line);
  free(line);
  HAS(out, "\"id\":\"tasks\",\"error\":{\"code\":-32603");
  line = listen_line("\"full\"", ACP_MCP_MAX_SUBSCRIPTIONS, NULL);
  out = xchg(p->c, line);
  free(line);
  HAS(out, "subscriptions/acknowledged");
  HAS(out, "\"u/1023\"");
  for (i = 1; i < ACP_MCP_MAX_LISTENS; i++) {
    snprintf(id, sizeof(id), "%u", i);
    line = listen_line(id, 1, NULL);
    out = xchg(p->c, line);
    free(line);
    HAS(out, "subscriptions/acknowledged");
  }
  line = listen_line("\"one-more\"", 1, NULL);
  out = xchg(p->c, line);
  HAS(out, "\"id\":\"one-more\",\"error\":{\"code\":-32603");
  HAS(out, "Too many open listens");
  /* Every open listen hears a broadcast; the refused ones do not. */
  assert_int_equal(acp_mcp_server_list_changed(p->s, ACP_MCP_LIST_TOOLS), 0);
  out = drain(p->c);
  {
    unsigned lines = 0;
    for (const char *q = out; (q = strchr(q, '\n')) != NULL; q++)
      lines++;
    assert_int_equal(lines, ACP_MCP_MAX_LISTENS);
  }
  assert_null(strstr(out, "one-more"));
  assert_null(strstr(out, "\"big\""));
  /* One ends (cancelled): there is room for one more. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                   "cancelled\",\"params\":{\"requestId\":\"full\"}}");
  assert_string_equal(out, "");
  out = xchg(p->c, line);
  free(line);
  HAS(out, "subscriptions/acknowledged");
}

static void test_stateless_meta_errors(void **state) {
  pair *p = *state;
  const char *out;
  static const char *const removed[] = {"initialize", "ping",
                                        "logging/setLevel",
                                        "resources/subscribe", "nope/nope"};
  size_t i;

  out = xchg(p->c,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\"}");
  HAS(out, "\"id\":1,\"error\":{\"code\":-32602");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"server/"
                   "discover\",\"params\":{}}");
  HAS(out, "\"id\":2,\"error\":{\"code\":-32602");
  out =
      xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"server/discover\","
                 "\"params\":{\"_meta\":{\"io.modelcontextprotocol/"
                 "clientCapabilities\":{}}}}");
  HAS(out, "\"id\":3,\"error\":{\"code\":-32602");
  HAS(out, "protocolVersion");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\","
                   "\"params\":{\"_meta\":{\"io.modelcontextprotocol/"
                   "protocolVersion\":\"2026-07-28\"}}}");
  HAS(out, "\"id\":4,\"error\":{\"code\":-32602");
  HAS(out, "clientCapabilities");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\","
                   "\"params\":{\"_meta\":{\"io.modelcontextprotocol/"
                   "protocolVersion\":\"1999-01-01\",\"io.modelcontextprotocol/"
                   "clientCapabilities\":{}}}}");
  assert_string_equal(
      out, "{\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{\"code\":-32022,"
           "\"message\":\"Unsupported protocol version\",\"data\":{"
           "\"supported\":[\"2026-07-28\"],\"requested\":\"1999-01-01\"}}}\n");
  /* A stateful revision named per request is not a stateless one. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/list\","
                   "\"params\":{\"_meta\":{\"io.modelcontextprotocol/"
                   "protocolVersion\":\"2025-11-25\",\"io.modelcontextprotocol/"
                   "clientCapabilities\":{}}}}");
  HAS(out, "\"code\":-32022");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\","
                   "\"params\":{\"_meta\":{\"io.modelcontextprotocol/"
                   "protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/"
                   "clientCapabilities\":{},\"io.modelcontextprotocol/"
                   "logLevel\":\"loud\"}}}");
  HAS(out, "\"id\":7,\"error\":{\"code\":-32602");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/list\","
                   "\"params\":{\"_meta\":{\"io.modelcontextprotocol/"
                   "protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/"
                   "clientCapabilities\":{},\"io.modelcontextprotocol/"
                   "clientInfo\":\"me\"}}}");
  HAS(out, "\"id\":8,\"error\":{\"code\":-32602");
  for (i = 0; i < sizeof(removed) / sizeof(removed[0]); i++) {
    char line[512];
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"%s\",\"params\":{"
             "\"uri\":\"mem://a\",\"level\":\"info\"," META26 "}}",
             removed[i]);
    out = xchg(p->c, line);
    HAS(out, "\"id\":9,\"error\":{\"code\":-32601");
  }
  assert_int_equal(acp_mcp_conn_version(p->c), ACP_MCP_VERSION_UNKNOWN);
}

static void test_stateless_results(void **state) {
  pair *p = *state;
  const char *out;

  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
                   "\"params\":{" META26 "}}");
  /* Registration order, every time. */
  {
    const char *names[] = {"\"echo\"", "\"structured\"", "\"fail\"",
                           "\"slow\"", "\"progress\"",   "\"sample\"",
                           "\"log\""};
    const char *at = out;
    size_t i;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
      const char *next = strstr(at, names[i]);
      if (next == NULL)
        fail_msg("%s missing or out of order in %s", names[i], out);
      at = next;
    }
  }
  HAS(out, "],\"resultType\":\"complete\",\"ttlMs\":0,\"cacheScope\":"
           "\"private\"," SERVER_INFO26 "}}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":"
                   "\"hi\"}," META26 "}}");
  assert_string_equal(
      out, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[{\"type\":"
           "\"text\",\"text\":\"Echo: hi\"}],\"resultType\":\"complete\","
           "" SERVER_INFO26 "}}\n");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"fail\"," META26 "}}");
  HAS(out, "\"isError\":true,\"resultType\":\"complete\"");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/"
                   "read\",\"params\":{\"uri\":\"mem://a\"," META26 "}}");
  HAS(out, "\"text\":\"alpha\"}],\"resultType\":\"complete\",\"ttlMs\":0,"
           "\"cacheScope\":\"private\"");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"resources/"
                   "read\",\"params\":{\"uri\":\"mem://none\"," META26 "}}");
  assert_string_equal(
      out, "{\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{\"code\":-32602,"
           "\"message\":\"Resource not found\",\"data\":{\"uri\":"
           "\"mem://none\"}}}\n");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"prompts/get\","
                   "\"params\":{\"name\":\"greet\",\"arguments\":{\"name\":"
                   "\"Ann\"}," META26 "}}");
  HAS(out, "Hello Ann\"}}],\"resultType\":\"complete\"," SERVER_INFO26);
  HASNT(out, "ttlMs");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"completion/"
                   "complete\",\"params\":{\"ref\":{\"type\":\"ref/prompt\","
                   "\"name\":\"greet\"},\"argument\":{\"name\":\"name\","
                   "\"value\":\"py\"}," META26 "}}");
  HAS(out, "\"hasMore\":true},\"resultType\":\"complete\"");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"resources/"
                   "templates/list\",\"params\":{" META26 "}}");
  HAS(out, "mem://items/{id}");
  HAS(out, "\"ttlMs\":0");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"prompts/"
                   "list\",\"params\":{" META26 "}}");
  HAS(out, "\"ttlMs\":0");
  /* No server->client requests at 2026: the handler's request becomes an
   * input request of an InputRequiredResult. */
  out = xchg(p->c,
             "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\","
             "\"params\":{\"name\":\"sample\",\"_meta\":{\"io."
             "modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io."
             "modelcontextprotocol/clientCapabilities\":{\"sampling\":{}}}}}");
  HAS(out, "\"resultType\":\"input_required\",\"inputRequests\":{\"1\":{"
           "\"method\":\"sampling/createMessage\"");
  HASNT(out, "\"id\":0,\"method\""); /* no server->client request */
}

static void test_stateless_cache_hints(void **state) {
  pair *p = *state;
  const char *out;

  assert_int_equal(acp_mcp_server_set_cache(p->s, ACP_MCP_CACHE_TOOLS_LIST,
                                            NULL, 60000, ACP_MCP_CACHE_PUBLIC),
                   0);
  assert_int_equal(acp_mcp_server_set_cache(p->s, ACP_MCP_CACHE_READ, NULL, 7,
                                            ACP_MCP_CACHE_PRIVATE),
                   0);
  assert_int_equal(acp_mcp_server_set_cache(p->s, ACP_MCP_CACHE_READ, "mem://a",
                                            5, ACP_MCP_CACHE_PUBLIC),
                   0);
  assert_int_equal(acp_mcp_server_set_cache(p->s, ACP_MCP_CACHE_READ,
                                            "mem://items/{id}", 9,
                                            ACP_MCP_CACHE_PUBLIC),
                   0);
  assert_int_equal(acp_mcp_server_set_cache(p->s, ACP_MCP_CACHE_READ,
                                            "mem://zzz", 5,
                                            ACP_MCP_CACHE_PUBLIC),
                   ACP_ERR_NOT_FOUND);
  assert_int_equal(acp_mcp_server_set_cache(p->s, ACP_MCP_CACHE_TOOLS_LIST,
                                            "echo", 5, ACP_MCP_CACHE_PUBLIC),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_server_set_cache(p->s, (acp_mcp_cache_target)6, NULL,
                                            5, ACP_MCP_CACHE_PUBLIC),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_server_set_cache(p->s, ACP_MCP_CACHE_DISCOVER, NULL,
                                            UINT64_MAX, ACP_MCP_CACHE_PUBLIC),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_server_set_cache(p->s, ACP_MCP_CACHE_DISCOVER, NULL,
                                            1, (acp_mcp_cache_scope)2),
                   ACP_ERR_INVALID_ARGUMENT);
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
                   "\"params\":{" META26 "}}");
  HAS(out, "\"ttlMs\":60000,\"cacheScope\":\"public\"");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"prompts/"
                   "list\",\"params\":{" META26 "}}");
  HAS(out, "\"ttlMs\":0,\"cacheScope\":\"private\"");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/"
                   "read\",\"params\":{\"uri\":\"mem://a\"," META26 "}}");
  HAS(out, "\"ttlMs\":5,\"cacheScope\":\"public\"");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/"
                   "read\",\"params\":{\"uri\":\"mem://items/3\"," META26 "}}");
  HAS(out, "\"ttlMs\":9,\"cacheScope\":\"public\"");
  /* Dropping the registration drops its setting. */
  assert_int_equal(acp_mcp_server_remove_resource(p->s, "mem://a"), 0);
  {
    acp_mcp_resource_def r;
    memset(&r, 0, sizeof(r));
    r.version = ACP_MCP_DEF_VERSION;
    r.uri = "mem://a";
    r.name = "a";
    r.size = -1;
    r.handler = read_static;
    assert_int_equal(acp_mcp_server_add_resource(p->s, &r), 0);
  }
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"resources/"
                   "read\",\"params\":{\"uri\":\"mem://a\"," META26 "}}");
  HAS(out, "\"ttlMs\":7,\"cacheScope\":\"private\"");
  /* A stateful session never sees the 2026 members. */
  do_init(p->c, "2025-11-25", "{}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/list\"}");
  HASNT(out, "ttlMs");
  HASNT(out, "resultType");
  HASNT(out, "serverInfo");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"resources/"
                   "read\",\"params\":{\"uri\":\"mem://none\"}}");
  HAS(out, "\"code\":-32002");
}

static void test_stateless_log_level(void **state) {
  pair *p = *state;
  const char *out;

  /* No level in _meta: no notifications/message at all. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"log\"," META26 "}}");
  HASNT(out, "notifications/message");
  HAS(out, "stateless {}");
  /* The level applies to this request only. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"log\",\"_meta\":{\"io."
                   "modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io."
                   "modelcontextprotocol/clientCapabilities\":{\"x\":{}},\"io."
                   "modelcontextprotocol/logLevel\":\"warning\"}}}");
  assert_string_equal(
      out, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
           "\"params\":{\"level\":\"warning\",\"logger\":\"t\",\"data\":"
           "\"w\"}}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":"
           "[{\"type\":\"text\",\"text\":\"stateless {\\\"x\\\":{}}\"}],"
           "\"resultType\":\"complete\"," SERVER_INFO26 "}}\n");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"log\"," META26 "}}");
  HASNT(out, "notifications/message");
  /* Broadcast logs reach no stateless client. */
  assert_int_equal(
      acp_mcp_server_log(p->s, ACP_MCP_LOG_EMERGENCY, NULL, "1", 1), 0);
  assert_string_equal(drain(p->c), "");
}

/* MARK: - Multi round-trip (2026-07-28) */

static void hex_eq(const uint8_t *got, const char *want) {
  char hex[65];
  size_t i;
  for (i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", got[i]);
  assert_string_equal(hex, want);
}

static void test_sha256_hmac_vectors(void **state) {
  static const char million_a_prefix[] =
      "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  acp__sha256 h;
  uint8_t out[32];
  uint8_t key[131];
  size_t i;
  (void)state;

  acp__sha256_init(&h);
  acp__sha256_final(&h, out);
  hex_eq(out,
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  acp__sha256_init(&h);
  acp__sha256_update(&h, "abc", 3);
  acp__sha256_final(&h, out);
  hex_eq(out,
         "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  /* 56 bytes: the padding spills into a second block; fed in pieces. */
  acp__sha256_init(&h);
  for (i = 0; i < sizeof(million_a_prefix) - 1; i += 5)
    acp__sha256_update(&h, million_a_prefix + i,
                       sizeof(million_a_prefix) - 1 - i < 5
                           ? sizeof(million_a_prefix) - 1 - i
                           : 5);
  acp__sha256_final(&h, out);
  hex_eq(out,
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  /* RFC 4231 test cases 1, 2 and 6 (key longer than a block). */
  memset(key, 0x0b, 20);
  acp__hmac_sha256(key, 20, "Hi There", 8, out);
  hex_eq(out,
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  acp__hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, out);
  hex_eq(out,
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  memset(key, 0xaa, sizeof(key));
  acp__hmac_sha256(key, sizeof(key),
                   "Test Using Larger Than Block-Size Key - Hash Key First", 54,
                   out);
  hex_eq(out,
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

/* The requestState of an answer (static buffer). */
static const char *state_of(const char *out) {
  static char st[1024];
  const char *p = strstr(out, "\"requestState\":\"");
  const char *e;
  if (p == NULL)
    fail_msg("no requestState in %s", out);
  p += 16;
  e = strchr(p, '"');
  assert_non_null(e);
  assert_true((size_t)(e - p) < sizeof(st));
  memcpy(st, p, (size_t)(e - p));
  st[e - p] = '\0';
  return st;
}

static void test_stateless_input_required(void **state) {
  pair *p = *state;
  char line[2048];
  char st[1024];
  const char *out;

  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"ask\"," META26_ELICIT "}}");
  HAS(out, "\"result\":{\"resultType\":\"input_required\",\"inputRequests\":{"
           "\"name\":{\"method\":\"elicitation/create\",\"params\":" ASK_NAME
           "}},\"requestState\":\"");
  HAS(out, SERVER_INFO26);
  HASNT(out, "ttlMs");
  HASNT(out, "elicitation/create\",\"id\""); /* no server->client request */
  strcpy(st, state_of(out));
  /* The retry's answer reaches the handler's callback. */
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":"
           "{\"name\":\"ask\",\"inputResponses\":{\"name\":{\"action\":"
           "\"accept\",\"content\":{\"name\":\"Ann\"}},\"extra\":{}},"
           "\"requestState\":\"%s\"," META26_ELICIT "}}",
           st);
  out = xchg(p->c, line);
  HAS(out, "\"id\":2,\"result\":{\"content\":[{\"type\":\"text\",\"text\":"
           "\"Hello Ann\"}],\"resultType\":\"complete\"");
  /* Without the state the answer alone is enough for one round. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"ask\",\"inputResponses\":{\"name\":{"
                   "\"action\":\"accept\",\"content\":{\"name\":\"Bo\"}}},"
                   "" META26_ELICIT "}}");
  HAS(out, "Hello Bo");
  /* A wrong key re-asks. */
  out =
      xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\","
                 "\"params\":{\"name\":\"ask\",\"inputResponses\":{\"nom\":{}},"
                 "" META26_ELICIT "}}");
  HAS(out, "\"id\":4,\"result\":{\"resultType\":\"input_required\"");
  /* Tampered, truncated, forged or foreign states are refused. */
  {
    char bad[1024];
    size_t n = strlen(st);
    static const char *const forged[] = {"", "x.y", "eyJ9.AAAA"};
    size_t i;
    strcpy(bad, st);
    bad[2] = bad[2] == 'A' ? 'B' : 'A';
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\","
             "\"params\":{\"name\":\"ask\",\"requestState\":\"%s\","
             "" META26_ELICIT "}}",
             bad);
    out = xchg(p->c, line);
    HAS(out, "\"id\":5,\"error\":{\"code\":-32602");
    strcpy(bad, st);
    bad[n - 1] = bad[n - 1] == 'A' ? 'B' : 'A';
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\","
             "\"params\":{\"name\":\"ask\",\"requestState\":\"%s-x\","
             "" META26_ELICIT "}}",
             st);
    out = xchg(p->c, line);
    HAS(out, "\"id\":6,\"error\":{\"code\":-32602");
    for (i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
      snprintf(line, sizeof(line),
               "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
               "\"params\":{\"name\":\"ask\",\"requestState\":\"%s\","
               "" META26_ELICIT "}}",
               forged[i]);
      out = xchg(p->c, line);
      HAS(out, "\"id\":7,\"error\":{\"code\":-32602");
    }
    /* The state of "ask" does not open "two". */
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\","
             "\"params\":{\"name\":\"two\",\"requestState\":\"%s\","
             "" META26_ELICIT "}}",
             st);
    out = xchg(p->c, line);
    HAS(out, "\"id\":8,\"error\":{\"code\":-32602");
    HAS(out, "integrity");
  }
  /* inputResponses must be an object of objects. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"ask\",\"inputResponses\":null,"
                   "" META26_ELICIT "}}");
  HAS(out, "\"id\":9,\"error\":{\"code\":-32602");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"ask\",\"inputResponses\":{\"name\":"
                   "12345}," META26_ELICIT "}}");
  HAS(out, "\"id\":10,\"error\":{\"code\":-32602");
  /* No elicitation capability declared: the handler is told. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"ask\"," META26 "}}");
  HAS(out, "no elicitation");
  /* Without a state key there are no input requests. */
  assert_int_equal(acp_mcp_server_set_state_key(p->s, "short", 5),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_server_set_state_key(p->s, NULL, 0), 0);
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"ask\"," META26_ELICIT "}}");
  HAS(out, "no elicitation");
  /* In a 2025 session the same handler sends a real request. */
  do_init(p->c, "2025-11-25", "{\"elicitation\":{}}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"ask\"}}");
  HAS(out, "\"method\":\"elicitation/create\"");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"action\":"
                   "\"accept\",\"content\":{\"name\":\"Cy\"}}}");
  HAS(out, "\"id\":13,\"result\":{\"content\":[{\"type\":\"text\",\"text\":"
           "\"Hello Cy\"}]}");
}

static void test_stateless_multi_round(void **state) {
  pair *p = *state;
  char line[4096];
  char st[1024];
  const char *out;

  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"two\"," META26_ELICIT "}}");
  HAS(out, "\"inputRequests\":{\"step1\":");
  strcpy(st, state_of(out));
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":"
           "{\"name\":\"two\",\"inputResponses\":{\"step1\":{\"action\":"
           "\"accept\",\"content\":{\"name\":\"Ann\"}}},\"requestState\":"
           "\"%s\"," META26_ELICIT "}}",
           st);
  out = xchg(p->c, line);
  /* Round 2: the next question, and a state that remembers step1. */
  HAS(out, "\"inputRequests\":{\"1\":{\"method\":\"elicitation/create\"");
  HASNT(out, "\"step1\":{\"method\"");
  assert_string_not_equal(state_of(out), st);
  strcpy(st, state_of(out));
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":"
           "{\"name\":\"two\",\"inputResponses\":{\"1\":{\"action\":"
           "\"accept\",\"content\":{\"color\":\"red\"}}},\"requestState\":"
           "\"%s\"," META26_ELICIT "}}",
           st);
  out = xchg(p->c, line);
  HAS(out, "\"id\":3,\"result\":{\"content\":[{\"type\":\"text\",\"text\":"
           "\"color red\"}],\"resultType\":\"complete\"");
  /* The round-2 answer alone (state of round 1 lost) asks step1 again. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"two\",\"inputResponses\":{\"1\":{}},"
                   "" META26_ELICIT "}}");
  HAS(out, "\"inputRequests\":{\"step1\":");
}

/* One server, a 2025-11-25 session and a 2026 client at the same time. */
static void test_both_eras_one_server(void **state) {
  pair *p = *state;
  acp_mcp_conn *modern = NULL;
  acp_mcp_call *pending;
  const char *out;

  assert_int_equal(acp_mcp_conn_new(&modern, p->s, NULL), 0);
  do_init(p->c, "2025-11-25", "{\"sampling\":{}}");
  /* The 2026 client starts a slow call. */
  out = xchg(modern, "{\"jsonrpc\":\"2.0\",\"id\":\"m1\",\"method\":\"tools/"
                     "call\",\"params\":{\"name\":\"slow\"," META26 "}}");
  assert_string_equal(out, "");
  pending = g.pending;
  assert_non_null(pending);
  assert_true(acp_mcp_call_is_stateless(pending));
  /* Meanwhile the session is served in its own era. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"log\"}}");
  HAS(out, "\"text\":\"stateful {\\\"sampling\\\":{}}\"}]}}");
  HASNT(out, "resultType");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"sample\"}}");
  HAS(out, "sampling/createMessage");
  /* A 2026 request on the session's conn is served statelessly too. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"log\"," META26 "}}");
  HAS(out, "stateless {}");
  HAS(out, "\"resultType\":\"complete\"");
  /* The slow 2026 call answered later still gets the 2026 form. */
  assert_int_equal(acp_mcp_call_respond_text(pending, "late", 4, false), 0);
  out = drain(modern);
  assert_string_equal(
      out, "{\"jsonrpc\":\"2.0\",\"id\":\"m1\",\"result\":{\"content\":[{"
           "\"type\":\"text\",\"text\":\"late\"}],\"resultType\":"
           "\"complete\"," SERVER_INFO26 "}}\n");
  assert_string_equal(drain(p->c), "");
  assert_int_equal(acp_mcp_conn_version(p->c), ACP_MCP_VERSION_2025_11_25);
  assert_int_equal(acp_mcp_conn_version(modern), ACP_MCP_VERSION_UNKNOWN);
  /* Notifications for sessions do not reach the stateless conn. */
  assert_int_equal(acp_mcp_server_list_changed(p->s, ACP_MCP_LIST_TOOLS), 0);
  HAS(drain(p->c), "notifications/tools/list_changed");
  assert_string_equal(drain(modern), "");
  acp_mcp_conn_free(modern);
}

/* MARK: - Tasks */

#define META26_TASKS                                                           \
  "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","     \
  "\"io.modelcontextprotocol/clientCapabilities\":{\"elicitation\":{},"        \
  "\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}}}"

static int tool_quick(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  (void)a;
  (void)ud;
  return acp_mcp_call_respond_text(call, "quick done", 10, false);
}

static int tool_broken(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  (void)a;
  (void)ud;
  if (acp_mcp_call_start_task(call) == 0 &&
      acp_mcp_call_start_task(call) != ACP_ERR_INVALID_STATE)
    return acp_mcp_call_respond_text(call, "started twice", 13, true);
  return acp_mcp_call_respond_error(call, -32603, "crashed", "{\"x\":1}", 7);
}

static int tool_asker(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  int rv;
  (void)a;
  (void)ud;
  rv = acp_mcp_call_start_task(call);
  if (rv == 0)
    rv = acp_mcp_call_request_named(call, "q", "elicitation/create", ASK_NAME,
                                    strlen(ASK_NAME), 0, on_name, NULL);
  if (rv == 0)
    rv = acp_mcp_call_request_named(call, "q", "elicitation/create", ASK_NAME,
                                    strlen(ASK_NAME), 0, on_name,
                                    NULL) == ACP_ERR_INVALID_STATE
             ? 0
             : ACP_ERR_INTERNAL;
  return rv;
}

/* asker1: a task asking one question (the 2025 path sends each request
 * it makes, so asker's duplicate-key probe does not apply there). */
static int tool_asker1(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  int rv;
  (void)a;
  (void)ud;
  rv = acp_mcp_call_start_task(call);
  if (rv == 0)
    rv = acp_mcp_call_request_named(call, "q", "elicitation/create", ASK_NAME,
                                    strlen(ASK_NAME), 0, on_name, NULL);
  return rv;
}

/* URL mode elicitation: urlneed answers -32042, urlask asks in URL mode
 * ("no url" when the client did not declare it). */
static int tool_urlneed(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  static const char list[] =
      "[{\"mode\":\"url\",\"elicitationId\":\"e9\",\"url\":"
      "\"https://example.com/z\",\"message\":\"Authorize\"}]";
  int rv;
  (void)a;
  (void)ud;
  rv = acp_mcp_call_respond_url_elicitation_required(call, list, strlen(list));
  return rv == ACP_ERR_UNSUPPORTED
             ? acp_mcp_call_respond_text(call, "no url", 6, true)
             : rv;
}

static int tool_urlask(acp_mcp_call *call, const acp_json_val *a, void *ud) {
  static const char up[] =
      "{\"mode\":\"url\",\"message\":\"Sign in\",\"url\":"
      "\"https://example.com/x\",\"elicitationId\":\"e1\"}";
  int rv;
  (void)a;
  (void)ud;
  rv = acp_mcp_call_elicit(call, up, strlen(up), 0, on_name, NULL);
  return rv == ACP_ERR_UNSUPPORTED
             ? acp_mcp_call_respond_text(call, "no url", 6, true)
             : rv;
}

/* make_server() plus task tools: job (optional; answered by the test),
 * quick (optional; answers at once), broken (optional; fails), asker
 * (optional; asks a name as a task), must (required); at most 3 tasks,
 * kept 1 s, poll 100 ms; epoch 1700000000000 (2023-11-14T22:13:20Z). */
static int make_task_server(acp_mcp_server **out, const acp_mem *mem) {
  static const struct {
    const char *name;
    acp_mcp_tool_cb cb;
    acp_mcp_task_support sup;
  } tools[] = {{"job", tool_slow, ACP_MCP_TASK_OPTIONAL},
               {"quick", tool_quick, ACP_MCP_TASK_OPTIONAL},
               {"broken", tool_broken, ACP_MCP_TASK_OPTIONAL},
               {"asker", tool_asker, ACP_MCP_TASK_OPTIONAL},
               {"asker1", tool_asker1, ACP_MCP_TASK_OPTIONAL},
               {"must", tool_quick, ACP_MCP_TASK_REQUIRED},
               {"urlneed", tool_urlneed, ACP_MCP_TASK_FORBIDDEN},
               {"urlask", tool_urlask, ACP_MCP_TASK_FORBIDDEN}};
  acp_mcp_server *s = NULL;
  size_t i;
  int rv = make_server(&s, mem);

  if (rv != 0)
    return rv;
  for (i = 0; i < sizeof(tools) / sizeof(tools[0]) && rv == 0; i++) {
    acp_mcp_tool_def d;
    memset(&d, 0, sizeof(d));
    d.version = ACP_MCP_DEF_VERSION;
    d.name = tools[i].name;
    d.handler = tools[i].cb;
    rv = acp_mcp_server_add_tool(s, &d);
    if (rv == 0)
      rv = acp_mcp_server_set_tool_task_support(s, d.name, tools[i].sup);
  }
  if (rv == 0)
    rv = acp_mcp_server_set_tasks(s, 3, 1000, 100);
  acp_mcp_server_set_epoch(s, 1700000000000);
  if (rv != 0) {
    acp_mcp_server_free(s);
    return rv;
  }
  *out = s;
  return 0;
}

static int task_setup(void **state) {
  pair *p = calloc(1, sizeof(*p));
  memset(&g, 0, sizeof(g));
  assert_int_equal(make_task_server(&p->s, NULL), 0);
  assert_int_equal(acp_mcp_conn_new(&p->c, p->s, NULL), 0);
  *state = p;
  return 0;
}

/* The taskId in `out` (32 hex digits) into id[33]. */
static void task_id_of(const char *out, char id[33]) {
  const char *p = strstr(out, "\"taskId\":\"");
  size_t i;
  if (p == NULL)
    fail_msg("no taskId in: %s", out);
  p += 10;
  for (i = 0; i < 32; i++) {
    if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
      fail_msg("bad taskId in: %s", out);
    id[i] = p[i];
  }
  if (p[32] != '"')
    fail_msg("taskId not 32 hex digits: %s", out);
  id[32] = 0;
}

static const char *task_req(acp_mcp_conn *c, uint64_t now, int id,
                            const char *method, const char *task_id,
                            const char *extra, const char *meta) {
  static char line[1024];
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\",\"params\":{"
           "\"taskId\":\"%s\"%s%s%s}}",
           id, method, task_id, extra ? extra : "", meta ? "," : "",
           meta ? meta : "");
  return xchg_at(c, line, now);
}

static void test_tasks_stateless(void **state) {
  pair *p = *state;
  char id[33], id2[33], id3[33];
  const char *out;

  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/"
                   "discover\",\"params\":{" META26 "}}");
  HAS(out, "\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}");
  HASNT(out, "\"tasks\":{\"list\"");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\","
                   "\"params\":{" META26 "}}");
  HAS(out, "\"name\":\"job\",\"inputSchema\":{\"type\":\"object\"},"
           "\"execution\":{\"taskSupport\":\"optional\"}}");
  HAS(out, "\"execution\":{\"taskSupport\":\"required\"}");
  HAS(out, "{\"name\":\"echo\"");
  /* Without the extension a task-capable tool runs as an ordinary call. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"job\"," META26 "}}");
  assert_string_equal(out, "");
  assert_null(acp_mcp_call_task_id(g.pending));
  assert_int_equal(acp_mcp_call_start_task(g.pending), ACP_ERR_UNSUPPORTED);
  assert_int_equal(acp_mcp_call_respond_text(g.pending, "sync", 4, false), 0);
  out = drain(p->c);
  HAS(out, "\"text\":\"sync\"");
  HASNT(out, "taskId");
  /* A required tool without it: -32021 with the capability it needs. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"must\"," META26 "}}");
  HAS(out, "\"code\":-32021");
  HAS(out, "\"data\":{\"requiredCapabilities\":{\"extensions\":{"
           "\"io.modelcontextprotocol/tasks\":{}}}}");
  /* With it: a CreateTaskResult, flat. */
  g.pending = NULL;
  out = xchg_at(
      p->c,
      "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\","
      "\"params\":{\"name\":\"job\",\"task\":{\"ttl\":5}," META26_TASKS "}}",
      250);
  HAS(out, "\"result\":{\"resultType\":\"task\",\"taskId\":\"");
  HAS(out, "\"status\":\"working\",\"createdAt\":\"2023-11-14T22:13:20.250Z\","
           "\"lastUpdatedAt\":\"2023-11-14T22:13:20.250Z\",\"ttlMs\":1000,"
           "\"pollIntervalMs\":100,\"_meta\"");
  HASNT(out, "requestState");
  HASNT(out, "\"task\":{");
  task_id_of(out, id);
  assert_non_null(g.pending);
  assert_string_equal(acp_mcp_call_task_id(g.pending), id);
  assert_int_equal(acp_mcp_server_task_count(p->s), 1);
  /* Gated, unknown, working. */
  out = task_req(p->c, 300, 6, "tasks/get", id, NULL, META26);
  HAS(out, "\"code\":-32021");
  out = task_req(p->c, 300, 7, "tasks/get", "nope", NULL, META26_TASKS);
  HAS(out, "\"code\":-32602");
  out = task_req(p->c, 300, 8, "tasks/get", id, NULL, META26_TASKS);
  HAS(out, "\"status\":\"working\"");
  HAS(out, "\"resultType\":\"complete\"");
  HASNT(out, "\"result\":{\"content\"");
  /* The 2025 methods are gone. */
  out = task_req(p->c, 300, 9, "tasks/result", id, NULL, META26_TASKS);
  HAS(out, "\"code\":-32601");
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tasks/list\","
                "\"params\":{" META26_TASKS "}}",
                300);
  HAS(out, "\"code\":-32601");
  /* Finished later: tasks/get inlines the result. */
  assert_int_equal(acp_mcp_call_respond_text(g.pending, "later", 5, false), 0);
  out = task_req(p->c, 400, 11, "tasks/get", id, NULL, META26_TASKS);
  HAS(out, "\"status\":\"completed\"");
  HAS(out, "\"lastUpdatedAt\":\"2023-11-14T22:13:20.300Z\"");
  HAS(out, "\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"later\"}]");
  /* Cancelling an ended task: the same empty ack. */
  out = task_req(p->c, 400, 12, "tasks/cancel", id, NULL, META26_TASKS);
  HAS(out, "\"result\":{\"resultType\":\"complete\",\"_meta\"");
  HASNT(out, "taskId");
  /* A protocol error: failed with the error inlined, no result. */
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"broken\"," META26_TASKS "}}",
                500);
  task_id_of(out, id2);
  out = task_req(p->c, 500, 14, "tasks/get", id2, NULL, META26_TASKS);
  HAS(out, "\"status\":\"failed\"");
  HAS(out, "\"error\":{\"code\":-32603,\"message\":\"crashed\",\"data\":{"
           "\"x\":1}}");
  HASNT(out, "\"result\":{\"content\"");
  /* Input: the task asks, tasks/update answers. */
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"asker\"," META26_TASKS "}}",
                600);
  task_id_of(out, id3);
  out = task_req(p->c, 600, 16, "tasks/get", id3, NULL, META26_TASKS);
  HAS(out, "\"status\":\"input_required\"");
  HAS(out, "\"inputRequests\":{\"q\":{\"method\":\"elicitation/create\","
           "\"params\":{\"message\":\"Name?\"");
  out = task_req(p->c, 600, 17, "tasks/update", id3,
                 ",\"inputResponses\":\"x\"", META26_TASKS);
  HAS(out, "\"code\":-32602");
  out = task_req(p->c, 600, 18, "tasks/update", id3,
                 ",\"inputResponses\":{\"other\":{}}", META26_TASKS);
  HAS(out, "\"result\":{\"resultType\":\"complete\"");
  out = task_req(p->c, 600, 19, "tasks/get", id3, NULL, META26_TASKS);
  HAS(out, "\"status\":\"input_required\"");
  out = task_req(p->c, 600, 20, "tasks/update", id3,
                 ",\"inputResponses\":{\"q\":{\"action\":\"accept\","
                 "\"content\":{\"name\":\"Zed\"}}}",
                 META26_TASKS);
  HAS(out, "\"result\":{\"resultType\":\"complete\"");
  out = task_req(p->c, 600, 21, "tasks/get", id3, NULL, META26_TASKS);
  HAS(out, "\"status\":\"completed\"");
  HAS(out, "\"text\":\"Hello Zed\"");
  assert_int_equal(acp_mcp_server_task_count(p->s), 3);
  /* Full: a fourth task-capable call runs as an ordinary call... */
  g.pending = NULL;
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":22,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"job\"," META26_TASKS "}}",
                700);
  assert_string_equal(out, "");
  assert_int_equal(acp_mcp_call_start_task(g.pending), ACP_ERR_UNSUPPORTED);
  assert_int_equal(acp_mcp_call_respond_text(g.pending, "s", 1, false), 0);
  HASNT(drain(p->c), "taskId");
  /* ... until the ended ones expire (1 s from creation). */
  out = task_req(p->c, 1250, 23, "tasks/get", id, NULL, META26_TASKS);
  HAS(out, "\"code\":-32602");
  assert_int_equal(acp_mcp_server_task_count(p->s), 2);
  out = task_req(p->c, 1600, 24, "tasks/get", id3, NULL, META26_TASKS);
  HAS(out, "\"code\":-32602");
  assert_int_equal(acp_mcp_server_task_count(p->s), 0);
  /* Cancelling a running task: cancelled at once, its call told, its
   * late answer dropped. */
  g.pending = NULL;
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":25,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"job\"," META26_TASKS "}}",
                1700);
  task_id_of(out, id);
  out = task_req(p->c, 1700, 26, "tasks/cancel", id, NULL, META26_TASKS);
  HAS(out, "\"result\":{\"resultType\":\"complete\"");
  assert_int_equal(g.cancels, 1);
  assert_true(acp_mcp_call_is_cancelled(g.pending));
  assert_int_equal(acp_mcp_call_respond_text(g.pending, "late", 4, false), 0);
  out = task_req(p->c, 1700, 27, "tasks/get", id, NULL, META26_TASKS);
  HAS(out, "\"status\":\"cancelled\"");
  HASNT(out, "late");
  /* A task outlives the conn of its request. */
  {
    acp_mcp_conn *other = NULL;
    assert_int_equal(acp_mcp_conn_new(&other, p->s, NULL), 0);
    g.pending = NULL;
    out = xchg_at(other,
                  "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                  "\"params\":{\"name\":\"job\"," META26_TASKS "}}",
                  1800);
    task_id_of(out, id2);
    acp_mcp_conn_free(other);
    assert_int_equal(acp_mcp_call_respond_text(g.pending, "kept", 4, false), 0);
    out = task_req(p->c, 1800, 28, "tasks/get", id2, NULL, META26_TASKS);
    HAS(out, "\"text\":\"kept\"");
  }
}

/* tasks/list in pages of the server's page size: newest first, a cursor
 * that stays right while tasks are created between pages, bad cursors
 * -32602. */
static void test_tasks_list_paging(void **state) {
  pair *p = *state;
  char ids[6][33], line[512];
  const char *out, *cur;
  char cursor[32];
  int i;

  assert_int_equal(acp_mcp_server_set_tasks(p->s, 10, 60000, 100), 0);
  do_init(p->c, "2025-11-25", "{}");
  acp_mcp_server_set_page_size(p->s, 2);
  for (i = 0; i < 5; i++) {
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
             "\"params\":{\"name\":\"job\",\"task\":{}}}",
             100 + i);
    out = xchg_at(p->c, line, 1000);
    task_id_of(out, ids[i]);
  }
  /* Page 1: the two newest, and a cursor. */
  out = xchg_at(
      p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/list\"}", 1000);
  HAS(out, ids[4]);
  HAS(out, ids[3]);
  HASNT(out, ids[2]);
  assert_true(strstr(out, ids[4]) < strstr(out, ids[3]));
  cur = strstr(out, "\"nextCursor\":\"");
  assert_non_null(cur);
  assert_int_equal(sscanf(cur + 14, "%31[^\"]", cursor), 1);
  /* A task created meanwhile does not shift the next page. */
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":200,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"job\",\"task\":{}}}",
                1000);
  task_id_of(out, ids[5]);
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tasks/list\","
           "\"params\":{\"cursor\":\"%s\"}}",
           cursor);
  out = xchg_at(p->c, line, 1000);
  HAS(out, ids[2]);
  HAS(out, ids[1]);
  HASNT(out, ids[0]);
  HASNT(out, ids[3]);
  HASNT(out, ids[5]);
  cur = strstr(out, "\"nextCursor\":\"");
  assert_non_null(cur);
  assert_int_equal(sscanf(cur + 14, "%31[^\"]", cursor), 1);
  /* The last page: the oldest, no cursor. */
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tasks/list\","
           "\"params\":{\"cursor\":\"%s\"}}",
           cursor);
  out = xchg_at(p->c, line, 1000);
  HAS(out, ids[0]);
  HASNT(out, ids[1]);
  HASNT(out, "nextCursor");
  /* The first page now starts with the new task. */
  out = xchg_at(
      p->c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tasks/list\"}", 1000);
  HAS(out, ids[5]);
  HAS(out, ids[4]);
  HASNT(out, ids[3]);
  /* A cursor below every task: an empty last page. */
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tasks/list\","
                "\"params\":{\"cursor\":\"k1\"}}",
                1000);
  HAS(out, "\"result\":{\"tasks\":[]}");
  /* Bad cursors. */
  {
    static const char *const bad[] = {"\"k0\"",
                                      "\"k\"",
                                      "\"kx\"",
                                      "\"t2\"",
                                      "\"k-1\"",
                                      "5",
                                      "\"k99999999999999999999\"",
                                      "{}"};
    size_t k;
    for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
      snprintf(line, sizeof(line),
               "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tasks/list\","
               "\"params\":{\"cursor\":%s}}",
               bad[k]);
      out = xchg_at(p->c, line, 1000);
      if (strstr(out, "\"code\":-32602") == NULL)
        fail_msg("cursor %s: %s", bad[k], out);
    }
  }
  /* A null cursor is the first page. */
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tasks/list\","
                "\"params\":{\"cursor\":null}}",
                1000);
  HAS(out, ids[5]);
  acp_mcp_server_set_page_size(p->s, 0);
  out = xchg_at(
      p->c, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tasks/list\"}", 1000);
  for (i = 0; i < 6; i++)
    HAS(out, ids[i]);
  HASNT(out, "nextCursor");
}

/* The tasks extension on subscriptions/listen: a listen naming task ids
 * (filter member taskIds, honoured only when the request declares the
 * extension) gets notifications/tasks, the whole task as tasks/get shows
 * it, at once and on each status change, tagged with its id. */
static void test_tasks_listen(void **state) {
  pair *p = *state;
  char id[33], id2[33];
  const char *out;

  g.pending = NULL;
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"job\"," META26_TASKS "}}",
                100);
  task_id_of(out, id);
  {
    char req[1024];
    snprintf(req, sizeof(req),
             "{\"jsonrpc\":\"2.0\",\"id\":\"T\",\"method\":\"subscriptions/"
             "listen\",\"params\":{" META26_TASKS ",\"notifications\":{"
             "\"taskIds\":[\"%s\",\"unknown\"]}}}",
             id);
    out = xchg_at(p->c, req, 100);
  }
  HAS(out, "\"method\":\"notifications/subscriptions/acknowledged\",\"params\":"
           "{" SUBID("\"T\"") ",\"notifications\":{\"taskIds\":[\"");
  HAS(out, "\"unknown\"]}}}\n");
  /* Its status now (unknown ids stay silent). */
  HAS(out, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks\",\"params\":"
           "{" SUBID("\"T\"") ",\"taskId\":\"");
  HAS(out, "\"status\":\"working\"");
  /* A listen without the extension declared: taskIds not honoured. */
  {
    char req[1024];
    snprintf(req, sizeof(req),
             "{\"jsonrpc\":\"2.0\",\"id\":\"N\",\"method\":\"subscriptions/"
             "listen\",\"params\":{" META26 ",\"notifications\":{"
             "\"taskIds\":[\"%s\"]}}}",
             id);
    out = xchg_at(p->c, req, 100);
  }
  HASNT(out, "taskIds");
  HASNT(out, "notifications/tasks");
  /* It ends: the result inlined, to "T" only. */
  assert_int_equal(acp_mcp_call_respond_text(g.pending, "done", 4, false), 0);
  out = drain(p->c);
  HAS(out, "\"method\":\"notifications/tasks\",\"params\":{" SUBID("\"T\""));
  HAS(out, "\"status\":\"completed\"");
  HAS(out, "\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]");
  HASNT(out, SUBID("\"N\""));
  /* Input: input_required with the request, then working, then done. */
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"asker\"," META26_TASKS "}}",
                200);
  task_id_of(out, id2);
  {
    char req[1024];
    snprintf(req, sizeof(req),
             "{\"jsonrpc\":\"2.0\",\"id\":\"U\",\"method\":\"subscriptions/"
             "listen\",\"params\":{" META26_TASKS ",\"notifications\":{"
             "\"taskIds\":[\"%s\"]}}}",
             id2);
    out = xchg_at(p->c, req, 200);
  }
  HAS(out, "\"status\":\"input_required\"");
  HAS(out, "\"inputRequests\":{\"q\":{\"method\":\"elicitation/create\"");
  out = task_req(p->c, 300, 3, "tasks/update", id2,
                 ",\"inputResponses\":{\"q\":{\"action\":\"accept\","
                 "\"content\":{\"name\":\"Zed\"}}}",
                 META26_TASKS);
  HAS(out, "{" SUBID("\"U\"") ",\"taskId\":\"");
  HAS(out, "\"status\":\"working\"");
  HAS(out, "\"status\":\"completed\"");
  HAS(out, "\"text\":\"Hello Zed\"");
  /* Bad filters. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"subscriptions/"
                   "listen\",\"params\":{" META26_TASKS ",\"notifications\":{"
                   "\"taskIds\":\"x\"}}}");
  HAS(out, "\"code\":-32602");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"subscriptions/"
                   "listen\",\"params\":{" META26_TASKS ",\"notifications\":{"
                   "\"taskIds\":[7]}}}");
  HAS(out, "\"code\":-32602");
}

/* 2025-11-25: a task that needs input while running sends its request
 * to its session with related-task _meta and is input_required until
 * answered; the answer resumes it. A session that goes with the request
 * open leaves the task working (no dangling call). */
static void test_tasks_2025_input(void **state) {
  pair *p = *state;
  acp_mcp_conn *other = NULL;
  char id[33], id2[33], line[512];
  const char *out;

  do_init(p->c, "2025-11-25", "{\"elicitation\":{}}");
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"asker1\",\"task\":{}}}",
                1000);
  HAS(out, "\"id\":1,\"result\":{\"task\":{\"taskId\":\"");
  task_id_of(out, id);
  /* The request, tied to the task; the status change. */
  snprintf(line, sizeof(line),
           "\"method\":\"elicitation/create\",\"params\":{\"message\":"
           "\"Name?\",\"requestedSchema\":{\"type\":\"object\",\"properties\":"
           "{\"name\":{\"type\":\"string\"}}},\"_meta\":{\"io.modelcontext"
           "protocol/related-task\":{\"taskId\":\"%s\"}}}",
           id);
  HAS(out, line);
  HAS(out, "\"method\":\"notifications/tasks/status\"");
  HAS(out, "\"status\":\"input_required\"");
  out = task_req(p->c, 1000, 2, "tasks/get", id, NULL, NULL);
  HAS(out, "\"status\":\"input_required\"");
  /* The answer (the request's id is 0: the first this session got). */
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"action\":"
                "\"accept\",\"content\":{\"name\":\"Ann\"}}}",
                1100);
  HAS(out, "\"status\":\"completed\"");
  out = task_req(p->c, 1100, 3, "tasks/result", id, NULL, NULL);
  HAS(out, "\"text\":\"Hello Ann\"");
  HAS(out, "\"io.modelcontextprotocol/related-task\":{\"taskId\":\"");
  /* Another session's task; that session goes with its request open. */
  assert_int_equal(acp_mcp_conn_new(&other, p->s, NULL), 0);
  do_init(other, "2025-11-25", "{\"elicitation\":{}}");
  out = xchg_at(other,
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"asker1\",\"task\":{}}}",
                1200);
  task_id_of(out, id2);
  HAS(out, "\"method\":\"elicitation/create\"");
  acp_mcp_conn_free(other);
  /* Not asked again anywhere; the task is no one's now, still there. */
  assert_string_equal(drain(p->c), "");
  assert_int_equal(acp_mcp_server_task_count(p->s), 2);
}

static void test_tasks_2025(void **state) {
  pair *p = *state;
  acp_mcp_conn *old = NULL;
  char id[33], id2[33];
  const char *out;

  /* Only 2025-11-25 sessions see the tasks capability. */
  assert_int_equal(acp_mcp_conn_new(&old, p->s, NULL), 0);
  out = xchg(old, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
                  "\"params\":{\"protocolVersion\":\"2025-06-18\","
                  "\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
                  "\"version\":\"1\"}}}");
  HASNT(out, "\"tasks\"");
  out = xchg(old, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/list\"}");
  HAS(out, "\"code\":-32601");
  acp_mcp_conn_free(old);
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
                   "\"params\":{\"protocolVersion\":\"2025-11-25\","
                   "\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
                   "\"version\":\"1\"}}}");
  HAS(out, "\"tasks\":{\"list\":{},\"cancel\":{},\"requests\":{\"tools\":{"
           "\"call\":{}}}}");
  HASNT(out, "extensions");
  xchg(p->c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
  /* A task-augmented call. */
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"job\",\"task\":{\"ttl\":60000}}}",
                1000);
  HAS(out, "\"result\":{\"task\":{\"taskId\":\"");
  HAS(out, "\"status\":\"working\",\"createdAt\":\"2023-11-14T22:13:21.000Z\""
           ",\"lastUpdatedAt\":\"2023-11-14T22:13:21.000Z\",\"ttl\":1000,"
           "\"pollInterval\":100}}");
  HASNT(out, "resultType");
  task_id_of(out, id);
  out = task_req(p->c, 1000, 2, "tasks/get", id, NULL, NULL);
  HAS(out, "\"result\":{\"taskId\":\"");
  HAS(out, "\"status\":\"working\"");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tasks/list\"}");
  HAS(out, id);
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tasks/list\","
                   "\"params\":{\"cursor\":\"x\"}}");
  HAS(out, "\"code\":-32602");
  /* tasks/result waits for the end, then carries related-task. */
  out = task_req(p->c, 1000, 5, "tasks/result", id, NULL, NULL);
  assert_string_equal(out, "");
  out = task_req(p->c, 1000, 55, "tasks/update", id, NULL, NULL);
  HAS(out, "\"code\":-32601");
  assert_int_equal(acp_mcp_call_respond_text(g.pending, "done", 4, false), 0);
  out = drain(p->c);
  HAS(out, "\"id\":5,\"result\":{\"content\":[{\"type\":\"text\",\"text\":"
           "\"done\"}],\"_meta\":{\"io.modelcontextprotocol/"
           "related-task\":{\"taskId\":\"");
  HAS(out, "\"method\":\"notifications/tasks/status\"");
  HAS(out, "\"status\":\"completed\"");
  out = task_req(p->c, 1000, 6, "tasks/cancel", id, NULL, NULL);
  HAS(out, "\"code\":-32602");
  /* Answered at once: still a task (the client asked for one). */
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"quick\",\"task\":{}}}",
                1000);
  task_id_of(out, id2);
  HAS(drain(p->c), "");
  out = task_req(p->c, 1000, 8, "tasks/result", id2, NULL, NULL);
  HAS(out, "\"text\":\"quick done\"");
  /* Failed: tasks/result is the error. */
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"broken\",\"task\":{}}}",
                1000);
  task_id_of(out, id2);
  out = task_req(p->c, 1000, 10, "tasks/result", id2, NULL, NULL);
  HAS(out, "\"id\":10,\"error\":{\"code\":-32603,\"message\":\"crashed\"");
  /* Refusals: task for a tool that forbids it, required without. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":"
                   "\"x\"},\"task\":{}}}");
  HAS(out, "\"code\":-32601");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"must\"}}");
  HAS(out, "\"code\":-32601");
  /* Full (3 held): refused. */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"quick\",\"task\":{}}}");
  HAS(out, "\"code\":-32603");
  /* A task's request needs the capability (this session has none). */
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"asker\",\"task\":{}}}",
                5000);
  HAS(out, "\"result\":{\"task\":");
  task_id_of(out, id2);
  out = task_req(p->c, 5000, 15, "tasks/result", id2, NULL, NULL);
  HAS(out, "\"isError\":true");
  /* Cancel a running one; its waiter hears. Another session sees nothing. */
  g.pending = NULL;
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"job\",\"task\":{}}}",
                5000);
  task_id_of(out, id);
  assert_int_equal(acp_mcp_conn_new(&old, p->s, NULL), 0);
  do_init(old, "2025-11-25", "{}");
  out = task_req(old, 5000, 1, "tasks/get", id, NULL, NULL);
  HAS(out, "\"code\":-32602");
  out = task_req(old, 5000, 2, "tasks/get", id, NULL, META26_TASKS);
  HAS(out, "\"code\":-32602");
  out = task_req(old, 5000, 3, "tasks/result", id, NULL, NULL);
  HAS(out, "\"code\":-32602");
  acp_mcp_conn_free(old);
  out = task_req(p->c, 5000, 17, "tasks/result", id, NULL, NULL);
  assert_string_equal(out, "");
  out = task_req(p->c, 5000, 18, "tasks/cancel", id, NULL, NULL);
  HAS(out, "\"id\":18,\"result\":{\"taskId\"");
  HAS(out, "\"status\":\"cancelled\"");
  HAS(out, "\"id\":17,\"error\"");
  assert_int_equal(g.cancels, 1);
  assert_int_equal(acp_mcp_call_respond_text(g.pending, "x", 1, false), 0);
  /* A waiter whose session goes away is dropped with it. */
  g.pending = NULL;
  out = xchg_at(p->c,
                "{\"jsonrpc\":\"2.0\",\"id\":19,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"job\",\"task\":{}}}",
                9000);
  task_id_of(out, id);
  out = task_req(p->c, 9000, 20, "tasks/result", id, NULL, NULL);
  assert_string_equal(out, "");
}

static void test_url_elicitation_server(void **state) {
  pair *p = *state;
  acp_mcp_conn *form = NULL;
  const char *out;

  /* elicitation: {} is form only. */
  assert_int_equal(acp_mcp_conn_new(&form, p->s, NULL), 0);
  do_init(form, "2025-11-25", "{\"elicitation\":{}}");
  out = xchg(form, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"urlask\"}}");
  HAS(out, "no url");
  out = xchg(form, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"urlneed\"}}");
  HAS(out, "no url");
  assert_int_equal(acp_mcp_conn_elicitation_complete(form, "e1"),
                   ACP_ERR_UNSUPPORTED);
  acp_mcp_conn_free(form);
  /* {url} only. */
  do_init(p->c, "2025-11-25", "{\"elicitation\":{\"url\":{}}}");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"urlask\"}}");
  HAS(out, "\"method\":\"elicitation/create\",\"params\":{\"mode\":\"url\"");
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"ask\"}}");
  HAS(out, "no elicitation"); /* a form elicitation is not for this client */
  out = xchg(p->c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"urlneed\"}}");
  HAS(out, "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32042,"
           "\"message\":\"This request requires more information.\",\"data\":"
           "{\"elicitations\":[{\"mode\":\"url\",\"elicitationId\":\"e9\"");
  assert_int_equal(acp_mcp_conn_elicitation_complete(p->c, "e9"), 0);
  assert_string_equal(drain(p->c),
                      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                      "elicitation/complete\",\"params\":{\"elicitationId\":"
                      "\"e9\"}}\n");
  assert_int_equal(acp_mcp_conn_elicitation_complete(NULL, "x"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_call_respond_url_elicitation_required(NULL, "[]", 2),
                   ACP_ERR_INVALID_ARGUMENT);
}

static void test_task_api_errors(void **state) {
  acp_mcp_server *s = NULL;
  (void)state;
  assert_int_equal(acp_mcp_server_new(&s, "s", "1", NULL, NULL), 0);
  assert_int_equal(acp_mcp_server_set_tasks(NULL, 1, 1, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_server_set_tasks(s, 1, 0, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(
      acp_mcp_server_set_tool_task_support(s, "nope", ACP_MCP_TASK_OPTIONAL),
      ACP_ERR_NOT_FOUND);
  assert_int_equal(
      acp_mcp_server_set_tool_task_support(s, "x", (acp_mcp_task_support)7),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_call_start_task(NULL), ACP_ERR_INVALID_ARGUMENT);
  assert_null(acp_mcp_call_task_id(NULL));
  assert_int_equal(acp_mcp_server_task_count(s), 0);
  assert_int_equal(mcp_fixture_add_echo(s), 0);
  /* Set, changed, cleared: the list entry follows. */
  assert_int_equal(
      acp_mcp_server_set_tool_task_support(s, "echo", ACP_MCP_TASK_REQUIRED),
      0);
  assert_non_null(strstr(acp_mcp_server_tool_json(s, "echo", 4, NULL),
                         "\"execution\":{\"taskSupport\":\"required\"}}"));
  assert_int_equal(
      acp_mcp_server_set_tool_task_support(s, "echo", ACP_MCP_TASK_OPTIONAL),
      0);
  assert_non_null(strstr(acp_mcp_server_tool_json(s, "echo", 4, NULL),
                         "\"execution\":{\"taskSupport\":\"optional\"}}"));
  assert_int_equal(
      acp_mcp_server_set_tool_task_support(s, "echo", ACP_MCP_TASK_FORBIDDEN),
      0);
  assert_null(
      strstr(acp_mcp_server_tool_json(s, "echo", 4, NULL), "execution"));
  acp_mcp_server_free(s);
}

static int failmem_task_scenario(const acp_mem *mem) {
  static const char *const lines[] = {
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"job\"," META26_TASKS "}}",
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"broken\"," META26_TASKS "}}",
      "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"asker\"," META26_TASKS "}}",
      "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"server/discover\","
      "\"params\":{" META26 "}}",
      "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
      "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{"
      "\"elicitation\":{\"url\":{}}},"
      "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}",
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"quick\",\"task\":{}}}",
      "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"urlneed\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"urlask\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tasks/list\"}",
  };
  acp_mcp_server *s = NULL;
  acp_mcp_conn *c = NULL;
  char ids[4][33];
  int nids = 0;
  size_t i;
  int rv;

  memset(&g, 0, sizeof(g));
  rv = make_task_server(&s, mem);
  if (rv != 0)
    return rv;
  rv = acp_mcp_conn_new(&c, s, NULL);
  if (rv != 0)
    goto done;
  for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
    char buf[512];
    const char *out;
    const char *t;
    size_t n = strlen(lines[i]);
    size_t k;
    acp_ssize r;

    memcpy(buf, lines[i], n);
    buf[n] = '\n';
    r = acp_mcp_conn_recv(c, buf, n + 1, 0);
    if (r < 0) {
      rv = (int)r;
      goto done;
    }
    r = acp_mcp_conn_send(c, &out);
    if (r < 0) {
      rv = (int)r;
      goto done;
    }
    /* The output is not NUL-terminated: search within its length. */
    t = NULL;
    for (k = 0; out != NULL && k + 42 < (size_t)r; k++)
      if (memcmp(out + k, "\"taskId\":\"", 10) == 0) {
        t = out + k;
        break;
      }
    if (t != NULL && nids < 4) {
      memcpy(ids[nids], t + 10, 32);
      ids[nids++][32] = 0;
    }
  }
  /* Poll, answer and cancel what was created (ids: job, broken, asker,
   * quick; some are missing when an allocation failed). */
  for (i = 0; i < (size_t)nids; i++) {
    const char *method[] = {"tasks/get", "tasks/update", "tasks/cancel",
                            "tasks/result"};
    size_t k;
    for (k = 0; k < 4; k++) {
      char buf[768];
      const char *out;
      acp_ssize r;
      int n = snprintf(buf, sizeof(buf),
                       "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\","
                       "\"params\":{\"taskId\":\"%s\",\"inputResponses\":{"
                       "\"q\":{\"content\":{\"name\":\"n\"}}}%s}}\n",
                       (int)(10 + i * 4 + k), method[k], ids[i],
                       k == 3 ? "" : "," META26_TASKS);
      r = acp_mcp_conn_recv(c, buf, (size_t)n, 0);
      if (r < 0) {
        rv = (int)r;
        goto done;
      }
      r = acp_mcp_conn_send(c, &out);
      if (r < 0) {
        rv = (int)r;
        goto done;
      }
    }
  }
  if (g.pending != NULL)
    rv = acp_mcp_call_respond_text(g.pending, "x", 1, false);
  if (rv == 0 && acp_mcp_conn_is_initialized(c))
    rv = acp_mcp_conn_elicitation_complete(c, "e1");
done:
  acp_mcp_conn_free(c);
  acp_mcp_server_free(s);
  return rv;
}

static void test_task_allocation_failure_loop(void **state) {
  acp_mem mem = {&fm, fm_malloc, fm_free, fm_calloc, fm_realloc};
  long total;
  long i;
  int failures = 0;
  (void)state;

  memset(&fm, 0, sizeof(fm));
  fm.fail_at = 1L << 40;
  assert_int_equal(failmem_task_scenario(&mem), 0);
  assert_int_equal(fm.live, 0);
  total = fm.count;
  assert_true(total > 50);
  for (i = 0; i < total; i++) {
    int rv;
    fm.count = 0;
    fm.fail_at = i;
    fm.live = 0;
    rv = failmem_task_scenario(&mem);
    if (rv != 0)
      failures++;
    assert_int_equal(fm.live, 0);
  }
  assert_true(failures > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_initialize_negotiation_matrix, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_initialize_result_capabilities,
                                      setup, teardown),
      cmocka_unit_test(test_empty_server_offers_nothing),
      cmocka_unit_test(test_tool_index_many_tools),
      cmocka_unit_test(test_sequential_calls_allocate_nothing),
      cmocka_unit_test(test_respond_text_bytes),
      cmocka_unit_test_setup_teardown(test_requests_before_initialize, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_initialize_bad_params, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_malformed_json_keeps_serving, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_tools_list_and_echo, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_unknown_tool_is_invalid_params,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_wrong_param_types, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tool_handler_error_becomes_is_error,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_pagination_across_pages, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_resources, setup, teardown),
      cmocka_unit_test_setup_teardown(test_prompts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_completion, setup, teardown),
      cmocka_unit_test_setup_teardown(test_logging_level_filter, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_progress_notifications, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_cancel_suppresses_response, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_conn_free_cancels_calls, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_late_answer_without_cancel, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_sampling_roundtrip_raw, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_sampling_unsupported_by_client,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel_cancels_sub_requests, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_subscriptions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list_changed_and_remove, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_batches_only_with_2025_03_26, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_registration_errors, setup,
                                      teardown),
      cmocka_unit_test(test_uri_template_match),
      cmocka_unit_test_setup_teardown(test_stateless_discover, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stateless_meta_errors, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_stateless_listen, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stateless_listen_errors, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_stateless_listen_bounds, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_stateless_results, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stateless_cache_hints, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_stateless_log_level, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_both_eras_one_server, setup,
                                      teardown),
      cmocka_unit_test(test_sha256_hmac_vectors),
      cmocka_unit_test_setup_teardown(test_stateless_input_required, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_stateless_multi_round, setup,
                                      teardown),
      cmocka_unit_test(test_versions_and_levels),
      cmocka_unit_test_setup_teardown(test_tasks_stateless, task_setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_tasks_listen, task_setup, teardown),
      cmocka_unit_test_setup_teardown(test_tasks_2025, task_setup, teardown),
      cmocka_unit_test_setup_teardown(test_tasks_2025_input, task_setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_tasks_list_paging, task_setup,
                                      teardown),
      cmocka_unit_test(test_task_api_errors),
      cmocka_unit_test_setup_teardown(test_url_elicitation_server, task_setup,
                                      teardown),
      cmocka_unit_test(test_task_allocation_failure_loop),
      cmocka_unit_test(test_allocation_failure_loop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
