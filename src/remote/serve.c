/*
 * acp_remote_serve(): any stdio agent behind the WebSocket endpoint, one
 * process per connection. The relay is bytes only: the agent's lines are
 * the connection's messages, so nothing here parses JSON.
 *
 * With a session grace, an agent whose connection dropped waits ("parked")
 * for a reconnect that presents its affinity cookie: the agent process,
 * and so every session it holds, is handed to the new connection. Why
 * this and not a session store: docs/decisions.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/remote.h"
#include "util.h"

typedef struct serve serve;

typedef struct sconn {
  serve *sv;
  struct sconn *prev, *next;
  acp_uv_link *ws;       /* NULL once closed */
  acp_uv_process *agent; /* NULL once closed */
  acp_uv_link *alink;
  bool stopping;
  bool out_eof;     /* the agent's stdout ended */
  bool exited;      /* the agent's exit status is known */
  int end_code;     /* close code the agent's own end calls for */
  uv_timer_t timer; /* an exited agent's stdout gets this long to end */
  bool timer_done;  /* the timer is closed */
  bool parked;      /* waiting for a reconnect (session grace) */
  bool line_start;  /* the last byte handed to a connection ended a line */
  bool skip_line;   /* drop the agent's output up to its next '\n' */
  unsigned closing; /* connection links closing, not yet called back */
  char aff[37];     /* affinity value, or empty */
  char id[40];
} sconn;

struct serve {
  acp_mem mem;
  uv_loop_t loop;
  const acp_remote_serve_options *opts;
  acp_remote_server *srv;
  acp_uv_signals *sig;
  sconn *conns;
  bool quitting;
};

static void on_timer_closed(uv_handle_t *h);

static void sconn_maybe_free(sconn *sc) {
  if (sc->ws || sc->agent || sc->closing)
    return;
  if (!sc->timer_done) {
    if (!uv_is_closing((uv_handle_t *)&sc->timer))
      uv_close((uv_handle_t *)&sc->timer, on_timer_closed);
    return;
  }
  serve *sv = sc->sv;
  if (sc->prev)
    sc->prev->next = sc->next;
  else
    sv->conns = sc->next;
  if (sc->next)
    sc->next->prev = sc->prev;
  if (sv->opts->verbose)
    fprintf(stderr, "acp serve: connection %s closed\n", sc->id);
  acp__free(&sv->mem, sc);
}

static void on_timer_closed(uv_handle_t *h) {
  sconn *sc = h->data;
  sc->timer_done = true;
  sconn_maybe_free(sc);
}

static void ws_closed(acp_uv_link *l, void *ud) {
  sconn *sc = ud;
  (void)l;
  sc->closing--;
  sconn_maybe_free(sc);
}

/* Close the connection's link (it may be replaced by a reconnect before
 * its close callback runs). */
static void close_ws(sconn *sc, uint64_t flush_ms, int code) {
  acp_uv_link *l = sc->ws;
  if (!l)
    return;
  sc->ws = NULL;
  sc->closing++;
  acp_uv_link_set_close_code(l, code);
  acp_uv_link_close(l, flush_ms, ws_closed, sc);
}

static void agent_closed(acp_uv_process *p, void *ud) {
  sconn *sc = ud;
  (void)p;
  sc->agent = NULL;
  sc->alink = NULL;
  sconn_maybe_free(sc);
}

static void agent_stopped(acp_uv_process *p, void *ud) {
  (void)ud;
  acp_uv_process_close(p, agent_closed);
}

/* End a connection: close the socket side (flushing what the agent said
 * for up to a second; over WebSocket with `code`) and stop the agent with
 * the ladder. */
static void sconn_end(sconn *sc, uint64_t flush_ms, int code) {
  sc->parked = false;
  if (!sc->stopping)
    close_ws(sc, flush_ms, code);
  if (sc->agent && !sc->stopping) {
    if (acp_uv_process_shutdown(sc->agent, agent_stopped) != 0)
      acp_uv_process_close(sc->agent, agent_closed);
  }
  sc->stopping = true;
}

static void on_grace_timeout(uv_timer_t *t) {
  sconn *sc = t->data;
  if (sc->parked) {
    if (sc->sv->opts->verbose)
      fprintf(stderr, "acp serve: connection %s: nobody came back\n", sc->id);
    sconn_end(sc, 0, 1000);
  }
}

static void ws_read(acp_uv_link *l, int status, const char *data, size_t len,
                    void *ud) {
  sconn *sc = ud;
  if (l != sc->ws)
    return;
  if (status == 0) {
    if (sc->alink && acp_uv_link_write(sc->alink, data, len) == 0)
      return;
  }
  uint64_t grace =
      sc->sv->opts->version >= 2 ? sc->sv->opts->session_grace_ms : 0;
  if (status != 0 && status != UV_EOF && grace > 0 && sc->agent &&
      !sc->stopping && !sc->exited && !sc->out_eof && sc->aff[0]) {
    /* Dropped, not ended: the agent waits for its client to come back. */
    if (sc->sv->opts->verbose)
      fprintf(stderr,
              "acp serve: connection %s dropped (%s): its agent waits "
              "%llu ms\n",
              sc->id, uv_strerror(status), (unsigned long long)grace);
    close_ws(sc, 0, 1000);
    sc->parked = true;
    uv_timer_start(&sc->timer, on_grace_timeout, grace, 0);
    return;
  }
  /* The client went away (or the agent's stdin did): closing the agent's
   * stdin is the first rung, and an agent cancels its turn on it. */
  sconn_end(sc, 0, 1000);
}

/* The agent's side is over once its stdout ended and its exit status is
 * known (in either order): the client is told how it ended, 1000 for an
 * agent that exited with 0, 1011 for one that failed or was killed. */
static void agent_over(sconn *sc) {
  if (sc->out_eof && sc->exited) {
    uv_timer_stop(&sc->timer);
    sconn_end(sc, 1000, sc->end_code);
  }
}

static void on_eof_timeout(uv_timer_t *t) {
  sconn *sc = t->data;
  /* Something the agent started holds its stdout open: end anyway. */
  sc->out_eof = true;
  agent_over(sc);
}

static void agent_read(acp_uv_link *l, int status, const char *data, size_t len,
                       void *ud) {
  sconn *sc = ud;
  (void)l;
  if (status == 0) {
    if (sc->skip_line && sc->ws) {
      /* The previous connection got part of this line: the new one
       * starts at the next. */
      const char *nl = memchr(data, '\n', len);
      if (!nl)
        return;
      sc->skip_line = false;
      len -= (size_t)(nl + 1 - data);
      data = nl + 1;
      sc->line_start = true;
      if (len == 0)
        return;
    }
    if (len > 0)
      sc->line_start = data[len - 1] == '\n';
    if (!sc->ws && sc->parked)
      return; /* nobody to tell: dropped (not replayed, as the RFD says) */
    if (sc->ws && acp_uv_link_write(sc->ws, data, len) == 0)
      return;
    sconn_end(sc, 1000, 1000); /* the client side is gone */
    return;
  }
  acp_uv_link_read_stop(l);
  sc->out_eof = true;
  if (!sc->exited && !sc->stopping && sc->agent &&
      acp_uv_process_shutdown(sc->agent, NULL) != 0)
    sconn_end(sc, 1000, 1011);
  agent_over(sc);
}

static void agent_exited(acp_uv_process *p, int64_t status, int sig, void *ud) {
  sconn *sc = ud;
  (void)p;
  if (!sc->stopping && sc->sv->opts->verbose)
    fprintf(stderr,
            "acp serve: connection %s: the agent exited (status %lld, "
            "signal %d)\n",
            sc->id, (long long)status, sig);
  sc->exited = true;
  sc->end_code = (status == 0 && sig == 0) ? 1000 : 1011;
  if (!sc->out_eof && !sc->stopping)
    uv_timer_start(&sc->timer, on_eof_timeout, 1000, 0);
  agent_over(sc);
}

/* A reconnect presenting the affinity value of a parked agent gets it. */
static bool rebind(serve *sv, acp_uv_link *link, const char *id,
                   const char *aff) {
  sconn *sc;
  for (sc = sv->conns; sc; sc = sc->next)
    if (sc->parked && strcmp(sc->aff, aff) == 0)
      break;
  if (!sc || !sc->agent || sc->stopping || sc->out_eof || sc->exited)
    return false;
  uv_timer_stop(&sc->timer);
  sc->parked = false;
  sc->ws = link;
  sc->skip_line = !sc->line_start;
  if (sv->opts->verbose)
    fprintf(stderr,
            "acp serve: connection %s resumes connection %s: agent pid %d\n",
            id, sc->id, acp_uv_process_pid(sc->agent));
  snprintf(sc->id, sizeof(sc->id), "%s", id);
  acp_uv_link_couple(sc->alink, sc->ws, 0, 0);
  acp_uv_link_couple(sc->ws, sc->alink, 0, 0);
  acp_uv_link_read_start(sc->ws, ws_read, sc);
  return true;
}

static void on_accept(acp_remote_server *srv, acp_uv_link *link, const char *id,
                      void *ud) {
  serve *sv = ud;
  acp_uv_process_options *po = NULL;
  int uverr = 0;
  const char *aff = acp_remote_server_affinity(srv);
  if (aff && rebind(sv, link, id, aff))
    return;
  sconn *sc = acp__calloc(&sv->mem, 1, sizeof(*sc));
  if (!sc) {
    acp_uv_link_close(link, 0, NULL, NULL);
    return;
  }
  sc->sv = sv;
  sc->ws = link;
  sc->line_start = true;
  if (aff)
    snprintf(sc->aff, sizeof(sc->aff), "%s", aff);
  uv_timer_init(&sv->loop, &sc->timer);
  sc->timer.data = sc;
  snprintf(sc->id, sizeof(sc->id), "%s", id);
  sc->next = sv->conns;
  if (sv->conns)
    sv->conns->prev = sc;
  sv->conns = sc;
  if (acp_uv_process_options_new(&po, &sv->mem) != 0 ||
      acp_uv_process_options_set_argv(po, sv->opts->agent_argv) != 0) {
    acp_uv_process_options_free(po);
    sconn_end(sc, 0, 1011);
    return;
  }
  acp_uv_process_options_set_exit_cb(po, agent_exited);
  int rv =
      acp_uv_process_spawn(&sc->agent, &sv->loop, po, sc, &sv->mem, &uverr);
  acp_uv_process_options_free(po);
  if (rv != 0) {
    fprintf(stderr, "acp serve: cannot start the agent '%s': %s\n",
            sv->opts->agent_argv[0], uverr ? uv_strerror(uverr) : "error");
    sc->agent = NULL;
    sconn_end(sc, 0, 1011);
    return;
  }
  sc->alink = acp_uv_process_link(sc->agent);
  if (sv->opts->verbose)
    fprintf(stderr, "acp serve: connection %s: agent pid %d\n", sc->id,
            acp_uv_process_pid(sc->agent));
  /* Backpressure both ways: a client that does not read stops the reading
   * of its agent's stdout, an agent that does not read stops the socket. */
  acp_uv_link_couple(sc->alink, sc->ws, 0, 0);
  acp_uv_link_couple(sc->ws, sc->alink, 0, 0);
  acp_uv_link_read_start(sc->alink, agent_read, sc);
  acp_uv_link_read_start(sc->ws, ws_read, sc);
}

static void on_signal(acp_uv_signals *s, int signum, void *ud) {
  serve *sv = ud;
  (void)s;
  (void)signum;
  if (sv->quitting)
    return;
  sv->quitting = true;
  acp_remote_server_close(sv->srv);
  sv->srv = NULL;
  for (sconn *sc = sv->conns; sc; sc = sc->next)
    sconn_end(sc, 0, 1001); /* going away */
  acp_uv_signals_close(sv->sig);
  sv->sig = NULL;
}

int acp_remote_serve(const acp_remote_serve_options *opts) {
  serve sv;
  int rv, uverr = 0;
  if (!opts || !opts->agent_argv || !opts->agent_argv[0])
    return ACP_ERR_INVALID_ARGUMENT;
  memset(&sv, 0, sizeof(sv));
  acp__mem_init(&sv.mem, NULL);
  sv.opts = opts;
  acp_uv_ignore_sigpipe();
  if (uv_loop_init(&sv.loop) != 0)
    return ACP_ERR_SYSTEM;
  acp_remote_server_options so = opts->server;
  if (opts->version >= 2 && opts->session_grace_ms > 0 &&
      (so.version < 2 || !so.affinity_cookie)) {
    if (so.version < 2)
      so.version = 2; /* not lower: later fields (tls) stay */
    so.affinity_cookie = "acp_agent";
  }
  rv = acp_remote_server_new(&sv.srv, &sv.loop, &so, on_accept, &sv, NULL,
                             &uverr);
  if (rv != 0) {
    if (uverr)
      fprintf(stderr, "acp serve: cannot listen: %s\n", uv_strerror(uverr));
    goto done;
  }
  rv = acp_uv_signals_new(&sv.sig, &sv.loop, on_signal, &sv, NULL);
  if (rv != 0) {
    acp_remote_server_close(sv.srv);
    goto done;
  }
  if (opts->on_listening)
    opts->on_listening(acp_remote_server_port(sv.srv), opts->user_data);
  uv_run(&sv.loop, UV_RUN_DEFAULT);
done:
  uv_run(&sv.loop, UV_RUN_DEFAULT);
  uv_loop_close(&sv.loop);
  return rv;
}
