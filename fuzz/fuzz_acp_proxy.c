/*
 * Fuzz target: the proxy role (acp_proxy) on the role base.
 *
 * Input layout: byte 0 picks the handler behaviour, bytes 1-2 the sizes of
 * the pieces fed to recv (cycling); the rest is the conductor's side of
 * the session. Message handlers forward, transform, answer at once, hold
 * requests to answer or forward later, and inject requests and
 * notifications both ways; the response hook rewrites some answers, the
 * initialize hook replaces the result. Afterwards: the held requests are
 * answered, EOF, drain, free. Every line the proxy sends must be valid
 * JSON.
 */
#include <stdlib.h>
#include <string.h>

#include "acp/proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_HELD 8

typedef struct fz {
  uint8_t flags;
  unsigned n;
  acp_proxy_request *held[MAX_HELD];
  unsigned nheld;
} fz;

static void check_lines(const char *d, acp_ssize n) {
  size_t pos = 0;

  while (n > 0 && pos < (size_t)n) {
    const char *nl = memchr(d + pos, '\n', (size_t)n - pos);
    if (nl == NULL)
      abort();
    if (acp_json_validate(d + pos, (size_t)(nl - (d + pos)), NULL) != 0)
      abort();
    pos = (size_t)(nl - d) + 1;
  }
}

static void drain(acp_proxy *p) {
  const char *d = NULL;
  acp_ssize n = acp_proxy_send(p, &d);

  check_lines(d, n);
}

static int fatal_only(int rv) {
  return rv == ACP_ERR_NOMEM ? rv : 0;
}

static int injected(acp_proxy *p, const acp_rpc_msg *msg, void *ud) {
  (void)p;
  (void)msg;
  (void)ud;
  return 0;
}

/* Answer or forward the oldest held request. */
static void release_one(acp_proxy *p, fz *f, bool forward) {
  acp_proxy_request *r;

  if (f->nheld == 0)
    return;
  r = f->held[0];
  memmove(f->held, f->held + 1, (f->nheld - 1) * sizeof(f->held[0]));
  f->nheld--;
  if (forward && acp_proxy_request_forward(p, r, "{}", 2) == 0)
    return;
  if (acp_proxy_respond(p, r, "{\"late\":true}", 13) != 0)
    (void)acp_proxy_respond_error(p, r, -32000, NULL, NULL, 0);
}

static int on_msg(acp_proxy *p, const acp_proxy_msg *m, void *ud) {
  fz *f = ud;

  f->n++;
  switch ((f->n + f->flags) % 8) {
  case 0:
    return ACP_PROXY_FORWARD;
  case 1:
    return fatal_only(acp_proxy_forward_transformed(p, m, "{\"x\":1}", 7));
  case 2:
    if (m->req != NULL)
      return fatal_only(acp_proxy_respond(p, m->req, "{}", 2));
    return 0; /* a dropped notification */
  case 3:
    if (m->req != NULL)
      (void)acp_proxy_respond_error(p, m->req, -32001, "fuzz", "[1]", 3);
    return 0;
  case 4:
    if (m->req != NULL && f->nheld < MAX_HELD) {
      acp_proxy_request_set_user_data(m->req, f);
      f->held[f->nheld++] = m->req;
      return 0;
    }
    return ACP_PROXY_FORWARD;
  case 5:
    (void)acp_proxy_send_to_agent(p, "_fuzz/a", "{}", 2, injected, NULL, NULL);
    (void)acp_proxy_notify_client(p, "_fuzz/n", NULL, 0);
    return ACP_PROXY_FORWARD;
  case 6:
    (void)acp_proxy_send_to_client(p, "_fuzz/c", NULL, 0, injected, NULL, NULL);
    (void)acp_proxy_notify_agent(p, "_fuzz/n", "[]", 2);
    release_one(p, f, (f->flags & 16) != 0);
    return ACP_PROXY_FORWARD;
  default:
    (void)acp_proxy_forward(p, m);
    return ACP_PROXY_FORWARD; /* already forwarded: nothing more */
  }
}

static int on_response(acp_proxy *p, acp_proxy_request *req,
                       const acp_rpc_msg *msg, void *ud) {
  fz *f = ud;

  (void)msg;
  if ((f->flags & 32) && acp_proxy_request_is_cancelled(req) == 0 &&
      acp_proxy_request_get_user_data(req) == NULL)
    return fatal_only(acp_proxy_respond(p, req, "{\"hooked\":1}", 12));
  return ACP_PROXY_FORWARD;
}

static int on_cancel(acp_proxy *p, acp_proxy_request *req, void *ud) {
  fz *f = ud;
  unsigned i;

  if (!(f->flags & 64) || acp_proxy_request_is_forwarded(req))
    return 0;
  for (i = 0; i < f->nheld; i++) {
    if (f->held[i] == req) {
      memmove(f->held + i, f->held + i + 1,
              (f->nheld - i - 1) * sizeof(f->held[0]));
      f->nheld--;
      break;
    }
  }
  (void)acp_proxy_respond_error(p, req, -32800, "cancelled", NULL, 0);
  return 0;
}

static int on_initialized(acp_proxy *p, const acp_rpc_msg *resp, void *ud) {
  fz *f = ud;

  (void)resp;
  if (f->flags & 128)
    (void)acp_proxy_set_init_result(p, "{\"agentCapabilities\":{}}", 24);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  acp_proxy_callbacks *cbs = NULL;
  acp_proxy *p = NULL;
  fz f;
  size_t pos = 0;
  unsigned k = 0;
  uint8_t p1;
  uint8_t p2;

  if (size < 3)
    return 0;
  p1 = data[1];
  p2 = data[2];
  memset(&f, 0, sizeof(f));
  f.flags = data[0];
  if (acp_proxy_callbacks_new(&cbs) != 0)
    return 0;
  acp_proxy_callbacks_set_on_from_client(cbs, on_msg);
  acp_proxy_callbacks_set_on_from_agent(cbs, on_msg);
  acp_proxy_callbacks_set_on_response(cbs, on_response);
  acp_proxy_callbacks_set_on_cancel(cbs, on_cancel);
  acp_proxy_callbacks_set_on_initialized(cbs, on_initialized);
  if (acp_proxy_new(&p, cbs, &f, NULL, NULL) == 0) {
    /* Injected requests give the peer's responses something to match. */
    (void)acp_proxy_send_to_agent(p, "_fuzz/first", "{}", 2, injected, NULL,
                                  NULL);
    (void)acp_proxy_send_to_client(p, "_fuzz/first", "{}", 2, injected, NULL,
                                   NULL);
    drain(p);
    data += 3;
    size -= 3;
    while (pos < size) {
      size_t piece = (k++ & 1) ? (size_t)p2 + 1 : (size_t)p1 + 1;
      if (piece > size - pos)
        piece = size - pos;
      if (acp_proxy_recv(p, (const char *)data + pos, piece, pos) < 0)
        break;
      pos += piece;
      drain(p);
    }
    while (f.nheld > 0)
      release_one(p, &f, false);
    acp_proxy_recv_eof(p, pos);
    drain(p);
  }
  acp_proxy_free(p);
  acp_proxy_callbacks_free(cbs);
  return 0;
}
