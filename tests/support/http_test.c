/*
 * Scaffolding shared by the HTTP tests (see http_test.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "http_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* MARK: - Server thread */

static void on_stop(uv_async_t *a) {
  ht_server *s = a->data;
  acp_http_server_close(s->srv, NULL, NULL);
  if (s->on_stop)
    s->on_stop(s);
  uv_close((uv_handle_t *)a, NULL);
}

static void *srv_main(void *arg) {
  ht_server *s = arg;
  int rv;
  uv_loop_init(&s->loop);
  rv = s->on_start(s);
  uv_async_init(&s->loop, &s->stop, on_stop);
  s->stop.data = s;
  pthread_mutex_lock(&s->mu);
  s->start_rv = rv;
  s->port = acp_http_server_port(s->srv);
  s->ready = 1;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  uv_run(&s->loop, UV_RUN_DEFAULT);
  s->close_rv = uv_loop_close(&s->loop);
  acp_mcp_server_free(s->reg);
  return NULL;
}

void ht_server_start(ht_server *s, ht_start_cb start, ht_stop_cb stop,
                     void *user_data) {
  s->on_start = start;
  s->on_stop = stop;
  s->user_data = user_data;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  pthread_create(&s->th, NULL, srv_main, s);
  pthread_mutex_lock(&s->mu);
  while (!s->ready)
    pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

void ht_server_stop(ht_server *s) {
  uv_async_send(&s->stop);
  pthread_join(s->th, NULL);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
}

int ht_setup(void **state, size_t size, ht_start_cb start) {
  ht_server *s = calloc(1, size);
  ht_server_start(s, start, NULL, s);
  *state = s;
  return 0;
}

int ht_teardown(void **state) {
  ht_server *s = *state;
  ht_server_stop(s);
  assert_int_equal(s->close_rv, 0);
  free(s);
  return 0;
}

int ht_add_tool(acp_mcp_server *reg, const char *name, const char *description,
                acp_mcp_tool_cb handler, void *user_data) {
  acp_mcp_tool_def d;
  memset(&d, 0, sizeof(d));
  d.version = ACP_MCP_DEF_VERSION;
  d.name = name;
  d.description = description;
  d.handler = handler;
  d.user_data = user_data;
  return acp_mcp_server_add_tool(reg, &d);
}

int ht_tool_echo(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  const char *s = "";
  size_t n = 0;
  (void)ud;
  acp_json_doc_str(acp_mcp_call_doc(call), acp_json_obj_getz(args, "message"),
                   &s, &n);
  return acp_mcp_call_respond_text(call, s, n, false);
}

/* MARK: - Raw HTTP over loopback */

const char ht_init_body[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
    "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{"
    "\"name\":\"t\",\"version\":\"1\"}}}";

int ht_connect(uint16_t port) {
  struct sockaddr_in a;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct timeval tv = {10, 0};
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

size_t ht_read_until(int fd, char *buf, size_t cap, size_t len,
                     const char *until, int *eof) {
  ssize_t n = 0;
  while (len + 1 < cap && (n = read(fd, buf + len, cap - len - 1)) > 0) {
    len += (size_t)n;
    buf[len] = 0;
    if (until && strstr(buf, until))
      break;
  }
  if (eof)
    *eof = n == 0;
  buf[len] = 0;
  return len;
}

char *ht_raw(uint16_t port, const char *req, const char *until) {
  size_t cap = 65536;
  char *buf = malloc(cap);
  int fd = ht_connect(port);
  assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
  ht_read_until(fd, buf, cap, 0, until, NULL);
  close(fd);
  return buf;
}

void ht_fmt_post(char *req, size_t cap, uint16_t port, const char *headers,
                 const char *body) {
  snprintf(req, cap,
           "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n"
           "Content-Type: application/json\r\n"
           "Accept: application/json, text/event-stream\r\n%s"
           "Content-Length: %zu\r\n\r\n%s",
           port, headers, strlen(body), body);
}

char *ht_post(uint16_t port, const char *headers, const char *body,
              const char *until) {
  char req[8192];
  ht_fmt_post(req, sizeof(req), port, headers, body);
  return ht_raw(port, req, until);
}

char *ht_post_s(uint16_t port, const char *sid, const char *extra,
                const char *body, const char *until) {
  char h[512];
  snprintf(h, sizeof(h), "MCP-Session-Id: %s\r\n%s", sid, extra);
  return ht_post(port, h, body, until);
}

void ht_fmt_request(char *req, size_t cap, const char *method, const char *sid,
                    const char *extra) {
  snprintf(req, cap,
           "%s /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
           "Accept: text/event-stream\r\nMCP-Session-Id: %s\r\n%s\r\n",
           method, sid, extra);
}

char *ht_request(uint16_t port, const char *method, const char *sid,
                 const char *extra, const char *until) {
  char req[1024];
  ht_fmt_request(req, sizeof(req), method, sid, extra);
  return ht_raw(port, req, until);
}

int ht_status_after(uint16_t port, const char *req, const char *until,
                    int status) {
  int i, got = 0;
  /* Up to 10 s: a bound on liveness, not a claim about speed. */
  for (i = 0; i < 200; i++) {
    char *r = ht_raw(port, req, until);
    got = ht_status(r);
    free(r);
    if (got != status)
      break;
    uv_sleep(50);
  }
  return got;
}

int ht_status(const char *resp) {
  int s = 0;
  sscanf(resp, "HTTP/1.1 %d", &s);
  return s;
}

const char *ht_session_id(const char *resp) {
  static char sid[64];
  const char *h = strstr(resp, "MCP-Session-Id: ");
  assert_non_null(h);
  assert_int_equal(sscanf(h + 16, "%63[0-9a-f]", sid), 1);
  assert_int_equal(strlen(sid), 32);
  return sid;
}

int ht_loopback_socket(uint16_t *port, int backlog) {
  struct sockaddr_in a;
  socklen_t al = sizeof(a);
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  assert_true(fd >= 0);
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  if (backlog > 0)
    assert_int_equal(listen(fd, backlog), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
  *port = ntohs(a.sin_port);
  return fd;
}

/* MARK: - Our MCP client over HTTP */

void ht_client_open(ht_client *x, uint16_t port, const char *path,
                    acp_http_transport mode) {
  char url[128];
  snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
  assert_int_equal(uv_loop_init(&x->loop), 0);
  assert_int_equal(acp_mcp_client_new(&x->c, NULL, "t", "1", NULL, NULL), 0);
  assert_int_equal(
      acp_http_client_new(&x->hc, &x->loop, x->c, url, mode, NULL, NULL, NULL),
      0);
}

void ht_client_run(ht_client *x, acp_mcp_result_cb on_init, void *user_data) {
  assert_int_equal(
      acp_mcp_client_initialize(x->c, uv_now(&x->loop), on_init, user_data), 0);
  uv_run(&x->loop, UV_RUN_DEFAULT);
}

void ht_client_close(ht_client *x) {
  assert_int_equal(uv_loop_close(&x->loop), 0);
  acp_mcp_client_free(x->c);
}
