/*
 * Fuzz target: ACP dispatch on both sides (acp_agent and acp_client).
 *
 * Input layout: byte 0 picks the side (bit 0: client, else agent),
 * handler behaviour (bits 1-3) and the v2 opt-in (bit 4: an initialize
 * asking 2 gets the v2 tables, prompt lifecycle and shapes); the rest is fed to
 * recv in pieces whose sizes cycle through bytes 1-2. Handlers answer some
 * requests at once (result, error, typed helper), keep others for the end, and
 * send calls and updates of their own. Afterwards: EOF, drain, free. Every line
 * the role sends must be valid JSON.
 */
#include <stdlib.h>
#include <string.h>

#include "acp/agent.h"
#include "acp/client.h"
#include "acp/methods.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fz {
  uint8_t flags;
  unsigned n;
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

/* Drain a role's output and check it (two statements: the pointer is set
 * by the call, so it cannot be an argument next to it). */
#define DRAIN(send_fn, obj)                                                    \
  do {                                                                         \
    const char *d_ = NULL;                                                     \
    acp_ssize n_ = send_fn(obj, &d_);                                          \
    check_lines(d_, n_);                                                       \
  } while (0)

static int agent_resp(acp_agent *a, const acp_rpc_msg *m, void *ud) {
  (void)a;
  (void)m;
  (void)ud;
  return 0;
}

static int agent_req(acp_agent *a, acp_agent_request *req, void *ud) {
  fz *f = ud;
  const char *sid = acp_agent_request_session_id(req);

  f->n++;
  switch ((f->n + f->flags) % 6) {
  case 0:
    return acp_agent_respond_empty(a, req) == ACP_ERR_NOMEM ? ACP_ERR_NOMEM : 0;
  case 1:
    acp_agent_respond_error(a, req, -32000 - (int)f->n, "fuzz", "{}", 2);
    return 0;
  case 2:
    if (sid != NULL) {
      acp_agent_send_message_chunk(a, sid, "x", 1, NULL, 0);
      acp_agent_fs_read_text_file(a, sid, "/x", 1, 2, agent_resp, NULL, NULL);
    }
    acp_agent_respond_prompt(a, req, "end_turn", NULL, 0);
    return 0;
  case 3:
    acp_agent_respond_cancelled(a, req);
    return 0;
  default:
    return 0; /* left unanswered until EOF */
  }
}

static int agent_cancel(acp_agent *a, const char *sid, size_t len,
                        acp_agent_request *prompt, const acp_rpc_msg *msg,
                        void *ud) {
  (void)sid;
  (void)len;
  (void)msg;
  (void)ud;
  if (prompt != NULL)
    acp_agent_respond_cancelled(a, prompt);
  return 0;
}

static int client_req(acp_client *c, acp_client_request *req, void *ud) {
  fz *f = ud;

  f->n++;
  switch ((f->n + f->flags) % 4) {
  case 0:
    acp_client_respond_permission(c, req, (f->n & 1) ? "allow" : NULL);
    return 0;
  case 1:
    acp_client_respond_read_text_file(c, req, "abc", 3);
    return 0;
  case 2:
    acp_client_respond_error(c, req, -32602, "bad", NULL, 0);
    return 0;
  default:
    return 0;
  }
}

static int client_update(acp_client *c, const acp_client_update *u, void *ud) {
  (void)c;
  (void)ud;
  if (u->text != NULL && u->text_len > 0 && u->text == NULL)
    abort();
  return 0;
}

static void run_agent(fz *f, const uint8_t *data, size_t size, uint8_t p1,
                      uint8_t p2) {
  acp_agent_callbacks *cbs = NULL;
  acp_agent *a = NULL;
  size_t pos = 0;
  unsigned k = 0;

  if (acp_agent_callbacks_new(&cbs) != 0)
    return;
  acp_agent_callbacks_set_on_initialize(cbs, agent_req);
  acp_agent_callbacks_set_on_session_new(cbs, agent_req);
  acp_agent_callbacks_set_on_session_load(cbs, agent_req);
  acp_agent_callbacks_set_on_session_prompt(cbs, agent_req);
  acp_agent_callbacks_set_on_session_set_mode(cbs, agent_req);
  acp_agent_callbacks_set_on_session_cancel(cbs, agent_cancel);
  if (f->flags & 8)
    acp_agent_callbacks_set_on_ext_request(cbs, agent_req);
  if (acp_agent_new(&a, cbs, f, NULL, NULL) == 0) {
    if (f->flags & 16)
      acp_agent_set_max_protocol_version(a, ACP_PROTOCOL_V2);
    while (pos < size) {
      size_t piece = (k++ & 1) ? (size_t)p2 + 1 : (size_t)p1 + 1;
      acp_ssize r;
      if (piece > size - pos)
        piece = size - pos;
      r = acp_agent_recv(a, (const char *)data + pos, piece, pos);
      if (r < 0)
        break;
      pos += piece;
      DRAIN(acp_agent_send, a);
    }
    acp_agent_recv_eof(a, pos);
    DRAIN(acp_agent_send, a);
  }
  acp_agent_free(a);
  acp_agent_callbacks_free(cbs);
}

static void run_client(fz *f, const uint8_t *data, size_t size, uint8_t p1,
                       uint8_t p2) {
  acp_client_callbacks *cbs = NULL;
  acp_client *c = NULL;
  size_t pos = 0;
  unsigned k = 0;

  if (acp_client_callbacks_new(&cbs) != 0)
    return;
  acp_client_callbacks_set_on_request_permission(cbs, client_req);
  acp_client_callbacks_set_on_fs_read_text_file(cbs, client_req);
  acp_client_callbacks_set_on_terminal_create(cbs, client_req);
  acp_client_callbacks_set_on_session_update(cbs, client_update);
  if (acp_client_new(&c, cbs, f, NULL, NULL) == 0) {
    if (f->flags & 16)
      acp_client_set_max_protocol_version(c, ACP_PROTOCOL_V2);
    /* Our own requests give the peer's responses something to match. */
    acp_client_initialize(c, "{}", 2, NULL, 0, NULL, NULL, NULL);
    acp_client_prompt_text(c, "s", "hi", 2, NULL, NULL, NULL);
    DRAIN(acp_client_send, c);
    while (pos < size) {
      size_t piece = (k++ & 1) ? (size_t)p2 + 1 : (size_t)p1 + 1;
      if (piece > size - pos)
        piece = size - pos;
      if (acp_client_recv(c, (const char *)data + pos, piece, pos) < 0)
        break;
      pos += piece;
      DRAIN(acp_client_send, c);
    }
    acp_client_recv_eof(c, pos);
    DRAIN(acp_client_send, c);
  }
  acp_client_free(c);
  acp_client_callbacks_free(cbs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz f = {0, 0};

  if (size < 3)
    return 0;
  f.flags = data[0];
  if (f.flags & 1)
    run_client(&f, data + 3, size - 3, data[1], data[2]);
  else
    run_agent(&f, data + 3, size - 3, data[1], data[2]);
  return 0;
}
