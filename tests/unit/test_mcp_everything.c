/*
 * The `acp mcp serve --everything` fixture set (src/fixtures, the
 * acp_fixtures library),
 * in memory: an acp_mcp_client back to back with an acp_mcp_conn on the
 * registry, calling every fixture and checking the results the MCP
 * conformance suite's server scenarios check.
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

#include "mcp_everything.h"

/* MARK: - Harness */

typedef struct rec {
  int status;
  int calls;
  int64_t code;
  char text[32768];
} rec;

typedef struct world {
  acp_mcp_server *s;
  acp_mcp_conn *conn;
  acp_mcp_client *c;
  /* client side */
  int logs;
  char last_log[256];
  int progress_calls;
  double progress[8];
  double progress_total;
  acp_mcp_client_request *held;
  char held_params[4096];
  /* server side */
  int close_stream_calls;
  int pongs; /* empty results the client sent (answers to the fixture's pings)
              */
} world;

static world W;

static int pump(void) {
  int rounds;

  for (rounds = 0; rounds < 100; rounds++) {
    const char *d;
    acp_ssize n1, n2, r;

    n1 = acp_mcp_client_send(W.c, &d);
    if (n1 < 0)
      return (int)n1;
    if (n1 > 0) {
      acp_ssize k;
      for (k = 0; k + 11 <= n1; k++)
        if (memcmp(d + k, "\"result\":{}", 11) == 0)
          W.pongs++;
      r = acp_mcp_conn_recv(W.conn, d, (size_t)n1, 0);
      if (r < 0)
        return (int)r;
    }
    n2 = acp_mcp_conn_send(W.conn, &d);
    if (n2 < 0)
      return (int)n2;
    if (n2 > 0) {
      r = acp_mcp_client_recv(W.c, d, (size_t)n2, 0);
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
    r->code = msg->error_code;
    snprintf(r->text, sizeof(r->text), "%lld %s", (long long)msg->error_code,
             msg->error_message);
  }
  return 0;
}

#define HAS(s, needle)                                                         \
  do {                                                                         \
    if (strstr((s), (needle)) == NULL)                                         \
      fail_msg("expected %s in: %s", needle, s);                               \
  } while (0)
#define HASNT(s, needle)                                                       \
  do {                                                                         \
    if (strstr((s), (needle)) != NULL)                                         \
      fail_msg("did not expect %s in: %s", needle, s);                         \
  } while (0)

/* MARK: - Client callbacks */

static int c_log(acp_mcp_client *c, acp_mcp_log_level level, const char *logger,
                 size_t ln, const acp_json_val *data, void *ud) {
  size_t n;
  const char *raw = acp_json_raw(data, &n);
  (void)c;
  (void)ud;
  assert_int_equal(level, ACP_MCP_LOG_INFO);
  assert_non_null(logger);
  assert_true(ln > 0);
  snprintf(W.last_log, sizeof(W.last_log), "%.*s", (int)n, raw ? raw : "");
  W.logs++;
  return 0;
}

static int c_progress(acp_mcp_client *c, double p, double total, const char *m,
                      size_t mn, void *ud) {
  (void)c;
  (void)m;
  (void)mn;
  (void)ud;
  if (W.progress_calls < 8)
    W.progress[W.progress_calls] = p;
  W.progress_calls++;
  W.progress_total = total;
  return 0;
}

/* Sampling and elicitation requests are held for the test to answer. */
static int c_request(acp_mcp_client *c, acp_mcp_client_request *req,
                     const acp_json_val *params, void *ud) {
  size_t n;
  const char *raw = acp_json_raw(params, &n);
  (void)c;
  (void)ud;
  snprintf(W.held_params, sizeof(W.held_params), "%.*s", (int)n,
           raw ? raw : "");
  W.held = req;
  return 0;
}

static int fake_close_stream(acp_mcp_call *call) {
  assert_non_null(call);
  W.close_stream_calls++;
  return ACP_ERR_UNSUPPORTED; /* ignored by the fixture */
}

static void build(bool client_caps) {
  acp_mcp_client_callbacks *cbs = NULL;
  rec r;

  memset(&W, 0, sizeof(W));
  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_server_new(&W.s, "everything", "1", NULL, NULL), 0);
  assert_int_equal(mcp_everything_register_with(W.s, fake_close_stream), 0);
  assert_int_equal(acp_mcp_conn_new(&W.conn, W.s, NULL), 0);
  assert_int_equal(acp_mcp_client_callbacks_new(&cbs), 0);
  if (client_caps) {
    acp_mcp_client_callbacks_set_on_sampling(cbs, c_request);
    acp_mcp_client_callbacks_set_on_elicitation(cbs, c_request);
  }
  acp_mcp_client_callbacks_set_on_log(cbs, c_log);
  assert_int_equal(acp_mcp_client_new(&W.c, cbs, "test", "1", NULL, NULL), 0);
  acp_mcp_client_callbacks_free(cbs);
  assert_int_equal(acp_mcp_client_initialize(W.c, 0, on_result, &r), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, 0);
}

static int setup(void **state) {
  (void)state;
  build(true);
  return 0;
}

static int setup_no_caps(void **state) {
  (void)state;
  build(false);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  acp_mcp_client_free(W.c);
  acp_mcp_conn_free(W.conn);
  acp_mcp_server_free(W.s);
  return 0;
}

static void call_tool(const char *name, const char *args, rec *r) {
  memset(r, 0, sizeof(*r));
  assert_int_equal(acp_mcp_client_call_tool(W.c, name, args,
                                            args ? strlen(args) : 0, NULL, 0,
                                            on_result, r, NULL),
                   0);
  assert_int_equal(pump(), 0);
}

/* Answer the held server request and pump. */
static void answer_held(const char *result) {
  assert_non_null(W.held);
  assert_int_equal(acp_mcp_client_respond(W.c, W.held, result, strlen(result)),
                   0);
  W.held = NULL;
  assert_int_equal(pump(), 0);
}

/* MARK: - Registration and lists */

static void test_register_errors(void **state) {
  acp_mcp_server *s = NULL;
  (void)state;
  assert_int_equal(mcp_everything_register_with(NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_server_new(&s, "x", "1", NULL, NULL), 0);
  assert_int_equal(mcp_everything_register_with(s, NULL), 0);
  /* Every name is taken now. */
  assert_int_equal(mcp_everything_register_with(s, NULL),
                   ACP_ERR_INVALID_STATE);
  acp_mcp_server_free(s);
}

static void test_capabilities(void **state) {
  size_t n;
  const char *caps = acp_mcp_client_server_capabilities(W.c, &n);
  char buf[1024];
  (void)state;
  assert_non_null(caps);
  snprintf(buf, sizeof(buf), "%.*s", (int)n, caps);
  HAS(buf, "\"logging\":{}");
  HAS(buf, "\"completions\":{}");
  HAS(buf, "\"subscribe\":true");
  HAS(buf, "\"tools\":");
  HAS(buf, "\"prompts\":");
}

static void test_lists(void **state) {
  static const char *const tools[] = {
      "test_simple_text",
      "test_image_content",
      "test_audio_content",
      "test_embedded_resource",
      "test_multiple_content_types",
      "test_tool_with_logging",
      "test_tool_with_progress",
      "test_error_handling",
      "test_sampling",
      "test_elicitation",
      "test_elicitation_sep1034_defaults",
      "test_elicitation_sep1330_enums",
      "json_schema_2020_12_tool",
      "test_reconnection",
      "test_missing_capability",
      "test_logging_tool",
      "test_trigger_tool_change",
      "test_trigger_prompt_change",
      "test_streaming_elicitation",
      "test_input_required_result_elicitation",
      "test_input_required_result_sampling",
      "test_input_required_result_list_roots",
      "test_input_required_result_request_state",
      "test_input_required_result_multi_round",
      "test_input_required_result_multiple_inputs",
      "test_input_required_result_tampered_state",
      "test_input_required_result_capabilities",
      "test_custom_header",
      "echo",
      "greet",
      "slow_compute",
      "failing_job",
      "protocol_error_job",
      "confirm_delete",
      "multi_input",
      "test_tool_with_task"};
  acp_json_doc *doc = NULL;
  const acp_json_val *arr, *t;
  rec r;
  size_t i, count = 0;
  (void)state;

  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_TOOLS, NULL, NULL, 0,
                                       on_result, &r, NULL),
                   0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, 0);
  for (i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
    char q[96];
    snprintf(q, sizeof(q), "\"name\":\"%s\"", tools[i]);
    HAS(r.text, q);
  }
  /* Every tool has a description and an object inputSchema. */
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  assert_int_equal(acp_json_doc_parse(doc, r.text, strlen(r.text), NULL), 0);
  arr = acp_json_obj_getz(acp_json_doc_root(doc), "tools");
  for (t = acp_json_child(arr); t != NULL; t = acp_json_next(t)) {
    assert_int_equal(acp_json_type_of(acp_json_obj_getz(t, "description")),
                     ACP_JSON_STRING);
    assert_int_equal(acp_json_type_of(acp_json_obj_getz(t, "inputSchema")),
                     ACP_JSON_OBJECT);
    count++;
  }
  assert_int_equal(count, sizeof(tools) / sizeof(tools[0]));
  acp_json_doc_free(doc);
  /* JSON Schema 2020-12 keywords are kept verbatim. */
  HAS(r.text, "\"$schema\":\"https://json-schema.org/draft/2020-12/schema\"");
  HAS(r.text, "\"$defs\":{\"address\":");
  HAS(r.text, "\"additionalProperties\":false");
  HAS(r.text, "\"$anchor\":\"addressDef\"");
  HAS(r.text, "\"allOf\":[{\"anyOf\":");
  HAS(r.text, "\"if\":{");
  /* Task support as the tasks-* scenarios need it. */
  HAS(r.text, "\"name\":\"failing_job\",\"description\":\"A task that ends "
              "with a tool "
              "error\",\"inputSchema\":{\"type\":\"object\",\"properties\":{}},"
              "\"execution\":{\"taskSupport\":\"required\"}}");

  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_RESOURCES, NULL, NULL,
                                       0, on_result, &r, NULL),
                   0);
  assert_int_equal(pump(), 0);
  HAS(r.text, "\"uri\":\"test://static-text\"");
  HAS(r.text, "\"uri\":\"test://static-binary\"");
  HAS(r.text, "\"uri\":\"test://watched-resource\"");
  HAS(r.text, "\"description\":\"A static text resource for testing\"");
  HASNT(r.text, "{id}"); /* templates are not direct resources */

  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_RESOURCE_TEMPLATES,
                                       NULL, NULL, 0, on_result, &r, NULL),
                   0);
  assert_int_equal(pump(), 0);
  HAS(r.text, "\"uriTemplate\":\"test://template/{id}/data\"");

  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_list(W.c, ACP_MCP_LIST_PROMPTS, NULL, NULL, 0,
                                       on_result, &r, NULL),
                   0);
  assert_int_equal(pump(), 0);
  HAS(r.text, "\"name\":\"test_simple_prompt\"");
  HAS(r.text, "\"name\":\"test_prompt_with_arguments\"");
  HAS(r.text, "\"name\":\"test_prompt_with_embedded_resource\"");
  HAS(r.text, "\"name\":\"test_prompt_with_image\"");
  HAS(r.text, "\"name\":\"arg1\"");
  HAS(r.text, "\"name\":\"resourceUri\"");
}

/* MARK: - Tools */

static void test_content_tools(void **state) {
  rec r;
  (void)state;

  call_tool("test_simple_text", NULL, &r);
  assert_int_equal(r.status, 0);
  HAS(r.text, "{\"type\":\"text\",\"text\":\"This is a simple text response "
              "for testing.\"}");
  HASNT(r.text, "isError\":true");

  call_tool("test_image_content", "{}", &r);
  HAS(r.text, "\"type\":\"image\"");
  HAS(r.text, "\"mimeType\":\"image/png\"");
  HAS(r.text, "\"data\":\"iVBORw0KGgo");

  call_tool("test_audio_content", "{}", &r);
  HAS(r.text, "\"type\":\"audio\"");
  HAS(r.text, "\"mimeType\":\"audio/wav\"");
  HAS(r.text, "\"data\":\"UklGR"); /* "RIFF" */

  call_tool("test_embedded_resource", "{}", &r);
  HAS(r.text, "\"type\":\"resource\"");
  HAS(r.text, "\"uri\":\"test://embedded-resource\"");
  HAS(r.text, "\"mimeType\":\"text/plain\"");
  HAS(r.text, "\"text\":\"This is an embedded resource content.\"");

  call_tool("test_multiple_content_types", "{}", &r);
  HAS(r.text, "\"text\":\"Multiple content types test:\"");
  HAS(r.text, "\"type\":\"image\"");
  HAS(r.text, "\"uri\":\"test://mixed-content-resource\"");
  HAS(r.text, "\"mimeType\":\"application/json\"");
  HAS(r.text, "{\\\"test\\\":\\\"data\\\",\\\"value\\\":123}");

  call_tool("test_error_handling", "{}", &r);
  assert_int_equal(r.status, 0);
  HAS(r.text, "\"isError\":true");
  HAS(r.text, "This tool intentionally returns an error for testing");

  call_tool("json_schema_2020_12_tool",
            "{\"name\":\"n\",\"address\":{\"city\":\"c\"}}", &r);
  HAS(r.text, "JSON Schema 2020-12 tool called with: ");
  HAS(r.text, "\\\"city\\\":\\\"c\\\"");
}

static void test_echo(void **state) {
  rec r;
  (void)state;
  call_tool("echo", "{\"message\":\"h\\u00e9\\\"llo\"}", &r);
  HAS(r.text, "\"text\":\"Echo: h\xc3\xa9\\\"llo\"");
  HASNT(r.text, "isError");
  call_tool("echo", "{\"message\":5}", &r);
  HAS(r.text, "\"isError\":true");
  call_tool("echo", NULL, &r);
  HAS(r.text, "\"isError\":true");
}

static void test_unknown_tool(void **state) {
  rec r;
  (void)state;
  call_tool("no_such_tool", "{}", &r);
  assert_int_equal(r.status, ACP_ERR_PROTOCOL);
  assert_int_equal(r.code, -32602);
}

static void test_logging(void **state) {
  rec r;
  (void)state;

  memset(&r, 0, sizeof(r));
  assert_int_equal(
      acp_mcp_client_set_log_level(W.c, ACP_MCP_LOG_DEBUG, 0, on_result, &r),
      0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.text, "{}");
  W.pongs = 0;
  call_tool("test_tool_with_logging", "{}", &r);
  assert_int_equal(W.logs, 3);
  assert_int_equal(W.pongs, 3); /* one ping after each message */
  assert_string_equal(W.last_log, "\"Tool execution completed\"");
  HAS(r.text, "\"type\":\"text\"");

  /* Above info: filtered out. */
  memset(&r, 0, sizeof(r));
  assert_int_equal(
      acp_mcp_client_set_log_level(W.c, ACP_MCP_LOG_WARNING, 0, on_result, &r),
      0);
  assert_int_equal(pump(), 0);
  call_tool("test_tool_with_logging", "{}", &r);
  assert_int_equal(W.logs, 3);
  HAS(r.text, "executed successfully");
}

static void test_progress(void **state) {
  acp_mcp_request_opts o = ACP_MCP_REQUEST_OPTS_INIT;
  rec r;
  (void)state;

  memset(&r, 0, sizeof(r));
  W.pongs = 0;
  o.on_progress = c_progress;
  assert_int_equal(acp_mcp_client_call_tool(W.c, "test_tool_with_progress",
                                            "{}", 2, &o, 0, on_result, &r,
                                            NULL),
                   0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.calls, 1);
  assert_int_equal(W.progress_calls, 3);
  assert_true(W.progress[0] == 0 && W.progress[1] == 50 &&
              W.progress[2] == 100);
  assert_true(W.progress_total == 100);
  assert_int_equal(W.pongs, 3); /* paced: a ping after each notification */
  HAS(r.text, "executed successfully");

  /* Without a progress token: no notifications, no pings, same result. */
  call_tool("test_tool_with_progress", "{}", &r);
  assert_int_equal(W.progress_calls, 3);
  assert_int_equal(W.pongs, 3);
  HAS(r.text, "executed successfully");
}

static void test_sampling(void **state) {
  rec r;
  (void)state;

  call_tool("test_sampling", "{\"prompt\":\"Test prompt for sampling\"}", &r);
  assert_int_equal(r.calls, 0); /* waits for the client */
  HAS(W.held_params, "\"role\":\"user\"");
  HAS(W.held_params, "\"text\":\"Test prompt for sampling\"");
  HAS(W.held_params, "\"maxTokens\":100");
  answer_held("{\"role\":\"assistant\",\"content\":{\"type\":\"text\",\"text\":"
              "\"This is a test response from the client\"},\"model\":\"m\","
              "\"stopReason\":\"endTurn\"}");
  assert_int_equal(r.calls, 1);
  HAS(r.text, "\"text\":\"LLM response: This is a test response from the "
              "client\"");
  HASNT(r.text, "isError");

  /* The client answers an error: a tool error result. */
  call_tool("test_sampling", "{\"prompt\":\"x\"}", &r);
  assert_non_null(W.held);
  assert_int_equal(
      acp_mcp_client_respond_error(W.c, W.held, -1, "User rejected sampling"),
      0);
  W.held = NULL;
  assert_int_equal(pump(), 0);
  assert_int_equal(r.calls, 1);
  HAS(r.text, "\"isError\":true");
  HAS(r.text, "User rejected sampling");

  /* Missing prompt: a tool error, no request. */
  call_tool("test_sampling", "{}", &r);
  assert_null(W.held);
  HAS(r.text, "\"isError\":true");
}

static void test_elicitation(void **state) {
  rec r;
  (void)state;

  call_tool("test_elicitation",
            "{\"message\":\"Please provide your information\"}", &r);
  assert_int_equal(r.calls, 0);
  HAS(W.held_params, "\"message\":\"Please provide your information\"");
  HAS(W.held_params, "\"username\":{\"type\":\"string\"");
  HAS(W.held_params, "\"email\":{\"type\":\"string\"");
  HAS(W.held_params, "\"required\":[\"username\",\"email\"]");
  answer_held("{\"action\":\"accept\",\"content\":{\"username\":\"testuser\","
              "\"email\":\"test@example.com\"}}");
  assert_int_equal(r.calls, 1);
  HAS(r.text, "User response: action=accept, content={\\\"username\\\":"
              "\\\"testuser\\\",\\\"email\\\":\\\"test@example.com\\\"}");

  call_tool("test_elicitation", "{\"message\":\"m\"}", &r);
  answer_held("{\"action\":\"decline\"}");
  HAS(r.text, "User response: action=decline, content={}");

  /* A result without an action is a tool error. */
  call_tool("test_elicitation", "{\"message\":\"m\"}", &r);
  answer_held("{}");
  HAS(r.text, "\"isError\":true");
}

static void test_elicitation_sep1034(void **state) {
  rec r;
  (void)state;

  call_tool("test_elicitation_sep1034_defaults", "{}", &r);
  HAS(W.held_params, "\"name\":{\"type\":\"string\"");
  HAS(W.held_params, "\"default\":\"John Doe\"");
  HAS(W.held_params, "\"type\":\"integer\",\"description\":\"User age\","
                     "\"default\":30");
  HAS(W.held_params, "\"default\":95.5");
  HAS(W.held_params, "\"enum\":[\"active\",\"inactive\",\"pending\"],"
                     "\"default\":\"active\"");
  HAS(W.held_params, "\"type\":\"boolean\"");
  HAS(W.held_params, "\"default\":true");
  answer_held("{\"action\":\"accept\",\"content\":{\"name\":\"Jane Smith\","
              "\"age\":25}}");
  HAS(r.text, "Elicitation completed: action=accept, content={\\\"name\\\":"
              "\\\"Jane Smith\\\",\\\"age\\\":25}");
}

static void test_elicitation_sep1330(void **state) {
  rec r;
  (void)state;

  call_tool("test_elicitation_sep1330_enums", "{}", &r);
  HAS(W.held_params, "\"untitledSingle\":{\"type\":\"string\"");
  HAS(W.held_params, "\"titledSingle\":{\"type\":\"string\"");
  HAS(W.held_params, "\"oneOf\":[{\"const\":\"value1\",\"title\":\"First "
                     "Option\"}");
  HAS(W.held_params, "\"enumNames\":[\"Option One\",\"Option Two\",\"Option "
                     "Three\"]");
  HAS(W.held_params, "\"untitledMulti\":{\"type\":\"array\"");
  HAS(W.held_params, "\"items\":{\"type\":\"string\",\"enum\":[\"option1\"");
  HAS(W.held_params, "\"titledMulti\":{\"type\":\"array\"");
  HAS(W.held_params, "\"items\":{\"anyOf\":[{\"const\":\"value1\",\"title\":"
                     "\"First Choice\"}");
  answer_held("{\"action\":\"cancel\"}");
  HAS(r.text, "Elicitation completed: action=cancel");
}

static void test_without_client_capabilities(void **state) {
  rec r;
  (void)state;
  call_tool("test_sampling", "{\"prompt\":\"p\"}", &r);
  assert_int_equal(r.calls, 1);
  HAS(r.text, "\"isError\":true");
  HAS(r.text, "does not support sampling");
  call_tool("test_elicitation", "{\"message\":\"m\"}", &r);
  HAS(r.text, "does not support elicitation");
  call_tool("test_elicitation_sep1034_defaults", "{}", &r);
  HAS(r.text, "\"isError\":true");
}

static void test_reconnection(void **state) {
  rec r;
  (void)state;
  call_tool("test_reconnection", "{}", &r);
  assert_int_equal(W.close_stream_calls, 1);
  HAS(r.text, "Reconnection test completed successfully");
  HASNT(r.text, "isError");
}

/* MARK: - Resources */

static void read_res(const char *uri, rec *r) {
  memset(r, 0, sizeof(*r));
  assert_int_equal(
      acp_mcp_client_read_resource(W.c, uri, NULL, 0, on_result, r, NULL), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r->calls, 1);
}

static void test_resources(void **state) {
  rec r;
  (void)state;

  read_res("test://static-text", &r);
  assert_string_equal(
      r.text, "{\"contents\":[{\"uri\":\"test://static-text\",\"mimeType\":"
              "\"text/plain\",\"text\":\"This is the content of the static "
              "text resource.\"}]}");

  read_res("test://static-binary", &r);
  HAS(r.text, "\"uri\":\"test://static-binary\"");
  HAS(r.text, "\"mimeType\":\"image/png\"");
  HAS(r.text, "\"blob\":\"iVBORw0KGgo");

  read_res("test://template/123/data", &r);
  HAS(r.text, "\"uri\":\"test://template/123/data\"");
  HAS(r.text, "\"mimeType\":\"application/json\"");
  HAS(r.text, "\"text\":\"{\\\"id\\\":\\\"123\\\",\\\"templateTest\\\":true,"
              "\\\"data\\\":\\\"Data for ID: 123\\\"}\"");

  /* A value that needs escaping in the inner JSON. */
  read_res("test://template/a\\\"b/data", &r);
  assert_int_equal(r.status, 0);
  HAS(r.text, "Data for ID: a");

  read_res("test://watched-resource", &r);
  HAS(r.text, "Watched resource content");

  read_res("test://nope", &r);
  assert_int_equal(r.status, ACP_ERR_PROTOCOL);
  assert_int_equal(r.code, ACP_MCP_RESOURCE_NOT_FOUND);
  read_res("test://template//data", &r); /* empty {id} does not match */
  assert_int_equal(r.code, ACP_MCP_RESOURCE_NOT_FOUND);
}

static void test_subscriptions(void **state) {
  rec r;
  (void)state;
  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_subscribe(W.c, "test://watched-resource", 0,
                                            on_result, &r),
                   0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.text, "{}");
  assert_true(acp_mcp_conn_is_subscribed(W.conn, "test://watched-resource"));
  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_unsubscribe(W.c, "test://watched-resource", 0,
                                              on_result, &r),
                   0);
  assert_int_equal(pump(), 0);
  assert_string_equal(r.text, "{}");
  assert_false(acp_mcp_conn_is_subscribed(W.conn, "test://watched-resource"));
}

/* MARK: - Prompts and completion */

static void get_prompt(const char *name, const char *args, rec *r) {
  memset(r, 0, sizeof(*r));
  assert_int_equal(acp_mcp_client_get_prompt(W.c, name, args,
                                             args ? strlen(args) : 0, NULL, 0,
                                             on_result, r, NULL),
                   0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r->calls, 1);
}

static void test_prompts(void **state) {
  rec r;
  (void)state;

  get_prompt("test_simple_prompt", NULL, &r);
  assert_string_equal(r.text,
                      "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":"
                      "\"text\",\"text\":\"This is a simple prompt for "
                      "testing.\"}}]}");

  get_prompt("test_prompt_with_arguments",
             "{\"arg1\":\"testValue1\",\"arg2\":\"testValue2\"}", &r);
  HAS(r.text, "\"text\":\"Prompt with arguments: arg1='testValue1', "
              "arg2='testValue2'\"");
  get_prompt("test_prompt_with_arguments", "{\"arg1\":\"x\"}", &r);
  assert_int_equal(r.status, ACP_ERR_PROTOCOL);
  assert_int_equal(r.code, -32602);

  get_prompt("test_prompt_with_embedded_resource",
             "{\"resourceUri\":\"test://example-resource\"}", &r);
  HAS(r.text, "\"type\":\"resource\",\"resource\":{\"uri\":\"test://"
              "example-resource\",\"mimeType\":\"text/plain\",\"text\":"
              "\"Embedded resource content for testing.\"}");
  HAS(r.text, "Please process the embedded resource above.");
  get_prompt("test_prompt_with_embedded_resource", "{}", &r);
  assert_int_equal(r.code, -32602);

  get_prompt("test_prompt_with_image", NULL, &r);
  HAS(r.text, "\"type\":\"image\",\"data\":\"iVBORw0KGgo");
  HAS(r.text, "\"mimeType\":\"image/png\"");
  HAS(r.text, "Please analyze the image above.");
}

static void ask_completion(const char *ref, const char *arg, const char *value,
                           rec *r) {
  memset(r, 0, sizeof(*r));
  assert_int_equal(
      acp_mcp_client_complete(W.c, ref, arg, value, NULL, 0, on_result, r), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r->calls, 1);
}

static void test_completion(void **state) {
  static const char pref[] =
      "{\"type\":\"ref/prompt\",\"name\":\"test_prompt_with_arguments\"}";
  rec r;
  (void)state;

  ask_completion(pref, "arg1", "par", &r);
  assert_string_equal(r.text, "{\"completion\":{\"values\":[\"paris\",\"park\","
                              "\"party\"],\"total\":3,\"hasMore\":false}}");
  ask_completion(pref, "arg1", "test", &r);
  HAS(r.text, "\"values\":[\"test\",\"testing\"]");
  ask_completion(pref, "arg1", "zzz", &r);
  HAS(r.text, "\"values\":[]");
  ask_completion(
      "{\"type\":\"ref/resource\",\"uri\":\"test://template/{id}/data\"}", "id",
      "1", &r);
  HAS(r.text, "\"values\":[\"1\",\"123\"]");
  ask_completion("{\"type\":\"ref/prompt\",\"name\":\"nope\"}", "arg1", "", &r);
  assert_int_equal(r.status, ACP_ERR_PROTOCOL);
}

/* MARK: - Tasks through the client */

/* A timer the test fires by hand (slow_compute's). */
static struct {
  void (*fire)(void *arg);
  void *arg;
  int started;
  int stopped;
} T;

static int fake_start(void *ctx, uint64_t ms, void (*fire)(void *arg),
                      void *arg, void **timer) {
  (void)ctx;
  assert_true(ms > 0);
  T.fire = fire;
  T.arg = arg;
  T.started++;
  *timer = &T;
  return 0;
}

static void fake_stop(void *ctx, void *timer) {
  (void)ctx;
  assert_ptr_equal(timer, &T);
  T.fire = NULL;
  T.stopped++;
}

static void build_tasks(acp_mcp_client_mode mode) {
  static const mcp_everything_timers tm = {NULL, fake_start, fake_stop};
  acp_mcp_client_callbacks *cbs = NULL;
  rec r;

  memset(&W, 0, sizeof(W));
  memset(&T, 0, sizeof(T));
  memset(&r, 0, sizeof(r));
  mcp_everything_set_timers(&tm);
  assert_int_equal(acp_mcp_server_new(&W.s, "everything", "1", NULL, NULL), 0);
  assert_int_equal(mcp_everything_register_with(W.s, fake_close_stream), 0);
  assert_int_equal(
      acp_mcp_server_set_state_key(W.s, "0123456789abcdef0123456789abcdef", 32),
      0);
  assert_int_equal(acp_mcp_conn_new(&W.conn, W.s, NULL), 0);
  assert_int_equal(acp_mcp_client_callbacks_new(&cbs), 0);
  acp_mcp_client_callbacks_set_on_elicitation(cbs, c_request);
  assert_int_equal(acp_mcp_client_new(&W.c, cbs, "test", "1", NULL, NULL), 0);
  acp_mcp_client_callbacks_free(cbs);
  assert_int_equal(acp_mcp_client_set_mode(W.c, mode), 0);
  assert_int_equal(acp_mcp_client_set_tasks(W.c, 1), 0);
  assert_int_equal(acp_mcp_client_initialize(W.c, 0, on_result, &r), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, 0);
  assert_int_equal(acp_mcp_client_set_tasks(W.c, 0), ACP_ERR_INVALID_STATE);
}

static int setup_tasks26(void **state) {
  (void)state;
  build_tasks(ACP_MCP_CLIENT_STATELESS);
  return 0;
}

static int setup_tasks25(void **state) {
  (void)state;
  build_tasks(ACP_MCP_CLIENT_STATEFUL);
  return 0;
}

static int teardown_tasks(void **state) {
  mcp_everything_set_timers(NULL);
  return teardown(state);
}

/* The taskId of a task result, copied into id[64]. */
static int task_id_and_status(const acp_rpc_msg *msg, char *id, char *st) {
  const char *p, *q;
  size_t n, m;
  if (!acp_mcp_result_task(msg, &p, &n, &q, &m))
    return 0;
  snprintf(id, 64, "%.*s", (int)n, p);
  snprintf(st, 32, "%.*s", (int)m, q);
  return 1;
}

typedef struct trec {
  rec r;
  int is_task;
  char id[64];
  char status[32];
} trec;

static int on_task_result(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                          void *ud) {
  trec *t = ud;
  t->is_task = status == 0 && task_id_and_status(msg, t->id, t->status);
  return on_result(c, status, msg, &t->r);
}

static void task_call(const char *name, const char *args, trec *t) {
  memset(t, 0, sizeof(*t));
  assert_int_equal(
      acp_mcp_client_call_tool_task(W.c, name, args, args ? strlen(args) : 0,
                                    60000, NULL, 0, on_task_result, t, NULL),
      0);
  assert_int_equal(pump(), 0);
  assert_int_equal(t->r.calls, 1);
}

static void task_get(const char *id, trec *t) {
  memset(t, 0, sizeof(*t));
  assert_int_equal(acp_mcp_client_task_get(W.c, id, 0, on_task_result, t), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(t->r.calls, 1);
}

/* acp_mcp_client_task_answer() on a made-up tasks/get answer: it checks
 * before it sends (the real round trip is run by integration_mcp-elicit,
 * `acp mcp call --task` at 2026 answering confirm_delete's input). */
static int answer_made_up(const char *result_json) {
  acp_json_doc *doc;
  acp_rpc_msg msg;
  rec r;
  int rv;
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  assert_int_equal(
      acp_json_doc_parse(doc, result_json, strlen(result_json), NULL), 0);
  memset(&msg, 0, sizeof(msg));
  msg.kind = ACP_RPC_RESPONSE;
  msg.doc = doc;
  msg.result = acp_json_doc_root(doc);
  memset(&r, 0, sizeof(r));
  rv = acp_mcp_client_task_answer(W.c, "t1", &msg, 0, on_result, &r);
  acp_json_doc_free(doc);
  return rv;
}

static void test_client_tasks_2026(void **state) {
  trec t, g;
  rec r;
  (void)state;
  assert_string_equal(acp_mcp_client_protocol(W.c), "2026-07-28");
  /* slow_compute runs as a task until its timer fires. */
  task_call("slow_compute", "{\"seconds\":5,\"label\":\"x\"}", &t);
  assert_int_equal(t.r.status, 0);
  assert_true(t.is_task);
  HAS(t.r.text, "\"resultType\":\"task\"");
  assert_string_equal(t.status, "working");
  assert_int_equal(strlen(t.id), 32);
  task_get(t.id, &g);
  assert_true(g.is_task);
  assert_string_equal(g.status, "working");
  assert_non_null(T.fire);
  T.fire(T.arg);
  task_get(t.id, &g);
  assert_string_equal(g.status, "completed");
  HAS(g.r.text, "\"text\":\"Computed x in 5 s\"");
  /* Input: confirm_delete asks; tasks/update answers. */
  task_call("confirm_delete", "{\"filename\":\"f\"}", &t);
  assert_true(t.is_task);
  task_get(t.id, &g);
  assert_string_equal(g.status, "input_required");
  HAS(g.r.text, "\"inputRequests\":{\"confirm\":{\"method\":"
                "\"elicitation/create\"");
  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_task_update(
                       W.c, t.id,
                       "{\"confirm\":{\"action\":\"accept\",\"content\":{"
                       "\"confirm\":true}}}",
                       58, 0, on_result, &r),
                   0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, 0);
  task_get(t.id, &g);
  assert_string_equal(g.status, "completed");
  HAS(g.r.text, "\"text\":\"Deleted\"");
  /* Cancel: the timer is stopped, the task cancelled. */
  task_call("slow_compute", "{\"seconds\":60}", &t);
  assert_true(t.is_task);
  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_task_cancel(W.c, t.id, 0, on_result, &r), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.status, 0);
  assert_int_equal(T.stopped, 1);
  task_get(t.id, &g);
  assert_string_equal(g.status, "cancelled");
  /* A failing job: completed with isError; a protocol error: failed. */
  task_call("failing_job", NULL, &t);
  task_get(t.id, &g);
  assert_string_equal(g.status, "completed");
  HAS(g.r.text, "\"isError\":true");
  task_call("protocol_error_job", NULL, &t);
  task_get(t.id, &g);
  assert_string_equal(g.status, "failed");
  HAS(g.r.text, "\"error\":{\"code\":-32603");
  /* A tool that is never a task answers as usual. */
  task_call("greet", "{\"name\":\"A\"}", &t);
  assert_false(t.is_task);
  HAS(t.r.text, "Hello, A!");
  /* The 2025-only methods are refused locally. */
  assert_int_equal(acp_mcp_client_task_result(W.c, t.id, 0, on_result, &r),
                   ACP_ERR_UNSUPPORTED);
  assert_int_equal(acp_mcp_client_task_list(W.c, NULL, 0, on_result, &r),
                   ACP_ERR_UNSUPPORTED);
  assert_int_equal(acp_mcp_client_task_get(W.c, NULL, 0, on_result, &r),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(
      acp_mcp_client_task_update(W.c, t.id, "{", 1, 0, on_result, &r),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(
      acp_mcp_client_task_answer(W.c, t.id, NULL, 0, on_result, &r),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(answer_made_up("{\"status\":\"input_required\"}"),
                   ACP_ERR_INVALID_ARGUMENT);
}

static void test_client_tasks_2025(void **state) {
  trec t, g;
  rec r;
  (void)state;
  assert_string_equal(acp_mcp_client_protocol(W.c), "2025-11-25");
  task_call("slow_compute", "{\"seconds\":5,\"label\":\"y\"}", &t);
  assert_true(t.is_task);
  HAS(t.r.text, "{\"task\":{\"taskId\":");
  HAS(t.r.text, "\"ttl\":300000");
  task_get(t.id, &g);
  assert_string_equal(g.status, "working");
  /* tasks/result waits for the end. */
  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_task_result(W.c, t.id, 0, on_result, &r), 0);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.calls, 0);
  T.fire(T.arg);
  assert_int_equal(pump(), 0);
  assert_int_equal(r.calls, 1);
  HAS(r.text, "\"text\":\"Computed y in 5 s\"");
  HAS(r.text, "\"io.modelcontextprotocol/related-task\":{\"taskId\":\"");
  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_task_list(W.c, NULL, 0, on_result, &r), 0);
  assert_int_equal(pump(), 0);
  HAS(r.text, t.id);
  /* failing_job requires a task: without one -32601, with one a result. */
  call_tool("failing_job", NULL, &r);
  assert_int_equal(r.code, -32601);
  task_call("failing_job", NULL, &t);
  assert_true(t.is_task);
  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_mcp_client_task_result(W.c, t.id, 0, on_result, &r), 0);
  assert_int_equal(pump(), 0);
  HAS(r.text, "\"isError\":true");
  /* Cancel a running one: 2025 answers with the cancelled task. */
  task_call("slow_compute", "{\"seconds\":9}", &t);
  memset(&g, 0, sizeof(g));
  assert_int_equal(acp_mcp_client_task_cancel(W.c, t.id, 0, on_task_result, &g),
                   0);
  assert_int_equal(pump(), 0);
  assert_string_equal(g.status, "cancelled");
  assert_int_equal(
      acp_mcp_client_task_update(W.c, t.id, "{}", 2, 0, on_result, &r),
      ACP_ERR_UNSUPPORTED);
  assert_int_equal(answer_made_up("{\"inputRequests\":{}}"),
                   ACP_ERR_UNSUPPORTED);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_register_errors),
      cmocka_unit_test_setup_teardown(test_capabilities, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lists, setup, teardown),
      cmocka_unit_test_setup_teardown(test_content_tools, setup, teardown),
      cmocka_unit_test_setup_teardown(test_echo, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_tool, setup, teardown),
      cmocka_unit_test_setup_teardown(test_logging, setup, teardown),
      cmocka_unit_test_setup_teardown(test_progress, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sampling, setup, teardown),
      cmocka_unit_test_setup_teardown(test_elicitation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_elicitation_sep1034, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_elicitation_sep1330, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_without_client_capabilities,
                                      setup_no_caps, teardown),
      cmocka_unit_test_setup_teardown(test_reconnection, setup, teardown),
      cmocka_unit_test_setup_teardown(test_resources, setup, teardown),
      cmocka_unit_test_setup_teardown(test_subscriptions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_prompts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_completion, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_tasks_2026, setup_tasks26,
                                      teardown_tasks),
      cmocka_unit_test_setup_teardown(test_client_tasks_2025, setup_tasks25,
                                      teardown_tasks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
