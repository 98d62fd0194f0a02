/*
 * Proxy role: a fake conductor around one acp_proxy, in memory. Every test
 * feeds exact lines and asserts on the exact bytes the proxy writes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/proxy.h"

#define LIT(s) s, (sizeof(s) - 1)

/* MARK: - Harness */

typedef struct tctx {
  acp_proxy *p;
  char *out;
  size_t out_len;
  size_t pos;
  /* counters and captures */
  int n_client;
  int n_agent;
  int n_cancel;
  int n_resp_cb;
  int n_receive;
  int n_init_cb;
  int64_t last_resp_code;
  char last_resp[512];
  char last_method[64];
  char envelope_meta[64];
  acp_proxy_request *held;
  int mode; /* test-specific behaviour of the callbacks */
} tctx;

static void feed(tctx *t, const char *line) {
  size_t n = strlen(line);
  char *b = malloc(n + 1);

  assert_non_null(b);
  memcpy(b, line, n);
  b[n] = '\n';
  assert_int_equal(acp_proxy_recv(t->p, b, n + 1, 0), (acp_ssize)(n + 1));
  free(b);
}

static void drain(tctx *t) {
  const char *d = NULL;
  acp_ssize n;

  while ((n = acp_proxy_send(t->p, &d)) > 0) {
    t->out = realloc(t->out, t->out_len + (size_t)n + 1);
    assert_non_null(t->out);
    memcpy(t->out + t->out_len, d, (size_t)n);
    t->out_len += (size_t)n;
    t->out[t->out_len] = '\0';
  }
  assert_true(n == 0);
}

/* The next line the proxy wrote (malloc'd, no newline), or NULL. */
static char *next_line(tctx *t) {
  char *nl;
  char *l;
  size_t n;

  drain(t);
  if (t->pos >= t->out_len)
    return NULL;
  nl = memchr(t->out + t->pos, '\n', t->out_len - t->pos);
  assert_non_null(nl);
  n = (size_t)(nl - (t->out + t->pos));
  l = malloc(n + 1);
  assert_non_null(l);
  memcpy(l, t->out + t->pos, n);
  l[n] = '\0';
  t->pos += n + 1;
  return l;
}

static void expect_line(tctx *t, const char *exp) {
  char *l = next_line(t);

  if (l == NULL)
    fail_msg("expected %s, got nothing", exp);
  assert_string_equal(l, exp);
  free(l);
}

static void expect_quiet(tctx *t) {
  char *l = next_line(t);

  if (l != NULL) {
    char copy[512];

    snprintf(copy, sizeof(copy), "%s", l);
    free(l);
    fail_msg("unexpected output: %s", copy);
  }
}

static void msg_method(tctx *t, const acp_proxy_msg *m) {
  snprintf(t->last_method, sizeof(t->last_method), "%.*s", (int)m->method_len,
           m->method);
}

/* Test modes for the message callbacks. */
enum {
  M_FORWARD = 0, /* return ACP_PROXY_FORWARD */
  M_ARROW,       /* prefix '>' to agent_message_chunk text */
  M_ANSWER,      /* answer client requests with {"pong":true} */
  M_HOLD,        /* keep requests */
  M_DOUBLE,      /* forward_transformed, then return ACP_PROXY_FORWARD */
  M_DROP         /* return 0 (drop notifications) */
};

/* Arrow-style transform by span surgery: the result differs from the input
 * by exactly one inserted byte. */
static int arrow(acp_proxy *p, const acp_proxy_msg *m) {
  const acp_json_val *u = acp_json_obj_getz(m->params, "update");
  const acp_json_val *kind = acp_json_obj_getz(u, "sessionUpdate");
  const acp_json_val *text =
      acp_json_obj_getz(acp_json_obj_getz(u, "content"), "text");
  const char *traw;
  size_t tlen;
  size_t head;
  char buf[1024];
  int rv;

  if (!ACP_JSON_STR_EQ_LIT(kind, "agent_message_chunk") || text == NULL)
    return ACP_PROXY_FORWARD;
  traw = acp_json_raw(text, &tlen);
  head = (size_t)(traw - m->params_raw) + 1;
  assert_true(m->params_len + 1 < sizeof(buf));
  memcpy(buf, m->params_raw, head);
  buf[head] = '>';
  memcpy(buf + head + 1, m->params_raw + head, m->params_len - head);
  rv = acp_proxy_forward_transformed(p, m, buf, m->params_len + 1);
  assert_int_equal(rv, 0);
  return 0;
}

static int on_from_client(acp_proxy *p, const acp_proxy_msg *m, void *ud) {
  tctx *t = ud;

  t->n_client++;
  msg_method(t, m);
  assert_int_equal(m->from, ACP_PROXY_FROM_CLIENT);
  assert_ptr_equal(acp_proxy_get_user_data(p), ud);
  if (m->req != NULL) {
    assert_int_equal(m->kind, ACP_RPC_REQUEST);
    assert_int_equal(acp_proxy_request_from(m->req), ACP_PROXY_FROM_CLIENT);
    assert_string_equal(acp_proxy_request_method(m->req), t->last_method);
  }
  switch (t->mode) {
  case M_ANSWER:
    if (m->req != NULL) {
      assert_int_equal(acp_proxy_respond(p, m->req, LIT("{\"pong\":true}")), 0);
      /* answered: a second answer or a forward is refused */
      assert_int_equal(acp_proxy_respond(p, m->req, LIT("1")),
                       ACP_ERR_INVALID_STATE);
      assert_int_equal(acp_proxy_forward(p, m), ACP_ERR_INVALID_STATE);
      return ACP_PROXY_FORWARD; /* ignored: already answered */
    }
    return ACP_PROXY_FORWARD;
  case M_HOLD:
    if (m->req != NULL) {
      t->held = m->req;
      return 0;
    }
    return ACP_PROXY_FORWARD;
  case M_DOUBLE:
    assert_int_equal(acp_proxy_forward_transformed(p, m, LIT("{\"x\":1}")), 0);
    return ACP_PROXY_FORWARD; /* must not forward a second time */
  case M_DROP:
    return 0;
  default:
    return ACP_PROXY_FORWARD;
  }
}

static int on_from_agent(acp_proxy *p, const acp_proxy_msg *m, void *ud) {
  tctx *t = ud;
  const char *raw;
  size_t len;

  t->n_agent++;
  msg_method(t, m);
  assert_int_equal(m->from, ACP_PROXY_FROM_AGENT);
  t->envelope_meta[0] = '\0';
  raw = acp_json_raw(m->envelope_meta, &len);
  if (raw != NULL)
    snprintf(t->envelope_meta, sizeof(t->envelope_meta), "%.*s", (int)len, raw);
  if (t->mode == M_ARROW && m->kind == ACP_RPC_NOTIFICATION)
    return arrow(p, m);
  if (t->mode == M_HOLD && m->req != NULL) {
    t->held = m->req;
    return 0;
  }
  return ACP_PROXY_FORWARD;
}

static int on_cancel(acp_proxy *p, acp_proxy_request *req, void *ud) {
  tctx *t = ud;

  t->n_cancel++;
  assert_true(acp_proxy_request_is_cancelled(req));
  if (!acp_proxy_request_is_forwarded(req)) {
    /* held by us: answer it ourselves */
    assert_int_equal(
        acp_proxy_respond_error(p, req, -32800, "Request cancelled", NULL, 0),
        0);
    if (t->held == req)
      t->held = NULL;
  }
  return 0;
}

static int on_receive(acp_proxy *p, acp_proxy_dir from, const acp_rpc_msg *msg,
                      void *ud) {
  tctx *t = ud;

  (void)p;
  (void)from;
  assert_non_null(msg->raw);
  t->n_receive++;
  return 0;
}

static int resp_cb(acp_proxy *p, const acp_rpc_msg *msg, void *ud) {
  tctx *t = ud;
  const char *raw;
  size_t len;

  (void)p;
  t->n_resp_cb++;
  t->last_resp_code = msg->error ? msg->error_code : 0;
  if (msg->local)
    t->last_resp_code = msg->error_code;
  raw = msg->result ? acp_json_raw(msg->result, &len)
                    : acp_json_raw(msg->error, &len);
  t->last_resp[0] = '\0';
  if (raw)
    snprintf(t->last_resp, sizeof(t->last_resp), "%.*s", (int)len, raw);
  return 0;
}

static void setup_full(tctx *t, int with_cbs, acp_proxy_init_cb init_cb,
                       acp_proxy_response_hook_cb hook) {
  acp_proxy_callbacks *cbs = NULL;

  memset(t, 0, sizeof(*t));
  if (with_cbs) {
    assert_int_equal(acp_proxy_callbacks_new(&cbs), 0);
    acp_proxy_callbacks_set_on_from_client(cbs, on_from_client);
    acp_proxy_callbacks_set_on_from_agent(cbs, on_from_agent);
    acp_proxy_callbacks_set_on_cancel(cbs, on_cancel);
    acp_proxy_callbacks_set_on_receive(cbs, on_receive);
    acp_proxy_callbacks_set_on_initialized(cbs, init_cb);
    acp_proxy_callbacks_set_on_response(cbs, hook);
  }
  assert_int_equal(acp_proxy_new(&t->p, cbs, t, NULL, NULL), 0);
  acp_proxy_callbacks_free(cbs);
}

static void setup(tctx *t) {
  setup_full(t, 1, NULL, NULL);
}

static void teardown(tctx *t) {
  acp_proxy_free(t->p);
  free(t->out);
}

/* Initialize through G2 with a trivial exchange; the forwarded initialize
 * gets our id `out_id`. */
static void init_g2_id(tctx *t, int out_id) {
  char line[256];

  feed(t, "{\"jsonrpc\":\"2.0\",\"id\":100,\"method\":\"proxy/initialize\","
          "\"params\":{\"protocolVersion\":1}}");
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"proxy/successor\","
           "\"params\":{\"method\":\"initialize\",\"params\":{"
           "\"protocolVersion\":1}}}",
           out_id);
  expect_line(t, line);
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"protocolVersion\":1}}",
           out_id);
  feed(t, line);
  expect_line(t, "{\"jsonrpc\":\"2.0\",\"id\":100,\"result\":{"
                 "\"protocolVersion\":1}}");
  assert_true(acp_proxy_is_initialized(t->p));
}

static void init_g2(tctx *t) {
  init_g2_id(t, 0);
}

/* MARK: - Initialization */

static const char init_params[] =
    "{\"protocolVersion\":1,\"clientCapabilities\":{\"fs\":{\"readTextFile\":"
    "true},\"terminal\":false},\"clientInfo\":{\"name\":\"t\",\"version\":"
    "\"1.0\"},\"_meta\":{\"k\":12345678901234567890}}";
static const char succ_result[] =
    "{\"protocolVersion\":1,\"agentCapabilities\":{\"loadSession\":true,"
    "\"mcpCapabilities\":{\"acp\":true}},\"authMethods\":[],\"x\":"
    "1.000000000000000000001}";

static void run_init(const char *init_method, const char *params,
                     const char *succ_method, acp_proxy_wire wire,
                     const char *expect_result) {
  tctx t;
  char line[1024];

  setup(&t);
  assert_int_equal(acp_proxy_get_wire(t.p), ACP_PROXY_WIRE_G2);
  assert_false(acp_proxy_is_initialized(t.p));
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":\"init-1\",\"method\":\"%s\","
           "\"params\":%s}",
           init_method, params);
  feed(&t, line);
  /* forwarded BEFORE any answer, same params byte for byte */
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"%s\",\"params\":{"
           "\"method\":\"initialize\",\"params\":%s}}",
           succ_method, params);
  expect_line(&t, line);
  expect_quiet(&t);
  assert_false(acp_proxy_is_initialized(t.p));
  assert_int_equal(acp_proxy_get_wire(t.p), wire);
  snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":%s}",
           succ_result);
  feed(&t, line);
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":\"init-1\",\"result\":%s}",
           expect_result);
  expect_line(&t, line);
  expect_quiet(&t);
  assert_true(acp_proxy_is_initialized(t.p));
  /* the library answered it: the user callbacks never saw it */
  assert_int_equal(t.n_client, 0);
  assert_int_equal(t.n_receive, 2);
  {
    size_t len;
    const char *r = acp_proxy_successor_init_result(t.p, &len);

    assert_int_equal(len, strlen(succ_result));
    assert_memory_equal(r, succ_result, len);
  }
  /* a second initialize is refused */
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"%s\",\"params\":%s}",
           init_method, params);
  feed(&t, line);
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32600,"
                  "\"message\":\"proxy already initialized\"}}");
  teardown(&t);
}

static void test_proxy_init_g2(void **state) {
  (void)state;
  run_init("proxy/initialize", init_params, "proxy/successor",
           ACP_PROXY_WIRE_G2, succ_result);
}

static void test_proxy_init_g1(void **state) {
  (void)state;
  run_init("_proxy/initialize", init_params, "_proxy/successor",
           ACP_PROXY_WIRE_G1, succ_result);
}

static void test_proxy_init_g0(void **state) {
  static const char g0_params[] =
      "{\"protocolVersion\":1,\"_meta\":{\"proxy\":true}}";
  char expect[1024];

  (void)state;
  /* G0 handshake: the answer carries _meta.proxy = true */
  snprintf(expect, sizeof(expect), "{\"_meta\":{\"proxy\":true},%s",
           succ_result + 1);
  run_init("initialize", g0_params, "_proxy/successor/request",
           ACP_PROXY_WIRE_G0, expect);
}

static void test_proxy_g0_sends_old_names(void **state) {
  tctx t;

  (void)state;
  setup(&t);
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
           "{\"protocolVersion\":1,\"_meta\":{\"proxy\":true}}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":"
                  "\"_proxy/successor/request\",\"params\":{\"method\":"
                  "\"initialize\",\"params\":{\"protocolVersion\":1,\"_meta\":"
                  "{\"proxy\":true}}}}");
  /* the successor's result already has _meta (with proxy false) */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":1,"
           "\"_meta\":{\"a\":1,\"proxy\":false}}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{"
                  "\"protocolVersion\":1,\"_meta\":{\"a\":1,\"proxy\":true}}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{"
           "\"sessionId\":\"s\"}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":"
                  "\"_proxy/successor/notification\",\"params\":{\"method\":"
                  "\"session/cancel\",\"params\":{\"sessionId\":\"s\"}}}");
  /* incoming: every spelling is accepted whatever we speak */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
           "\"method\":\"a\"}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"_proxy/successor\",\"params\":{"
           "\"method\":\"b\"}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"_proxy/successor/notification\","
           "\"params\":{\"method\":\"c\"}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"b\"}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"c\"}");
  /* an injected request uses the G0 request name */
  assert_int_equal(
      acp_proxy_send_to_agent(t.p, "x/y", LIT("[]"), NULL, NULL, NULL), 0);
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
                  "\"_proxy/successor/request\",\"params\":{\"method\":"
                  "\"x/y\",\"params\":[]}}");
  teardown(&t);
}

static int edit_init(acp_proxy *p, const acp_rpc_msg *resp, void *ud) {
  tctx *t = ud;

  t->n_init_cb++;
  assert_non_null(resp->result);
  /* a non-object is refused */
  assert_int_equal(acp_proxy_set_init_result(p, LIT("[1]")),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_proxy_set_init_result(p, LIT("{\"a\":")),
                   ACP_ERR_INVALID_ARGUMENT);
  if (t->mode == 1) /* tries to change protocolVersion */
    return acp_proxy_set_init_result(
        p, LIT("{\"agentCapabilities\":{\"mcpCapabilities\":{\"acp\":true}},"
               "\"protocolVersion\":7,\"authMethods\":[]}"));
  /* drops protocolVersion altogether */
  return acp_proxy_set_init_result(p, LIT("{\"agentCapabilities\":{}}"));
}

static void test_proxy_init_edit_keeps_protocol_version(void **state) {
  tctx t;
  int mode;

  (void)state;
  for (mode = 1; mode <= 2; mode++) {
    setup_full(&t, 1, edit_init, NULL);
    t.mode = mode;
    assert_int_equal(acp_proxy_set_init_result(t.p, LIT("{}")),
                     ACP_ERR_INVALID_STATE);
    feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
             "\"params\":{\"protocolVersion\":3}}");
    expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":"
                    "\"proxy/successor\",\"params\":{\"method\":\"initialize\","
                    "\"params\":{\"protocolVersion\":3}}}");
    feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":"
             "1,\"agentCapabilities\":{}}}");
    if (mode == 1)
      expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{"
                      "\"agentCapabilities\":{\"mcpCapabilities\":{\"acp\":"
                      "true}},\"protocolVersion\":1,\"authMethods\":[]}}");
    else
      expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{"
                      "\"protocolVersion\":1,\"agentCapabilities\":{}}}");
    assert_int_equal(t.n_init_cb, 1);
    teardown(&t);
  }
}

static void test_proxy_init_error_passed_back(void **state) {
  tctx t;

  (void)state;
  setup(&t);
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
           "\"params\":{\"protocolVersion\":1}}");
  expect_line(&t,
              "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"proxy/successor\","
              "\"params\":{\"method\":\"initialize\",\"params\":{"
              "\"protocolVersion\":1}}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":0,\"error\":{\"code\":-32099,"
           "\"message\":\"agent \\u00e9xited\",\"data\":{\"n\":"
           "12345678901234567890,\"tail\":[\"a\\/b\"]}}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32099,"
                  "\"message\":\"agent \\u00e9xited\",\"data\":{\"n\":"
                  "12345678901234567890,\"tail\":[\"a\\/b\"]}}}");
  assert_false(acp_proxy_is_initialized(t.p));
  /* after a failed initialize a new one is accepted */
  init_g2_id(&t, 1);
  teardown(&t);
}

static void test_proxy_plain_initialize_refused(void **state) {
  tctx t;

  (void)state;
  setup(&t);
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
           "{\"protocolVersion\":1}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32600,"
                  "\"message\":\"this component is a proxy: expected "
                  "proxy/initialize\"}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":"
           "{\"protocolVersion\":1,\"_meta\":{\"proxy\":false}}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32600,"
                  "\"message\":\"this component is a proxy: expected "
                  "proxy/initialize\"}}");
  /* a notification spelled proxy/initialize is ignored */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/initialize\"}");
  expect_quiet(&t);
  assert_false(acp_proxy_is_initialized(t.p));
  teardown(&t);
}

/* MARK: - Forwarding */

#define EXACT_PARAMS                                                           \
  "{\"sessionId\":\"s1\",\"prompt\":[{\"type\":\"text\",\"text\":"             \
  "\"a\\\"b\\\\ \\u00e9\\ud83d\\ude00\\n\"}],\"z\":12345678901234567890,"      \
  "\"a\":1.000000000000000000001,\"e\":-0.0e+00,\"_meta\":{\"trace\":"         \
  "{\"id\":\"t\"}},\"unknown\":{\"k\":[true,null,{}]}}"

static void test_proxy_prompt_byte_exact(void **state) {
  tctx t;

  (void)state;
  setup(&t);
  init_g2(&t);
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":\"p\\u0031\",\"method\":"
           "\"session/prompt\",\"params\":" EXACT_PARAMS "}");
  expect_line(
      &t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/successor\","
          "\"params\":{\"method\":\"session/prompt\",\"params\":" EXACT_PARAMS
          "}}");
  assert_int_equal(t.n_client, 1);
  assert_string_equal(t.last_method, "session/prompt");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"stopReason\":"
           "\"end_turn\",\"n\":12345678901234567890,\"_meta\":{\"u\":"
           "1.000000000000000000001}}}");
  /* the original id, byte for byte (escape kept) */
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":\"p\\u0031\",\"result\":{"
                  "\"stopReason\":\"end_turn\",\"n\":12345678901234567890,"
                  "\"_meta\":{\"u\":1.000000000000000000001}}}");
  expect_quiet(&t);
  teardown(&t);
}

static void test_proxy_no_callbacks_forwards_everything(void **state) {
  tctx t;

  (void)state;
  setup_full(&t, 0, NULL, NULL);
  init_g2(&t);
  /* unknown request and notification from the client */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"_vendor/x\",\"params\":"
           "[1,2,3]}");
  expect_line(&t,
              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/successor\","
              "\"params\":{\"method\":\"_vendor/x\",\"params\":[1,2,3]}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"_vendor/n\"}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\","
                  "\"params\":{\"method\":\"_vendor/n\"}}");
  /* unknown notification from the agent, with a hop-local envelope _meta */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
           "\"method\":\"_vendor/u\",\"params\":{\"_meta\":{\"keep\":1}},"
           "\"_meta\":{\"hop\":1}}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"_vendor/u\",\"params\":{"
                  "\"_meta\":{\"keep\":1}}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,"
           "\"message\":\"Method not found\",\"extra\":true}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{\"code\":-32601,"
                  "\"message\":\"Method not found\",\"extra\":true}}");
  expect_quiet(&t);
  teardown(&t);
}

#define UPDATE_PARAMS(text)                                                    \
  "{\"sessionId\":\"s1\",\"update\":{\"sessionUpdate\":"                       \
  "\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"" text    \
  "\"},\"n\":1.000000000000000000001}}"

static void test_proxy_updates_from_agent(void **state) {
  tctx t;

  (void)state;
  setup(&t);
  init_g2(&t);
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
           "\"method\":\"session/update\",\"params\":" UPDATE_PARAMS(
               "hi \\u00e9") ",\"_meta\":{\"hop\":2}}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\","
                  "\"params\":" UPDATE_PARAMS("hi \\u00e9") "}");
  assert_int_equal(t.n_agent, 1);
  assert_string_equal(t.last_method, "session/update");
  assert_string_equal(t.envelope_meta, "{\"hop\":2}");
  /* arrow transform: one '>' inserted, nothing else changes */
  t.mode = M_ARROW;
  feed(&t,
       "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
       "\"method\":\"session/update\",\"params\":" UPDATE_PARAMS("hi") "}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\","
                  "\"params\":" UPDATE_PARAMS(">hi") "}");
  /* two arrows = two proxies */
  feed(&t,
       "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
       "\"method\":\"session/update\",\"params\":" UPDATE_PARAMS(">hi") "}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\","
                  "\"params\":" UPDATE_PARAMS(">>hi") "}");
  assert_string_equal(t.envelope_meta, "");
  expect_quiet(&t);
  teardown(&t);
}

static void test_proxy_answers_itself(void **state) {
  tctx t;

  (void)state;
  setup(&t);
  init_g2(&t);
  t.mode = M_ANSWER;
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":[],\"method\":\"_ping\"}");
  /* (an array id is invalid: the session answers it) */
  {
    char *l = next_line(&t);

    assert_non_null(l);
    assert_non_null(strstr(l, "-32600"));
    free(l);
  }
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"_ping\",\"params\":{}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"pong\":true}}");
  expect_quiet(&t);
  /* notifications still forwarded in that mode */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"_n\",\"params\":{}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\","
                  "\"params\":{\"method\":\"_n\",\"params\":{}}}");
  /* a callback that forwards transformed and returns FORWARD sends once */
  t.mode = M_DOUBLE;
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"_n\",\"params\":{}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\","
                  "\"params\":{\"method\":\"_n\",\"params\":{\"x\":1}}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"_r\",\"params\":{}}");
  expect_line(&t,
              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/successor\","
              "\"params\":{\"method\":\"_r\",\"params\":{\"x\":1}}}");
  expect_quiet(&t);
  /* dropping a notification sends nothing */
  t.mode = M_DROP;
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"_n\",\"params\":{}}");
  expect_quiet(&t);
  teardown(&t);
}

static void test_proxy_held_request_forwarded_later(void **state) {
  tctx t;

  (void)state;
  setup(&t);
  init_g2(&t);
  t.mode = M_HOLD;
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"session/prompt\","
           "\"params\":{\"sessionId\":\"s\",\"prompt\":[]}}");
  expect_quiet(&t);
  assert_non_null(t.held);
  assert_false(acp_proxy_request_is_forwarded(t.held));
  acp_proxy_request_set_user_data(t.held, &t);
  assert_ptr_equal(acp_proxy_request_get_user_data(t.held), &t);
  /* e.g. after a preamble prompt of the proxy's own */
  assert_int_equal(acp_proxy_request_forward(t.p, t.held,
                                             LIT("{\"sessionId\":\"s\","
                                                 "\"prompt\":[1]}")),
                   0);
  assert_true(acp_proxy_request_is_forwarded(t.held));
  assert_int_equal(acp_proxy_request_forward(t.p, t.held, NULL, 0),
                   ACP_ERR_INVALID_STATE);
  assert_int_equal(acp_proxy_respond(t.p, t.held, NULL, 0),
                   ACP_ERR_INVALID_STATE);
  expect_line(&t,
              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/successor\","
              "\"params\":{\"method\":\"session/prompt\",\"params\":{"
              "\"sessionId\":\"s\",\"prompt\":[1]}}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"stopReason\":"
           "\"end_turn\"}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{\"stopReason\":"
                  "\"end_turn\"}}");
  t.held = NULL;
  /* a held request answered later with an error */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"x\"}");
  assert_non_null(t.held);
  assert_int_equal(
      acp_proxy_respond_error(t.p, t.held, 42, "no", LIT("{\"why\":[1]}")), 0);
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{\"code\":42,"
                  "\"message\":\"no\",\"data\":{\"why\":[1]}}}");
  expect_quiet(&t);
  teardown(&t);
}

/* MARK: - Injection and reverse requests */

static void test_proxy_injected_requests_both_ways(void **state) {
  tctx t;
  int64_t id = -1;

  (void)state;
  setup(&t);
  init_g2(&t);
  assert_int_equal(acp_proxy_send_to_agent(t.p, "session/new",
                                           LIT("{\"cwd\":\"/w\","
                                               "\"mcpServers\":[]}"),
                                           resp_cb, &t, &id),
                   0);
  assert_int_equal(id, 1);
  expect_line(&t,
              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/successor\","
              "\"params\":{\"method\":\"session/new\",\"params\":{\"cwd\":"
              "\"/w\",\"mcpServers\":[]}}}");
  assert_int_equal(acp_proxy_send_to_client(t.p, "fs/read_text_file",
                                            LIT("{\"sessionId\":\"s\","
                                                "\"path\":\"/a\"}"),
                                            resp_cb, &t, &id),
                   0);
  assert_int_equal(id, 2);
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
                  "\"fs/read_text_file\",\"params\":{\"sessionId\":\"s\","
                  "\"path\":\"/a\"}}");
  /* answers arrive in any order */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":\"x\"}}");
  assert_int_equal(t.n_resp_cb, 1);
  assert_string_equal(t.last_resp, "{\"content\":\"x\"}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32000,"
           "\"message\":\"auth\"}}");
  assert_int_equal(t.n_resp_cb, 2);
  assert_int_equal(t.last_resp_code, -32000);
  expect_quiet(&t); /* nothing relayed anywhere */
  /* notifications both ways, and a request without callback */
  assert_int_equal(acp_proxy_notify_agent(t.p, "session/cancel",
                                          LIT("{\"sessionId\":\"s\"}")),
                   0);
  assert_int_equal(acp_proxy_notify_client(t.p, "session/update",
                                           LIT("{\"sessionId\":\"s\"}")),
                   0);
  assert_int_equal(
      acp_proxy_send_to_client(t.p, "_x", NULL, 0, NULL, NULL, NULL), 0);
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\","
                  "\"params\":{\"method\":\"session/cancel\",\"params\":{"
                  "\"sessionId\":\"s\"}}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\","
                  "\"params\":{\"sessionId\":\"s\"}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"_x\"}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":null}");
  /* cancel an injected request; its answer still comes */
  assert_int_equal(
      acp_proxy_send_to_agent(t.p, "_slow", NULL, 0, resp_cb, &t, &id), 0);
  expect_line(&t,
              "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"proxy/successor\","
              "\"params\":{\"method\":\"_slow\"}}");
  assert_int_equal(acp_proxy_cancel(t.p, id), 0);
  assert_int_equal(acp_proxy_cancel(t.p, 99), ACP_ERR_NOT_FOUND);
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
                  "\"params\":{\"requestId\":4}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-32800,"
           "\"message\":\"cancelled\"}}");
  assert_int_equal(t.last_resp_code, -32800);
  /* bad arguments */
  assert_int_equal(
      acp_proxy_send_to_agent(t.p, NULL, NULL, 0, NULL, NULL, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_proxy_notify_client(t.p, "x", NULL, 3),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(
      acp_proxy_send_to_agent(NULL, "x", NULL, 0, NULL, NULL, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  expect_quiet(&t);
  teardown(&t);
}

#define PERM_PARAMS                                                            \
  "{\"sessionId\":\"s1\",\"toolCall\":{\"toolCallId\":\"c1\",\"title\":"       \
  "\"rm -rf\",\"kind\":\"delete\"},\"options\":[{\"optionId\":\"allow\","      \
  "\"name\":\"Allow\",\"kind\":\"allow_once\"}],\"_meta\":{\"m\":1}}"

static void test_proxy_reverse_request(void **state) {
  tctx t;

  (void)state;
  setup(&t);
  init_g2(&t);
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"proxy/successor\","
           "\"params\":{\"method\":\"session/"
           "request_permission\",\"params\":" PERM_PARAMS "}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
                  "\"session/request_permission\",\"params\":" PERM_PARAMS "}");
  assert_int_equal(t.n_agent, 1);
  /* a client request meanwhile gets its own id on the agent side */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"_c\"}");
  expect_line(&t,
              "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"proxy/successor\","
              "\"params\":{\"method\":\"_c\"}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"outcome\":{\"outcome\":"
           "\"selected\",\"optionId\":\"allow\"}}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"outcome\":{"
                  "\"outcome\":\"selected\",\"optionId\":\"allow\"}}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}");
  /* a reverse request the proxy answers itself (guard-like) */
  t.mode = M_HOLD;
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"proxy/successor\","
           "\"params\":{\"method\":\"session/"
           "request_permission\",\"params\":" PERM_PARAMS "}}");
  expect_quiet(&t);
  assert_non_null(t.held);
  assert_int_equal(acp_proxy_request_from(t.held), ACP_PROXY_FROM_AGENT);
  assert_string_equal(acp_proxy_request_method(t.held),
                      "session/request_permission");
  assert_int_equal(acp_proxy_respond(t.p, t.held,
                                     LIT("{\"outcome\":{\"outcome\":"
                                         "\"cancelled\"}}")),
                   0);
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"outcome\":{"
                  "\"outcome\":\"cancelled\"}}}");
  /* invalid envelope: no inner method */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"proxy/successor\","
           "\"params\":{\"params\":{}}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":9,\"error\":{\"code\":-32602,"
                  "\"message\":\"Invalid params: proxy/successor needs a "
                  "string \\\"method\\\"\"}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":"
           "{\"method\":5}}");
  expect_quiet(&t);
  teardown(&t);
}

/* MARK: - Cancellation */

static void test_proxy_cancel_mapping(void **state) {
  tctx t;

  (void)state;
  setup(&t);
  init_g2(&t);
  /* client -> agent: client id 5 became our id 1 */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"session/prompt\","
           "\"params\":{\"sessionId\":\"s\",\"prompt\":[]}}");
  expect_line(&t,
              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/successor\","
              "\"params\":{\"method\":\"session/prompt\",\"params\":{"
              "\"sessionId\":\"s\",\"prompt\":[]}}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
           "\"requestId\":5}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
                  "\"params\":{\"requestId\":1}}");
  assert_int_equal(t.n_cancel, 1);
  /* an unknown id is ignored */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
           "\"requestId\":55}}");
  expect_quiet(&t);
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32800,"
           "\"message\":\"Request cancelled\"}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{\"code\":-32800,"
                  "\"message\":\"Request cancelled\"}}");
  /* agent -> client: wrapped request id "w" became our id 2 */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":\"w\",\"method\":\"proxy/successor\","
           "\"params\":{\"method\":\"fs/read_text_file\",\"params\":{}}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
                  "\"fs/read_text_file\",\"params\":{}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
           "\"requestId\":\"w\"}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
                  "\"params\":{\"requestId\":2}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":\"\"}}");
  expect_line(
      &t, "{\"jsonrpc\":\"2.0\",\"id\":\"w\",\"result\":{\"content\":\"\"}}");
  /* a cancel that arrives wrapped means the same */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"proxy/successor\","
           "\"params\":{\"method\":\"terminal/output\",\"params\":{}}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":"
                  "\"terminal/output\",\"params\":{}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
           "\"method\":\"$/cancel_request\",\"params\":{\"requestId\":11}}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
                  "\"params\":{\"requestId\":3}}");
  assert_int_equal(t.n_cancel, 3);
  /* a held request: on_cancel answers it; nothing goes downstream */
  t.mode = M_HOLD;
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"session/prompt\","
           "\"params\":{}}");
  expect_quiet(&t);
  feed(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
           "\"requestId\":12}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":12,\"error\":{\"code\":-32800,"
                  "\"message\":\"Request cancelled\"}}");
  assert_null(t.held);
  assert_int_equal(t.n_cancel, 4);
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32800,"
           "\"message\":\"c\"}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":11,\"error\":{\"code\":-32800,"
                  "\"message\":\"c\"}}");
  expect_quiet(&t);
  teardown(&t);
}

static void test_proxy_batch_from_client(void **state) {
  tctx t;

  (void)state;
  setup(&t);
  init_g2(&t);
  feed(&t, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"},{\"jsonrpc\":"
           "\"2.0\",\"method\":\"n\"},{\"jsonrpc\":\"2.0\",\"id\":2,"
           "\"method\":\"b\"}]");
  expect_line(&t,
              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/successor\","
              "\"params\":{\"method\":\"a\"}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\","
                  "\"params\":{\"method\":\"n\"}}");
  expect_line(&t,
              "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"proxy/successor\","
              "\"params\":{\"method\":\"b\"}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":5,\"message\":"
           "\"m\",\"data\":[1]}}");
  expect_quiet(&t); /* the batch answer waits for its last element */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":12345678901234567890}");
  expect_line(&t, "[{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":5,"
                  "\"message\":\"m\",\"data\":[1]}},{\"jsonrpc\":\"2.0\","
                  "\"id\":1,\"result\":12345678901234567890}]");
  expect_quiet(&t);
  teardown(&t);
}

/* MARK: - Errors and responses */

static void test_proxy_errors_passed_back_unchanged(void **state) {
  static const char *const errors[] = {
      "{\"code\":-32603,\"message\":\"Internal error\"}",
      "{\"code\":1,\"message\":\"x\",\"data\":null}",
      "{\"message\":\"order \\u0041\\/kept\",\"code\":-1,\"data\":{\"deep\":"
      "{\"n\":12345678901234567890,\"f\":1.000000000000000000001}},"
      "\"unknown\":[]}",
      "{\"code\":9223372036854775807,\"message\":\"\",\"data\":\"s\"}"};
  tctx t;
  size_t i;
  char line[1024];

  (void)state;
  setup(&t);
  init_g2(&t);
  for (i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
    int64_t id = (int64_t)i + 1;

    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":\"c%d\",\"method\":\"_m\"}", (int)i);
    feed(&t, line);
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"proxy/successor\","
             "\"params\":{\"method\":\"_m\"}}",
             (int)id);
    expect_line(&t, line);
    snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":%d,\"error\":%s}",
             (int)id, errors[i]);
    feed(&t, line);
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":\"c%d\",\"error\":%s}", (int)i,
             errors[i]);
    expect_line(&t, line);
  }
  expect_quiet(&t);
  teardown(&t);
}

static int hook(acp_proxy *p, acp_proxy_request *req, const acp_rpc_msg *msg,
                void *ud) {
  tctx *t = ud;

  t->n_resp_cb++;
  assert_true(acp_proxy_request_is_forwarded(req) == 0);
  if (strcmp(acp_proxy_request_method(req), "session/new") == 0 &&
      msg->result != NULL) {
    assert_int_equal(acp_proxy_respond(p, req, LIT("{\"sessionId\":\"X\"}")),
                     0);
    return 0;
  }
  return ACP_PROXY_FORWARD;
}

static void test_proxy_response_hook(void **state) {
  tctx t;

  (void)state;
  setup_full(&t, 1, NULL, hook);
  init_g2(&t);
  assert_int_equal(t.n_resp_cb, 0); /* not called for initialize */
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\","
           "\"params\":{}}");
  expect_line(&t,
              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/successor\","
              "\"params\":{\"method\":\"session/new\",\"params\":{}}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"sessionId\":\"A\"}}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"sessionId\":"
                  "\"X\"}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"other\"}");
  expect_line(&t,
              "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"proxy/successor\","
              "\"params\":{\"method\":\"other\"}}");
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":7}");
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":7}");
  assert_int_equal(t.n_resp_cb, 2);
  teardown(&t);
}

static void test_proxy_eof_answers_forwarded(void **state) {
  tctx t;

  (void)state;
  setup(&t);
  init_g2(&t);
  feed(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/prompt\","
           "\"params\":{}}");
  expect_line(&t,
              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/successor\","
              "\"params\":{\"method\":\"session/prompt\",\"params\":{}}}");
  assert_int_equal(
      acp_proxy_send_to_client(t.p, "_q", NULL, 0, resp_cb, &t, NULL), 0);
  expect_line(&t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"_q\"}");
  assert_int_equal(acp_proxy_recv_eof(t.p, 0), 0);
  assert_int_equal(t.n_resp_cb, 1);
  assert_int_equal(t.last_resp_code, -32099);
  {
    char *l = next_line(&t);

    assert_non_null(l);
    assert_non_null(strstr(l, "\"id\":1,\"error\":{\"code\":-32099"));
    free(l);
  }
  teardown(&t);
}

static void test_proxy_bad_arguments(void **state) {
  acp_proxy *p = NULL;
  acp_proxy_msg m;

  (void)state;
  memset(&m, 0, sizeof(m));
  assert_int_equal(acp_proxy_new(NULL, NULL, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_proxy_callbacks_new(NULL), ACP_ERR_INVALID_ARGUMENT);
  acp_proxy_callbacks_free(NULL);
  acp_proxy_callbacks_set_on_from_client(NULL, on_from_client);
  acp_proxy_free(NULL);
  assert_null(acp_proxy_session(NULL));
  assert_int_equal(acp_proxy_recv(NULL, "", 0, 0), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_proxy_forward(NULL, &m), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_proxy_respond(NULL, NULL, NULL, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_proxy_new(&p, NULL, NULL, NULL, NULL), 0);
  assert_non_null(acp_proxy_session(p));
  assert_int_equal(acp_proxy_forward_transformed(p, &m, NULL, 2),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_proxy_set_init_result(p, NULL, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_proxy_free(p);
}

/* MARK: - Allocation failure */

typedef struct failmem {
  long count;
  long fail_at; /* -1: never */
} failmem;

static void *fm_malloc(size_t n, void *ud) {
  failmem *f = ud;

  if (f->fail_at >= 0 && f->count++ == f->fail_at)
    return NULL;
  return malloc(n);
}
static void *fm_calloc(size_t a, size_t n, void *ud) {
  failmem *f = ud;

  if (f->fail_at >= 0 && f->count++ == f->fail_at)
    return NULL;
  return calloc(a, n);
}
static void *fm_realloc(void *p, size_t n, void *ud) {
  failmem *f = ud;

  if (f->fail_at >= 0 && f->count++ == f->fail_at)
    return NULL;
  return realloc(p, n);
}
static void fm_free(void *p, void *ud) {
  (void)ud;
  free(p);
}

/* A whole scenario; returns 0 when every step worked. */
static int fm_scenario(failmem *f) {
  static const char in[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
      "\"params\":{\"protocolVersion\":1}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":1}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\","
      "\"params\":{}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"proxy/successor\","
      "\"params\":{\"method\":\"fs/read_text_file\",\"params\":{}}}\n"
      "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
      "\"requestId\":2}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32800,"
      "\"message\":\"c\"}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n";
  acp_mem mem = {f, fm_malloc, fm_free, fm_calloc, fm_realloc};
  acp_proxy_callbacks *cbs = NULL;
  acp_proxy *p = NULL;
  const char *d;
  acp_ssize n;
  int rv;

  rv = acp_proxy_callbacks_new(&cbs);
  if (rv != 0)
    return rv;
  acp_proxy_callbacks_set_on_from_agent(cbs, on_from_agent);
  rv = acp_proxy_new(&p, cbs, &(tctx){0}, NULL, &mem);
  acp_proxy_callbacks_free(cbs);
  if (rv != 0)
    return rv;
  n = acp_proxy_recv(p, in, sizeof(in) - 1, 0);
  if (n < 0)
    rv = (int)n;
  if (rv == 0)
    rv = acp_proxy_send_to_agent(p, "_x", LIT("{}"), NULL, NULL, NULL);
  if (rv == 0) {
    n = acp_proxy_send(p, &d);
    if (n < 0)
      rv = (int)n;
  }
  acp_proxy_free(p);
  return rv;
}

static void test_proxy_alloc_failures(void **state) {
  failmem f = {0, -1};
  long total;
  long i;
  int failures = 0;

  (void)state;
  assert_int_equal(fm_scenario(&f), 0);
  /* count the allocations of a clean run */
  f.count = 0;
  f.fail_at = 1L << 40;
  assert_int_equal(fm_scenario(&f), 0);
  total = f.count;
  assert_true(total > 5);
  for (i = 0; i < total; i++) {
    f.count = 0;
    f.fail_at = i;
    if (fm_scenario(&f) != 0)
      failures++;
  }
  /* each failure is reported (or absorbed), never a crash or a leak */
  assert_true(failures > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_proxy_init_g2),
      cmocka_unit_test(test_proxy_init_g1),
      cmocka_unit_test(test_proxy_init_g0),
      cmocka_unit_test(test_proxy_g0_sends_old_names),
      cmocka_unit_test(test_proxy_init_edit_keeps_protocol_version),
      cmocka_unit_test(test_proxy_init_error_passed_back),
      cmocka_unit_test(test_proxy_plain_initialize_refused),
      cmocka_unit_test(test_proxy_prompt_byte_exact),
      cmocka_unit_test(test_proxy_no_callbacks_forwards_everything),
      cmocka_unit_test(test_proxy_updates_from_agent),
      cmocka_unit_test(test_proxy_answers_itself),
      cmocka_unit_test(test_proxy_held_request_forwarded_later),
      cmocka_unit_test(test_proxy_injected_requests_both_ways),
      cmocka_unit_test(test_proxy_reverse_request),
      cmocka_unit_test(test_proxy_cancel_mapping),
      cmocka_unit_test(test_proxy_batch_from_client),
      cmocka_unit_test(test_proxy_errors_passed_back_unchanged),
      cmocka_unit_test(test_proxy_response_hook),
      cmocka_unit_test(test_proxy_eof_answers_forwarded),
      cmocka_unit_test(test_proxy_bad_arguments),
      cmocka_unit_test(test_proxy_alloc_failures),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
