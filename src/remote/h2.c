/*
 * HTTP/2 server connections for the Streamable HTTP profile: an nghttp2
 * server session fed with nghttp2_session_mem_recv() and drained with
 * nghttp2_session_mem_send(); the runtime owns the socket (h2_int.h).
 *
 * Each stream is an exchange (acp__hx): its request head is rebuilt in the
 * HTTP/1.1 shape of ws_int.h so that the very checks of the HTTP/1.1
 * server apply (path, Host from :authority, Origin, token, then
 * acp__http_check_acp), and its response goes out as HEADERS and DATA.
 *
 * Backpressure: what an ACP connection sends on its SSE stream waits in
 * the stream's buffer until nghttp2 takes it, which it does only inside
 * the stream's flow-control window and only while the socket's queue has
 * room; the link is credited when nghttp2 takes the bytes. A reader that
 * stops reading (TCP) or stops granting window (HTTP/2) so stops the
 * reading of its agent's stdout, as over HTTP/1.1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "h2_int.h"

/* Output is gathered up to this before one write to the socket. */
#define OUT_BATCH ((size_t)64 << 10)
/* What a client may send before we acknowledge it, per stream and per
 * connection: bodies are read whole anyway (capped by max_body), and the
 * default 64 KiB costs a round trip in every 64 KiB message. */
#define STREAM_WINDOW ((size_t)1 << 20)
#define CONN_WINDOW ((size_t)4 << 20)
/* Bytes of one request's header fields (names and values) we keep. */
#define HDR_MAX ((size_t)ACP__HTTP_MAX_HEAD)

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* MARK: - Types */

typedef struct h2s h2s;

struct acp__h2 {
  acp_mem mem;
  nghttp2_mem nmem;
  nghttp2_session *s;
  acp__h2_io io;
  void *ud;
  size_t max_body;
  h2s *streams;
  acp__buf out;    /* gathered output not yet written */
  unsigned depth;  /* calls into the session under way */
  bool again;      /* flush once more when the outermost call ends */
  bool dead;       /* freed from inside: free when depth returns to 0 */
  bool broken;     /* the session failed: write nothing more */
  bool credit_due; /* some stream has credit to report */
  bool over_told;  /* io.over was called */
};

struct h2s {
  acp__hx hx; /* first: x->ops points back here */
  acp__h2 *h2;
  int32_t id;
  h2s *prev, *next;
  /* request head: "name\0value\0" pairs copied from HPACK */
  char hdr[HDR_MAX];
  size_t hdr_len;
  size_t off[ACP__HTTP_MAX_HEADERS][2];
  size_t len[ACP__HTTP_MAX_HEADERS][2];
  size_t nh;
  bool has_cl;
  int refuse; /* a status to answer at the end of the headers */
  bool dispatched;
  bool answered;
  acp__buf body;
  /* response body */
  acp__buf out;
  size_t out_off;
  size_t credit;     /* link bytes in `out` */
  size_t credit_due; /* link bytes taken by nghttp2, not reported yet */
  bool eof;          /* no more body after `out` */
  bool deferred;     /* nghttp2 waits for resume_data */
  bool has_body;     /* a data provider is attached */
  bool cut;          /* reset once `out` is written (op_reset) */
  /* The stall rule (acp__h2_stall_check): bytes of `out` nghttp2 took so
   * far, their count at the last look, and the clock (ms) since when
   * output has waited with none taken (0: nothing waits). */
  uint64_t taken, taken_seen, wait_since;
  bool stalled; /* reset for it (RST_STREAM CANCEL) */
};

static void h2_enter(acp__h2 *h) {
  h->depth++;
}

static void h2_really_free(acp__h2 *h);

/* Returns false when the connection was freed meanwhile. */
static bool h2_leave(acp__h2 *h) {
  h->depth--;
  if (h->depth == 0 && h->dead) {
    h2_really_free(h);
    return false;
  }
  return true;
}

/* MARK: - Allocator (Private) */

static void *nm_malloc(size_t n, void *ud) {
  return acp__malloc(ud, n);
}
static void nm_free(void *p, void *ud) {
  acp__free(ud, p);
}
static void *nm_calloc(size_t k, size_t n, void *ud) {
  return acp__calloc(ud, k, n);
}
static void *nm_realloc(void *p, size_t n, void *ud) {
  return acp__realloc(ud, p, n);
}

/* MARK: - Streams (Private) */

static const acp__hx_ops h2_ops;

static h2s *stream_new(acp__h2 *h, int32_t id) {
  h2s *st = acp__calloc(&h->mem, 1, sizeof(*st));
  if (!st)
    return NULL;
  st->hx.ops = &h2_ops;
  st->h2 = h;
  st->id = id;
  acp__buf_init(&st->body, &h->mem, 0);
  acp__buf_init(&st->out, &h->mem, 0);
  st->next = h->streams;
  if (h->streams)
    h->streams->prev = st;
  h->streams = st;
  return st;
}

/* The stream is gone: tell the runtime, unlink, free. */
static void stream_free(acp__h2 *h, h2s *st) {
  size_t unsent = st->credit + st->credit_due;
  st->credit = st->credit_due = 0;
  h->io.release(h->ud, &st->hx, unsent, st->stalled);
  if (st->prev)
    st->prev->next = st->next;
  else
    h->streams = st->next;
  if (st->next)
    st->next->prev = st->prev;
  acp__buf_dispose(&st->body);
  acp__buf_dispose(&st->out);
  acp__free(&h->mem, st);
}

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf,
                         size_t len, uint32_t *flags, nghttp2_data_source *src,
                         void *ud) {
  h2s *st = src->ptr;
  acp__h2 *h = ud;
  (void)s;
  (void)id;
  size_t avail = st->out.len - st->out_off;
  if (avail == 0) {
    if (st->cut)
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST_STREAM */
    if (st->eof) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      return 0;
    }
    st->deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  size_t n = avail < len ? avail : len;
  memcpy(buf, st->out.data + st->out_off, n);
  st->out_off += n;
  st->taken += n;
  if (st->out_off == st->out.len) {
    /* Drained: what it carried is handed on (credited after the call). */
    acp__buf_clear(&st->out);
    st->out_off = 0;
    st->credit_due += st->credit;
    st->credit = 0;
    if (st->credit_due)
      h->credit_due = true;
    if (st->eof)
      *flags |= NGHTTP2_DATA_FLAG_EOF;
  }
  return (ssize_t)n;
}

static void stream_resume(acp__h2 *h, h2s *st) {
  if (st->deferred) {
    st->deferred = false;
    nghttp2_session_resume_data(h->s, st->id);
  }
}

static void stream_fail(h2s *st);

/* Submit a response, with `body` (len bytes, may be NULL) and EOF. False
 * when it could not be (the stream is reset, or the connection broken). */
static bool stream_answer(h2s *st, int status, const nghttp2_nv *extra,
                          size_t nextra, const char *ctype, const char *p1,
                          size_t n1, const char *p2, size_t n2, bool hold) {
  acp__h2 *h = st->h2;
  char code[8];
  nghttp2_nv nv[8];
  size_t k = 0;
  if (st->answered || h->broken)
    return false;
  st->answered = true;
  snprintf(code, sizeof(code), "%d", status);
#define NV(n, v)                                                               \
  nv[k++] = (nghttp2_nv){(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), \
                         NGHTTP2_NV_FLAG_NONE}
  NV(":status", code);
  if (ctype)
    NV("content-type", ctype);
  for (size_t i = 0; i < nextra && k < 8; i++)
    nv[k++] = extra[i];
#undef NV
  bool body = hold || n1 + n2 > 0;
  if (body) {
    if ((n1 && acp__buf_append(&st->out, p1, n1) != 0) ||
        (n2 && acp__buf_append(&st->out, p2, n2) != 0)) {
      acp__buf_dispose(&st->out);
      acp__buf_init(&st->out, &h->mem, 0);
      stream_fail(st);
      return false;
    }
    st->eof = !hold;
    st->has_body = true;
  }
  nghttp2_data_provider dp;
  dp.source.ptr = st;
  dp.read_callback = read_body;
  if (nghttp2_submit_response(h->s, st->id, nv, k, body ? &dp : NULL) != 0) {
    /* No data provider is attached: nothing may be queued for it. */
    st->has_body = false;
    st->eof = true;
    acp__buf_dispose(&st->out);
    acp__buf_init(&st->out, &h->mem, 0);
    stream_fail(st);
    return false;
  }
  return true;
}

/* The connection cannot go on (out of memory where a stream could not
 * even be reset): GOAWAY if nghttp2 can still queue one (the session
 * then ends once it is sent), else no more writing at all. Either way
 * acp__h2_done() turns true and the runtime is told (io.over). */
static void h2_break(acp__h2 *h) {
  if (h->broken)
    return;
  if (nghttp2_session_terminate_session(h->s, NGHTTP2_INTERNAL_ERROR) != 0)
    h->broken = true;
}

/* A stream we cannot serve (its answer or body could not be queued):
 * RST_STREAM, so its client does not wait for an answer that will never
 * come; if even that cannot be queued, the whole connection. */
static void stream_fail(h2s *st) {
  acp__h2 *h = st->h2;
  if (h->broken)
    return;
  if (nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, st->id,
                                NGHTTP2_INTERNAL_ERROR) != 0)
    h2_break(h);
}

/* Flush unless a call into the session is under way (then it will). */
static void h2_kick(acp__h2 *h) {
  if (h->depth > 0) {
    h->again = true;
    return;
  }
  acp__h2_flush(h);
}

static void refuse(h2s *st, int status, const char *detail) {
  nghttp2_nv ext[1] = {{NULL, NULL, 0, 0, NGHTTP2_NV_FLAG_NONE}};
  size_t ne = 0;
  if (status == 401)
    ext[ne++] = (nghttp2_nv){(uint8_t *)"www-authenticate", (uint8_t *)"Bearer",
                             16, 6, NGHTTP2_NV_FLAG_NONE};
  (void)stream_answer(st, status, ext, ne, "text/plain", detail, strlen(detail),
                      "\n", 1, false);
  h2_kick(st->h2);
}

/* MARK: - Exchange ops (Private) */

static int op_respond(acp__hx *x, const acp__hx_resp *r) {
  h2s *st = (h2s *)x;
  if (r->status >= 400) {
    refuse(st, r->status, r->detail ? r->detail : "error");
    return 0;
  }
  if (r->status != 200) {
    (void)stream_answer(st, r->status, NULL, 0, NULL, NULL, 0, NULL, 0, false);
    h2_kick(st->h2);
    return 0;
  }
  nghttp2_nv ext[3];
  size_t ne = 0;
  ext[ne++] = (nghttp2_nv){(uint8_t *)"cache-control", (uint8_t *)"no-store",
                           13, 8, NGHTTP2_NV_FLAG_NONE};
  if (r->conn_id)
    ext[ne++] =
        (nghttp2_nv){(uint8_t *)"acp-connection-id", (uint8_t *)r->conn_id, 17,
                     strlen(r->conn_id), NGHTTP2_NV_FLAG_NONE};
  if (r->set_cookie)
    ext[ne++] = (nghttp2_nv){(uint8_t *)"set-cookie", (uint8_t *)r->set_cookie,
                             10, strlen(r->set_cookie), NGHTTP2_NV_FLAG_NONE};
  bool ok = stream_answer(st, 200, ext, ne, "application/json", r->p1, r->n1,
                          r->p2, r->n2, false);
  h2_kick(st->h2);
  return ok ? 0 : ACP_ERR_NOMEM;
}

static int op_open_sse(acp__hx *x) {
  h2s *st = (h2s *)x;
  nghttp2_nv ext[1] = {{(uint8_t *)"cache-control", (uint8_t *)"no-cache", 13,
                        8, NGHTTP2_NV_FLAG_NONE}};
  bool ok = stream_answer(st, 200, ext, 1, "text/event-stream", NULL, 0, NULL,
                          0, true);
  h2_kick(st->h2);
  return ok ? 0 : ACP_ERR_NOMEM;
}

static int op_send(acp__hx *x, const uv_buf_t *b, unsigned nb, size_t credit) {
  h2s *st = (h2s *)x;
  acp__h2 *h = st->h2;
  if (h->broken || st->eof || st->cut || st->stalled || !st->has_body) {
    h->io.credit(h->ud, x, credit);
    return 0;
  }
  for (unsigned i = 0; i < nb; i++)
    if (b[i].len && acp__buf_append(&st->out, b[i].base, b[i].len) != 0)
      return ACP_ERR_NOMEM;
  st->credit += credit;
  stream_resume(h, st);
  h2_kick(h);
  return 0;
}

static void op_finish(acp__hx *x) {
  h2s *st = (h2s *)x;
  if (!st->has_body || st->eof)
    return;
  st->eof = true;
  stream_resume(st->h2, st);
  h2_kick(st->h2);
}

/* What was queued on the stream is written first (a reset submitted now
 * would overtake it: nghttp2 sends RST_STREAM before pending DATA), then
 * read_body() fails the stream, which nghttp2 answers with RST_STREAM
 * INTERNAL_ERROR. */
static size_t op_reset(acp__hx *x) {
  h2s *st = (h2s *)x;
  size_t held = st->credit + st->credit_due;
  st->credit = st->credit_due = 0;
  if (!st->has_body || st->eof) {
    stream_fail(st);
  } else {
    st->cut = true;
    stream_resume(st->h2, st);
  }
  h2_kick(st->h2);
  return held;
}

static const acp__hx_ops h2_ops = {op_respond, op_open_sse, op_send,
                                   op_finish,  NULL,        op_reset};

/* MARK: - Requests (Private) */

static void dispatch(acp__h2 *h, h2s *st) {
  acp__http_head head;
  char cl[24];
  if (st->dispatched)
    return;
  st->dispatched = true;
  if (st->refuse) {
    refuse(st, st->refuse,
           st->refuse == 413   ? "the message is too large"
           : st->refuse == 503 ? "out of memory: retry later"
                               : "the request head is too large");
    return;
  }
  memset(&head, 0, sizeof(head));
  head.minor_version = 1;
  /* The pseudo-headers first, :authority as Host (a Host field, if any,
   * comes after it and so loses, as RFC 9113 section 8.3.1 says). */
  size_t k = 0;
  for (size_t i = 0; i < st->nh; i++) {
    const char *n = st->hdr + st->off[i][0];
    const char *v = st->hdr + st->off[i][1];
    size_t nl = st->len[i][0], vl = st->len[i][1];
    if (nl == 7 && memcmp(n, ":method", 7) == 0) {
      head.method = v;
      head.method_len = vl;
    } else if (nl == 5 && memcmp(n, ":path", 5) == 0) {
      head.target = v;
      head.target_len = vl;
    } else if (nl == 10 && memcmp(n, ":authority", 10) == 0) {
      head.headers[k++] = (acp__http_header){"Host", 4, v, vl};
    }
  }
  for (size_t i = 0; i < st->nh && k < ACP__HTTP_MAX_HEADERS; i++) {
    const char *n = st->hdr + st->off[i][0];
    if (n[0] == ':')
      continue;
    head.headers[k++] = (acp__http_header){
        n, st->len[i][0], st->hdr + st->off[i][1], st->len[i][1]};
  }
  if (!st->has_cl && k < ACP__HTTP_MAX_HEADERS) {
    /* HTTP/2 frames the body: its length is known at END_STREAM. */
    int n = snprintf(cl, sizeof(cl), "%zu", st->body.len);
    head.headers[k++] = (acp__http_header){"Content-Length", 14, cl, (size_t)n};
  }
  head.nheaders = k;
  if (!head.method || !head.target) {
    refuse(st, 400, "a request needs :method and :path");
    return;
  }
  /* The spare byte io.request may write after the body (a '\n'). */
  if (acp__buf_reserve(&st->body, 1) != 0) {
    refuse(st, 503, "out of memory: retry later");
    return;
  }
  h->io.request(h->ud, &st->hx, &head, st->body.data, st->body.len);
}

/* MARK: - Callbacks (Private) */

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f,
                            void *ud) {
  acp__h2 *h = ud;
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0;
  h2s *st = stream_new(h, f->hd.stream_id);
  if (!st)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  nghttp2_session_set_stream_user_data(s, f->hd.stream_id, st);
  return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f,
                     const uint8_t *name, size_t nl, const uint8_t *value,
                     size_t vl, uint8_t flags, void *ud) {
  (void)flags;
  (void)ud;
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0;
  h2s *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
  if (!st || st->refuse)
    return 0;
  if (st->nh == ACP__HTTP_MAX_HEADERS ||
      st->hdr_len + nl + vl + 2 > sizeof(st->hdr)) {
    st->refuse = 431;
    return 0;
  }
  st->off[st->nh][0] = st->hdr_len;
  st->len[st->nh][0] = nl;
  memcpy(st->hdr + st->hdr_len, name, nl);
  st->hdr_len += nl;
  st->hdr[st->hdr_len++] = '\0';
  st->off[st->nh][1] = st->hdr_len;
  st->len[st->nh][1] = vl;
  memcpy(st->hdr + st->hdr_len, value, vl);
  st->hdr_len += vl;
  st->hdr[st->hdr_len++] = '\0';
  st->nh++;
  if (nl == 14 && memcmp(name, "content-length", 14) == 0)
    st->has_cl = true;
  return 0;
}

static bool is_method(h2s *st, const char *m) {
  for (size_t i = 0; i < st->nh; i++)
    if (st->len[i][0] == 7 &&
        memcmp(st->hdr + st->off[i][0], ":method", 7) == 0)
      return st->len[i][1] == strlen(m) &&
             memcmp(st->hdr + st->off[i][1], m, st->len[i][1]) == 0;
  return false;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
  acp__h2 *h = ud;
  if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
    return 0;
  h2s *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
  if (!st)
    return 0;
  bool end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  /* GET and DELETE carry no body: they are served once their head is
   * complete, even from a client that keeps its side open. An early
   * refusal (431, 413) need not wait for the body either. */
  if (end || st->refuse ||
      (f->hd.type == NGHTTP2_HEADERS &&
       (is_method(st, "GET") || is_method(st, "DELETE"))))
    dispatch(h, st);
  return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id,
                   const uint8_t *data, size_t len, void *ud) {
  acp__h2 *h = ud;
  (void)flags;
  h2s *st = nghttp2_session_get_stream_user_data(s, id);
  if (!st || st->dispatched)
    return 0;
  if (st->body.len + len > h->max_body) {
    /* Answered now; the rest of the body is read and dropped. */
    acp__buf_dispose(&st->body);
    acp__buf_init(&st->body, &h->mem, 0);
    st->refuse = 413;
    dispatch(h, st);
    return 0;
  }
  if (acp__buf_append(&st->body, data, len) != 0) {
    /* nghttp2 ignores a non-fatal error from this callback: the chunk
     * would be dropped and the rest of the body dispatched as if whole
     * (a lost message, answered 202). Refused now instead (503, or a
     * reset if even that cannot be queued); the rest is read and
     * dropped, as past max_body. */
    acp__buf_dispose(&st->body);
    acp__buf_init(&st->body, &h->mem, 0);
    st->refuse = 503;
    dispatch(h, st);
  }
  return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code,
                           void *ud) {
  acp__h2 *h = ud;
  (void)code;
  h2s *st = nghttp2_session_get_stream_user_data(s, id);
  if (st)
    stream_free(h, st);
  return 0;
}

/* MARK: - Connection (Public) */

int acp__h2_preface(const char *p, size_t n) {
  size_t k = n < 24 ? n : 24;
  if (memcmp(p, preface, k) != 0)
    return 0;
  return n >= 24 ? 1 : -1;
}

int acp__h2_new(acp__h2 **out, const acp__h2_io *io, void *ud, size_t max_body,
                const acp_mem *mem) {
  acp_mem m;
  nghttp2_session_callbacks *cbs = NULL;
  nghttp2_option *opt = NULL;
  int rv = ACP_ERR_NOMEM;
  *out = NULL;
  acp__mem_init(&m, mem);
  acp__h2 *h = acp__calloc(&m, 1, sizeof(*h));
  if (!h)
    return ACP_ERR_NOMEM;
  h->mem = m;
  h->nmem = (nghttp2_mem){&h->mem, nm_malloc, nm_free, nm_calloc, nm_realloc};
  h->io = *io;
  h->ud = ud;
  h->max_body = max_body;
  acp__buf_init(&h->out, &h->mem, 0);
  if (nghttp2_session_callbacks_new(&cbs) != 0)
    goto cleanup;
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs,
                                                          on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
  if (nghttp2_option_new(&opt) != 0)
    goto cleanup;
  /* Ours are the streams a client may open; what it announces for its
   * own side, nghttp2 enforces. */
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
  if (nghttp2_session_server_new3(&h->s, cbs, h, opt, &h->nmem) != 0)
    goto cleanup;
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, ACP__H2_MAX_STREAMS},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)HDR_MAX * 2},
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (uint32_t)STREAM_WINDOW}};
  if (nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, iv,
                              sizeof(iv) / sizeof(iv[0])) != 0 ||
      nghttp2_session_set_local_window_size(h->s, NGHTTP2_FLAG_NONE, 0,
                                            (int32_t)CONN_WINDOW) != 0)
    goto cleanup;
  rv = 0;
  *out = h;
  h = NULL;
cleanup:
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  if (h) {
    if (h->s)
      nghttp2_session_del(h->s);
    acp__buf_dispose(&h->out);
    acp__free(&m, h);
  }
  return rv;
}

int acp__h2_recv(acp__h2 *h, const char *data, size_t len) {
  if (h->broken)
    return ACP_ERR_PROTOCOL;
  h2_enter(h);
  ssize_t n = nghttp2_session_mem_recv(h->s, (const uint8_t *)data, len);
  if (n < 0) {
    /* Fatal (a bad preface, out of memory): say so if we still can. */
    if (nghttp2_session_terminate_session(h->s, NGHTTP2_PROTOCOL_ERROR) != 0)
      h->broken = true;
  }
  if (!h2_leave(h))
    return ACP_ERR_PROTOCOL;
  acp__h2_flush(h);
  return n < 0 ? ACP_ERR_PROTOCOL : 0;
}

static void report_credit(acp__h2 *h) {
  while (h->credit_due && !h->dead) {
    h->credit_due = false;
    for (h2s *st = h->streams; st; st = st->next) {
      if (st->credit_due) {
        size_t n = st->credit_due;
        st->credit_due = 0;
        /* May write to this very connection (it only queues, then kicks:
         * the flush loop below picks it up). */
        h->io.credit(h->ud, &st->hx, n);
        h->credit_due = true; /* the list may have changed: rescan */
        break;
      }
    }
  }
}

static void h2_flush_now(acp__h2 *h) {
  if (h->broken)
    return;
  while (h->io.writable(h->ud)) {
    const uint8_t *p;
    ssize_t n = nghttp2_session_mem_send(h->s, &p);
    if (n < 0) {
      h->broken = true;
      break;
    }
    if (n == 0)
      break;
    if (acp__buf_append(&h->out, p, (size_t)n) != 0) {
      h->broken = true;
      break;
    }
    if (h->out.len >= OUT_BATCH) {
      if (h->io.write(h->ud, h->out.data, h->out.len) != 0)
        h->broken = true;
      acp__buf_clear(&h->out);
      if (h->broken || h->dead)
        break;
    }
  }
  if (h->out.len > 0 && !h->broken && !h->dead) {
    if (h->io.write(h->ud, h->out.data, h->out.len) != 0)
      h->broken = true;
  }
  acp__buf_clear(&h->out);
  if (h->out.cap > OUT_BATCH * 2) {
    acp__buf_dispose(&h->out);
    acp__buf_init(&h->out, &h->mem, 0);
  }
}

void acp__h2_flush(acp__h2 *h) {
  if (!h || h->depth > 0) {
    if (h)
      h->again = true;
    return;
  }
  h2_enter(h);
  do {
    h->again = false;
    h2_flush_now(h);
    report_credit(h);
  } while (h->again && !h->dead && !h->broken);
  /* Over, whoever called: the runtime only checks after its own reads
   * and writes, and an answer queued from a timer or the agent's side
   * that breaks the connection would otherwise leave it open and its
   * client waiting. */
  if (!h->dead && !h->over_told && acp__h2_done(h)) {
    h->over_told = true;
    h->io.over(h->ud);
  }
  /* Output left waiting (a shut window, a full socket): the runtime looks
   * at its progress from now on (acp__h2_stall_check). */
  if (!h->dead && !h->broken && acp__h2_waiting(h))
    h->io.waiting(h->ud);
  h2_leave(h);
}

/* Whether the body of `st` has bytes nghttp2 has not taken yet. */
static bool stream_waits(const h2s *st) {
  return !st->stalled && st->out.len > st->out_off;
}

bool acp__h2_waiting(const acp__h2 *h) {
  for (const h2s *st = h->streams; st; st = st->next)
    if (stream_waits(st))
      return true;
  return false;
}

/*
 * The write-stall rule of a server socket (remote_uv.c, on_wstall), per
 * stream: a client that reads the socket but grants one stream no window
 * (no WINDOW_UPDATE, or a tiny SETTINGS_INITIAL_WINDOW_SIZE) would hold
 * that stream's output here, and the agent behind it, for ever, while the
 * socket itself keeps moving. Time counts only while the socket could take
 * more: a full socket is the socket rule's (the same stall_ms), and a
 * stream that waits behind a slow but moving socket is not stalled.
 *
 * RST_STREAM CANCEL, not INTERNAL_ERROR: nothing failed on our side (the
 * test hook's INTERNAL_ERROR stands for a fault the client resumes from);
 * the server gave up on a stream its client does not take, as RFC 9113
 * section 7 describes CANCEL ("the stream is no longer needed"). Submitted
 * at once, ahead of the DATA that cannot go anyway; when nghttp2 has sent
 * it the stream closes and io.release says `stalled`.
 */
bool acp__h2_stall_check(acp__h2 *h, uint64_t now, uint64_t stall_ms) {
  if (h->broken || h->dead)
    return false;
  bool writable = h->io.writable(h->ud), waiting = false, reset = false;
  if (now == 0)
    now = 1; /* (0 means: not waiting) */
  for (h2s *st = h->streams; st; st = st->next) {
    if (!stream_waits(st)) {
      st->wait_since = 0;
      continue;
    }
    if (st->wait_since == 0 || st->taken != st->taken_seen || !writable) {
      st->wait_since = now;
      st->taken_seen = st->taken;
      waiting = true;
    } else if (now - st->wait_since < stall_ms) {
      waiting = true;
    } else {
      st->stalled = true;
      reset = true;
      if (nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, st->id,
                                    NGHTTP2_CANCEL) != 0)
        h2_break(h);
    }
  }
  if (reset)
    acp__h2_flush(h); /* may free h (from inside a release): not used after */
  return waiting;
}

void acp__h2_keepalive(acp__h2 *h) {
  static const char ping[] = ":\n\n";
  for (h2s *st = h->streams; st; st = st->next) {
    if (st->has_body && !st->eof && !st->stalled && st->hx.hc &&
        acp__buf_append(&st->out, ping, 3) == 0)
      stream_resume(h, st);
  }
  acp__h2_flush(h);
}

void acp__h2_goaway(acp__h2 *h) {
  if (!h || h->broken)
    return;
  nghttp2_submit_goaway(h->s, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(h->s),
                        NGHTTP2_NO_ERROR, NULL, 0);
  acp__h2_flush(h);
}

bool acp__h2_idle(const acp__h2 *h) {
  return h->streams == NULL;
}

bool acp__h2_done(const acp__h2 *h) {
  return h->broken || (nghttp2_session_want_read(h->s) == 0 &&
                       nghttp2_session_want_write(h->s) == 0);
}

static void h2_really_free(acp__h2 *h) {
  acp_mem m = h->mem;
  nghttp2_session_del(h->s);
  acp__buf_dispose(&h->out);
  acp__free(&m, h);
}

void acp__h2_free(acp__h2 *h) {
  if (!h)
    return;
  /* Nothing is sent from now on: releasing a stream may end an ACP
   * connection whose other streams live here too. */
  h->dead = true;
  h->broken = true;
  h->depth++;
  while (h->streams) {
    h2s *st = h->streams;
    nghttp2_session_set_stream_user_data(h->s, st->id, NULL);
    stream_free(h, st);
  }
  h2_leave(h); /* frees it unless a call into the session is under way */
}
