/*
 * MCP over HTTP in relay mode (acp_http_server_new_relay()): the server
 * runs on a uv loop in a thread of its own; its relay callbacks forward
 * every message into an in-process acp_mcp_conn of a registry with a few
 * tools and deliver the conn's output back with acp_http_relay_deliver(),
 * either at once (from `message`) or later from a timer. Clients: our
 * acp_http_client carrying an acp_mcp_client on a second loop, and raw
 * loopback sockets for status codes, Authorization and session ends.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "acp/http.h"
#include "failmem.h"
#include "http_test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_SESS 16

/* MARK: - Relay server thread */

typedef struct relay_srv {
  ht_server s;      /* mu also guards the counters below */
  uv_timer_t pump;  /* async mode: deliver conn output later */
  uv_timer_t later; /* "slow": progress and answer later */
  uv_timer_t ender; /* "test/end_later": end the session later */
  /* configuration (set before the thread starts) */
  const char *want_auth; /* NULL: Authorization must be absent */
  int listen_fd;
  int async;
  const acp_mem *mem;
  int legacy_on;
  size_t max_streams; /* 0: the default */
  /* state of the server thread */
  acp_http_relay_session *sess[MAX_SESS];
  int nsess;
  acp_mcp_call *held;
  acp_http_relay_session *held_sess;
  acp_http_relay_session *end_sess;
  /* counters (under mu) */
  int opens, refused, closed, messages, bad_msgs, deliver_errs;
  int checks_done, checks_failed;
  size_t count_after_close;
} relay_srv;

static void lock(relay_srv *t) {
  pthread_mutex_lock(&t->s.mu);
}
static void unlock(relay_srv *t) {
  pthread_mutex_unlock(&t->s.mu);
}
static int get_counter(relay_srv *t, const int *p) {
  int v;
  lock(t);
  v = *p;
  unlock(t);
  return v;
}

static void sess_remove(relay_srv *t, acp_http_relay_session *s) {
  int i;
  for (i = 0; i < t->nsess; i++)
    if (t->sess[i] == s) {
      t->sess[i] = t->sess[--t->nsess];
      break;
    }
  if (t->held_sess == s) {
    t->held = NULL;
    t->held_sess = NULL;
  }
}

/* Deliver everything the session's conn has to send. */
static void pump_one(relay_srv *t, acp_http_relay_session *s) {
  acp_mcp_conn *conn = acp_http_relay_session_get_user_data(s);
  const char *data;
  acp_ssize n;
  while ((n = acp_mcp_conn_send(conn, &data)) > 0) {
    size_t len = (size_t)n, i = 0;
    while (i < len) {
      const char *nl = memchr(data + i, '\n', len - i);
      size_t e = nl ? (size_t)(nl - data) : len;
      if (e > i && acp_http_relay_deliver(s, data + i, e - i) != 0) {
        lock(t);
        t->deliver_errs++;
        unlock(t);
      }
      i = e + 1;
    }
  }
}

static void on_pump(uv_timer_t *tm) {
  relay_srv *t = tm->data;
  int i;
  for (i = 0; i < t->nsess; i++)
    pump_one(t, t->sess[i]);
}

static void end_upstream(relay_srv *t, acp_http_relay_session *s) {
  acp_mcp_conn *conn = acp_http_relay_session_get_user_data(s);
  sess_remove(t, s);
  acp_http_relay_session_end(s);
  acp_mcp_conn_free(conn);
}

static void on_ender(uv_timer_t *tm) {
  relay_srv *t = tm->data;
  if (t->end_sess) {
    end_upstream(t, t->end_sess);
    t->end_sess = NULL;
  }
}

static void on_later(uv_timer_t *tm) {
  relay_srv *t = tm->data;
  acp_http_relay_session *s = t->held_sess;
  if (t->held == NULL)
    return;
  acp_mcp_call_progress(t->held, 2, 2, "late");
  acp_mcp_call_respond_text(t->held, "slow done", 9, false);
  t->held = NULL;
  t->held_sess = NULL;
  pump_one(t, s);
}

static int r_open(acp_http_relay_session *s, const char *auth, void *ud) {
  relay_srv *t = ud;
  acp_mcp_conn *conn = NULL;
  bool ok =
      t->want_auth ? (auth && strcmp(auth, t->want_auth) == 0) : auth == NULL;
  if (!ok || t->nsess == MAX_SESS ||
      acp_mcp_conn_new(&conn, t->s.reg, NULL) != 0) {
    lock(t);
    t->refused++;
    unlock(t);
    return -1;
  }
  assert_null(acp_http_relay_session_get_user_data(s));
  acp_http_relay_session_set_user_data(s, conn);
  t->sess[t->nsess++] = s;
  lock(t);
  t->opens++;
  unlock(t);
  return 0;
}

/* Deliver argument checks, run on the server thread from `message`. */
static void deliver_checks(relay_srv *t, acp_http_relay_session *s) {
  int fails = 0;
  static const char pretty[] =
      "{\n \"jsonrpc\": \"2.0\",\r\n \"method\": \"test/pretty\"\n}\n";
  fails += acp_http_relay_deliver(NULL, "{}", 2) != ACP_ERR_INVALID_ARGUMENT;
  fails += acp_http_relay_deliver(s, NULL, 0) != ACP_ERR_INVALID_ARGUMENT;
  fails += acp_http_relay_deliver(s, "", 0) != ACP_ERR_INVALID_ARGUMENT;
  fails += acp_http_relay_deliver(s, "{\"a\":", 5) != ACP_ERR_INVALID_ARGUMENT;
  fails += acp_http_relay_deliver(s, "[{}]", 4) != ACP_ERR_INVALID_ARGUMENT;
  fails += acp_http_relay_deliver(s, "42", 2) != ACP_ERR_INVALID_ARGUMENT;
  /* Line breaks between tokens and a trailing newline are fine; the
   * stream gets one line. */
  fails += acp_http_relay_deliver(s, pretty, sizeof(pretty) - 1) != 0;
  fails += strlen(acp_http_relay_session_id(s)) != 32;
  fails += acp_http_relay_session_id(NULL) != NULL;
  fails += acp_http_relay_session_get_user_data(NULL) != NULL;
  acp_http_relay_session_set_user_data(NULL, NULL);
  acp_http_relay_session_end(NULL);
  lock(t);
  t->checks_done = 1;
  t->checks_failed = fails;
  unlock(t);
}

/* Whether msg[0..len) contains `needle` (msg is not NUL-terminated). */
static bool has(const char *msg, size_t len, const char *needle) {
  size_t n = strlen(needle), i;
  for (i = 0; i + n <= len; i++)
    if (memcmp(msg + i, needle, n) == 0)
      return true;
  return false;
}

static void r_message(acp_http_relay_session *s, const char *msg, size_t len,
                      void *ud) {
  relay_srv *t = ud;
  acp_mcp_conn *conn = acp_http_relay_session_get_user_data(s);
  char *buf;
  lock(t);
  t->messages++;
  if (len == 0 || msg[0] != '{' || msg[len - 1] != '}' ||
      memchr(msg, '\n', len) || memchr(msg, '\r', len))
    t->bad_msgs++;
  unlock(t);
  if (has(msg, len, "\"test/end\"")) {
    end_upstream(t, s); /* from inside `message`: deferred */
    return;
  }
  if (has(msg, len, "\"test/end_later\"")) {
    t->end_sess = s;
    uv_timer_start(&t->ender, on_ender, 5, 0);
    return;
  }
  if (has(msg, len, "\"test/checks\"")) {
    deliver_checks(t, s);
    return;
  }
  buf = malloc(len + 1);
  memcpy(buf, msg, len);
  buf[len] = '\n';
  acp_mcp_conn_recv(conn, buf, len + 1, uv_now(&t->s.loop));
  free(buf);
  if (t->held && t->held_sess == NULL)
    t->held_sess = s;
  if (t->async)
    uv_timer_start(&t->pump, on_pump, 0, 0);
  else
    pump_one(t, s);
}

static void r_closed(acp_http_relay_session *s, void *ud) {
  relay_srv *t = ud;
  acp_mcp_conn *conn = acp_http_relay_session_get_user_data(s);
  /* Inside `closed` deliver and end are no-ops. */
  if (acp_http_relay_deliver(s, "{}", 2) != ACP_ERR_CLOSED) {
    lock(t);
    t->deliver_errs++;
    unlock(t);
  }
  acp_http_relay_session_end(s);
  sess_remove(t, s);
  acp_mcp_conn_free(conn);
  lock(t);
  t->closed++;
  unlock(t);
}

static const acp_http_relay_callbacks relay_cbs = {r_open, r_message, r_closed};

/* Progress now; the answer stays open ("hold") or comes from a timer. */
static int tool_hold(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  relay_srv *t = ud;
  (void)args;
  t->held = call;
  t->held_sess = NULL; /* set by r_message once recv returns */
  return acp_mcp_call_progress(call, 1, 2, "half");
}

/* No progress, no answer until the session ends: a relay POST for it waits
 * suspended (hs_stream.waiting). */
static int tool_park(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  relay_srv *t = ud;
  (void)args;
  t->held = call;
  t->held_sess = NULL;
  return 0;
}

static int tool_slow(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  relay_srv *t = ud;
  int rv = tool_hold(call, args, ud);
  uv_timer_start(&t->later, on_later, 10, 0);
  return rv;
}

static void relay_on_stop(ht_server *s) {
  relay_srv *t = s->user_data;
  lock(t);
  t->count_after_close = (size_t)t->nsess;
  unlock(t);
  uv_close((uv_handle_t *)&t->pump, NULL);
  uv_close((uv_handle_t *)&t->later, NULL);
  uv_close((uv_handle_t *)&t->ender, NULL);
}

static int relay_srv_start(ht_server *s) {
  relay_srv *t = s->user_data;
  acp_http_server_options *o = NULL;
  int rv;
  acp_mcp_server_new(&s->reg, "relayed", "1", NULL, NULL);
  ht_add_tool(s->reg, "echo", NULL, ht_tool_echo, NULL);
  ht_add_tool(s->reg, "hold", NULL, tool_hold, t);
  ht_add_tool(s->reg, "slow", NULL, tool_slow, t);
  ht_add_tool(s->reg, "park", NULL, tool_park, t);
  acp_http_server_options_new(&o, NULL);
  if (t->max_streams > 0)
    acp_http_server_options_set_max_streams(o, t->max_streams);
  acp_http_server_options_set_max_body(o, 4000);
  acp_http_server_options_set_listen_fd(o, t->listen_fd);
  acp_http_server_options_set_legacy(o, t->legacy_on);
  rv = acp_http_server_new_relay(&s->srv, &s->loop, &relay_cbs, t, o, t->mem);
  acp_http_server_options_free(o);
  uv_timer_init(&s->loop, &t->pump);
  t->pump.data = t;
  uv_timer_init(&s->loop, &t->later);
  t->later.data = t;
  uv_timer_init(&s->loop, &t->ender);
  t->ender.data = t;
  return rv;
}

static relay_srv *relay_start(const char *want_auth, int listen_fd, int async,
                              const acp_mem *mem) {
  relay_srv *t = calloc(1, sizeof(*t));
  t->want_auth = want_auth;
  t->listen_fd = listen_fd;
  t->async = async;
  t->mem = mem;
  t->legacy_on = 1;
  ht_server_start(&t->s, relay_srv_start, relay_on_stop, t);
  return t;
}

/* Close the server, join, check the loop closed cleanly (else start_rv
 * becomes -1); `t` is kept for reading counters; free with free(). */
static void relay_stop(relay_srv *t) {
  ht_server_stop(&t->s);
  t->s.start_rv = t->s.close_rv == 0 ? t->s.start_rv : -1;
}

/* MARK: - Raw HTTP */

static const char init_0326[] =
    "{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"initialize\",\"params\":{"
    "\"protocolVersion\":\"2025-03-26\",\"capabilities\":{},\"clientInfo\":{"
    "\"name\":\"t\",\"version\":\"1\"}}}";
static const char ping_body[] = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":"
                                "\"ping\"}";

/* Initialize with extra headers and `body`; return the session id (static
 * buffer). The client accepts both: the sole answer comes as JSON. */
static const char *new_session_with(uint16_t port, const char *headers,
                                    const char *body, const char *version) {
  char *r = ht_post(port, headers, body, NULL);
  const char *sid;
  char want[64];
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "Content-Type: application/json"));
  assert_null(strstr(r, "retry: "));
  snprintf(want, sizeof(want), "\"protocolVersion\":\"%s\"", version);
  assert_non_null(strstr(r, want));
  sid = ht_session_id(r);
  free(r);
  return sid;
}

static const char *new_session(uint16_t port, const char *headers) {
  return new_session_with(port, headers, ht_init_body, "2025-11-25");
}

/* MARK: - Our MCP client over HTTP */

typedef struct cl {
  ht_client h;
  int step;
  int status;
  int progress;
  char text[512];
  int done;
} cl;

static int on_progress(acp_mcp_client *c, double progress, double total,
                       const char *message, size_t message_len, void *ud) {
  cl *x = ud;
  (void)c;
  (void)total;
  (void)message;
  (void)message_len;
  x->progress++;
  assert_true(progress == (double)x->progress);
  return 0;
}

static int on_result(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                     void *ud);

static int next_step(cl *x) {
  acp_mcp_request_opts ro = ACP_MCP_REQUEST_OPTS_INIT;
  uint64_t now = uv_now(&x->h.loop);
  switch (x->step++) {
  case 0:
    return acp_mcp_client_list(x->h.c, ACP_MCP_LIST_TOOLS, NULL, NULL, now,
                               on_result, x, NULL);
  case 1:
    return acp_mcp_client_call_tool(x->h.c, "echo",
                                    "{\"message\":\"through the relay\"}", 31,
                                    NULL, now, on_result, x, NULL);
  case 2:
    ro.on_progress = on_progress;
    ro.progress_user_data = x;
    return acp_mcp_client_call_tool(x->h.c, "slow", NULL, 0, &ro, now,
                                    on_result, x, NULL);
  default:
    x->done = 1;
    acp_http_client_close(x->h.hc, 2000, NULL, NULL);
    return 0;
  }
}

static int on_result(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                     void *ud) {
  cl *x = ud;
  (void)c;
  if (status != 0) {
    x->status = status;
    acp_http_client_close(x->h.hc, 0, NULL, NULL);
    return 0;
  }
  if (msg && msg->result) {
    size_t n;
    const char *raw = acp_json_raw(msg->result, &n);
    size_t have = strlen(x->text);
    snprintf(x->text + have, sizeof(x->text) - have, "%.*s|", (int)n, raw);
  }
  return next_step(x);
}

static void client_session(relay_srv *t, const char *auth) {
  cl x;
  memset(&x, 0, sizeof(x));
  ht_client_open(&x.h, t->s.port, "/mcp", ACP_HTTP_STREAMABLE);
  if (auth)
    assert_int_equal(acp_http_client_add_header(x.h.hc, "Authorization", auth),
                     0);
  ht_client_run(&x.h, on_result, &x);
  assert_int_equal(x.status, 0);
  assert_int_equal(x.done, 1);
  assert_int_equal(acp_mcp_client_version(x.h.c), ACP_MCP_VERSION_LATEST);
  assert_non_null(strstr(x.text, "\"name\":\"echo\""));
  assert_non_null(strstr(x.text, "through the relay"));
  assert_non_null(strstr(x.text, "slow done"));
  assert_int_equal(x.progress, 2); /* "half" at once, "late" later */
  ht_client_close(&x.h);
}

/* MARK: - Tests */

static void check_clean(relay_srv *t) {
  assert_int_equal(t->s.start_rv, 0); /* also: the loop closed cleanly */
  assert_int_equal(t->bad_msgs, 0);
  assert_int_equal(t->deliver_errs, 0);
}

/* initialize, tools/list, tools/call echo, tools/call slow with progress,
 * DELETE on close: `closed` once. Output delivered from `message`. */
static void test_relay_client_roundtrip(void **state) {
  relay_srv *t = relay_start(NULL, -1, 0, NULL);
  (void)state;
  assert_int_equal(t->s.start_rv, 0);
  client_session(t, NULL);
  assert_int_equal(get_counter(t, &t->opens), 1);
  assert_int_equal(get_counter(t, &t->closed), 1);
  /* initialize, initialized, list, echo, slow */
  assert_int_equal(get_counter(t, &t->messages), 5);
  relay_stop(t);
  assert_int_equal(t->closed, 1); /* nothing left for close to end */
  assert_int_equal(t->count_after_close, 0);
  check_clean(t);
  free(t);
}

/* The same with every delivery from a timer: suspended SSE responses are
 * woken by acp_http_relay_deliver(). */
static void test_relay_client_async(void **state) {
  relay_srv *t = relay_start(NULL, -1, 1, NULL);
  (void)state;
  assert_int_equal(t->s.start_rv, 0);
  client_session(t, NULL);
  client_session(t, NULL);
  assert_int_equal(get_counter(t, &t->opens), 2);
  assert_int_equal(get_counter(t, &t->closed), 2);
  relay_stop(t);
  check_clean(t);
  free(t);
}

/* The client sends the token with every request (POSTs, DELETE). */
static void test_relay_client_bearer(void **state) {
  relay_srv *t = relay_start("Bearer s3cret", -1, 1, NULL);
  (void)state;
  client_session(t, "Bearer s3cret");
  assert_int_equal(get_counter(t, &t->opens), 1);
  assert_int_equal(get_counter(t, &t->refused), 0);
  assert_int_equal(get_counter(t, &t->closed), 1);
  relay_stop(t);
  check_clean(t);
  free(t);
}

static void test_relay_authorization(void **state) {
  relay_srv *t = relay_start("Bearer good", -1, 0, NULL);
  const char *sid;
  char id[64], *r;
  (void)state;
  /* initialize without, or with a wrong, Authorization: 401. */
  r = ht_post(t->s.port, "", ht_init_body, NULL);
  assert_int_equal(ht_status(r), 401);
  assert_non_null(strstr(r, "WWW-Authenticate: Bearer"));
  assert_non_null(strstr(r, "\"error\""));
  assert_null(strstr(r, "MCP-Session-Id"));
  free(r);
  r = ht_post(t->s.port, "Authorization: Bearer bad\r\n", ht_init_body, NULL);
  assert_int_equal(ht_status(r), 401);
  free(r);
  assert_int_equal(get_counter(t, &t->refused), 2);
  assert_int_equal(get_counter(t, &t->opens), 0);
  /* The right one opens a session. */
  sid = new_session(t->s.port, "Authorization: Bearer good\r\n");
  snprintf(id, sizeof(id), "%s", sid);
  /* Later requests need the same value. */
  r = ht_post_s(t->s.port, id, "", ping_body, NULL);
  assert_int_equal(ht_status(r), 401);
  assert_non_null(strstr(r, "WWW-Authenticate: Bearer"));
  free(r);
  r = ht_post_s(t->s.port, id, "Authorization: Bearer goo\r\n", ping_body,
                NULL);
  assert_int_equal(ht_status(r), 401);
  free(r);
  r = ht_post_s(t->s.port, id, "Authorization: Bearer goodx\r\n", ping_body,
                NULL);
  assert_int_equal(ht_status(r), 401);
  free(r);
  r = ht_post_s(t->s.port, id, "Authorization: Bearer good\r\n", ping_body,
                NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "application/json"));
  assert_non_null(strstr(r, "\"id\":7"));
  free(r);
  r = ht_request(t->s.port, "GET", id, "Authorization: Bearer bad\r\n", NULL);
  assert_int_equal(ht_status(r), 401);
  free(r);
  r = ht_request(t->s.port, "DELETE", id, "", NULL);
  assert_int_equal(ht_status(r), 401);
  free(r);
  assert_int_equal(get_counter(t, &t->closed), 0);
  r = ht_request(t->s.port, "DELETE", id, "Authorization: Bearer good\r\n",
                 NULL);
  assert_int_equal(ht_status(r), 200);
  free(r);
  assert_int_equal(get_counter(t, &t->closed), 1);
  r = ht_post_s(t->s.port, id, "Authorization: Bearer good\r\n", ping_body,
                NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);
  relay_stop(t);
  assert_int_equal(t->closed, 1);
  check_clean(t);
  free(t);
}

static void test_relay_bad_requests(void **state) {
  relay_srv *t = relay_start(NULL, -1, 0, NULL);
  const char *sid;
  char id[64], *r;
  (void)state;
  sid = new_session(t->s.port, "");
  snprintf(id, sizeof(id), "%s", sid);
  /* unknown session, missing session */
  r = ht_post_s(t->s.port, "00000000000000000000000000000000", "", ping_body,
                NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);
  r = ht_request(t->s.port, "GET", "00000000000000000000000000000000", "",
                 NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);
  r = ht_request(t->s.port, "DELETE", "00000000000000000000000000000000", "",
                 NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);
  r = ht_post(t->s.port, "", ping_body, NULL);
  assert_int_equal(ht_status(r), 400);
  free(r);
  /* An Authorization the session was not opened with. */
  r = ht_post_s(t->s.port, id, "Authorization: Bearer x\r\n", ping_body, NULL);
  assert_int_equal(ht_status(r), 401);
  free(r);
  /* malformed, invalid, wrong version */
  r = ht_post_s(t->s.port, id, "", "{\"jsonrpc\":", NULL);
  assert_int_equal(ht_status(r), 400);
  assert_non_null(strstr(r, "-32700"));
  free(r);
  r = ht_post_s(t->s.port, id, "", "[1]", NULL);
  assert_int_equal(ht_status(r), 400);
  free(r);
  r = ht_post_s(t->s.port, id, "MCP-Protocol-Version: 1999-01-01\r\n",
                ping_body, NULL);
  assert_int_equal(ht_status(r), 400);
  free(r);
  /* Batches need 2025-03-26. */
  r = ht_post_s(t->s.port, id, "",
                "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", NULL);
  assert_int_equal(ht_status(r), 400);
  assert_non_null(strstr(r, "-32600"));
  free(r);
  /* An initialize notification opens nothing. */
  r = ht_post(t->s.port, "",
              "{\"jsonrpc\":\"2.0\",\"method\":\"initialize\",\"params\":{}}",
              NULL);
  assert_int_equal(ht_status(r), 400);
  free(r);
  /* No legacy endpoints on a relay server, even with legacy on. */
  r = ht_raw(t->s.port,
             "GET /sse HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
             "Accept: text/event-stream\r\n\r\n",
             NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);
  /* Origin and Host checks as usual. */
  r = ht_post_s(t->s.port, id, "Origin: http://evil.example\r\n", ping_body,
                NULL);
  assert_int_equal(ht_status(r), 403);
  free(r);
  /* Notifications only: 202 once delivered. */
  r = ht_post_s(
      t->s.port, id, "",
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", NULL);
  assert_int_equal(ht_status(r), 202);
  free(r);
  /* Still usable; deliver argument checks ride on a notification. */
  r = ht_post_s(t->s.port, id, "",
                "{\"jsonrpc\":\"2.0\",\"method\":\"test/checks\"}", NULL);
  assert_int_equal(ht_status(r), 202);
  free(r);
  assert_int_equal(get_counter(t, &t->checks_done), 1);
  assert_int_equal(get_counter(t, &t->checks_failed), 0);
  /* The pretty message waits on the GET stream, on one line. */
  r = ht_request(t->s.port, "GET", id, "", "test/pretty\" }\n\n");
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(
      r, "data: {  \"jsonrpc\": \"2.0\",   \"method\": \"test/pretty\" }\n\n"));
  free(r);
  relay_stop(t);
  assert_int_equal(t->closed, 1); /* server close ended the live session */
  check_clean(t);
  free(t);
}

/* How a relay answers a POST with a request: JSON when the sole response
 * comes first (upstream answering at once or later), SSE when the client
 * accepts only that, or when a progress notification comes first. */
static void answer_forms(int async) {
  relay_srv *t = relay_start(NULL, -1, async, NULL);
  const char *sid;
  char id[64], hdrs[160], req[8192], *r;
  sid = new_session(t->s.port, "");
  snprintf(id, sizeof(id), "%s", sid);
  /* Both accepted: one JSON body. */
  r = ht_post_s(t->s.port, id, "", ping_body, NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "Content-Type: application/json"));
  assert_non_null(strstr(r, "\"id\":7,\"result\":{}"));
  free(r);
  /* SSE only: a stream, priming event first. */
  snprintf(req, sizeof(req),
           "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: "
           "close\r\nContent-Type: application/json\r\nAccept: "
           "text/event-stream\r\nMCP-Session-Id: %s\r\nContent-Length: "
           "%zu\r\n\r\n%s",
           t->s.port, id, strlen(ping_body), ping_body);
  r = ht_raw(t->s.port, req, NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "Content-Type: text/event-stream"));
  assert_non_null(strstr(r, "retry: 1000\ndata: \n\n"));
  assert_true(strstr(r, "retry: ") < strstr(r, "\"id\":7"));
  free(r);
  /* Progress before the answer: it turns into a stream carrying both, in
   * order. */
  snprintf(hdrs, sizeof(hdrs), "MCP-Session-Id: %s\r\n", id);
  r = ht_post(t->s.port, hdrs,
              "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\","
              "\"params\":{\"name\":\"slow\",\"_meta\":{\"progressToken\":"
              "\"p8\"}}}",
              NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "Content-Type: text/event-stream"));
  assert_non_null(strstr(r, "\"half\""));
  assert_non_null(strstr(r, "slow done"));
  assert_true(strstr(r, "\"half\"") < strstr(r, "slow done"));
  free(r);
  relay_stop(t);
  check_clean(t);
  free(t);
}

static void test_relay_answer_forms(void **state) {
  (void)state;
  answer_forms(0);
}

static void test_relay_answer_forms_async(void **state) {
  (void)state;
  answer_forms(1);
}

static void test_relay_batches_2025_03_26(void **state) {
  relay_srv *t = relay_start(NULL, -1, 0, NULL);
  const char *sid;
  char *r;
  (void)state;
  sid = new_session_with(t->s.port, "", init_0326, "2025-03-26");
  r = ht_post_s(
      t->s.port, sid, "",
      "[{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"ping\"},"
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"},"
      "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"ping\"}]",
      NULL);
  /* Upstream (this one answers from inside `message`) answered both at
   * once: one JSON array. */
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "Content-Type: application/json"));
  assert_non_null(strstr(r, "\r\n\r\n[{"));
  assert_non_null(strstr(r, "\"id\":11"));
  assert_non_null(strstr(r, "\"id\":12"));
  free(r);
  assert_int_equal(get_counter(t, &t->messages), 4);
  relay_stop(t);
  check_clean(t);
  free(t);
}

/* Upstream negotiated 2025-06-18: the relay's streams carry no priming
 * event (empty data a client of that revision would parse and fail on);
 * 2025-11-25 gets one (test_relay_answer_forms). */
static void test_relay_no_priming_before_2025_11_25(void **state) {
  static const char init_0618[] =
      "{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"initialize\","
      "\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
      "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}";
  relay_srv *t = relay_start(NULL, -1, 0, NULL);
  const char *sid;
  char id[64], req[8192], *r;
  (void)state;
  sid = new_session_with(t->s.port, "", init_0618, "2025-06-18");
  snprintf(id, sizeof(id), "%s", sid);
  snprintf(req, sizeof(req),
           "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: "
           "close\r\nContent-Type: application/json\r\nAccept: "
           "text/event-stream\r\nMCP-Session-Id: %s\r\nContent-Length: "
           "%zu\r\n\r\n%s",
           t->s.port, id, strlen(ping_body), ping_body);
  r = ht_raw(t->s.port, req, NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "Content-Type: text/event-stream"));
  assert_non_null(strstr(r, "\"id\":7"));
  assert_null(strstr(r, "retry: "));
  assert_null(strstr(r, "data: \n\n"));
  free(r);
  relay_stop(t);
  check_clean(t);
  free(t);
}

/* Upstream ends a session while a POST stream is open: the stream ends
 * after what it holds, later requests get 404, `closed` does not run.
 * Once from inside `message` (deferred), once from a timer. */
static void upstream_end(relay_srv *t, const char *method) {
  const char *sid;
  char id[64], hdrs[128], req[8192], body[256], *buf, *r;
  size_t cap = 65536, len;
  int fd, eof;
  sid = new_session(t->s.port, "");
  snprintf(id, sizeof(id), "%s", sid);
  snprintf(hdrs, sizeof(hdrs), "MCP-Session-Id: %s\r\n", id);
  ht_fmt_post(
      req, sizeof(req), t->s.port, hdrs,
      "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":"
      "{\"name\":\"hold\",\"_meta\":{\"progressToken\":\"tk\"}}}");
  fd = ht_connect(t->s.port);
  assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
  buf = malloc(cap);
  len = ht_read_until(fd, buf, cap, 0, "\"half\"", &eof);
  assert_non_null(strstr(buf, "\"half\""));
  snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"method\":\"%s\"}",
           method);
  r = ht_post_s(t->s.port, id, "", body, NULL);
  assert_int_equal(ht_status(r), 202);
  free(r);
  /* The held stream ends (chunked terminator, then the server closes). */
  len = ht_read_until(fd, buf, cap, len, NULL, &eof);
  assert_int_equal(eof, 1);
  assert_null(strstr(buf, "\"result\""));
  close(fd);
  free(buf);
  r = ht_post_s(t->s.port, id, "", ping_body, NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);
  r = ht_request(t->s.port, "GET", id, "", NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);
}

/* A POST waiting for upstream's answer takes a place under max_streams,
 * and gives it back when its client leaves before the answer: the socket
 * is watched while the request is suspended. */
static void test_relay_waiting_client_leaves(void **state) {
  relay_srv *t = calloc(1, sizeof(*t));
  const char *sid;
  char req[1024], hdrs[128], *r;
  int fd, i;
  (void)state;
  t->listen_fd = -1;
  t->legacy_on = 1;
  t->max_streams = 1;
  ht_server_start(&t->s, relay_srv_start, relay_on_stop, t);
  assert_int_equal(t->s.start_rv, 0);
  sid = new_session(t->s.port, "");
  snprintf(hdrs, sizeof(hdrs), "MCP-Session-Id: %s\r\n", sid);
  ht_fmt_post(req, sizeof(req), t->s.port, hdrs,
              "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
              "\"params\":{\"name\":\"park\"}}");
  fd = ht_connect(t->s.port);
  assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
  /* Once upstream has it (initialize, initialized... then this call), the
   * POST waits, unanswered, and fills the one place. */
  for (i = 0; i < 200 && get_counter(t, &t->messages) < 2; i++)
    uv_sleep(50);
  assert_int_equal(get_counter(t, &t->messages), 2);
  r = ht_post_s(t->s.port, sid, "", ping_body, NULL);
  assert_int_equal(ht_status(r), 503);
  assert_non_null(strstr(r, "Too many streams"));
  free(r);
  close(fd); /* leaves before the answer */
  /* The close reaches the server's loop asynchronously. */
  ht_fmt_post(req, sizeof(req), t->s.port, hdrs, ping_body);
  assert_int_equal(ht_status_after(t->s.port, req, NULL, 503), 200);
  relay_stop(t);
  check_clean(t);
  free(t);
}

static void test_relay_upstream_end(void **state) {
  relay_srv *t = relay_start(NULL, -1, 0, NULL);
  (void)state;
  upstream_end(t, "test/end");
  upstream_end(t, "test/end_later");
  assert_int_equal(get_counter(t, &t->opens), 2);
  assert_int_equal(get_counter(t, &t->closed), 0);
  relay_stop(t);
  assert_int_equal(t->closed, 0);
  assert_int_equal(t->count_after_close, 0);
  check_clean(t);
  free(t);
}

static void test_relay_listen_fd(void **state) {
  uint16_t port = 0;
  int fd = ht_loopback_socket(&port, 16);
  relay_srv *t;
  char *r;
  (void)state;
  t = relay_start(NULL, fd, 0, NULL);
  assert_int_equal(t->s.start_rv, 0);
  assert_int_equal(t->s.port, port);
  (void)new_session(port, "");
  r = ht_post(port, "", ping_body, NULL); /* no session id */
  assert_int_equal(ht_status(r), 400);
  free(r);
  relay_stop(t);
  assert_int_equal(t->closed, 1);
  check_clean(t);
  free(t);
  /* The server closed the descriptor. */
  assert_int_equal(fcntl(fd, F_GETFD), -1);
  assert_int_equal(errno, EBADF);
}

static void test_relay_listen_fd_bad(void **state) {
  uv_loop_t loop;
  acp_http_server *srv = (acp_http_server *)&loop;
  acp_http_server_options *o = NULL;
  acp_http_relay_callbacks no_msg = {r_open, NULL, r_closed};
  int fd;
  (void)state;
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(acp_http_server_options_new(&o, NULL), 0);
  /* Not listening: refused, and closed all the same. */
  fd = socket(AF_INET, SOCK_STREAM, 0);
  acp_http_server_options_set_listen_fd(o, fd);
  assert_int_equal(
      acp_http_server_new_relay(&srv, &loop, &relay_cbs, NULL, o, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  assert_null(srv);
  assert_int_equal(fcntl(fd, F_GETFD), -1);
  /* Not a socket. */
  fd = open("/dev/null", O_RDONLY);
  acp_http_server_options_set_listen_fd(o, fd);
  assert_int_equal(
      acp_http_server_new_relay(&srv, &loop, &relay_cbs, NULL, o, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(fcntl(fd, F_GETFD), -1);
  /* Argument errors close it too. */
  fd = socket(AF_INET, SOCK_STREAM, 0);
  acp_http_server_options_set_listen_fd(o, fd);
  assert_int_equal(acp_http_server_new_relay(&srv, &loop, NULL, NULL, o, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(fcntl(fd, F_GETFD), -1);
  fd = socket(AF_INET, SOCK_STREAM, 0);
  acp_http_server_options_set_listen_fd(o, fd);
  assert_int_equal(
      acp_http_server_new_relay(&srv, &loop, &no_msg, NULL, o, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(fcntl(fd, F_GETFD), -1);
  fd = socket(AF_INET, SOCK_STREAM, 0);
  acp_http_server_options_set_listen_fd(o, fd);
  assert_int_equal(
      acp_http_server_new_relay(NULL, &loop, &relay_cbs, NULL, o, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(fcntl(fd, F_GETFD), -1);
  fd = socket(AF_INET, SOCK_STREAM, 0);
  acp_http_server_options_set_listen_fd(o, fd);
  assert_int_equal(acp_http_server_new(&srv, &loop, NULL, o, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(fcntl(fd, F_GETFD), -1);
  /* -1 restores binding; NULL options are fine. */
  acp_http_server_options_set_listen_fd(o, -1);
  acp_http_server_options_set_listen_fd(NULL, 3);
  acp_http_server_options_free(o);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* Every allocation of start + initialize + close failing in turn: clean
 * failure, nothing leaked. */
static void test_relay_failmem(void **state) {
  failmem f;
  long i, total = -1;
  (void)state;
  for (i = -1; total < 0 || i < total; i++) {
    acp_mem m = failmem_start(&f, i);
    relay_srv *t = relay_start(NULL, -1, 0, &m);
    if (t->s.start_rv == 0) {
      char *r = ht_post(t->s.port, "", ht_init_body, NULL);
      int st = ht_status(r);
      /* Failures answer 500, 413 (the body buffer could not grow), 400
       * (the JSON document could not grow), or drop the connection. */
      assert_true(st == 200 || st == 500 || st == 413 || st == 400 || st == 0);
      free(r);
    } else
      assert_int_equal(t->s.start_rv, ACP_ERR_NOMEM);
    relay_stop(t);
    assert_int_equal(f.live, 0);
    if (i == -1) {
      assert_int_equal(t->s.start_rv, 0);
      total = f.count;
      assert_true(total > 5);
    }
    free(t);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_relay_client_roundtrip),
      cmocka_unit_test(test_relay_client_async),
      cmocka_unit_test(test_relay_client_bearer),
      cmocka_unit_test(test_relay_authorization),
      cmocka_unit_test(test_relay_bad_requests),
      cmocka_unit_test(test_relay_answer_forms),
      cmocka_unit_test(test_relay_answer_forms_async),
      cmocka_unit_test(test_relay_batches_2025_03_26),
      cmocka_unit_test(test_relay_no_priming_before_2025_11_25),
      cmocka_unit_test(test_relay_waiting_client_leaves),
      cmocka_unit_test(test_relay_upstream_end),
      cmocka_unit_test(test_relay_listen_fd),
      cmocka_unit_test(test_relay_listen_fd_bad),
      cmocka_unit_test(test_relay_failmem),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
