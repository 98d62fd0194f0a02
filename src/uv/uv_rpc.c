/*
 * Glue between a sans-I/O acp_rpc_session and a link: received bytes go to
 * _recv, _send output goes to link writes, a timer drives request
 * deadlines, and a prepare handle flushes output submitted from anywhere
 * before the loop next waits.
 */
#include "uv_internal.h"

struct acp_uv_rpc {
  acp_mem mem;
  uv_loop_t *loop;
  acp_uv_link *link;
  acp_rpc_session *s;
  acp_uv_rpc_end_cb end_cb;
  void *ud;
  uv_timer_t timer;
  uv_prepare_t prepare;
  acp__buf held;
  bool paused;
  bool resume_pending;
  bool eof_pending;
  int eof_status;
  bool ended;
  bool failed;
  int uv_err;
  bool closing;
  bool active;      /* bytes came or went since the last spin */
  uint64_t spin_ns; /* acp_uv_rpc_set_read_spin(), 0 = off */
  bool block;       /* acp_uv_rpc_set_read_block() */
  int open;
  acp_uv_rpc_close_cb close_cb;
};

/* MARK: - Private */

static void end_now(acp_uv_rpc *r, int reason) {
  if (r->ended)
    return;
  r->ended = true;
  uv_timer_stop(&r->timer);
  if (r->end_cb)
    r->end_cb(r, reason, r->ud);
}

static void fail(acp_uv_rpc *r, int code) {
  const char *d = NULL;
  acp_ssize n;

  /* Deliver what the session had queued before failing. */
  if (!r->failed) {
    n = acp_rpc_session_send(r->s, &d);
    if (n > 0)
      acp_uv_link_write(r->link, d, (size_t)n);
  }
  r->failed = true;
  acp__uv_link_pause(r->link, ACP__UV_PAUSE_RPC, true);
  end_now(r, code);
}

static void rearm(acp_uv_rpc *r);

/* The session's output pieces to the link, PIECES at a time (in order: the
 * link queues what it cannot write at once). */
#define PIECES 16
static int write_iov(acp_uv_rpc *r, const acp_rpc_iov *iov, size_t niov) {
  uv_buf_t bufs[PIECES];
  size_t i = 0;
  int rv = 0;
  if (niov == 1)
    return acp_uv_link_write(r->link, iov[0].data, iov[0].len);
  while (i < niov && rv == 0) {
    size_t k = 0;
    for (; k < PIECES && i < niov; k++, i++) {
      bufs[k].base = (char *)iov[i].data;
      bufs[k].len = iov[i].len;
    }
    rv = acp__uv_link_writev(r->link, bufs, k);
  }
  return rv;
}

static int pump(acp_uv_rpc *r) {
  int rv = 0;
  if (r->failed)
    return 0;
  for (;;) {
    const acp_rpc_iov *iov = NULL;
    size_t niov = 0;
    acp_ssize n = acp_rpc_session_send_iov(r->s, &iov, &niov);
    if (n < 0) {
      if (acp_is_fatal((int)n))
        fail(r, (int)n);
      return (int)n;
    }
    if (n == 0)
      break;
    /* When the peer is gone the output is dropped: the session has
     * counted it as sent, and the end callback reports what happened.
     * The pieces borrowed from the input go out from where they lie
     * (acp_rpc_session_set_borrow_output()). */
    int w = write_iov(r, iov, niov);
    r->active = true;
    if (w != 0 && rv == 0)
      rv = w == ACP_ERR_NOMEM ? w : ACP_ERR_CLOSED;
  }
  rearm(r);
  return rv;
}

static void on_timer(uv_timer_t *t) {
  acp_uv_rpc *r = t->data;
  if (r->failed)
    return;
  int rv = acp_rpc_session_handle_expiry(r->s, uv_now(r->loop));
  if (rv < 0) {
    fail(r, rv);
    return;
  }
  pump(r);
}

static void rearm(acp_uv_rpc *r) {
  if (r->closing || r->failed)
    return;
  uint64_t e = acp_rpc_session_get_expiry(r->s);
  if (e == UINT64_MAX) {
    uv_timer_stop(&r->timer);
    return;
  }
  uint64_t now = uv_now(r->loop);
  uv_timer_start(&r->timer, on_timer, e > now ? e - now : 0, 0);
}

static void finish_input(acp_uv_rpc *r, int status) {
  int rv = acp_rpc_session_recv_eof(r->s, uv_now(r->loop));
  int reason = 0;
  if (status != UV_EOF) {
    r->uv_err = status;
    reason = ACP_ERR_SYSTEM;
  }
  if (rv < 0) {
    fail(r, rv);
    return;
  }
  pump(r);
  end_now(r, reason);
}

/* Feed bytes; keep what a paused session did not consume. */
static void feed(acp_uv_rpc *r, const char *data, size_t len) {
  acp_ssize n = acp_rpc_session_recv(r->s, data, len, uv_now(r->loop));
  if (n < 0) {
    fail(r, (int)n);
    return;
  }
  if ((size_t)n < len) {
    int rv = acp__buf_append(&r->held, data + n, len - (size_t)n);
    if (rv != 0) {
      fail(r, rv);
      return;
    }
    r->paused = true;
    acp__uv_link_pause(r->link, ACP__UV_PAUSE_RPC, true);
  }
}

/* The buffer the link reads into: the session's line framer, unless bytes
 * are held back (they come first) or the session cannot take input. */
static char *read_buf(void *ud, size_t *room) {
  acp_uv_rpc *r = ud;
  *room = 0;
  if (r->failed || r->ended || r->paused || r->held.len > 0)
    return NULL;
  return acp_rpc_session_read_buf(r->s, room);
}

static void on_read(acp_uv_link *l, int status, const char *data, size_t len,
                    void *ud) {
  acp_uv_rpc *r = ud;
  (void)l;
  if (r->failed || r->ended)
    return;
  if (status < 0) {
    if (r->paused) {
      r->eof_pending = true;
      r->eof_status = status;
      return;
    }
    finish_input(r, status);
    return;
  }
  r->active = true;
  feed(r, data, len);
  pump(r);
}

static void process_held(acp_uv_rpc *r) {
  r->resume_pending = false;
  if (r->failed || r->ended)
    return;
  if (r->held.len > 0) {
    acp_ssize n =
        acp_rpc_session_recv(r->s, r->held.data, r->held.len, uv_now(r->loop));
    if (n < 0) {
      fail(r, (int)n);
      return;
    }
    /* The output may borrow from the held bytes: out before they move. */
    pump(r);
    acp__buf_consume(&r->held, (size_t)n);
    if (r->held.len > 0)
      return; /* paused again */
  }
  r->paused = false;
  if (r->eof_pending) {
    finish_input(r, r->eof_status);
    return;
  }
  acp__uv_link_pause(r->link, ACP__UV_PAUSE_RPC, false);
}

static void on_prepare(uv_prepare_t *h) {
  acp_uv_rpc *r = h->data;
  if (r->resume_pending)
    process_held(r);
  pump(r);
  /* Last thing before the loop would sleep in epoll: with a spin set and
   * traffic in this round, poll the read side a little first. An answer
   * that comes within the budget is taken at once (the callbacks run and
   * their output goes out from in here), without the wake-up through the
   * kernel that costs ~50 us on some machines (docs/decisions.md). */
  if (r->spin_ns > 0 && !r->block && r->active && !r->failed && !r->closing) {
    r->active = false;
    if (acp__uv_link_spin(r->link, r->spin_ns) && !r->closing)
      pump(r);
  }
  if (r->block && !r->failed && !r->closing && !r->ended)
    (void)acp__uv_link_block(r->link, &r->prepare, r->spin_ns);
}

static void on_closed(uv_handle_t *h) {
  acp_uv_rpc *r = h->data;
  if (--r->open > 0)
    return;
  if (r->close_cb)
    r->close_cb(r, r->ud);
  acp__buf_dispose(&r->held);
  acp_mem m = r->mem;
  acp__free(&m, r);
}

/* MARK: - Public */

int acp_uv_rpc_new(acp_uv_rpc **out, acp_uv_link *link,
                   acp_rpc_session *session, acp_uv_rpc_end_cb end_cb,
                   void *user_data, const acp_mem *mem) {
  acp_mem m;
  int rv;
  if (out)
    *out = NULL;
  if (!out || !link || !session)
    return ACP_ERR_INVALID_ARGUMENT;
  acp__mem_init(&m, mem);
  acp_uv_rpc *r = acp__calloc(&m, 1, sizeof(*r));
  if (!r)
    return ACP_ERR_NOMEM;
  r->mem = m;
  r->loop = acp_uv_link_loop(link);
  r->link = link;
  r->s = session;
  r->end_cb = end_cb;
  r->ud = user_data;
  acp__buf_init(&r->held, &r->mem, 0);
  rv = acp__uv_link_read_start_buf(link, on_read, read_buf, r);
  if (rv != 0) {
    acp__free(&m, r);
    return rv;
  }
  (void)acp_uv_link_couple(link, link, 0, 0);
  /* pump() takes the output after every recv, before the next read: the
   * output may borrow large pieces of the input (a forwarded text). Only
   * where the pieces reach the kernel as they are: a user link (a remote
   * transport, an agent in the server's process) joins them into one
   * buffer, a copy per message, and 64 KiB to 1 MiB turns over Streamable
   * HTTP in process ran 6 to 15 times slower with borrowing on. */
  if (acp__uv_link_writes_stream(link))
    acp_rpc_session_set_borrow_output(session, 1);
  uv_timer_init(r->loop, &r->timer);
  uv_prepare_init(r->loop, &r->prepare);
  r->timer.data = r;
  r->prepare.data = r;
  r->open = 2;
  uv_prepare_start(&r->prepare, on_prepare);
  /* Flushing must never be what keeps a loop alive. */
  uv_unref((uv_handle_t *)&r->prepare);
  *out = r;
  return 0;
}

void acp_uv_rpc_set_read_block(acp_uv_rpc *r, int on) {
  if (r)
    r->block = on != 0;
}

void acp_uv_rpc_set_read_spin(acp_uv_rpc *r, uint32_t usec) {
  if (r != NULL)
    r->spin_ns = (uint64_t)usec * 1000u;
}

int acp_uv_rpc_flush(acp_uv_rpc *r) {
  if (!r)
    return ACP_ERR_INVALID_ARGUMENT;
  return pump(r);
}

void acp_uv_rpc_resume(acp_uv_rpc *r) {
  if (r && r->paused && !r->closing)
    r->resume_pending = true;
}

int acp_uv_rpc_paused(const acp_uv_rpc *r) {
  return r && r->paused ? 1 : 0;
}

int acp_uv_rpc_uv_error(const acp_uv_rpc *r) {
  return r ? r->uv_err : 0;
}

void acp_uv_rpc_close(acp_uv_rpc *r, acp_uv_rpc_close_cb cb) {
  if (!r || r->closing)
    return;
  pump(r);
  /* Whoever uses the session next takes its output on its own terms. */
  acp_rpc_session_set_borrow_output(r->s, 0);
  r->closing = true;
  r->close_cb = cb;
  acp_uv_link_read_stop(r->link);
  acp__uv_link_pause(r->link, ACP__UV_PAUSE_RPC, false);
  if (acp__uv_link_src(r->link) == r->link)
    acp_uv_link_uncouple(r->link);
  uv_close((uv_handle_t *)&r->timer, on_closed);
  uv_close((uv_handle_t *)&r->prepare, on_closed);
}

/* MARK: - Blocking convenience */

typedef struct run_state {
  acp_uv_link *link;
  acp_uv_rpc *rpc;
  acp_uv_signals *sig;
  uint64_t flush_timeout;
  int reason;
} run_state;

static void run_end(acp_uv_rpc *r, int reason, void *ud) {
  run_state *st = ud;
  st->reason = reason;
  acp_uv_rpc_close(r, NULL);
  acp_uv_link_close(st->link, st->flush_timeout, NULL, NULL);
  acp_uv_signals_close(st->sig);
  st->sig = NULL;
}

static void run_signal(acp_uv_signals *sig, int signum, void *ud) {
  run_state *st = ud;
  (void)sig;
  (void)signum;
  /* A termination request acts as end of input. */
  if (!st->rpc->ended)
    finish_input(st->rpc, UV_EOF);
}

int acp_uv_run_fds(acp_rpc_session *session, int in_fd, int out_fd,
                   uint64_t flush_timeout_ms) {
  uv_loop_t loop;
  run_state st;
  int rv;
  if (!session)
    return ACP_ERR_INVALID_ARGUMENT;
  memset(&st, 0, sizeof(st));
  st.flush_timeout = flush_timeout_ms;
  (void)acp_uv_ignore_sigpipe();
  if (uv_loop_init(&loop) != 0)
    return ACP_ERR_SYSTEM;
  rv = acp_uv_link_new_fds(&st.link, &loop, in_fd, out_fd, NULL);
  if (rv == 0) {
    rv = acp_uv_rpc_new(&st.rpc, st.link, session, run_end, &st, NULL);
    if (rv != 0)
      acp_uv_link_close(st.link, 0, NULL, NULL);
  }
  if (rv == 0 && acp_uv_signals_new(&st.sig, &loop, run_signal, &st, NULL) != 0)
    st.sig = NULL; /* run without signal handling */
  /* A private loop with one link: nothing else can end its wait. */
  if (rv == 0)
    acp_uv_rpc_set_read_block(st.rpc, 1);
  uv_run(&loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop) != 0)
    return ACP_ERR_INTERNAL;
  return rv != 0 ? rv : st.reason;
}

int acp_uv_run_stdio(acp_rpc_session *session, uint64_t flush_timeout_ms) {
  return acp_uv_run_fds(session, 0, 1, flush_timeout_ms);
}
