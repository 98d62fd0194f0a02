/*
 * The client side of the Streamable HTTP profile of remote ACP, as a user
 * link (acp_uv_link_new_user()) so the roles run over it as over stdio.
 *
 * Each line written to the link is one message, POSTed in order on one
 * kept-alive socket (the next POST leaves when the previous is answered,
 * which keeps the agent's view of the order the writer's, as the TS SDK's
 * http-client does). The first must be `initialize`: its 200 answer
 * carries the Acp-Connection-Id and the agent's response, which is the
 * link's first line. Then a GET opens the connection's SSE stream, and a
 * GET per session its session stream (the SDK's server puts a session's
 * messages there; ours sends everything on the connection stream). Each
 * SSE event is one line read from the link. Closing the link DELETEs the
 * connection. Cookies from every answer are sent with every request.
 *
 * The sans-I/O pieces are shared, not copied: the HTTP/1.1 head parser
 * and body decoder of ws.c, the SSE parser of libacp-http (src/http/sse.c,
 * compiled into this library too) and the core's JSON reader, with which
 * the session of each message is found (Acp-Session-Id).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nghttp2/nghttp2.h>

#include "acp/json.h"
#include "remote_int.h"
#include "sse.h"
#include "tls_int.h"
#include "uv_internal.h"

#define READ_CHUNK ((size_t)64 << 10)
/* An error page is diagnostic text: this much of it is kept. */
#define ERR_BODY_MAX 512
/* A DELETE at close gets this long to be answered. */
#define DELETE_MS 2000
#define CONNECT_MS 30000 /* initialize waits for the agent to start */

typedef struct hcli hcli;

/* One message waiting to be POSTed (or in flight). */
typedef struct hmsg {
  struct hmsg *next;
  size_t len;    /* of body */
  size_t credit; /* link bytes it completes */
  char *sid;     /* Acp-Session-Id to send, or NULL */
  char *req_id;  /* a request's raw JSON id (for a synthesized error) */
  bool is_init;
  bool no_stream;   /* its session's stream was refused (409): send anyway */
  unsigned writing; /* uv_writes still reading body (zero-copy POSTs) */
  bool dead;        /* freed while writing: the last write frees it */
  char body[];
} hmsg;

/* K_H2: an HTTP/2 connection (ACP_REMOTE_HTTP2) carrying the others as
 * streams; a K_POST, K_SSE or K_DELETE with a `carrier` is such a stream
 * and has no socket of its own. */
enum { K_POST = 1, K_SSE, K_DELETE, K_H2 };

/* Our HTTP/2 windows: a paused session stream holds at most 1 MiB and
 * leaves the rest of the connection's 4 MiB to the others. */
#define H2_STREAM_WINDOW ((int32_t)1 << 20)
#define H2_CONN_WINDOW ((int32_t)4 << 20)

typedef struct hsock {
  hcli *h;
  struct hsock *next; /* in h->socks */
  uv_tcp_t tcp;
  uv_connect_t creq;
  int kind;
  bool connected;
  bool reading;
  bool closed;
  bool got_bytes; /* an answer started on this request */
  bool reused;    /* a request was answered on it before this one */
  bool head_done;
  bool keep_alive;
  int status;
  acp__buf pending; /* request bytes written once connected */
  acp__buf in;      /* response bytes not yet consumed */
  acp__buf text;    /* POST or error body */
  acp__http_body body;
  acp__sse sse;
  bool sse_init;
  char *sid;        /* K_SSE: its session, or NULL for the connection stream */
  unsigned events;  /* K_SSE: events taken on it */
  uint64_t last_id; /* ... and the id of the last one, if numbered */
  hmsg *msg;        /* K_POST: the message in flight */
  char conn_id[130];
  acp__tls *tls; /* https: each socket its own TLS connection */
  unsigned num;  /* https: the how-manieth TLS socket (for the log) */
  /* An HTTP/2 stream (carrier set): */
  struct hsock *carrier;
  uv_timer_t life; /* the handle its close waits for (it has no socket) */
  int32_t stream_id;
  bool stream_done; /* closed by nghttp2 */
  bool completed;   /* END_STREAM seen */
  bool paused;      /* an SSE stream whose window is not given back */
  size_t unconsumed;
  int h2_status;
  acp__buf hdrs; /* the response's headers: name NUL value NUL ... */
  acp__buf out;  /* the request body */
  size_t out_off;
  /* K_H2: */
  nghttp2_session *ng;
  nghttp2_mem nmem;
  bool h2_ready; /* the session exists (after ALPN over TLS) */
  bool ng_busy;  /* inside nghttp2_session_mem_recv */
} hsock;

/* The id of the last event taken from a session's stream: a reopened
 * stream asks for what follows (Last-Event-ID), and an event replayed
 * twice is taken once. */
typedef struct seen {
  struct seen *next;
  uint64_t last;
  char sid[];
} seen;

typedef struct route {
  struct route *next;
  char *id; /* a request's id, raw JSON: the agent's, or ours (closing) */
  char *sid;
} route;

typedef struct wreq {
  uv_write_t req;
  hsock *s;
  hmsg *msg; /* whose body this write sends in place, or NULL */
  char data[];
} wreq;

struct hcli {
  acp_mem mem;
  seen *seen; /* per session with numbered events */
  uv_loop_t *loop;
  acp_uv_link *link; /* NULL once closed */
  uv_getaddrinfo_t gai;
  bool resolving;
  struct sockaddr_storage addr;
  bool have_addr;
  char *host, *port, *authority, *path;
  acp__buf extra; /* token and user headers, each ending in CRLF */
  acp__buf cookies;
  char conn_id[130];
  bool init_sent;
  bool failed;
  bool deleted; /* no DELETE needed (the server forgot us) */
  hmsg *q_head, *q_tail;
  hsock *post; /* the kept-alive POST socket, or NULL */
  hsock *socks;
  acp__buf line;
  bool line_drop;
  acp__buf hold; /* lines read while the link was not taking them */
  bool link_reading;
  uv_timer_t resume;
  uv_timer_t timer; /* connect deadline; then the DELETE's */
  unsigned handles;
  route *routes;
  /* Our session/close requests (id and session) until answered; a
   * success ends that session's stream (closed_sid, once the answer is
   * delivered). */
  route *closing;
  char *closed_sid;
  size_t max_msg;
  acp_json_doc *doc;
  acp_remote_connect_cb ccb;
  void *cud;
  acp_remote_tls *tls; /* https: a reference, shared by the sockets */
  bool want_h2;        /* ACP_REMOTE_HTTP2 */
  bool use_h2;         /* requests are HTTP/2 streams */
  bool mode_known;     /* HTTP/2 or not is decided (ALPN over TLS) */
  hsock *carrier;      /* the HTTP/2 connection, or NULL */
  bool pump_due;       /* a session stream's head came in during h2_recv */
  void (*log)(const char *line, void *user_data); /* options' log */
  void *log_ud;
  unsigned tls_socks; /* TLS sockets opened so far */
  /* Test hook (acp__remote_http_cut_session_stream): cut a session
   * stream at its first event numbered above cut_after. */
  bool cut_armed;
  uint64_t cut_after;
  unsigned *cut_done;
};

static void pump(hcli *h);
static void on_connect_timeout(uv_timer_t *t);
static bool ready(const hcli *h);
static hsock *stream_new(hcli *h, int kind, const char *sid);
static int h2_submit(hsock *s, const char *p, size_t n);
static void h2_flush(hsock *c);
static void h2_recv(hsock *c);
static void close_timer(hcli *h);
static void h2_window(hsock *s, bool on);
static void carrier_ready(hsock *c);
static void carrier_alpn(hsock *c);
static void answer_done(hsock *s);
static void on_head(hsock *s, const acp__http_head *hd);
static int on_body(hsock *s, const char *p, size_t n);
static void sock_close(hsock *s);
static void fail(hcli *h, int err, const char *detail);

/* MARK: - Lifetime (Private) */

static void route_free(hcli *h, route *r) {
  acp__free(&h->mem, r->id);
  acp__free(&h->mem, r->sid);
  acp__free(&h->mem, r);
}

static void route_list_free(hcli *h, route **list) {
  while (*list) {
    route *r = *list;
    *list = r->next;
    route_free(h, r);
  }
}

/* The route of request id [ib, ib + il) taken off `list`, or NULL. */
static route *route_take(route **list, const char *ib, size_t il) {
  for (route **pp = list; *pp; pp = &(*pp)->next) {
    route *r = *pp;
    if (strlen(r->id) == il && memcmp(r->id, ib, il) == 0) {
      *pp = r->next;
      return r;
    }
  }
  return NULL;
}

static void hmsg_free(hcli *h, hmsg *m) {
  if (!m)
    return;
  acp__free(&h->mem, m->sid);
  acp__free(&h->mem, m->req_id);
  m->sid = m->req_id = NULL;
  if (m->writing) {
    m->dead = true; /* its body is still being written: on_written frees */
    return;
  }
  acp__free(&h->mem, m);
}

static void hcli_free(hcli *h) {
  while (h->q_head) {
    hmsg *m = h->q_head;
    h->q_head = m->next;
    hmsg_free(h, m);
  }
  route_list_free(h, &h->routes);
  route_list_free(h, &h->closing);
  acp__free(&h->mem, h->closed_sid);
  while (h->seen) {
    seen *e = h->seen;
    h->seen = e->next;
    acp__free(&h->mem, e);
  }
  acp_json_doc_free(h->doc);
  acp__buf_dispose(&h->extra);
  acp__buf_dispose(&h->cookies);
  acp__buf_dispose(&h->line);
  acp__buf_dispose(&h->hold);
  acp__free(&h->mem, h->host);
  acp__free(&h->mem, h->port);
  acp__free(&h->mem, h->authority);
  acp__free(&h->mem, h->path);
  acp__tls_conf_unref(h->tls);
  acp__free(&h->mem, h);
}

static void hcli_unref(hcli *h) {
  if (h->handles == 0 && !h->link && !h->resolving && !h->socks)
    hcli_free(h);
}

static void on_hcli_handle_closed(uv_handle_t *hd) {
  hcli *h = hd->data;
  h->handles--;
  hcli_unref(h);
}

static void sock_free(hsock *s) {
  hcli *h = s->h;
  for (hsock **pp = &h->socks; *pp; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  acp__buf_dispose(&s->pending);
  acp__buf_dispose(&s->in);
  acp__buf_dispose(&s->text);
  acp__buf_dispose(&s->hdrs);
  acp__buf_dispose(&s->out);
  if (s->ng)
    nghttp2_session_del(s->ng);
  if (s->sse_init)
    acp__sse_dispose(&s->sse);
  acp__free(&h->mem, s->sid);
  hmsg_free(h, s->msg);
  acp__tls_free(s->tls);
  bool last_delete = s->kind == K_DELETE && !h->link;
  acp__free(&h->mem, s);
  if (last_delete)
    close_timer(h);
  hcli_unref(h);
}

/* The timer outlives the link while the DELETE at the end is under way (it
 * is that DELETE's deadline): closed once, when the DELETE is over or its
 * time is up, or at the link's end when no DELETE was sent. */
static void close_timer(hcli *h) {
  if (uv_is_closing((uv_handle_t *)&h->timer))
    return;
  h->handles++;
  uv_close((uv_handle_t *)&h->timer, on_hcli_handle_closed);
}

static void on_sock_closed(uv_handle_t *hd) {
  sock_free(hd->data);
}

/* https: a healthy socket we close says so first (close_notify), so the
 * server sees an end, not a truncation. Sent only if it can go at once
 * (nothing queued before it: uv_close() cancels queued writes), which is
 * the case of a socket closed after its answer or at the link's end. */
static void tls_bye(hsock *s) {
  char buf[256];
  if (!s->tls || !s->connected || !acp__tls_ready(s->tls) ||
      uv_stream_get_write_queue_size((uv_stream_t *)&s->tcp) > 0)
    return;
  acp__tls_close(s->tls);
  size_t n = acp__tls_pending(s->tls);
  if (n == 0 || n > sizeof(buf))
    return;
  n = acp__tls_take(s->tls, buf, n);
  uv_buf_t b = uv_buf_init(buf, (unsigned)n);
  (void)uv_try_write((uv_stream_t *)&s->tcp, &b, 1);
}

static void sock_close(hsock *s) {
  hcli *h = s->h;
  if (s->closed)
    return;
  s->closed = true;
  if (h->post == s)
    h->post = NULL;
  if (s->carrier) {
    /* A stream: reset it if it is still open, and forget it. */
    hsock *c = s->carrier;
    if (!c->closed && c->ng && s->stream_id > 0 && !s->stream_done) {
      nghttp2_session_set_stream_user_data(c->ng, s->stream_id, NULL);
      nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->stream_id,
                                NGHTTP2_CANCEL);
      h2_flush(c);
    }
    uv_close((uv_handle_t *)&s->life, on_sock_closed);
    /* The DELETE at the end was the last use of its connection. */
    if (s->kind == K_DELETE && !h->link)
      sock_close(c);
    return;
  }
  if (s->kind == K_H2) {
    /* The connection: its streams go with it (nghttp2 is not called for
     * them; the session is deleted when the socket is freed). */
    if (h->carrier == s)
      h->carrier = NULL;
    for (hsock *x = h->socks; x; x = x->next)
      if (x->carrier == s)
        sock_close(x);
  }
  tls_bye(s);
  uv_close((uv_handle_t *)&s->tcp, on_sock_closed);
}

/* MARK: - Delivering to the link (Private) */

static void sse_reading(hcli *h, bool on);

/* One line (ending in '\n') for the link, or held while it is paused. */
static void deliver(hcli *h, const char *p, size_t n) {
  if (!h->link || h->failed)
    return;
  if (h->hold.len == 0 && h->link_reading &&
      acp_uv_link_user_deliver(h->link, p, n) == 0) {
    if (h->link && !acp_uv_link_is_reading(h->link)) {
      h->link_reading = false;
      sse_reading(h, false);
    }
    return;
  }
  if (acp__buf_append(&h->hold, p, n) != 0)
    fail(h, ACP_ERR_NOMEM, "out of memory holding the agent's messages");
  sse_reading(h, false);
}

static void flush_hold(hcli *h) {
  size_t off = 0;
  while (off < h->hold.len && h->link && h->link_reading) {
    const char *p = h->hold.data + off;
    const char *nl = memchr(p, '\n', h->hold.len - off);
    size_t n = (size_t)(nl - p) + 1;
    if (acp_uv_link_user_deliver(h->link, p, n) != 0)
      break;
    off += n;
    if (h->link && !acp_uv_link_is_reading(h->link))
      h->link_reading = false;
  }
  acp__buf_consume(&h->hold, off);
}

static void on_resume(uv_timer_t *t) {
  hcli *h = t->data;
  flush_hold(h);
  if (h->hold.len == 0 && h->link_reading)
    sse_reading(h, true);
}

/* A JSON-RPC error answering request `id` for the caller: a refused POST
 * fails that request only, as the SDK's client does. */
static void deliver_error(hcli *h, const char *id, int status,
                          const char *text) {
  acp_json_writer *w = NULL;
  char msg[96];
  const char *d;
  size_t dn;
  route *r = route_take(&h->closing, id, strlen(id));
  if (r)
    route_free(h, r); /* a refused session/close: nothing ends */
  if (acp_json_writer_new(&w, 0, &h->mem) != 0)
    return;
  snprintf(msg, sizeof(msg), "ACP POST failed: HTTP %d", status);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "jsonrpc");
  acp_json_write_strz(w, "2.0");
  acp_json_write_keyz(w, "id");
  acp_json_write_raw(w, id, strlen(id));
  acp_json_write_keyz(w, "error");
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "code");
  acp_json_write_int(w, -32603);
  acp_json_write_keyz(w, "message");
  acp_json_write_strz(w, msg);
  acp_json_write_keyz(w, "data");
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "status");
  acp_json_write_int(w, status);
  acp_json_write_keyz(w, "body");
  acp_json_write_strz(w, text);
  acp_json_write_obj_end(w);
  acp_json_write_obj_end(w);
  acp_json_write_obj_end(w);
  if (acp_json_writer_error(w) == 0) {
    d = acp_json_writer_data(w, &dn);
    char *line = acp__malloc(&h->mem, dn + 1);
    if (line) {
      memcpy(line, d, dn);
      line[dn] = '\n';
      deliver(h, line, dn + 1);
      acp__free(&h->mem, line);
    }
  }
  acp_json_writer_free(w);
}

/* MARK: - Failing (Private) */

static void fail(hcli *h, int err, const char *detail) {
  if (h->failed) {
    /* Only the HTTP/2 connection opened for the DELETE can fail after
     * the end: close it (and its stream), or nothing ever would. */
    if (h->carrier)
      sock_close(h->carrier);
    return;
  }
  h->failed = true;
  if (h->ccb) {
    acp_remote_connect_cb cb = h->ccb;
    h->ccb = NULL;
    cb(h->link, err, detail, h->cud);
  }
  /* Writes in flight count as done: nobody will send them now. */
  while (h->q_head) {
    hmsg *m = h->q_head;
    h->q_head = m->next;
    if (h->link)
      acp_uv_link_user_written(h->link, m->credit);
    hmsg_free(h, m);
  }
  h->q_tail = NULL;
  for (hsock *s = h->socks; s; s = s->next)
    if (s->kind != K_DELETE)
      sock_close(s);
  if (h->link)
    acp_uv_link_user_end(h->link,
                         err == ACP_ERR_CLOSED ? UV_EOF : UV_ECONNRESET);
}

/* "HTTP 401 Unauthorized: the body's start" */
static void fail_status(hcli *h, hsock *s, const char *what) {
  char d[ERR_BODY_MAX + 200];
  size_t n = s->text.len;
  while (n > 0 && (s->text.data[n - 1] == '\n' || s->text.data[n - 1] == '\r'))
    n--;
  snprintf(d, sizeof(d), "%s: HTTP %d%s%.*s", what, s->status, n ? ": " : "",
           (int)n, n ? s->text.data : "");
  if (s->status == 404 || s->status == 410)
    h->deleted = true; /* nothing to DELETE */
  fail(h, ACP_ERR_PROTOCOL, d);
}

/* MARK: - Sockets (Private) */

static void on_alloc(uv_handle_t *hd, size_t hint, uv_buf_t *buf) {
  hsock *s = hd->data;
  (void)hint;
  if (!s->tls) {
    /* Plaintext is read where it is parsed: the free end of s->in (it
     * was copied there from a read buffer of its own, a megabyte per
     * 1 MiB event). Emptied by process(), it is released (on_read), so
     * an idle socket holds no buffer. */
    if (acp__buf_reserve(&s->in, READ_CHUNK) != 0) {
      *buf = uv_buf_init(NULL, 0);
      return;
    }
    size_t room = s->in.cap - s->in.len;
    *buf = uv_buf_init(s->in.data + s->in.len,
                       room > UINT32_MAX ? UINT32_MAX : (unsigned)room);
    return;
  }
  char *p = acp__malloc(&s->h->mem, READ_CHUNK);
  *buf = uv_buf_init(p, p ? (unsigned)READ_CHUNK : 0);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);

static void sock_read(hsock *s, bool on) {
  if (s->carrier) {
    if (!s->closed)
      h2_window(s, on);
    return;
  }
  if (s->closed || !s->connected)
    return;
  if (on && !s->reading) {
    if (uv_read_start((uv_stream_t *)&s->tcp, on_alloc, on_read) == 0)
      s->reading = true;
  } else if (!on && s->reading) {
    uv_read_stop((uv_stream_t *)&s->tcp);
    s->reading = false;
  }
}

/* Pausing the link pauses the SSE bodies, not a stream's head: a session
 * message may wait for that head (pump), and the link may be paused
 * because that very message is not sent yet (a 1 MiB prompt over the
 * link's mark): not reading the head would deadlock. Events read with the
 * head are held (deliver), at most one read's worth. */
static void sse_reading(hcli *h, bool on) {
  for (hsock *s = h->socks; s; s = s->next)
    if (s->kind == K_SSE && (on || s->head_done))
      sock_read(s, on);
}

static void on_written(uv_write_t *req, int status) {
  wreq *w = (wreq *)req;
  hsock *s = w->s;
  hcli *h = s->h;
  if (w->msg && --w->msg->writing == 0 && w->msg->dead)
    acp__free(&h->mem, w->msg);
  acp__free(&h->mem, w);
  if (status < 0 && !s->closed && s->kind == K_POST && s->msg &&
      !s->got_bytes) {
    /* Left for the read side to see (a reset arrives there too). */
    return;
  }
}

/* Bytes of b[0..nb) the kernel took at once (uv_try_write), 0 when writes
 * are queued (order) or it took none. What fits goes without a write
 * request, a copy and the epoll_ctl pair a queued uv_write costs (as the
 * WebSocket client's frames, remote_uv.c send_owned). An error is left to
 * the queued write and the read side to report. */
static size_t try_first(hsock *s, const uv_buf_t *b, unsigned nb) {
  if (uv_stream_get_write_queue_size((uv_stream_t *)&s->tcp) > 0)
    return 0;
  int r = uv_try_write((uv_stream_t *)&s->tcp, b, nb);
  return r > 0 ? (size_t)r : 0;
}

static int raw_write(hsock *s, const char *p, size_t n) {
  hcli *h = s->h;
  uv_buf_t t = uv_buf_init((char *)p, (unsigned)n);
  size_t done = try_first(s, &t, 1);
  if (done == n)
    return 0;
  p += done;
  n -= done;
  wreq *w = acp__malloc(&h->mem, sizeof(*w) + n);
  if (!w)
    return ACP_ERR_NOMEM;
  memcpy(w->data, p, n);
  w->s = s;
  w->msg = NULL;
  uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
  if (uv_write(&w->req, (uv_stream_t *)&s->tcp, &b, 1, on_written) != 0) {
    acp__free(&h->mem, w);
    return ACP_ERR_SYSTEM;
  }
  return 0;
}

/* A POST on a connected plaintext socket: its head (copied) and the
 * message's body in place, in one writev. Copying the body cost more than
 * the rest of a 1 MiB turn: two fresh 1 MiB buffers per POST (the request
 * and the write's copy) fault in every page, 60% of the client's CPU in
 * bench/run-remote.sh (docs/decisions.md). */
static int raw_write_post(hsock *s, const char *head, size_t hn, hmsg *m) {
  hcli *h = s->h;
  uv_buf_t t[2] = {uv_buf_init((char *)head, (unsigned)hn),
                   uv_buf_init(m->body, (unsigned)m->len)};
  size_t done = try_first(s, t, 2);
  if (done == hn + m->len)
    return 0; /* all of it: the message is not referenced */
  /* The rest is queued: what is left of the head (copied), then of the
   * body (in place, the message kept until written). */
  size_t hskip = done < hn ? done : hn, bskip = done - hskip;
  wreq *w = acp__malloc(&h->mem, sizeof(*w) + (hn - hskip));
  if (!w)
    return ACP_ERR_NOMEM;
  memcpy(w->data, head + hskip, hn - hskip);
  w->s = s;
  w->msg = m;
  uv_buf_t b[2];
  unsigned nb = 0;
  if (hn > hskip)
    b[nb++] = uv_buf_init(w->data, (unsigned)(hn - hskip));
  b[nb++] = uv_buf_init(m->body + bskip, (unsigned)(m->len - bskip));
  if (uv_write(&w->req, (uv_stream_t *)&s->tcp, b, nb, on_written) != 0) {
    acp__free(&h->mem, w);
    return ACP_ERR_SYSTEM;
  }
  m->writing++;
  return 0;
}

/* https: what the TLS filter has to send (handshake, records, alerts). */
static int tls_flush(hsock *s) {
  size_t n = acp__tls_pending(s->tls);
  if (n == 0)
    return 0;
  char *p = acp__malloc(&s->h->mem, n);
  if (!p)
    return ACP_ERR_NOMEM;
  n = acp__tls_take(s->tls, p, n);
  int rv = raw_write(s, p, n);
  acp__free(&s->h->mem, p);
  return rv;
}

static int sock_write(hsock *s, const char *p, size_t n) {
  if (!s->connected)
    return acp__buf_append(&s->pending, p, n);
  if (s->carrier)
    return h2_submit(s, p, n);
  if (!s->tls)
    return raw_write(s, p, n);
  int rv = acp__tls_write(s->tls, p, n);
  if (rv == 0)
    rv = tls_flush(s);
  return rv;
}

static void sock_ended(hsock *s, int err);

static void on_connect(uv_connect_t *req, int status) {
  hsock *s = req->data;
  hcli *h = s->h;
  if (s->closed)
    return;
  if (status < 0) {
    if (s->kind == K_DELETE) {
      sock_close(s);
      return;
    }
    char d[300];
    snprintf(d, sizeof(d), "cannot connect to %s:%s: %s", h->host, h->port,
             uv_strerror(status));
    fail(h, ACP_ERR_SYSTEM, d);
    return;
  }
  uv_tcp_nodelay(&s->tcp, 1);
  s->connected = true;
  if (h->tls) {
    /* A session kept from an earlier socket to the server is offered. */
    if (acp__tls_new(&s->tls, h->tls, h->host, h->port, &h->mem) != 0)
      s->tls = NULL;
    s->num = ++h->tls_socks;
  }
  if (h->tls && !s->tls) {
    if (s->kind == K_DELETE)
      sock_close(s);
    else
      fail(h, ACP_ERR_NOMEM, "out of memory");
    return;
  }
  if (s->kind == K_H2) {
    sock_read(s, true);
    if (!s->tls) {
      carrier_ready(s); /* h2c: prior knowledge */
      return;
    }
    /* Offer h2 and start the handshake; ALPN decides in tls_read. */
    if (acp__tls_offer_h2(s->tls) != 0 || acp__tls_read(s->tls, &s->in) != 0 ||
        tls_flush(s) != 0)
      fail(h, ACP_ERR_NOMEM, "out of memory");
    return;
  }
  if (s->pending.len > 0) {
    acp__buf p = s->pending;
    acp__buf_init(&s->pending, &h->mem, 0);
    int rv = sock_write(s, p.data, p.len);
    acp__buf_dispose(&p);
    if (rv != 0) {
      sock_ended(s, UV_EIO);
      return;
    }
  }
  sock_read(s, true); /* an SSE stream's head even if the link is paused */
}

static hsock *sock_new(hcli *h, int kind, const char *sid) {
  if (h->use_h2 && kind != K_H2)
    return stream_new(h, kind, sid);
  hsock *s = acp__calloc(&h->mem, 1, sizeof(*s));
  if (!s)
    return NULL;
  s->h = h;
  s->kind = kind;
  acp__buf_init(&s->pending, &h->mem, 0);
  acp__buf_init(&s->in, &h->mem, 0);
  acp__buf_init(&s->text, &h->mem, 0);
  acp__buf_init(&s->hdrs, &h->mem, 0);
  acp__buf_init(&s->out, &h->mem, 0);
  if (sid) {
    s->sid = acp__strdup(&h->mem, sid);
    if (!s->sid) {
      acp__free(&h->mem, s);
      return NULL;
    }
  }
  uv_tcp_init(h->loop, &s->tcp);
  s->tcp.data = s;
  s->next = h->socks;
  h->socks = s;
  s->creq.data = s;
  if (uv_tcp_connect(&s->creq, &s->tcp, (struct sockaddr *)&h->addr,
                     on_connect) != 0) {
    sock_close(s);
    return NULL;
  }
  return s;
}

static seen *seen_of(hcli *h, const char *sid) {
  for (seen *e = h->seen; e; e = e->next)
    if (strcmp(e->sid, sid) == 0)
      return e;
  return NULL;
}

/* The request head: method, the fixed headers, cookies, the caller's. */
static int put_head(hcli *h, acp__buf *b, const char *method, const char *sid,
                    const char *accept, size_t body_len, bool with_conn) {
  char line[512];
  int n = snprintf(line, sizeof(line), "%s %s HTTP/1.1\r\nHost: %s\r\n", method,
                   h->path, h->authority);
  int rv = acp__buf_append(b, line, (size_t)n);
  if (rv == 0 && accept) {
    n = snprintf(line, sizeof(line), "Accept: %s\r\n", accept);
    rv = acp__buf_append(b, line, (size_t)n);
  }
  if (rv == 0 && body_len != (size_t)-1) {
    n = snprintf(line, sizeof(line),
                 "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                 body_len);
    rv = acp__buf_append(b, line, (size_t)n);
  }
  if (rv == 0 && with_conn) {
    n = snprintf(line, sizeof(line), "Acp-Connection-Id: %s\r\n", h->conn_id);
    rv = acp__buf_append(b, line, (size_t)n);
  }
  if (rv == 0 && sid) {
    rv = acp__buf_append(b, "Acp-Session-Id: ", 16);
    if (rv == 0)
      rv = acp__buf_append(b, sid, strlen(sid));
    if (rv == 0)
      rv = acp__buf_append(b, "\r\n", 2);
  }
  const seen *e = sid && strcmp(method, "GET") == 0 ? seen_of(h, sid) : NULL;
  if (rv == 0 && e) {
    /* A session stream opened again starts after what we have. */
    n = snprintf(line, sizeof(line), "Last-Event-ID: %llu\r\n",
                 (unsigned long long)e->last);
    rv = acp__buf_append(b, line, (size_t)n);
  }
  if (rv == 0 && h->cookies.len > 0) {
    rv = acp__buf_append(b, "Cookie: ", 8);
    if (rv == 0)
      rv = acp__buf_append(b, h->cookies.data, h->cookies.len);
    if (rv == 0)
      rv = acp__buf_append(b, "\r\n", 2);
  }
  if (rv == 0 && h->extra.len > 0)
    rv = acp__buf_append(b, h->extra.data, h->extra.len);
  if (rv == 0)
    rv = acp__buf_append(b, "\r\n", 2);
  return rv;
}

/* Keep the cookies of an answer: name=value of each Set-Cookie (the
 * attributes are not needed to send them back to the one origin). */
static void keep_cookies(hcli *h, const acp__http_head *hd) {
  for (size_t i = 0; i < hd->nheaders; i++) {
    const acp__http_header *x = &hd->headers[i];
    if (x->name_len != 10 || strncasecmp(x->name, "Set-Cookie", 10) != 0)
      continue;
    const char *v = x->value;
    size_t n = x->value_len;
    const char *semi = memchr(v, ';', n);
    if (semi)
      n = (size_t)(semi - v);
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
      n--;
    const char *eq = memchr(v, '=', n);
    if (!eq || eq == v)
      continue;
    size_t nl = (size_t)(eq - v);
    /* Drop an earlier cookie of that name, then add this one. */
    acp__buf nb;
    acp__buf_init(&nb, &h->mem, 0);
    size_t off = 0;
    int rv = 0;
    while (off < h->cookies.len && rv == 0) {
      const char *c = h->cookies.data + off;
      const char *end = memchr(c, ';', h->cookies.len - off);
      size_t cl = end ? (size_t)(end - c) : h->cookies.len - off;
      if (!(cl > nl && c[nl] == '=' && memcmp(c, v, nl) == 0)) {
        if (nb.len > 0)
          rv = acp__buf_append(&nb, "; ", 2);
        if (rv == 0)
          rv = acp__buf_append(&nb, c, cl);
      }
      off += cl + (end ? 2 : 0);
    }
    if (rv == 0 && nb.len > 0)
      rv = acp__buf_append(&nb, "; ", 2);
    if (rv == 0)
      rv = acp__buf_append(&nb, v, n);
    if (rv != 0) {
      acp__buf_dispose(&nb);
      continue;
    }
    acp__buf_dispose(&h->cookies);
    h->cookies = nb;
  }
}

/* MARK: - Messages (Private) */

static hsock *find_stream(hcli *h, const char *sid) {
  for (hsock *s = h->socks; s; s = s->next)
    if (s->kind == K_SSE && !s->closed &&
        (sid ? (s->sid && strcmp(s->sid, sid) == 0) : s->sid == NULL))
      return s;
  return NULL;
}

static void open_stream(hcli *h, const char *sid) {
  acp__buf req;
  if (h->failed || !ready(h) || find_stream(h, sid))
    return;
  hsock *s = sock_new(h, K_SSE, sid);
  if (!s) {
    fail(h, ACP_ERR_NOMEM, "cannot open an SSE stream");
    return;
  }
  acp__buf_init(&req, &h->mem, 0);
  if (put_head(h, &req, "GET", sid, "text/event-stream", (size_t)-1, true) !=
          0 ||
      sock_write(s, req.data, req.len) != 0)
    fail(h, ACP_ERR_NOMEM, "cannot open an SSE stream");
  acp__buf_dispose(&req);
}

static char *dup_str(hcli *h, acp_json_doc *doc, const acp_json_val *v) {
  const char *p;
  size_t n;
  if (acp_json_type_of(v) != ACP_JSON_STRING ||
      acp_json_doc_str(doc, v, &p, &n) != 0 || memchr(p, '\r', n) ||
      memchr(p, '\n', n) || memchr(p, '\0', n) || n > 1024)
    return NULL;
  return acp__strndup(&h->mem, p, n);
}

/* A raw JSON string value [vb, ve) (quotes included) fit for a header
 * (dup_str's rules), copied; NULL if it is not one. Sets *esc when it has
 * escapes: then only a parse can say what it decodes to. */
static char *raw_str(hcli *h, const char *vb, const char *ve, bool *esc) {
  size_t n = (size_t)(ve - vb);
  if (n < 2 || *vb != '"' || ve[-1] != '"')
    return NULL;
  if (memchr(vb + 1, '\\', n - 2)) {
    *esc = true;
    return NULL;
  }
  for (const char *q = vb + 1; q < ve - 1; q++)
    if ((unsigned char)*q < 0x20)
      return NULL;
  if (n - 2 > 1024)
    return NULL;
  return acp__strndup(&h->mem, vb + 1, n - 2);
}

/* `parent`.sessionId in p[0..n) as a raw string value: [*vb, *ve). */
static bool member_sid(const char *p, size_t n, const char *parent, size_t plen,
                       const char **vb, const char **ve) {
  return acp__js_member_in(p, p + n, parent, plen, "sessionId", 9, vb, ve);
}

/* The route of the agent's request `ir` (raw id) to session `sid` (taken).
 * Only for a string or number id: another one is answered with id null
 * (invalid request), so its route would never be taken and would stay. */
static void add_route(hcli *h, const char *ir, size_t il, char *sid) {
  route *r = NULL;
  if (il == 0 || !(*ir == '"' || *ir == '-' || (*ir >= '0' && *ir <= '9')) ||
      !(r = acp__calloc(&h->mem, 1, sizeof(*r))) ||
      !(r->id = acp__strndup(&h->mem, ir, il))) {
    acp__free(&h->mem, r);
    acp__free(&h->mem, sid);
    return;
  }
  r->sid = sid;
  r->next = h->routes;
  h->routes = r;
}

/* We sent session/close `sid` as request `ir`: noted until answered. Why:
 * a session stream is a socket (HTTP/1.1) or a stream the server holds
 * open; a client that opens and closes sessions for a day kept one per
 * session ever opened. The copies are ours; on failure the stream just
 * stays open, as before. */
static void note_closing(hcli *h, const char *ir, size_t il, const char *sid) {
  route *r = acp__calloc(&h->mem, 1, sizeof(*r));
  if (!r || !(r->id = acp__strndup(&h->mem, ir, il)) ||
      !(r->sid = acp__strdup(&h->mem, sid))) {
    if (r)
      acp__free(&h->mem, r->id);
    acp__free(&h->mem, r);
    return;
  }
  r->next = h->closing;
  h->closing = r;
}

/* A response from the agent: if it answers our session/close with a
 * result, that session's stream is to end once the answer is delivered
 * (it may have come on that very stream). An error leaves it open. */
static void check_closing(hcli *h, const char *p, const char *e) {
  const char *ib, *ie, *vb, *ve;
  if (!acp__js_member(p, e, "id", 2, &ib, &ie))
    return;
  route *r = route_take(&h->closing, ib, (size_t)(ie - ib));
  if (!r)
    return;
  if (acp__js_member(p, e, "result", 6, &vb, &ve) && !h->closed_sid) {
    h->closed_sid = r->sid;
    r->sid = NULL;
  }
  route_free(h, r);
}

/* The agent closed session closed_sid: its stream ends (not to be opened
 * again: sock_close() is not an end sock_ended() sees) and its event
 * count is forgotten, so a session/load of it later opens a fresh stream
 * without Last-Event-ID. */
static void end_closed_session(hcli *h) {
  char *sid = h->closed_sid;
  h->closed_sid = NULL;
  hsock *s = find_stream(h, sid);
  if (s)
    sock_close(s);
  for (seen **pp = &h->seen; *pp; pp = &(*pp)->next)
    if (strcmp((*pp)->sid, sid) == 0) {
      seen *e = *pp;
      *pp = e->next;
      acp__free(&h->mem, e);
      break;
    }
  acp__free(&h->mem, sid);
}

/* inspect_inbound() for a message whose session id has escapes: parsed. */
static void inspect_inbound_parsed(hcli *h, const char *p, size_t n) {
  if (acp_json_doc_parse(h->doc, p, n, NULL) != 0)
    return;
  const acp_json_val *root = acp_json_doc_root(h->doc);
  const acp_json_val *method = acp_json_obj_getz(root, "method");
  const acp_json_val *id = acp_json_obj_getz(root, "id");
  if (!method) {
    const acp_json_val *res = acp_json_obj_getz(root, "result");
    char *sid = dup_str(h, h->doc, acp_json_obj_getz(res, "sessionId"));
    if (sid) {
      open_stream(h, sid);
      acp__free(&h->mem, sid);
    }
    return;
  }
  if (!id)
    return;
  const acp_json_val *params = acp_json_obj_getz(root, "params");
  char *sid = dup_str(h, h->doc, acp_json_obj_getz(params, "sessionId"));
  if (!sid)
    return;
  size_t il;
  const char *ir = acp_json_raw(id, &il);
  add_route(h, ir, il, sid);
}

/*
 * A message from the agent: note what it tells the transport. A response
 * that names a session (session/new, /load, /fork) opens that session's
 * stream, as the SDK's client does; the agent's request about a session
 * gets a route, so that our answer names the session too. Found with the
 * member scanner of ws.c, not a parse: the client's session parses every
 * message anyway, and a parse here was a second pass over each 1 MiB
 * update (docs/decisions.md). Only a session id with escapes is parsed.
 */
static void inspect_inbound(hcli *h, const char *p, size_t n) {
  const char *e = p + n, *mb, *me, *ib, *ie, *vb, *ve;
  bool esc = false;
  if (!acp__js_member(p, e, "method", 6, &mb, &me)) {
    if (h->closing)
      check_closing(h, p, e);
    if (!member_sid(p, n, "result", 6, &vb, &ve))
      return;
    char *sid = raw_str(h, vb, ve, &esc);
    if (esc) {
      inspect_inbound_parsed(h, p, n);
      return;
    }
    if (sid) {
      open_stream(h, sid);
      acp__free(&h->mem, sid);
    }
    return;
  }
  if (!acp__js_member(p, e, "id", 2, &ib, &ie) ||
      !member_sid(p, n, "params", 6, &vb, &ve))
    return;
  char *sid = raw_str(h, vb, ve, &esc);
  if (esc) {
    inspect_inbound_parsed(h, p, n);
    return;
  }
  if (sid)
    add_route(h, ib, (size_t)(ie - ib), sid);
}

static int on_event(void *ud, const char *type, size_t type_len,
                    const char *data, size_t data_len, const char *id,
                    size_t id_len) {
  hsock *s = ud;
  hcli *h = s->h;
  if (!(type_len == 7 && memcmp(type, "message", 7) == 0) || data_len == 0)
    return 0;
  if (s->sid && id_len > 0 && id_len <= 19) {
    /* A numbered session event: one we already have (replayed after a
     * reconnect) is dropped; otherwise it is the newest we have. */
    uint64_t v = 0;
    size_t i = 0;
    for (; i < id_len && id[i] >= '0' && id[i] <= '9'; i++)
      v = v * 10 + (uint64_t)(id[i] - '0');
    if (i == id_len && h->cut_armed && v > h->cut_after && s->events > 0 &&
        v != s->last_id) {
      /* The test hook: this event is lost in the cut (not taken, so not
       * in Last-Event-ID); the stream ends as if the server had reset
       * it, and sock_ended() opens it again. Over HTTP/2 sock_close()
       * resets just this stream (RST_STREAM CANCEL, flushed when
       * h2_recv is done) and the connection stays up; over HTTP/1.1 the
       * stream's socket closes. */
      h->cut_armed = false;
      if (h->cut_done)
        (*h->cut_done)++;
      sock_ended(s, UV_ECONNRESET);
      return ACP_ERR_CLOSED;
    }
    /* (The parser repeats the last id for an event without one: not a
     * number of its own, so not a duplicate.) */
    if (i == id_len && !(s->events > 0 && v == s->last_id)) {
      seen *e = seen_of(h, s->sid);
      s->last_id = v;
      if (e && v <= e->last) {
        s->events++; /* taken (the stream carries events), not delivered */
        return 0;
      }
      if (!e) {
        size_t sl = strlen(s->sid);
        e = acp__malloc(&h->mem, sizeof(*e) + sl + 1);
        if (!e)
          return ACP_ERR_NOMEM;
        memcpy(e->sid, s->sid, sl + 1);
        e->next = h->seen;
        h->seen = e;
      }
      e->last = v;
    }
  }
  s->events++;
  /* The SSE parser left the event's LF after it (data[data_len]): an
   * event of one data line (what servers send: JSON has no raw LF to
   * split) is already a line and goes on in place. One of several data
   * lines is copied, the LFs that joined them made spaces (line mode).
   * The parser never leaves a CR in data: CR ends an SSE line. It knows
   * when there was one data line: no pass over the event to look. */
  char *line = NULL;
  const char *msg = data;
  if (!acp__sse_one_line(&s->sse)) {
    line = acp__malloc(&h->mem, data_len + 1);
    if (!line)
      return ACP_ERR_NOMEM;
    memcpy(line, data, data_len);
    for (char *q = line; (q = memchr(q, '\n', data_len - (size_t)(q - line)));)
      *q++ = ' ';
    line[data_len] = '\n';
    msg = line;
  }
  inspect_inbound(h, msg, data_len);
  deliver(h, msg, data_len + 1);
  acp__free(&h->mem, line);
  if (h->closed_sid)
    end_closed_session(h); /* s itself, maybe: checked below */
  /* The link may have been closed or failed from in there. */
  return (s->closed || h->failed) ? ACP_ERR_CLOSED : 0;
}

/* The route noted for our answer to the agent's request `ir`, if any:
 * its session goes to m->sid. */
static void take_route(hcli *h, hmsg *m, const char *ir, size_t il) {
  route *r = route_take(&h->routes, ir, il);
  if (r) {
    m->sid = r->sid;
    r->sid = NULL;
    route_free(h, r);
  }
}

/* inspect_outbound() for a message with escapes where it matters. */
static int inspect_outbound_parsed(hcli *h, hmsg *m) {
  acp__free(&h->mem, m->sid);
  acp__free(&h->mem, m->req_id);
  m->sid = m->req_id = NULL;
  m->is_init = false;
  if (acp_json_doc_parse(h->doc, m->body, m->len, NULL) != 0)
    return 0; /* the agent answers a parse error; not ours to judge */
  const acp_json_val *root = acp_json_doc_root(h->doc);
  const acp_json_val *method = acp_json_obj_getz(root, "method");
  const acp_json_val *id = acp_json_obj_getz(root, "id");
  size_t il = 0;
  const char *ir = id ? acp_json_raw(id, &il) : NULL;
  if (method) {
    m->is_init = acp_json_str_eq(method, "initialize", 10) && id != NULL;
    m->sid = dup_str(
        h, h->doc,
        acp_json_obj_getz(acp_json_obj_getz(root, "params"), "sessionId"));
    if (ir && !(m->req_id = acp__strndup(&h->mem, ir, il)))
      return ACP_ERR_NOMEM;
    if (m->req_id && m->sid && acp_json_str_eq(method, "session/close", 13))
      note_closing(h, ir, il, m->sid);
    return 0;
  }
  if (ir)
    take_route(h, m, ir, il);
  return 0;
}

/* What the message we are about to send needs: its session, whether it
 * is initialize, a request's id. Scanned like inspect_inbound(): a parse
 * here was a pass over every 1 MiB prompt on top of the writer's. */
static int inspect_outbound(hcli *h, hmsg *m) {
  const char *p = m->body, *e = m->body + m->len, *mb, *me, *ib, *ie, *vb, *ve;
  bool esc = false;
  bool has_id = acp__js_member(p, e, "id", 2, &ib, &ie);
  if (!acp__js_member(p, e, "method", 6, &mb, &me)) {
    if (has_id)
      take_route(h, m, ib, (size_t)(ie - ib));
    return 0;
  }
  if (memchr(mb, '\\', (size_t)(me - mb)))
    return inspect_outbound_parsed(h, m);
  m->is_init = has_id && me - mb == 12 && memcmp(mb, "\"initialize\"", 12) == 0;
  if (member_sid(p, m->len, "params", 6, &vb, &ve)) {
    m->sid = raw_str(h, vb, ve, &esc);
    if (esc)
      return inspect_outbound_parsed(h, m);
  }
  if (has_id && !(m->req_id = acp__strndup(&h->mem, ib, (size_t)(ie - ib))))
    return ACP_ERR_NOMEM;
  if (m->req_id && m->sid && me - mb == 15 &&
      memcmp(mb, "\"session/close\"", 15) == 0)
    note_closing(h, ib, (size_t)(ie - ib), m->sid);
  return 0;
}

static void pump(hcli *h) {
  acp__buf req;
  if (h->failed || !ready(h) || !h->q_head)
    return;
  if (h->post && h->post->msg)
    return; /* one at a time, in order */
  if (h->conn_id[0] == '\0' && h->init_sent)
    return; /* initialize is being answered */
  hmsg *m = h->q_head;
  if (m->sid && !m->no_stream && h->conn_id[0] != '\0') {
    /* A session's message leaves once that session's stream is open (its
     * 200 head arrived), as the SDK's client does: the server routes the
     * session's messages, and the answer to this one, to the stream only
     * once it is registered. Sent earlier, the answer went on the
     * connection stream while the turn's updates went on the session
     * stream opened meanwhile, and the two sockets (through a proxy
     * especially) could deliver the answer first: an empty turn. */
    open_stream(h, m->sid);
    if (h->failed)
      return; /* fail() freed the queue, m with it */
    hsock *ss = find_stream(h, m->sid);
    if (ss && !(ss->head_done && ss->status == 200))
      return; /* on_head (or the stream's end) pumps again */
  }
  if (h->conn_id[0] == '\0' && !m->is_init) {
    fail(h, ACP_ERR_PROTOCOL,
         "the first message over Streamable HTTP must be initialize");
    return;
  }
  if (h->conn_id[0] != '\0' && m->is_init) {
    fail(h, ACP_ERR_PROTOCOL, "initialize was sent twice");
    return;
  }
  h->q_head = m->next;
  if (!h->q_head)
    h->q_tail = NULL;
  m->next = NULL;
  /* The session's stream was opened above (a failure there returned with
   * the message still queued, so no socket is opened for it here). */
  if (h->post && h->post->carrier)
    h->post = NULL; /* an HTTP/2 stream carries one request: a new one */
  if (!h->post) {
    h->post = sock_new(h, K_POST, NULL);
    if (!h->post) {
      hmsg_free(h, m);
      fail(h, ACP_ERR_NOMEM, "cannot open a socket");
      return;
    }
  } else {
    h->post->reused = true;
  }
  hsock *s = h->post;
  s->msg = m;
  s->got_bytes = false;
  if (m->is_init) {
    h->init_sent = true;
    /* initialize gets a deadline from when it leaves, like an upgrade. */
    uv_timer_start(&h->timer, on_connect_timeout, CONNECT_MS, 0);
  }
  acp__buf_init(&req, &h->mem, 0);
  int rv = put_head(h, &req, "POST", m->sid, "application/json", m->len,
                    !m->is_init);
  if (rv == 0 && s->connected && !s->tls && !s->carrier) {
    rv = raw_write_post(s, req.data, req.len, m);
  } else {
    if (rv == 0)
      rv = acp__buf_append(&req, m->body, m->len);
    if (rv == 0)
      rv = sock_write(s, req.data, req.len);
  }
  acp__buf_dispose(&req);
  if (rv != 0)
    fail(h, rv, "cannot send a POST");
}

/* MARK: - Answers (Private) */

static void post_done(hsock *s) {
  hcli *h = s->h;
  hmsg *m = s->msg;
  char d[200];
  s->msg = NULL;
  if (!m)
    return;
  if (m->is_init) {
    if (s->status != 200) {
      hmsg_free(h, m);
      fail_status(h, s, "initialize was refused");
      return;
    }
    if (s->conn_id[0] == '\0') {
      hmsg_free(h, m);
      fail(h, ACP_ERR_PROTOCOL,
           "the initialize answer has no Acp-Connection-Id");
      return;
    }
    /* Its body must answer this initialize (the SDK's client checks so). */
    const acp_json_val *root = NULL;
    if (acp_json_doc_parse(h->doc, s->text.data, s->text.len, NULL) == 0)
      root = acp_json_doc_root(h->doc);
    const acp_json_val *id = acp_json_obj_getz(root, "id");
    size_t il = 0;
    const char *ir = id ? acp_json_raw(id, &il) : NULL;
    if (!root || acp_json_obj_getz(root, "method") || !ir || !m->req_id ||
        strlen(m->req_id) != il || memcmp(ir, m->req_id, il) != 0) {
      hmsg_free(h, m);
      fail(h, ACP_ERR_PROTOCOL,
           "the initialize answer is not the response to initialize");
      return;
    }
    memcpy(h->conn_id, s->conn_id, sizeof(h->conn_id));
    uv_timer_stop(&h->timer);
    char *line = acp__malloc(&h->mem, s->text.len + 1);
    if (!line) {
      hmsg_free(h, m);
      fail(h, ACP_ERR_NOMEM, "out of memory");
      return;
    }
    for (size_t i = 0; i < s->text.len; i++)
      line[i] = (s->text.data[i] == '\n' || s->text.data[i] == '\r')
                    ? ' '
                    : s->text.data[i];
    line[s->text.len] = '\n';
    open_stream(h, NULL);
    if (h->ccb) {
      acp_remote_connect_cb cb = h->ccb;
      h->ccb = NULL;
      cb(h->link, 0, h->conn_id, h->cud);
      if (h->link)
        h->ccb = cb; /* kept for a later failure */
    }
    deliver(h, line, s->text.len + 1);
    acp__free(&h->mem, line);
  } else if (s->status < 200 || s->status > 299) {
    if (s->status == 401 || s->status == 403 || s->status == 404 ||
        s->status == 410 || !m->req_id) {
      /* The connection is unusable (or a notification or response was
       * lost, which nothing could report): the end. */
      hmsg_free(h, m);
      snprintf(d, sizeof(d), "the server refused a message");
      fail_status(h, s, d);
      return;
    }
    size_t n = s->text.len;
    char *t = acp__strndup(&h->mem, s->text.data ? s->text.data : "", n);
    deliver_error(h, m->req_id, s->status, t ? t : "");
    acp__free(&h->mem, t);
  }
  if (h->link)
    acp_uv_link_user_written(h->link, m->credit);
  hmsg_free(h, m);
}

static void answer_done(hsock *s) {
  hcli *h = s->h;
  if (s->kind == K_POST) {
    post_done(s);
    if (h->failed)
      return;
    /* Ready for the next answer on this socket, or done with it. */
    s->head_done = false;
    s->status = 0;
    acp__buf_clear(&s->text);
    if (!s->keep_alive)
      sock_close(s);
    pump(h);
  } else if (s->kind == K_DELETE) {
    sock_close(s);
  } else {
    /* A chunked SSE body that ended: the stream is over. */
    sock_ended(s, UV_EOF);
  }
}

static void on_head(hsock *s, const acp__http_head *hd) {
  hcli *h = s->h;
  s->status = hd->status;
  if (s->kind == K_DELETE && h->log) {
    /* The connection's end on the server: 2xx, or why not. */
    char line[200];
    snprintf(line, sizeof(line), "DELETE of connection %s: HTTP %d", h->conn_id,
             s->status);
    h->log(line, h->log_ud);
  }
  keep_cookies(h, hd);
  s->keep_alive =
      hd->minor_version >= 1 && !acp__http_has_token(hd, "Connection", "close");
  const acp__http_header *cid = acp__http_find(hd, "Acp-Connection-Id");
  s->conn_id[0] = '\0';
  if (cid && cid->value_len > 0 && cid->value_len < sizeof(s->conn_id))
    snprintf(s->conn_id, sizeof(s->conn_id), "%.*s", (int)cid->value_len,
             cid->value);
  acp__buf_clear(&s->text);
  if (s->kind == K_SSE && s->status == 200) {
    if (!s->sse_init) {
      acp__sse_init(&s->sse, &h->mem, h->max_msg);
      s->sse_init = true;
    }
  }
}

static int on_body(hsock *s, const char *p, size_t n) {
  hcli *h = s->h;
  if (s->kind == K_SSE && s->status == 200) {
    int rv = acp__sse_feed(&s->sse, p, n, on_event, s);
    if (rv == ACP_ERR_LIMIT)
      fail(h, ACP_ERR_LIMIT, "a message from the server is too large");
    return rv;
  }
  size_t cap =
      (s->kind == K_POST && s->msg && s->msg->is_init && s->status == 200)
          ? h->max_msg
          : ERR_BODY_MAX;
  if (s->text.len < cap) {
    size_t k = cap - s->text.len < n ? cap - s->text.len : n;
    if (acp__buf_append(&s->text, p, k) != 0)
      return ACP_ERR_NOMEM;
  } else if (s->kind == K_POST && s->msg && s->msg->is_init &&
             s->status == 200) {
    fail(h, ACP_ERR_LIMIT, "the initialize answer is too large");
    return ACP_ERR_LIMIT;
  }
  return 0;
}

/* Consume what arrived: heads, bodies, events. */
static void process(hsock *s) {
  hcli *h = s->h;
  if (s->kind == K_H2) {
    h2_recv(s);
    return;
  }
  while (!s->closed && !h->failed && s->in.len > 0) {
    if (!s->head_done) {
      acp__http_head hd;
      acp_ssize n = acp__http_parse_head(s->in.data, s->in.len, true, &hd);
      if (n == 0)
        return;
      if (n < 0 || acp__http_body_init(&s->body, &hd) != 0) {
        if (s->kind == K_DELETE) {
          sock_close(s);
          return;
        }
        fail(h, ACP_ERR_PROTOCOL, "the server's answer is not HTTP/1.1");
        return;
      }
      if (hd.status >= 100 && hd.status < 200) {
        acp__buf_consume(&s->in, (size_t)n);
        continue; /* 100 Continue and the like */
      }
      on_head(s, &hd);
      acp__buf_consume(&s->in, (size_t)n);
      s->head_done = true;
      if (s->kind == K_SSE && s->sid && s->status == 200) {
        pump(h); /* a message may wait for this session stream */
        if (s->closed || h->failed)
          return;
      }
      if (s->body.done) {
        answer_done(s);
        continue;
      }
    }
    const char *p;
    size_t pn;
    acp_ssize n = acp__http_body_feed(&s->body, s->in.data, s->in.len, &p, &pn);
    if (n < 0) {
      fail(h, ACP_ERR_PROTOCOL,
           "broken chunked framing in the server's answer");
      return;
    }
    if (pn > 0) {
      int rv = on_body(s, p, pn);
      if (rv == ACP_ERR_CLOSED)
        return;
      if (rv != 0) {
        fail(h, ACP_ERR_NOMEM, "out of memory");
        return;
      }
    }
    acp__buf_consume(&s->in, (size_t)n);
    if (s->body.done)
      answer_done(s);
    else if (n == 0)
      return;
  }
}

/* The socket's read side ended (EOF or an error). */
static void sock_ended(hsock *s, int err) {
  hcli *h = s->h;
  if (s->closed)
    return;
  if (s->kind == K_H2) {
    char d[200];
    if (!h->link) {
      sock_close(s); /* only a DELETE was left on it */
      return;
    }
    snprintf(d, sizeof(d), "the server closed the HTTP/2 connection (%s)",
             err == UV_EOF ? "end of stream" : uv_strerror(err));
    fail(h, ACP_ERR_CLOSED, d);
    return;
  }
  if (s->kind == K_DELETE) {
    sock_close(s);
    return;
  }
  if (s->kind == K_POST) {
    if (s->msg && s->head_done && s->body.mode == ACP__BODY_CLOSE) {
      s->keep_alive = false;
      answer_done(s);
      return;
    }
    if (s->msg && !s->got_bytes && s->reused) {
      /* A kept-alive socket the server closed as we reused it: the
       * request was not read. Send it again on a fresh one. */
      hmsg *m = s->msg;
      s->msg = NULL;
      m->next = h->q_head;
      h->q_head = m;
      if (!h->q_tail)
        h->q_tail = m;
      sock_close(s);
      pump(h);
      return;
    }
    if (s->msg) {
      char d[200];
      if (s->carrier)
        snprintf(d, sizeof(d), "the server %s the HTTP/2 stream of a POST",
                 err == UV_EOF ? "ended" : "reset");
      else
        snprintf(d, sizeof(d), "the server closed the connection (%s)",
                 err == UV_EOF ? "end of stream" : uv_strerror(err));
      fail(h, ACP_ERR_CLOSED, d);
      return;
    }
    sock_close(s); /* idle: the server let it go */
    return;
  }
  /* An SSE stream. */
  if (s->head_done && s->status != 200) {
    if (s->sid && s->status == 409) {
      /* That session's stream has another reader: its waiting messages
       * go without one (the next one tries to open it again). */
      for (hmsg *m = h->q_head; m; m = m->next)
        if (m->sid && strcmp(m->sid, s->sid) == 0)
          m->no_stream = true;
      sock_close(s);
      pump(h);
      return;
    }
    fail_status(h, s,
                s->sid ? "the session stream was refused"
                       : "the connection stream was refused");
    return;
  }
  if (s->sid && !s->head_done) {
    /* A message of that session may be waiting for it: as with the SDK's
     * client, a session stream that closes before it opened is an error,
     * not a silent retry. */
    fail(h, ACP_ERR_CLOSED, "the session stream closed before it opened");
    return;
  }
  if (s->sid) {
    /* A session stream ended. One that carried events is opened again at
     * once (with Last-Event-ID: what was in flight on it is replayed, a
     * cut event included); one that carried none is opened again by the
     * next message of that session (no loop against a server that ends
     * every stream). */
    char *sid = s->events > 0 ? acp__strdup(&h->mem, s->sid) : NULL;
    bool again = s->events > 0;
    sock_close(s);
    if (again && !sid) {
      fail(h, ACP_ERR_NOMEM, "cannot open the session stream again");
      return;
    }
    if (sid) {
      open_stream(h, sid);
      acp__free(&h->mem, sid);
    }
    return;
  }
  fail(h, ACP_ERR_CLOSED,
       err == UV_EOF ? "the server ended the connection stream"
                     : "the connection stream broke");
}

/* https: a socket's handshake just ended; tell the options' log how. */
static void log_tls(hsock *s) {
  hcli *h = s->h;
  char what[160], line[400];
  if (!h->log)
    return;
  acp__tls_describe(s->tls, what, sizeof(what));
  snprintf(line, sizeof(line), "socket %u (%s) to %s:%s: %s", s->num,
           s->kind == K_POST     ? "POST"
           : s->kind == K_SSE    ? (s->sid ? "session stream" : "SSE stream")
           : s->kind == K_DELETE ? "DELETE"
                                 : "HTTP/2, or HTTP/1.1 by ALPN",
           h->host, h->port, what);
  h->log(line, h->log_ud);
}

/* https: decrypt what the socket read into s->in. */
static void tls_read(hsock *s, const char *p, size_t n) {
  hcli *h = s->h;
  s->got_bytes = true;
  bool was_ready = acp__tls_ready(s->tls);
  int rv = acp__tls_feed(s->tls, p, n);
  if (rv == 0)
    rv = acp__tls_read(s->tls, &s->in);
  if (!was_ready && acp__tls_ready(s->tls))
    log_tls(s);
  if (tls_flush(s) != 0 && rv == 0)
    rv = ACP_ERR_NOMEM;
  if (rv == 0 && s->kind == K_H2 && !s->h2_ready && acp__tls_ready(s->tls)) {
    carrier_alpn(s);
    if (s->closed || h->failed)
      return;
  }
  if (s->in.len > 0)
    process(s);
  if (rv == 0 || s->closed)
    return;
  if (rv == ACP_ERR_CLOSED)
    sock_ended(s, UV_EOF);
  else if (s->kind == K_DELETE)
    sock_close(s);
  else if (rv == ACP_ERR_PROTOCOL)
    fail(h, ACP_ERR_PROTOCOL, acp__tls_error(s->tls));
  else
    fail(h, ACP_ERR_NOMEM, "out of memory");
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  hsock *s = st->data;
  if (n > 0 && s->tls) {
    tls_read(s, buf->base, (size_t)n);
  } else if (n > 0) {
    /* Read into s->in (on_alloc). */
    s->got_bytes = true;
    s->in.len += (size_t)n;
    process(s);
  } else if (n == UV_ENOBUFS) {
    /* Our read buffer could not be had: not the server ending a stream
     * (a session stream's end is taken calmly, and what was in flight on
     * it would be lost in silence), so the link fails. */
    fail(s->h, ACP_ERR_NOMEM, "out of memory");
  } else if (n < 0) {
    sock_ended(s, (int)n);
  }
  if (s->tls)
    acp__free(&s->h->mem, buf->base);
  else if (s->in.len == 0)
    acp__buf_dispose(&s->in);
}

/* MARK: - HTTP/2 (Private) */

/* Requests can be made: the address is known and, for ACP_REMOTE_HTTP2,
 * whether they go as HTTP/2 streams. */
static bool ready(const hcli *h) {
  return h->have_addr && (!h->want_h2 || h->mode_known);
}

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

/* The HTTP/2 connection, opened when the first stream needs it. */
static hsock *carrier_get(hcli *h) {
  if (h->carrier && !h->carrier->closed)
    return h->carrier;
  h->carrier = sock_new(h, K_H2, NULL);
  return h->carrier;
}

static hsock *stream_new(hcli *h, int kind, const char *sid) {
  hsock *c = carrier_get(h);
  if (!c)
    return NULL;
  hsock *s = acp__calloc(&h->mem, 1, sizeof(*s));
  if (!s)
    return NULL;
  s->h = h;
  s->kind = kind;
  s->carrier = c;
  s->keep_alive = false; /* one request per stream */
  acp__buf_init(&s->pending, &h->mem, 0);
  acp__buf_init(&s->in, &h->mem, 0);
  acp__buf_init(&s->text, &h->mem, 0);
  acp__buf_init(&s->hdrs, &h->mem, 0);
  acp__buf_init(&s->out, &h->mem, 0);
  if (sid && !(s->sid = acp__strdup(&h->mem, sid))) {
    acp__free(&h->mem, s);
    return NULL;
  }
  uv_timer_init(h->loop, &s->life);
  s->life.data = s;
  s->next = h->socks;
  h->socks = s;
  s->connected = c->h2_ready;
  s->reading = true;
  return s;
}

/* A stream's answer ended (END_STREAM), or the stream closed without. */
static void stream_complete(hsock *s, bool clean) {
  if (s->completed || s->closed)
    return;
  s->completed = true;
  if (clean && s->head_done)
    answer_done(s);
  else
    sock_ended(s, clean ? UV_EOF : UV_ECONNRESET);
}

static hsock *stream_of(nghttp2_session *ng, int32_t id) {
  hsock *s = nghttp2_session_get_stream_user_data(ng, id);
  return (s && !s->closed) ? s : NULL;
}

static int ng_on_header(nghttp2_session *ng, const nghttp2_frame *fr,
                        const uint8_t *name, size_t nlen, const uint8_t *value,
                        size_t vlen, uint8_t flags, void *ud) {
  (void)flags;
  (void)ud;
  if (fr->hd.type != NGHTTP2_HEADERS)
    return 0;
  hsock *s = stream_of(ng, fr->hd.stream_id);
  if (!s)
    return 0;
  if (nlen == 7 && memcmp(name, ":status", 7) == 0) {
    s->h2_status = 0;
    for (size_t i = 0; i < vlen && i < 3; i++)
      s->h2_status = s->h2_status * 10 + (value[i] - '0');
    acp__buf_clear(&s->hdrs);
    return 0;
  }
  if (acp__buf_append(&s->hdrs, (const char *)name, nlen) != 0 ||
      acp__buf_append(&s->hdrs, "", 1) != 0 ||
      acp__buf_append(&s->hdrs, (const char *)value, vlen) != 0 ||
      acp__buf_append(&s->hdrs, "", 1) != 0)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
  return 0;
}

/* A response head: given to on_head() in the shape of HTTP/1.1's. */
static void stream_head(hsock *s) {
  acp__http_head hd;
  memset(&hd, 0, sizeof(hd));
  hd.status = s->h2_status;
  hd.minor_version = 1;
  size_t off = 0;
  while (off < s->hdrs.len && hd.nheaders < ACP__HTTP_MAX_HEADERS) {
    acp__http_header *x = &hd.headers[hd.nheaders++];
    x->name = s->hdrs.data + off;
    x->name_len = strlen(x->name);
    off += x->name_len + 1;
    x->value = s->hdrs.data + off;
    x->value_len = strlen(x->value);
    off += x->value_len + 1;
  }
  on_head(s, &hd);
  s->keep_alive = false;
  s->head_done = true;
  /* A message may wait for this session stream (see pump); it is sent once
   * nghttp2 is out of its callbacks, from h2_recv. */
  if (s->kind == K_SSE && s->sid && s->status == 200)
    s->h->pump_due = true;
}

static int ng_on_frame(nghttp2_session *ng, const nghttp2_frame *fr, void *ud) {
  hsock *c = ud;
  if (c->closed || c->h->failed)
    return 0;
  if (fr->hd.type != NGHTTP2_HEADERS && fr->hd.type != NGHTTP2_DATA)
    return 0;
  hsock *s = stream_of(ng, fr->hd.stream_id);
  if (!s)
    return 0;
  if (fr->hd.type == NGHTTP2_HEADERS &&
      fr->headers.cat == NGHTTP2_HCAT_RESPONSE && !s->head_done) {
    if (s->h2_status >= 100 && s->h2_status < 200)
      return 0; /* 100 Continue and the like */
    stream_head(s);
  }
  if (!s->closed && (fr->hd.flags & NGHTTP2_FLAG_END_STREAM))
    stream_complete(s, true);
  return 0;
}

static int ng_on_data(nghttp2_session *ng, uint8_t flags, int32_t id,
                      const uint8_t *data, size_t len, void *ud) {
  hsock *c = ud;
  (void)flags;
  hsock *s = stream_of(ng, id);
  if (!s || c->closed) {
    nghttp2_session_consume(ng, id, len);
    return 0;
  }
  s->got_bytes = true;
  /* The window is given back as the data is taken: at once, or for an
   * SSE stream the link stopped reading, when it reads again. */
  if (s->kind == K_SSE && s->paused)
    s->unconsumed += len;
  else
    nghttp2_session_consume(ng, id, len);
  if (!s->head_done)
    return 0;
  int rv = on_body(s, (const char *)data, len);
  if (rv != 0 && rv != ACP_ERR_CLOSED && !c->h->failed)
    fail(c->h, ACP_ERR_NOMEM, "out of memory");
  return 0;
}

static int ng_on_close(nghttp2_session *ng, int32_t id, uint32_t err,
                       void *ud) {
  hsock *c = ud;
  hsock *s = stream_of(ng, id);
  if (!s)
    return 0;
  s->stream_done = true;
  if (!c->closed && !c->h->failed)
    stream_complete(s, err == NGHTTP2_NO_ERROR);
  return 0;
}

static ssize_t ng_read_body(nghttp2_session *ng, int32_t id, uint8_t *buf,
                            size_t len, uint32_t *flags,
                            nghttp2_data_source *src, void *ud) {
  hsock *s = src->ptr;
  (void)ng;
  (void)id;
  (void)ud;
  size_t n = s->out.len - s->out_off;
  if (n > len)
    n = len;
  memcpy(buf, s->out.data + s->out_off, n);
  s->out_off += n;
  if (s->out_off == s->out.len)
    *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

/* The request our HTTP/1.1 code wrote (head and body) as a stream: the
 * head is parsed back, Host becomes :authority, names are lowercased. */
static int h2_submit(hsock *s, const char *p, size_t n) {
  hsock *c = s->carrier;
  hcli *h = s->h;
  acp__http_head hd;
  nghttp2_nv nv[4 + ACP__HTTP_MAX_HEADERS];
  size_t k = 0;
  if (c->closed || !c->ng)
    return ACP_ERR_CLOSED;
  acp_ssize hl = acp__http_parse_head(p, n, false, &hd);
  if (hl <= 0)
    return ACP_ERR_INVALID_ARGUMENT;
  char *lower = acp__malloc(&h->mem, (size_t)hl);
  if (!lower)
    return ACP_ERR_NOMEM;
  const char *authority = h->authority;
  size_t alen = strlen(authority), off = 0;
#define NV(N, NL, V, VL)                                                       \
  nv[k++] = (nghttp2_nv){(uint8_t *)(N), (uint8_t *)(V), (NL), (VL),           \
                         NGHTTP2_NV_FLAG_NONE}
  NV(":method", 7, hd.method, hd.method_len);
  NV(":scheme", 7, s->h->tls ? "https" : "http", s->h->tls ? 5u : 4u);
  NV(":authority", 10, authority, alen);
  NV(":path", 5, hd.target, hd.target_len);
  for (size_t i = 0; i < hd.nheaders; i++) {
    const acp__http_header *x = &hd.headers[i];
    if ((x->name_len == 4 && strncasecmp(x->name, "Host", 4) == 0) ||
        (x->name_len == 10 && strncasecmp(x->name, "Connection", 10) == 0))
      continue;
    char *ln = lower + off;
    for (size_t j = 0; j < x->name_len; j++) {
      char ch = x->name[j];
      ln[j] = (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch;
    }
    off += x->name_len;
    NV(ln, x->name_len, x->value, x->value_len);
  }
#undef NV
  int rv = 0;
  nghttp2_data_provider prd;
  prd.source.ptr = s;
  prd.read_callback = ng_read_body;
  size_t blen = n - (size_t)hl;
  if (blen > 0)
    rv = acp__buf_append(&s->out, p + hl, blen);
  if (rv == 0) {
    int32_t id =
        nghttp2_submit_request(c->ng, NULL, nv, k, blen > 0 ? &prd : NULL, s);
    if (id < 0)
      rv = id == NGHTTP2_ERR_NOMEM ? ACP_ERR_NOMEM : ACP_ERR_PROTOCOL;
    else
      s->stream_id = id;
  }
  acp__free(&h->mem, lower);
  if (rv == 0)
    h2_flush(c);
  return rv;
}

/* Write what the session has to send (not from inside its callbacks:
 * h2_recv flushes when they are over). */
static void h2_flush(hsock *c) {
  hcli *h = c->h;
  if (c->closed || !c->ng || c->ng_busy)
    return;
  for (;;) {
    const uint8_t *d;
    ssize_t n = nghttp2_session_mem_send(c->ng, &d);
    if (n < 0) {
      fail(h, n == NGHTTP2_ERR_NOMEM ? ACP_ERR_NOMEM : ACP_ERR_PROTOCOL,
           "HTTP/2: cannot send");
      return;
    }
    if (n == 0)
      break;
    if (sock_write(c, (const char *)d, (size_t)n) != 0) {
      fail(h, ACP_ERR_NOMEM, "out of memory");
      return;
    }
  }
  if (!nghttp2_session_want_read(c->ng) && !nghttp2_session_want_write(c->ng))
    sock_ended(c, UV_EOF); /* after GOAWAY, every stream is over */
}

static void h2_recv(hsock *c) {
  hcli *h = c->h;
  if (!c->ng || c->in.len == 0)
    return;
  c->ng_busy = true;
  ssize_t n =
      nghttp2_session_mem_recv(c->ng, (const uint8_t *)c->in.data, c->in.len);
  c->ng_busy = false;
  if (c->closed || h->failed)
    return;
  if (n < 0) {
    char d[200];
    snprintf(d, sizeof(d), "HTTP/2: %s", nghttp2_strerror((int)n));
    fail(h, n == NGHTTP2_ERR_NOMEM ? ACP_ERR_NOMEM : ACP_ERR_PROTOCOL, d);
    return;
  }
  acp__buf_consume(&c->in, (size_t)n);
  h2_flush(c);
  if (h->pump_due && !c->closed && !h->failed) {
    h->pump_due = false;
    pump(h);
  }
}

/* An SSE stream the link stopped (or started again) reading. */
static void h2_window(hsock *s, bool on) {
  hsock *c = s->carrier;
  if (!on) {
    s->paused = true;
    return;
  }
  s->paused = false;
  if (s->unconsumed > 0 && !c->closed && c->ng && s->stream_id > 0 &&
      !s->stream_done) {
    nghttp2_session_consume(c->ng, s->stream_id, s->unconsumed);
    h2_flush(c);
  }
  s->unconsumed = 0;
}

/* The connection speaks HTTP/2 now: the session, our SETTINGS, and the
 * streams that waited for it. */
static void carrier_ready(hsock *c) {
  hcli *h = c->h;
  nghttp2_session_callbacks *cbs = NULL;
  nghttp2_option *opt = NULL;
  int rv = -1;
  c->nmem = (nghttp2_mem){&h->mem, nm_malloc, nm_free, nm_calloc, nm_realloc};
  if (nghttp2_session_callbacks_new(&cbs) == 0 &&
      nghttp2_option_new(&opt) == 0) {
    nghttp2_session_callbacks_set_on_header_callback(cbs, ng_on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, ng_on_frame);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, ng_on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, ng_on_close);
    nghttp2_option_set_no_auto_window_update(opt, 1);
    rv = nghttp2_session_client_new3(&c->ng, cbs, c, opt, &c->nmem);
  }
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, ACP__H2_MAX_STREAMS},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (uint32_t)H2_STREAM_WINDOW}};
  if (rv != 0 ||
      nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, 3) != 0 ||
      nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0,
                                            H2_CONN_WINDOW) != 0) {
    fail(h, ACP_ERR_NOMEM, "out of memory starting HTTP/2");
    return;
  }
  c->h2_ready = true;
  bool first = !h->mode_known;
  h->mode_known = true;
  h->use_h2 = true;
  /* Streams made while it connected: their requests go now. */
  for (hsock *s = h->socks; s && !c->closed && !h->failed; s = s->next) {
    if (s->carrier != c || s->closed || s->connected)
      continue;
    s->connected = true;
    if (s->pending.len > 0) {
      acp__buf q = s->pending;
      acp__buf_init(&s->pending, &h->mem, 0);
      rv = h2_submit(s, q.data, q.len);
      acp__buf_dispose(&q);
      if (rv != 0) {
        if (s->kind == K_DELETE)
          sock_close(s);
        else
          fail(h, rv, "cannot send a request over HTTP/2");
        return;
      }
    }
  }
  h2_flush(c);
  if (first)
    pump(h);
}

/* https: the handshake is over and ALPN has chosen. */
static void carrier_alpn(hsock *c) {
  hcli *h = c->h;
  const char *p = acp__tls_alpn(c->tls);
  if (p && strcmp(p, "h2") == 0) {
    carrier_ready(c);
    return;
  }
  if (h->mode_known) {
    /* A later connection (for the DELETE) to a server that no longer
     * offers h2: what it carried is dropped. */
    sock_close(c);
    return;
  }
  /* The server chose HTTP/1.1: this socket becomes the POST socket and
   * everything goes on as ACP_REMOTE_HTTP does. */
  h->mode_known = true;
  h->use_h2 = false;
  h->carrier = NULL;
  c->kind = K_POST;
  h->post = c;
  pump(h);
}

/* MARK: - Link ops (Private) */

static int op_write(acp_uv_link *l, const char *data, size_t len, void *ud) {
  hcli *h = ud;
  (void)l;
  if (h->failed)
    return ACP_ERR_CLOSED;
  while (len > 0) {
    const char *nl = memchr(data, '\n', len);
    if (!nl) {
      if (!h->line_drop &&
          acp__buf_append(&h->line, data, len) == ACP_ERR_LIMIT) {
        h->line_drop = true;
        acp__buf_clear(&h->line);
      }
      acp_uv_link_user_written(h->link, len);
      return 0;
    }
    size_t seg = (size_t)(nl - data);
    size_t total = h->line.len + seg;
    bool blank = true;
    for (size_t i = 0; i < h->line.len && blank; i++)
      blank = h->line.data[i] == ' ' || h->line.data[i] == '\t' ||
              h->line.data[i] == '\r';
    for (size_t i = 0; i < seg && blank; i++)
      blank = data[i] == ' ' || data[i] == '\t' || data[i] == '\r';
    if (h->line_drop || blank || total > h->max_msg) {
      acp_uv_link_user_written(h->link, seg + 1);
    } else {
      /* Not calloc: the body is written over at once (zeroing it first
       * was another pass over a 1 MiB prompt). */
      hmsg *m = acp__malloc(&h->mem, sizeof(*m) + total + 1);
      if (!m)
        return ACP_ERR_NOMEM;
      memset(m, 0, sizeof(*m));
      if (h->line.len)
        memcpy(m->body, h->line.data, h->line.len);
      memcpy(m->body + h->line.len, data, seg);
      m->len = total;
      if (m->len > 0 && m->body[m->len - 1] == '\r')
        m->len--;
      m->credit = seg + 1;
      if (inspect_outbound(h, m) != 0) {
        hmsg_free(h, m);
        return ACP_ERR_NOMEM;
      }
      if (h->q_tail)
        h->q_tail->next = m;
      else
        h->q_head = m;
      h->q_tail = m;
    }
    h->line_drop = false;
    acp__buf_clear(&h->line);
    data += seg + 1;
    len -= seg + 1;
  }
  pump(h);
  return 0;
}

static void op_read_changed(acp_uv_link *l, int reading, void *ud) {
  hcli *h = ud;
  (void)l;
  h->link_reading = reading != 0;
  if (h->link_reading)
    uv_timer_start(&h->resume, on_resume, 0, 0); /* not from in here */
  else
    sse_reading(h, false);
}

static void op_shutdown(acp_uv_link *l, void *ud) {
  (void)l;
  (void)ud;
}

static void on_delete_timeout(uv_timer_t *t) {
  hcli *h = t->data;
  for (hsock *s = h->socks; s; s = s->next)
    sock_close(s);
  close_timer(h);
}

static void op_close(acp_uv_link *l, void *ud) {
  hcli *h = ud;
  bool delete_sent = false;
  (void)l;
  h->link = NULL;
  h->ccb = NULL;
  uv_timer_stop(&h->resume);
  uv_timer_stop(&h->timer);
  for (hsock *s = h->socks; s; s = s->next)
    sock_close(s);
  /* End the connection on the server: its agent is stopped at once
   * rather than when a stream times out. */
  if (h->conn_id[0] != '\0' && !h->deleted && ready(h)) {
    hsock *s = sock_new(h, K_DELETE, NULL);
    acp__buf req;
    acp__buf_init(&req, &h->mem, 0);
    if (s && (put_head(h, &req, "DELETE", NULL, NULL, (size_t)-1, true) != 0 ||
              sock_write(s, req.data, req.len) != 0))
      sock_close(s);
    acp__buf_dispose(&req);
    if (s && !s->closed) {
      /* Its deadline: the timer is closed when the DELETE is over. Before,
       * the timer was closed here too, so a server that never answered
       * the DELETE kept the client's loop alive for ever. */
      uv_timer_start(&h->timer, on_delete_timeout, DELETE_MS, 0);
      delete_sent = true;
    }
  }
  h->handles++;
  uv_close((uv_handle_t *)&h->resume, on_hcli_handle_closed);
  if (!delete_sent)
    close_timer(h);
}

static const acp_uv_link_ops hcli_ops = {op_write, op_read_changed, op_shutdown,
                                         op_close};

/* MARK: - Connecting (Private) */

static void on_connect_timeout(uv_timer_t *t) {
  hcli *h = t->data;
  if (h->conn_id[0] == '\0')
    fail(h, ACP_ERR_TIMEOUT, "no answer to initialize");
}

static void on_resolved(uv_getaddrinfo_t *req, int status,
                        struct addrinfo *res) {
  hcli *h = req->data;
  h->resolving = false;
  if (!h->link) {
    uv_freeaddrinfo(res);
    hcli_unref(h);
    return;
  }
  if (status < 0 || !res) {
    char d[300];
    snprintf(d, sizeof(d), "cannot resolve %s: %s", h->host,
             uv_strerror(status));
    uv_freeaddrinfo(res);
    fail(h, ACP_ERR_NOT_FOUND, d);
    return;
  }
  memcpy(&h->addr, res->ai_addr, res->ai_addrlen);
  h->have_addr = true;
  uv_freeaddrinfo(res);
  if (h->want_h2 && !h->tls) {
    h->use_h2 = true; /* h2c with prior knowledge */
    h->mode_known = true;
  } else if (h->want_h2) {
    /* ALPN decides before the first request; the handshake gets the
     * deadline initialize would have. */
    if (!carrier_get(h)) {
      fail(h, ACP_ERR_NOMEM, "cannot open a socket");
      return;
    }
    uv_timer_start(&h->timer, on_connect_timeout, CONNECT_MS, 0);
    return;
  }
  pump(h);
}

/* MARK: - Connecting (Internal) */

int acp__remote_http_connect(acp_uv_link **out, uv_loop_t *loop,
                             const acp__url *u,
                             const acp_remote_client_options *opts,
                             acp_remote_connect_cb cb, void *user_data,
                             const acp_mem *mem) {
  acp_mem m;
  int rv = ACP_ERR_NOMEM;
  acp__mem_init(&m, mem);
  hcli *h = acp__calloc(&m, 1, sizeof(*h));
  if (!h)
    return ACP_ERR_NOMEM;
  h->mem = m;
  h->loop = loop;
  h->max_msg =
      opts->max_message ? opts->max_message : ACP_REMOTE_DEFAULT_MAX_MESSAGE;
  h->want_h2 = opts->version >= 2 && opts->transport == ACP_REMOTE_HTTP2;
  acp__buf_init(&h->extra, &h->mem, 0);
  acp__buf_init(&h->cookies, &h->mem, 8192);
  acp__buf_init(&h->line, &h->mem, h->max_msg);
  acp__buf_init(&h->hold, &h->mem, 0);
  h->host = acp__strndup(&h->mem, u->host, u->host_len);
  h->port = u->port ? acp__strndup(&h->mem, u->port, u->port_len)
                    : acp__strdup(&h->mem, u->tls ? "443" : "80");
  h->authority = acp__strndup(&h->mem, u->authority, u->authority_len);
  h->path = acp__strdup(&h->mem, u->path);
  if (!h->host || !h->port || !h->authority || !h->path ||
      acp_json_doc_new(&h->doc, &h->mem) != 0)
    goto fail;
  if (u->tls) {
    const acp_remote_tls *conf = opts->version >= 3 ? opts->tls : NULL;
    if (conf) {
      h->tls = (acp_remote_tls *)conf;
      acp__tls_conf_ref(h->tls);
    } else if ((rv = acp_remote_tls_new(&h->tls, ACP_REMOTE_TLS_CLIENT,
                                        &h->mem)) != 0) {
      goto fail;
    }
  }
  if (strlen(h->path) > 400) {
    rv = ACP_ERR_INVALID_ARGUMENT;
    goto fail;
  }
  if (opts->token) {
    if (strpbrk(opts->token, "\r\n")) {
      rv = ACP_ERR_INVALID_ARGUMENT;
      goto fail;
    }
    if (acp__buf_append(&h->extra, "Authorization: Bearer ", 22) != 0 ||
        acp__buf_append(&h->extra, opts->token, strlen(opts->token)) != 0 ||
        acp__buf_append(&h->extra, "\r\n", 2) != 0)
      goto fail;
  }
  for (size_t i = 0; opts->headers && opts->headers[i]; i++) {
    const char *hd = opts->headers[i];
    if (strpbrk(hd, "\r\n") || !strchr(hd, ':')) {
      rv = ACP_ERR_INVALID_ARGUMENT;
      goto fail;
    }
    if (acp__buf_append(&h->extra, hd, strlen(hd)) != 0 ||
        acp__buf_append(&h->extra, "\r\n", 2) != 0)
      goto fail;
  }
  rv = acp_uv_link_new_user(&h->link, loop, &hcli_ops, h, &h->mem);
  if (rv != 0)
    goto fail;
  h->ccb = cb;
  h->cud = user_data;
  if (opts->version >= 4) {
    h->log = opts->log;
    h->log_ud = opts->log_user_data;
  }
  uv_timer_init(loop, &h->resume);
  uv_timer_init(loop, &h->timer);
  h->resume.data = h;
  h->timer.data = h;
  struct addrinfo hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  h->gai.data = h;
  h->resolving = true;
  if (uv_getaddrinfo(loop, &h->gai, on_resolved, h->host, h->port, &hints) !=
      0) {
    h->resolving = false;
    fail(h, ACP_ERR_NOT_FOUND, "cannot resolve the host");
  }
  *out = h->link;
  return 0;
fail:
  hcli_free(h);
  return rv;
}

/* MARK: - Test hooks (Private) */

int acp__remote_http_cut_session_stream(acp_uv_link *link, uint64_t after,
                                        unsigned *done) {
  hcli *h = link ? acp__uv_link_user_data(link, op_write) : NULL;
  if (!h)
    return ACP_ERR_INVALID_ARGUMENT;
  h->cut_armed = true;
  h->cut_after = after;
  h->cut_done = done;
  return 0;
}

unsigned acp__remote_http_session_streams(acp_uv_link *link) {
  hcli *h = link ? acp__uv_link_user_data(link, op_write) : NULL;
  unsigned n = 0;
  for (const hsock *s = h ? h->socks : NULL; s; s = s->next)
    n += s->kind == K_SSE && s->sid && !s->closed;
  return n;
}

/* MARK: - Queries (Public) */

const char *acp_remote_http_version(const acp_uv_link *link) {
  hcli *h = link ? acp__uv_link_user_data(link, op_write) : NULL;
  if (!h || (!h->mode_known && h->want_h2))
    return NULL;
  return h->use_h2 ? "HTTP/2" : "HTTP/1.1";
}
