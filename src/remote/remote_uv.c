/*
 * The runtime half of libacp-remote: TCP on the loop, the handshake and the
 * frame codec of ws.c, and a user link (acp_uv_link_new_user()) per
 * connection so that the roles run over it as over stdio.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "acp/json.h"
#include "remote_int.h"
#include "tls_int.h"
#include "uv_internal.h"

/* Read buffers are taken per read and given back after it (every consumer
 * copies what it keeps), so an idle connection holds none: 64 KiB stays
 * under glibc's mmap threshold, so taking one is cheap. */
#define READ_CHUNK ((size_t)64 << 10)
/* A message or line buffer grown past this is released after use, so one
 * big message does not stay with an idle connection. */
#define KEEP_MAX ((size_t)1 << 20)
/*
 * The start of an outgoing line that has not ended yet (the agent wrote
 * part of it) is held in the connection's line buffer. Its bytes stay in
 * the link's queue, uncredited, up to LINE_HOLD, and go with the line's
 * frame or event when it ends: a line is then credited when the socket or
 * stream takes it, as a line read whole is. Crediting them at once, as
 * before, left only the last read's bytes of each line in the queue, so an
 * agent writing 64 KiB updates to a client that stopped reading was read
 * on and on: over 100 MiB held in `acp serve` (WebSocket and HTTP/2 alike)
 * before anything stopped it. Past LINE_HOLD, well under the coupling's
 * 1 MiB high-water mark, the rest is credited at once: a line longer than
 * the mark, held whole, would stop its own source before it could end.
 */
#define LINE_HOLD ((size_t)256 << 10)

/* How much of `len` new bytes of a partial line to hold back (the rest is
 * credited at once), with *held bytes of it held already. */
static size_t line_hold(size_t *held, size_t len) {
  size_t room = *held < LINE_HOLD ? LINE_HOLD - *held : 0;
  size_t n = len < room ? len : room;
  *held += n;
  return n;
}
#define HANDSHAKE_MS 10000

/* MARK: - Types */

typedef struct wconn wconn;

typedef struct wwrite {
  uv_write_t req;
  wconn *c;
  size_t credit; /* link bytes this frame completes */
  unsigned gen;  /* c->credit_gen when queued (see hx_detach) */
  size_t len;
  struct wwrite *next_done;
  char data[];
} wwrite;

/* C_WAIT: a Streamable HTTP initialize waits for the agent's answer;
 * C_SSE: the socket carries an SSE response until it closes;
 * C_H2: the socket is an HTTP/2 connection (h2.c). */
enum { C_HANDSHAKE = 0, C_OPEN, C_DONE, C_WAIT, C_SSE, C_H2 };

typedef struct hconn hconn;
/* What a socket is to its Streamable HTTP connection. */
/* H_HELD: a POST waiting for the agent to read (see hc_hold). */
enum { H_NONE = 0, H_WAITER, H_STREAM, H_SESSION, H_HELD };

/*
 * Recently ended Streamable HTTP connections remembered per server, so
 * that their closing DELETE is answered 202: every id ended in the last
 * GONE_MS, up to GONE_MAX of them (44 bytes each, 180 KiB at most, taken
 * as needed and given back when the window empties). A fixed ring of the
 * last 32 answered 404 once more than 32 connections ended before a
 * DELETE came (a busy server, a client slow to close). Past GONE_MAX ends
 * within GONE_MS the oldest are forgotten first.
 */
#define GONE_MS 60000u
#define GONE_MAX 4096u

typedef struct gone_id {
  char id[36];
  uint64_t at; /* uv_now() when it ended */
} gone_id;

struct acp_remote_server {
  acp_mem mem;
  uv_loop_t *loop;
  uv_tcp_t tcp;
  acp_remote_server_options opts;
  char *token;
  char **hosts;  /* NULL-terminated, allowed Host/Origin authorities */
  size_t nhosts; /* slots filled (or tried) in hosts */
  acp_remote_accept_cb cb;
  void *ud;
  int port;
  unsigned nconns;
  wconn *conns;  /* every connection not yet freed */
  hconn *hconns; /* Streamable HTTP connections with a link */
  unsigned nhconns;
  bool closing;
  char *aff_name;      /* the affinity cookie's name, or NULL */
  const char *cur_aff; /* during the accept callback */
  acp_remote_tls *tls; /* a reference, or NULL: plain TCP */
  uv_tcp_t spare;      /* takes a connection we cannot afford (drop_one) */
  bool spare_busy;     /* ... closing it now */
  bool drop_pending;   /* ... and another waits for it */
  bool tcp_closed;     /* the listening handle's close has completed */
  /* Ids of the Streamable HTTP connections that ended lately (a FIFO
   * ring, oldest at gone_head): a DELETE of one of them is answered 202,
   * as for one still ending. */
  gone_id *gone;
  unsigned gone_cap, gone_head, ngone;
  unsigned gone_max;          /* GONE_MAX (a test hook may lower it) */
  uint64_t gone_ms;           /* GONE_MS (likewise) */
  const uint64_t *gone_clock; /* test hook: the window's clock, or NULL */
  /* Test hook (acp__remote_server_cut_session_stream): the next session
   * event numbered above cut_after is held back and its stream reset. */
  bool cut_armed;
  uint64_t cut_after;
  unsigned *cut_done;
  /* One READ_CHUNK read buffer shared by the server's connections: libuv
   * asks for a buffer right before each read callback, on one thread, so
   * one is enough; kept here rather than on each connection, which would
   * hold 64 KiB per idle socket. */
  char *rbuf;
};

struct wconn {
  acp_mem mem;
  uv_loop_t *loop;
  uv_tcp_t tcp;
  uv_timer_t timer;            /* handshake deadline, then pings */
  acp_remote_server *rbuf_srv; /* this read's buffer is its rbuf */
  uv_timer_t resume;           /* feeds held frames from the loop */
  uv_connect_t creq;
  uv_getaddrinfo_t gai;
  acp_remote_server *srv;
  wconn *prev, *next;
  int state;
  bool client;
  bool tcp_reading;
  bool tcp_closed;
  bool wr_eof;        /* no more frames: close sent or socket gone */
  bool lingering;     /* write side shut, reading to the peer's end */
  bool shut_done;     /* lingering: all we sent is in the kernel, FIN too */
  uint64_t linger_at; /* uv_now() when shut_done became true */
  uv_shutdown_t shreq;
  unsigned handles; /* handles not yet closed */
  unsigned writes;  /* uv_writes in flight */
  acp__buf in;      /* handshake bytes, then frames held while paused */
  acp__ws ws;
  acp_uv_link *link; /* NULL once the link let go */
  bool link_reading;
  bool ended;         /* the link's read side was ended */
  acp__buf line;      /* an outgoing line not complete yet */
  size_t line_credit; /* bytes of it not yet credited (up to LINE_HOLD) */
  bool line_drop;     /* discarding an over-long line up to its '\n' */
  bool no_credit;     /* framing bytes already reported sent */
  wwrite *last;       /* newest write in flight */
  /* Link bytes the writes in flight of this credit_gen complete. An
   * HTTP/1.1 exchange that lets go of its connection (hx_detach) hands
   * them back at once and starts a new generation: what is still queued
   * is then written or cancelled with no link to credit. */
  size_t wr_credit;
  unsigned credit_gen;
  uint64_t ping_ms;
  bool heard;   /* bytes arrived since the last ping */
  uint64_t rng; /* mask generator (client) */
  char conn_id[37];
  /* client */
  char *host;
  char *port;
  acp__buf req; /* the upgrade request, sent once connected */
  char accept[29];
  acp_remote_connect_cb ccb;
  void *cud;
  void (*clog)(const char *line, void *user_data); /* options' log */
  void *clog_ud;
  /* Streamable HTTP over HTTP/1.1: the socket is one exchange at a time */
  acp__hx hx;
  size_t h1_total;   /* bytes of the request being served, not consumed */
  size_t h1_want;    /* bytes of the request whose body is still coming */
  bool read_in;      /* this read goes to the free end of `in` (on_alloc) */
  bool h2_maybe;     /* nothing read yet: the HTTP/2 preface may come */
  acp__h2 *h2;       /* C_H2: the HTTP/2 connection */
  uint64_t h2_quiet; /* ms without streams or bytes */
  /* TLS (tls.c), or NULL: between the socket and everything above. */
  acp__tls *tls;
  bool tls_ended; /* the peer's close_notify came */
  /* Server sockets: output queued in libuv (the kernel took no more) with
   * not a byte written for stall_ms ends the socket and what it carries
   * (on_wstall). Progress is bytes written, not messages completed: a big
   * message read slowly is not a stall. */
  uv_timer_t wstall;
  uint64_t stall_ms;  /* 0 or UINT64_MAX: never (clients) */
  uint64_t wr_handed; /* bytes ever handed to the socket (libuv) */
  uint64_t wr_seen;   /* bytes the peer took (wstall_taken) at the last look */
  uint64_t wr_moved;  /* uv_now() when wr_seen last changed */
  bool stalled;       /* ended by on_wstall */
  /* Handed to another process (acp__remote_link_handed()): our copy of
   * the socket is closed and the link's end sends nothing. */
  bool handed;
};

/*
 * A Streamable HTTP ACP connection: one link whose messages arrive in
 * POST bodies and leave on the GET SSE stream. It outlives the sockets
 * that carry it; until the stream is open the agent's lines wait in
 * `pend` (already SSE events) and are reported sent only once written,
 * so the link's queue, and the coupling to the agent's stdout, stay real.
 */
struct hconn {
  acp_mem mem;
  acp_remote_server *srv; /* NULL once the server closed */
  hconn *prev, *next;
  acp_uv_link *link; /* NULL once the owner closed it */
  uv_timer_t idle;   /* no stream for a ping interval: the client is gone */
  uint64_t idle_ms;
  uint64_t hold_ms; /* a POST waits this long for the agent to read */
  size_t max_msg;
  bool ended;
  bool line_drop;
  acp__buf line;      /* an outgoing line not complete yet */
  size_t line_credit; /* bytes of it not yet credited (up to LINE_HOLD) */
  acp__buf pend;      /* SSE events waiting for the stream */
  size_t pend_credit;
  acp__hx *waiter;   /* the initialize POST waiting for its answer */
  acp__hx *stream;   /* the connection-scoped SSE stream */
  acp__hx *sessions; /* session-scoped SSE streams (held open) */
  char *init_id;     /* raw JSON id of initialize, until it is answered */
  /* Session streams by session id, and the session-scoped requests whose
   * answers go there (see hc_route_of). */
  struct hroute *routes;
  struct hreq *reqs;
  unsigned nreqs;
  struct hkept *kept_spare; /* the last kept event dropped, for reuse */
  /* POSTs held while the agent is not reading, oldest first; `hold`
   * releases them (from the loop) or answers the ones past their
   * deadline. */
  struct hheld *held, *held_tail;
  unsigned nheld;
  uv_timer_t hold;
  /* A session whose stream is gone while its events wait for the next
   * one (hroute.stall_since) for stall_ms: the client is not coming back
   * for them, and the connection ends (on_hc_stall). */
  uv_timer_t stall;
  uint64_t stall_ms; /* UINT64_MAX: never */
  unsigned handles;  /* of idle, hold and stall, not yet closed */
  char id[37];
  char aff[37]; /* affinity value (empty: no cookie) */
};

static void hc_detach(wconn *c);
static void hx_detach(acp__hx *x);
static void hc_route_gone(hconn *hc, acp__hx *x);
static void hc_unhold(hconn *hc, acp__hx *x);
static void hc_routes_free(hconn *hc);
static struct hheld *hc_take_held(hconn *hc, const acp__hx *x);
static const acp__hx_ops h1_ops;
static wconn *hx_conn(acp__hx *x);

/* MARK: - Helpers (Private) */

static void conn_unref(wconn *c);

static void on_closed(uv_handle_t *h) {
  wconn *c = h->data;
  c->handles--;
  conn_unref(c);
}

static void conn_free(wconn *c) {
  if (c->srv) {
    if (c->prev)
      c->prev->next = c->next;
    else
      c->srv->conns = c->next;
    if (c->next)
      c->next->prev = c->prev;
    c->srv->nconns--;
  }
  acp__ws_dispose(&c->ws);
  acp__buf_dispose(&c->in);
  acp__buf_dispose(&c->line);
  acp__buf_dispose(&c->req);
  acp__free(&c->mem, c->host);
  acp__free(&c->mem, c->port);
  acp__tls_free(c->tls);
  acp__free(&c->mem, c);
}

/* Memory goes when both handles are closed, no write is in flight and the
 * link has let go. */
static void conn_unref(wconn *c) {
  if (c->handles == 0 && c->writes == 0 && c->link == NULL && c->tcp_closed)
    conn_free(c);
}

static void h2_drop(wconn *c);

static void conn_close_tcp(wconn *c) {
  hc_detach(c);
  h2_drop(c);
  if (c->tcp_closed)
    return;
  c->tcp_closed = true;
  c->wr_eof = true;
  c->tcp_reading = false;
  c->handles += 4;
  uv_close((uv_handle_t *)&c->tcp, on_closed);
  uv_close((uv_handle_t *)&c->timer, on_closed);
  uv_close((uv_handle_t *)&c->resume, on_closed);
  uv_close((uv_handle_t *)&c->wstall, on_closed);
}

static void client_fail(wconn *c, int err, const char *detail);
static void refuse_msg(wconn *c, int st, const char *d);

/*
 * A finished connection reads and drops what the peer still sends until
 * it ends, goes quiet for LINGER_IDLE_MS, or LINGER_MAX_MS have passed;
 * both count from the moment our last bytes (a close frame, an error page)
 * and our FIN are in the kernel, not from the moment we decided to close:
 * a peer that stalls (a loaded machine) while our close frame waits in its
 * socket must not find a reset there instead (issue 14: close 1006 seen
 * for 1009). Until then LINGER_FLUSH_MS bounds a peer that never reads.
 * The bounds are generous on purpose: a lingering socket costs a few
 * hundred bytes and reads only to discard, while closing on a peer that is
 * still sending makes the kernel answer its next segment with a reset,
 * which loses the close frame it has not read yet.
 */
#define LINGER_IDLE_MS 10000
#define LINGER_MAX_MS 30000
#define LINGER_FLUSH_MS 30000

static void on_linger_timeout(uv_timer_t *t) {
  wconn *c = t->data;
  if (c->lingering && !c->tcp_closed) {
    /* What already arrived is read and dropped first: close() on a socket
     * with unread bytes sends a reset instead of ending quietly. */
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0) {
      char sink[4096];
      for (int i = 0; i < 256; i++) {
        ssize_t r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (r <= 0)
          break;
      }
    }
  }
  conn_close_tcp(c);
}

static void on_shut(uv_shutdown_t *req, int status) {
  wconn *c = req->data;
  c->handles--;
  if (status < 0) {
    conn_close_tcp(c);
  } else if (!c->tcp_closed) {
    /* Everything we meant to send is written: the linger starts now. */
    c->shut_done = true;
    c->linger_at = uv_now(c->tcp.loop);
    uv_timer_start(&c->timer, on_linger_timeout, LINGER_IDLE_MS, 0);
  }
  conn_unref(c);
}

static void on_tcp_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static int tls_flush(wconn *c, size_t credit);

/* End gracefully: what is queued (a close frame, an error page) is sent,
 * the write side shut down, and the socket read and discarded until the
 * peer closes (or a second passes). Closing at once while the peer still
 * sends would make the kernel answer with a reset that can overtake our
 * close frame (the peer would see 1006 instead of 1009). */
static void conn_finish(wconn *c) {
  hc_detach(c);
  h2_drop(c);
  if (c->tcp_closed || c->lingering)
    return;
  c->lingering = true;
  c->wr_eof = true;
  if (c->tls) {
    acp__tls_close(c->tls); /* close_notify, before our FIN */
    (void)tls_flush(c, 0);
  }
  uv_timer_stop(&c->resume);
  uv_timer_start(&c->timer, on_linger_timeout, LINGER_FLUSH_MS, 0);
  c->shreq.data = c;
  if (uv_shutdown(&c->shreq, (uv_stream_t *)&c->tcp, on_shut) != 0) {
    conn_close_tcp(c);
    return;
  }
  c->handles++;
  if (!c->tcp_reading &&
      uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_tcp_read) == 0)
    c->tcp_reading = true;
}

static void next_mask(wconn *c, uint8_t m[4]) {
  /* xorshift64*, seeded from the system's random source: masks need to be
   * unpredictable to the page that could choose our payload (a browser),
   * which a CLI has not. */
  c->rng ^= c->rng >> 12;
  c->rng ^= c->rng << 25;
  c->rng ^= c->rng >> 27;
  uint64_t v = c->rng * 2685821657736338717ull;
  memcpy(m, &v, 4);
}

/* End the link's read side once. */
static void end_link(wconn *c, int status) {
  if (c->ended)
    return;
  c->ended = true;
  if (c->link)
    acp_uv_link_user_end(c->link, status);
}

/* MARK: - Writing (Private) */

static void report_credit(wconn *c, size_t n) {
  acp_uv_link *l = c->link ? c->link : (c->hx.hc ? c->hx.hc->link : NULL);
  if (n > 0 && l && !c->no_credit)
    acp_uv_link_user_written(l, n);
}

static void h2_pump(wconn *c);

/* A write goes in flight with its credit (reported when it completes). */
static void wr_queued(wconn *c, wwrite *w) {
  w->gen = c->credit_gen;
  c->wr_credit += w->credit;
  c->writes++;
  c->last = w;
}

static void on_tcp_write(uv_write_t *req, int status) {
  wwrite *w = (wwrite *)req;
  wconn *c = w->c;
  size_t credit = 0;
  if (w->gen == c->credit_gen) {
    credit = w->credit;
    c->wr_credit -= credit;
  } /* else handed back when its exchange let go (hx_detach) */
  c->writes--;
  if (c->last == w)
    c->last = NULL;
  acp__free(&c->mem, w);
  if (status < 0 && (c->link || c->hx.hc || c->h2) && !c->tcp_closed) {
    if (c->link)
      acp_uv_link_user_write_failed(c->link, status);
    else
      report_credit(c, credit); /* an exchange's link goes on */
    end_link(c, status);
    conn_close_tcp(c);
  } else {
    report_credit(c, credit);
    if (c->h2 && !c->tcp_closed && !c->lingering)
      h2_pump(c);
  }
  conn_unref(c);
}

/* MARK: - Write stalls (Private) */

static void hc_end(hconn *hc, int status);

/* The kernel has taken nothing of this socket's queued output for
 * stall_ms: the peer keeps the socket open but does not read (or cannot:
 * its window is shut). What the socket carries ends as for a vanished
 * peer, with UV_ETIMEDOUT (the TS SDK's server does the same after
 * maxOutputStallMs): a WebSocket's link, the Streamable HTTP connection of
 * an HTTP/1.1 stream, and those of every stream of an HTTP/2 socket (see
 * h2_release). The socket is closed, not finished: a peer that does not
 * read would not take a close frame or a GOAWAY either. */
static void wstall_end(wconn *c) {
  c->stalled = true;
  if (c->link) {
    acp_uv_link_user_write_failed(c->link, UV_ETIMEDOUT);
    end_link(c, UV_ETIMEDOUT);
  }
  if (c->hx.hc && c->hx.role != H_HELD)
    hc_end(c->hx.hc, UV_ETIMEDOUT);
  conn_close_tcp(c);
}

/* Bytes of ours the peer has taken: all we handed to the socket minus what
 * libuv still holds and what the kernel has not had acknowledged yet.
 * The kernel's part counts: its send buffer takes new bytes only once a
 * good share of it is free (at slow reading rates that can take longer
 * than stall_ms on an autotuned buffer of megabytes), while its unsent or
 * unacknowledged bytes fall with every read of the peer. Where the kernel
 * does not say (no TIOCOUTQ), libuv's queue alone is looked at. */
static uint64_t wstall_taken(wconn *c) {
  uint64_t t =
      c->wr_handed - uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
#ifdef TIOCOUTQ
  uv_os_fd_t fd;
  int outq = 0;
  if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 &&
      ioctl(fd, TIOCOUTQ, &outq) == 0 && outq > 0 && (uint64_t)outq <= t)
    t -= (uint64_t)outq;
#endif
  return t;
}

static uint64_t wstall_tick(const wconn *c) {
  return c->stall_ms >= 4 ? c->stall_ms / 4 : 1;
}

static void h2_check(wconn *c);

/* Look at the socket's progress a few times per stall_ms: the bytes
 * written so far are those handed to libuv minus what it still holds,
 * which counts partial writes of a big message too. The same timer looks
 * at the streams of an HTTP/2 socket (acp__h2_stall_check: the same rule
 * per stream, for a client that reads the socket but gives a stream no
 * window), so a connection costs one timer, not one per stream. */
static void on_wstall(uv_timer_t *t) {
  wconn *c = t->data;
  if (c->tcp_closed || c->lingering)
    return; /* the linger has its own bound (LINGER_FLUSH_MS) */
  uint64_t now = uv_now(t->loop), tick = wstall_tick(c), next = UINT64_MAX;
  if (c->writes > 0) {
    uint64_t taken = wstall_taken(c);
    if (taken != c->wr_seen) {
      c->wr_seen = taken;
      c->wr_moved = now;
    }
    if (now - c->wr_moved >= c->stall_ms) {
      wstall_end(c);
      return;
    }
    uint64_t left = c->stall_ms - (now - c->wr_moved);
    next = left < tick ? left : tick;
  } /* else drained: the next queued write starts looking again */
  if (c->h2 && acp__h2_stall_check(c->h2, now, c->stall_ms) && next > tick)
    next = tick;
  if (c->h2)
    h2_check(c); /* a reset may have been the last stream after GOAWAY */
  if (next != UINT64_MAX && !c->tcp_closed && !c->lingering)
    uv_timer_start(t, on_wstall, next, 0);
}

static bool wstall_on(const wconn *c) {
  return c->stall_ms != 0 && c->stall_ms != UINT64_MAX && !c->tcp_closed &&
         !c->lingering;
}

/* A write was queued in libuv (the kernel did not take it all at once):
 * look at the progress until the queue drains. The first queued write
 * starts the count (the timer may already run for HTTP/2 streams). */
static void wstall_queued(wconn *c) {
  if (!wstall_on(c))
    return;
  if (c->writes == 1) {
    c->wr_seen = wstall_taken(c);
    c->wr_moved = uv_now(c->loop);
  }
  if (!uv_is_active((uv_handle_t *)&c->wstall))
    uv_timer_start(&c->wstall, on_wstall, wstall_tick(c), 0);
}

/* MARK: - TLS (Private) */

/*
 * The hooks of the TLS filter: tls_flush() writes the ciphertext it has
 * (handshake messages, records, alerts), tls_send() encrypts instead of
 * writing, tls_read() decrypts what the socket read and passes the
 * plaintext on to tcp_read() as if the socket had read it. A write still
 * completes (and credits its link bytes) when the kernel took its
 * ciphertext, so backpressure is what it is without TLS.
 */
/* Send w->data[0..w->len), which w owns, crediting w->credit when it is
 * out. With nothing queued the kernel usually takes it all now: a
 * uv_write() that completes at once still costs a deferred callback and,
 * in libuv, an epoll_ctl per write (stopping POLLOUT re-queues the
 * watcher), one syscall per message. */
static int send_owned(wconn *c, wwrite *w) {
  uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
  c->wr_handed += w->len;
  if (c->writes == 0) {
    int r = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (r > 0 && (size_t)r == w->len) {
      size_t credit = w->credit;
      acp__free(&c->mem, w);
      report_credit(c, credit);
      return 0;
    }
    if (r > 0) {
      b.base += r;
      b.len -= (size_t)r;
    }
  }
  if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_tcp_write) < 0) {
    acp__free(&c->mem, w);
    return ACP_ERR_SYSTEM;
  }
  wr_queued(c, w);
  wstall_queued(c);
  return 0;
}

static int tls_flush(wconn *c, size_t credit) {
  size_t n = c->tls && !c->tcp_closed ? acp__tls_pending(c->tls) : 0;
  if (n == 0) {
    report_credit(c, credit);
    return 0;
  }
  wwrite *w = acp__malloc(&c->mem, sizeof(*w) + n);
  if (!w)
    return ACP_ERR_NOMEM;
  w->c = c;
  w->credit = credit;
  w->len = acp__tls_take(c->tls, w->data, n);
  return send_owned(c, w);
}

static int tls_send(wconn *c, const uv_buf_t *bufs, unsigned nb,
                    size_t credit) {
  for (unsigned i = 0; i < nb; i++)
    if (bufs[i].len > 0) {
      int rv = acp__tls_write(c->tls, bufs[i].base, bufs[i].len);
      if (rv != 0)
        return rv == ACP_ERR_NOMEM ? rv : ACP_ERR_SYSTEM;
    }
  return tls_flush(c, credit);
}

/* Send bufs (copied unless the kernel takes them now), crediting `credit`
 * link bytes when written. */
static int send_bufs(wconn *c, uv_buf_t *bufs, unsigned nb, size_t credit,
                     bool mask_last) {
  size_t total = 0, off = 0;
  if (c->tcp_closed || c->wr_eof) {
    report_credit(c, credit);
    return 0;
  }
  if (c->tls)
    return tls_send(c, bufs, nb, credit);
  for (unsigned i = 0; i < nb; i++)
    total += bufs[i].len;
  c->wr_handed += total;
  if (c->writes == 0 && !mask_last &&
      (c->state == C_OPEN || c->state == C_SSE || c->state == C_H2)) {
    int r = uv_try_write((uv_stream_t *)&c->tcp, bufs, nb);
    if (r > 0 && (size_t)r == total) {
      report_credit(c, credit);
      return 0;
    }
    if (r > 0)
      off = (size_t)r;
  }
  wwrite *w = acp__malloc(&c->mem, sizeof(*w) + total - off);
  if (!w)
    return ACP_ERR_NOMEM;
  w->c = c;
  w->credit = credit;
  w->len = 0;
  for (unsigned i = 0; i < nb; i++) {
    size_t l = bufs[i].len;
    const char *p = bufs[i].base;
    if (off >= l) {
      off -= l;
      continue;
    }
    p += off;
    l -= off;
    off = 0;
    memcpy(w->data + w->len, p, l);
    w->len += l;
  }
  uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
  int r = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_tcp_write);
  if (r < 0) {
    acp__free(&c->mem, w);
    return ACP_ERR_SYSTEM;
  }
  wr_queued(c, w);
  wstall_queued(c);
  return 0;
}

/* Flush the control frames the codec queued (pong, close). */
static void flush_control(wconn *c) {
  if (c->ws.out.len == 0 || c->state != C_OPEN)
    return;
  uv_buf_t b = uv_buf_init(c->ws.out.data, (unsigned)c->ws.out.len);
  (void)send_bufs(c, &b, 1, 0, false);
  acp__buf_clear(&c->ws.out);
  if (c->ws.close_sent)
    c->wr_eof = true;
}

/* One text frame of p1 + p2. */
static int send_text(wconn *c, const char *p1, size_t n1, const char *p2,
                     size_t n2, size_t credit) {
  uint8_t hdr[14];
  uint8_t m[4];
  size_t hl;
  if (!c->client) {
    hl = acp__ws_header(hdr, ACP__WS_OP_TEXT, n1 + n2, NULL);
    uv_buf_t b[3] = {uv_buf_init((char *)hdr, (unsigned)hl),
                     uv_buf_init((char *)p1, (unsigned)n1),
                     uv_buf_init((char *)p2, (unsigned)n2)};
    return send_bufs(c, b, 3, credit, false);
  }
  next_mask(c, m);
  hl = acp__ws_header(hdr, ACP__WS_OP_TEXT, n1 + n2, m);
  wwrite *w = acp__malloc(&c->mem, sizeof(*w) + hl + n1 + n2);
  if (!w)
    return ACP_ERR_NOMEM;
  memcpy(w->data, hdr, hl);
  /* The copy masks: one pass over the payload. */
  if (n1)
    acp__ws_copy_mask((uint8_t *)w->data + hl, (const uint8_t *)p1, n1, m, 0);
  if (n2)
    acp__ws_copy_mask((uint8_t *)w->data + hl + n1, (const uint8_t *)p2, n2, m,
                      n1);
  if (c->tcp_closed || c->wr_eof || c->state != C_OPEN) {
    acp__free(&c->mem, w);
    report_credit(c, credit);
    return 0;
  }
  w->c = c;
  w->credit = credit;
  w->len = hl + n1 + n2;
  uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
  if (c->tls) {
    int rv = tls_send(c, &b, 1, credit);
    acp__free(&c->mem, w);
    return rv;
  }
  return send_owned(c, w);
}

static bool blank(const char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
      return false;
  return true;
}

/*
 * A server's frames from one write of its link, sent with one writev. An
 * agent's turn usually ends with two lines in one read of its stdout (the
 * last update and the answer): sent one by one, they were two syscalls,
 * two segments and two wake-ups of the client for a 5 B turn. A client
 * masks (and so copies) each frame and sends it alone (send_text).
 */
#define BATCH_MAX 16

typedef struct fbatch {
  uv_buf_t b[3 * BATCH_MAX];
  uint8_t hdr[BATCH_MAX][14];
  unsigned n; /* frames */
  size_t credit;
} fbatch;

static int batch_flush(wconn *c, fbatch *f) {
  if (f->n == 0)
    return 0;
  int rv = send_bufs(c, f->b, 3 * f->n, f->credit, false);
  f->n = 0;
  f->credit = 0;
  return rv;
}

/* One text frame of p1 + p2 into the batch (sent when it is full). */
static int batch_text(wconn *c, fbatch *f, const char *p1, size_t n1,
                      const char *p2, size_t n2, size_t credit) {
  if (c->client)
    return send_text(c, p1, n1, p2, n2, credit);
  size_t hl = acp__ws_header(f->hdr[f->n], ACP__WS_OP_TEXT, n1 + n2, NULL);
  f->b[3 * f->n] = uv_buf_init((char *)f->hdr[f->n], (unsigned)hl);
  f->b[3 * f->n + 1] = uv_buf_init((char *)p1, (unsigned)n1);
  f->b[3 * f->n + 2] = uv_buf_init((char *)p2, (unsigned)n2);
  f->n++;
  f->credit += credit;
  return f->n == BATCH_MAX ? batch_flush(c, f) : 0;
}

/* Frame every complete line of data[0..len); keep the rest. Before the
 * handshake is over everything waits in c->line. */
static int frames_from(wconn *c, const char *data, size_t len) {
  int rv = 0;
  fbatch f;
  f.n = 0;
  f.credit = 0;
  /* Before the handshake, bytes held in the line buffer count as sent
   * (the buffer is capped at the message size); once open, the start of a
   * line not ended yet stays in the link's queue up to LINE_HOLD. */
  if (c->state != C_OPEN) {
    rv = acp__buf_append(&c->line, data, len);
    if (rv == 0)
      report_credit(c, len);
    return rv;
  }
  while (len > 0) {
    const char *nl = memchr(data, '\n', len);
    if (!nl) {
      /* The frames so far go first: one may point into c->line, which
       * the rest of the data is appended to. */
      rv = batch_flush(c, &f);
      if (rv != 0)
        return rv;
      size_t hold = 0;
      if (!c->line_drop) {
        rv = acp__buf_append(&c->line, data, len);
        if (rv == ACP_ERR_LIMIT) {
          c->line_drop = true;
          acp__buf_clear(&c->line);
          report_credit(c, c->line_credit);
          c->line_credit = 0;
          rv = 0;
        } else if (rv == 0) {
          hold = line_hold(&c->line_credit, len);
        }
      }
      report_credit(c, len - hold);
      return rv;
    }
    size_t seg = (size_t)(nl - data);
    size_t credit = seg + 1 + c->line_credit;
    c->line_credit = 0;
    if (c->line_drop || (c->line.len == 0 && blank(data, seg)) ||
        (c->line.len + seg > c->ws.max_msg && c->ws.max_msg != 0)) {
      c->line_drop = false;
      if (f.n > 0) {
        f.credit += credit;
      } else if (c->last && c->last->gen == c->credit_gen) {
        c->last->credit += credit;
        c->wr_credit += credit;
      } else {
        report_credit(c, credit);
      }
      acp__buf_clear(&c->line);
    } else {
      /* A CR before the LF is the line ending's, not the message's. */
      size_t n1 = c->line.len;
      size_t n2 = seg;
      if (n2 > 0 && data[n2 - 1] == '\r')
        n2--;
      else if (n2 == 0 && n1 > 0 && c->line.data[n1 - 1] == '\r')
        n1--;
      /* Only the first line of a write can start in c->line: it is
       * emptied here, and its bytes stay where they are (nothing is
       * appended before the batch is sent). */
      acp__buf_clear(&c->line);
      rv = batch_text(c, &f, c->line.data, n1, data, n2, credit);
      if (rv != 0)
        return rv;
    }
    data += seg + 1;
    len -= seg + 1;
  }
  rv = batch_flush(c, &f);
  if (c->line.cap > KEEP_MAX) {
    size_t max = c->line.max;
    acp__buf_dispose(&c->line);
    acp__buf_init(&c->line, &c->mem, max);
  }
  return rv;
}

/* MARK: - Link ops (Private) */

static void process_input(wconn *c);

static int op_write(acp_uv_link *l, const char *data, size_t len, void *ud) {
  wconn *c = ud;
  (void)l;
  if (c->wr_eof && c->state != C_HANDSHAKE)
    return ACP_ERR_CLOSED;
  return frames_from(c, data, len);
}

static void update_tcp_reading(wconn *c);

static void on_resume(uv_timer_t *t);

static void op_read_changed(acp_uv_link *l, int reading, void *ud) {
  wconn *c = ud;
  (void)l;
  c->link_reading = reading != 0;
  if (c->link_reading && c->state == C_OPEN && c->in.len > 0 &&
      !c->tcp_closed) {
    /* Held frames are fed from the loop, not from inside read_start. */
    uv_timer_start(&c->resume, on_resume, 0, 0);
    return;
  }
  update_tcp_reading(c);
}

static void op_shutdown(acp_uv_link *l, void *ud) {
  wconn *c = ud;
  if (c->state == C_OPEN && !c->ws.close_sent && !c->handed) {
    uint8_t m[4];
    /* The owner's reason (an agent that died: 1011), else a normal end. */
    int code = acp_uv_link_close_code(l);
    if (code < 1000 || code > 4999)
      code = ACP__WS_CLOSE_NORMAL;
    next_mask(c, m);
    acp__ws_queue_close(&c->ws, code,
                        code == ACP__WS_CLOSE_INTERNAL ? "the agent exited"
                                                       : NULL,
                        c->client ? m : NULL);
    flush_control(c);
  }
}

static void op_close(acp_uv_link *l, void *ud) {
  wconn *c = ud;
  (void)l;
  op_shutdown(l, ud);
  c->link = NULL;
  conn_finish(c);
  conn_unref(c);
}

static const acp_uv_link_ops link_ops = {op_write, op_read_changed, op_shutdown,
                                         op_close};

/* MARK: - Reading (Private) */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  wconn *c = h->data;
  (void)hint;
  c->read_in = false;
  if (c->state == C_HANDSHAKE && !c->tls && !c->lingering) {
    /* A request is read where it is parsed, the free end of c->in, sized
     * for the rest of the body once the head said how long it is: a
     * 1 MiB POST was read 64 KiB at a time into buffers of its own and
     * copied there. One byte stays free (server_handshake wants it). */
    size_t want = c->h1_want > c->in.len ? c->h1_want - c->in.len : 0;
    if (want < READ_CHUNK)
      want = READ_CHUNK;
    if (acp__buf_reserve(&c->in, want + 1) == 0) {
      size_t room = c->in.cap - c->in.len - 1;
      *buf = uv_buf_init(c->in.data + c->in.len,
                         room > UINT32_MAX ? UINT32_MAX : (unsigned)room);
      c->read_in = true;
      return;
    }
  }
  char *p;
  if (c->srv != NULL) {
    /* The server's one read buffer: a relayed message costs no malloc and
     * free of 64 KiB (~330 instructions). */
    p = c->srv->rbuf;
    c->srv->rbuf = NULL;
    if (p == NULL)
      p = acp__malloc(&c->srv->mem, READ_CHUNK);
    c->rbuf_srv = p ? c->srv : NULL;
  } else {
    p = acp__malloc(&c->mem, READ_CHUNK);
  }
  *buf = uv_buf_init(p, p ? (unsigned)READ_CHUNK : 0);
}

static void on_tcp_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void update_tcp_reading(wconn *c) {
  if (c->lingering)
    return;
  bool want =
      !c->tcp_closed && !c->ended &&
      (c->state == C_HANDSHAKE || c->state == C_SSE || c->state == C_H2 ||
       (c->state == C_OPEN && c->link_reading && c->in.len == 0));
  if (want && !c->tcp_reading) {
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_tcp_read) == 0)
      c->tcp_reading = true;
  } else if (!want && c->tcp_reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->tcp_reading = false;
  }
}

static int on_message(void *ud, char *data, size_t len) {
  wconn *c = ud;
  if (!c->link)
    return 0;
  /* data[len] is the '\n' of line mode. */
  int rv = acp_uv_link_user_deliver(c->link, data, len + 1);
  if (rv != 0)
    return ACP_ERR_INTERNAL;
  if (!c->link || !acp_uv_link_is_reading(c->link))
    return ACP_ERR_PAUSE;
  return 0;
}

/* Feed frames; hold what a paused link did not take. */
static void feed(wconn *c, const char *data, size_t len) {
  if (c->client)
    next_mask(c, c->ws.auto_mask);
  acp_ssize n = acp__ws_recv(&c->ws, (const uint8_t *)data, len, on_message, c);
  flush_control(c);
  if (n < 0) {
    end_link(c, n == ACP_ERR_LIMIT ? UV_E2BIG : UV_EPROTO);
    conn_finish(c);
    return;
  }
  if (c->ws.close_received) {
    end_link(c, UV_EOF);
    conn_finish(c);
    return;
  }
  if ((size_t)n < len) {
    int arv = acp__buf_append(&c->in, data + n, len - (size_t)n);
    if (arv == ACP_ERR_LIMIT && !c->ws.close_sent) {
      /* More held than a message may be while the link is not reading
       * (an oversized message sent at once, before the agent's link
       * started reading, is held whole before its head is parsed): the
       * same end as a frame head over the cap, close 1009 and linger,
       * not a bare close the peer sees as 1006 (issue 14). */
      uint8_t m[4];
      next_mask(c, m);
      end_link(c, UV_E2BIG);
      acp__ws_queue_close(&c->ws, ACP__WS_CLOSE_TOO_BIG, NULL,
                          c->client ? m : NULL);
      flush_control(c);
      conn_finish(c);
      return;
    }
    if (arv != 0) {
      end_link(c, UV_ENOMEM);
      conn_close_tcp(c);
      return;
    }
  }
}

static void process_input(wconn *c) {
  if (c->in.len == 0 || c->tcp_closed)
    return;
  /* Take the held bytes out first: feeding may hold a new tail. */
  acp__buf held = c->in;
  acp__buf_init(&c->in, &c->mem, 0);
  feed(c, held.data, held.len);
  acp__buf_dispose(&held);
}

static void on_resume(uv_timer_t *t) {
  wconn *c = t->data;
  if (c->link_reading)
    process_input(c);
  update_tcp_reading(c);
}

static void server_handshake(wconn *c);
static void client_handshake(wconn *c);

static void tcp_read(wconn *c, ssize_t n, const uv_buf_t *buf);
static void srv_log_peer(wconn *c, const char *what, const char *why);
static void tls_read(wconn *c, const char *data, size_t n);
static void h2_read(wconn *c, const char *data, size_t len);

static void on_tcp_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  wconn *c = s->data;
  bool in_place = c->read_in;
  c->read_in = false;
  /* The connection is freed only from close callbacks, never in here. */
  if (c->tls && n > 0 && !c->lingering) {
    tls_read(c, buf->base, (size_t)n);
  } else {
    if (n == UV_EOF && c->tls && !c->client && !c->lingering && !c->tls_ended &&
        acp__tls_ready(c->tls) && c->srv && c->srv->opts.log_tls)
      srv_log_peer(c, "TLS end", "the socket ended without close_notify");
    tcp_read(c, n, in_place ? NULL : buf);
  }
  if (c->rbuf_srv != NULL) {
    /* Back to the server that lent it (still alive: it is freed from a
     * close callback, never inside this one). */
    acp_remote_server *srv = c->rbuf_srv;
    c->rbuf_srv = NULL;
    if (srv->rbuf == NULL)
      srv->rbuf = buf->base;
    else
      acp__free(&srv->mem, buf->base);
  } else if (!in_place) {
    acp__free(&c->mem, buf->base);
  }
  /* An idle socket keeps no request buffer: nothing is left to parse, or
   * what is left is a request that now carries an SSE stream (or was
   * refused), read no further. */
  if (c->in.cap > 0 &&
      (c->in.len == 0 || c->state == C_SSE || c->state == C_DONE)) {
    c->h1_want = 0;
    acp__buf_dispose(&c->in);
  }
  acp__ws_trim(&c->ws, KEEP_MAX);
}

static void tcp_read(wconn *c, ssize_t n, const uv_buf_t *buf) {
  if (n == 0)
    return;
  if (c->lingering) {
    if (n < 0)
      conn_close_tcp(c);
    else if (c->shut_done && uv_now(c->tcp.loop) - c->linger_at < LINGER_MAX_MS)
      /* Still sending (the rest of an oversized message, say): closing
       * now would reset the socket and lose our close frame. Before
       * shut_done the flush bound runs unchanged. */
      uv_timer_start(&c->timer, on_linger_timeout, LINGER_IDLE_MS, 0);
    return;
  }
  if (n < 0) {
    if (c->state == C_HANDSHAKE && c->client && c->ccb) {
      acp_remote_connect_cb cb = c->ccb;
      c->ccb = NULL;
      cb(c->link, ACP_ERR_PROTOCOL, "the server closed the connection", c->cud);
    }
    /* The socket ended without a close frame: an abnormal closure (1006),
     * a dropped connection rather than an end. */
    end_link(c, n == UV_EOF && c->state == C_OPEN ? UV_ECONNRESET : (int)n);
    conn_close_tcp(c);
    return;
  }
  c->heard = true;
  if (c->state == C_HANDSHAKE && !buf) {
    c->in.len += (size_t)n; /* read in place (on_alloc) */
    if (c->client)
      client_handshake(c);
    else
      server_handshake(c);
    return;
  }
  if (c->state == C_HANDSHAKE) {
    if (acp__buf_append(&c->in, buf->base, (size_t)n) != 0) {
      if (c->client)
        client_fail(c, ACP_ERR_NOMEM, "out of memory");
      else
        conn_close_tcp(c);
      return;
    }
    if (c->client)
      client_handshake(c);
    else
      server_handshake(c);
    return;
  }
  if (c->state == C_H2) {
    h2_read(c, buf->base, (size_t)n);
    return;
  }
  if (c->state != C_OPEN)
    return;
  feed(c, buf->base, (size_t)n);
  update_tcp_reading(c);
}

/* A line for the server's log callback, about the peer of `c`:
 * "what from ADDR: why" (ADDR "1.2.3.4:5" or "[::1]:5"). */
static void srv_log_peer(wconn *c, const char *what, const char *why) {
  acp_remote_server *s = c->srv;
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  char ip[64] = "?", addr[80], line[640];
  if (!s || !s->opts.log)
    return;
  memset(&ss, 0, sizeof(ss));
  int port = 0;
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
    if (ss.ss_family == AF_INET6) {
      uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
      port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    } else if (ss.ss_family == AF_INET) {
      uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
      port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    }
  }
  snprintf(addr, sizeof(addr), ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d",
           ip, port);
  snprintf(line, sizeof(line), "%s from %s: %s", what, addr,
           why && why[0] ? why : "no reason given");
  s->opts.log(line, s->opts.log_user_data);
}

/* The handshake failed or a record was bad: say why and close. */
static void tls_failed(wconn *c) {
  const char *why = acp__tls_error(c->tls);
  if (!c->client)
    srv_log_peer(c,
                 acp__tls_plain_http(c->tls) && c->state == C_HANDSHAKE
                     ? "plaintext HTTP on the TLS port refused (400)"
                 : !acp__tls_ready(c->tls) ? "TLS handshake refused"
                                           : "TLS error, connection closed",
                 why);
  if (c->client) {
    if (c->state == C_HANDSHAKE) {
      client_fail(c, ACP_ERR_PROTOCOL, why);
      return;
    }
    end_link(c, UV_EPROTO);
    conn_close_tcp(c);
    return;
  }
  if (acp__tls_plain_http(c->tls) && c->state == C_HANDSHAKE) {
    /* Someone spoke plaintext HTTP to the TLS port: tell them so in
     * plaintext (the alert OpenSSL queued would mean nothing to them). */
    acp__tls *t = c->tls;
    while (acp__tls_pending(t) > 0) {
      char junk[256];
      (void)acp__tls_take(t, junk, sizeof(junk));
    }
    c->tls = NULL;
    refuse_msg(c, 400, "this port speaks TLS: use https:// or wss://");
    c->tls = t;
    return;
  }
  if (c->state == C_OPEN)
    end_link(c, UV_EPROTO);
  c->state = C_DONE;
  conn_finish(c); /* the alert, if any, was flushed */
}

/* A client's handshake just ended: tell the options' log how it went. */
static void client_log_tls(wconn *c) {
  char what[160], line[400];
  if (!c->clog)
    return;
  acp__tls_describe(c->tls, what, sizeof(what));
  snprintf(line, sizeof(line), "socket 1 (WebSocket) to %s:%s: %s", c->host,
           c->port, what);
  c->clog(line, c->clog_ud);
}

/* log_tls: a server connection's handshake just ended. */
static void srv_log_tls(wconn *c) {
  char what[160];
  if (!c->srv || !c->srv->opts.log_tls)
    return;
  acp__tls_describe(c->tls, what, sizeof(what));
  srv_log_peer(c, "TLS", what);
}

static void tls_read(wconn *c, const char *data, size_t n) {
  acp__buf plain;
  acp__buf_init(&plain, &c->mem, 0);
  bool was_ready = acp__tls_ready(c->tls);
  int rv = acp__tls_feed(c->tls, data, n);
  if (rv == 0)
    rv = acp__tls_read(c->tls, &plain);
  if (c->client && !was_ready && acp__tls_ready(c->tls))
    client_log_tls(c);
  else if (!c->client && !was_ready && acp__tls_ready(c->tls))
    srv_log_tls(c);
  /* Handshake messages, a key update's answer, an alert. */
  if (tls_flush(c, 0) != 0 && rv == 0)
    rv = ACP_ERR_NOMEM;
  /* HTTP/2 over TLS (ALPN "h2") needs no branch here: the plaintext starts
   * with the connection preface, which server_handshake() looks for. */
  if (plain.len > 0) {
    uv_buf_t b = uv_buf_init(plain.data, (unsigned)plain.len);
    tcp_read(c, (ssize_t)plain.len, &b);
  }
  acp__buf_dispose(&plain);
  if (rv == 0 || c->tcp_closed || c->lingering)
    return;
  if (rv == ACP_ERR_CLOSED) {
    if (!c->client && c->srv && c->srv->opts.log_tls)
      srv_log_peer(c, "TLS end", "close_notify (a clean close)");
    c->tls_ended = true;
    tcp_read(c, UV_EOF, NULL); /* close_notify: the peer's end */
  } else if (rv == ACP_ERR_PROTOCOL) {
    tls_failed(c);
  } else if (c->client && c->state == C_HANDSHAKE) {
    client_fail(c, rv, "out of memory");
  } else {
    end_link(c, UV_ENOMEM);
    conn_close_tcp(c);
  }
}

/* MARK: - Ping (Private) */

static void on_ping(uv_timer_t *t) {
  wconn *c = t->data;
  uint8_t m[4];
  if (c->state != C_OPEN || c->tcp_closed)
    return;
  if (!c->heard && c->ws.pongs == 0) {
    /* Silent for a whole interval after a ping: the peer is gone. */
    end_link(c, UV_ETIMEDOUT);
    conn_close_tcp(c);
    return;
  }
  c->heard = false;
  c->ws.pongs = 0;
  next_mask(c, m);
  if (!c->ws.close_sent && acp__ws_queue_control(&c->ws, ACP__WS_OP_PING, NULL,
                                                 0, c->client ? m : NULL) == 0)
    flush_control(c);
  uv_timer_start(&c->timer, on_ping, c->ping_ms, 0);
}

static void start_ping(wconn *c) {
  uv_timer_stop(&c->timer);
  if (c->ping_ms != UINT64_MAX)
    uv_timer_start(&c->timer, on_ping, c->ping_ms, 0);
}

/* MARK: - Connections (Private) */

static int conn_new(wconn **out, uv_loop_t *loop, bool client, size_t max_msg,
                    uint64_t ping_ms, const acp_mem *mem) {
  acp_mem m;
  acp__mem_init(&m, mem);
  wconn *c = acp__calloc(&m, 1, sizeof(*c));
  *out = NULL;
  if (!c)
    return ACP_ERR_NOMEM;
  c->mem = m;
  c->loop = loop;
  c->client = client;
  if (max_msg == 0)
    max_msg = ACP_REMOTE_DEFAULT_MAX_MESSAGE;
  acp__ws_init(&c->ws, client, max_msg, &c->mem);
  acp__buf_init(&c->in, &c->mem, 0);
  acp__buf_init(&c->line, &c->mem, max_msg);
  acp__buf_init(&c->req, &c->mem, 0);
  c->ping_ms = ping_ms == 0 ? ACP_REMOTE_DEFAULT_PING_MS : ping_ms;
  uint8_t seed[8];
  if (uv_random(NULL, NULL, seed, sizeof(seed), 0, NULL) != 0)
    memcpy(seed, &c, sizeof(seed) < sizeof(c) ? sizeof(seed) : sizeof(c));
  memcpy(&c->rng, seed, 8);
  c->rng |= 1;
  uv_tcp_init(loop, &c->tcp);
  uv_timer_init(loop, &c->timer);
  uv_timer_init(loop, &c->resume);
  uv_timer_init(loop, &c->wstall);
  c->tcp.data = c;
  c->timer.data = c;
  c->resume.data = c;
  c->wstall.data = c;
  c->hx.ops = &h1_ops;
  *out = c;
  return 0;
}

/* MARK: - Server (Private) */

static void uuid4(char out[37]) {
  uint8_t b[16];
  static const char hex[] = "0123456789abcdef";
  if (uv_random(NULL, NULL, b, sizeof(b), 0, NULL) != 0)
    memset(b, 0x5a, sizeof(b));
  b[6] = (uint8_t)((b[6] & 0x0F) | 0x40);
  b[8] = (uint8_t)((b[8] & 0x3F) | 0x80);
  size_t o = 0;
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      out[o++] = '-';
    out[o++] = hex[b[i] >> 4];
    out[o++] = hex[b[i] & 15];
  }
  out[o] = '\0';
}

static const char *reason_of(int st) {
  switch (st) {
  case 400:
    return "Bad Request";
  case 401:
    return "Unauthorized";
  case 403:
    return "Forbidden";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 409:
    return "Conflict";
  case 411:
    return "Length Required";
  case 413:
    return "Content Too Large";
  case 415:
    return "Unsupported Media Type";
  case 426:
    return "Upgrade Required";
  case 431:
    return "Request Header Fields Too Large";
  case 501:
    return "Not Implemented";
  case 502:
    return "Bad Gateway";
  case 503:
    return "Service Unavailable";
  default:
    return "Error";
  }
}

static const char *detail_of(int st) {
  switch (st) {
  case 400:
    return "not a valid WebSocket upgrade request";
  case 401:
    return "a valid bearer token is required";
  case 403:
    return "this Host or Origin is not allowed";
  case 404:
    return "the ACP endpoint is /acp";
  case 405:
    return "use POST, GET (SSE or WebSocket upgrade) or DELETE";
  case 409:
    return "this stream already has a reader";
  case 411:
    return "a POST needs a Content-Length";
  case 413:
    return "the message is too large";
  case 415:
    return "the body must be application/json";
  case 426:
    return "GET upgrades to WebSocket or accepts text/event-stream";
  case 431:
    return "the request head is too large";
  case 501:
    return "not implemented";
  case 502:
    return "the agent went away";
  case 503:
    return "too many connections";
  default:
    return "error";
  }
}

static void refuse_msg(wconn *c, int st, const char *d) {
  char buf[512];
  int n = snprintf(buf, sizeof(buf),
                   "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
                   "Content-Length: %zu\r\nConnection: close\r\n%s\r\n%s\n",
                   st, reason_of(st), strlen(d) + 1,
                   st == 401   ? "WWW-Authenticate: Bearer\r\n"
                   : st == 426 ? "Upgrade: websocket\r\n"
                               : "",
                   d);
  uv_buf_t b = uv_buf_init(buf, (unsigned)n);
  c->state = C_DONE;
  uv_read_stop((uv_stream_t *)&c->tcp);
  c->tcp_reading = false;
  (void)send_bufs(c, &b, 1, 0, false);
  conn_finish(c);
}

static void refuse(wconn *c, int st) {
  refuse_msg(c, st, detail_of(st));
}

static void http_request(wconn *c, const acp__http_head *h, size_t head_len);
static void on_handshake_timeout(uv_timer_t *t);

/* The affinity value of a new connection: what its Cookie headers give
 * the affinity cookie, if well formed, else `own`. Empty without one. */
static void affinity_of(const acp_remote_server *s, const acp__http_head *h,
                        const char *own, char out[37]) {
  size_t nl;
  out[0] = '\0';
  if (!s->aff_name)
    return;
  nl = strlen(s->aff_name);
  for (size_t i = 0; i < h->nheaders; i++) {
    const acp__http_header *x = &h->headers[i];
    if (x->name_len != 6 || strncasecmp(x->name, "Cookie", 6) != 0)
      continue;
    const char *p = x->value, *e = x->value + x->value_len;
    while (p < e) {
      while (p < e && (*p == ' ' || *p == ';'))
        p++;
      const char *q = memchr(p, ';', (size_t)(e - p));
      if (!q)
        q = e;
      if ((size_t)(q - p) == nl + 37 && memcmp(p, s->aff_name, nl) == 0 &&
          p[nl] == '=') {
        bool ok = true;
        for (size_t k = nl + 1; k < nl + 37 && ok; k++)
          ok = (p[k] >= '0' && p[k] <= '9') || (p[k] >= 'a' && p[k] <= 'f') ||
               p[k] == '-';
        if (ok) {
          memcpy(out, p + nl + 1, 36);
          out[36] = '\0';
          return;
        }
      }
      p = q;
    }
  }
  snprintf(out, 37, "%s", own);
}

/* The Set-Cookie value "NAME=VALUE; ..." for `aff`, or "". */
static void affinity_value(const acp_remote_server *s, const char *aff,
                           char *out, size_t cap) {
  out[0] = '\0';
  if (s && s->aff_name && aff[0])
    snprintf(out, cap, "%s=%s; Path=/; HttpOnly; SameSite=Strict", s->aff_name,
             aff);
}

/* "Set-Cookie: NAME=VALUE; ...\r\n" for `aff`, or "". */
static void affinity_header(const acp_remote_server *s, const char *aff,
                            char *out, size_t cap) {
  char v[160];
  affinity_value(s, aff, v, sizeof(v));
  out[0] = '\0';
  if (v[0])
    snprintf(out, cap, "Set-Cookie: %s\r\n", v);
}

static void h2_start(wconn *c);

/* An upgraded server connection (here after the 101, or adopted from the
 * process that answered it, acp_remote_adopt()) becomes a link: the bytes
 * read past the request wait in c->in for the link's owner to read. */
static int server_open(wconn *c) {
  c->state = C_OPEN;
  if (acp_uv_link_new_user(&c->link, c->loop, &link_ops, c, &c->mem) != 0) {
    c->link = NULL;
    return ACP_ERR_NOMEM;
  }
  /* Reading waits for the link's owner. */
  update_tcp_reading(c);
  start_ping(c);
  return 0;
}

static void server_handshake(wconn *c) {
  acp_remote_server *s = c->srv;
  acp__http_head h;
  char accept[29];
  if (c->h2_maybe && c->tls) {
    /* The handshake is over: a client that agreed on http/1.1 speaks it,
     * whatever its first bytes. */
    const char *alpn = acp__tls_alpn(c->tls);
    if (alpn && strcmp(alpn, "h2") != 0)
      c->h2_maybe = false;
  }
  if (c->h2_maybe) {
    /* HTTP/2 with prior knowledge: the first bytes are its preface. */
    int pf = acp__h2_preface(c->in.data, c->in.len);
    if (pf < 0)
      return;
    c->h2_maybe = false;
    if (pf > 0) {
      h2_start(c);
      return;
    }
  }
  /* A spare byte after what was read, reserved before the head points
   * into the buffer: hx_serve may write the byte after a body. */
  if (acp__buf_reserve(&c->in, 1) != 0) {
    refuse(c, 503);
    return;
  }
  acp_ssize n = acp__http_parse_head(c->in.data, c->in.len, false, &h);
  if (n == 0)
    return;
  if (n < 0 || s == NULL) {
    refuse(c, n == ACP_ERR_LIMIT ? 431 : 400);
    return;
  }
  acp__ws_policy pol = {"/acp", s->token, (const char *const *)s->hosts};
  int st = acp__ws_check_request(&h, &pol, accept);
  if (st == 501 || st == 426) {
    http_request(c, &h, (size_t)n);
    return;
  }
  if (st == 101 && s->nconns > s->opts.max_connections)
    st = 503;
  if (st != 101) {
    refuse(c, st);
    return;
  }
  uv_timer_stop(&c->timer);
  acp__buf_consume(&c->in, (size_t)n);
  uuid4(c->conn_id);
  char aff[37], cookie[200];
  affinity_of(s, &h, c->conn_id, aff);
  affinity_header(s, aff, cookie, sizeof(cookie));
  char resp[512];
  int rl = snprintf(resp, sizeof(resp),
                    "HTTP/1.1 101 Switching Protocols\r\n"
                    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                    "Sec-WebSocket-Accept: %s\r\n"
                    "Acp-Connection-Id: %s\r\n%s\r\n",
                    accept, c->conn_id, cookie);
  c->state = C_OPEN;
  uv_buf_t b = uv_buf_init(resp, (unsigned)rl);
  if (send_bufs(c, &b, 1, 0, false) != 0 || server_open(c) != 0) {
    conn_close_tcp(c);
    return;
  }
  s->cur_aff = aff[0] ? aff : NULL;
  s->cb(s, c->link, c->conn_id, s->ud);
  s->cur_aff = NULL;
}

static void on_handshake_timeout(uv_timer_t *t) {
  wconn *c = t->data;
  if (c->state != C_HANDSHAKE)
    return;
  if (c->client)
    client_fail(c, ACP_ERR_TIMEOUT, "no answer to the upgrade request");
  else
    conn_close_tcp(c);
}

static void server_free(acp_remote_server *s);
static void on_connection(uv_stream_t *ls, int status);

static void on_spare_closed(uv_handle_t *h) {
  acp_remote_server *s = h->data;
  s->spare_busy = false;
  if (s->tcp_closed) {
    server_free(s);
    return;
  }
  if (s->drop_pending && !s->closing) {
    s->drop_pending = false;
    on_connection((uv_stream_t *)&s->tcp, 0);
  }
}

/* No memory for a new connection: accept it into the spare handle and
 * close it at once (the client sees its connection end). Leaving it
 * unaccepted would stop the server for good: libuv stops polling the
 * listening socket until uv_accept() takes the connection it holds. */
static void drop_one(acp_remote_server *s) {
  if (s->spare_busy) {
    s->drop_pending = true; /* again when the spare is free */
    return;
  }
  if (uv_tcp_init(s->loop, &s->spare) != 0)
    return;
  s->spare.data = s;
  s->spare_busy = true;
  (void)uv_accept((uv_stream_t *)&s->tcp, (uv_stream_t *)&s->spare);
  uv_close((uv_handle_t *)&s->spare, on_spare_closed);
}

static void on_connection(uv_stream_t *ls, int status) {
  acp_remote_server *s = ls->data;
  wconn *c;
  if (status < 0 || s->closing)
    return;
  if (conn_new(&c, s->loop, false, s->opts.max_message, s->opts.ping_ms,
               &s->mem) != 0) {
    drop_one(s);
    return;
  }
  c->srv = s;
  c->stall_ms =
      s->opts.stall_ms ? s->opts.stall_ms : ACP_REMOTE_DEFAULT_STALL_MS;
  c->next = s->conns;
  if (s->conns)
    s->conns->prev = c;
  s->conns = c;
  s->nconns++;
  if (uv_accept(ls, (uv_stream_t *)&c->tcp) != 0) {
    conn_close_tcp(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  if (s->tls && acp__tls_new(&c->tls, s->tls, NULL, NULL, &c->mem) != 0) {
    conn_close_tcp(c);
    return;
  }
  /* Over TLS the preface is looked for only if ALPN may allow h2 (see
   * server_handshake()). */
  c->h2_maybe = !s->tls || acp__tls_conf_offers_h2(s->tls);
  /* One deadline for the TLS handshake and the HTTP request after it. */
  uv_timer_start(&c->timer, on_handshake_timeout, HANDSHAKE_MS, 0);
  update_tcp_reading(c);
}

/* MARK: - Streamable HTTP (Private) */

static void hc_end(hconn *hc, int status) {
  if (hc->ended || !hc->link)
    return;
  hc->ended = true;
  acp_uv_link_user_end(hc->link, status);
}

/* An exchange lets go of its connection (closed, finishing or reset).
 * An HTTP/1.1 one hands back the link bytes its socket's writes in flight
 * still hold: they will be cancelled (a closed socket) or written with no
 * exchange to credit, and the events they carry go again in a replay;
 * else the link's queue stays inflated for good, holding the agent back
 * (issue 14). HTTP/2 streams do the same at their release (h2_release). */
static void hx_detach(acp__hx *x) {
  hconn *hc = x->hc;
  size_t held = 0;
  if (!hc)
    return;
  if (x->ops == &h1_ops) {
    wconn *c = hx_conn(x);
    held = c->wr_credit;
    c->wr_credit = 0;
    c->credit_gen++;
  }
  x->hc = NULL;
  switch (x->role) {
  case H_WAITER:
    hc->waiter = NULL;
    hc_end(hc, UV_ECONNRESET); /* the client gave up on initialize */
    break;
  case H_STREAM:
    hc->stream = NULL;
    /* The SDK's client treats the end of this stream as the end of the
     * connection; so do we: the agent's turn is cancelled. */
    hc_end(hc, UV_ECONNRESET);
    break;
  case H_SESSION:
    for (acp__hx **pp = &hc->sessions; *pp; pp = &(*pp)->next)
      if (*pp == x) {
        *pp = x->next;
        break;
      }
    hc_route_gone(hc, x);
    break;
  case H_HELD:
    hc_unhold(hc, x); /* the client gave up on it (or its socket died) */
    break;
  default:
    break;
  }
  x->role = H_NONE;
  x->next = NULL;
  /* Last: crediting may call the owner, which may write more. */
  if (held && hc->link)
    acp_uv_link_user_written(hc->link, held);
}

/* A socket lets go of its connection (closed or finishing). */
static void hc_detach(wconn *c) {
  hx_detach(&c->hx);
}

static void hx_refuse(acp__hx *x, int st, const char *detail) {
  acp__hx_resp r = {st, detail, NULL, NULL, NULL, 0, NULL, 0};
  (void)x->ops->respond(x, &r);
}

static void on_hc_closed(uv_handle_t *h) {
  hconn *hc = h->data;
  if (--hc->handles > 0)
    return;
  hc_routes_free(hc);
  acp__free(&hc->mem, hc->init_id);
  acp__buf_dispose(&hc->line);
  acp__buf_dispose(&hc->pend);
  acp__free(&hc->mem, hc);
}

static void on_hc_idle(uv_timer_t *t) {
  hconn *hc = t->data;
  if (!hc->stream && !hc->waiter)
    hc_end(hc, UV_ETIMEDOUT);
}

/* Close the connection's timers; it is freed once all are closed. */
static void hc_close_handles(hconn *hc) {
  hc->handles = 3;
  uv_close((uv_handle_t *)&hc->idle, on_hc_closed);
  uv_close((uv_handle_t *)&hc->hold, on_hc_closed);
  uv_close((uv_handle_t *)&hc->stall, on_hc_closed);
}

static void hc_idle_start(hconn *hc) {
  if (hc->idle_ms != UINT64_MAX && hc->link)
    uv_timer_start(&hc->idle, on_hc_idle, hc->idle_ms, 0);
}

static void on_sse_ping(uv_timer_t *t) {
  wconn *c = t->data;
  static char ping[] = ":\n\n";
  if (c->state != C_SSE || c->tcp_closed || c->wr_eof)
    return;
  /* A comment line: a dead peer shows up as a failed write. */
  uv_buf_t b = uv_buf_init(ping, 3);
  (void)send_bufs(c, &b, 1, 0, false);
  uv_timer_start(&c->timer, on_sse_ping, c->ping_ms, 0);
}

/* Ready for the next request on a kept-alive socket. */
static void http_next(wconn *c) {
  c->state = C_HANDSHAKE;
  uv_timer_start(&c->timer, on_handshake_timeout, HANDSHAKE_MS, 0);
  update_tcp_reading(c);
  if (c->in.len > 0)
    server_handshake(c);
}

/* MARK: - HTTP/1.1 exchanges (Private) */

static wconn *hx_conn(acp__hx *x) {
  return (wconn *)(void *)((char *)x - offsetof(wconn, hx));
}

static int h1_respond(acp__hx *x, const acp__hx_resp *r) {
  wconn *c = hx_conn(x);
  if (r->status >= 400) {
    refuse_msg(c, r->status, r->detail ? r->detail : detail_of(r->status));
    return 0;
  }
  if (r->status != 200) {
    /* 202: the next request is read once this one is consumed (by
     * http_request, or already, for a POST that was held). */
    static char ok[] = "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n";
    uv_buf_t b = uv_buf_init(ok, sizeof(ok) - 1);
    int rv = send_bufs(c, &b, 1, 0, false);
    if (rv != 0) {
      /* Unanswered, the client would wait for the socket's idle timer:
       * closing it tells the client now. */
      conn_close_tcp(c);
      return rv;
    }
    if (c->state == C_WAIT && !c->tcp_closed && !c->lingering)
      http_next(c);
    return 0;
  }
  char head[600];
  int hl =
      snprintf(head, sizeof(head),
               "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
               "Content-Length: %zu\r\nCache-Control: no-store\r\n"
               "Acp-Connection-Id: %s\r\n%s%s%s\r\n",
               r->n1 + r->n2, r->conn_id ? r->conn_id : "",
               r->set_cookie ? "Set-Cookie: " : "",
               r->set_cookie ? r->set_cookie : "", r->set_cookie ? "\r\n" : "");
  uv_buf_t b[3] = {uv_buf_init(head, (unsigned)hl),
                   uv_buf_init((char *)r->p1, (unsigned)r->n1),
                   uv_buf_init((char *)r->p2, (unsigned)r->n2)};
  int rv = send_bufs(c, b, 3, 0, false);
  if (rv != 0) {
    conn_close_tcp(c);
    return rv;
  }
  http_next(c);
  return 0;
}

static int h1_open_sse(acp__hx *x) {
  wconn *c = hx_conn(x);
  static char sse[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      "Cache-Control: no-cache\r\nConnection: close\r\n\r\n";
  uv_buf_t b = uv_buf_init(sse, sizeof(sse) - 1);
  c->state = C_SSE;
  int rv = send_bufs(c, &b, 1, 0, false);
  if (rv != 0) {
    /* The client sees its stream end, not silence. Closed from the timer
     * (the caller is still using the exchange); nothing more is written
     * on it meanwhile, and the caller does not attach it. */
    c->wr_eof = true;
    uv_timer_stop(&c->timer);
    uv_timer_start(&c->timer, on_linger_timeout, 0, 0);
    return rv;
  }
  uv_timer_stop(&c->timer);
  if (c->ping_ms != UINT64_MAX)
    uv_timer_start(&c->timer, on_sse_ping, c->ping_ms, 0);
  update_tcp_reading(c);
  return 0;
}

static int h1_send(acp__hx *x, const uv_buf_t *b, unsigned nb, size_t credit) {
  uv_buf_t bufs[64]; /* a batch of SSE events (4 * EV_MAX) */
  if (nb > 64)
    return ACP_ERR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < nb; i++)
    bufs[i] = b[i];
  return send_bufs(hx_conn(x), bufs, nb, credit, false);
}

static void h1_finish(acp__hx *x) {
  /* Ends the SSE body: it is close-delimited. */
  conn_finish(hx_conn(x));
}

static void h1_taken(acp__hx *x) {
  wconn *c = hx_conn(x);
  if (c->h1_total > 0 && c->h1_total <= c->in.len)
    acp__buf_consume(&c->in, c->h1_total);
  c->h1_total = 0;
  c->state = C_WAIT;
  update_tcp_reading(c);
}

static size_t h1_reset(acp__hx *x) {
  conn_close_tcp(hx_conn(x)); /* no orderly end: a cut */
  return 0;
}

static const acp__hx_ops h1_ops = {h1_respond, h1_open_sse, h1_send,
                                   h1_finish,  h1_taken,    h1_reset};

/* MARK: - ACP connections (Private) */

/* One complete line from the agent: the initialize answer, or an event. */
/* Whether p1 + p2 is the response to initialize `id` (raw JSON): a
 * message with that id, a result or an error, and no method. */
static bool answers_init(hconn *hc, const char *p1, size_t n1, const char *p2,
                         size_t n2) {
  acp_json_doc *doc = NULL;
  char *joined = NULL;
  const char *p = p2;
  size_t n = n1 + n2;
  bool ok = false;
  if (n1 > 0) {
    joined = acp__malloc(&hc->mem, n ? n : 1);
    if (!joined)
      return false;
    memcpy(joined, p1, n1);
    memcpy(joined + n1, p2, n2);
    p = joined;
  }
  if (hc->init_id && acp_json_doc_new(&doc, &hc->mem) == 0 &&
      acp_json_doc_parse(doc, p, n, NULL) == 0) {
    const acp_json_val *root = acp_json_doc_root(doc);
    const acp_json_val *id = acp_json_obj_getz(root, "id");
    size_t il = 0;
    const char *ir = id ? acp_json_raw(id, &il) : NULL;
    ok =
        ir && il == strlen(hc->init_id) && memcmp(ir, hc->init_id, il) == 0 &&
        !acp_json_obj_getz(root, "method") &&
        (acp_json_obj_getz(root, "result") || acp_json_obj_getz(root, "error"));
  }
  acp_json_doc_free(doc);
  acp__free(&hc->mem, joined);
  return ok;
}

/* MARK: - Streamable HTTP: session streams, held POSTs (Private) */

/* Cap of session-scoped requests remembered per connection for routing
 * their answers (more are answered on the connection stream). */
#define HREQ_MAX 256u
/* POSTs held per connection while the agent is not reading, and how long
 * one may wait; beyond either: 503. */
#define HOLD_MAX 32u

/* Session events kept for a reopened stream: at least those not yet
 * written to a live stream, then the newest written ones up to this many
 * bytes (a client that reconnects with Last-Event-ID gets what it missed;
 * further back is refused, 410, not skipped). */
#define KEEP_BYTES ((size_t)1 << 20)
/* Sessions with a stream (open or gone) per connection. */
#define ROUTES_MAX 1024u

/* One session event ("id: N\ndata: ...\n\n"), kept for a replay. `credit`
 * is what its write completes on the link while it waits for a stream
 * (withheld: the agent's output backs up, as with `pend`), 0 once sent. */
typedef struct hkept {
  struct hkept *next;
  uint64_t id;
  size_t len, credit;
  size_t cap; /* text[] allocated */
  char text[];
} hkept;

/* A session's stream: `x` carries the messages of session sid[0..len), or
 * is NULL while the session's stream is gone (its events wait in `kept`
 * for the next GET with that Acp-Session-Id, as the SDK's server keeps
 * them in the session's mailbox). Session events carry ids (1, 2, ...):
 * what was written into a socket the peer had already closed, or cut
 * mid-event, is replayed to a client that sends Last-Event-ID. */
typedef struct hroute {
  struct hroute *next;
  acp__hx *x;
  uint64_t seq;  /* id of the newest event */
  uint64_t sent; /* ... of the newest written to a live stream */
  /* Loop time (ms) since when events of this session wait with no stream
   * to take them; 0: none wait, or a stream is open. */
  uint64_t stall_since;
  hkept *kept, *kept_tail;
  size_t kept_bytes;
  /* The agent answered session/close with a result (and the session was
   * not named by a POST since): when its stream goes, the route goes
   * (dead, freed by hc_routes_sweep()) instead of keeping the session's
   * events for a stream that will not come back. */
  bool closed;
  bool dead;
  size_t len;
  char sid[];
} hroute;

/* A request POSTed with Acp-Session-Id: text[0..id_len) is its raw JSON
 * id, then the session id. */
typedef struct hreq {
  struct hreq *next;
  size_t id_len, sid_len;
  bool closing; /* a session/close */
  char text[];
} hreq;

static hroute *hc_stream_for(hconn *hc, const char *sid, size_t len) {
  for (hroute *r = hc->routes; r; r = r->next)
    if (!r->dead && r->len == len && memcmp(r->sid, sid, len) == 0)
      return r;
  return NULL;
}

/* The session stream a message of the agent goes on, or NULL (the
 * connection stream): a request or notification whose params.sessionId
 * has a stream open, or the answer to a request POSTed with that
 * session's Acp-Session-Id (as the RFD routes them). */
static hroute *hc_route_of(hconn *hc, const char *p, size_t n) {
  const char *e = p + n, *vb, *ve;
  if (acp__js_member(p, e, "method", 6, &vb, &ve)) {
    if (!acp__js_member_in(p, e, "params", 6, "sessionId", 9, &vb, &ve) ||
        *vb != '"' || ve - vb < 2)
      return NULL;
    return hc_stream_for(hc, vb + 1, (size_t)(ve - vb - 2));
  }
  if (!hc->reqs || !acp__js_member(p, e, "id", 2, &vb, &ve))
    return NULL;
  for (hreq **pp = &hc->reqs; *pp; pp = &(*pp)->next) {
    hreq *q = *pp;
    if (q->id_len == (size_t)(ve - vb) && memcmp(q->text, vb, q->id_len) == 0) {
      hroute *to = hc_stream_for(hc, q->text + q->id_len, q->sid_len);
      if (to && q->closing && acp__js_member(p, e, "result", 6, &vb, &ve))
        to->closed = true;
      *pp = q->next;
      hc->nreqs--;
      acp__free(&hc->mem, q);
      return to;
    }
  }
  return NULL;
}

/* A POST with Acp-Session-Id, session streams open: remember a request's
 * id, so that its answer goes on the session's stream. */
static void hc_note_request(hconn *hc, const char *body, size_t blen,
                            const char *sid, size_t sid_len) {
  const char *e = body + blen, *vb, *ve, *mb, *me;
  if (hc->nreqs >= HREQ_MAX ||
      !acp__js_member(body, e, "method", 6, &mb, &me) ||
      !acp__js_member(body, e, "id", 2, &vb, &ve))
    return;
  size_t il = (size_t)(ve - vb);
  hreq *q = acp__malloc(&hc->mem, sizeof(*q) + il + sid_len);
  if (!q)
    return; /* its answer goes on the connection stream */
  q->id_len = il;
  q->sid_len = sid_len;
  q->closing = me - mb == 15 && memcmp(mb, "\"session/close\"", 15) == 0;
  memcpy(q->text, vb, il);
  memcpy(q->text + il, sid, sid_len);
  q->next = hc->reqs;
  hc->reqs = q;
  hc->nreqs++;
}

/*
 * A dropped kept event becomes the connection's spare (the larger of the
 * two is kept), which kept_add() reuses. Why: with large events (1 MiB
 * turns) every event was a fresh allocation of its size and the oldest was
 * freed right after; glibc serves such sizes from mmap or trims them off
 * the heap's top, so each event cost a page fault per 4 KiB touched and
 * the zeroing of those pages, twice the CPU of the copy itself (docs/
 * decisions.md, "The replay buffer's cost"). One spare per connection at
 * most, of 2 * KEEP_BYTES at most, freed with the connection's routes.
 */
static void kept_drop(hconn *hc, hkept *k) {
  hkept *s = hc->kept_spare;
  if (k->cap <= 2 * KEEP_BYTES && (!s || k->cap > s->cap)) {
    hc->kept_spare = k;
    k = s;
  }
  if (k)
    acp__free(&hc->mem, k);
}

/* Drop every kept event of `r`; returns the credit they withheld. */
static size_t kept_drop_all(hconn *hc, hroute *r) {
  size_t credit = 0;
  while (r->kept) {
    hkept *k = r->kept;
    r->kept = k->next;
    credit += k->credit;
    kept_drop(hc, k);
  }
  r->kept_tail = NULL;
  r->kept_bytes = 0;
  return credit;
}

static void kept_free(hconn *hc, hroute *r) {
  size_t credit = kept_drop_all(hc, r);
  if (credit && hc->link)
    acp_uv_link_user_written(hc->link, credit);
}

/* The session's route (made if new), now carried by `x`. NULL: out of
 * memory or too many sessions. */
static hroute *hc_route_add(hconn *hc, acp__hx *x, const char *sid,
                            size_t len) {
  unsigned n = 0;
  for (hroute *r = hc->routes; r; r = r->next, n++)
    if (!r->dead && r->len == len && memcmp(r->sid, sid, len) == 0) {
      r->x = x; /* the newest stream of the session */
      r->stall_since = 0;
      return r;
    }
  if (n >= ROUTES_MAX)
    return NULL;
  hroute *r = acp__calloc(&hc->mem, 1, sizeof(*r) + len);
  if (!r)
    return NULL;
  r->x = x;
  r->len = len;
  memcpy(r->sid, sid, len);
  r->next = hc->routes;
  hc->routes = r;
  return r;
}

/* The stream `x` went away: its session's events wait for the next;
 * a closed session's route is dead (its later messages go on the
 * connection stream). Not freed here: a caller up the stack (the write
 * that routed an event to `x`) may hold it. */
static void hc_route_gone(hconn *hc, acp__hx *x) {
  for (hroute *r = hc->routes; r; r = r->next)
    if (r->x == x) {
      r->x = NULL;
      if (r->closed) {
        r->dead = true;
        r->stall_since = 0;
      }
      return;
    }
}

/* Free the dead routes (hc_route_gone()): at the opening of a session
 * stream, before its route is made, so that closed sessions do not count
 * against ROUTES_MAX. Their kept events are dropped and their withheld
 * credit given back, after the list is whole again. */
static void hc_routes_sweep(hconn *hc) {
  size_t credit = 0;
  for (hroute **pp = &hc->routes; *pp;) {
    hroute *r = *pp;
    if (!r->dead) {
      pp = &r->next;
      continue;
    }
    *pp = r->next;
    credit += kept_drop_all(hc, r);
    acp__free(&hc->mem, r);
  }
  if (credit && hc->link)
    acp_uv_link_user_written(hc->link, credit);
}

/* The earliest stalled session's deadline has come (or a reopened stream
 * made it moot): a session whose events waited stall_ms for a stream ends
 * the whole connection, as the end of the connection stream does (and as
 * the TS SDK's server does when no client takes output for
 * maxOutputStallMs): the owner sees the link end with UV_ETIMEDOUT, as
 * for any vanished peer, and stops (or parks) the agent, which cancels
 * its turn; the kept events and their withheld credit go with the
 * connection. */
static void on_hc_stall(uv_timer_t *t) {
  hconn *hc = t->data;
  uint64_t now = uv_now(t->loop), next = UINT64_MAX;
  for (hroute *r = hc->routes; r; r = r->next) {
    if (r->x || !r->stall_since)
      continue;
    if (now - r->stall_since >= hc->stall_ms) {
      hc_end(hc, UV_ETIMEDOUT);
      return;
    }
    uint64_t left = hc->stall_ms - (now - r->stall_since);
    if (left < next)
      next = left;
  }
  if (next != UINT64_MAX)
    uv_timer_start(&hc->stall, on_hc_stall, next, 0);
}

/* An event of session `r` waits for a stream: its stall starts now if it
 * has not yet (one timer per connection, for the oldest stall). */
static void hc_stall_note(hconn *hc, hroute *r) {
  if (r->stall_since || hc->stall_ms == UINT64_MAX || !hc->link)
    return;
  r->stall_since = uv_now(hc->stall.loop);
  if (r->stall_since == 0)
    r->stall_since = 1; /* (0 means none) */
  if (!uv_is_active((uv_handle_t *)&hc->stall))
    uv_timer_start(&hc->stall, on_hc_stall, hc->stall_ms, 0);
}

/* Drop the oldest kept events already written, past KEEP_BYTES. */
static void kept_trim(hconn *hc, hroute *r) {
  while (r->kept && r->kept_bytes > KEEP_BYTES && r->kept->id <= r->sent &&
         r->kept != r->kept_tail) {
    hkept *k = r->kept;
    r->kept = k->next;
    r->kept_bytes -= k->len;
    kept_drop(hc, k);
  }
}

/* Keep a copy of event `id` (bufs b[0..4)); `credit` withheld if it is
 * not written now. ACP_ERR_NOMEM. */
static int kept_add(hconn *hc, hroute *r, uint64_t id, const uv_buf_t *b,
                    size_t credit) {
  size_t n = b[0].len + b[1].len + b[2].len + b[3].len;
  hkept *k = hc->kept_spare;
  if (k && k->cap >= n && k->cap / 2 <= n) {
    hc->kept_spare = NULL; /* reused: not more than twice the size */
  } else {
    k = acp__malloc(&hc->mem, sizeof(*k) + n);
    if (!k)
      return ACP_ERR_NOMEM;
    k->cap = n;
  }
  k->next = NULL;
  k->id = id;
  k->len = n;
  k->credit = credit;
  size_t off = 0;
  for (int i = 0; i < 4; i++) {
    if (b[i].len)
      memcpy(k->text + off, b[i].base, b[i].len);
    off += b[i].len;
  }
  if (r->kept_tail)
    r->kept_tail->next = k;
  else
    r->kept = k;
  r->kept_tail = k;
  r->kept_bytes += n;
  kept_trim(hc, r);
  return 0;
}

/* A session stream opened on route `r`: send the kept events after
 * `last` (what the client saw), then it is live. 0, or the status to
 * refuse the stream with (an id ahead of ours, or events not kept). */
static int kept_replay(hconn *hc, hroute *r, uint64_t last) {
  if (last > r->seq)
    return 400;
  if (last < r->seq && (!r->kept || r->kept->id > last + 1))
    return 410;
  for (hkept *k = r->kept; k && r->x; k = k->next) {
    if (k->id <= last)
      continue;
    uv_buf_t b = uv_buf_init(k->text, (unsigned)k->len);
    if (r->x->ops->send(r->x, &b, 1, k->credit) != 0)
      break; /* the stream is going: the rest waits for the next one */
    k->credit = 0;
    r->sent = k->id;
  }
  kept_trim(hc, r);
  return 0;
}

static void hc_routes_free(hconn *hc) {
  while (hc->routes) {
    hroute *r = hc->routes;
    hc->routes = r->next;
    kept_free(hc, r);
    acp__free(&hc->mem, r);
  }
  acp__free(&hc->mem, hc->kept_spare);
  hc->kept_spare = NULL;
  while (hc->reqs) {
    hreq *q = hc->reqs;
    hc->reqs = q->next;
    acp__free(&hc->mem, q);
  }
  hc->nreqs = 0;
  while (hc->held)
    acp__free(&hc->mem, hc_take_held(hc, NULL));
}

/* A held POST: its body and '\n' (text[0..len)), then the Acp-Session-Id
 * it came with (sid_len bytes, maybe none). */
typedef struct hheld {
  struct hheld *next;
  acp__hx *x;
  uint64_t deadline; /* loop time, ms */
  size_t len, sid_len;
  char text[];
} hheld;

static void on_hold(uv_timer_t *t);

/* At once while the agent reads (the held POSTs go on from the loop, not
 * from inside read_changed), else at the oldest one's deadline. */
static void hc_hold_arm(hconn *hc) {
  if (!hc->held || !hc->link) {
    uv_timer_stop(&hc->hold);
    return;
  }
  uint64_t now = uv_now(hc->hold.loop), due = 0;
  if (!acp_uv_link_is_reading(hc->link) && hc->held->deadline > now)
    due = hc->held->deadline - now;
  uv_timer_start(&hc->hold, on_hold, due, 0);
}

/* Hold the POST of `x` (a copy of its body: an HTTP/2 body is borrowed,
 * an HTTP/1.1 socket is not read meanwhile). 0, ACP_ERR_LIMIT (the cap),
 * ACP_ERR_NOMEM. */
static int hc_hold(hconn *hc, acp__hx *x, const char *body, size_t blen,
                   const acp__acp_req *r) {
  if (hc->nheld >= HOLD_MAX)
    return ACP_ERR_LIMIT;
  size_t sl = r->session_id ? r->session_id_len : 0;
  hheld *q = acp__malloc(&hc->mem, sizeof(*q) + blen + 1 + sl);
  if (!q)
    return ACP_ERR_NOMEM;
  q->next = NULL;
  q->x = x;
  q->deadline = uv_now(hc->hold.loop) + hc->hold_ms;
  q->len = blen + 1;
  q->sid_len = sl;
  if (blen)
    memcpy(q->text, body, blen);
  q->text[blen] = '\n';
  if (sl)
    memcpy(q->text + blen + 1, r->session_id, sl);
  if (hc->held_tail)
    hc->held_tail->next = q;
  else
    hc->held = q;
  hc->held_tail = q;
  hc->nheld++;
  x->hc = hc;
  x->role = H_HELD;
  if (x->ops->taken)
    x->ops->taken(x);
  hc_hold_arm(hc);
  return 0;
}

/* Unlink the held POST of `x` (or the oldest, x NULL) and return it; its
 * exchange is detached. */
static hheld *hc_take_held(hconn *hc, const acp__hx *x) {
  hheld *prev = NULL;
  for (hheld *q = hc->held; q; prev = q, q = q->next) {
    if (x && q->x != x)
      continue;
    if (prev)
      prev->next = q->next;
    else
      hc->held = q->next;
    if (hc->held_tail == q)
      hc->held_tail = prev;
    hc->nheld--;
    q->x->hc = NULL;
    q->x->role = H_NONE;
    q->x->next = NULL;
    return q;
  }
  return NULL;
}

/* The exchange of a held POST went away (reset, socket closed). */
static void hc_unhold(hconn *hc, acp__hx *x) {
  acp__free(&hc->mem, hc_take_held(hc, x));
  hc_hold_arm(hc);
}

/* One POSTed message to the agent, then 202 (502 if the link refused it).
 * body[blen] must be writable: it holds the '\n' for the call. */
static void hc_deliver(hconn *hc, acp__hx *x, char *body, size_t blen,
                       const char *sid, size_t sid_len) {
  if (sid && sid_len && hc->routes) {
    hroute *rt = hc_stream_for(hc, sid, sid_len);
    if (rt)
      rt->closed = false; /* in use again (session/load, say) */
    hc_note_request(hc, body, blen, sid, sid_len);
  }
  /* Body and '\n' in one delivery: the body alone can fill the agent's
   * queue past its mark, and the link takes nothing more after that. */
  char saved = body[blen];
  body[blen] = '\n';
  int rv = acp_uv_link_user_deliver(hc->link, body, blen + 1);
  body[blen] = saved;
  if (rv != 0) {
    hx_refuse(x, 502, detail_of(502));
    return;
  }
  acp__hx_resp ok = {202, NULL, NULL, NULL, NULL, 0, NULL, 0};
  (void)x->ops->respond(x, &ok);
}

static void on_hold(uv_timer_t *t) {
  hconn *hc = t->data;
  /* The agent reads: held POSTs go on, oldest first, while it does. */
  while (hc->held && hc->link && !hc->ended &&
         acp_uv_link_is_reading(hc->link)) {
    hheld *q = hc_take_held(hc, NULL);
    hc_deliver(hc, q->x, q->text, q->len - 1,
               q->sid_len ? q->text + q->len : NULL, q->sid_len);
    acp__free(&hc->mem, q);
  }
  uint64_t now = uv_now(t->loop);
  while (hc->held && hc->held->deadline <= now) {
    hheld *q = hc_take_held(hc, NULL);
    acp__hx *x = q->x;
    acp__free(&hc->mem, q);
    hx_refuse(x, 503, "the agent did not read in time: retry later");
  }
  hc_hold_arm(hc);
}

/* SSE events for one stream from one write of the link, sent together
 * (as frames_from() batches WebSocket frames: a turn's last update and its
 * answer were two sends, two segments, two wake-ups of the client). */
#define EV_MAX 16

typedef struct evbatch {
  acp__hx *to;
  uv_buf_t b[4 * EV_MAX];
  char idl[EV_MAX][32]; /* "id: N\ndata: " of a session event */
  unsigned n;           /* events */
  size_t credit;
} evbatch;

static int ev_flush(evbatch *f) {
  if (f->n == 0)
    return 0;
  int rv = f->to->ops->send(f->to, f->b, 4 * f->n, f->credit);
  f->n = 0;
  f->credit = 0;
  f->to = NULL;
  return rv;
}

static int hc_emit(hconn *hc, evbatch *f, const char *p1, size_t n1,
                   const char *p2, size_t n2, size_t credit) {
  acp__hx *w = hc->waiter;
  if (w) {
    int rv = ev_flush(f); /* (empty: initialize's answer comes first) */
    if (rv != 0)
      return rv;
  }
  if (w && !answers_init(hc, p1, n1, p2, n2)) {
    /* The 200 body must be initialize's response (the SDK's client
     * checks, and so does ours): anything else ends the connection. */
    hc->waiter = NULL;
    w->hc = NULL;
    w->role = H_NONE;
    hx_refuse(w, 502,
              "the agent's first message is not the response to initialize");
    acp_uv_link_user_written(hc->link, credit);
    hc_end(hc, UV_EPROTO);
    return 0;
  }
  if (w) {
    acp__free(&hc->mem, hc->init_id);
    hc->init_id = NULL;
    char cookie[200];
    affinity_value(hc->srv, hc->aff, cookie, sizeof(cookie));
    acp__hx_resp r = {200, NULL, hc->id, cookie[0] ? cookie : NULL,
                      p1,  n1,   p2,     n2};
    hc->waiter = NULL;
    w->hc = NULL;
    w->role = H_NONE;
    int rv = w->ops->respond(w, &r);
    acp_uv_link_user_written(hc->link, credit);
    if (rv != 0) {
      /* The answer could not be queued (its exchange was closed or reset):
       * the client does not wait for it, and the connection ends. */
      hc_end(hc, UV_ENOMEM);
      return 0;
    }
    hc_idle_start(hc);
    return 0;
  }
  acp__hx *to = hc->stream;
  hroute *sx = NULL;
  if (hc->routes) {
    if (n1 == 0)
      sx = hc_route_of(hc, p2, n2);
    else if (n2 == 0)
      sx = hc_route_of(hc, p1, n1);
    else if (p1 == hc->line.data && acp__buf_append(&hc->line, p2, n2) == 0) {
      /* A line split over reads is made whole (its tail copied once). */
      p1 = hc->line.data;
      n1 = hc->line.len;
      n2 = 0;
      sx = hc_route_of(hc, p1, n1);
    }
    if (sx)
      to = sx->x;
  }
  acp_remote_server *srv = hc->srv;
  if (sx && to && srv && srv->cut_armed && sx->seq >= 1 &&
      sx->seq + 1 > srv->cut_after) {
    /* The test hook: a server-side fault on this session stream. What
     * was batched goes first (HTTP/2: handed to nghttp2 and written out
     * now, ahead of the reset), then the stream is broken off and the
     * event waits for the client to open the stream again. */
    int rv = ev_flush(f);
    if (rv != 0)
      return rv;
    srv->cut_armed = false;
    if (srv->cut_done)
      (*srv->cut_done)++;
    acp_uv_link *link = hc->link;
    hx_detach(to); /* sx->x = NULL: the stream is gone */
    size_t held = to->ops->reset(to);
    if (held && link)
      acp_uv_link_user_written(link, held);
    to = NULL;
  }
  if (sx && !to) {
    /* The session's stream is gone: the event waits for the next one. */
    uv_buf_t b[4];
    char idl[32];
    int il = snprintf(idl, sizeof(idl),
                      "id: %llu\ndata: ", (unsigned long long)(sx->seq + 1));
    b[0] = uv_buf_init(idl, (unsigned)il);
    b[1] = uv_buf_init((char *)p1, (unsigned)n1);
    b[2] = uv_buf_init((char *)p2, (unsigned)n2);
    b[3] = uv_buf_init("\n\n", 2);
    int rv = kept_add(hc, sx, sx->seq + 1, b, credit);
    if (rv == 0) {
      sx->seq++;
      hc_stall_note(hc, sx);
    }
    return rv;
  }
  if (to) {
    if (f->n > 0 && f->to != to) {
      int rv = ev_flush(f);
      if (rv != 0)
        return rv;
    }
    uv_buf_t *b = f->b + 4 * f->n;
    b[0] = uv_buf_init("data: ", 6);
    b[1] = uv_buf_init((char *)p1, (unsigned)n1);
    b[2] = uv_buf_init((char *)p2, (unsigned)n2);
    b[3] = uv_buf_init("\n\n", 2);
    if (sx) {
      /* A session event: numbered, and kept for a replay (a copy: what
       * the link wrote is reused once the batch is sent). */
      char *idl = f->idl[f->n];
      int il = snprintf(idl, sizeof(f->idl[0]),
                        "id: %llu\ndata: ", (unsigned long long)(sx->seq + 1));
      b[0] = uv_buf_init(idl, (unsigned)il);
      int rv = kept_add(hc, sx, sx->seq + 1, b, 0);
      if (rv != 0)
        return rv;
      sx->seq++;
      sx->sent = sx->seq;
    }
    f->to = to;
    f->n++;
    f->credit += credit;
    return f->n == EV_MAX ? ev_flush(f) : 0;
  }
  int rv = ev_flush(f); /* events batched for a stream go first */
  if (rv == 0)
    rv = acp__buf_append(&hc->pend, "data: ", 6);
  if (rv == 0)
    rv = acp__buf_append(&hc->pend, p1, n1);
  if (rv == 0)
    rv = acp__buf_append(&hc->pend, p2, n2);
  if (rv == 0)
    rv = acp__buf_append(&hc->pend, "\n\n", 2);
  hc->pend_credit += credit;
  return rv;
}

/* Credit what hc->line held, now that it is dropped. */
static void hc_line_release(hconn *hc) {
  if (hc->line_credit && hc->link)
    acp_uv_link_user_written(hc->link, hc->line_credit);
  hc->line_credit = 0;
}

static int hc_op_write(acp_uv_link *l, const char *data, size_t len, void *ud) {
  hconn *hc = ud;
  evbatch f;
  int rv;
  (void)l;
  f.to = NULL;
  f.n = 0;
  f.credit = 0;
  while (len > 0) {
    const char *nl = memchr(data, '\n', len);
    if (!nl) {
      /* A batched event may point into hc->line, appended to next. */
      rv = ev_flush(&f);
      if (rv != 0)
        return rv;
      if (!hc->line_drop &&
          acp__buf_append(&hc->line, data, len) == ACP_ERR_LIMIT) {
        hc->line_drop = true;
        acp__buf_clear(&hc->line);
        hc_line_release(hc);
      }
      size_t hold = hc->line_drop ? 0 : line_hold(&hc->line_credit, len);
      if (len > hold)
        acp_uv_link_user_written(hc->link, len - hold);
      return 0;
    }
    size_t seg = (size_t)(nl - data);
    size_t n1 = hc->line.len, n2 = seg;
    if (n2 > 0 && data[n2 - 1] == '\r')
      n2--;
    else if (n2 == 0 && n1 > 0 && hc->line.data[n1 - 1] == '\r')
      n1--;
    size_t credit = seg + 1 + hc->line_credit;
    hc->line_credit = 0;
    if (hc->line_drop || (n1 == 0 && blank(data, n2)) ||
        n1 + n2 > hc->max_msg) {
      if (f.n > 0)
        f.credit += credit; /* in order with the batched events */
      else
        acp_uv_link_user_written(hc->link, credit);
    } else {
      /* Only the first line of a write can start in hc->line: it is
       * cleared below, and its bytes stay put until the batch is sent. */
      rv = hc_emit(hc, &f, hc->line.data, n1, data, n2, credit);
      if (rv != 0)
        return rv;
    }
    hc->line_drop = false;
    acp__buf_clear(&hc->line);
    data += seg + 1;
    len -= seg + 1;
  }
  return ev_flush(&f);
}

static void hc_op_read_changed(acp_uv_link *l, int reading, void *ud) {
  (void)l;
  (void)reading;
  hc_hold_arm(ud); /* held POSTs go on once the agent reads again */
}

static void hc_op_shutdown(acp_uv_link *l, void *ud) {
  (void)l;
  (void)ud;
}

/* The window's clock: the loop's, or the test hook's. */
static uint64_t gone_now(const acp_remote_server *s) {
  return s->gone_clock ? *s->gone_clock : uv_now(s->loop);
}

/* Forget the ids that ended more than gone_ms ago; the memory goes with
 * the last one. */
static void gone_expire(acp_remote_server *s) {
  uint64_t now = gone_now(s);
  while (s->ngone > 0 && now - s->gone[s->gone_head].at > s->gone_ms) {
    s->gone_head = (s->gone_head + 1) % s->gone_cap;
    s->ngone--;
  }
  if (s->ngone == 0 && s->gone) {
    acp__free(&s->mem, s->gone);
    s->gone = NULL;
    s->gone_cap = s->gone_head = 0;
  }
}

/* Remember that connection `id` ended (see GONE_MS). Without memory to
 * grow the ring the oldest id makes room (its DELETE would get 404). */
static void gone_add(acp_remote_server *s, const char *id) {
  gone_expire(s);
  if (s->ngone == s->gone_cap && s->gone_cap < s->gone_max) {
    unsigned cap = s->gone_cap ? s->gone_cap * 2 : 16;
    if (cap > s->gone_max)
      cap = s->gone_max;
    gone_id *g = acp__malloc(&s->mem, cap * sizeof(*g));
    if (g) {
      for (unsigned i = 0; i < s->ngone; i++)
        g[i] = s->gone[(s->gone_head + i) % s->gone_cap];
      acp__free(&s->mem, s->gone);
      s->gone = g;
      s->gone_cap = cap;
      s->gone_head = 0;
    }
  }
  if (s->gone_cap == 0)
    return;
  if (s->ngone == s->gone_cap) { /* full: the oldest goes */
    s->gone_head = (s->gone_head + 1) % s->gone_cap;
    s->ngone--;
  }
  gone_id *e = &s->gone[(s->gone_head + s->ngone) % s->gone_cap];
  memcpy(e->id, id, 36);
  e->at = gone_now(s);
  s->ngone++;
}

static void hc_op_close(acp_uv_link *l, void *ud) {
  hconn *hc = ud;
  (void)l;
  hc->link = NULL;
  if (hc->srv) {
    gone_add(hc->srv, hc->id);
    if (hc->prev)
      hc->prev->next = hc->next;
    else
      hc->srv->hconns = hc->next;
    if (hc->next)
      hc->next->prev = hc->prev;
    hc->srv->nhconns--;
    hc->srv = NULL;
  }
  acp__hx *w = hc->waiter;
  if (w) {
    hx_detach(w);
    hx_refuse(w, 502, detail_of(502));
  }
  if (hc->stream) {
    acp__hx *x = hc->stream;
    hx_detach(x);
    x->ops->finish(x);
  }
  while (hc->sessions) {
    acp__hx *x = hc->sessions;
    hx_detach(x);
    x->ops->finish(x);
  }
  while (hc->held) {
    acp__hx *x = hc->held->x;
    hx_detach(x);
    hx_refuse(x, 410, "the connection ended");
  }
  hc_close_handles(hc);
}

static const acp_uv_link_ops hc_ops = {hc_op_write, hc_op_read_changed,
                                       hc_op_shutdown, hc_op_close};

/* Methods the RFD (and the TS SDK's server) call session-scoped: their
 * POST must carry Acp-Session-Id even if params has no sessionId. */
static bool session_scoped_method(const char *vb, const char *ve) {
  static const char *const m[] = {
      "\"session/cancel\"",   "\"session/close\"",
      "\"session/delete\"",   "\"session/fork\"",
      "\"session/load\"",     "\"session/prompt\"",
      "\"session/resume\"",   "\"session/set_config_option\"",
      "\"session/set_mode\"", "\"session/set_model\""};
  size_t n = (size_t)(ve - vb);
  for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
    if (strlen(m[i]) == n && memcmp(m[i], vb, n) == 0)
      return true;
  return false;
}

/* The RFD's rule for a POST on a connection: a request or notification
 * about a session (a session-scoped method, or a params.sessionId) names
 * that session in Acp-Session-Id. NULL when the POST follows it, else the
 * 400's text. Responses are not checked (the server does not remember
 * which of the agent's requests were about a session). Found with the
 * routing scanner: no parse of a body that may be megabytes. */
static const char *session_header_problem(const char *body, size_t blen,
                                          const acp__acp_req *r) {
  const char *e = body + blen, *mb, *me, *vb = NULL, *ve = NULL;
  if (!acp__js_member(body, e, "method", 6, &mb, &me))
    return NULL;
  bool has_sid =
      acp__js_member_in(body, e, "params", 6, "sessionId", 9, &vb, &ve) &&
      *vb == '"' && ve - vb >= 2;
  if (!r->session_id)
    return has_sid || session_scoped_method(mb, me)
               ? "Missing Acp-Session-Id: a session-scoped POST names its "
                 "session in that header"
               : NULL;
  /* A sessionId with escapes is not compared (the header has none). */
  if (has_sid && !memchr(vb, '\\', (size_t)(ve - vb)) &&
      ((size_t)(ve - vb - 2) != r->session_id_len ||
       memcmp(vb + 1, r->session_id, r->session_id_len) != 0))
    return "Mismatched Acp-Session-Id: the header and params.sessionId "
           "differ";
  return NULL;
}

static hconn *hc_find(acp_remote_server *s, const acp__acp_req *r) {
  if (!s || r->conn_id_len != 36)
    return NULL;
  for (hconn *hc = s->hconns; hc; hc = hc->next)
    if (memcmp(hc->id, r->conn_id, 36) == 0)
      return hc->ended ? NULL : hc;
  return NULL;
}

/* A DELETE names a connection that is over but was ours: one still
 * ending (its link not yet closed) or one ended in the last GONE_MS. A
 * client ends its GET streams before it DELETEs (ours and the TS SDK's
 * do), and the end of the connection stream already ended the
 * connection: its DELETE succeeds (202, as the SDK's server answers a
 * connection still shutting down), where 404 would report a failure of
 * a close that worked. */
static bool hc_was(acp_remote_server *s, const acp__acp_req *r) {
  if (!s || r->conn_id_len != 36)
    return false;
  for (hconn *hc = s->hconns; hc; hc = hc->next)
    if (memcmp(hc->id, r->conn_id, 36) == 0)
      return true;
  gone_expire(s);
  for (unsigned i = 0; i < s->ngone; i++)
    if (memcmp(s->gone[(s->gone_head + i) % s->gone_cap].id, r->conn_id, 36) ==
        0)
      return true;
  return false;
}

/* The raw JSON id of an initialize request in body[0..blen), or NULL
 * (not initialize, no id, or out of memory: *nomem says which). */
static char *initialize_id(const acp_mem *m, const char *body, size_t blen,
                           bool *nomem) {
  acp_json_doc *doc = NULL;
  char *out = NULL;
  *nomem = false;
  if (acp_json_doc_new(&doc, m) != 0) {
    *nomem = true;
    return NULL;
  }
  if (acp_json_doc_parse(doc, body, blen, NULL) == 0) {
    const acp_json_val *root = acp_json_doc_root(doc);
    const acp_json_val *id = acp_json_obj_getz(root, "id");
    size_t il = 0;
    const char *ir = id ? acp_json_raw(id, &il) : NULL;
    if (ir && acp_json_type_of(id) != ACP_JSON_NULL &&
        ACP_JSON_STR_EQ_LIT(acp_json_obj_getz(root, "method"), "initialize")) {
      out = acp__strndup(m, ir, il);
      *nomem = out == NULL;
    }
  }
  acp_json_doc_free(doc);
  return out;
}

static void hx_initialize(acp_remote_server *s, acp__hx *x,
                          const acp__http_head *h, char *body, size_t blen) {
  bool nomem;
  char *init_id = initialize_id(&s->mem, body, blen, &nomem);
  if (!init_id) {
    if (nomem)
      hx_refuse(x, 503, detail_of(503));
    else
      hx_refuse(x, 400,
                "the first POST must be an initialize request with an id "
                "(or send an Acp-Connection-Id)");
    return;
  }
  hconn *hc = s->nhconns >= s->opts.max_connections
                  ? NULL
                  : acp__calloc(&s->mem, 1, sizeof(*hc));
  if (!hc) {
    acp__free(&s->mem, init_id);
    hx_refuse(x, 503, detail_of(503));
    return;
  }
  hc->mem = s->mem;
  hc->init_id = init_id;
  hc->max_msg = s->opts.max_message ? s->opts.max_message
                                    : ACP_REMOTE_DEFAULT_MAX_MESSAGE;
  hc->hold_ms = s->opts.hold_ms ? s->opts.hold_ms : ACP_REMOTE_DEFAULT_HOLD_MS;
  /* A client has two ping intervals, and at least 10 s, to open its
   * stream after initialize: a short --ping-ms (quick drop detection)
   * must not fail clients that are merely slow under load. */
  hc->idle_ms = s->opts.ping_ms ? s->opts.ping_ms : ACP_REMOTE_DEFAULT_PING_MS;
  if (hc->idle_ms != UINT64_MAX)
    hc->idle_ms = hc->idle_ms < 5000 ? 10000 : 2 * hc->idle_ms;
  acp__buf_init(&hc->line, &hc->mem, hc->max_msg);
  acp__buf_init(&hc->pend, &hc->mem, 0);
  uv_timer_init(s->loop, &hc->idle);
  hc->idle.data = hc;
  uv_timer_init(s->loop, &hc->hold);
  hc->hold.data = hc;
  uv_timer_init(s->loop, &hc->stall);
  hc->stall.data = hc;
  hc->stall_ms =
      s->opts.stall_ms ? s->opts.stall_ms : ACP_REMOTE_DEFAULT_STALL_MS;
  uuid4(hc->id);
  affinity_of(s, h, hc->id, hc->aff);
  if (acp_uv_link_new_user(&hc->link, s->loop, &hc_ops, hc, &hc->mem) != 0) {
    hc->link = NULL;
    hc_close_handles(hc);
    hx_refuse(x, 503, detail_of(503));
    return;
  }
  hc->srv = s;
  hc->next = s->hconns;
  if (s->hconns)
    s->hconns->prev = hc;
  s->hconns = hc;
  s->nhconns++;
  hc->waiter = x;
  x->hc = hc;
  x->role = H_WAITER;
  s->cur_aff = hc->aff[0] ? hc->aff : NULL;
  s->cb(s, hc->link, hc->id, s->ud);
  s->cur_aff = NULL;
  /* The owner may have closed it at once (no agent): hc_op_close ran and
   * answered 502; hc stays allocated until its timer's close callback. */
  if (!hc->link)
    return;
  /* The request leaves the socket's buffer before the agent sees it: an
   * owner that answers at once re-enters this socket (http_next). */
  char *copy = acp__malloc(&hc->mem, blen + 1);
  if (copy) {
    memcpy(copy, body, blen);
    copy[blen] = '\n';
  }
  if (x->ops->taken)
    x->ops->taken(x);
  if (!copy || !acp_uv_link_is_reading(hc->link) ||
      acp_uv_link_user_deliver(hc->link, copy, blen + 1) != 0)
    hc_end(hc, UV_EPROTO);
  acp__free(&hc->mem, copy);
}

/* A Streamable HTTP request (checked into `r`) with its whole body, on
 * an exchange of either HTTP version. Answers through x->ops. */
static void hx_serve(acp_remote_server *s, acp__hx *x, const acp__http_head *h,
                     const acp__acp_req *r, char *body, size_t blen) {
  if (r->kind == ACP__REQ_POST) {
    /* Line mode, as for WebSocket text: a raw CR or LF is whitespace.
     * Both in one pass (a byte loop here was a slow pass over every byte
     * of a 1 MiB prompt, and a memchr() for each two passes). */
    acp__eol_blank(body, blen);
    if (!r->conn_id) {
      hx_initialize(s, x, h, body, blen);
      return;
    }
    hconn *hc = hc_find(s, r);
    if (!hc) {
      hx_refuse(x, 404, "unknown Acp-Connection-Id");
      return;
    }
    const char *why = session_header_problem(body, blen, r);
    if (why) {
      hx_refuse(x, 400, why);
      return;
    }
    if (!acp_uv_link_is_reading(hc->link) || hc->held) {
      /* The agent's stdin is backed up: the POST waits its turn (in
       * order, up to a cap and a deadline), then 503. */
      int hr = hc_hold(hc, x, body, blen, r);
      if (hr == ACP_ERR_LIMIT)
        hx_refuse(x, 503,
                  "the agent is not reading and too many messages wait: "
                  "retry later");
      else if (hr != 0)
        hx_refuse(x, 503, detail_of(503));
      return;
    }
    hc_deliver(hc, x, body, blen, r->session_id, r->session_id_len);
    return;
  }
  hconn *hc = hc_find(s, r);
  if (!hc && r->kind == ACP__REQ_DELETE && hc_was(s, r)) {
    acp__hx_resp ok = {202, NULL, NULL, NULL, NULL, 0, NULL, 0};
    (void)x->ops->respond(x, &ok); /* it is over already */
    return;
  }
  if (!hc) {
    hx_refuse(x, 404, "unknown Acp-Connection-Id");
    return;
  }
  if (r->kind == ACP__REQ_DELETE) {
    acp__hx_resp ok = {202, NULL, NULL, NULL, NULL, 0, NULL, 0};
    (void)x->ops->respond(x, &ok);
    /* The owner stops the agent with its ladder and closes the link. */
    hc_end(hc, UV_EOF);
    return;
  }
  if (!r->session_id && hc->stream) {
    hx_refuse(x, 409, detail_of(409));
    return;
  }
  /* Last-Event-ID on a session stream: the id of the last event the
   * client has of that session; the stream starts after it. */
  uint64_t last = 0;
  bool has_last = false;
  if (r->session_id) {
    hc_routes_sweep(hc);
    const acp__http_header *le = acp__http_find(h, "Last-Event-ID");
    if (le) {
      has_last = le->value_len > 0 && le->value_len <= 19;
      for (size_t i = 0; has_last && i < le->value_len; i++) {
        if (le->value[i] < '0' || le->value[i] > '9')
          has_last = false;
        else
          last = last * 10 + (uint64_t)(le->value[i] - '0');
      }
      if (!has_last) {
        hx_refuse(x, 400, "Last-Event-ID is not an event id of this server");
        return;
      }
    }
    hroute *rt = hc_stream_for(hc, r->session_id, (size_t)r->session_id_len);
    uint64_t seq = rt ? rt->seq : 0;
    if (has_last && last > seq) {
      hx_refuse(x, 400, "Last-Event-ID is ahead of this session's events");
      return;
    }
    if (has_last && last < seq && (!rt->kept || rt->kept->id > last + 1)) {
      hx_refuse(x, 410,
                "the session's events after Last-Event-ID are no longer "
                "kept: load the session again");
      return;
    }
  }
  if (x->ops->open_sse(x) != 0) {
    /* Reset (or its socket closed): the client sees that stream end
     * before it opened. It is not attached, so nothing is sent into it
     * and lost: a session's messages stay on the connection stream, and
     * the connection's wait in `pend` for a stream that opens. */
    return;
  }
  x->hc = hc;
  if (r->session_id) {
    /* The session's messages go here from now on (hc_route_of), after
     * those it missed. */
    x->role = H_SESSION;
    x->next = hc->sessions;
    hc->sessions = x;
    hroute *rt = hc_route_add(hc, x, r->session_id, r->session_id_len);
    if (rt && kept_replay(hc, rt, has_last ? last : rt->sent) != 0)
      x->ops->finish(x); /* (refused above: not reached) */
    return;
  }
  x->role = H_STREAM;
  hc->stream = x;
  uv_timer_stop(&hc->idle);
  if (hc->pend.len > 0) {
    uv_buf_t pb = uv_buf_init(hc->pend.data, (unsigned)hc->pend.len);
    size_t credit = hc->pend_credit;
    acp__buf held = hc->pend;
    hc->pend_credit = 0;
    acp__buf_init(&hc->pend, &hc->mem, 0);
    (void)x->ops->send(x, &pb, 1, credit);
    acp__buf_dispose(&held);
  }
}

static void http_request(wconn *c, const acp__http_head *h, size_t head_len) {
  acp_remote_server *s = c->srv;
  acp__acp_req r;
  size_t max = s->opts.max_message ? s->opts.max_message
                                   : ACP_REMOTE_DEFAULT_MAX_MESSAGE;
  int st = acp__http_check_acp(h, max, &r);
  if (st != 0) {
    refuse(c, st);
    return;
  }
  size_t blen = r.kind == ACP__REQ_POST ? r.content_length : 0;
  if (c->in.len < head_len + blen) {
    c->h1_want = head_len + blen; /* the body is still coming */
    return;
  }
  c->h1_want = 0;
  c->h1_total = head_len + blen;
  hx_serve(s, &c->hx, h, &r, c->in.data + head_len, blen);
  /* A 202 leaves the socket ready for the next request; an initialize
   * consumed its bytes (h1_taken), an SSE stream or a refusal keeps it. */
  if (c->h1_total > 0 && c->state == C_HANDSHAKE && !c->tcp_closed &&
      !c->lingering) {
    acp__buf_consume(&c->in, c->h1_total);
    c->h1_total = 0;
    http_next(c);
  }
  c->h1_total = 0;
}

/* MARK: - HTTP/2 (Private) */

/* An HTTP/2 request: the same checks as an HTTP/1.1 one (path, Host from
 * :authority, Origin, token; then the Streamable HTTP rules). HTTP/2 has
 * no WebSocket upgrade here (RFC 8441 is not offered). */
static void h2_request(void *ud, acp__hx *x, const acp__http_head *h,
                       char *body, size_t blen) {
  wconn *c = ud;
  acp_remote_server *s = c->srv;
  char accept[29];
  acp__acp_req r;
  if (!s) {
    hx_refuse(x, 503, "the server is shutting down");
    return;
  }
  acp__ws_policy pol = {"/acp", s->token, (const char *const *)s->hosts};
  int st = acp__ws_check_request(h, &pol, accept);
  if (st == 101 || st == 400)
    st = 400;
  else if (st == 501 || st == 426)
    st = acp__http_check_acp(h,
                             s->opts.max_message
                                 ? s->opts.max_message
                                 : ACP_REMOTE_DEFAULT_MAX_MESSAGE,
                             &r);
  if (st != 0) {
    hx_refuse(x, st, detail_of(st));
    return;
  }
  hx_serve(s, x, h, &r, body, blen);
}

static int h2_write(void *ud, const char *data, size_t len) {
  wconn *c = ud;
  uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
  return send_bufs(c, &b, 1, 0, false);
}

/* The socket's queue past this stops taking frames from the streams. */
#define H2_HIGH_WATER ((size_t)256 << 10)

static bool h2_writable(void *ud) {
  wconn *c = ud;
  return !c->tcp_closed && !c->wr_eof &&
         uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) < H2_HIGH_WATER;
}

static void h2_release(void *ud, acp__hx *x, size_t credit, bool stalled) {
  wconn *c = ud;
  if (credit && x->hc && x->hc->link)
    acp_uv_link_user_written(x->hc->link, credit);
  /* The socket stalled (wstall_end), or this stream did (its client gave
   * it no window for stall_ms): the connections of the streams end with
   * why, rather than as for a stream the client closed. */
  if ((c->stalled || stalled) && x->hc && x->role != H_HELD)
    hc_end(x->hc, UV_ETIMEDOUT);
  hx_detach(x);
}

/* Output waits in a stream: look at its progress (on_wstall). */
static void h2_waiting(void *ud) {
  wconn *c = ud;
  if (wstall_on(c) && !uv_is_active((uv_handle_t *)&c->wstall))
    uv_timer_start(&c->wstall, on_wstall, wstall_tick(c), 0);
}

static void h2_credit(void *ud, acp__hx *x, size_t n) {
  (void)ud;
  if (n && x->hc && x->hc->link)
    acp_uv_link_user_written(x->hc->link, n);
}

static void on_h2_ping(uv_timer_t *t);

static void on_h2_over(uv_timer_t *t) {
  wconn *c = t->data;
  h2_check(c);
  if (c->h2 && !c->tcp_closed && !c->lingering && c->ping_ms != UINT64_MAX)
    uv_timer_start(&c->timer, on_h2_ping, c->ping_ms, 0);
}

/* h2.c found the connection over outside our reads and writes (an answer
 * from a timer or the agent's side broke it): finish it from the loop. */
static void h2_over(void *ud) {
  wconn *c = ud;
  if (c->tcp_closed || c->lingering)
    return;
  uv_timer_stop(&c->timer);
  uv_timer_start(&c->timer, on_h2_over, 0, 0);
}

static const acp__h2_io h2_io = {h2_write,  h2_writable, h2_request, h2_release,
                                 h2_credit, h2_over,     h2_waiting};

/* After the session read or wrote: close a connection that is over. */
static void h2_check(wconn *c) {
  if (c->h2 && !c->tcp_closed && !c->lingering && acp__h2_done(c->h2))
    conn_finish(c);
}

static void on_h2_ping(uv_timer_t *t) {
  wconn *c = t->data;
  if (c->state != C_H2 || !c->h2 || c->tcp_closed || c->lingering)
    return;
  /* A connection without streams that says nothing for two intervals (at
   * least 10 s, as an HTTP/1.1 socket between requests) is closed. */
  uint64_t limit = c->ping_ms < 5000 ? 10000 : 2 * c->ping_ms;
  if (c->heard || !acp__h2_idle(c->h2))
    c->h2_quiet = 0;
  else
    c->h2_quiet += c->ping_ms;
  c->heard = false;
  if (c->h2_quiet >= limit)
    acp__h2_goaway(c->h2);
  else
    acp__h2_keepalive(c->h2);
  h2_check(c);
  if (c->h2)
    uv_timer_start(&c->timer, on_h2_ping, c->ping_ms, 0);
}

/* The bytes read so far are an HTTP/2 connection: hand it to h2.c (from
 * the preface today; after ALPN "h2" too). */
static void h2_start(wconn *c) {
  acp_remote_server *s = c->srv;
  size_t max = s && s->opts.max_message ? s->opts.max_message
                                        : ACP_REMOTE_DEFAULT_MAX_MESSAGE;
  if (acp__h2_new(&c->h2, &h2_io, c, max, &c->mem) != 0) {
    conn_close_tcp(c);
    return;
  }
  c->state = C_H2;
  uv_timer_stop(&c->timer);
  if (c->ping_ms != UINT64_MAX)
    uv_timer_start(&c->timer, on_h2_ping, c->ping_ms, 0);
  acp__buf held = c->in;
  acp__buf_init(&c->in, &c->mem, 0);
  int rv = acp__h2_recv(c->h2, held.data, held.len);
  acp__buf_dispose(&held);
  if (rv != 0)
    conn_finish(c); /* after the GOAWAY, if one was queued */
  else
    h2_check(c);
}

static void h2_drop(wconn *c) {
  if (c->h2) {
    acp__h2 *h = c->h2;
    c->h2 = NULL;
    acp__h2_free(h); /* its streams' ACP connections are released */
  }
}

static void h2_pump(wconn *c) {
  acp__h2_flush(c->h2);
  h2_check(c);
}

static void h2_read(wconn *c, const char *data, size_t len) {
  if (!c->h2)
    return;
  if (acp__h2_recv(c->h2, data, len) != 0)
    conn_finish(c);
  else
    h2_check(c);
}

/* MARK: - Server (Public) */

static char *hostport(const acp_mem *m, const char *h, int port) {
  char buf[300];
  if (strchr(h, ':'))
    snprintf(buf, sizeof(buf), "[%s]:%d", h, port);
  else
    snprintf(buf, sizeof(buf), "%s:%d", h, port);
  return acp__strdup(m, buf);
}

static void on_server_closed(uv_handle_t *h) {
  acp_remote_server *s = h->data;
  s->tcp_closed = true;
  if (!s->spare_busy) /* else on_spare_closed() frees it */
    server_free(s);
}

static void server_free(acp_remote_server *s) {
  /* Every slot: a failed copy leaves a NULL before filled ones. */
  for (size_t i = 0; s->hosts && i < s->nhosts; i++)
    acp__free(&s->mem, s->hosts[i]);
  acp__free(&s->mem, s->hosts);
  acp__free(&s->mem, s->token);
  acp__free(&s->mem, s->aff_name);
  acp__free(&s->mem, s->rbuf);
  acp__free(&s->mem, s->gone);
  acp__tls_conf_unref(s->tls);
  acp__free(&s->mem, s);
}

int acp_remote_server_new(acp_remote_server **out, uv_loop_t *loop,
                          const acp_remote_server_options *opts,
                          acp_remote_accept_cb cb, void *user_data,
                          const acp_mem *mem, int *uv_err_out) {
  acp_remote_server_options dflt = ACP_REMOTE_SERVER_OPTIONS_INIT;
  struct sockaddr_storage ss;
  acp_mem m;
  int r;
  if (uv_err_out)
    *uv_err_out = 0;
  if (out)
    *out = NULL;
  if (!out || !loop || !cb)
    return ACP_ERR_INVALID_ARGUMENT;
  if (!opts)
    opts = &dflt;
  const acp_remote_tls *tls = opts->version >= 3 ? opts->tls : NULL;
  if (tls && !acp__tls_conf_ready(tls))
    return ACP_ERR_INVALID_ARGUMENT; /* a client's, or no certificate */
  const char *host = opts->host ? opts->host : "127.0.0.1";
  if (uv_ip4_addr(host, opts->port, (struct sockaddr_in *)&ss) != 0 &&
      uv_ip6_addr(host, opts->port, (struct sockaddr_in6 *)&ss) != 0)
    return ACP_ERR_INVALID_ARGUMENT;
  acp__mem_init(&m, mem);
  acp_remote_server *s = acp__calloc(&m, 1, sizeof(*s));
  if (!s)
    return ACP_ERR_NOMEM;
  s->mem = m;
  s->loop = loop;
  s->opts = *opts;
  if (tls) {
    /* Ours to keep: the caller may free theirs once we return. */
    s->tls = (acp_remote_tls *)tls;
    acp__tls_conf_ref(s->tls);
  }
  s->cb = cb;
  s->ud = user_data;
  if (s->opts.max_connections == 0)
    s->opts.max_connections = ACP_REMOTE_DEFAULT_MAX_CONNECTIONS;
  if (opts->version < 4) {
    /* Not in the caller's struct. */
    s->opts.hold_ms = 0;
    s->opts.log = NULL;
    s->opts.log_user_data = NULL;
  }
  if (opts->version < 5)
    s->opts.log_tls = 0;
  if (opts->version < 6)
    s->opts.stall_ms = 0;
  s->gone_max = GONE_MAX;
  s->gone_ms = GONE_MS;
  uv_tcp_init(loop, &s->tcp);
  s->tcp.data = s;
  r = uv_tcp_bind(&s->tcp, (struct sockaddr *)&ss, 0);
  if (r == 0)
    r = uv_listen((uv_stream_t *)&s->tcp, 128, on_connection);
  if (r != 0) {
    if (uv_err_out)
      *uv_err_out = r;
    uv_close((uv_handle_t *)&s->tcp, on_server_closed);
    return ACP_ERR_SYSTEM;
  }
  int len = sizeof(ss);
  uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&ss, &len);
  s->port =
      ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                     : ((struct sockaddr_in *)&ss)->sin_port);
  size_t extra = 0;
  if (opts->allowed_hosts)
    while (opts->allowed_hosts[extra])
      extra++;
  s->hosts = acp__calloc(&s->mem, extra + 5, sizeof(char *));
  if (!s->hosts)
    goto nomem;
  size_t k = 0;
  s->nhosts = extra + 2;
  s->hosts[k++] = hostport(&s->mem, host, s->port);
  s->hosts[k++] = hostport(&s->mem, "localhost", s->port);
  for (size_t i = 0; i < extra; i++)
    s->hosts[k++] = acp__strdup(&s->mem, opts->allowed_hosts[i]);
  for (size_t i = 0; i < k; i++)
    if (!s->hosts[i])
      goto nomem;
  if (opts->token) {
    s->token = acp__strdup(&s->mem, opts->token);
    if (!s->token)
      goto nomem;
  }
  s->opts.token = s->token;
  if (opts->version >= 2 && opts->affinity_cookie) {
    const char *n = opts->affinity_cookie;
    bool ok = n[0] != '\0' && strlen(n) < 64;
    for (const char *q = n; *q && ok; q++)
      ok = (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
           (*q >= '0' && *q <= '9') || *q == '_' || *q == '-';
    if (!ok) {
      uv_close((uv_handle_t *)&s->tcp, on_server_closed);
      return ACP_ERR_INVALID_ARGUMENT;
    }
    s->aff_name = acp__strdup(&s->mem, n);
    if (!s->aff_name)
      goto nomem;
  }
  *out = s;
  return 0;
nomem:
  uv_close((uv_handle_t *)&s->tcp, on_server_closed);
  return ACP_ERR_NOMEM;
}

const char *acp_remote_server_affinity(const acp_remote_server *s) {
  return s ? s->cur_aff : NULL;
}

void acp__remote_server_gone_limits(acp_remote_server *srv, unsigned max,
                                    uint64_t ms) {
  srv->gone_max = max;
  srv->gone_ms = ms;
}

void acp__remote_server_gone_clock(acp_remote_server *srv,
                                   const uint64_t *now_ms) {
  srv->gone_clock = now_ms;
}

unsigned acp__remote_server_gone_held(const acp_remote_server *srv,
                                      unsigned *cap) {
  *cap = srv->gone_cap;
  return srv->ngone;
}

unsigned acp__remote_server_session_routes(const acp_remote_server *srv,
                                           unsigned *streams) {
  unsigned n = 0;
  *streams = 0;
  for (const hconn *hc = srv->hconns; hc; hc = hc->next) {
    for (const hroute *r = hc->routes; r; r = r->next)
      n++;
    for (const acp__hx *x = hc->sessions; x; x = x->next)
      (*streams)++;
  }
  return n;
}

int acp__remote_server_cut_session_stream(acp_remote_server *srv,
                                          uint64_t after, unsigned *done) {
  if (!srv)
    return ACP_ERR_INVALID_ARGUMENT;
  srv->cut_armed = true;
  srv->cut_after = after;
  srv->cut_done = done;
  return 0;
}

int acp_remote_server_port(const acp_remote_server *s) {
  return s ? s->port : 0;
}

unsigned acp_remote_server_connections(const acp_remote_server *s) {
  return s ? s->nconns : 0;
}

void acp_remote_server_close(acp_remote_server *s) {
  if (!s || s->closing)
    return;
  s->closing = true;
  for (wconn *c = s->conns; c;) {
    wconn *next = c->next;
    c->srv = NULL;
    c->prev = c->next = NULL;
    if (c->state == C_HANDSHAKE)
      conn_close_tcp(c);
    else if (c->state == C_H2 && c->h2) {
      /* GOAWAY: no new streams; the open ones end with their links. */
      acp__h2_goaway(c->h2);
      h2_check(c);
    }
    c = next;
  }
  s->conns = NULL;
  for (hconn *hc = s->hconns; hc; hc = hc->next)
    hc->srv = NULL;
  s->hconns = NULL;
  uv_close((uv_handle_t *)&s->tcp, on_server_closed);
}

/* MARK: - Client (Private) */

static void client_fail(wconn *c, int err, const char *detail) {
  if (c->ccb) {
    acp_remote_connect_cb cb = c->ccb;
    c->ccb = NULL;
    cb(c->link, err, detail, c->cud);
  }
  c->state = C_DONE;
  end_link(c, UV_ECONNREFUSED);
  conn_close_tcp(c);
}

static void client_handshake(wconn *c) {
  acp__http_head h;
  char detail[300];
  acp_ssize n = acp__http_parse_head(c->in.data, c->in.len, true, &h);
  if (n == 0)
    return;
  if (n < 0) {
    client_fail(c, ACP_ERR_PROTOCOL, "the server's answer is not HTTP");
    return;
  }
  if (h.status != 101) {
    /* Say what the server said: its status and the start of its body. */
    size_t body = c->in.len - (size_t)n;
    if (body > 200)
      body = 200;
    while (body > 0 && (c->in.data[n + (acp_ssize)body - 1] == '\n' ||
                        c->in.data[n + (acp_ssize)body - 1] == '\r'))
      body--;
    snprintf(detail, sizeof(detail), "HTTP %d %.*s%s%.*s", h.status,
             (int)h.target_len, h.target, body ? ": " : "", (int)body,
             c->in.data + n);
    client_fail(c, ACP_ERR_PROTOCOL, detail);
    return;
  }
  const acp__http_header *acc = acp__http_find(&h, "Sec-WebSocket-Accept");
  if (!acc || acc->value_len != 28 || memcmp(acc->value, c->accept, 28) != 0 ||
      !acp__http_has_token(&h, "Upgrade", "websocket")) {
    client_fail(c, ACP_ERR_PROTOCOL, "the server did not accept the upgrade");
    return;
  }
  const acp__http_header *id = acp__http_find(&h, "Acp-Connection-Id");
  snprintf(c->conn_id, sizeof(c->conn_id), "%.*s", id ? (int)id->value_len : 0,
           id ? id->value : "");
  acp__buf_consume(&c->in, (size_t)n);
  c->state = C_OPEN;
  uv_timer_stop(&c->timer);
  start_ping(c);
  /* Lines written while connecting go out now. */
  acp__buf pending = c->line;
  acp__buf_init(&c->line, &c->mem, c->ws.max_msg);
  /* Their bytes were reported sent when they were buffered. */
  c->no_credit = true;
  int rv = frames_from(c, pending.data, pending.len);
  c->no_credit = false;
  acp__buf_dispose(&pending);
  if (rv != 0) {
    client_fail(c, rv, "cannot send what was written while connecting");
    return;
  }
  if (c->ccb) {
    acp_remote_connect_cb cb = c->ccb;
    c->ccb = NULL;
    cb(c->link, 0, c->conn_id, c->cud);
  }
  if (c->in.len > 0 && c->link_reading) {
    uv_timer_start(&c->resume, on_resume, 0, 0);
    update_tcp_reading(c);
    return;
  }
  update_tcp_reading(c);
}

static void on_connect(uv_connect_t *req, int status) {
  wconn *c = req->data;
  if (c->tcp_closed)
    return;
  if (status < 0) {
    char d[200];
    snprintf(d, sizeof(d), "cannot connect to %s:%s: %s", c->host, c->port,
             uv_strerror(status));
    client_fail(c, ACP_ERR_SYSTEM, d);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  uv_buf_t b = uv_buf_init(c->req.data, (unsigned)c->req.len);
  int rv = send_bufs(c, &b, 1, 0, false);
  if (rv != 0) {
    client_fail(c, rv, "cannot send the upgrade request");
    return;
  }
  update_tcp_reading(c);
}

static void on_resolved(uv_getaddrinfo_t *req, int status,
                        struct addrinfo *res) {
  wconn *c = req->data;
  c->handles--;
  if (c->tcp_closed) {
    uv_freeaddrinfo(res);
    conn_unref(c);
    return;
  }
  if (status < 0 || !res) {
    char d[200];
    snprintf(d, sizeof(d), "cannot resolve %s: %s", c->host,
             uv_strerror(status));
    uv_freeaddrinfo(res);
    client_fail(c, ACP_ERR_NOT_FOUND, d);
    return;
  }
  c->creq.data = c;
  int r = uv_tcp_connect(&c->creq, &c->tcp, res->ai_addr, on_connect);
  uv_freeaddrinfo(res);
  if (r < 0)
    client_fail(c, ACP_ERR_SYSTEM, uv_strerror(r));
}

/* MARK: - Client (Public) */

int acp_remote_connect(acp_uv_link **out, uv_loop_t *loop, const char *url,
                       const acp_remote_client_options *opts,
                       acp_remote_connect_cb cb, void *user_data,
                       const acp_mem *mem) {
  acp_remote_client_options dflt = ACP_REMOTE_CLIENT_OPTIONS_INIT;
  acp__url u;
  wconn *c = NULL;
  int rv;
  if (out)
    *out = NULL;
  if (!out || !loop || !url)
    return ACP_ERR_INVALID_ARGUMENT;
  if (!opts)
    opts = &dflt;
  if (acp__url_parse(url, &u) != 0)
    return ACP_ERR_INVALID_ARGUMENT;
  const acp_remote_tls *tls = opts->version >= 3 ? opts->tls : NULL;
  if (tls && acp__tls_conf_is_server(tls))
    return ACP_ERR_INVALID_ARGUMENT;
  int transport = opts->version >= 2 ? opts->transport : ACP_REMOTE_AUTO;
  bool http = transport == ACP_REMOTE_HTTP || transport == ACP_REMOTE_HTTP2;
  if (http && u.ws)
    return ACP_ERR_INVALID_ARGUMENT; /* ws:// names a WebSocket */
  if (http)
    return acp__remote_http_connect(out, loop, &u, opts, cb, user_data, mem);
  if (transport != ACP_REMOTE_AUTO && transport != ACP_REMOTE_WEBSOCKET)
    return ACP_ERR_INVALID_ARGUMENT;
  const char *path = u.path;
  const char *p = u.authority;
  size_t alen = u.authority_len;
  rv = conn_new(&c, loop, true, opts->max_message, opts->ping_ms, mem);
  if (rv != 0)
    return rv;
  c->host = acp__strndup(&c->mem, u.host, u.host_len);
  c->port = u.port ? acp__strndup(&c->mem, u.port, u.port_len)
                   : acp__strdup(&c->mem, u.tls ? "443" : "80");
  if (!c->host || !c->port)
    goto nomem;
  if (u.tls) {
    rv = acp__tls_new_client(&c->tls, tls, c->host, c->port, &c->mem);
    if (rv != 0)
      goto fail;
  }
  /* The request. */
  uint8_t key[16];
  char key64[32];
  if (uv_random(NULL, NULL, key, sizeof(key), 0, NULL) != 0)
    memcpy(key, &c->rng, 8), memcpy(key + 8, &c->rng, 8);
  acp__base64(key, 16, key64);
  acp__ws_accept_key(key64, 24, c->accept);
  char line[512];
  int n = snprintf(line, sizeof(line),
                   "GET %s HTTP/1.1\r\nHost: %.*s\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                   "Sec-WebSocket-Version: 13\r\n",
                   path, (int)alen, p, key64);
  if (n < 0 || (size_t)n >= sizeof(line))
    goto bad;
  if (acp__buf_append(&c->req, line, (size_t)n) != 0)
    goto nomem;
  if (opts->token) {
    if (strpbrk(opts->token, "\r\n"))
      goto bad;
    if (acp__buf_append(&c->req, "Authorization: Bearer ", 22) != 0 ||
        acp__buf_append(&c->req, opts->token, strlen(opts->token)) != 0 ||
        acp__buf_append(&c->req, "\r\n", 2) != 0)
      goto nomem;
  }
  for (size_t i = 0; opts->headers && opts->headers[i]; i++) {
    const char *hd = opts->headers[i];
    if (strpbrk(hd, "\r\n") || !strchr(hd, ':'))
      goto bad;
    if (acp__buf_append(&c->req, hd, strlen(hd)) != 0 ||
        acp__buf_append(&c->req, "\r\n", 2) != 0)
      goto nomem;
  }
  if (acp__buf_append(&c->req, "\r\n", 2) != 0)
    goto nomem;
  rv = acp_uv_link_new_user(&c->link, loop, &link_ops, c, &c->mem);
  if (rv != 0)
    goto fail;
  c->ccb = cb;
  c->cud = user_data;
  if (opts->version >= 4) {
    c->clog = opts->log;
    c->clog_ud = opts->log_user_data;
  }
  struct addrinfo hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  c->gai.data = c;
  c->handles++;
  rv = uv_getaddrinfo(loop, &c->gai, on_resolved, c->host, c->port, &hints);
  if (rv != 0) {
    c->handles--;
    /* Reported through the callback from the loop, like any failure. */
    client_fail(c, ACP_ERR_NOT_FOUND, "cannot resolve the host");
  } else {
    uv_timer_start(&c->timer, on_handshake_timeout, HANDSHAKE_MS, 0);
  }
  *out = c->link;
  return 0;
bad:
  rv = ACP_ERR_INVALID_ARGUMENT;
  goto fail;
nomem:
  rv = ACP_ERR_NOMEM;
fail:
  conn_close_tcp(c);
  return rv;
}

/* MARK: - Handoff (acp_remote_serve() handoff, acp_remote_adopt()) */

int acp_remote_adopt(acp_uv_link **out, uv_loop_t *loop, int fd,
                     const char *pre, size_t pre_len,
                     const acp_remote_adopt_options *opts, const acp_mem *mem) {
  acp_remote_adopt_options o = ACP_REMOTE_ADOPT_OPTIONS_INIT;
  wconn *c;
  if (out)
    *out = NULL;
  if (!out || !loop || fd < 0 || (pre_len > 0 && !pre)) {
    if (fd >= 0)
      close(fd);
    return ACP_ERR_INVALID_ARGUMENT;
  }
  if (opts)
    o = *opts;
  if (conn_new(&c, loop, false, o.max_message, o.ping_ms, mem) != 0) {
    close(fd);
    return ACP_ERR_NOMEM;
  }
  /* A client that stops reading is cut here as on the server's socket. */
  c->stall_ms = o.stall_ms ? o.stall_ms : ACP_REMOTE_DEFAULT_STALL_MS;
  if (uv_tcp_open(&c->tcp, fd) != 0) {
    close(fd);
    c->tcp_closed = true; /* nothing of ours to close but the handles */
    c->handles += 4;
    uv_close((uv_handle_t *)&c->tcp, on_closed);
    uv_close((uv_handle_t *)&c->timer, on_closed);
    uv_close((uv_handle_t *)&c->resume, on_closed);
    uv_close((uv_handle_t *)&c->wstall, on_closed);
    return ACP_ERR_SYSTEM;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  /* The request was just heard (by the process that answered it): the
   * first ping interval does not count as silence. */
  c->heard = true;
  if ((pre_len > 0 && acp__buf_append(&c->in, pre, pre_len) != 0) ||
      server_open(c) != 0) {
    conn_close_tcp(c);
    return ACP_ERR_NOMEM;
  }
  *out = c->link;
  return 0;
}

int acp__remote_link_handoff_fd(acp_uv_link *link, int *fd, const char **pre,
                                size_t *pre_len) {
  wconn *c = link ? acp__uv_link_user_data(link, op_write) : NULL;
  uv_os_fd_t f;
  if (!c || c->client || c->tls || c->state != C_OPEN || c->tcp_closed ||
      c->lingering || c->handed)
    return ACP_ERR_UNSUPPORTED;
  /* The 101 must be in the kernel: the agent's first frame must not
   * overtake it. A fresh socket takes it at once. */
  if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > 0 ||
      uv_fileno((uv_handle_t *)&c->tcp, &f) != 0)
    return ACP_ERR_UNSUPPORTED;
  /* Nothing of ours may go out from now on: no ping. */
  uv_timer_stop(&c->timer);
  *fd = f;
  *pre = c->in.data;
  *pre_len = c->in.len;
  return 0;
}

void acp__remote_link_handed(acp_uv_link *link) {
  wconn *c = link ? acp__uv_link_user_data(link, op_write) : NULL;
  if (!c || c->handed)
    return;
  c->handed = true;
  c->state = C_DONE;
  acp__buf_dispose(&c->in);
  /* Only our descriptor: no close frame, no shutdown (the socket is the
   * agent's now, and a FIN would end it for both). */
  conn_close_tcp(c);
}
