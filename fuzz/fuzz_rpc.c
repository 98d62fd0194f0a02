/*
 * Fuzz target: the JSON-RPC session's recv path.
 *
 * Input layout: byte 0 selects options (bit 0 batches off, bit 1 MCP cancel
 * style, bit 2 a 64-byte line cap, bit 3 at most 4 unanswered requests,
 * bit 4 callbacks sometimes pause, bit 5 outgoing requests with deadlines);
 * bytes 1-3 give the sizes of the pieces the rest is fed in (cycled). The
 * on_request callback answers some requests at once (result or error),
 * sends requests and cancels of its own, and leaves the others unanswered.
 * At the end: expiry, EOF, drain, free. Every line the session sends must
 * be valid JSON.
 */
#include <stdlib.h>
#include <string.h>

#include "acp/rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fz {
  uint8_t flags;
  unsigned n;
  uint64_t deferred[8];
  unsigned ndeferred;
} fz;

static void check_output(acp_rpc_session *s) {
  const char *d;
  acp_ssize n = acp_rpc_session_send(s, &d);
  size_t pos = 0;

  if (n <= 0)
    return;
  while (pos < (size_t)n) {
    const char *nl = memchr(d + pos, '\n', (size_t)n - pos);
    if (nl == NULL)
      abort(); /* output must be whole lines */
    if (acp_json_validate(d + pos, (size_t)(nl - (d + pos)), NULL) != 0)
      abort();
    pos = (size_t)(nl - d) + 1;
  }
}

static int on_response(acp_rpc_session *s, const acp_rpc_msg *msg, void *ud) {
  (void)s;
  (void)ud;
  if (msg->kind != ACP_RPC_RESPONSE)
    abort();
  return 0;
}

static int on_request(acp_rpc_session *s, const acp_rpc_msg *msg, void *ud) {
  fz *f = ud;
  const char *p = NULL;
  size_t n = 0;
  int64_t id;

  f->n++;
  if (msg->params)
    p = acp_json_raw(msg->params, &n);
  switch ((msg->method_len + f->n) % 5) {
  case 0:
    acp_rpc_session_respond(s, msg->handle, p, n);
    break;
  case 1:
    acp_rpc_session_respond_error(s, msg->handle, -1, msg->method,
                                  msg->method_len, p, n);
    break;
  case 2:
    if (acp_rpc_session_request(s, "x", 1, p, n, (f->flags & 32) ? 10 : 0, f->n,
                                on_response, NULL, &id) == 0 &&
        (f->n & 4))
      acp_rpc_session_cancel(s, id,
                             ACP_RPC_CANCEL_NOTIFY |
                                 ((f->n & 8) ? ACP_RPC_CANCEL_COMPLETE : 0),
                             f->n);
    break;
  case 3:
    if (f->ndeferred < 8)
      f->deferred[f->ndeferred++] = msg->handle;
    break;
  default:
    break; /* never answered */
  }
  if ((f->flags & 16) && (f->n % 3) == 0)
    return ACP_ERR_PAUSE;
  return 0;
}

static int on_notification(acp_rpc_session *s, const acp_rpc_msg *msg,
                           void *ud) {
  (void)s;
  (void)msg;
  (void)ud;
  return 0;
}

static int on_cancel(acp_rpc_session *s, uint64_t handle, void *ud) {
  (void)ud;
  acp_rpc_session_respond_error(s, handle, -32800, "cancelled", 9, NULL, 0);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  acp_rpc_callbacks *cbs = NULL;
  acp_rpc_options *o = NULL;
  acp_rpc_session *s = NULL;
  fz f;
  size_t pos = 4;
  unsigned k = 0;
  unsigned i;

  if (size < 4)
    return 0;
  memset(&f, 0, sizeof(f));
  f.flags = data[0];
  if (acp_rpc_callbacks_new(&cbs) != 0 || acp_rpc_options_new(&o) != 0)
    goto done;
  acp_rpc_callbacks_set_on_request(cbs, on_request);
  acp_rpc_callbacks_set_on_notification(cbs, on_notification);
  acp_rpc_callbacks_set_on_cancel(cbs, on_cancel);
  if (f.flags & 1)
    acp_rpc_options_set_batches(o, 0);
  if (f.flags & 2)
    acp_rpc_options_set_cancel_style(o, ACP_RPC_CANCEL_STYLE_MCP);
  if (f.flags & 4)
    acp_rpc_options_set_max_line(o, 64);
  if (f.flags & 8)
    acp_rpc_options_set_max_incoming(o, 4);
  if (acp_rpc_session_new(&s, cbs, &f, o, NULL) != 0)
    goto done;
  /* Requests of our own, so that responses in the input can match. */
  for (i = 0; i < 4; i++)
    acp_rpc_session_request(s, "init", 4, NULL, 0, (f.flags & 32) ? 5 : 0, 0,
                            on_response, NULL, NULL);
  while (pos < size) {
    size_t piece = (size_t)data[1 + k % 3] + 1;
    acp_ssize n;
    k++;
    if (piece > size - pos)
      piece = size - pos;
    n = acp_rpc_session_recv(s, (const char *)data + pos, piece, k);
    if (n < 0)
      goto done;
    if (n == 0 && piece > 0)
      abort(); /* no progress */
    pos += (size_t)n;
    check_output(s);
    if (acp_rpc_session_handle_expiry(s, k) != 0)
      goto done;
  }
  for (i = 0; i < f.ndeferred; i++)
    acp_rpc_session_respond(s, f.deferred[i], "1", 1);
  if (acp_rpc_session_handle_expiry(s, UINT64_MAX - 1) != 0)
    goto done;
  if (acp_rpc_session_recv_eof(s, k) != 0)
    goto done;
  if (acp_rpc_session_pending(s) != 0)
    abort();
  check_output(s);

done:
  acp_rpc_session_free(s);
  acp_rpc_options_free(o);
  acp_rpc_callbacks_free(cbs);
  return 0;
}
