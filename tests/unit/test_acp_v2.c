/*
 * ACP v2 draft negotiation on both roles: an agent answers 2 only when the
 * application opted in and the client asked for 2 or more, a client asks
 * for the highest version it enabled and speaks what the agent answered,
 * and each role then checks and dispatches with the negotiated version's
 * method table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "acp_roles_pair.h"
#include "acp/types_v2.h"

static int new_hits;
static int ext_hits;
static int64_t last_code;
static int n_ok;

static int a_session_new(acp_agent *a, acp_agent_request *req, void *ud) {
  (void)ud;
  new_hits++;
  return acp_agent_respond_session_new(a, req, "s1", NULL, 0);
}

static int a_session_load(acp_agent *a, acp_agent_request *req, void *ud) {
  (void)ud;
  return acp_agent_respond_empty(a, req);
}

/* How a_session_prompt takes the turn. */
enum {
  P_END,    /* one chunk, end_turn */
  P_FAIL,   /* one chunk, then an error */
  P_REFUSE, /* an error before anything is sent */
  P_KEEP    /* kept for later (kept_req), nothing sent */
};
static int prompt_fails;
static acp_agent_request *kept_req;

/* A v1-shaped prompt handler (see the enum above). */
static int a_session_prompt(acp_agent *a, acp_agent_request *req, void *ud) {
  (void)ud;
  if (prompt_fails == P_REFUSE)
    return acp_agent_respond_error(a, req, -32002, "no such session", NULL, 0);
  if (prompt_fails == P_KEEP) {
    kept_req = req;
    return 0;
  }
  assert_int_equal(acp_agent_send_message_chunk(a, "s1", LIT("hi"), NULL, 0),
                   0);
  if (prompt_fails == P_FAIL)
    return acp_agent_respond_error(a, req, -32603, "boom", NULL, 0);
  /* Under v2 the prompt was accepted by the library: no second answer. */
  if (acp_agent_protocol_version(a) == ACP_PROTOCOL_V2)
    assert_int_equal(acp_agent_respond(a, req, LIT("{}")),
                     ACP_ERR_INVALID_STATE);
  return acp_agent_respond_prompt(a, req, "end_turn", NULL, 0);
}

static int a_ext(acp_agent *a, acp_agent_request *req, void *ud) {
  (void)ud;
  ext_hits++;
  return acp_agent_respond_empty(a, req);
}

static int c_permission(acp_client *c, acp_client_request *req, void *ud) {
  (void)ud;
  return acp_client_respond(c, req,
                            LIT("{\"outcome\":{\"outcome\":\"cancelled\"}}"));
}

static int c_resp(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  const acp_json_val *code;
  (void)c;
  (void)ud;
  last_code = 0;
  if (msg->error != NULL) {
    code = acp_json_obj_getz(msg->error, "code");
    acp_json_get_int64(code, &last_code);
  } else {
    n_ok++;
  }
  return 0;
}

static int a_resp(acp_agent *a, const acp_rpc_msg *msg, void *ud) {
  (void)a;
  return c_resp(NULL, msg, ud);
}

/* An agent without an initialize handler (the library answers) and
 * with session/new, session/load and an extension handler. */
static acp_agent *new_agent(int max, bool ext) {
  acp_agent_callbacks *ac;
  acp_agent *a;

  assert_int_equal(acp_agent_callbacks_new(&ac), 0);
  acp_agent_callbacks_set_on_session_new(ac, a_session_new);
  acp_agent_callbacks_set_on_session_load(ac, a_session_load);
  acp_agent_callbacks_set_on_session_prompt(ac, a_session_prompt);
  if (ext)
    acp_agent_callbacks_set_on_ext_request(ac, a_ext);
  assert_int_equal(acp_agent_new(&a, ac, NULL, NULL, NULL), 0);
  acp_agent_callbacks_free(ac);
  if (max != 0)
    assert_int_equal(acp_agent_set_max_protocol_version(a, max), 0);
  return a;
}

static acp_client *new_client(int max) {
  acp_client_callbacks *cc;
  acp_client *c;

  assert_int_equal(acp_client_callbacks_new(&cc), 0);
  acp_client_callbacks_set_on_request_permission(cc, c_permission);
  assert_int_equal(acp_client_new(&c, cc, NULL, NULL, NULL), 0);
  acp_client_callbacks_free(cc);
  if (max != 0)
    assert_int_equal(acp_client_set_max_protocol_version(c, max), 0);
  return c;
}

/* Connect, initialize, and return the version both ended on (they must
 * agree). */
static int negotiate(acp_agent *a, acp_client *c, pair_wire *w) {
  n_ok = 0;
  assert_int_equal(
      acp_client_initialize(c, NULL, 0, NULL, 0, c_resp, NULL, NULL), 0);
  assert_int_equal(pump(a, c, w), 0);
  assert_int_equal(n_ok, 1);
  assert_int_equal(acp_agent_protocol_version(a),
                   (int)acp_client_protocol_version(c));
  return acp_agent_protocol_version(a);
}

static void run_case(int agent_max, int client_max, int want) {
  acp_agent *a = new_agent(agent_max, false);
  acp_client *c = new_client(client_max);
  pair_wire w = {{0}, {0}};

  assert_int_equal(negotiate(a, c, &w), want);
  if (client_max == ACP_PROTOCOL_V2) {
    assert_non_null(strstr(w.c2a.data, "\"protocolVersion\":2"));
    assert_non_null(strstr(w.c2a.data, "\"info\":"));
  } else {
    assert_non_null(strstr(w.c2a.data, "\"protocolVersion\":1"));
  }
  if (want == ACP_PROTOCOL_V2) {
    assert_non_null(strstr(w.a2c.data, "\"capabilities\":"));
    assert_null(strstr(w.a2c.data, "agentCapabilities"));
  } else {
    assert_non_null(strstr(w.a2c.data, "\"agentCapabilities\":"));
  }
  wire_clear(&w);
  acp_client_free(c);
  acp_agent_free(a);
}

static void test_v2_default_agent_answers_1(void **s) {
  (void)s;
  run_case(0, ACP_PROTOCOL_V2, ACP_PROTOCOL_V1);
  run_case(ACP_PROTOCOL_V1, ACP_PROTOCOL_V2, ACP_PROTOCOL_V1);
}

static void test_v2_client_v1_gets_1(void **s) {
  (void)s;
  run_case(ACP_PROTOCOL_V2, 0, ACP_PROTOCOL_V1);
  run_case(ACP_PROTOCOL_V2, ACP_PROTOCOL_V1, ACP_PROTOCOL_V1);
}

static void test_v2_both_opted_in_get_2(void **s) {
  (void)s;
  run_case(ACP_PROTOCOL_V2, ACP_PROTOCOL_V2, ACP_PROTOCOL_V2);
}

/* Raw initialize requests: 65535 gets 2 (the latest we speak), 0 and 1 get
 * 1, a string is -32602. */
static void test_v2_agent_answers_raw_versions(void **s) {
  static const struct {
    const char *line;
    const char *want;
  } cases[] = {
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
       "\"protocolVersion\":65535}}\n",
       "\"protocolVersion\":2"},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
       "\"protocolVersion\":2}}\n",
       "\"protocolVersion\":2"},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
       "\"protocolVersion\":1}}\n",
       "\"protocolVersion\":1"},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
       "\"protocolVersion\":0}}\n",
       "\"protocolVersion\":1"},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
       "\"protocolVersion\":\"2\"}}\n",
       "-32602"},
  };
  size_t i;
  (void)s;

  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    acp_agent *a = new_agent(ACP_PROTOCOL_V2, false);
    tbuf out = {0};

    assert_int_equal(agent_feed(a, cases[i].line, &out), 0);
    if (strstr(out.data, cases[i].want) == NULL)
      fail_msg("case %zu: want %s in %s", i, cases[i].want, out.data);
    tbuf_clear(&out);
    acp_agent_free(a);
  }
}

/* After a v2 initialize the agent dispatches with the v2 table: session/new
 * reaches its handler, session/load (v1 only) does not; tool_call/cancel
 * (v2 only) is a known method checked for its required members. */
static void test_v2_agent_dispatches_with_v2_table(void **s) {
  acp_agent *a = new_agent(ACP_PROTOCOL_V2, false);
  acp_client *c = new_client(ACP_PROTOCOL_V2);
  (void)s;

  assert_int_equal(negotiate(a, c, NULL), ACP_PROTOCOL_V2);
  new_hits = 0;
  assert_int_equal(acp_client_call(c, "session/new", LIT("{\"cwd\":\"/\"}"),
                                   c_resp, NULL, NULL),
                   0);
  assert_int_equal(pump(a, c, NULL), 0);
  assert_int_equal(new_hits, 1);
  assert_int_equal(last_code, 0);
  assert_int_equal(acp_client_call(c, "session/load",
                                   LIT("{\"sessionId\":\"s1\",\"cwd\":\"/\","
                                       "\"mcpServers\":[]}"),
                                   c_resp, NULL, NULL),
                   0);
  assert_int_equal(pump(a, c, NULL), 0);
  assert_int_equal(last_code, ACP_RPC_METHOD_NOT_FOUND);
  assert_int_equal(
      acp_client_call(c, "tool_call/cancel", LIT("{}"), c_resp, NULL, NULL), 0);
  assert_int_equal(pump(a, c, NULL), 0);
  assert_int_equal(last_code, ACP_RPC_INVALID_PARAMS);
  acp_client_free(c);
  acp_agent_free(a);

  /* The same agent speaking v1 serves session/load, and knows no
   * tool_call/cancel (an extension handler sees it). */
  a = new_agent(ACP_PROTOCOL_V2, true);
  c = new_client(ACP_PROTOCOL_V1);
  assert_int_equal(negotiate(a, c, NULL), ACP_PROTOCOL_V1);
  assert_int_equal(acp_client_call(c, "session/load",
                                   LIT("{\"sessionId\":\"s1\",\"cwd\":\"/\","
                                       "\"mcpServers\":[]}"),
                                   c_resp, NULL, NULL),
                   0);
  assert_int_equal(pump(a, c, NULL), 0);
  assert_int_equal(last_code, 0);
  ext_hits = 0;
  assert_int_equal(
      acp_client_call(c, "tool_call/cancel", LIT("{}"), c_resp, NULL, NULL), 0);
  assert_int_equal(pump(a, c, NULL), 0);
  assert_int_equal(ext_hits, 1);
  acp_client_free(c);
  acp_agent_free(a);
}

/* The client checks with the table of the version the agent answered: a v2
 * session/request_permission needs `title`, a v1 one does not. */
static void test_v2_client_checks_with_v2_table(void **s) {
  static const char perm[] =
      "{\"sessionId\":\"s1\",\"toolCall\":{\"toolCallId\":\"t1\"},"
      "\"options\":[]}";
  int v;
  (void)s;

  for (v = ACP_PROTOCOL_V1; v <= ACP_PROTOCOL_V2; v++) {
    acp_agent *a = new_agent(ACP_PROTOCOL_V2, false);
    acp_client *c = new_client(v);

    assert_int_equal(negotiate(a, c, NULL), v);
    n_ok = 0;
    last_code = 0;
    assert_int_equal(acp_agent_call(a, "session/request_permission", perm,
                                    sizeof(perm) - 1, a_resp, NULL, NULL),
                     0);
    assert_int_equal(pump(a, c, NULL), 0);
    if (v == ACP_PROTOCOL_V2) {
      assert_int_equal(last_code, ACP_RPC_INVALID_PARAMS);
    } else {
      assert_int_equal(last_code, 0);
      assert_int_equal(n_ok, 1);
    }
    acp_client_free(c);
    acp_agent_free(a);
  }
}

/* A client that only enabled v1 and gets 2 stays on the v1 table and can
 * tell (acp_client_protocol_version()) that it should close. */
static void test_v2_client_gets_unasked_version(void **s) {
  acp_client *c = new_client(0);
  tbuf out = {0};
  char line[160];
  int64_t id = -1;
  const char *d;
  (void)s;

  assert_int_equal(
      acp_client_initialize(c, NULL, 0, NULL, 0, c_resp, NULL, &id), 0);
  assert_true(acp_client_send(c, &d) > 0);
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":{"
           "\"protocolVersion\":2,\"info\":{\"name\":\"x\"}}}\n",
           (long long)id);
  assert_int_equal(client_feed(c, line, &out), 0);
  assert_int_equal(acp_client_protocol_version(c), 2);
  /* Still v1: a v1 session/request_permission without title is served. */
  tbuf_clear(&out);
  assert_int_equal(
      client_feed(c,
                  "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":"
                  "\"session/request_permission\",\"params\":{\"sessionId\":"
                  "\"s1\",\"toolCall\":{\"toolCallId\":\"t\"},\"options\":[]}}"
                  "\n",
                  &out),
      0);
  assert_non_null(out.data);
  assert_non_null(strstr(out.data, "\"cancelled\""));
  tbuf_clear(&out);
  acp_client_free(c);
}

/* The same v1-shaped prompt handler under v1 and v2: v2 gets the prompt
 * accepted with a messageId, user_message, running, a chunk with a
 * messageId and the end as an idle state_update; a failing turn ends idle
 * with stopReason error, never with a second response. */
static void test_v2_prompt_lifecycle(void **s) {
  static const char prompt[] =
      "{\"sessionId\":\"s1\",\"prompt\":[{\"type\":\"text\","
      "\"text\":\"x\"}]}";
  int v, fail;
  (void)s;

  for (fail = P_END; fail <= P_FAIL; fail++) {
    for (v = ACP_PROTOCOL_V1; v <= ACP_PROTOCOL_V2; v++) {
      acp_agent *a = new_agent(ACP_PROTOCOL_V2, false);
      acp_client *c = new_client(v);
      pair_wire w = {{0}, {0}};

      prompt_fails = fail;
      assert_int_equal(negotiate(a, c, NULL), v);
      n_ok = 0;
      assert_int_equal(acp_client_call(c, "session/prompt", prompt,
                                       sizeof(prompt) - 1, c_resp, NULL, NULL),
                       0);
      assert_int_equal(pump(a, c, &w), 0);
      if (v == ACP_PROTOCOL_V2) {
        assert_int_equal(n_ok, 1);
        assert_int_equal(tbuf_count(&w.a2c, "\"result\""), 1);
        assert_non_null(strstr(w.a2c.data, "\"result\":{\"messageId\":"));
        /* The acceptance comes before what the handler sent. */
        assert_true(strstr(w.a2c.data, "\"result\":{\"messageId\":") <
                    strstr(w.a2c.data, "\"agent_message_chunk\""));
        assert_non_null(
            strstr(w.a2c.data, "\"sessionUpdate\":\"user_message\""));
        assert_non_null(strstr(w.a2c.data, "\"state\":\"running\""));
        assert_non_null(strstr(w.a2c.data, "\"sessionUpdate\":"
                                           "\"agent_message_chunk\","
                                           "\"messageId\":"));
        assert_non_null(
            strstr(w.a2c.data, fail ? "\"state\":\"idle\","
                                      "\"stopReason\":\"error\""
                                    : "\"state\":\"idle\","
                                      "\"stopReason\":\"end_turn\""));
        assert_null(strstr(w.a2c.data, "\"error\":{"));
      } else {
        assert_null(strstr(w.a2c.data, "state_update"));
        assert_null(strstr(w.a2c.data, "messageId"));
        assert_non_null(strstr(w.a2c.data, fail ? "\"error\":{"
                                                : "\"stopReason\":"
                                                  "\"end_turn\""));
      }
      wire_clear(&w);
      acp_client_free(c);
      acp_agent_free(a);
    }
  }
  prompt_fails = 0;
}

/*
 * v2: the library accepts a prompt only once the handler takes it. A
 * handler that refuses it before sending anything (an unknown session, a
 * busy one) answers with a plain JSON-RPC error, with no turn around it;
 * one that keeps it for later has it accepted when it returns, and ends it
 * with its idle state_update afterwards.
 */
static void test_v2_prompt_accepted_when_taken(void **s) {
  static const char prompt[] =
      "{\"sessionId\":\"s1\",\"prompt\":[{\"type\":\"text\","
      "\"text\":\"x\"}]}";
  int v;
  (void)s;

  for (v = ACP_PROTOCOL_V1; v <= ACP_PROTOCOL_V2; v++) {
    acp_agent *a = new_agent(ACP_PROTOCOL_V2, false);
    acp_client *c = new_client(v);
    pair_wire w = {{0}, {0}};

    assert_int_equal(negotiate(a, c, NULL), v);
    /* Refused at once. */
    prompt_fails = P_REFUSE;
    n_ok = 0;
    last_code = 0;
    assert_int_equal(acp_client_call(c, "session/prompt", prompt,
                                     sizeof(prompt) - 1, c_resp, NULL, NULL),
                     0);
    assert_int_equal(pump(a, c, &w), 0);
    assert_int_equal(n_ok, 0);
    assert_int_equal(last_code, -32002);
    assert_int_equal(tbuf_count(&w.a2c, "\"result\""), 0);
    assert_int_equal(tbuf_count(&w.a2c, "session/update"), 0);
    wire_clear(&w);
    /* Kept: under v2 accepted when the handler returned. */
    prompt_fails = P_KEEP;
    kept_req = NULL;
    assert_int_equal(acp_client_call(c, "session/prompt", prompt,
                                     sizeof(prompt) - 1, c_resp, NULL, NULL),
                     0);
    assert_int_equal(pump(a, c, &w), 0);
    assert_non_null(kept_req);
    if (v == ACP_PROTOCOL_V2) {
      assert_int_equal(n_ok, 1);
      assert_non_null(strstr(w.a2c.data, "\"result\":{\"messageId\":"));
      assert_non_null(strstr(w.a2c.data, "\"sessionUpdate\":\"user_message\""));
      assert_non_null(strstr(w.a2c.data, "\"state\":\"running\""));
    } else {
      assert_int_equal(n_ok, 0);
      assert_int_equal(tbuf_count(&w.a2c, "\"result\""), 0);
    }
    wire_clear(&w);
    /* Ended later, outside the handler. */
    assert_int_equal(acp_agent_respond_prompt(a, kept_req, "end_turn", NULL, 0),
                     0);
    assert_int_equal(pump(a, c, &w), 0);
    if (v == ACP_PROTOCOL_V2) {
      assert_int_equal(n_ok, 1);
      assert_non_null(strstr(w.a2c.data, "\"state\":\"idle\","
                                         "\"stopReason\":\"end_turn\""));
      assert_int_equal(tbuf_count(&w.a2c, "\"result\""), 0);
    } else {
      assert_int_equal(n_ok, 1);
      assert_non_null(strstr(w.a2c.data, "\"stopReason\":\"end_turn\""));
    }
    wire_clear(&w);
    acp_client_free(c);
    acp_agent_free(a);
  }
  prompt_fails = P_END;
  kept_req = NULL;
}

/* The typed senders speak the negotiated version: v2 has one tool call
 * upsert, plans as plan_update items, permission requests with a title and
 * a subject, and states the application reports (requires_action). */
static void test_v2_update_shapes(void **s) {
  static const char tc[] =
      "{\"toolCallId\":\"t1\",\"title\":\"Edit a.c\",\"kind\":\"edit\"}";
  static const char opts[] =
      "[{\"optionId\":\"ok\",\"name\":\"OK\",\"kind\":\"allow_once\"}]";
  static const char entries[] =
      "[{\"content\":\"A\",\"priority\":\"high\",\"status\":\"pending\"}]";
  int v;
  (void)s;

  for (v = ACP_PROTOCOL_V1; v <= ACP_PROTOCOL_V2; v++) {
    acp_agent *a = new_agent(ACP_PROTOCOL_V2, false);
    acp_client *c = new_client(v);
    pair_wire w = {{0}, {0}};

    assert_int_equal(negotiate(a, c, NULL), v);
    assert_int_equal(acp_agent_send_tool_call(a, "s1", "t1", "Edit a.c", "edit",
                                              "pending", NULL, 0),
                     0);
    assert_int_equal(acp_agent_send_plan(a, "s1", LIT(entries)), 0);
    assert_int_equal(acp_agent_send_plan_update(a, "s1", "p2", LIT(entries)),
                     0);
    assert_int_equal(acp_agent_send_state(a, "s1", "requires_action"),
                     v == ACP_PROTOCOL_V2 ? 0 : ACP_ERR_INVALID_STATE);
    n_ok = 0;
    assert_int_equal(acp_agent_request_permission(a, "s1", LIT(tc), LIT(opts),
                                                  a_resp, NULL, NULL),
                     0);
    assert_int_equal(pump(a, c, &w), 0);
    assert_int_equal(n_ok, 1); /* answered (cancelled) by c_permission */
    assert_non_null(strstr(w.a2c.data, "\"planId\":\"p2\""));
    if (v == ACP_PROTOCOL_V2) {
      assert_null(strstr(w.a2c.data, "\"sessionUpdate\":\"tool_call\""));
      assert_non_null(strstr(w.a2c.data, "\"sessionUpdate\":"
                                         "\"tool_call_update\",\"toolCallId\":"
                                         "\"t1\",\"title\":\"Edit a.c\""));
      assert_null(strstr(w.a2c.data, "\"sessionUpdate\":\"plan\""));
      assert_non_null(strstr(w.a2c.data, "\"plan\":{\"type\":\"items\","
                                         "\"planId\":\"plan\",\"entries\":"));
      assert_non_null(strstr(w.a2c.data, "\"state\":\"requires_action\""));
      assert_non_null(strstr(w.a2c.data,
                             "\"params\":{\"sessionId\":\"s1\",\"title\":"
                             "\"Edit a.c\",\"subject\":{\"type\":\"tool_call\","
                             "\"toolCall\":{\"toolCallId\":\"t1\""));
      /* A v2 permission needs an object to take its title from. */
      assert_int_equal(acp_agent_request_permission(
                           a, "s1", LIT("[1]"), LIT(opts), NULL, NULL, NULL),
                       ACP_ERR_INVALID_ARGUMENT);
    } else {
      assert_non_null(strstr(w.a2c.data, "\"sessionUpdate\":\"tool_call\","));
      assert_non_null(strstr(w.a2c.data, "\"sessionUpdate\":\"plan\","
                                         "\"entries\":"));
      assert_null(strstr(w.a2c.data, "state_update"));
      assert_non_null(strstr(w.a2c.data, "\"params\":{\"sessionId\":\"s1\","
                                         "\"toolCall\":"));
      assert_null(strstr(w.a2c.data, "\"subject\""));
    }
    assert_int_equal(acp_agent_send_state(a, "s1", NULL),
                     ACP_ERR_INVALID_ARGUMENT);
    assert_int_equal(acp_agent_send_plan_update(a, "s1", NULL, LIT(entries)),
                     ACP_ERR_INVALID_ARGUMENT);
    wire_clear(&w);
    acp_client_free(c);
    acp_agent_free(a);
  }
}

static char sent_update[256];
static int n_sent;

static void on_sent(acp_agent *a, const char *sid, const char *u, size_t n,
                    void *ud) {
  (void)a;
  (void)sid;
  (void)ud;
  n_sent++;
  snprintf(sent_update, sizeof(sent_update), "%.*s", (int)n, u);
}

/* What on_update_sent reports is the update as it went out: under v2 a
 * raw chunk without a messageId gets one on the wire, and the observer
 * (which keeps a history to replay) sees it with that id. v1 unchanged. */
static void test_v2_update_sent_is_what_went_out(void **s) {
  static const char chunk[] =
      "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":"
      "\"text\",\"text\":\"hi\"}}";
  int v;
  (void)s;

  for (v = ACP_PROTOCOL_V1; v <= ACP_PROTOCOL_V2; v++) {
    acp_agent_callbacks *ac;
    acp_agent *a;
    acp_client *c = new_client(v);
    pair_wire w = {{0}, {0}};
    const char *at;

    assert_int_equal(acp_agent_callbacks_new(&ac), 0);
    acp_agent_callbacks_set_on_session_new(ac, a_session_new);
    acp_agent_callbacks_set_on_update_sent(ac, on_sent);
    assert_int_equal(acp_agent_new(&a, ac, NULL, NULL, NULL), 0);
    acp_agent_callbacks_free(ac);
    assert_int_equal(acp_agent_set_max_protocol_version(a, ACP_PROTOCOL_V2), 0);
    assert_int_equal(negotiate(a, c, NULL), v);
    n_sent = 0;
    assert_int_equal(acp_agent_send_update_raw(a, "s1", LIT(chunk)), 0);
    assert_int_equal(pump(a, c, &w), 0);
    assert_int_equal(n_sent, 1);
    if (v == ACP_PROTOCOL_V2) {
      assert_string_equal(sent_update,
                          "{\"sessionUpdate\":\"agent_message_chunk\","
                          "\"messageId\":\"msg_0\",\"content\":{\"type\":"
                          "\"text\",\"text\":\"hi\"}}");
      /* exactly the bytes of the update on the wire */
      at = strstr(w.a2c.data, "\"update\":");
      assert_non_null(at);
      assert_memory_equal(at + 9, sent_update, strlen(sent_update));
    } else {
      assert_string_equal(sent_update, chunk);
    }
    wire_clear(&w);
    acp_client_free(c);
    acp_agent_free(a);
  }
}

static char last_params[512];
static char last_method[64];

/* Remember what arrived, answer {}. */
static int a_record(acp_agent *a, acp_agent_request *req, void *ud) {
  size_t n = 0;
  const char *raw = acp_json_raw(acp_agent_request_params(req), &n);
  (void)ud;
  snprintf(last_method, sizeof(last_method), "%s",
           acp_agent_request_method(req));
  snprintf(last_params, sizeof(last_params), "%.*s", (int)n, raw ? raw : "");
  return acp_agent_respond(a, req, LIT("{}"));
}

/* The client's typed v2 calls put what the v2 schema asks on the wire. */
static void test_v2_client_calls(void **s) {
  acp_agent_callbacks *ac;
  acp_agent *a;
  acp_client *c = new_client(ACP_PROTOCOL_V2);
  pair_wire w = {{0}, {0}};
  (void)s;

  assert_int_equal(acp_agent_callbacks_new(&ac), 0);
  acp_agent_callbacks_set_on_session_new(ac, a_session_new);
  acp_agent_callbacks_set_on_auth_login(ac, a_record);
  acp_agent_callbacks_set_on_auth_logout(ac, a_record);
  acp_agent_callbacks_set_on_tool_call_cancel(ac, a_record);
  acp_agent_callbacks_set_on_terminal_cancel(ac, a_record);
  acp_agent_callbacks_set_on_session_resume(ac, a_record);
  acp_agent_callbacks_set_on_session_set_config_option(ac, a_record);
  assert_int_equal(acp_agent_new(&a, ac, NULL, NULL, NULL), 0);
  acp_agent_callbacks_free(ac);
  assert_int_equal(acp_agent_set_max_protocol_version(a, ACP_PROTOCOL_V2), 0);
  assert_int_equal(negotiate(a, c, NULL), ACP_PROTOCOL_V2);

#define CALL_AND_CHECK(call, method, params)                                   \
  do {                                                                         \
    n_ok = 0;                                                                  \
    last_method[0] = '\0';                                                     \
    assert_int_equal(call, 0);                                                 \
    assert_int_equal(pump(a, c, &w), 0);                                       \
    assert_int_equal(n_ok, 1);                                                 \
    assert_string_equal(last_method, method);                                  \
    assert_string_equal(last_params, params);                                  \
  } while (0)
  CALL_AND_CHECK(acp_client_auth_login(c, "gh", c_resp, NULL, NULL),
                 "auth/login", "{\"methodId\":\"gh\"}");
  CALL_AND_CHECK(acp_client_auth_logout(c, c_resp, NULL, NULL), "auth/logout",
                 "{}");
  CALL_AND_CHECK(acp_client_tool_call_cancel(c, "s1", "t1", c_resp, NULL, NULL),
                 "tool_call/cancel",
                 "{\"sessionId\":\"s1\",\"toolCallId\":\"t1\"}");
  CALL_AND_CHECK(
      acp_client_terminal_cancel(c, "s1", "term1", c_resp, NULL, NULL),
      "terminal/cancel", "{\"sessionId\":\"s1\",\"terminalId\":\"term1\"}");
  CALL_AND_CHECK(acp_client_session_resume_replay(c, "s1", "/w", NULL, 0,
                                                  LIT("{\"type\":\"start\"}"),
                                                  c_resp, NULL, NULL),
                 "session/resume",
                 "{\"sessionId\":\"s1\",\"cwd\":\"/w\",\"replayFrom\":{"
                 "\"type\":\"start\"}}");
  CALL_AND_CHECK(acp_client_session_resume_replay(c, "s1", "/w", LIT("[]"),
                                                  NULL, 0, c_resp, NULL, NULL),
                 "session/resume",
                 "{\"sessionId\":\"s1\",\"cwd\":\"/w\",\"mcpServers\":[]}");
  CALL_AND_CHECK(acp_client_set_config_option(c, "s1", "mode", LIT("\"ask\""),
                                              c_resp, NULL, NULL),
                 "session/set_config_option",
                 "{\"sessionId\":\"s1\",\"configId\":\"mode\",\"type\":"
                 "\"id\",\"value\":\"ask\"}");
  CALL_AND_CHECK(acp_client_set_config_option(c, "s1", "verbose", LIT("true"),
                                              c_resp, NULL, NULL),
                 "session/set_config_option",
                 "{\"sessionId\":\"s1\",\"configId\":\"verbose\",\"type\":"
                 "\"boolean\",\"value\":true}");
#undef CALL_AND_CHECK
  assert_int_equal(acp_client_tool_call_cancel(c, "s1", NULL, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(
      acp_client_terminal_cancel(NULL, "s1", "t", NULL, NULL, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_client_auth_login(c, NULL, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_client_session_resume_replay(c, "s1", NULL, NULL, 0,
                                                    NULL, 0, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  wire_clear(&w);
  acp_client_free(c);
  acp_agent_free(a);
}

/* MARK: - Typed v2 params and updates in the roles */

static char typed_tool[32];
static int typed_rv;

/* tool_call/cancel through the generated v2 struct. */
static int a_typed_cancel(acp_agent *a, acp_agent_request *req, void *ud) {
  acp_arena *arena = NULL;
  const acp_v2_cancel_tool_call_request *p = NULL;
  (void)ud;
  assert_int_equal(acp_arena_new(&arena, NULL), 0);
  typed_rv = acp_agent_request_decode(req, arena, (const void **)&p);
  if (typed_rv == 0)
    snprintf(typed_tool, sizeof(typed_tool), "%.*s", (int)p->tool_call_id.len,
             p->tool_call_id.ptr);
  assert_int_equal(acp_agent_request_decode(req, NULL, (const void **)&p),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_arena_free(arena);
  return acp_agent_respond(a, req, LIT("{}"));
}

static int n_idle, n_chunks_with_id, n_running, n_user;

static int c_typed_update(acp_client *c, const acp_client_update *u, void *ud) {
  acp_arena *arena = NULL;
  const acp_v2_session_update *su = NULL;
  (void)ud;
  assert_int_equal(acp_arena_new(&arena, NULL), 0);
  assert_int_equal(acp_client_update_decode(c, u, arena, (const void **)&su),
                   0);
  switch (su->kind) {
  case ACP_V2_SESSION_UPDATE_KIND_STATE_UPDATE:
    if (su->state_update->kind == ACP_V2_STATE_UPDATE_KIND_IDLE) {
      assert_int_equal(su->state_update->idle->variant.kind,
                       ACP_V2_IDLE_STATE_UPDATE_KIND_END_TURN);
      n_idle++;
    } else if (su->state_update->kind == ACP_V2_STATE_UPDATE_KIND_RUNNING) {
      n_running++;
    }
    break;
  case ACP_V2_SESSION_UPDATE_KIND_AGENT_MESSAGE_CHUNK:
    if (su->agent_message_chunk->message_id.len > 0)
      n_chunks_with_id++;
    break;
  case ACP_V2_SESSION_UPDATE_KIND_USER_MESSAGE:
    assert_int_equal(su->user_message->content_count, 1);
    n_user++;
    break;
  default:
    break;
  }
  acp_arena_free(arena);
  return 0;
}

/* The agent decodes v2 params into the generated structs, the client the
 * v2 updates; a v2 message whose nested member has the wrong type is
 * refused -32602 before any handler runs. */
static void test_v2_typed_in_roles(void **s) {
  static const char prompt[] =
      "{\"sessionId\":\"s1\",\"prompt\":[{\"type\":\"text\","
      "\"text\":\"x\"}]}";
  static const char bad_prompt[] =
      "{\"sessionId\":\"s1\",\"prompt\":[{\"type\":\"text\","
      "\"text\":1}]}";
  acp_agent_callbacks *ac;
  acp_client_callbacks *cc;
  acp_agent *a;
  acp_client *c;
  pair_wire w = {{0}, {0}};
  (void)s;

  assert_int_equal(acp_agent_callbacks_new(&ac), 0);
  acp_agent_callbacks_set_on_session_new(ac, a_session_new);
  acp_agent_callbacks_set_on_session_prompt(ac, a_session_prompt);
  acp_agent_callbacks_set_on_tool_call_cancel(ac, a_typed_cancel);
  assert_int_equal(acp_agent_new(&a, ac, NULL, NULL, NULL), 0);
  acp_agent_callbacks_free(ac);
  assert_int_equal(acp_agent_set_max_protocol_version(a, ACP_PROTOCOL_V2), 0);
  assert_int_equal(acp_client_callbacks_new(&cc), 0);
  acp_client_callbacks_set_on_session_update(cc, c_typed_update);
  assert_int_equal(acp_client_new(&c, cc, NULL, NULL, NULL), 0);
  acp_client_callbacks_free(cc);
  assert_int_equal(acp_client_set_max_protocol_version(c, ACP_PROTOCOL_V2), 0);
  assert_int_equal(negotiate(a, c, NULL), ACP_PROTOCOL_V2);

  typed_tool[0] = '\0';
  typed_rv = -1;
  n_ok = 0;
  assert_int_equal(
      acp_client_tool_call_cancel(c, "s1", "tool\\7", c_resp, NULL, NULL), 0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_int_equal(n_ok, 1);
  assert_int_equal(typed_rv, 0);
  assert_string_equal(typed_tool, "tool\\7");

  n_idle = n_chunks_with_id = n_running = n_user = 0;
  assert_int_equal(acp_client_call(c, "session/prompt", prompt,
                                   sizeof(prompt) - 1, c_resp, NULL, NULL),
                   0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_int_equal(n_user, 1);
  assert_int_equal(n_running, 1);
  assert_int_equal(n_chunks_with_id, 1);
  assert_int_equal(n_idle, 1);

  wire_clear(&w);
  last_code = 0;
  assert_int_equal(acp_client_call(c, "session/prompt", bad_prompt,
                                   sizeof(bad_prompt) - 1, c_resp, NULL, NULL),
                   0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_int_equal(last_code, -32602);
  assert_non_null(strstr(w.a2c.data, "\"path\":\"/prompt/0/text\""));
  assert_null(strstr(w.a2c.data, "state_update"));
  wire_clear(&w);
  acp_client_free(c);
  acp_agent_free(a);
}

static void test_v2_set_max_rejects_bad_input(void **s) {
  acp_agent *a = new_agent(0, false);
  acp_client *c = new_client(0);
  (void)s;

  assert_int_equal(acp_agent_set_max_protocol_version(NULL, 2),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_agent_set_max_protocol_version(a, 3),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_agent_set_max_protocol_version(a, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_client_set_max_protocol_version(NULL, 2),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_client_set_max_protocol_version(c, -1),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_agent_protocol_version(a), 0);
  acp_client_free(c);
  acp_agent_free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_v2_default_agent_answers_1),
      cmocka_unit_test(test_v2_typed_in_roles),
      cmocka_unit_test(test_v2_client_v1_gets_1),
      cmocka_unit_test(test_v2_both_opted_in_get_2),
      cmocka_unit_test(test_v2_agent_answers_raw_versions),
      cmocka_unit_test(test_v2_agent_dispatches_with_v2_table),
      cmocka_unit_test(test_v2_client_checks_with_v2_table),
      cmocka_unit_test(test_v2_client_gets_unasked_version),
      cmocka_unit_test(test_v2_prompt_lifecycle),
      cmocka_unit_test(test_v2_prompt_accepted_when_taken),
      cmocka_unit_test(test_v2_update_shapes),
      cmocka_unit_test(test_v2_update_sent_is_what_went_out),
      cmocka_unit_test(test_v2_client_calls),
      cmocka_unit_test(test_v2_set_max_rejects_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
