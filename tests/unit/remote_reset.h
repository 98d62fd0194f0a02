/*
 * Test harness shared by test_remote.c and test_remote_tls.c: a session
 * stream of the Streamable HTTP client cut inside an event by the client's
 * test hook, and the turn checked whole after the reopen. Include after
 * cmocka.h.
 */
#ifndef ACP_REMOTE_RESET_H
#define ACP_REMOTE_RESET_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "acp/remote.h"
#include "remote/remote_int.h"

#define RC_UPDATES 20

typedef struct rc_line {
  char *d;
  size_t n, cap;
} rc_line;

/* What a link read, split into lines: each whole one (without its LF)
 * goes to fn(ctx, line, len); a part waits in b for the rest. Stops early
 * once *stop is set (fn may set it). */
static void rc_feed_lines(rc_line *b, const char *d, size_t n, const bool *stop,
                          void (*fn)(void *, const char *, size_t), void *ctx) {
  while (n > 0 && !*stop) {
    const char *nl = memchr(d, '\n', n);
    size_t k = nl ? (size_t)(nl - d) : n;
    if (b->n + k > b->cap) {
      b->cap = (b->n + k) * 2;
      b->d = realloc(b->d, b->cap);
      assert_non_null(b->d);
    }
    memcpy(b->d + b->n, d, k);
    b->n += k;
    if (!nl)
      return;
    size_t len = b->n;
    b->n = 0;
    fn(ctx, b->d, len);
    d += k + 1;
    n -= k + 1;
  }
}

static bool rc_has(const char *d, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(d + i, needle, k) == 0)
      return true;
  return false;
}

/* A session stream cut inside event u5 over HTTP/2, where one stream
 * cannot be cut by a TCP proxy (every stream shares the socket). The
 * client's test hook (acp__remote_http_cut_session_stream) drops u5 unread
 * and resets that one stream (RST_STREAM CANCEL) while the connection and
 * its connection stream stay up, as a client-side fault would; it then
 * opens the session stream again with Last-Event-ID: 4, on the same
 * connection. The agent writes u1..u10 when the prompt arrives (u5..u10
 * go into the stream that is reset), and u11..u20 and the answer once the
 * client got u10, which only the server's replay can bring: every update
 * arrives exactly once, in order, and the client's link never ends. The
 * same over HTTP/1.1, where the hook closes the stream's socket, and over
 * TLS (test_remote_tls.c: HTTP/2 by ALPN). */
typedef struct rcut {
  uv_loop_t loop;
  acp_remote_server *rs;
  acp_uv_link *agent, *cli;
  rc_line a, c;
  unsigned cuts;
  unsigned got[RC_UPDATES + 1];
  unsigned order_errors, next;
  bool rest_sent, answered, ended;
  int cli_status;
  const char *version; /* of the client's link, seen at the answer */
  uv_timer_t watchdog;
  size_t pad;   /* bytes of padding in u1..u4 (0: none) */
  bool drain;   /* after the answer, wait for the server's queue to empty */
  bool drained; /* it did */
  uv_idle_t drainer;
} rcut;

static void rc_end(rcut *r) {
  if (r->ended)
    return;
  r->ended = true;
  uv_close((uv_handle_t *)&r->watchdog, NULL);
  if (r->drain)
    uv_close((uv_handle_t *)&r->drainer, NULL);
  if (r->cli)
    acp_uv_link_close(r->cli, 1000, NULL, NULL);
  r->cli = NULL;
  if (r->agent)
    acp_uv_link_close(r->agent, 0, NULL, NULL);
  r->agent = NULL;
  acp_remote_server_close(r->rs);
  r->rs = NULL;
}

static void rc_update(rcut *r, unsigned i) {
  size_t pad = i <= 4 ? r->pad : 0;
  char *m = malloc(300 + pad);
  assert_non_null(m);
  int n = snprintf(m, 300,
                   "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\","
                   "\"params\":{\"sessionId\":\"s1\",\"update\":{"
                   "\"sessionUpdate\":\"agent_message_chunk\",\"content\":{"
                   "\"type\":\"text\",\"text\":\"u%u\"}},\"_meta\":{"
                   "\"pad\":\"",
                   i);
  memset(m + n, 'p', pad);
  n += (int)pad;
  memcpy(m + n, "\"}}}\n", 5);
  n += 5;
  assert_int_equal(acp_uv_link_write(r->agent, m, (size_t)n), 0);
  free(m);
}

static void rc_agent_line(void *ud, const char *line, size_t n) {
  rcut *r = ud;
  if (rc_has(line, n, "\"initialize\"")) {
    static const char a[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    assert_int_equal(acp_uv_link_write(r->agent, a, sizeof(a) - 1), 0);
  } else if (rc_has(line, n, "\"session/prompt\"")) {
    for (unsigned i = 1; i <= 10; i++)
      rc_update(r, i);
  }
}

/* An update line ("text":"uN"): counts it in got[N] and an order error
 * when it is not the one after *next; returns N, or 0 for another line.
 * Shared with the proxy cut tests of test_remote.c. */
static unsigned rc_count_update(const char *line, size_t n, unsigned *got,
                                unsigned *next, unsigned *order_errors,
                                unsigned max) {
  const char *u = NULL;
  for (size_t i = 0; i + 9 <= n; i++)
    if (memcmp(line + i, "\"text\":\"u", 9) == 0) {
      u = line + i + 9;
      break;
    }
  if (!u)
    return 0;
  unsigned v = (unsigned)strtoul(u, NULL, 10);
  assert_true(v >= 1 && v <= max);
  got[v]++;
  if (v != *next + 1)
    (*order_errors)++;
  *next = v;
  return v;
}

/* After the answer: every byte the server's link was given is accounted
 * written (acp_uv_link_write_queue_size() back to 0), including those of
 * writes the cut cancelled; else the watchdog ends the wait. */
static void rc_drain(uv_idle_t *h) {
  rcut *r = h->data;
  if (r->agent && acp_uv_link_write_queue_size(r->agent) == 0) {
    r->drained = true;
    rc_end(r);
  }
}
static void rc_client_line(void *ud, const char *line, size_t n) {
  rcut *r = ud;
  if (rc_has(line, n, "\"id\":1,") && rc_has(line, n, "\"result\"")) {
    static const char p[] =
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\","
        "\"params\":{\"sessionId\":\"s1\",\"prompt\":[]}}\n";
    assert_int_equal(acp_uv_link_write(r->cli, p, sizeof(p) - 1), 0);
    return;
  }
  unsigned v =
      rc_count_update(line, n, r->got, &r->next, &r->order_errors, RC_UPDATES);
  if (v) {
    if (v == 10 && !r->rest_sent) {
      r->rest_sent = true;
      for (unsigned i = 11; i <= RC_UPDATES; i++)
        rc_update(r, i);
      static const char a[] = "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{"
                              "\"stopReason\":\"end_turn\"}}\n";
      assert_int_equal(acp_uv_link_write(r->agent, a, sizeof(a) - 1), 0);
    }
  } else if (rc_has(line, n, "\"id\":2,") && rc_has(line, n, "\"end_turn\"")) {
    r->answered = true;
    r->version = acp_remote_http_version(r->cli);
    if (r->drain)
      assert_int_equal(uv_idle_start(&r->drainer, rc_drain), 0);
    else
      rc_end(r);
  }
}

static void rc_agent_read(acp_uv_link *l, int status, const char *d, size_t n,
                          void *ud) {
  rcut *r = ud;
  if (status != 0) {
    acp_uv_link_close(l, 0, NULL, NULL);
    r->agent = NULL;
    rc_end(r);
    return;
  }
  rc_feed_lines(&r->a, d, n, &r->ended, rc_agent_line, r);
}

static void rc_client_read(acp_uv_link *l, int status, const char *d, size_t n,
                           void *ud) {
  rcut *r = ud;
  (void)l;
  if (status != 0) {
    r->cli_status = status; /* checked after the loop */
    rc_end(r);
    return;
  }
  rc_feed_lines(&r->c, d, n, &r->ended, rc_client_line, r);
}

static void rc_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                      void *ud) {
  rcut *r = ud;
  (void)s;
  (void)id;
  r->agent = link;
  assert_int_equal(acp_uv_link_read_start(link, rc_agent_read, r), 0);
}

static void rc_watchdog(uv_timer_t *t) {
  rc_end(t->data); /* the asserts after the loop say what is missing */
}

/* Over `transport`; with TLS when `st` (the server's configuration) and
 * `ct` (the client's) are given: both stay the caller's to free. The cut
 * is the client's (its test hook) or, with `server`, the server's
 * (acp__remote_server_cut_session_stream: u5 is held back and the server
 * resets the stream, or closes its socket over HTTP/1.1); the client
 * resumes the same way and the turn is checked the same. */
static void reset_case_pad(int transport, acp_remote_tls *st,
                           acp_remote_tls *ct, bool server, size_t pad) {
  rcut *r = calloc(1, sizeof(*r));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  acp_remote_client_options co = ACP_REMOTE_CLIENT_OPTIONS_INIT;
  char url[64];
  assert_non_null(r);
  assert_int_equal(uv_loop_init(&r->loop), 0);
  assert_int_equal(uv_timer_init(&r->loop, &r->watchdog), 0);
  r->watchdog.data = r;
  r->pad = pad;
  r->drain = pad > 0;
  if (r->drain) {
    assert_int_equal(uv_idle_init(&r->loop, &r->drainer), 0);
    r->drainer.data = r;
  }
  assert_int_equal(uv_timer_start(&r->watchdog, rc_watchdog, 60000, 0), 0);
  so.tls = st;
  assert_int_equal(
      acp_remote_server_new(&r->rs, &r->loop, &so, rc_accept, r, NULL, NULL),
      0);
  snprintf(url, sizeof(url), "%s://127.0.0.1:%d/acp", st ? "https" : "http",
           acp_remote_server_port(r->rs));
  co.transport = transport;
  co.tls = ct;
  assert_int_equal(
      acp_remote_connect(&r->cli, &r->loop, url, &co, NULL, NULL, NULL), 0);
  if (server)
    assert_int_equal(acp__remote_server_cut_session_stream(r->rs, 4, &r->cuts),
                     0);
  else
    assert_int_equal(acp__remote_http_cut_session_stream(r->cli, 4, &r->cuts),
                     0);
  assert_int_equal(acp_uv_link_read_start(r->cli, rc_client_read, r), 0);
  static const char init[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n";
  assert_int_equal(acp_uv_link_write(r->cli, init, sizeof(init) - 1), 0);
  assert_int_equal(uv_run(&r->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(r->cuts, 1);       /* the stream was cut inside u5 */
  assert_int_equal(r->cli_status, 0); /* and the link went on */
  assert_true(r->answered);
  assert_non_null(r->version);
  assert_string_equal(r->version,
                      transport == ACP_REMOTE_HTTP2 ? "HTTP/2" : "HTTP/1.1");
  for (unsigned i = 1; i <= RC_UPDATES; i++)
    if (r->got[i] != 1)
      fail_msg("update u%u arrived %u times", i, r->got[i]);
  assert_int_equal(r->order_errors, 0);
  if (r->drain)
    assert_true(r->drained);
  assert_int_equal(uv_loop_close(&r->loop), 0);
  free(r->a.d);
  free(r->c.d);
  free(r);
}

static inline void reset_case_by(int transport, acp_remote_tls *st,
                                 acp_remote_tls *ct, bool server) {
  reset_case_pad(transport, st, ct, server, 0);
}

static inline void reset_case(int transport, acp_remote_tls *st,
                              acp_remote_tls *ct) {
  reset_case_by(transport, st, ct, false);
}

#endif /* ACP_REMOTE_RESET_H */
