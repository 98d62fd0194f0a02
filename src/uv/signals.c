/*
 * SIGTERM/SIGINT watcher.
 */
#include <signal.h>

#include "uv_internal.h"

struct acp_uv_signals {
  acp_mem mem;
  uv_signal_t term;
  uv_signal_t intr;
  acp_uv_signal_cb cb;
  void *ud;
  int open;
};

static void on_signal(uv_signal_t *h, int signum) {
  acp_uv_signals *s = h->data;
  if (s->cb)
    s->cb(s, signum, s->ud);
}

static void on_closed(uv_handle_t *h) {
  acp_uv_signals *s = h->data;
  if (--s->open == 0) {
    acp_mem m = s->mem;
    acp__free(&m, s);
  }
}

int acp_uv_signals_new(acp_uv_signals **out, uv_loop_t *loop,
                       acp_uv_signal_cb cb, void *user_data,
                       const acp_mem *mem) {
  acp_mem m;
  int r;
  if (out)
    *out = NULL;
  if (!out || !loop || !cb)
    return ACP_ERR_INVALID_ARGUMENT;
  acp__mem_init(&m, mem);
  acp_uv_signals *s = acp__calloc(&m, 1, sizeof(*s));
  if (!s)
    return ACP_ERR_NOMEM;
  s->mem = m;
  s->cb = cb;
  s->ud = user_data;
  uv_signal_init(loop, &s->term);
  uv_signal_init(loop, &s->intr);
  s->term.data = s;
  s->intr.data = s;
  s->open = 2;
  r = uv_signal_start(&s->term, on_signal, SIGTERM);
  if (r == 0)
    r = uv_signal_start(&s->intr, on_signal, SIGINT);
  uv_unref((uv_handle_t *)&s->term);
  uv_unref((uv_handle_t *)&s->intr);
  if (r != 0) {
    acp_uv_signals_close(s);
    return ACP_ERR_SYSTEM;
  }
  *out = s;
  return 0;
}

void acp_uv_signals_close(acp_uv_signals *s) {
  if (!s || uv_is_closing((uv_handle_t *)&s->term))
    return;
  s->cb = NULL;
  uv_close((uv_handle_t *)&s->term, on_closed);
  uv_close((uv_handle_t *)&s->intr, on_closed);
}
