/*
 * The HTTP client in raw mode (acp_http_client_new_raw/_send_raw) and
 * extra headers (acp_http_client_add_header): against our acp_http_server
 * on a loop in its own thread (Streamable HTTP, legacy HTTP+SSE, AUTO
 * fallback, Origin/Host checks), and against a tiny raw-socket server that
 * records the requests exactly as they arrived.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "acp/http.h"
#include "http_test.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* MARK: - Server thread */

static int srv_start(ht_server *s) {
  assert_int_equal(acp_mcp_server_new(&s->reg, "t", "1", NULL, NULL), 0);
  assert_int_equal(ht_add_tool(s->reg, "echo", "Echoes", ht_tool_echo, NULL),
                   0);
  assert_int_equal(acp_http_server_new(&s->srv, &s->loop, s->reg, NULL, NULL),
                   0);
  return 0;
}

static int setup(void **state) {
  return ht_setup(state, sizeof(ht_server), srv_start);
}

/* MARK: - A scripted raw client */

/* Send `send`; if `wait_id` > 0, wait for the answer with that id before
 * the next step. After the last step the client is closed. */
typedef struct step {
  const char *send;
  int wait_id;
} step;

#define MAX_MSGS 32

typedef struct rt {
  uv_loop_t loop;
  acp_http_client *hc;
  const step *steps;
  size_t nsteps, next;
  int waiting;
  acp_json_doc *doc;
  char *msgs[MAX_MSGS];
  size_t nmsgs;
  int ends, end_reason;
  int closed;
  acp_http_get_state get_states[4];
  int nget;
  bool want_get;    /* close only once the GET stream settled: */
  bool get_settled; /* answered (open or refused) */
  size_t want_msgs; /* close only once this many messages came */
} rt;

static void on_closed(acp_http_client *hc, void *ud) {
  rt *t = ud;
  (void)hc;
  t->closed++;
}

static void advance(rt *t) {
  while (t->waiting == 0 && t->next < t->nsteps) {
    const step *s = &t->steps[t->next++];
    assert_int_equal(acp_http_client_send_raw(t->hc, s->send, strlen(s->send)),
                     0);
    t->waiting = s->wait_id;
  }
  /* The GET stream opens concurrently with the POSTs: on a slow run
   * (valgrind) the last answer can come before it, so wait for it. */
  if (t->waiting == 0 && t->next == t->nsteps && t->hc &&
      (!t->want_get || t->get_settled) && t->nmsgs >= t->want_msgs) {
    acp_http_client_close(t->hc, 1000, on_closed, t);
    t->hc = NULL;
  }
}

static void on_msg(acp_http_client *hc, const char *msg, size_t len, void *ud) {
  rt *t = ud;
  int64_t id = 0;
  assert_ptr_equal(hc, t->hc);
  assert_null(memchr(msg, '\n', len));
  assert_true(t->nmsgs < MAX_MSGS);
  t->msgs[t->nmsgs] = malloc(len + 1);
  memcpy(t->msgs[t->nmsgs], msg, len);
  t->msgs[t->nmsgs++][len] = 0;
  assert_int_equal(acp_json_doc_parse(t->doc, msg, len, NULL), 0);
  if (acp_json_get_int64(acp_json_obj_getz(acp_json_doc_root(t->doc), "id"),
                         &id) == 0 &&
      t->waiting > 0 && id == t->waiting) {
    t->waiting = 0;
    advance(t);
  } else if (t->waiting == 0 && t->want_msgs > 0) {
    advance(t); /* perhaps the last one awaited */
  }
}

static void on_end(acp_http_client *hc, int reason, void *ud) {
  rt *t = ud;
  t->ends++;
  t->end_reason = reason;
  if (t->hc == hc) {
    acp_http_client_close(hc, 0, on_closed, t);
    t->hc = NULL;
  }
}

static void on_get(acp_http_client *hc, acp_http_get_state st, void *ud) {
  rt *t = ud;
  (void)hc;
  if (t->nget < 4)
    t->get_states[t->nget++] = st;
  if (st != ACP_HTTP_GET_OPENING && !t->get_settled) {
    t->get_settled = true;
    advance(t);
  }
}

static void rt_init(rt *t, uint16_t port, const char *path,
                    acp_http_transport mode) {
  char url[128];
  memset(t, 0, sizeof(*t));
  snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
  uv_loop_init(&t->loop);
  assert_int_equal(acp_json_doc_new(&t->doc, NULL), 0);
  assert_int_equal(acp_http_client_new_raw(&t->hc, &t->loop, url, mode, on_msg,
                                           on_end, t, NULL),
                   0);
  assert_non_null(t->hc);
}

static void rt_run(rt *t, const step *steps, size_t n) {
  t->steps = steps;
  t->nsteps = n;
  advance(t);
  uv_run(&t->loop, UV_RUN_DEFAULT);
  assert_int_equal(t->closed, 1);
  assert_int_equal(uv_loop_close(&t->loop), 0);
}

static void rt_dispose(rt *t) {
  size_t i;
  for (i = 0; i < t->nmsgs; i++)
    free(t->msgs[i]);
  acp_json_doc_free(t->doc);
}

/* The first message holding `sub`, or NULL. */
static const char *rt_find(const rt *t, const char *sub) {
  size_t i;
  for (i = 0; i < t->nmsgs; i++)
    if (strstr(t->msgs[i], sub))
      return t->msgs[i];
  return NULL;
}

#define INIT(ver)                                                              \
  "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"       \
  "\"protocolVersion\":\"" ver "\",\"capabilities\":{},\"clientInfo\":{"       \
  "\"name\":\"t\",\"version\":\"1\"}}}"
#define INITIALIZED                                                            \
  "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"
#define LIST "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}"
#define CALL                                                                   \
  "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{"       \
  "\"name\":\"echo\",\"arguments\":{\"message\":\"hi there\"}}}"

/* MARK: - Against acp_http_server */

/* initialize -> initialized -> tools/list -> tools/call, each waiting for
 * the previous answer; the GET stream opens after initialize. The call is
 * sent pretty-printed (line breaks between tokens) and newline-terminated. */
static void test_raw_streamable_sequence(void **state) {
  ht_server *t = *state;
  static const step steps[] = {
      {INIT("2025-11-25"), 1},
      {INITIALIZED, 0},
      {LIST, 2},
      {"{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 3,\r\n  \"method\": "
       "\"tools/call\",\n  \"params\": {\"name\": \"echo\", \"arguments\": "
       "{\"message\": \"hi there\"}}\n}\n",
       3}};
  rt x;
  rt_init(&x, t->port, "/mcp", ACP_HTTP_STREAMABLE);
  acp_http_client_set_get_stream(x.hc, 1);
  acp_http_client_set_get_cb(x.hc, on_get, &x);
  x.want_get = true;
  rt_run(&x, steps, 4);
  assert_int_equal(x.ends, 0);
  assert_int_equal(x.nmsgs, 3);
  assert_non_null(strstr(x.msgs[0], "\"protocolVersion\":\"2025-11-25\""));
  assert_non_null(strstr(x.msgs[1], "\"name\":\"echo\""));
  assert_non_null(strstr(x.msgs[2], "\"id\":3"));
  assert_non_null(strstr(x.msgs[2], "\"text\":\"hi there\""));
  assert_true(x.nget >= 1);
  assert_int_equal(x.get_states[0], ACP_HTTP_GET_OPEN);
  rt_dispose(&x);
}

/* Everything sent at once, before the loop runs: what follows initialize
 * waits for its answer (the session id), and in AUTO mode for the probe. */
static void test_raw_pipelined_auto(void **state) {
  ht_server *t = *state;
  static const step steps[] = {
      {INIT("2025-11-25"), 0}, {INITIALIZED, 0}, {LIST, 0}, {CALL, 3}};
  rt x;
  rt_init(&x, t->port, "/mcp", ACP_HTTP_AUTO);
  /* tools/list and tools/call go out together, on two requests: their
   * answers may come in either order (seen under valgrind), so the run
   * ends on all three answers, not on the call's. */
  x.want_msgs = 3;
  rt_run(&x, steps, 4);
  assert_int_equal(x.ends, 0);
  assert_int_equal(x.nmsgs, 3);
  assert_non_null(rt_find(&x, "\"protocolVersion\""));
  assert_non_null(rt_find(&x, "\"tools\":["));
  assert_non_null(rt_find(&x, "hi there"));
  rt_dispose(&x);
}

/* AUTO against the legacy endpoint: POST /sse is refused, the client falls
 * back to GET /sse and re-sends initialize, then the rest, in order. */
static void test_raw_auto_falls_back_to_legacy(void **state) {
  ht_server *t = *state;
  static const step steps[] = {
      {INIT("2024-11-05"), 0}, {INITIALIZED, 0}, {LIST, 2}, {CALL, 3}};
  rt x;
  rt_init(&x, t->port, "/sse", ACP_HTTP_AUTO);
  rt_run(&x, steps, 4);
  assert_int_equal(x.ends, 0);
  assert_int_equal(x.nmsgs, 3);
  assert_non_null(strstr(x.msgs[0], "\"id\":1"));
  assert_non_null(strstr(x.msgs[1], "\"name\":\"echo\""));
  assert_non_null(strstr(x.msgs[2], "hi there"));
  rt_dispose(&x);
}

/* Explicit legacy mode: headers may still be added after _new, because
 * the SSE GET starts on the loop. */
static void test_raw_legacy_with_header(void **state) {
  ht_server *t = *state;
  static const step steps[] = {
      {INIT("2024-11-05"), 1}, {INITIALIZED, 0}, {CALL, 3}};
  rt x;
  rt_init(&x, t->port, "/sse", ACP_HTTP_LEGACY_SSE);
  assert_int_equal(acp_http_client_add_header(x.hc, "X-Test", "1"), 0);
  rt_run(&x, steps, 3);
  assert_int_equal(x.ends, 0);
  assert_non_null(rt_find(&x, "hi there"));
  rt_dispose(&x);
}

/* A batch (2025-03-26) is one POST; its answers come one per callback. */
static void test_raw_batch(void **state) {
  ht_server *t = *state;
  static const step steps[] = {
      {INIT("2025-03-26"), 1},
      {INITIALIZED, 0},
      {"[{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"},"
       "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}]",
       8}};
  rt x;
  rt_init(&x, t->port, "/mcp", ACP_HTTP_STREAMABLE);
  rt_run(&x, steps, 3);
  assert_int_equal(x.nmsgs, 3);
  assert_true(strncmp(x.msgs[1], "{", 1) == 0);
  assert_non_null(rt_find(&x, "\"id\":7"));
  assert_non_null(rt_find(&x, "\"id\":8"));
  rt_dispose(&x);
}

/* A custom header reaches the server: a foreign Origin is refused (403),
 * reported as an error answer to initialize; a loopback one is accepted. */
static void test_raw_header_reaches_server(void **state) {
  ht_server *t = *state;
  static const step steps[] = {{INIT("2025-11-25"), 1}};
  rt x;
  rt_init(&x, t->port, "/mcp", ACP_HTTP_STREAMABLE);
  assert_int_equal(
      acp_http_client_add_header(x.hc, "Origin", "http://evil.example"), 0);
  rt_run(&x, steps, 1);
  assert_int_equal(x.nmsgs, 1);
  assert_non_null(strstr(x.msgs[0], "\"code\":-32000"));
  assert_non_null(strstr(x.msgs[0], "HTTP status 403"));
  rt_dispose(&x);

  rt_init(&x, t->port, "/mcp", ACP_HTTP_STREAMABLE);
  assert_int_equal(
      acp_http_client_add_header(x.hc, "Origin", "http://localhost:3000"), 0);
  rt_run(&x, steps, 1);
  assert_int_equal(x.nmsgs, 1);
  assert_non_null(strstr(x.msgs[0], "\"protocolVersion\""));
  rt_dispose(&x);
}

/* MARK: - Argument and state errors */

static void noop_msg(acp_http_client *hc, const char *msg, size_t len,
                     void *ud) {
  (void)hc;
  (void)msg;
  (void)len;
  (void)ud;
}

static void test_raw_argument_errors(void **state) {
  uv_loop_t loop;
  acp_http_client *hc = (acp_http_client *)&loop;
  acp_mcp_client *mc = NULL;
  (void)state;
  uv_loop_init(&loop);
  assert_int_equal(acp_http_client_new_raw(&hc, &loop, "http://127.0.0.1:1/",
                                           ACP_HTTP_AUTO, NULL, NULL, NULL,
                                           NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(hc);
  hc = (acp_http_client *)&loop;
  assert_int_equal(acp_http_client_new_raw(&hc, &loop, "ftp://x/",
                                           ACP_HTTP_AUTO, noop_msg, NULL, NULL,
                                           NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(hc);
  assert_int_equal(acp_http_client_new_raw(NULL, &loop, "http://x/",
                                           ACP_HTTP_AUTO, noop_msg, NULL, NULL,
                                           NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_new_raw(&hc, NULL, "http://x/",
                                           ACP_HTTP_AUTO, noop_msg, NULL, NULL,
                                           NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_new_raw(&hc, &loop, "http://x/",
                                           (acp_http_transport)9, noop_msg,
                                           NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_send_raw(NULL, "{}", 2),
                   ACP_ERR_INVALID_STATE);

  /* An MCP-mode client takes headers but no raw messages. */
  assert_int_equal(acp_mcp_client_new(&mc, NULL, "t", "1", NULL, NULL), 0);
  assert_int_equal(acp_http_client_new(&hc, &loop, mc, "http://127.0.0.1:1/",
                                       ACP_HTTP_AUTO, NULL, NULL, NULL),
                   0);
  assert_int_equal(acp_http_client_send_raw(hc, "{}", 2),
                   ACP_ERR_INVALID_STATE);
  assert_int_equal(acp_http_client_add_header(hc, "Authorization", "Bearer x"),
                   0);
  acp_http_client_close(hc, 0, NULL, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  acp_mcp_client_free(mc);

  assert_int_equal(acp_http_client_new_raw(&hc, &loop, "http://127.0.0.1:1/",
                                           ACP_HTTP_AUTO, noop_msg, NULL, NULL,
                                           NULL),
                   0);
  /* add_header */
  assert_int_equal(acp_http_client_add_header(NULL, "A", "b"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_add_header(hc, NULL, "b"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_add_header(hc, "A", NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_add_header(hc, "", "b"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_add_header(hc, "A:B", "b"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_add_header(hc, "A B", "b"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_add_header(hc, "A\r", "b"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_add_header(hc, "A\nX", "b"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_add_header(hc, "A", "b\r\nX-Evil: 1"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_add_header(hc, "A", "b\n"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_add_header(hc, "X-Ok", ""), 0);
  /* send_raw */
  assert_int_equal(acp_http_client_send_raw(hc, NULL, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_send_raw(hc, "", 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_send_raw(hc, " \n", 2),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_send_raw(hc, "42", 2),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_send_raw(hc, "\"s\"", 3),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_send_raw(hc, "{\"a\":", 5),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_client_send_raw(hc, "{} {}", 5),
                   ACP_ERR_INVALID_ARGUMENT);
  /* Queued only: headers may still be added until the loop sends it. */
  assert_int_equal(acp_http_client_send_raw(hc, INIT("2025-11-25"),
                                            strlen(INIT("2025-11-25"))),
                   0);
  assert_int_equal(acp_http_client_add_header(hc, "X-Late", "1"), 0);
  uv_run(&loop, UV_RUN_NOWAIT); /* the POST starts */
  assert_int_equal(acp_http_client_add_header(hc, "X-Later", "1"),
                   ACP_ERR_INVALID_STATE);
  acp_http_client_close(hc, 0, NULL, NULL);
  assert_int_equal(acp_http_client_send_raw(hc, "{}", 2),
                   ACP_ERR_INVALID_STATE);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* Nothing listening: end_cb with ACP_ERR_SYSTEM, then close works. */
static void test_raw_connection_refused(void **state) {
  static const step steps[] = {{INIT("2025-11-25"), 1}};
  uint16_t port;
  int fd = ht_loopback_socket(&port, 0);
  rt x;
  (void)state;
  close(fd); /* bound, never listened: the port is closed */
  rt_init(&x, port, "/mcp", ACP_HTTP_AUTO);
  rt_run(&x, steps, 1);
  assert_int_equal(x.ends, 1);
  assert_int_equal(x.end_reason, ACP_ERR_SYSTEM);
  assert_int_equal(x.nmsgs, 0);
  rt_dispose(&x);
}

/* MARK: - Against a recording raw-socket server */

#define REC_MAX 8

typedef struct rec_srv {
  pthread_t th;
  int lfd;
  uint16_t port;
  char *reqs[REC_MAX]; /* each request: headers and body */
  int nreqs;
} rec_srv;

static char *read_request(int fd) {
  size_t cap = 65536, len = 0, need = 0;
  char *buf = malloc(cap);
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    ssize_t n;
    char *end;
    if (poll(&p, 1, 10000) <= 0)
      break;
    n = read(fd, buf + len, cap - len - 1);
    if (n <= 0)
      break;
    len += (size_t)n;
    buf[len] = 0;
    end = strstr(buf, "\r\n\r\n");
    if (end && need == 0) {
      const char *cl = strstr(buf, "Content-Length: ");
      if (cl == NULL)
        cl = strstr(buf, "content-length: ");
      need = (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 16, NULL, 10) : 0);
    }
    if (need && len >= need)
      break;
  }
  buf[len] = 0;
  return buf;
}

static void respond(int fd, const char *status, const char *extra,
                    const char *body) {
  char out[2048];
  int n = snprintf(out, sizeof(out),
                   "HTTP/1.1 %s\r\n%sContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n%s",
                   status, extra, strlen(body), body);
  assert_int_equal(write(fd, out, (size_t)n), n);
}

static void *rec_main(void *arg) {
  rec_srv *s = arg;
  while (s->nreqs < REC_MAX) {
    struct pollfd p = {s->lfd, POLLIN, 0};
    int fd;
    char *r;
    if (poll(&p, 1, 10000) <= 0)
      break;
    fd = accept(s->lfd, NULL, NULL);
    if (fd < 0)
      break;
    r = read_request(fd);
    s->reqs[s->nreqs++] = r;
    if (strncmp(r, "DELETE ", 7) == 0) {
      respond(fd, "200 OK", "", "");
      close(fd);
      break;
    } else if (strstr(r, "\"initialize\""))
      respond(fd, "200 OK",
              "Content-Type: application/json\r\nMCP-Session-Id: s123\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":"
              "\"2025-06-18\",\"capabilities\":{},\"serverInfo\":{\"name\":"
              "\"rec\",\"version\":\"1\"}}}");
    else if (strstr(r, "\"id\":2"))
      respond(fd, "200 OK", "Content-Type: application/json\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[]}}");
    else
      respond(fd, "202 Accepted", "", "");
    close(fd);
  }
  return NULL;
}

static const char *rec_find(const rec_srv *s, const char *sub) {
  int i;
  for (i = 0; i < s->nreqs; i++)
    if (strstr(s->reqs[i], sub))
      return s->reqs[i];
  return NULL;
}

/* The wire: extra headers on every request (DELETE included), no
 * MCP-Protocol-Version before initialize was answered, the answer's
 * version (not the one asked for) and the session id after it. */
static void test_raw_headers_on_the_wire(void **state) {
  static const step steps[] = {
      {INIT("2025-11-25"), 1}, {INITIALIZED, 0}, {LIST, 2}};
  rec_srv s;
  const char *r;
  int i;
  rt x;
  (void)state;
  memset(&s, 0, sizeof(s));
  s.lfd = ht_loopback_socket(&s.port, 8);
  pthread_create(&s.th, NULL, rec_main, &s);

  rt_init(&x, s.port, "/mcp", ACP_HTTP_STREAMABLE);
  assert_int_equal(
      acp_http_client_add_header(x.hc, "Authorization", "Bearer T0k"), 0);
  assert_int_equal(acp_http_client_add_header(x.hc, "X-Empty", ""), 0);
  rt_run(&x, steps, 3);
  pthread_join(s.th, NULL);
  close(s.lfd);
  assert_int_equal(x.ends, 0);
  assert_int_equal(x.nmsgs, 2);
  assert_int_equal(s.nreqs, 4); /* initialize, initialized, list, DELETE */

  r = rec_find(&s, "\"initialize\"");
  assert_non_null(r);
  assert_null(strstr(r, "MCP-Protocol-Version"));
  assert_null(strstr(r, "MCP-Session-Id"));
  r = rec_find(&s, "tools/list");
  assert_non_null(r);
  assert_non_null(strstr(r, "\r\nMCP-Protocol-Version: 2025-06-18\r\n"));
  assert_non_null(strstr(r, "\r\nMCP-Session-Id: s123\r\n"));
  r = rec_find(&s, "notifications/initialized");
  assert_non_null(r);
  assert_non_null(strstr(r, "\r\nMCP-Protocol-Version: 2025-06-18\r\n"));
  r = rec_find(&s, "DELETE /mcp");
  assert_non_null(r);
  assert_non_null(strstr(r, "\r\nMCP-Session-Id: s123\r\n"));
  for (i = 0; i < s.nreqs; i++) {
    assert_non_null(strstr(s.reqs[i], "\r\nAuthorization: Bearer T0k\r\n"));
    assert_non_null(strstr(s.reqs[i], "\r\nX-Empty:"));
    free(s.reqs[i]);
  }
  rt_dispose(&x);
}

/* MARK: - 2026-07-28 on the wire */

/* Answers: id 7 with an SSE stream that ends before the response; id 8
 * with HTTP 400 and a JSON-RPC -32022 body; id 9 with a result and a
 * session id (which a 2026 client must not send back). */
static void *rec2026_main(void *arg) {
  rec_srv *s = arg;
  while (s->nreqs < REC_MAX) {
    struct pollfd p = {s->lfd, POLLIN, 0};
    int fd;
    char *r;
    if (poll(&p, 1, 10000) <= 0)
      break;
    fd = accept(s->lfd, NULL, NULL);
    if (fd < 0)
      break;
    r = read_request(fd);
    s->reqs[s->nreqs++] = r;
    if (strstr(r, "\"id\":7"))
      respond(fd, "200 OK", "Content-Type: text/event-stream\r\n",
              ": no answer follows\n\n");
    else if (strstr(r, "\"id\":8"))
      respond(fd, "400 Bad Request", "Content-Type: application/json\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":8,\"error\":{\"code\":-32022,"
              "\"message\":\"Unsupported protocol version\",\"data\":{"
              "\"supported\":[\"2026-07-28\"]}}}");
    else if (strstr(r, "\"id\":10"))
      respond(fd, "200 OK", "Content-Type: application/json\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":10,\"result\":{\"messages\":[]}}");
    else if (strstr(r, "\"id\":9"))
      respond(fd, "200 OK",
              "Content-Type: application/json\r\nMCP-Session-Id: nope\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"resultType\":"
              "\"complete\",\"tools\":[]}}");
    else
      respond(fd, "202 Accepted", "", "");
    close(fd);
    if (s->nreqs == 4)
      break;
  }
  return NULL;
}

#define META2026                                                               \
  "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","     \
  "\"io.modelcontextprotocol/clientCapabilities\":{}}"

/* 2026 requests (the version in _meta): MCP-Protocol-Version from _meta,
 * Mcp-Method, Mcp-Name (Base64 sentinel when not header-safe), never a
 * session id; an error body sent with HTTP 400 reaches the caller as it
 * is; a stream that ends before the answer fails the request at once; a
 * session id on an answer is ignored (no DELETE at close). */
static void test_raw_2026_on_the_wire(void **state) {
  static const step steps[] = {
      {"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/"
       "list\",\"params\":{" META2026 "}}",
       9},
      {"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{"
       "\"name\":\"w\u00e9 ther\",\"arguments\":{}," META2026 "}}",
       7},
      {"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"resources/read\","
       "\"params\":{\"uri\":\"file:///a b\"," META2026 "}}",
       8},
      {"{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"prompts/get\","
       "\"params\":{\"name\":\"\"," META2026 "}}",
       10}};
  rec_srv s;
  const char *r;
  int i;
  rt x;
  (void)state;
  memset(&s, 0, sizeof(s));
  s.lfd = ht_loopback_socket(&s.port, 8);
  pthread_create(&s.th, NULL, rec2026_main, &s);

  rt_init(&x, s.port, "/mcp", ACP_HTTP_STREAMABLE);
  rt_run(&x, steps, 4);
  pthread_join(s.th, NULL);
  close(s.lfd);
  assert_int_equal(x.ends, 0);
  assert_int_equal(s.nreqs, 4);

  r = rec_find(&s, "tools/list");
  assert_non_null(r);
  assert_non_null(strstr(r, "\r\nMcp-Method: tools/list\r\n"));
  assert_null(strstr(r, "Mcp-Name"));
  assert_non_null(strstr(r, "\r\nMCP-Protocol-Version: 2026-07-28\r\n"));
  r = rec_find(&s, "tools/call");
  assert_non_null(r);
  assert_non_null(strstr(r, "\r\nMcp-Method: tools/call\r\n"));
  assert_non_null(strstr(r, "\r\nMcp-Name: =?base64?d8OpIHRoZXI=?=\r\n"));
  r = rec_find(&s, "resources/read");
  assert_non_null(r);
  assert_non_null(strstr(r, "\r\nMcp-Name: file:///a b\r\n"));
  r = rec_find(&s, "prompts/get");
  assert_non_null(r);
  assert_non_null(strstr(r, "\r\nMcp-Name:\r\n")); /* empty, still sent */
  for (i = 0; i < s.nreqs; i++) {
    assert_null(strstr(s.reqs[i], "MCP-Session-Id"));
    free(s.reqs[i]);
  }
  assert_non_null(rt_find(&x, "\"id\":9,\"result\""));
  r = rt_find(&x, "\"id\":7,");
  assert_non_null(r);
  assert_non_null(strstr(r, "ended before the response"));
  r = rt_find(&x, "\"id\":8,");
  assert_non_null(r);
  assert_non_null(strstr(r, "-32022"));
  assert_non_null(strstr(r, "\"supported\":[\"2026-07-28\"]"));
  rt_dispose(&x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_raw_streamable_sequence, setup,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_raw_pipelined_auto, setup,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_raw_auto_falls_back_to_legacy, setup,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_raw_legacy_with_header, setup,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_raw_batch, setup, ht_teardown),
      cmocka_unit_test_setup_teardown(test_raw_header_reaches_server, setup,
                                      ht_teardown),
      cmocka_unit_test(test_raw_argument_errors),
      cmocka_unit_test(test_raw_connection_refused),
      cmocka_unit_test(test_raw_headers_on_the_wire),
      cmocka_unit_test(test_raw_2026_on_the_wire),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
