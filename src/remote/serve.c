/*
 * acp_remote_serve(): any stdio agent behind the WebSocket endpoint, one
 * process per connection. The relay is bytes only: the agent's lines are
 * the connection's messages, so nothing here parses JSON.
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

static void sconn_maybe_free(sconn *sc) {
  if (sc->ws || sc->agent)
    return;
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

static void ws_closed(acp_uv_link *l, void *ud) {
  sconn *sc = ud;
  (void)l;
  sc->ws = NULL;
  sconn_maybe_free(sc);
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
 * for up to a second) and stop the agent with the ladder. */
static void sconn_end(sconn *sc, uint64_t flush_ms) {
  if (sc->ws && !sc->stopping) {
    acp_uv_link_close(sc->ws, flush_ms, ws_closed, sc);
  }
  if (sc->agent && !sc->stopping) {
    if (acp_uv_process_shutdown(sc->agent, agent_stopped) != 0)
      acp_uv_process_close(sc->agent, agent_closed);
  }
  sc->stopping = true;
}

static void ws_read(acp_uv_link *l, int status, const char *data, size_t len,
                    void *ud) {
  sconn *sc = ud;
  (void)l;
  if (status == 0) {
    if (sc->alink && acp_uv_link_write(sc->alink, data, len) == 0)
      return;
  }
  /* The client went away (or the agent's stdin did): closing the agent's
   * stdin is the first rung, and an agent cancels its turn on it. */
  sconn_end(sc, 0);
}

static void agent_read(acp_uv_link *l, int status, const char *data, size_t len,
                       void *ud) {
  sconn *sc = ud;
  (void)l;
  if (status == 0) {
    if (sc->ws && acp_uv_link_write(sc->ws, data, len) == 0)
      return;
  }
  sconn_end(sc, 1000);
}

static void agent_exited(acp_uv_process *p, int64_t status, int sig, void *ud) {
  sconn *sc = ud;
  (void)p;
  if (!sc->stopping && sc->sv->opts->verbose)
    fprintf(stderr,
            "acp serve: connection %s: the agent exited (status %lld, "
            "signal %d)\n",
            sc->id, (long long)status, sig);
  sconn_end(sc, 1000);
}

static void on_accept(acp_remote_server *srv, acp_uv_link *link, const char *id,
                      void *ud) {
  serve *sv = ud;
  acp_uv_process_options *po = NULL;
  int uverr = 0;
  (void)srv;
  sconn *sc = acp__calloc(&sv->mem, 1, sizeof(*sc));
  if (!sc) {
    acp_uv_link_close(link, 0, NULL, NULL);
    return;
  }
  sc->sv = sv;
  sc->ws = link;
  snprintf(sc->id, sizeof(sc->id), "%s", id);
  sc->next = sv->conns;
  if (sv->conns)
    sv->conns->prev = sc;
  sv->conns = sc;
  if (acp_uv_process_options_new(&po, &sv->mem) != 0 ||
      acp_uv_process_options_set_argv(po, sv->opts->agent_argv) != 0) {
    acp_uv_process_options_free(po);
    sconn_end(sc, 0);
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
    sconn_end(sc, 0);
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
    sconn_end(sc, 0);
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
  rv = acp_remote_server_new(&sv.srv, &sv.loop, &opts->server, on_accept, &sv,
                             NULL, &uverr);
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
