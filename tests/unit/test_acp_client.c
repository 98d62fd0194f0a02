/*
 * Client role: initialize bookkeeping, agent -> client round trips
 * (permission, fs, terminal), raw _meta visibility, id 0 collision, error
 * paths and an allocation-failure loop over a short scenario.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "acp_roles_pair.h"
#include "failmem.h"

typedef struct ctx {
  int n_perm;
  int n_read;
  int n_term;
  int n_resp;
  int n_err;
  int64_t last_err;
  char last_result[512];
  char meta_seen[256];
  int n_init;
} ctx;

static void save_result(ctx *x, const acp_rpc_msg *msg) {
  size_t n = 0;
  const char *raw;

  x->n_resp++;
  if (msg->error) {
    x->n_err++;
    x->last_err = msg->error_code;
    raw = acp_json_raw(msg->error, &n);
  } else {
    raw = acp_json_raw(msg->result, &n);
  }
  snprintf(x->last_result, sizeof(x->last_result), "%.*s", (int)n, raw);
}

static int a_resp(acp_agent *a, const acp_rpc_msg *msg, void *ud) {
  (void)a;
  save_result(ud, msg);
  return 0;
}

static int c_resp(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  (void)c;
  save_result(ud, msg);
  return 0;
}

/* Client handlers. */
static int c_perm(acp_client *c, acp_client_request *req, void *ud) {
  ctx *x = ud;

  x->n_perm++;
  assert_string_equal(acp_client_request_session_id(req), "s1");
  return acp_client_respond_permission(c, req, x->n_perm == 1 ? "allow" : NULL);
}

static int c_read(acp_client *c, acp_client_request *req, void *ud) {
  ctx *x = ud;
  const char *p;
  size_t n;
  const acp_json_val *meta;

  x->n_read++;
  assert_int_equal(acp_client_request_param_str(req, "path", &p, &n), 0);
  assert_int_equal(n, 6);
  assert_memory_equal(p, "/a.txt", 6);
  assert_int_equal(acp_client_request_param_str(req, "nope", &p, &n),
                   ACP_ERR_NOT_FOUND);
  meta = acp_json_obj_getz(acp_client_request_params(req), "_meta");
  if (meta) {
    const char *raw = acp_json_raw(meta, &n);

    snprintf(x->meta_seen, sizeof(x->meta_seen), "%.*s", (int)n, raw);
  }
  return acp_client_respond_read_text_file(c, req, "line1\nline2", 11);
}

static acp_client_request *held_term;

static int c_term_create(acp_client *c, acp_client_request *req, void *ud) {
  ctx *x = ud;

  x->n_term++;
  assert_int_equal(acp_client_respond_terminal_create(c, req, "term-1"), 0);
  /* A second answer inside the handler is refused. */
  assert_int_equal(acp_client_respond_empty(c, req), ACP_ERR_INVALID_STATE);
  return 0;
}

static int c_term_other(acp_client *c, acp_client_request *req, void *ud) {
  ctx *x = ud;
  const char *m = acp_client_request_method(req);

  x->n_term++;
  if (strcmp(m, "terminal/output") == 0)
    return acp_client_respond(
        c, req, LIT("{\"output\":\"hi\\n\",\"truncated\":false}"));
  if (strcmp(m, "terminal/wait_for_exit") == 0) {
    held_term = req; /* answered later */
    return 0;
  }
  return acp_client_respond_empty(c, req);
}

/* Agent handlers. */
static int a_init(acp_agent *a, acp_agent_request *req, void *ud) {
  ctx *x = ud;
  const acp_json_val *meta;
  size_t n;

  x->n_init++;
  /* Unknown fields and _meta inside params are reachable raw. */
  meta = acp_json_obj_getz(acp_agent_request_params(req), "_meta");
  if (meta) {
    const char *raw = acp_json_raw(meta, &n);

    snprintf(x->meta_seen, sizeof(x->meta_seen), "%.*s", (int)n, raw);
  }
  if (acp_json_obj_getz(acp_agent_request_params(req), "futureField"))
    x->n_init += 100;
  return acp_agent_respond_initialize(
      a, req, LIT("{\"loadSession\":true,\"_meta\":{\"zed.dev\":{}}}"), NULL, 0,
      NULL, 0);
}

static acp_agent *new_agent(ctx *x, const acp_mem *mem) {
  acp_agent_callbacks *cbs;
  acp_agent *a = NULL;

  if (acp_agent_callbacks_new(&cbs) != 0)
    return NULL;
  acp_agent_callbacks_set_on_initialize(cbs, a_init);
  acp_agent_new(&a, cbs, x, NULL, mem);
  acp_agent_callbacks_free(cbs);
  return a;
}

static acp_client *new_client(ctx *x, const acp_mem *mem) {
  acp_client_callbacks *cbs;
  acp_client *c = NULL;

  if (acp_client_callbacks_new(&cbs) != 0)
    return NULL;
  acp_client_callbacks_set_on_request_permission(cbs, c_perm);
  acp_client_callbacks_set_on_fs_read_text_file(cbs, c_read);
  acp_client_callbacks_set_on_terminal_create(cbs, c_term_create);
  acp_client_callbacks_set_on_terminal_output(cbs, c_term_other);
  acp_client_callbacks_set_on_terminal_wait_for_exit(cbs, c_term_other);
  acp_client_callbacks_set_on_terminal_kill(cbs, c_term_other);
  acp_client_callbacks_set_on_terminal_release(cbs, c_term_other);
  acp_client_new(&c, cbs, x, NULL, mem);
  acp_client_callbacks_free(cbs);
  return c;
}

static void test_client_initialize_records_version_and_caps(void **state) {
  ctx x = {0};
  acp_agent *a = new_agent(&x, NULL);
  acp_client *c = new_client(&x, NULL);
  size_t n;
  const char *caps;
  pair_wire w = {0};

  (void)state;
  assert_int_equal(acp_client_protocol_version(c), 0);
  assert_null(acp_client_agent_capabilities(c, &n));
  assert_int_equal(n, 0);
  assert_int_equal(
      acp_client_initialize(
          c, LIT("{\"fs\":{\"readTextFile\":true},\"terminal\":true}"),
          LIT("{\"name\":\"t\",\"version\":\"1\"}"), c_resp, &x, NULL),
      0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_int_equal(x.n_init, 1);
  assert_int_equal(x.n_resp, 1);
  assert_non_null(strstr(w.c2a.data,
                         "\"params\":{\"protocolVersion\":1,"
                         "\"clientCapabilities\":{\"fs\":{\"readTextFile\":"
                         "true},\"terminal\":true},\"clientInfo\":{"));
  assert_int_equal(acp_client_protocol_version(c), 1);
  caps = acp_client_agent_capabilities(c, &n);
  assert_non_null(caps);
  assert_string_equal(caps,
                      "{\"loadSession\":true,\"_meta\":{\"zed.dev\":{}}}");
  assert_int_equal(n, strlen(caps));
  wire_clear(&w);
  acp_client_free(c);
  acp_agent_free(a);
}

static void test_client_meta_and_unknown_fields_reach_agent_raw(void **st) {
  ctx x = {0};
  acp_agent *a = new_agent(&x, NULL);
  acp_client *c = new_client(&x, NULL);

  (void)st;
  assert_int_equal(
      acp_client_call(c, "initialize",
                      LIT("{\"protocolVersion\":1,\"clientInfo\":{\"name\":"
                          "\"t\"},\"_meta\":{\"traceparent\":\"00-x\","
                          "\"big\":12345678901234567890},"
                          "\"futureField\":[1,2]}"),
                      c_resp, &x, NULL),
      0);
  assert_int_equal(pump(a, c, NULL), 0);
  assert_int_equal(x.n_init, 101);
  assert_int_equal(x.n_err, 0);
  assert_string_equal(x.meta_seen, "{\"traceparent\":\"00-x\","
                                   "\"big\":12345678901234567890}");
  /* acp_client_call() does not record initialize; only the helper does. */
  assert_int_equal(acp_client_protocol_version(c), 0);
  acp_client_free(c);
  acp_agent_free(a);
}

static void test_client_permission_fs_and_terminal_round_trips(void **st) {
  ctx x = {0};
  acp_agent *a = new_agent(&x, NULL);
  acp_client *c = new_client(&x, NULL);
  pair_wire w = {0};

  (void)st;
  assert_int_equal(
      acp_agent_request_permission(
          a, "s1", LIT("{\"toolCallId\":\"t1\",\"title\":\"rm\"}"),
          LIT("[{\"optionId\":\"allow\",\"name\":\"Allow\",\"kind\":"
              "\"allow_once\"}]"),
          a_resp, &x, NULL),
      0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_int_equal(x.n_perm, 1);
  assert_string_equal(x.last_result,
                      "{\"outcome\":{\"outcome\":\"selected\",\"optionId\":"
                      "\"allow\"}}");
  assert_int_equal(acp_agent_request_permission(a, "s1", LIT("{}"), LIT("[]"),
                                                a_resp, &x, NULL),
                   0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_string_equal(x.last_result,
                      "{\"outcome\":{\"outcome\":\"cancelled\"}}");

  assert_int_equal(
      acp_agent_fs_read_text_file(a, "s1", "/a.txt", 2, 10, a_resp, &x, NULL),
      0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_int_equal(x.n_read, 1);
  assert_non_null(strstr(w.a2c.data, "\"line\":2,\"limit\":10"));
  assert_string_equal(x.last_result, "{\"content\":\"line1\\nline2\"}");

  /* _meta and unknown fields sent raw arrive raw. */
  assert_int_equal(
      acp_agent_call(a, "fs/read_text_file",
                     LIT("{\"sessionId\":\"s1\",\"path\":\"/a.txt\","
                         "\"_meta\":{\"n\":1.000000000000000000001},"
                         "\"zz\":true}"),
                     a_resp, &x, NULL),
      0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_string_equal(x.meta_seen, "{\"n\":1.000000000000000000001}");

  /* fs/write_text_file has no handler: -32601. */
  assert_int_equal(
      acp_agent_fs_write_text_file(a, "s1", "/b", "x", 1, a_resp, &x, NULL), 0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_int_equal(x.last_err, ACP_RPC_METHOD_NOT_FOUND);

  /* Terminal: create, output, wait (answered later), kill, release. */
  x.n_err = 0;
  assert_int_equal(acp_agent_terminal_create(a, "s1", "ls", LIT("[\"-l\"]"),
                                             LIT("{\"cwd\":\"/tmp\"}"), a_resp,
                                             &x, NULL),
                   0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_non_null(strstr(w.a2c.data, "\"command\":\"ls\",\"args\":[\"-l\"],"
                                     "\"cwd\":\"/tmp\""));
  assert_string_equal(x.last_result, "{\"terminalId\":\"term-1\"}");
  assert_int_equal(
      acp_agent_terminal_output(a, "s1", "term-1", a_resp, &x, NULL), 0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_string_equal(x.last_result,
                      "{\"output\":\"hi\\n\",\"truncated\":false}");
  assert_int_equal(
      acp_agent_terminal_wait_for_exit(a, "s1", "term-1", a_resp, &x, NULL), 0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_non_null(held_term);
  x.last_result[0] = '\0';
  assert_int_equal(acp_client_respond(c, held_term, LIT("{\"exitCode\":0}")),
                   0);
  held_term = NULL;
  assert_int_equal(pump(a, c, &w), 0);
  assert_string_equal(x.last_result, "{\"exitCode\":0}");
  assert_int_equal(acp_agent_terminal_kill(a, "s1", "term-1", a_resp, &x, NULL),
                   0);
  assert_int_equal(
      acp_agent_terminal_release(a, "s1", "term-1", a_resp, &x, NULL), 0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_int_equal(x.n_term, 5);
  assert_int_equal(x.n_err, 0);
  wire_clear(&w);
  acp_client_free(c);
  acp_agent_free(a);
}

static void test_client_invalid_params_and_unknown(void **state) {
  ctx x = {0};
  acp_client *c = new_client(&x, NULL);
  tbuf out = {0};

  (void)state;
  assert_int_equal(client_feed(c,
                               "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
                               "\"fs/read_text_file\",\"params\":{"
                               "\"sessionId\":\"s\"}}\n",
                               &out),
                   0);
  assert_non_null(strstr(out.data, "\"code\":-32602"));
  assert_non_null(strstr(out.data, "\"path\":\"/path\""));
  assert_int_equal(x.n_read, 0);
  tbuf_clear(&out);
  assert_int_equal(client_feed(c,
                               "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
                               "\"session/prompt\",\"params\":{"
                               "\"sessionId\":\"s\",\"prompt\":[]}}\n",
                               &out),
                   0);
  assert_non_null(strstr(out.data, "\"code\":-32601"));
  tbuf_clear(&out);
  /* session/update without a handler and unknown notifications: ignored. */
  assert_int_equal(client_feed(c,
                               "{\"jsonrpc\":\"2.0\",\"method\":"
                               "\"session/update\",\"params\":{"
                               "\"sessionId\":\"s\",\"update\":{}}}\n",
                               &out),
                   0);
  assert_null(out.data);
  acp_client_free(c);
}

/* id 0 collision: the client's initialize is id 0 and the agent's first
 * request, sent while initialize is pending, is id 0 too. */
static acp_agent_request *held_init;

static int a_init_hold(acp_agent *a, acp_agent_request *req, void *ud) {
  ctx *x = ud;

  held_init = req;
  return acp_agent_request_permission(a, "s1", LIT("{}"), LIT("[]"), a_resp, x,
                                      NULL);
}

static void test_client_id_zero_collision(void **state) {
  ctx x = {0};
  acp_agent_callbacks *cbs;
  acp_agent *a;
  acp_client *c = new_client(&x, NULL);
  pair_wire w = {0};
  int64_t cid = -1;

  (void)state;
  assert_int_equal(acp_agent_callbacks_new(&cbs), 0);
  acp_agent_callbacks_set_on_initialize(cbs, a_init_hold);
  assert_int_equal(acp_agent_new(&a, cbs, &x, NULL, NULL), 0);
  acp_agent_callbacks_free(cbs);
  assert_int_equal(acp_client_initialize(c, NULL, 0, NULL, 0, c_resp, &x, &cid),
                   0);
  assert_int_equal(cid, 0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_non_null(strstr(w.a2c.data, "{\"jsonrpc\":\"2.0\",\"id\":0,"
                                     "\"method\":\"session/request_"
                                     "permission\""));
  assert_int_equal(x.n_perm, 1);
  assert_int_equal(x.n_resp, 1); /* the permission answer reached the agent */
  assert_int_equal(acp_client_protocol_version(c), 0);
  assert_int_equal(
      acp_agent_respond_initialize(a, held_init, NULL, 0, NULL, 0, NULL, 0), 0);
  assert_int_equal(pump(a, c, &w), 0);
  assert_int_equal(x.n_resp, 2);
  assert_int_equal(acp_client_protocol_version(c), 1);
  wire_clear(&w);
  acp_client_free(c);
  acp_agent_free(a);
}

static void test_client_call_helpers_build_params(void **state) {
  ctx x = {0};
  acp_client *c = new_client(&x, NULL);
  const char *d;
  acp_ssize n;
  tbuf out = {0};

  (void)state;
  assert_int_equal(acp_client_authenticate(c, "m", NULL, NULL, NULL), 0);
  assert_int_equal(acp_client_logout(c, NULL, NULL, NULL), 0);
  assert_int_equal(
      acp_client_session_load(c, "s", "/w", NULL, 0, NULL, NULL, NULL), 0);
  assert_int_equal(
      acp_client_session_resume(c, "s", "/w", NULL, 0, NULL, NULL, NULL), 0);
  assert_int_equal(acp_client_session_list(c, "/w", NULL, NULL, NULL, NULL), 0);
  assert_int_equal(acp_client_session_delete(c, "s", NULL, NULL, NULL), 0);
  assert_int_equal(acp_client_session_close(c, "s", NULL, NULL, NULL), 0);
  assert_int_equal(acp_client_set_mode(c, "s", "ask", NULL, NULL, NULL), 0);
  assert_int_equal(acp_client_set_config_option(c, "s", "model", LIT("\"x\""),
                                                NULL, NULL, NULL),
                   0);
  assert_int_equal(acp_client_prompt(c, "s",
                                     LIT("[{\"type\":\"resource_link\","
                                         "\"uri\":\"file:///a\",\"name\":"
                                         "\"a\"}]"),
                                     NULL, NULL, NULL),
                   0);
  assert_int_equal(acp_client_cancel(c, "s"), 0);
  assert_int_equal(acp_client_session_new(c, NULL, NULL, 0, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  n = acp_client_send(c, &d);
  assert_true(n > 0);
  tbuf_add(&out, d, (size_t)n);
  assert_non_null(strstr(out.data, "\"method\":\"authenticate\",\"params\":"
                                   "{\"methodId\":\"m\"}"));
  assert_non_null(strstr(out.data, "\"params\":{\"sessionId\":\"s\",\"cwd\":"
                                   "\"/w\",\"mcpServers\":[]}"));
  assert_non_null(strstr(out.data, "\"method\":\"session/resume\",\"params\":"
                                   "{\"sessionId\":\"s\",\"cwd\":\"/w\"}"));
  assert_non_null(strstr(out.data, "{\"sessionId\":\"s\",\"configId\":"
                                   "\"model\",\"value\":\"x\"}"));
  assert_non_null(strstr(out.data, "\"method\":\"session/cancel\",\"params\":"
                                   "{\"sessionId\":\"s\"}"));
  tbuf_clear(&out);
  acp_client_free(c);
}

/* MARK: - Allocation failure */

static int fa_prompt(acp_agent *a, acp_agent_request *req, void *ud) {
  int rv;

  (void)ud;
  rv = acp_agent_send_message_chunk(a, acp_agent_request_session_id(req), "hi",
                                    2, NULL, 0);
  if (rv != 0)
    return rv;
  return acp_agent_respond_prompt(a, req, "end_turn", NULL, 0);
}

static int fc_update(acp_client *c, const acp_client_update *u, void *ud) {
  (void)c;
  (void)u;
  (void)ud;
  return 0;
}

/* Returns 0 if the whole scenario succeeded. */
static int scenario(const acp_mem *mem) {
  acp_agent_callbacks *ac = NULL;
  acp_client_callbacks *cc = NULL;
  acp_agent *a = NULL;
  acp_client *c = NULL;
  ctx x = {0};
  int rv;

  rv = acp_agent_callbacks_new(&ac);
  if (rv == 0)
    rv = acp_client_callbacks_new(&cc);
  if (rv != 0)
    goto done;
  acp_agent_callbacks_set_on_session_prompt(ac, fa_prompt);
  acp_client_callbacks_set_on_session_update(cc, fc_update);
  acp_client_callbacks_set_on_request_permission(cc, c_perm);
  rv = acp_agent_new(&a, ac, &x, NULL, mem);
  if (rv != 0)
    goto done;
  rv = acp_client_new(&c, cc, &x, NULL, mem);
  if (rv != 0)
    goto done;
  rv = acp_client_initialize(c, NULL, 0, NULL, 0, c_resp, &x, NULL);
  if (rv == 0)
    rv = pump(a, c, NULL);
  if (rv == 0)
    rv = acp_client_prompt_text(c, "s1", "hello", 5, c_resp, &x, NULL);
  if (rv == 0)
    rv = pump(a, c, NULL);
  if (rv == 0)
    rv = acp_agent_request_permission(a, "s1", LIT("{}"), LIT("[]"), a_resp, &x,
                                      NULL);
  if (rv == 0)
    rv = pump(a, c, NULL);
  if (rv == 0 && (x.n_resp != 3 || x.n_err != 0))
    rv = -1;
done:
  acp_client_free(c);
  acp_agent_free(a);
  acp_client_callbacks_free(cc);
  acp_agent_callbacks_free(ac);
  return rv;
}

static void test_client_allocation_failure_loop(void **state) {
  failmem f = {.count = 0, .fail_at = -1, .live = 0};
  acp_mem mem = {&f, fm_malloc, fm_free, fm_calloc, fm_realloc};
  long total;
  long i;
  int failures = 0;

  (void)state;
  assert_int_equal(scenario(&mem), 0);
  f.fail_at = 1L << 40;
  f.count = 0;
  assert_int_equal(scenario(&mem), 0);
  total = f.count;
  assert_true(total > 10);
  for (i = 0; i < total; i++) {
    f.count = 0;
    f.fail_at = i;
    if (scenario(&mem) != 0)
      failures++;
  }
  /* Every injected failure in the scenario must surface as an error. */
  assert_true(failures > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_client_initialize_records_version_and_caps),
      cmocka_unit_test(test_client_meta_and_unknown_fields_reach_agent_raw),
      cmocka_unit_test(test_client_permission_fs_and_terminal_round_trips),
      cmocka_unit_test(test_client_invalid_params_and_unknown),
      cmocka_unit_test(test_client_id_zero_collision),
      cmocka_unit_test(test_client_call_helpers_build_params),
      cmocka_unit_test(test_client_allocation_failure_loop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
