/*
 * Fuzz target: the HTTP/2 server side of libacp-remote (src/remote/h2.c
 * over nghttp2): the client preface, then the input as the client's
 * frames, fed in pieces; what the server writes is discarded.
 *
 * Byte 0: bits 0-5 the piece size (1..64); bit 6: the socket is "full"
 * every other flush (output waits, as under backpressure); bit 7: a
 * GOAWAY before the end. Requests are answered by a stub in the shape of
 * the runtime's (remote_uv.c): GET opens an SSE response and sends an
 * event, DELETE ends it, POST gets 200 with its body or 202, anything else
 * 404. Each stream is handed out once, and every one handed out must be
 * released by the time the connection is freed.
 */
#include <stdlib.h>
#include <string.h>

#include "remote/h2_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_X 256

typedef struct fz {
  acp__hx *live[MAX_X];
  size_t nlive;
  acp__hx *sse; /* the last SSE exchange still open */
  bool full;
  bool toggle;
  size_t written;
} fz;

static int fz_write(void *ud, const char *d, size_t n) {
  fz *f = ud;
  (void)d;
  f->written += n;
  return 0;
}

static bool fz_writable(void *ud) {
  fz *f = ud;
  if (!f->full)
    return true;
  f->toggle = !f->toggle;
  return f->toggle;
}

static void forget(fz *f, acp__hx *x) {
  for (size_t i = 0; i < f->nlive; i++)
    if (f->live[i] == x) {
      f->live[i] = f->live[--f->nlive];
      if (f->sse == x)
        f->sse = NULL;
      return;
    }
  /* A stream whose request never completed was not handed out. */
}

static void fz_request(void *ud, acp__hx *x, const acp__http_head *h,
                       char *body, size_t blen) {
  fz *f = ud;
  acp__hx_resp r;
  memset(&r, 0, sizeof(r));
  for (size_t i = 0; i < f->nlive; i++)
    if (f->live[i] == x)
      abort(); /* one request per stream */
  if (f->nlive == MAX_X)
    abort(); /* more than the streams the server allows */
  f->live[f->nlive++] = x;
  if (h->method_len == 3 && memcmp(h->method, "GET", 3) == 0) {
    static char ev[] = "data: {}\n\n";
    uv_buf_t b = uv_buf_init(ev, sizeof(ev) - 1);
    if (x->ops->open_sse(x) != 0)
      return; /* reset: not ours to send into */
    (void)x->ops->send(x, &b, 1, 7);
    f->sse = x;
    return;
  }
  if (h->method_len == 6 && memcmp(h->method, "DELETE", 6) == 0) {
    r.status = 202;
    x->ops->respond(x, &r);
    if (f->sse) {
      acp__hx *s = f->sse;
      f->sse = NULL;
      s->ops->finish(s);
    }
    return;
  }
  if (h->method_len == 4 && memcmp(h->method, "POST", 4) == 0) {
    r.status = blen % 2 ? 202 : 200;
    r.conn_id = "00000000-0000-4000-8000-000000000000";
    r.p1 = body;
    r.n1 = blen;
    x->ops->respond(x, &r);
    return;
  }
  r.status = 404;
  r.detail = "not found";
  x->ops->respond(x, &r);
}

static void fz_release(void *ud, acp__hx *x, size_t credit, bool stalled) {
  (void)credit;
  (void)stalled;
  forget(ud, x);
}

static void fz_credit(void *ud, acp__hx *x, size_t n) {
  (void)ud;
  (void)x;
  (void)n;
}

static void fz_over(void *ud) {
  (void)ud; /* the loop below ends on acp__h2_done() */
}

static void fz_waiting(void *ud) {
  (void)ud; /* the loop below looks at every piece (acp__h2_stall_check) */
}

static const acp__h2_io fz_io = {fz_write,  fz_writable, fz_request, fz_release,
                                 fz_credit, fz_over,     fz_waiting};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  fz f;
  acp__h2 *h;
  if (size < 1)
    return 0;
  memset(&f, 0, sizeof(f));
  size_t piece = (size_t)(data[0] & 63) + 1;
  f.full = (data[0] & 64) != 0;
  bool goaway = (data[0] & 128) != 0;
  data++;
  size--;
  if (acp__h2_preface(preface, 24) != 1 || acp__h2_preface(preface, 5) != -1 ||
      acp__h2_preface("GET / HTTP/1.1\r\n", 16) != 0)
    abort();
  if (acp__h2_new(&h, &fz_io, &f, 4096, NULL) != 0)
    return 0;
  int rv = acp__h2_recv(h, preface, 24);
  for (size_t off = 0; rv == 0 && off < size; off += piece) {
    size_t n = size - off < piece ? size - off : piece;
    rv = acp__h2_recv(h, (const char *)data + off, n);
    if (rv == 0 && acp__h2_done(h))
      break;
    /* The stall rule on a made-up clock: 8 ms a piece, stall_ms 20, so a
     * stream the input gives no window is reset within a few pieces. */
    if (rv == 0)
      (void)acp__h2_stall_check(h, 1000 + 8 * (uint64_t)(off / piece), 20);
  }
  if (rv == 0) {
    acp__h2_keepalive(h);
    f.full = false;
    acp__h2_flush(h);
    if (goaway)
      acp__h2_goaway(h);
    (void)acp__h2_done(h);
  }
  acp__h2_free(h);
  if (f.nlive != 0)
    abort(); /* a stream outlived its connection */
  return 0;
}
