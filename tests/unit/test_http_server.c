/*
 * MCP over HTTP: the server (acp_http_server) on a uv loop in a thread of
 * its own, hit with raw sockets for the status codes and SSE framing, and
 * with our libcurl client (acp_http_client) on a second loop for round
 * trips over Streamable HTTP, legacy HTTP+SSE and fallback probing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "acp/http.h"
#include "http/http_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* MARK: - Server thread */

typedef struct srv_thread {
  pthread_t th;
  uv_loop_t loop;
  uv_async_t stop;
  acp_mcp_server *reg;
  acp_http_server *srv;
  uint16_t port;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int ready;
  acp_mcp_call *held; /* a tools/call left unanswered by "slow" */
} srv_thread;

static int tool_echo(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  const char *s = "";
  size_t n = 0;
  (void)ud;
  acp_json_doc_str(acp_mcp_call_doc(call), acp_json_obj_getz(args, "message"),
                   &s, &n);
  return acp_mcp_call_respond_text(call, s, n, false);
}

/* Sends progress and stays unanswered until "finish" is called. */
static int tool_slow(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  srv_thread *t = ud;
  (void)args;
  t->held = call;
  return acp_mcp_call_progress(call, 1, 2, "half");
}

static int tool_finish(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  srv_thread *t = ud;
  (void)args;
  if (t->held) {
    acp_mcp_call_respond_text(t->held, "slow done", 9, false);
    t->held = NULL;
  }
  return acp_mcp_call_respond_text(call, "ok", 2, false);
}

/* SSE polling: progress, close the HTTP response, then answer at once. */
static int tool_poll(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  int rv;
  (void)args;
  (void)ud;
  rv = acp_mcp_call_progress(call, 1, 2, "before close");
  if (rv == 0)
    rv = acp_http_call_close_stream(call);
  if (rv != 0)
    return rv;
  return acp_mcp_call_respond_text(call, "polled", 6, false);
}

static void on_stop(uv_async_t *a) {
  srv_thread *t = a->data;
  acp_http_server_close(t->srv, NULL, NULL);
  uv_close((uv_handle_t *)a, NULL);
}

static void *srv_main(void *arg) {
  srv_thread *t = arg;
  acp_http_server_options *o = NULL;
  acp_mcp_tool_def d;
  uv_loop_init(&t->loop);
  assert_int_equal(acp_mcp_server_new(&t->reg, "t", "1", NULL, NULL), 0);
  memset(&d, 0, sizeof(d));
  d.version = ACP_MCP_DEF_VERSION;
  d.name = "echo";
  d.handler = tool_echo;
  assert_int_equal(acp_mcp_server_add_tool(t->reg, &d), 0);
  d.name = "slow";
  d.handler = tool_slow;
  d.user_data = t;
  assert_int_equal(acp_mcp_server_add_tool(t->reg, &d), 0);
  d.name = "finish";
  d.handler = tool_finish;
  assert_int_equal(acp_mcp_server_add_tool(t->reg, &d), 0);
  d.name = "poll";
  d.handler = tool_poll;
  assert_int_equal(acp_mcp_server_add_tool(t->reg, &d), 0);
  assert_int_equal(acp_http_server_options_new(&o, NULL), 0);
  acp_http_server_options_set_max_body(o, 1000);
  assert_int_equal(acp_http_server_new(&t->srv, &t->loop, t->reg, o, NULL), 0);
  acp_http_server_options_free(o);
  uv_async_init(&t->loop, &t->stop, on_stop);
  t->stop.data = t;
  pthread_mutex_lock(&t->mu);
  t->port = acp_http_server_port(t->srv);
  t->ready = 1;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
  uv_run(&t->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&t->loop), 0);
  acp_mcp_server_free(t->reg);
  return NULL;
}

static int setup(void **state) {
  srv_thread *t = calloc(1, sizeof(*t));
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  pthread_create(&t->th, NULL, srv_main, t);
  pthread_mutex_lock(&t->mu);
  while (!t->ready)
    pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
  *state = t;
  return 0;
}

static int teardown(void **state) {
  srv_thread *t = *state;
  uv_async_send(&t->stop);
  pthread_join(t->th, NULL);
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t);
  return 0;
}

/* MARK: - Raw HTTP */

static int connect_to(uint16_t port) {
  struct sockaddr_in a;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  return fd;
}

/* Send a request; read until the peer closes or `until` appears. */
static char *http_raw(uint16_t port, const char *req, const char *until) {
  size_t cap = 65536, len = 0;
  char *buf = malloc(cap);
  int fd = connect_to(port);
  ssize_t n;
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
  while (len + 1 < cap && (n = read(fd, buf + len, cap - len - 1)) > 0) {
    len += (size_t)n;
    buf[len] = 0;
    if (until && strstr(buf, until))
      break;
  }
  buf[len] = 0;
  close(fd);
  return buf;
}

static char *post(uint16_t port, const char *headers, const char *body,
                  const char *until) {
  char req[8192];
  snprintf(req, sizeof(req),
           "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n"
           "Content-Type: application/json\r\n"
           "Accept: application/json, text/event-stream\r\n%s"
           "Content-Length: %zu\r\n\r\n%s",
           port, headers, strlen(body), body);
  return http_raw(port, req, until);
}

static int status_of(const char *resp) {
  int s = 0;
  sscanf(resp, "HTTP/1.1 %d", &s);
  return s;
}

static const char init_body[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
    "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{"
    "\"name\":\"t\",\"version\":\"1\"}}}";

/* Initialize; return the session id (static buffer). */
static const char *new_session(uint16_t port) {
  static char sid[64];
  char *r = post(port, "", init_body, NULL);
  const char *h = strstr(r, "MCP-Session-Id: ");
  assert_int_equal(status_of(r), 200);
  assert_non_null(strstr(r, "application/json"));
  assert_non_null(strstr(r, "\"protocolVersion\":\"2025-11-25\""));
  assert_non_null(h);
  assert_int_equal(sscanf(h + 16, "%63[0-9a-f]", sid), 1);
  assert_int_equal(strlen(sid), 32);
  free(r);
  return sid;
}

static char *post_s(uint16_t port, const char *sid, const char *extra,
                    const char *body, const char *until) {
  char h[512];
  snprintf(h, sizeof(h), "MCP-Session-Id: %s\r\n%s", sid, extra);
  return post(port, h, body, until);
}

/* MARK: - Tests */

static void test_initialize_and_call(void **state) {
  srv_thread *t = *state;
  const char *sid = new_session(t->port);
  char *r;
  r = post_s(t->port, sid, "",
             "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
             NULL);
  assert_int_equal(status_of(r), 202);
  free(r);
  r = post_s(
      t->port, sid, "MCP-Protocol-Version: 2025-11-25\r\n",
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
      "\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":\"hi\"}}}",
      NULL);
  assert_int_equal(status_of(r), 200);
  assert_non_null(strstr(r, "Content-Type: application/json"));
  assert_non_null(strstr(r, "\"text\":\"hi\""));
  free(r);
  /* A body with raw newlines (pretty-printed JSON) works too. */
  r = post_s(t->port, sid, "",
             "{\n \"jsonrpc\": \"2.0\",\n \"id\": 3,\n \"method\": \"ping\"\n}",
             NULL);
  assert_int_equal(status_of(r), 200);
  assert_non_null(strstr(r, "\"id\":3"));
  free(r);
}

static void test_bad_input(void **state) {
  srv_thread *t = *state;
  const char *sid = new_session(t->port);
  char big[2000], *r;
  /* malformed JSON */
  r = post_s(t->port, sid, "", "{\"jsonrpc\":", NULL);
  assert_int_equal(status_of(r), 400);
  assert_non_null(strstr(r, "-32700"));
  free(r);
  /* not a JSON-RPC message */
  r = post_s(t->port, sid, "", "42", NULL);
  assert_int_equal(status_of(r), 400);
  assert_non_null(strstr(r, "-32600"));
  free(r);
  /* missing session */
  r = post(t->port, "", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
           NULL);
  assert_int_equal(status_of(r), 400);
  free(r);
  /* unknown session */
  r = post_s(t->port, "00000000000000000000000000000000", "",
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL);
  assert_int_equal(status_of(r), 404);
  free(r);
  /* unsupported protocol version */
  r = post_s(t->port, sid, "MCP-Protocol-Version: 1999-01-01\r\n",
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL);
  assert_int_equal(status_of(r), 400);
  free(r);
  /* wrong Origin, wrong Host */
  r = post_s(t->port, sid, "Origin: http://evil.example\r\n",
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL);
  assert_int_equal(status_of(r), 403);
  free(r);
  r = post_s(t->port, sid, "Origin: http://localhost:3000\r\n",
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL);
  assert_int_equal(status_of(r), 200);
  free(r);
  {
    char req[512];
    snprintf(req, sizeof(req),
             "GET /mcp HTTP/1.1\r\nHost: evil.example:%u\r\n"
             "Connection: close\r\nAccept: text/event-stream\r\n"
             "MCP-Session-Id: %s\r\n\r\n",
             t->port, sid);
    r = http_raw(t->port, req, NULL);
    assert_int_equal(status_of(r), 403);
    free(r);
  }
  /* body over the cap (1000 bytes) */
  memset(big, ' ', sizeof(big) - 1);
  big[sizeof(big) - 1] = 0;
  big[0] = '{';
  big[sizeof(big) - 2] = '}';
  r = post_s(t->port, sid, "", big, NULL);
  assert_int_equal(status_of(r), 413);
  free(r);
  /* wrong content type, other path, other method */
  {
    char req[512];
    snprintf(req, sizeof(req),
             "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
             "Content-Type: text/plain\r\nMCP-Session-Id: %s\r\n"
             "Content-Length: 2\r\n\r\n{}",
             sid);
    r = http_raw(t->port, req, NULL);
    assert_int_equal(status_of(r), 415);
    free(r);
    r = http_raw(t->port,
                 "GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Connection: close\r\n\r\n",
                 NULL);
    assert_int_equal(status_of(r), 404);
    free(r);
    r = http_raw(t->port,
                 "PUT /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Connection: close\r\nContent-Length: 0\r\n\r\n",
                 NULL);
    assert_int_equal(status_of(r), 405);
    free(r);
  }
  /* The session still works after all that. */
  r = post_s(t->port, sid, "",
             "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}", NULL);
  assert_int_equal(status_of(r), 200);
  free(r);
}

static void test_delete(void **state) {
  srv_thread *t = *state;
  const char *sid = new_session(t->port);
  char req[512], *r;
  snprintf(req, sizeof(req),
           "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
           "MCP-Session-Id: %s\r\n\r\n",
           sid);
  r = http_raw(t->port, req, NULL);
  assert_int_equal(status_of(r), 200);
  free(r);
  r = post_s(t->port, sid, "",
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL);
  assert_int_equal(status_of(r), 404);
  free(r);
  r = http_raw(t->port, req, NULL);
  assert_int_equal(status_of(r), 404);
  free(r);
}

static void test_sse_and_resume(void **state) {
  srv_thread *t = *state;
  const char *sid = new_session(t->port);
  char req[512], ev[64], *r;
  unsigned no = 0;
  /* A call that reports progress and stays open: SSE, priming first. */
  r = post_s(
      t->port, sid, "",
      "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":"
      "{\"name\":\"slow\",\"_meta\":{\"progressToken\":\"tk\"}}}",
      "\"half\"");
  assert_int_equal(status_of(r), 200);
  assert_non_null(strstr(r, "text/event-stream"));
  {
    const char *p = strstr(r, "\r\n\r\n");
    assert_non_null(p);
    p = strstr(p, "id: ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "id: %u-0\n", &no), 1);
    snprintf(ev, sizeof(ev), "id: %u-0\nretry: 1000\ndata: \n\n", no);
    assert_non_null(strstr(r, ev));
    snprintf(ev, sizeof(ev), "id: %u-1\ndata: {", no);
    assert_non_null(strstr(r, ev));
  }
  assert_non_null(strstr(r, "notifications/progress"));
  free(r); /* disconnect before the answer */
  r = post_s(
      t->port, sid, "",
      "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":"
      "{\"name\":\"finish\"}}",
      NULL);
  assert_int_equal(status_of(r), 200);
  free(r);
  /* Resume after event 1-1: only the answer (1-2), then the end. */
  snprintf(req, sizeof(req),
           "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
           "Accept: text/event-stream\r\nMCP-Session-Id: %s\r\n"
           "Last-Event-ID: %u-1\r\n\r\n",
           sid, no);
  r = http_raw(t->port, req, NULL);
  assert_int_equal(status_of(r), 200);
  snprintf(ev, sizeof(ev), "id: %u-2\ndata: {", no);
  assert_non_null(strstr(r, ev));
  assert_non_null(strstr(r, "slow done"));
  assert_null(strstr(r, "notifications/progress"));
  snprintf(ev, sizeof(ev), "id: %u-0", no);
  assert_null(strstr(r, ev));
  free(r);
  /* A malformed or unknown Last-Event-ID. */
  snprintf(req, sizeof(req),
           "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
           "Accept: text/event-stream\r\nMCP-Session-Id: %s\r\n"
           "Last-Event-ID: nonsense\r\n\r\n",
           sid);
  r = http_raw(t->port, req, NULL);
  assert_int_equal(status_of(r), 400);
  free(r);
  snprintf(req, sizeof(req),
           "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
           "Accept: text/event-stream\r\nMCP-Session-Id: %s\r\n"
           "Last-Event-ID: 77-0\r\n\r\n",
           sid);
  r = http_raw(t->port, req, NULL);
  assert_int_equal(status_of(r), 404);
  free(r);
}

/* acp_http_call_close_stream() then an immediate answer: the POST's
 * response ends after what came before the close (priming, progress); the
 * answer waits for the GET with Last-Event-ID. */
static void test_close_stream_holds_answer(void **state) {
  srv_thread *t = *state;
  const char *sid = new_session(t->port);
  char req[512], ev[64], *r;
  const char *p;
  unsigned no = 0;
  r = post_s(
      t->port, sid, "",
      "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":"
      "{\"name\":\"poll\",\"_meta\":{\"progressToken\":\"pt\"}}}",
      NULL); /* read until the server ends the response */
  assert_int_equal(status_of(r), 200);
  assert_non_null(strstr(r, "text/event-stream"));
  p = strstr(r, "\r\n\r\n");
  assert_non_null(p);
  p = strstr(p, "id: ");
  assert_non_null(p);
  assert_int_equal(sscanf(p, "id: %u-0\n", &no), 1);
  assert_non_null(strstr(r, "before close"));
  assert_null(strstr(r, "polled"));
  free(r);
  /* Reconnect after the progress event (1): the answer, then the end. */
  snprintf(req, sizeof(req),
           "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
           "Accept: text/event-stream\r\nMCP-Session-Id: %s\r\n"
           "Last-Event-ID: %u-1\r\n\r\n",
           sid, no);
  r = http_raw(t->port, req, NULL);
  assert_int_equal(status_of(r), 200);
  snprintf(ev, sizeof(ev), "id: %u-2\ndata: {", no);
  assert_non_null(strstr(r, ev));
  assert_non_null(strstr(r, "polled"));
  assert_null(strstr(r, "before close"));
  free(r);
}

static void test_legacy_raw(void **state) {
  srv_thread *t = *state;
  char *r = http_raw(t->port,
                     "GET /sse HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Accept: text/event-stream\r\n\r\n",
                     "sessionId=");
  assert_int_equal(status_of(r), 200);
  assert_non_null(strstr(r, "event: endpoint\ndata: /message?sessionId="));
  free(r);
  r = http_raw(t->port,
               "POST /message?sessionId=nope HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               "Connection: close\r\nContent-Type: application/json\r\n"
               "Content-Length: 2\r\n\r\n{}",
               NULL);
  assert_int_equal(status_of(r), 404);
  free(r);
}

/* MARK: - Our client against our server */

typedef struct cl {
  uv_loop_t loop;
  acp_mcp_client *c;
  acp_http_client *hc;
  int status;
  char text[256];
  int done;
  int want_get;                 /* call the tool once the GET stream is open */
  acp_http_get_state states[4]; /* GET states reported, in order */
  int nstates;
} cl;

static int on_call(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                   void *ud) {
  cl *x = ud;
  (void)c;
  x->status = status;
  if (status == 0) {
    size_t n;
    const char *raw = acp_json_raw(msg->result, &n);
    snprintf(x->text, sizeof(x->text), "%.*s", (int)n, raw);
  }
  x->done = 1;
  acp_http_client_close(x->hc, 1000, NULL, NULL);
  return 0;
}

static int on_init(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                   void *ud) {
  cl *x = ud;
  (void)msg;
  if (status != 0) {
    x->status = status;
    x->done = 1;
    acp_http_client_close(x->hc, 0, NULL, NULL);
    return 0;
  }
  if (x->want_get)
    return 0; /* on_get calls the tool */
  return acp_mcp_client_call_tool(c, "echo", "{\"message\":\"round trip\"}", 24,
                                  NULL, uv_now(&x->loop), on_call, x, NULL);
}

static void on_get(acp_http_client *hc, acp_http_get_state st, void *ud) {
  cl *x = ud;
  assert_ptr_equal(hc, x->hc);
  assert_int_equal(acp_http_client_get_state(hc), st);
  if (x->nstates < 4)
    x->states[x->nstates++] = st;
  if (st == ACP_HTTP_GET_OPEN)
    assert_int_equal(
        acp_mcp_client_call_tool(x->c, "echo", "{\"message\":\"round trip\"}",
                                 24, NULL, uv_now(&x->loop), on_call, x, NULL),
        0);
}

static void roundtrip(uint16_t port, const char *path, acp_http_transport mode,
                      acp_http_transport expect) {
  cl x;
  char url[128];
  memset(&x, 0, sizeof(x));
  x.status = -1;
  snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
  uv_loop_init(&x.loop);
  assert_int_equal(acp_mcp_client_new(&x.c, NULL, "t", "1", NULL, NULL), 0);
  assert_int_equal(
      acp_http_client_new(&x.hc, &x.loop, x.c, url, mode, NULL, NULL, NULL), 0);
  assert_int_equal(acp_mcp_client_initialize(x.c, uv_now(&x.loop), on_init, &x),
                   0);
  uv_run(&x.loop, UV_RUN_DEFAULT);
  assert_int_equal(x.done, 1);
  assert_int_equal(x.status, 0);
  assert_non_null(strstr(x.text, "round trip"));
  (void)expect;
  assert_int_equal(uv_loop_close(&x.loop), 0);
  acp_mcp_client_free(x.c);
}

/* The standalone GET stream reports OPEN through the callback (the tool is
 * called from there), and the state query agrees. */
static void test_client_get_stream(void **state) {
  srv_thread *t = *state;
  cl x;
  char url[128];
  memset(&x, 0, sizeof(x));
  x.status = -1;
  x.want_get = 1;
  snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", t->port);
  uv_loop_init(&x.loop);
  assert_int_equal(acp_mcp_client_new(&x.c, NULL, "t", "1", NULL, NULL), 0);
  assert_int_equal(acp_http_client_new(&x.hc, &x.loop, x.c, url,
                                       ACP_HTTP_STREAMABLE, NULL, NULL, NULL),
                   0);
  assert_int_equal(acp_http_client_get_state(x.hc), ACP_HTTP_GET_NONE);
  assert_int_equal(acp_http_client_get_state(NULL), ACP_HTTP_GET_NONE);
  acp_http_client_set_get_stream(x.hc, 1);
  acp_http_client_set_get_cb(x.hc, on_get, &x);
  assert_int_equal(acp_mcp_client_initialize(x.c, uv_now(&x.loop), on_init, &x),
                   0);
  uv_run(&x.loop, UV_RUN_DEFAULT);
  assert_int_equal(x.done, 1);
  assert_int_equal(x.status, 0);
  assert_non_null(strstr(x.text, "round trip"));
  /* Closing reports nothing more. */
  assert_int_equal(x.nstates, 1);
  assert_int_equal(x.states[0], ACP_HTTP_GET_OPEN);
  assert_int_equal(uv_loop_close(&x.loop), 0);
  acp_mcp_client_free(x.c);
}

static void test_client_streamable(void **state) {
  srv_thread *t = *state;
  size_t before = 0;
  roundtrip(t->port, "/mcp", ACP_HTTP_STREAMABLE, ACP_HTTP_STREAMABLE);
  (void)before;
}

static void test_client_legacy(void **state) {
  srv_thread *t = *state;
  roundtrip(t->port, "/sse", ACP_HTTP_LEGACY_SSE, ACP_HTTP_LEGACY_SSE);
}

static void test_client_fallback(void **state) {
  srv_thread *t = *state;
  /* POST /sse is 405: the client falls back to GET /sse. */
  roundtrip(t->port, "/sse", ACP_HTTP_AUTO, ACP_HTTP_LEGACY_SSE);
  roundtrip(t->port, "/mcp", ACP_HTTP_AUTO, ACP_HTTP_STREAMABLE);
}

static void test_client_bad_url(void **state) {
  uv_loop_t loop;
  acp_mcp_client *c = NULL;
  acp_http_client *hc = NULL;
  (void)state;
  uv_loop_init(&loop);
  assert_int_equal(acp_mcp_client_new(&c, NULL, "t", "1", NULL, NULL), 0);
  assert_int_equal(acp_http_client_new(&hc, &loop, c, "ftp://x/", ACP_HTTP_AUTO,
                                       NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(hc);
  acp_mcp_client_free(c);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* MARK: - Helpers */

static void test_origin_host_checks(void **state) {
  acp_http_server_options *o = NULL;
  char hex[33];
  (void)state;
  assert_int_equal(acp_http_server_options_new(&o, NULL), 0);
  assert_true(acp__http_origin_ok(o, NULL));
  assert_true(acp__http_origin_ok(o, "http://localhost:6274"));
  assert_true(acp__http_origin_ok(o, "https://127.0.0.1"));
  assert_true(acp__http_origin_ok(o, "http://[::1]:80"));
  assert_false(acp__http_origin_ok(o, "http://localhost.evil.com"));
  assert_false(acp__http_origin_ok(o, "http://evil.com"));
  assert_false(acp__http_origin_ok(o, "null"));
  assert_false(acp__http_origin_ok(o, "http://127.0.0.1.nip.io"));
  assert_int_equal(acp_http_server_options_add_origin(o, "https://app.example"),
                   0);
  assert_true(acp__http_origin_ok(o, "https://app.example"));
  assert_true(acp__http_host_ok(o, "localhost:1234"));
  assert_true(acp__http_host_ok(o, "[::1]:1234"));
  assert_false(acp__http_host_ok(o, "evil.com"));
  assert_false(acp__http_host_ok(o, "localhost.evil.com:80"));
  assert_int_equal(acp_http_server_options_add_host(o, "myhost"), 0);
  assert_true(acp__http_host_ok(o, "MyHost:80"));
  assert_int_equal(acp_http_server_options_set_address(o, "not-an-ip", 1),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_server_options_set_path(o, "nope"),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_http_server_options_free(o);
  assert_int_equal(acp__http_random_hex(hex, 16), 0);
  assert_int_equal(strlen(hex), 32);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_initialize_and_call, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
      cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sse_and_resume, setup, teardown),
      cmocka_unit_test_setup_teardown(test_close_stream_holds_answer, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_legacy_raw, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_streamable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_get_stream, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_legacy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_fallback, setup, teardown),
      cmocka_unit_test(test_client_bad_url),
      cmocka_unit_test(test_origin_host_checks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
