/*
 * Agent role: initialize negotiation, routing (-32601, -32602, ext),
 * prompt turns, cancellation and the session/update senders.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "acp_roles_pair.h"

typedef struct actx {
  int n_init;
  int n_new;
  int n_prompt;
  int n_cancel;
  int n_cancel_req;
  int n_ext_req;
  int n_ext_notif;
  int cancel_had_prompt;
  acp_agent_request *prompt;
  acp_agent_request *held;
  char last_sid[64];
  char ext_method[64];
  void *user; /* a test's own state */
} actx;

static int on_init_default(acp_agent *a, acp_agent_request *req, void *ud) {
  actx *x = ud;

  x->n_init++;
  assert_int_equal(acp_agent_request_protocol_version(req) >= 0, 1);
  return acp_agent_respond_initialize(a, req, "{\"loadSession\":true}", 20,
                                      NULL, 0, NULL, 0);
}

static int on_new(acp_agent *a, acp_agent_request *req, void *ud) {
  actx *x = ud;

  x->n_new++;
  return acp_agent_respond_session_new(
      a, req, "s1", LIT("{\"modes\":null,\"_meta\":{\"k\":1}}"));
}

static int on_prompt(acp_agent *a, acp_agent_request *req, void *ud) {
  actx *x = ud;
  const char *sid = acp_agent_request_session_id(req);

  x->n_prompt++;
  assert_non_null(sid);
  snprintf(x->last_sid, sizeof(x->last_sid), "%s", sid);
  assert_non_null(acp_agent_request_params(req));
  x->prompt = req; /* answered later */
  (void)a;
  return 0;
}

static int on_cancel(acp_agent *a, const char *sid, size_t len,
                     acp_agent_request *prompt, const acp_rpc_msg *msg,
                     void *ud) {
  actx *x = ud;

  (void)a;
  (void)msg;
  x->n_cancel++;
  x->cancel_had_prompt = prompt != NULL;
  assert_int_equal(len, 2);
  assert_memory_equal(sid, "s1", 2);
  if (prompt)
    assert_true(acp_agent_request_is_cancelled(prompt));
  return 0;
}

static int on_cancel_req(acp_agent *a, acp_agent_request *req, void *ud) {
  actx *x = ud;

  x->n_cancel_req++;
  assert_true(acp_agent_request_is_cancelled(req));
  return acp_agent_respond_cancelled(a, req);
}

static int on_ext_req(acp_agent *a, acp_agent_request *req, void *ud) {
  actx *x = ud;

  x->n_ext_req++;
  snprintf(x->ext_method, sizeof(x->ext_method), "%s",
           acp_agent_request_method(req));
  return acp_agent_respond(a, req, LIT("{\"ok\":true}"));
}

static int on_ext_notif(acp_agent *a, const acp_rpc_msg *msg, void *ud) {
  actx *x = ud;

  (void)a;
  (void)msg;
  x->n_ext_notif++;
  return 0;
}

static acp_agent *make_agent(actx *x, int with_init, int with_ext) {
  acp_agent_callbacks *cbs;
  acp_agent *a = NULL;

  assert_int_equal(acp_agent_callbacks_new(&cbs), 0);
  if (with_init)
    acp_agent_callbacks_set_on_initialize(cbs, on_init_default);
  acp_agent_callbacks_set_on_session_new(cbs, on_new);
  acp_agent_callbacks_set_on_session_prompt(cbs, on_prompt);
  acp_agent_callbacks_set_on_session_cancel(cbs, on_cancel);
  acp_agent_callbacks_set_on_cancel_request(cbs, on_cancel_req);
  if (with_ext) {
    acp_agent_callbacks_set_on_ext_request(cbs, on_ext_req);
    acp_agent_callbacks_set_on_ext_notification(cbs, on_ext_notif);
  }
  assert_int_equal(acp_agent_new(&a, cbs, x, NULL, NULL), 0);
  acp_agent_callbacks_free(cbs);
  return a;
}

/* MARK: - initialize */

static void test_agent_initialize_negotiates_version_1(void **state) {
  static const struct {
    const char *line;
    const char *expect;
  } cases[] = {
      {"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
       "\"protocolVersion\":1}}\n",
       "\"result\":{\"protocolVersion\":1,"},
      {"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
       "\"protocolVersion\":65535}}\n",
       "\"result\":{\"protocolVersion\":1,"},
      {"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
       "\"protocolVersion\":0}}\n",
       "\"result\":{\"protocolVersion\":1,"},
      {"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
       "\"protocolVersion\":\"1\"}}\n",
       "\"code\":-32602"},
      {"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
       "\"protocolVersion\":1.5}}\n",
       "\"code\":-32602"},
      {"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
       "\"protocolVersion\":-1}}\n",
       "\"code\":-32602"},
      {"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
       "\"protocolVersion\":65536}}\n",
       "\"code\":-32602"},
      {"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
       "}}\n",
       "\"code\":-32602"},
      {"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\"}\n",
       "\"code\":-32602"},
  };
  size_t i;
  int with_init;

  (void)state;
  for (with_init = 0; with_init < 2; with_init++) {
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
      actx x = {0};
      acp_agent *a = make_agent(&x, with_init, 0);
      tbuf out = {0};

      assert_int_equal(agent_feed(a, cases[i].line, &out), 0);
      assert_non_null(out.data);
      if (strstr(out.data, cases[i].expect) == NULL)
        fail_msg("case %zu: got %s", i, out.data);
      if (strstr(cases[i].expect, "-32602")) {
        assert_int_equal(x.n_init, 0);
        assert_false(acp_agent_is_initialized(a));
        assert_non_null(strstr(out.data, "protocolVersion"));
      } else {
        assert_int_equal(x.n_init, with_init);
        assert_true(acp_agent_is_initialized(a));
        assert_int_equal(acp_agent_protocol_version(a), 1);
        if (with_init)
          assert_non_null(strstr(out.data, "\"loadSession\":true"));
        else
          assert_non_null(strstr(out.data, "\"name\":\"libacp\""));
      }
      tbuf_clear(&out);
      acp_agent_free(a);
    }
  }
}

/* The client's capabilities are kept from initialize, and
 * acp_agent_client_supports() reads members of them by path. */
static void test_agent_client_supports(void **state) {
  actx x = {0};
  acp_agent *a = make_agent(&x, 1, 0);
  tbuf out = {0};
  const char *caps;
  size_t n = 7;

  (void)state;
  assert_null(acp_agent_client_capabilities(a, &n));
  assert_int_equal(n, 0);
  assert_false(acp_agent_client_supports(a, "terminal"));
  assert_int_equal(
      agent_feed(a,
                 "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
                 "\"params\":{\"protocolVersion\":1,\"clientCapabilities\":{"
                 "\"fs\":{\"readTextFile\":true,\"writeTextFile\":false},"
                 "\"terminal\":true,\"elicitation\":null,\"session\":{"
                 "\"configOptions\":{\"boolean\":{}}}}}}\n",
                 &out),
      0);
  caps = acp_agent_client_capabilities(a, &n);
  assert_non_null(caps);
  assert_true(n > 0 && caps[0] == '{' && caps[n - 1] == '}');
  assert_true(acp_agent_client_supports(a, "terminal"));
  assert_true(acp_agent_client_supports(a, "fs.readTextFile"));
  assert_true(acp_agent_client_supports(a, "fs"));
  assert_true(acp_agent_client_supports(a, "session.configOptions.boolean"));
  assert_false(acp_agent_client_supports(a, "fs.writeTextFile"));
  assert_false(acp_agent_client_supports(a, "elicitation"));
  assert_false(acp_agent_client_supports(a, "elicitation.form"));
  assert_false(acp_agent_client_supports(a, "terminal.x"));
  assert_false(acp_agent_client_supports(a, "session.configOptions.number"));
  assert_false(acp_agent_client_supports(a, "nope"));
  assert_false(acp_agent_client_supports(a, ""));
  assert_false(acp_agent_client_supports(NULL, "terminal"));
  assert_false(acp_agent_client_supports(a, NULL));
  tbuf_clear(&out);
  /* A second initialize without capabilities forgets them. */
  assert_int_equal(agent_feed(a,
                              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
                              "\"initialize\",\"params\":{"
                              "\"protocolVersion\":1}}\n",
                              &out),
                   0);
  assert_null(acp_agent_client_capabilities(a, NULL));
  assert_false(acp_agent_client_supports(a, "terminal"));
  tbuf_clear(&out);
  acp_agent_free(a);
}

static int on_init_raw_upward(acp_agent *a, acp_agent_request *req, void *ud) {
  (void)ud;
  /* The handler tries to answer version 7 and puts it last. */
  return acp_agent_respond(
      a, req, LIT("{\"agentCapabilities\":{\"x\":1},\"protocolVersion\":7}"));
}

static void test_agent_initialize_raw_answer_cannot_raise_version(void **s) {
  acp_agent_callbacks *cbs;
  acp_agent *a;
  tbuf out = {0};

  (void)s;
  assert_int_equal(acp_agent_callbacks_new(&cbs), 0);
  acp_agent_callbacks_set_on_initialize(cbs, on_init_raw_upward);
  assert_int_equal(acp_agent_new(&a, cbs, NULL, NULL, NULL), 0);
  acp_agent_callbacks_free(cbs);
  assert_int_equal(
      agent_feed(a,
                 "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\","
                 "\"params\":{\"protocolVersion\":65535}}\n",
                 &out),
      0);
  assert_non_null(strstr(out.data, "\"protocolVersion\":1,"
                                   "\"agentCapabilities\":{\"x\":1}}"));
  assert_null(strstr(out.data, "7"));
  tbuf_clear(&out);
  acp_agent_free(a);
}

/* MARK: - routing */

static void test_agent_unknown_request_is_32601(void **state) {
  actx x = {0};
  acp_agent *a = make_agent(&x, 1, 0);
  tbuf out = {0};

  (void)state;
  assert_int_equal(
      agent_feed(a, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"_x/y\"}\n",
                 &out),
      0);
  assert_non_null(strstr(out.data, "\"code\":-32601"));
  tbuf_clear(&out);
  /* A known method without a handler is also -32601. */
  assert_int_equal(agent_feed(a,
                              "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":"
                              "\"authenticate\",\"params\":{\"methodId\":"
                              "\"m\"}}\n",
                              &out),
                   0);
  assert_non_null(strstr(out.data, "\"id\":6"));
  assert_non_null(strstr(out.data, "\"code\":-32601"));
  tbuf_clear(&out);
  /* A client-side method sent to the agent is unknown here. */
  assert_int_equal(agent_feed(a,
                              "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":"
                              "\"fs/read_text_file\",\"params\":{"
                              "\"sessionId\":\"s\",\"path\":\"/a\"}}\n",
                              &out),
                   0);
  assert_non_null(strstr(out.data, "\"code\":-32601"));
  tbuf_clear(&out);
  /* Unknown notifications are ignored: nothing is sent. */
  assert_int_equal(
      agent_feed(a, "{\"jsonrpc\":\"2.0\",\"method\":\"_x/n\"}\n", &out), 0);
  assert_null(out.data);
  acp_agent_free(a);
}

static void test_agent_ext_methods_reach_ext_handlers(void **state) {
  actx x = {0};
  acp_agent *a = make_agent(&x, 1, 1);
  tbuf out = {0};

  (void)state;
  assert_int_equal(agent_feed(a,
                              "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":"
                              "\"_zed.dev/workspace/buffers\",\"params\":{"
                              "\"language\":\"rust\"}}\n",
                              &out),
                   0);
  assert_int_equal(x.n_ext_req, 1);
  assert_string_equal(x.ext_method, "_zed.dev/workspace/buffers");
  assert_non_null(strstr(out.data, "\"result\":{\"ok\":true}"));
  tbuf_clear(&out);
  assert_int_equal(
      agent_feed(a, "{\"jsonrpc\":\"2.0\",\"method\":\"_x/n\"}\n", &out), 0);
  assert_int_equal(x.n_ext_notif, 1);
  /* A known method without its own handler falls back to ext. */
  assert_int_equal(
      agent_feed(a, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"logout\"}\n",
                 &out),
      0);
  assert_int_equal(x.n_ext_req, 2);
  assert_string_equal(x.ext_method, "logout");
  tbuf_clear(&out);
  acp_agent_free(a);
}

static void test_agent_invalid_params_is_32602_with_path(void **state) {
  static const struct {
    const char *line;
    const char *path;
  } cases[] = {
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\",\"params\":"
       "{\"mcpServers\":[]}}\n",
       "\"path\":\"/cwd\""},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\",\"params\":"
       "{\"cwd\":\"/\",\"mcpServers\":{}}}\n",
       "\"path\":\"/mcpServers\""},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/prompt\","
       "\"params\":{\"sessionId\":7,\"prompt\":[]}}\n",
       "\"path\":\"/sessionId\""},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/prompt\","
       "\"params\":[1]}\n",
       "\"path\":\"\""},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/prompt\"}\n",
       "\"path\":\"/sessionId\""},
  };
  size_t i;

  (void)state;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    actx x = {0};
    acp_agent *a = make_agent(&x, 1, 1);
    tbuf out = {0};

    assert_int_equal(agent_feed(a, cases[i].line, &out), 0);
    if (strstr(out.data, "\"code\":-32602") == NULL ||
        strstr(out.data, cases[i].path) == NULL)
      fail_msg("case %zu: %s", i, out.data);
    assert_int_equal(x.n_new + x.n_prompt + x.n_ext_req, 0);
    tbuf_clear(&out);
    acp_agent_free(a);
  }
}

static void test_agent_request_before_initialize_is_accepted(void **state) {
  actx x = {0};
  acp_agent *a = make_agent(&x, 1, 0);
  tbuf out = {0};

  (void)state;
  assert_int_equal(agent_feed(a,
                              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
                              "\"session/new\",\"params\":{\"cwd\":\"/\","
                              "\"mcpServers\":[]}}\n",
                              &out),
                   0);
  assert_int_equal(x.n_new, 1);
  assert_false(acp_agent_is_initialized(a));
  assert_non_null(strstr(out.data, "\"result\":{\"sessionId\":\"s1\","
                                   "\"modes\":null,\"_meta\":{\"k\":1}}"));
  tbuf_clear(&out);
  acp_agent_free(a);
}

/* MARK: - prompt turns */

typedef struct cctx {
  int n_updates;
  int kinds[32];
  int n_resp;
  char stop[32];
  int64_t err;
} cctx;

static int c_on_update(acp_client *c, const acp_client_update *u, void *ud) {
  cctx *x = ud;

  (void)c;
  if (x->n_updates < 32)
    x->kinds[x->n_updates] = u->kind;
  x->n_updates++;
  return 0;
}

static int c_on_resp(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  cctx *x = ud;
  const char *s;
  size_t n;

  (void)c;
  x->n_resp++;
  if (msg->result) {
    const acp_json_val *v = acp_json_obj_getz(msg->result, "stopReason");

    if (v && acp_json_doc_str(msg->doc, v, &s, &n) == 0)
      snprintf(x->stop, sizeof(x->stop), "%.*s", (int)n, s);
  } else {
    x->err = msg->error_code;
  }
  return 0;
}

static acp_client *make_client(cctx *x) {
  acp_client_callbacks *cbs;
  acp_client *c = NULL;

  assert_int_equal(acp_client_callbacks_new(&cbs), 0);
  acp_client_callbacks_set_on_session_update(cbs, c_on_update);
  assert_int_equal(acp_client_new(&c, cbs, x, NULL, NULL), 0);
  acp_client_callbacks_free(cbs);
  return c;
}

/* MARK: - update observer */

typedef struct seen {
  int n;
  char sid[8];
  char all[1024];
} seen;

static void on_sent(acp_agent *a, const char *sid, const char *u, size_t len,
                    void *ud) {
  seen *x = ((actx *)ud)->user;

  (void)a;
  x->n++;
  snprintf(x->sid, sizeof(x->sid), "%s", sid);
  strncat(x->all, u, len);
  strcat(x->all, "\n");
}

static void test_agent_update_observer_sees_each_update_sent(void **state) {
  actx ax = {0};
  cctx cx = {0};
  seen sx = {0};
  acp_agent_callbacks *cbs;
  acp_agent *a = NULL;
  acp_client *c = make_client(&cx);
  pair_wire wire = {0};

  (void)state;
  ax.user = &sx;
  assert_int_equal(acp_agent_callbacks_new(&cbs), 0);
  acp_agent_callbacks_set_on_initialize(cbs, on_init_default);
  acp_agent_callbacks_set_on_session_new(cbs, on_new);
  acp_agent_callbacks_set_on_update_sent(cbs, on_sent);
  assert_int_equal(acp_agent_new(&a, cbs, &ax, NULL, NULL), 0);
  acp_agent_callbacks_free(cbs);
  assert_int_equal(acp_client_initialize(c, NULL, 0, NULL, 0, NULL, NULL, NULL),
                   0);
  assert_int_equal(acp_client_session_new(c, "/tmp", NULL, 0, NULL, NULL, NULL),
                   0);
  assert_int_equal(pump(a, c, &wire), 0);
  assert_int_equal(acp_agent_send_message_chunk(a, "s1", "Hi", 2, NULL, 0), 0);
  assert_int_equal(acp_agent_send_plan(a, "s1", LIT("[]")), 0);
  assert_int_equal(acp_agent_send_tool_call(a, "s1", "t1", "Read", NULL, NULL,
                                            LIT("{\"rawInput\":{}}")),
                   0);
  assert_int_equal(
      acp_agent_send_update_raw(a, "s1", LIT("{\"sessionUpdate\":\"_x\"}")), 0);
  /* A send that fails is not observed. */
  assert_int_equal(acp_agent_send_message_chunk(a, "s1", "x", 1, LIT("[1]")),
                   ACP_ERR_INVALID_ARGUMENT);
  /* A raw update must be one valid JSON object: it is spliced unchanged. */
  assert_int_equal(acp_agent_send_update_raw(a, "s1", LIT("{\"a\":")),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_agent_send_update_raw(a, "s1", LIT("[1]")),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_agent_send_update_raw(a, "s1", LIT("{} {}")),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(sx.n, 4);
  assert_string_equal(sx.sid, "s1");
  assert_string_equal(
      sx.all,
      "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":"
      "\"text\",\"text\":\"Hi\"}}\n"
      "{\"sessionUpdate\":\"plan\",\"entries\":[]}\n"
      "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"t1\",\"title\":"
      "\"Read\",\"rawInput\":{}}\n"
      "{\"sessionUpdate\":\"_x\"}\n");
  assert_int_equal(pump(a, c, &wire), 0);
  /* What was observed is what went on the wire. */
  assert_non_null(strstr(wire.a2c.data,
                         "\"update\":{\"sessionUpdate\":\"tool_call\","
                         "\"toolCallId\":\"t1\",\"title\":\"Read\","
                         "\"rawInput\":{}}}"));
  wire_clear(&wire);
  acp_client_free(c);
  acp_agent_free(a);
}

/* A chunk from a parsed string: the raw text goes out as it came (escapes
 * included), a lone surrogate escape is decoded (to U+FFFD) and escaped
 * again, on the direct path and on the one with extra members. */
static void test_agent_message_chunk_val(void **state) {
  static const char in[] =
      "[\"a\\n\\u00e9\\\"b\",\"x\\ud800y\",\"caf\xc3\xa9\",1]";
  actx ax = {0};
  cctx cx = {0};
  acp_agent *a = make_agent(&ax, 1, 0);
  acp_client *c = make_client(&cx);
  pair_wire wire = {0};
  acp_json_doc *doc = NULL;
  const acp_json_val *v;

  (void)state;
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  assert_int_equal(acp_json_doc_parse(doc, in, sizeof(in) - 1, NULL), 0);
  v = acp_json_child(acp_json_doc_root(doc));
  assert_int_equal(acp_client_initialize(c, NULL, 0, NULL, 0, NULL, NULL, NULL),
                   0);
  assert_int_equal(acp_client_session_new(c, "/tmp", NULL, 0, NULL, NULL, NULL),
                   0);
  assert_int_equal(pump(a, c, &wire), 0);
  wire_clear(&wire);
  assert_int_equal(acp_agent_send_message_chunk_val(a, "s1", doc, v, NULL, 0),
                   0);
  v = acp_json_next(v);
  assert_int_equal(acp_agent_send_message_chunk_val(a, "s1", doc, v, NULL, 0),
                   0);
  assert_int_equal(acp_agent_send_message_chunk_val(
                       a, "s1", doc, v, LIT("{\"messageId\":\"m1\"}")),
                   0);
  v = acp_json_next(v);
  assert_int_equal(acp_agent_send_message_chunk_val(
                       a, "s1", NULL, v, LIT("{\"messageId\":\"m2\"}")),
                   0);
  /* not a string, no value, a surrogate without its document */
  assert_int_equal(
      acp_agent_send_message_chunk_val(a, "s1", doc, acp_json_next(v), NULL, 0),
      ACP_ERR_TYPE);
  assert_int_equal(
      acp_agent_send_message_chunk_val(a, "s1", doc, NULL, NULL, 0),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_agent_send_message_chunk_val(
                       a, "s1", NULL,
                       acp_json_next(acp_json_child(acp_json_doc_root(doc))),
                       NULL, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(pump(a, c, &wire), 0);
  assert_non_null(strstr(wire.a2c.data,
                         "\"content\":{\"type\":\"text\",\"text\":"
                         "\"a\\n\\u00e9\\\"b\"}}}"));
  assert_non_null(strstr(wire.a2c.data,
                         "\"content\":{\"type\":\"text\",\"text\":"
                         "\"x\xef\xbf\xbdy\"}}}"));
  assert_non_null(strstr(wire.a2c.data, "\"text\":\"x\xef\xbf\xbdy\"},"
                                        "\"messageId\":\"m1\"}"));
  assert_non_null(strstr(wire.a2c.data, "\"text\":\"caf\xc3\xa9\"},"
                                        "\"messageId\":\"m2\"}"));
  assert_int_equal(tbuf_count(&wire.a2c, "agent_message_chunk"), 4);
  wire_clear(&wire);
  acp_json_doc_free(doc);
  acp_client_free(c);
  acp_agent_free(a);
}

static void test_agent_prompt_turn_streams_updates(void **state) {
  actx ax = {0};
  cctx cx = {0};
  acp_agent *a = make_agent(&ax, 1, 0);
  acp_client *c = make_client(&cx);
  pair_wire wire = {0};

  (void)state;
  assert_int_equal(acp_client_initialize(c, NULL, 0, NULL, 0, NULL, NULL, NULL),
                   0);
  assert_int_equal(acp_client_session_new(c, "/tmp", NULL, 0, NULL, NULL, NULL),
                   0);
  assert_int_equal(pump(a, c, &wire), 0);
  assert_int_equal(ax.n_new, 1);
  assert_int_equal(acp_client_protocol_version(c), 1);
  /* Updates outside a turn are legitimate. */
  assert_int_equal(acp_agent_send_available_commands(a, "s1", LIT("[]")), 0);
  assert_int_equal(
      acp_client_prompt_text(c, "s1", "hi", 2, c_on_resp, &cx, NULL), 0);
  assert_int_equal(pump(a, c, &wire), 0);
  assert_int_equal(ax.n_prompt, 1);
  assert_non_null(ax.prompt);
  assert_string_equal(ax.last_sid, "s1");
  assert_int_equal(acp_agent_send_plan(a, "s1", LIT("[]")), 0);
  assert_int_equal(acp_agent_send_thought_chunk(a, "s1", "hm", 2, NULL, 0), 0);
  assert_int_equal(acp_agent_send_message_chunk(a, "s1", "Hello", 5,
                                                LIT("{\"messageId\":\"m1\"}")),
                   0);
  assert_int_equal(acp_agent_send_tool_call(a, "s1", "t1", "Read", "read",
                                            "pending", NULL, 0),
                   0);
  assert_int_equal(
      acp_agent_send_tool_call_update(a, "s1", "t1", "completed", NULL, 0), 0);
  assert_int_equal(acp_agent_send_current_mode(a, "s1", "ask"), 0);
  assert_int_equal(acp_agent_send_config_options(a, "s1", LIT("[]")), 0);
  assert_int_equal(acp_agent_send_session_info(a, "s1", "T", NULL, 0), 0);
  assert_int_equal(acp_agent_send_usage(a, "s1", 10, 100,
                                        LIT("{\"cost\":{\"amount\":0.5,"
                                            "\"currency\":\"USD\"}}")),
                   0);
  assert_int_equal(acp_agent_send_user_message_chunk(a, "s1", "u", 1, NULL, 0),
                   0);
  assert_int_equal(acp_agent_send_update_raw(
                       a, "s1", LIT("{\"sessionUpdate\":\"_custom\",\"a\":1}")),
                   0);
  /* extra must be an object */
  assert_int_equal(acp_agent_send_message_chunk(a, "s1", "x", 1, LIT("[1]")),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_agent_respond_prompt(a, ax.prompt, "end_turn", NULL, 0),
                   0);
  assert_int_equal(pump(a, c, &wire), 0);
  assert_int_equal(cx.n_updates, 12);
  assert_int_equal(cx.kinds[0], ACP_UPDATE_AVAILABLE_COMMANDS_UPDATE);
  assert_int_equal(cx.kinds[1], ACP_UPDATE_PLAN);
  assert_int_equal(cx.kinds[2], ACP_UPDATE_AGENT_THOUGHT_CHUNK);
  assert_int_equal(cx.kinds[3], ACP_UPDATE_AGENT_MESSAGE_CHUNK);
  assert_int_equal(cx.kinds[4], ACP_UPDATE_TOOL_CALL);
  assert_int_equal(cx.kinds[5], ACP_UPDATE_TOOL_CALL_UPDATE);
  assert_int_equal(cx.kinds[6], ACP_UPDATE_CURRENT_MODE_UPDATE);
  assert_int_equal(cx.kinds[7], ACP_UPDATE_CONFIG_OPTION_UPDATE);
  assert_int_equal(cx.kinds[8], ACP_UPDATE_SESSION_INFO_UPDATE);
  assert_int_equal(cx.kinds[9], ACP_UPDATE_USAGE_UPDATE);
  assert_int_equal(cx.kinds[10], ACP_UPDATE_USER_MESSAGE_CHUNK);
  assert_int_equal(cx.kinds[11], ACP_UPDATE_UNKNOWN);
  assert_non_null(strstr(wire.a2c.data,
                         "{\"sessionUpdate\":\"agent_message_chunk\","
                         "\"content\":{\"type\":\"text\",\"text\":\"Hello\"},"
                         "\"messageId\":\"m1\"}"));
  assert_non_null(strstr(wire.a2c.data, "\"used\":10,\"size\":100,\"cost\":"
                                        "{\"amount\":0.5,\"currency\":"
                                        "\"USD\"}"));
  assert_int_equal(cx.n_resp, 1);
  assert_string_equal(cx.stop, "end_turn");
  /* After a normal (not cancelled) turn updates are still allowed. */
  assert_int_equal(acp_agent_send_message_chunk(a, "s1", "x", 1, NULL, 0), 0);
  wire_clear(&wire);
  acp_client_free(c);
  acp_agent_free(a);
}

static void test_agent_cancelled_turn_blocks_late_updates(void **state) {
  actx ax = {0};
  cctx cx = {0};
  acp_agent *a = make_agent(&ax, 1, 0);
  acp_client *c = make_client(&cx);
  pair_wire wire = {0};

  (void)state;
  assert_int_equal(
      acp_client_prompt_text(c, "s1", "hi", 2, c_on_resp, &cx, NULL), 0);
  assert_int_equal(pump(a, c, &wire), 0);
  assert_non_null(ax.prompt);
  assert_false(acp_agent_request_is_cancelled(ax.prompt));
  assert_int_equal(acp_client_cancel(c, "s1"), 0);
  assert_int_equal(pump(a, c, &wire), 0);
  assert_int_equal(ax.n_cancel, 1);
  assert_int_equal(ax.cancel_had_prompt, 1);
  assert_true(acp_agent_request_is_cancelled(ax.prompt));
  /* Updates after the cancel but before the response are fine. */
  assert_int_equal(
      acp_agent_send_tool_call_update(a, "s1", "t1", "failed", NULL, 0), 0);
  /* The helper sends "cancelled" whatever reason it is given. */
  assert_int_equal(acp_agent_respond_prompt(a, ax.prompt, "end_turn", NULL, 0),
                   0);
  assert_int_equal(acp_agent_send_message_chunk(a, "s1", "late", 4, NULL, 0),
                   ACP_ERR_INVALID_STATE);
  assert_int_equal(
      acp_agent_send_update_raw(a, "s1", LIT("{\"sessionUpdate\":\"plan\"}")),
      ACP_ERR_INVALID_STATE);
  /* Other sessions are unaffected. */
  assert_int_equal(acp_agent_send_message_chunk(a, "s2", "ok", 2, NULL, 0), 0);
  assert_int_equal(pump(a, c, &wire), 0);
  assert_string_equal(cx.stop, "cancelled");
  assert_int_equal(tbuf_count(&wire.a2c, "late"), 0);
  /* The next prompt lifts the block. */
  ax.prompt = NULL;
  assert_int_equal(
      acp_client_prompt_text(c, "s1", "again", 5, c_on_resp, &cx, NULL), 0);
  assert_int_equal(pump(a, c, &wire), 0);
  assert_non_null(ax.prompt);
  assert_int_equal(acp_agent_send_message_chunk(a, "s1", "ok", 2, NULL, 0), 0);
  /* A second prompt while one is running is refused. */
  assert_int_equal(
      acp_client_prompt_text(c, "s1", "dup", 3, c_on_resp, &cx, NULL), 0);
  assert_int_equal(pump(a, c, &wire), 0);
  assert_int_equal(cx.err, ACP_RPC_INVALID_REQUEST);
  assert_int_equal(acp_agent_respond_prompt(a, ax.prompt, "max_tokens",
                                            LIT("{\"inputTokens\":1}")),
                   0);
  assert_int_equal(pump(a, c, &wire), 0);
  assert_string_equal(cx.stop, "max_tokens");
  /* Answering twice is an error. */
  wire_clear(&wire);
  acp_client_free(c);
  acp_agent_free(a);
}

/* Every stop reason of the schema is answered with a literal result (no
 * writer); anything else, near misses included, still goes through the
 * writer and is escaped. The bytes on the wire are checked, not only what
 * the client decoded. */
static void test_agent_stop_reason_results(void **state) {
  static const struct {
    const char *reason;
    const char *usage;
    const char *result;
  } cases[] = {
      {"end_turn", NULL, "\"result\":{\"stopReason\":\"end_turn\"}}"},
      {"cancelled", NULL, "\"result\":{\"stopReason\":\"cancelled\"}}"},
      {"max_tokens", NULL, "\"result\":{\"stopReason\":\"max_tokens\"}}"},
      {"max_turn_requests", NULL,
       "\"result\":{\"stopReason\":\"max_turn_requests\"}}"},
      {"refusal", NULL, "\"result\":{\"stopReason\":\"refusal\"}}"},
      {"end_tur", NULL, "\"result\":{\"stopReason\":\"end_tur\"}}"},
      {"end_turnX", NULL, "\"result\":{\"stopReason\":\"end_turnX\"}}"},
      {"max_token", NULL, "\"result\":{\"stopReason\":\"max_token\"}}"},
      {"", NULL, "\"result\":{\"stopReason\":\"\"}}"},
      {"we\"ird", NULL, "\"result\":{\"stopReason\":\"we\\\"ird\"}}"},
      {"end_turn", "{\"inputTokens\":1}",
       "\"result\":{\"stopReason\":\"end_turn\",\"usage\":{\"inputTokens\":1}"
       "}"},
  };
  actx ax = {0};
  cctx cx = {0};
  acp_agent *a = make_agent(&ax, 1, 0);
  acp_client *c = make_client(&cx);
  pair_wire wire = {0};
  size_t i;

  (void)state;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    ax.prompt = NULL;
    assert_int_equal(
        acp_client_prompt_text(c, "s1", "hi", 2, c_on_resp, &cx, NULL), 0);
    assert_int_equal(pump(a, c, &wire), 0);
    assert_non_null(ax.prompt);
    wire_clear(&wire);
    assert_int_equal(
        acp_agent_respond_prompt(a, ax.prompt, cases[i].reason, cases[i].usage,
                                 cases[i].usage ? strlen(cases[i].usage) : 0),
        0);
    assert_int_equal(pump(a, c, &wire), 0);
    assert_non_null(wire.a2c.data);
    if (strstr(wire.a2c.data, cases[i].result) == NULL)
      fail_msg("case %zu: %s not in %s", i, cases[i].result, wire.a2c.data);
    assert_string_equal(cx.stop, cases[i].reason);
  }
  wire_clear(&wire);
  acp_client_free(c);
  acp_agent_free(a);
}

static void test_agent_cancel_without_prompt_still_notifies(void **state) {
  actx ax = {0};
  acp_agent *a = make_agent(&ax, 1, 0);
  tbuf out = {0};

  (void)state;
  assert_int_equal(agent_feed(a,
                              "{\"jsonrpc\":\"2.0\",\"method\":"
                              "\"session/cancel\",\"params\":{\"sessionId\":"
                              "\"s1\"}}\n",
                              &out),
                   0);
  assert_int_equal(ax.n_cancel, 1);
  assert_int_equal(ax.cancel_had_prompt, 0);
  assert_null(out.data);
  /* Invalid params on a notification: dropped, handler not called. */
  assert_int_equal(agent_feed(a,
                              "{\"jsonrpc\":\"2.0\",\"method\":"
                              "\"session/cancel\",\"params\":{}}\n",
                              &out),
                   0);
  assert_int_equal(ax.n_cancel, 1);
  assert_null(out.data);
  acp_agent_free(a);
}

static void test_agent_cancel_request_reaches_handler(void **state) {
  actx ax = {0};
  acp_agent *a = make_agent(&ax, 1, 0);
  tbuf out = {0};

  (void)state;
  assert_int_equal(agent_feed(a,
                              "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":"
                              "\"session/prompt\",\"params\":{\"sessionId\":"
                              "\"s1\",\"prompt\":[]}}\n",
                              &out),
                   0);
  assert_null(out.data);
  assert_non_null(ax.prompt);
  assert_int_equal(agent_feed(a,
                              "{\"jsonrpc\":\"2.0\",\"method\":"
                              "\"$/cancel_request\",\"params\":{"
                              "\"requestId\":\"p\"}}\n",
                              &out),
                   0);
  assert_int_equal(ax.n_cancel_req, 1);
  assert_non_null(strstr(out.data, "\"id\":\"p\""));
  assert_non_null(strstr(out.data, "\"code\":-32800"));
  /* The cancelled prompt was answered: updates are refused now. */
  assert_int_equal(acp_agent_send_message_chunk(a, "s1", "x", 1, NULL, 0),
                   ACP_ERR_INVALID_STATE);
  tbuf_clear(&out);
  acp_agent_free(a);
}

/* MARK: - request blocks */

/* Counts the allocations an agent makes (a request per turn used to cost
 * a calloc and a strndup). */
typedef struct cmem {
  long allocs;
  long frees;
} cmem;

static void *cm_malloc(size_t n, void *ud) {
  ((cmem *)ud)->allocs++;
  return malloc(n);
}
static void cm_free(void *p, void *ud) {
  if (p != NULL)
    ((cmem *)ud)->frees++;
  free(p);
}
static void *cm_calloc(size_t k, size_t n, void *ud) {
  ((cmem *)ud)->allocs++;
  return calloc(k, n);
}
/* A realloc counts as a new block (the steady-turn test counts every
 * allocation) and, when it moves one, as a free (allocs - frees is what
 * lives). */
static void *cm_realloc(void *p, size_t n, void *ud) {
  ((cmem *)ud)->allocs++;
  if (p != NULL)
    ((cmem *)ud)->frees++;
  return realloc(p, n);
}

typedef struct held {
  acp_agent_request *req[4];
  char sid[4][700];
  char method[4][32];
  int n;
} held;

static int on_prompt_hold(acp_agent *a, acp_agent_request *req, void *ud) {
  held *h = ((actx *)ud)->user;
  const char *sid = acp_agent_request_session_id(req);

  (void)a;
  assert_true(h->n < 4);
  assert_non_null(sid);
  snprintf(h->sid[h->n], sizeof(h->sid[0]), "%s", sid);
  snprintf(h->method[h->n], sizeof(h->method[0]), "%s",
           acp_agent_request_method(req));
  h->req[h->n++] = req;
  return 0;
}

static void prompt_line(char *line, size_t cap, int id, const char *sid) {
  snprintf(line, cap,
           "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"session/prompt\","
           "\"params\":{\"sessionId\":\"%s\",\"prompt\":[{\"type\":\"text\","
           "\"text\":\"hi\"}]}}\n",
           id, sid);
}

/* Requests live in one block each (id, method, session id), and a freed
 * block is kept for the next request: whatever the order of answers and the
 * sizes of the session ids, each request keeps its own strings, answers
 * carry their own ids, and steady turns allocate nothing. */
static void test_agent_request_blocks_reuse_keeps_each_request(void **state) {
  actx x = {0};
  held h = {0};
  cmem cm = {0};
  acp_mem mem = {&cm, cm_malloc, cm_free, cm_calloc, cm_realloc};
  acp_agent_callbacks *cbs;
  acp_agent *a = NULL;
  tbuf out = {0};
  char line[1024];
  char big[601];
  char mid[301];
  long before;
  int i;

  (void)state;
  memset(big, 'b', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  memset(mid, 'm', sizeof(mid) - 1);
  mid[sizeof(mid) - 1] = '\0';
  x.user = &h;
  assert_int_equal(acp_agent_callbacks_new(&cbs), 0);
  acp_agent_callbacks_set_on_session_new(cbs, on_new);
  acp_agent_callbacks_set_on_session_prompt(cbs, on_prompt_hold);
  assert_int_equal(acp_agent_new(&a, cbs, &x, NULL, &mem), 0);
  acp_agent_callbacks_free(cbs);

  /* Two held at once, a short and a long session id, answered in the
   * reverse order: the long one's block becomes the spare. */
  prompt_line(line, sizeof(line), 11, "s1");
  assert_int_equal(agent_feed(a, line, &out), 0);
  prompt_line(line, sizeof(line), 12, mid);
  assert_int_equal(agent_feed(a, line, &out), 0);
  assert_int_equal(h.n, 2);
  assert_string_equal(h.sid[0], "s1");
  assert_string_equal(h.sid[1], mid);
  assert_string_equal(h.method[1], "session/prompt");
  assert_int_equal(acp_agent_respond_prompt(a, h.req[1], "end_turn", NULL, 0),
                   0);
  assert_string_equal(acp_agent_request_session_id(h.req[0]), "s1");
  assert_int_equal(acp_agent_respond_prompt(a, h.req[0], "refusal", NULL, 0),
                   0);
  assert_int_equal(agent_feed(a, "", &out), 0);
  assert_non_null(strstr(out.data, "{\"jsonrpc\":\"2.0\",\"id\":12,\"result\":"
                                   "{\"stopReason\":\"end_turn\"}}"));
  assert_non_null(strstr(out.data, "{\"jsonrpc\":\"2.0\",\"id\":11,\"result\":"
                                   "{\"stopReason\":\"refusal\"}}"));
  tbuf_clear(&out);

  /* A short one in the reused block, then one longer than the spare. */
  prompt_line(line, sizeof(line), 13, "s3");
  assert_int_equal(agent_feed(a, line, &out), 0);
  assert_string_equal(h.sid[2], "s3");
  assert_string_equal(acp_agent_request_session_id(h.req[2]), "s3");
  prompt_line(line, sizeof(line), 14, big);
  assert_int_equal(agent_feed(a, line, &out), 0);
  assert_string_equal(h.sid[3], big);
  assert_string_equal(acp_agent_request_session_id(h.req[2]), "s3");
  assert_int_equal(acp_agent_respond_prompt(a, h.req[2], "end_turn", NULL, 0),
                   0);
  assert_int_equal(acp_agent_respond_prompt(a, h.req[3], "cancelled", NULL, 0),
                   0);
  assert_int_equal(agent_feed(a, "", &out), 0);
  assert_non_null(strstr(out.data, "\"id\":13,\"result\":"
                                   "{\"stopReason\":\"end_turn\"}}"));
  assert_non_null(strstr(out.data, "\"id\":14,\"result\":"
                                   "{\"stopReason\":\"cancelled\"}}"));
  tbuf_clear(&out);

  /* Steady turns: no allocation per request any more. */
  before = cm.allocs;
  for (i = 0; i < 3; i++) {
    h.n = 0;
    prompt_line(line, sizeof(line), 20 + i, "s1");
    assert_int_equal(agent_feed(a, line, &out), 0);
    assert_int_equal(h.n, 1);
    assert_string_equal(h.sid[0], "s1");
    assert_int_equal(acp_agent_respond_prompt(a, h.req[0], "end_turn", NULL, 0),
                     0);
    assert_int_equal(agent_feed(a, "", &out), 0);
  }
  assert_int_equal(cm.allocs, before);
  assert_non_null(strstr(out.data, "\"id\":22,\"result\":"));
  tbuf_clear(&out);
  acp_agent_free(a);
}

/* An agent allocating through `mem` (a counting allocator), with these
 * prompt and (if not NULL) session/close handlers. */
static acp_agent *counted_agent(const acp_mem *mem, acp_agent_request_cb prompt,
                                acp_agent_request_cb close) {
  acp_agent_callbacks *cbs;
  acp_agent *a = NULL;

  assert_int_equal(acp_agent_callbacks_new(&cbs), 0);
  acp_agent_callbacks_set_on_session_prompt(cbs, prompt);
  if (close != NULL)
    acp_agent_callbacks_set_on_session_close(cbs, close);
  assert_int_equal(acp_agent_new(&a, cbs, NULL, NULL, mem), 0);
  acp_agent_callbacks_free(cbs);
  return a;
}

static int on_prompt_refuse(acp_agent *a, acp_agent_request *req, void *ud) {
  (void)ud;
  return acp_agent_respond_error(a, req, -32002, "no such session", NULL, 0);
}

/* A prompt the application refuses (here: every session is unknown to it)
 * leaves nothing behind in the library: a client sending prompts for ever
 * new session ids does not grow the agent. */
static void test_agent_refused_prompts_keep_nothing(void **state) {
  cmem cm = {0};
  acp_mem mem = {&cm, cm_malloc, cm_free, cm_calloc, cm_realloc};
  acp_agent *a = counted_agent(&mem, on_prompt_refuse, NULL);
  tbuf out = {0};
  char line[256];
  char sid[32];
  long live = 0;
  int i;

  (void)state;
  /* Buffers and the spare request block settle in the first ones. */
  for (i = 0; i < 60; i++) {
    if (i == 10)
      live = cm.allocs - cm.frees;
    snprintf(sid, sizeof(sid), "unknown-%d", 100 + i);
    prompt_line(line, sizeof(line), 2 + i, sid);
    assert_int_equal(agent_feed(a, line, &out), 0);
    assert_non_null(strstr(out.data, "\"code\":-32002"));
    tbuf_clear(&out);
  }
  assert_int_equal(cm.allocs - cm.frees, live);
  acp_agent_free(a);
  assert_int_equal(cm.allocs, cm.frees);
}

/* Many sessions with a prompt turn each (past the count where the agent
 * also hashes its sessions by id): each session's own turn is found, not
 * another's, through answers, closes (which forget the session) and new
 * turns; and nothing stays once every session is closed. */
#define MANY_SESSIONS 40

static acp_agent_request *held_prompts[MANY_SESSIONS];

static int on_prompt_keep(acp_agent *a, acp_agent_request *req, void *ud) {
  const char *sid = acp_agent_request_session_id(req);
  (void)a;
  (void)ud;
  assert_non_null(sid);
  held_prompts[atoi(sid + 1)] = req; /* "sN": answered later */
  return 0;
}

static int on_close_ok(acp_agent *a, acp_agent_request *req, void *ud) {
  (void)ud;
  return acp_agent_respond(a, req, "{}", 2);
}

static void many_prompts(acp_agent *a, tbuf *out, int id0, bool busy) {
  char line[256], sid[16];
  for (int i = 0; i < MANY_SESSIONS; i++) {
    snprintf(sid, sizeof(sid), "s%d", i);
    prompt_line(line, sizeof(line), id0 + i, sid);
    tbuf_clear(out);
    assert_int_equal(agent_feed(a, line, out), 0);
    if (busy)
      assert_true(out->data && strstr(out->data, "already running"));
    else
      assert_true(out->data == NULL || !strstr(out->data, "error"));
  }
}

static void test_agent_many_sessions_each_their_turn(void **state) {
  cmem cm = {0};
  acp_mem mem = {&cm, cm_malloc, cm_free, cm_calloc, cm_realloc};
  acp_agent *a = counted_agent(&mem, on_prompt_keep, on_close_ok);
  tbuf out = {0};
  char line[256];
  int i;

  (void)state;
  many_prompts(a, &out, 100, false); /* each held */
  many_prompts(a, &out, 200, true);  /* each session's turn still runs */
  /* The odd sessions' turns end; those sessions take a prompt again. */
  for (i = 1; i < MANY_SESSIONS; i += 2)
    assert_int_equal(
        acp_agent_respond_prompt(a, held_prompts[i], "end_turn", NULL, 0), 0);
  for (i = 0; i < MANY_SESSIONS; i++) {
    char sid[16];
    snprintf(sid, sizeof(sid), "s%d", i);
    prompt_line(line, sizeof(line), 300 + i, sid);
    tbuf_clear(&out);
    assert_int_equal(agent_feed(a, line, &out), 0);
    assert_true((out.data && strstr(out.data, "already running")) ==
                (i % 2 == 0));
  }
  /* Every turn ends and every session is closed: the agent forgets them
   * all, and a prompt in a closed session starts afresh. */
  for (i = 0; i < MANY_SESSIONS; i++) {
    assert_int_equal(
        acp_agent_respond_prompt(a, held_prompts[i], "end_turn", NULL, 0), 0);
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"session/close\","
             "\"params\":{\"sessionId\":\"s%d\"}}\n",
             400 + i, i);
    tbuf_clear(&out);
    assert_int_equal(agent_feed(a, line, &out), 0);
    assert_non_null(strstr(out.data, "\"result\":{}"));
  }
  many_prompts(a, &out, 500, false);
  for (i = 0; i < MANY_SESSIONS; i++)
    assert_int_equal(
        acp_agent_respond_prompt(a, held_prompts[i], "end_turn", NULL, 0), 0);
  tbuf_clear(&out);
  acp_agent_free(a);
  assert_int_equal(cm.allocs, cm.frees);
}

static void test_agent_rejects_bad_arguments(void **state) {
  actx ax = {0};
  acp_agent *a = make_agent(&ax, 1, 0);

  (void)state;
  assert_int_equal(acp_agent_new(NULL, NULL, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_agent_send_message_chunk(a, NULL, "x", 1, NULL, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(
      acp_agent_send_tool_call(a, "s", NULL, "t", NULL, NULL, NULL, 0),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_agent_respond(a, NULL, LIT("{}")),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_agent_call(a, NULL, NULL, 0, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(
      acp_agent_fs_read_text_file(a, "s", NULL, 0, 0, NULL, NULL, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_agent_cancel_call(a, 42), ACP_ERR_NOT_FOUND);
  acp_agent_free(NULL);
  acp_agent_callbacks_free(NULL);
  acp_agent_free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_agent_initialize_negotiates_version_1),
      cmocka_unit_test(test_agent_client_supports),
      cmocka_unit_test(test_agent_update_observer_sees_each_update_sent),
      cmocka_unit_test(test_agent_initialize_raw_answer_cannot_raise_version),
      cmocka_unit_test(test_agent_unknown_request_is_32601),
      cmocka_unit_test(test_agent_ext_methods_reach_ext_handlers),
      cmocka_unit_test(test_agent_invalid_params_is_32602_with_path),
      cmocka_unit_test(test_agent_request_before_initialize_is_accepted),
      cmocka_unit_test(test_agent_message_chunk_val),
      cmocka_unit_test(test_agent_prompt_turn_streams_updates),
      cmocka_unit_test(test_agent_cancelled_turn_blocks_late_updates),
      cmocka_unit_test(test_agent_stop_reason_results),
      cmocka_unit_test(test_agent_cancel_without_prompt_still_notifies),
      cmocka_unit_test(test_agent_cancel_request_reaches_handler),
      cmocka_unit_test(test_agent_request_blocks_reuse_keeps_each_request),
      cmocka_unit_test(test_agent_refused_prompts_keep_nothing),
      cmocka_unit_test(test_agent_many_sessions_each_their_turn),
      cmocka_unit_test(test_agent_rejects_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
