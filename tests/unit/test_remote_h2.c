/*
 * libacp-remote's HTTP/2 server connection (src/remote/h2.c) without I/O:
 * an nghttp2 client session in memory on the other side. Requests reach
 * the runtime's hook in the HTTP/1.1 shape the checks expect, answers and
 * SSE bodies reach the client, an SSE body is credited to its link only as
 * far as the client's flow-control window lets it go, a reset stream is
 * released, oversized heads and bodies are refused, and garbage gets a
 * GOAWAY. Out of memory, a request is refused (503) or its stream reset,
 * or the connection ends (GOAWAY, io.over): never a lost message.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "remote/h2_int.h"

/* MARK: - Harness */

typedef struct peer {
  /* server side */
  acp__h2 *h2;
  acp__buf to_client;
  bool full; /* the "socket" takes nothing */
  acp__hx *last;
  char method[16];
  char host[64];
  char clen[16];
  char body[256];
  int requests;
  int released;
  int released_stalled; /* releases with `stalled` */
  int waiting;          /* io.waiting calls */
  size_t credited;
  size_t released_credit;
  int over; /* io.over calls */
  bool write_fails;
  /* what the test wants done with a request */
  int answer; /* 202, 404, or 0: open an SSE stream */
  int open_rv;
  struct nfail *fail_open; /* fail this many allocations from open_sse */
  int fail_open_n;
  /* client side */
  nghttp2_session *cli;
  int status[16]; /* by stream id / 2 */
  size_t got[16];
  bool closed[16];
  uint32_t rst[16];
  bool goaway;
} peer;

/* An allocator (for the server side) that fails the next `n`
 * allocations, then none. */
typedef struct nfail {
  int n;
} nfail;
static void *nf_malloc(size_t n, void *ud) {
  nfail *f = ud;
  return f->n > 0 && f->n-- ? NULL : malloc(n);
}
static void nf_free(void *p, void *ud) {
  (void)ud;
  free(p);
}
static void *nf_calloc(size_t k, size_t n, void *ud) {
  nfail *f = ud;
  return f->n > 0 && f->n-- ? NULL : calloc(k, n);
}
static void *nf_realloc(void *p, size_t n, void *ud) {
  nfail *f = ud;
  return f->n > 0 && f->n-- ? NULL : realloc(p, n);
}

static int s_write(void *ud, const char *d, size_t n) {
  peer *p = ud;
  if (p->write_fails)
    return ACP_ERR_SYSTEM;
  return acp__buf_append(&p->to_client, d, n);
}

static bool s_writable(void *ud) {
  peer *p = ud;
  return !p->full;
}

static void copy_hdr(char *out, size_t cap, const acp__http_head *h,
                     const char *name) {
  const acp__http_header *x = acp__http_find(h, name);
  snprintf(out, cap, "%.*s", x ? (int)x->value_len : 0, x ? x->value : "");
}

static void s_request(void *ud, acp__hx *x, const acp__http_head *h, char *body,
                      size_t blen) {
  peer *p = ud;
  p->requests++;
  p->last = x;
  snprintf(p->method, sizeof(p->method), "%.*s", (int)h->method_len, h->method);
  copy_hdr(p->host, sizeof(p->host), h, "Host");
  copy_hdr(p->clen, sizeof(p->clen), h, "Content-Length");
  snprintf(p->body, sizeof(p->body), "%.*s", (int)blen, body);
  /* The spare byte after the body is ours to write (the runtime puts its
   * '\n' there), even for an empty body: ASan and valgrind check. */
  assert_non_null(body);
  body[blen] = '\n';
  if (p->answer == 0) {
    if (p->fail_open)
      p->fail_open->n = p->fail_open_n;
    p->open_rv = x->ops->open_sse(x);
    if (p->fail_open)
      p->fail_open->n = 0;
    return;
  }
  acp__hx_resp r = {p->answer, "no such thing", NULL, NULL, NULL, 0, NULL, 0};
  assert_int_equal(x->ops->respond(x, &r), 0);
}

static void s_release(void *ud, acp__hx *x, size_t credit, bool stalled) {
  peer *p = ud;
  (void)x;
  p->released++;
  p->released_credit += credit;
  if (stalled)
    p->released_stalled++;
}

static void s_credit(void *ud, acp__hx *x, size_t n) {
  peer *p = ud;
  (void)x;
  p->credited += n;
}

static void s_over(void *ud) {
  peer *p = ud;
  p->over++;
}

static void s_waiting(void *ud) {
  peer *p = ud;
  p->waiting++;
}

static const acp__h2_io io = {s_write,  s_writable, s_request, s_release,
                              s_credit, s_over,     s_waiting};

static int c_on_header(nghttp2_session *s, const nghttp2_frame *f,
                       const uint8_t *name, size_t nl, const uint8_t *value,
                       size_t vl, uint8_t flags, void *ud) {
  peer *p = ud;
  (void)s;
  (void)flags;
  if (nl == 7 && memcmp(name, ":status", 7) == 0 && f->hd.stream_id < 32)
    p->status[f->hd.stream_id / 2] = atoi((const char *)value);
  (void)vl;
  return 0;
}

static int c_on_data(nghttp2_session *s, uint8_t flags, int32_t id,
                     const uint8_t *data, size_t len, void *ud) {
  peer *p = ud;
  (void)s;
  (void)flags;
  (void)data;
  if (id < 32)
    p->got[id / 2] += len;
  return 0;
}

static int c_on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud) {
  peer *p = ud;
  (void)s;
  if (id < 32) {
    p->closed[id / 2] = true;
    p->rst[id / 2] = code;
  }
  return 0;
}

static int c_on_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
  peer *p = ud;
  (void)s;
  if (f->hd.type == NGHTTP2_GOAWAY)
    p->goaway = true;
  return 0;
}

/* Move bytes both ways until neither side has more. */
static void pump(peer *p) {
  for (int round = 0; round < 64; round++) {
    bool moved = false;
    const uint8_t *out;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(p->cli, &out)) > 0) {
      moved = true;
      if (p->h2)
        (void)acp__h2_recv(p->h2, (const char *)out, (size_t)n);
    }
    if (p->to_client.len > 0) {
      moved = true;
      acp__buf b = p->to_client;
      acp__buf_init(&p->to_client, acp_mem_default(), 0);
      assert_true(nghttp2_session_mem_recv(p->cli, (const uint8_t *)b.data,
                                           b.len) == (ssize_t)b.len);
      acp__buf_dispose(&b);
    }
    if (!moved)
      return;
  }
  fail_msg("the sessions never settled");
}

static void peer_init_mem(peer *p, bool auto_window, size_t max_body,
                          const acp_mem *mem) {
  nghttp2_session_callbacks *cbs;
  nghttp2_option *opt;
  memset(p, 0, sizeof(*p));
  acp__buf_init(&p->to_client, acp_mem_default(), 0);
  assert_int_equal(acp__h2_new(&p->h2, &io, p, max_body, mem), 0);
  assert_int_equal(nghttp2_session_callbacks_new(&cbs), 0);
  nghttp2_session_callbacks_set_on_header_callback(cbs, c_on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, c_on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, c_on_close);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, c_on_frame);
  assert_int_equal(nghttp2_option_new(&opt), 0);
  nghttp2_option_set_no_auto_window_update(opt, !auto_window);
  assert_int_equal(nghttp2_session_client_new2(&p->cli, cbs, p, opt), 0);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  assert_int_equal(nghttp2_submit_settings(p->cli, NGHTTP2_FLAG_NONE, NULL, 0),
                   0);
  pump(p);
}

static void peer_init(peer *p, bool auto_window, size_t max_body) {
  peer_init_mem(p, auto_window, max_body, NULL);
}

static void peer_dispose(peer *p) {
  acp__h2_free(p->h2);
  nghttp2_session_del(p->cli);
  acp__buf_dispose(&p->to_client);
}

#define NV(n, v)                                                               \
  {                                                                            \
    (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1,              \
        NGHTTP2_NV_FLAG_NONE                                                   \
  }

typedef struct src {
  const char *p;
  size_t n;
  bool later; /* the body waits for nghttp2_session_resume_data() */
} src;

static ssize_t c_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                      uint32_t *flags, nghttp2_data_source *ds, void *ud) {
  src *b = ds->ptr;
  (void)s;
  (void)id;
  (void)ud;
  if (b->later)
    return NGHTTP2_ERR_DEFERRED;
  size_t n = b->n < len ? b->n : len;
  memcpy(buf, b->p, n);
  b->p += n;
  b->n -= n;
  if (b->n == 0)
    *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

static int32_t post(peer *p, src *body) {
  nghttp2_nv nv[] = {NV(":method", "POST"), NV(":scheme", "http"),
                     NV(":authority", "127.0.0.1:9"), NV(":path", "/acp"),
                     NV("content-type", "application/json")};
  nghttp2_data_provider dp = {{.ptr = body}, c_read};
  int32_t id = nghttp2_submit_request(p->cli, NULL, nv, 5, &dp, NULL);
  assert_true(id > 0 && id < 32);
  pump(p);
  return id;
}

static int32_t get_sse(peer *p) {
  nghttp2_nv nv[] = {NV(":method", "GET"), NV(":scheme", "http"),
                     NV(":authority", "127.0.0.1:9"), NV(":path", "/acp"),
                     NV("accept", "text/event-stream")};
  int32_t id = nghttp2_submit_request(p->cli, NULL, nv, 5, NULL, NULL);
  assert_true(id > 0 && id < 32);
  pump(p);
  return id;
}

/* MARK: - Tests */

static void test_preface_is_detected(void **state) {
  (void)state;
  assert_int_equal(acp__h2_preface("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24), 1);
  assert_int_equal(acp__h2_preface("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nxyz", 27),
                   1);
  assert_int_equal(acp__h2_preface("PRI * HT", 8), -1);
  assert_int_equal(acp__h2_preface("", 0), -1);
  assert_int_equal(acp__h2_preface("POST /acp HTTP/1.1\r\n", 20), 0);
  assert_int_equal(acp__h2_preface("PRI * HTTP/1.1\r\n\r\n", 18), 0);
}

static void test_post_reaches_the_runtime_in_http1_shape(void **state) {
  peer p;
  (void)state;
  peer_init(&p, true, 1024);
  p.answer = 202;
  src b = {"{\"jsonrpc\":\"2.0\"}", 17, false};
  int32_t id = post(&p, &b);
  assert_int_equal(p.requests, 1);
  assert_string_equal(p.method, "POST");
  assert_string_equal(p.host, "127.0.0.1:9"); /* :authority */
  assert_string_equal(p.clen, "17");          /* from the DATA */
  assert_string_equal(p.body, "{\"jsonrpc\":\"2.0\"}");
  assert_int_equal(p.status[id / 2], 202);
  assert_true(p.closed[id / 2]);
  assert_int_equal(p.released, 1);
  p.answer = 404;
  b = (src){"{}", 2, false};
  id = post(&p, &b);
  assert_int_equal(p.status[id / 2], 404);
  assert_int_equal(p.got[id / 2], strlen("no such thing\n"));
  peer_dispose(&p);
}

static void test_sse_body_is_credited_within_the_window(void **state) {
  peer p;
  static char chunk[16384];
  (void)state;
  memset(chunk, 'x', sizeof(chunk));
  peer_init(&p, false, 1024); /* the client grants no window by itself */
  p.answer = 0;
  int32_t id = get_sse(&p);
  assert_int_equal(p.status[id / 2], 200);
  uv_buf_t buf = uv_buf_init(chunk, sizeof(chunk));
  for (int i = 0; i < 8; i++) /* 128 KiB against a 64 KiB window */
    assert_int_equal(p.last->ops->send(p.last, &buf, 1, sizeof(chunk)), 0);
  pump(&p);
  assert_true(p.got[id / 2] <= 65535);
  assert_true(p.credited <= 65535 && p.credited >= 3 * sizeof(chunk));
  /* The client reads: the window opens and the rest follows. */
  assert_int_equal(nghttp2_session_consume(p.cli, id, p.got[id / 2]), 0);
  pump(&p);
  for (int k = 0; k < 4 && p.credited < 8 * sizeof(chunk); k++) {
    assert_int_equal(nghttp2_session_consume(p.cli, id, 65535), 0);
    pump(&p);
  }
  assert_int_equal(p.credited, 8 * sizeof(chunk));
  assert_int_equal(p.got[id / 2], 8 * sizeof(chunk));
  /* A socket that takes nothing holds everything back, uncredited. */
  p.full = true;
  assert_int_equal(p.last->ops->send(p.last, &buf, 1, 5), 0);
  pump(&p);
  assert_int_equal(p.credited, 8 * sizeof(chunk));
  p.full = false;
  acp__h2_flush(p.h2);
  assert_int_equal(p.credited, 8 * sizeof(chunk) + 5);
  /* The client resets the stream: it is released once. */
  assert_int_equal(
      nghttp2_submit_rst_stream(p.cli, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL),
      0);
  pump(&p);
  assert_int_equal(p.released, 1);
  peer_dispose(&p);
}

static void test_open_sse_stream_is_released_with_the_connection(void **st) {
  peer p;
  (void)st;
  peer_init(&p, true, 1024);
  p.answer = 0;
  get_sse(&p);
  static char ev[] = "data: {}\n\n";
  uv_buf_t b = uv_buf_init(ev, 10);
  p.full = true;
  assert_int_equal(p.last->ops->send(p.last, &b, 1, 9), 0);
  acp__h2 *h = p.h2;
  p.h2 = NULL;
  acp__h2_free(h);
  assert_int_equal(p.released, 1);
  assert_int_equal(p.released_credit, 9); /* unsent: reported at release */
  peer_dispose(&p);
}

static void test_oversized_head_and_body_are_refused(void **state) {
  peer p;
  static char pad[2000];
  (void)state;
  memset(pad, 'v', sizeof(pad));
  peer_init(&p, true, 1024);
  p.answer = 202;
  nghttp2_nv nv[12];
  size_t k = 0;
  nv[k++] = (nghttp2_nv)NV(":method", "POST");
  nv[k++] = (nghttp2_nv)NV(":scheme", "http");
  nv[k++] = (nghttp2_nv)NV(":authority", "127.0.0.1:9");
  nv[k++] = (nghttp2_nv)NV(":path", "/acp");
  for (int i = 0; i < 5; i++)
    nv[k++] = (nghttp2_nv){(uint8_t *)"x-pad", (uint8_t *)pad, 5, sizeof(pad),
                           NGHTTP2_NV_FLAG_NONE};
  int32_t id = nghttp2_submit_request(p.cli, NULL, nv, k, NULL, NULL);
  pump(&p);
  assert_int_equal(p.status[id / 2], 431);
  assert_int_equal(p.requests, 0);
  static char big[3000];
  memset(big, ' ', sizeof(big));
  src b = {big, sizeof(big), false};
  id = post(&p, &b);
  assert_int_equal(p.status[id / 2], 413);
  assert_int_equal(p.requests, 0);
  /* The connection goes on. */
  b = (src){"{}", 2, false};
  id = post(&p, &b);
  assert_int_equal(p.status[id / 2], 202);
  assert_int_equal(p.requests, 1);
  peer_dispose(&p);
}

static void test_garbage_gets_goaway(void **state) {
  peer p;
  (void)state;
  peer_init(&p, true, 1024);
  /* A DATA frame on stream 0 is a connection error. */
  static const char bad[] = {0, 0, 1, 0, 0, 0, 0, 0, 0, 'x'};
  (void)acp__h2_recv(p.h2, bad, sizeof(bad));
  assert_true(p.to_client.len > 0);
  pump(&p);
  assert_true(p.goaway);
  assert_true(acp__h2_done(p.h2));
  peer_dispose(&p);
}

static void test_goaway_lets_open_streams_finish(void **state) {
  peer p;
  (void)state;
  peer_init(&p, true, 1024);
  p.answer = 0;
  int32_t id = get_sse(&p);
  acp__h2_goaway(p.h2);
  pump(&p);
  assert_true(p.goaway);
  assert_false(acp__h2_done(p.h2));
  p.last->ops->finish(p.last);
  pump(&p);
  assert_true(p.closed[id / 2]);
  assert_true(acp__h2_done(p.h2));
  peer_dispose(&p);
}

/* A body chunk the server cannot keep: before, nghttp2 dropped the chunk
 * (a non-fatal error from the data callback is ignored) and the rest was
 * dispatched as the whole body, answered 202: a lost message. Now the
 * request is refused 503 and never reaches the runtime. */
static void test_body_that_cannot_be_kept_is_refused(void **state) {
  peer p;
  nfail f = {0};
  acp_mem m = {&f, nf_malloc, nf_free, nf_calloc, nf_realloc};
  (void)state;
  peer_init_mem(&p, true, 1024, &m);
  p.answer = 202;
  src b = {"{\"jsonrpc\":\"2.0\"}", 17, true};
  int32_t id = post(&p, &b); /* the head only: the body is deferred */
  assert_int_equal(p.requests, 0);
  f.n = 1; /* the body's buffer */
  b.later = false;
  assert_int_equal(nghttp2_session_resume_data(p.cli, id), 0);
  pump(&p);
  assert_int_equal(f.n, 0);
  assert_int_equal(p.requests, 0);
  assert_int_equal(p.status[id / 2], 503);
  assert_true(p.closed[id / 2]);
  /* The connection goes on. */
  b = (src){"{}", 2, false};
  id = post(&p, &b);
  assert_int_equal(p.status[id / 2], 202);
  assert_int_equal(p.requests, 1);
  assert_string_equal(p.body, "{}");
  peer_dispose(&p);
}

/* An SSE answer that cannot be queued: open_sse says so (the runtime then
 * does not route messages into it) and the client sees its stream reset;
 * if even the reset cannot be queued, the connection ends (GOAWAY) and the
 * runtime is told. */
static void test_sse_that_cannot_be_opened_is_reset(void **state) {
  peer p;
  nfail f = {0};
  acp_mem m = {&f, nf_malloc, nf_free, nf_calloc, nf_realloc};
  (void)state;
  peer_init_mem(&p, true, 1024, &m);
  p.answer = 0;
  p.fail_open = &f;
  p.fail_open_n = 1; /* the response */
  int32_t id = get_sse(&p);
  assert_int_not_equal(p.open_rv, 0);
  assert_int_equal(p.status[id / 2], 0); /* no head */
  assert_true(p.closed[id / 2]);
  assert_int_equal(p.rst[id / 2], NGHTTP2_INTERNAL_ERROR);
  assert_int_equal(p.released, 1);
  assert_int_equal(p.over, 0);
  p.fail_open_n = 0; /* the next one opens */
  id = get_sse(&p);
  assert_int_equal(p.open_rv, 0);
  assert_int_equal(p.status[id / 2], 200);
  p.fail_open_n = 2; /* the response and the reset */
  id = get_sse(&p);
  assert_int_not_equal(p.open_rv, 0);
  assert_true(p.goaway);
  assert_true(acp__h2_done(p.h2));
  assert_int_equal(p.over, 1);
  peer_dispose(&p);
}

/* The connection breaks while the agent's side writes (outside any call
 * of the runtime into h2.c): the runtime is told to finish it. Before, it
 * only looked after its own reads and writes, and the socket stayed open
 * with its client waiting. */
static void test_break_outside_a_read_is_reported(void **state) {
  peer p;
  (void)state;
  peer_init(&p, true, 1024);
  p.answer = 0;
  get_sse(&p);
  assert_int_equal(p.over, 0);
  static char ev[] = "data: {}\n\n";
  uv_buf_t b = uv_buf_init(ev, 10);
  p.write_fails = true;
  assert_int_equal(p.last->ops->send(p.last, &b, 1, 9), 0);
  assert_true(acp__h2_done(p.h2));
  assert_int_equal(p.over, 1);
  peer_dispose(&p);
}

/* MARK: - Stalls */

#define STALL_MS 300u

/* An SSE stream whose client reads the socket but never gives it window
 * (issue 14): its output waits in h2.c, the runtime is told to look
 * (io.waiting), and once the clock has moved STALL_MS with nothing taken
 * the stream is reset (RST_STREAM CANCEL) and released as stalled, with
 * the link bytes it still held. The connection goes on: a POST after it
 * is answered. Before the rule, nothing ever let go of the stream. */
static void test_stream_without_window_is_reset_after_the_stall(void **st) {
  peer p;
  static char chunk[16384];
  (void)st;
  memset(chunk, 'x', sizeof(chunk));
  peer_init(&p, false, 1024); /* the client grants no window by itself */
  p.answer = 0;
  int32_t id = get_sse(&p);
  assert_int_equal(p.status[id / 2], 200);
  uv_buf_t buf = uv_buf_init(chunk, sizeof(chunk));
  for (int i = 0; i < 8; i++) /* 128 KiB against a 64 KiB window */
    assert_int_equal(p.last->ops->send(p.last, &buf, 1, sizeof(chunk)), 0);
  pump(&p);
  assert_true(p.waiting > 0);
  assert_true(acp__h2_waiting(p.h2));
  /* The first look starts the count; none of it is enough to cut. */
  assert_true(acp__h2_stall_check(p.h2, 1000, STALL_MS));
  assert_true(acp__h2_stall_check(p.h2, 1000 + STALL_MS - 1, STALL_MS));
  pump(&p);
  assert_false(p.closed[id / 2]);
  assert_int_equal(p.released, 0);
  /* STALL_MS without a byte taken: reset. */
  assert_false(acp__h2_stall_check(p.h2, 1000 + STALL_MS, STALL_MS));
  pump(&p);
  assert_true(p.closed[id / 2]);
  assert_int_equal(p.rst[id / 2], NGHTTP2_CANCEL);
  assert_int_equal(p.released, 1);
  assert_int_equal(p.released_stalled, 1);
  /* every link byte accounted: written or handed back at the release */
  assert_int_equal(p.credited + p.released_credit, 8 * sizeof(chunk));
  assert_false(acp__h2_waiting(p.h2));
  assert_false(acp__h2_done(p.h2));
  /* The connection and its other streams go on. */
  p.answer = 202;
  src b = {"{}", 2, false};
  int32_t id2 = post(&p, &b);
  assert_int_equal(p.status[id2 / 2], 202);
  assert_int_equal(p.released_stalled, 1);
  peer_dispose(&p);
}

/* The counter-case: a window granted a little at a time, for longer in
 * all than STALL_MS, is progress; so is time spent behind a full socket
 * (the socket's own stall rule is the runtime's). Never reset, and every
 * byte arrives. */
static void test_stream_granted_window_slowly_is_not_reset(void **state) {
  peer p;
  static char chunk[16384];
  (void)state;
  memset(chunk, 'x', sizeof(chunk));
  peer_init(&p, false, 1024);
  p.answer = 0;
  int32_t id = get_sse(&p);
  uv_buf_t buf = uv_buf_init(chunk, sizeof(chunk));
  for (int i = 0; i < 16; i++) /* 256 KiB against a 64 KiB window */
    assert_int_equal(p.last->ops->send(p.last, &buf, 1, sizeof(chunk)), 0);
  pump(&p);
  uint64_t now = 1000;
  size_t seen = 0; /* consumed (given back) so far */
  unsigned steps = 0;
  while (p.got[id / 2] < 16 * sizeof(chunk)) {
    assert_true(acp__h2_stall_check(p.h2, now, STALL_MS));
    now += STALL_MS / 10;
    /* 4 KiB of window per look; nghttp2 sends WINDOW_UPDATE once half
     * the window (32 KiB) is consumed: progress every 8 looks, 240 ms */
    size_t take = p.got[id / 2] - seen < 4096 ? p.got[id / 2] - seen : 4096;
    assert_int_equal(nghttp2_session_consume(p.cli, id, take), 0);
    seen += take;
    pump(&p);
    steps++;
    assert_true(steps < 1000);
  }
  assert_true(now - 1000 > 4 * STALL_MS); /* it took many stall times */
  assert_false(p.closed[id / 2]);
  assert_int_equal(p.released, 0);
  assert_int_equal(p.credited, 16 * sizeof(chunk));
  /* A full socket: time does not count against the stream. */
  p.full = true;
  assert_int_equal(p.last->ops->send(p.last, &buf, 1, 7), 0);
  pump(&p);
  assert_true(acp__h2_stall_check(p.h2, now, STALL_MS));
  assert_true(acp__h2_stall_check(p.h2, now + 10 * STALL_MS, STALL_MS));
  assert_true(acp__h2_stall_check(p.h2, now + 20 * STALL_MS, STALL_MS));
  pump(&p);
  assert_false(p.closed[id / 2]);
  assert_int_equal(p.released, 0);
  peer_dispose(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_preface_is_detected),
      cmocka_unit_test(test_post_reaches_the_runtime_in_http1_shape),
      cmocka_unit_test(test_sse_body_is_credited_within_the_window),
      cmocka_unit_test(test_open_sse_stream_is_released_with_the_connection),
      cmocka_unit_test(test_oversized_head_and_body_are_refused),
      cmocka_unit_test(test_garbage_gets_goaway),
      cmocka_unit_test(test_goaway_lets_open_streams_finish),
      cmocka_unit_test(test_body_that_cannot_be_kept_is_refused),
      cmocka_unit_test(test_sse_that_cannot_be_opened_is_reset),
      cmocka_unit_test(test_break_outside_a_read_is_reported),
      cmocka_unit_test(test_stream_without_window_is_reset_after_the_stall),
      cmocka_unit_test(test_stream_granted_window_slowly_is_not_reset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
