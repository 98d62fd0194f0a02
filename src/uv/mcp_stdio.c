/*
 * An acp_mcp_conn on two descriptors (normally stdin and stdout) on a
 * private libuv loop: received bytes go to acp_mcp_conn_recv() with
 * uv_now(), so the conn's clock is the loop's and the deadlines of its
 * server->client requests are right; a timer drives
 * acp_mcp_conn_handle_expiry(); a prepare hook writes whatever the conn
 * produced (from any callback) before the loop waits.
 */
#include "acp/uv.h"
#include "uv_internal.h"

#include <string.h>

typedef struct ms_run {
  acp_mem mem;
  uv_loop_t *loop;
  acp_mcp_conn *conn;
  acp_uv_link *link;
  acp_uv_signals *sig;
  uv_timer_t timer;
  uv_prepare_t prepare;
  acp__buf held; /* input a pausing handler left unconsumed */
  bool reading;
  bool eof_pending;
  bool ended;
  int reason;
  uint64_t flush_timeout;
  uint64_t spin_ns; /* acp_mcp_run_fds_spin(), 0 = off */
  bool block;       /* acp_mcp_run_fds_ex()'s read_block */
  bool active;      /* bytes came or went since the last spin */
} ms_run;

static void ms_end(ms_run *r, int reason);

static void ms_on_timer(uv_timer_t *t);

static void ms_rearm(ms_run *r) {
  uint64_t e, now;
  if (r->ended)
    return;
  e = acp_mcp_conn_get_expiry(r->conn);
  if (e == UINT64_MAX) {
    uv_timer_stop(&r->timer);
    return;
  }
  now = uv_now(r->loop);
  uv_timer_start(&r->timer, ms_on_timer, e > now ? e - now : 0, 0);
}

/* Write everything the conn has to send. */
static void ms_pump(ms_run *r) {
  const char *d;
  acp_ssize n;
  if (r->ended)
    return;
  while ((n = acp_mcp_conn_send(r->conn, &d)) > 0) {
    (void)acp_uv_link_write(r->link, d, (size_t)n); /* peer gone: dropped */
    r->active = true;
  }
  if (n < 0 && acp_is_fatal((int)n)) {
    ms_end(r, (int)n);
    return;
  }
  ms_rearm(r);
}

static void ms_on_timer(uv_timer_t *t) {
  ms_run *r = t->data;
  int rv;
  if (r->ended)
    return;
  rv = acp_mcp_conn_handle_expiry(r->conn, uv_now(r->loop));
  if (rv < 0) {
    ms_end(r, rv);
    return;
  }
  ms_pump(r);
}

static void ms_finish_input(ms_run *r) {
  int rv = acp_mcp_conn_recv_eof(r->conn, uv_now(r->loop));
  if (rv < 0 && acp_is_fatal(rv)) {
    ms_end(r, rv);
    return;
  }
  ms_pump(r);
  ms_end(r, 0);
}

static void ms_on_read(acp_uv_link *l, int status, const char *data, size_t len,
                       void *ud);

/* Feed bytes; keep what a pausing handler did not take and stop reading. */
static void ms_feed(ms_run *r, const char *data, size_t len) {
  acp_ssize n = acp_mcp_conn_recv(r->conn, data, len, uv_now(r->loop));
  if (n < 0) {
    ms_end(r, (int)n);
    return;
  }
  if ((size_t)n < len) {
    int rv = acp__buf_append(&r->held, data + n, len - (size_t)n);
    if (rv != 0) {
      ms_end(r, rv);
      return;
    }
    if (r->reading) {
      acp_uv_link_read_stop(r->link);
      r->reading = false;
    }
  }
}

static void ms_on_read(acp_uv_link *l, int status, const char *data, size_t len,
                       void *ud) {
  ms_run *r = ud;
  (void)l;
  if (r->ended)
    return;
  if (status < 0) {
    r->reading = false;
    if (status != UV_EOF)
      r->reason = ACP_ERR_SYSTEM;
    if (r->held.len > 0) {
      r->eof_pending = true;
      return;
    }
    ms_finish_input(r);
    return;
  }
  r->active = true;
  ms_feed(r, data, len);
  ms_pump(r);
}

/* Before each wait: retry held input (a paused handler may have resumed
 * meanwhile), then write the conn's output. */
static void ms_on_prepare(uv_prepare_t *p) {
  ms_run *r = p->data;
  if (r->ended)
    return;
  if (r->held.len > 0) {
    acp_ssize n =
        acp_mcp_conn_recv(r->conn, r->held.data, r->held.len, uv_now(r->loop));
    if (n < 0) {
      ms_end(r, (int)n);
      return;
    }
    acp__buf_consume(&r->held, (size_t)n);
    if (r->held.len == 0) {
      if (r->eof_pending) {
        ms_finish_input(r);
        return;
      }
      if (!r->reading && acp_uv_link_read_start(r->link, ms_on_read, r) == 0)
        r->reading = true;
    }
  }
  ms_pump(r);
  /* Last thing before the loop would sleep: with a spin set and traffic in
   * this round, poll the read side a little first; a request that comes
   * meanwhile is handled from in here (as uv_rpc.c does). */
  if (r->spin_ns > 0 && !r->block && r->active && !r->ended) {
    r->active = false;
    if (acp__uv_link_spin(r->link, r->spin_ns))
      ms_pump(r);
  }
  if (r->block && !r->ended)
    (void)acp__uv_link_block(r->link, &r->prepare, r->spin_ns);
}

static void ms_on_signal(acp_uv_signals *sig, int signum, void *ud) {
  ms_run *r = ud;
  (void)sig;
  (void)signum;
  /* A termination request acts as end of input. */
  if (!r->ended)
    ms_finish_input(r);
}

static void ms_end(ms_run *r, int reason) {
  const char *d;
  acp_ssize n;
  if (r->ended)
    return;
  r->ended = true;
  /* Deliver what the conn had queued. */
  while ((n = acp_mcp_conn_send(r->conn, &d)) > 0)
    (void)acp_uv_link_write(r->link, d, (size_t)n);
  if (reason != 0 || r->reason == 0)
    r->reason = reason;
  uv_close((uv_handle_t *)&r->timer, NULL);
  uv_close((uv_handle_t *)&r->prepare, NULL);
  acp_uv_link_close(r->link, r->flush_timeout, NULL, NULL);
  r->link = NULL;
  acp_uv_signals_close(r->sig);
  r->sig = NULL;
}

int acp_mcp_run_fds(acp_mcp_conn *conn, int in_fd, int out_fd,
                    uint64_t flush_timeout_ms) {
  return acp_mcp_run_fds_ex(conn, in_fd, out_fd, flush_timeout_ms, 0, 0);
}

int acp_mcp_run_fds_spin(acp_mcp_conn *conn, int in_fd, int out_fd,
                         uint64_t flush_timeout_ms, uint32_t read_spin_us) {
  return acp_mcp_run_fds_ex(conn, in_fd, out_fd, flush_timeout_ms, read_spin_us,
                            0);
}

int acp_mcp_run_fds_ex(acp_mcp_conn *conn, int in_fd, int out_fd,
                       uint64_t flush_timeout_ms, uint32_t read_spin_us,
                       int read_block) {
  uv_loop_t loop;
  ms_run r;
  int rv;
  if (conn == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  memset(&r, 0, sizeof(r));
  r.loop = &loop;
  r.conn = conn;
  r.flush_timeout = flush_timeout_ms;
  r.spin_ns = (uint64_t)read_spin_us * 1000u;
  r.block = read_block != 0;
  acp__mem_init(&r.mem, NULL);
  acp__buf_init(&r.held, &r.mem, 0);
  (void)acp_uv_ignore_sigpipe();
  if (uv_loop_init(&loop) != 0)
    return ACP_ERR_SYSTEM;
  rv = acp_uv_link_new_fds(&r.link, &loop, in_fd, out_fd, NULL);
  if (rv == 0) {
    rv = acp_uv_link_read_start(r.link, ms_on_read, &r);
    if (rv != 0) {
      acp_uv_link_close(r.link, 0, NULL, NULL);
      r.link = NULL;
    }
  }
  if (rv == 0) {
    r.reading = true;
    /* A peer that does not read its answers stops being read. */
    (void)acp_uv_link_couple(r.link, r.link, 0, 0);
    uv_timer_init(&loop, &r.timer);
    uv_prepare_init(&loop, &r.prepare);
    r.timer.data = &r;
    r.prepare.data = &r;
    uv_prepare_start(&r.prepare, ms_on_prepare);
    uv_unref((uv_handle_t *)&r.prepare);
    if (acp_uv_signals_new(&r.sig, &loop, ms_on_signal, &r, NULL) != 0)
      r.sig = NULL; /* run without signal handling */
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  acp__buf_dispose(&r.held);
  if (uv_loop_close(&loop) != 0)
    return ACP_ERR_INTERNAL;
  return rv != 0 ? rv : r.reason;
}

int acp_mcp_run_stdio(acp_mcp_conn *conn, uint64_t flush_timeout_ms) {
  return acp_mcp_run_fds(conn, 0, 1, flush_timeout_ms);
}
