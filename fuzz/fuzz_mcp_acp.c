/*
 * Fuzz target: MCP-over-ACP, the side that offers the servers
 * (src/acp/mcp_acp.c, the provider on an acp_client), against an agent
 * that says anything: mcp/connect, mcp/message and mcp/disconnect in
 * every shape (M0 `_mcp/...`, M1, the connectionless M2), answers to the
 * requests its servers send through it, cancels, at any time.
 *
 * Two servers are declared, 11..11 on session s1 and 22..22 on s2 (their
 * connections are "<32 hex digits>:<n>", n counting from 1). Their tools:
 * echo (answers at once), slow (held until a step answers it) and ask
 * (asks the agent for an elicitation, or the roots, through the tunnel).
 *
 * Input layout: byte 0: bits 0-3 pick the piece size lines are fed in
 * (1..16, 0: whole lines). The rest is split at '\n'; the first byte of
 * each piece picks the step (b % 8):
 *   0-3 the rest is a line from the agent;
 *   4 answer the oldest held slow call (text, or an error if b & 8);
 *   5 end session s1 or s2 (b & 8) with its servers;
 *   6 remove server 22..22's declaration;
 *   7 let b ms pass and flush the provider.
 * At the end the input closes, held calls are answered, and everything is
 * freed. Every line the client sends must be valid JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/acp.h"
#include "acp/mcp.h"
#include "acp/mcp_acp.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SLOW_MAX 4

static struct {
  acp_client *c;
  acp_mcp_acp_provider *prov;
  acp_mcp_server *server;
  acp_mcp_acp_decl *decl2;
  acp_json_doc *doc;
  acp_mcp_call *slow[SLOW_MAX];
  unsigned nslow;
  uint64_t now;
  volatile size_t sink;
} F;

static void drain(void) {
  const char *d;
  acp_ssize n;

  while ((n = acp_client_send(F.c, &d)) > 0)
    fuzz_check_lines(d, (size_t)n, F.doc, NULL, NULL);
  CHECK(n == 0);
}

/* MARK: - Tools */

static int tool_echo(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  const acp_json_val *m = acp_json_obj_getz(args, "message");
  const char *sid = acp_mcp_acp_call_session_id(call);
  const char *s = "";
  size_t n = 0;

  (void)ud;
  if (sid != NULL)
    F.sink += strlen(sid);
  if (acp_json_type_of(m) == ACP_JSON_STRING &&
      acp_json_doc_str(acp_mcp_call_doc(call), m, &s, &n) != 0)
    return ACP_ERR_NOMEM;
  return acp_mcp_call_respond_text(call, s, n, false);
}

static int on_slow_cancel(acp_mcp_call *call, void *ud) {
  (void)ud;
  /* Answered now: a cancelled call is the handler's to end. */
  for (unsigned i = 0; i < F.nslow; i++)
    if (F.slow[i] == call) {
      memmove(F.slow + i, F.slow + i + 1,
              (F.nslow - i - 1) * sizeof(F.slow[0]));
      F.nslow--;
      return acp_mcp_call_respond_text(call, "cancelled", 9, true);
    }
  return 0;
}

static int tool_slow(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  (void)args;
  (void)ud;
  if (F.nslow >= SLOW_MAX)
    return acp_mcp_call_respond_text(call, "busy", 4, true);
  F.slow[F.nslow++] = call;
  acp_mcp_call_set_on_cancel(call, on_slow_cancel, NULL);
  return 0;
}

static int on_asked(acp_mcp_call *call, int status, const acp_rpc_msg *msg,
                    void *ud) {
  (void)ud;
  if (msg != NULL) {
    size_t n = 0;
    const char *raw = acp_json_raw(msg->result, &n);
    for (size_t i = 0; raw != NULL && i < n; i++)
      F.sink += (unsigned char)raw[i];
  }
  if (acp_mcp_call_is_cancelled(call))
    return acp_mcp_call_respond_text(call, "late", 4, false);
  return acp_mcp_call_respond_text(call, "asked", 5, status != 0);
}

static int tool_ask(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  (void)ud;
  if (acp_json_obj_getz(args, "roots") != NULL)
    return acp_mcp_call_list_roots(call, 0, on_asked, NULL);
  return acp_mcp_call_elicit(call, "{\"message\":\"m\"}", 15, 0, on_asked,
                             NULL);
}

/* MARK: - The client's handlers: all to the provider */

static int c_req(acp_client *c, acp_client_request *req, void *ud) {
  int rv = acp_mcp_acp_provider_client_request(F.prov, req);

  (void)ud;
  if (rv == ACP_MCP_ACP_NOT_MINE)
    return acp_client_respond_error(c, req, ACP_RPC_METHOD_NOT_FOUND, NULL,
                                    NULL, 0);
  return rv;
}

static int c_notif(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  int rv = acp_mcp_acp_provider_client_notification(F.prov, msg);

  (void)c;
  (void)ud;
  return rv == ACP_MCP_ACP_NOT_MINE ? 0 : rv;
}

static int c_cancel(acp_client *c, acp_client_request *req, void *ud) {
  int rv = acp_mcp_acp_provider_client_cancel(F.prov, req);

  (void)c;
  (void)ud;
  return rv == ACP_MCP_ACP_NOT_MINE ? 0 : rv;
}

static void setup(void) {
  acp_client_callbacks *cc = NULL;
  acp_mcp_tool_def def;
  uint8_t id1[16], id2[16];

  memset(&def, 0, sizeof(def));
  def.version = ACP_MCP_DEF_VERSION;
  if (acp_mcp_server_new(&F.server, "tools", "1.0", NULL, NULL) != 0)
    abort();
  def.name = "echo";
  def.handler = tool_echo;
  if (acp_mcp_server_add_tool(F.server, &def) != 0)
    abort();
  def.name = "slow";
  def.handler = tool_slow;
  if (acp_mcp_server_add_tool(F.server, &def) != 0)
    abort();
  def.name = "ask";
  def.handler = tool_ask;
  if (acp_mcp_server_add_tool(F.server, &def) != 0)
    abort();
  if (acp_client_callbacks_new(&cc) != 0)
    abort();
  acp_client_callbacks_set_on_mcp_connect(cc, c_req);
  acp_client_callbacks_set_on_mcp_message(cc, c_req);
  acp_client_callbacks_set_on_mcp_disconnect(cc, c_req);
  acp_client_callbacks_set_on_ext_request(cc, c_req);
  acp_client_callbacks_set_on_mcp_message_notification(cc, c_notif);
  acp_client_callbacks_set_on_ext_notification(cc, c_notif);
  acp_client_callbacks_set_on_cancel_request(cc, c_cancel);
  if (acp_client_new(&F.c, cc, NULL, NULL, NULL) != 0)
    abort();
  acp_client_callbacks_free(cc);
  if (acp_mcp_acp_provider_new(&F.prov, NULL, NULL) != 0 ||
      acp_mcp_acp_provider_attach_client(F.prov, F.c) != 0)
    abort();
  memset(id1, 0x11, sizeof(id1));
  memset(id2, 0x22, sizeof(id2));
  if (acp_mcp_acp_provider_declare(F.prov, F.server, "tools", "s1", id1,
                                   NULL) != 0 ||
      acp_mcp_acp_provider_declare(F.prov, F.server, "more", "s2", id2,
                                   &F.decl2) != 0)
    abort();
  if (acp_json_doc_new(&F.doc, NULL) != 0)
    abort();
}

/* A piece of a line from the agent; non-zero once the connection is
 * over (a fatal error). */
static int agent_bytes(const char *d, size_t k, void *ud) {
  (void)ud;
  if (acp_client_recv(F.c, d, k, F.now) < 0)
    return 1;
  (void)acp_mcp_acp_provider_flush(F.prov, F.now);
  drain();
  return 0;
}

static void answer_slow(bool error) {
  acp_mcp_call *call;

  if (F.nslow == 0)
    return;
  call = F.slow[0];
  memmove(F.slow, F.slow + 1, (F.nslow - 1) * sizeof(F.slow[0]));
  F.nslow--;
  (void)acp_mcp_call_respond_text(call, "done", 4, error);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_pieces it;
  uint8_t step;
  const uint8_t *rest;
  size_t rn;
  size_t piece;

  if (size < 1)
    return 0;
  memset(&F, 0, sizeof(F));
  F.now = 1;
  setup();
  piece = data[0] & 15;
  it.p = data + 1;
  it.end = data + size;
  while (fuzz_next_piece(&it, &step, &rest, &rn)) {

    switch (step % 8) {
    case 4:
      answer_slow((step & 8) != 0);
      break;
    case 5:
      (void)acp_mcp_acp_provider_close_session(F.prov,
                                               (step & 8) ? "s2" : "s1");
      if (step & 8)
        F.decl2 = NULL; /* removed with its session */
      break;
    case 6:
      if (F.decl2 != NULL)
        acp_mcp_acp_decl_remove(F.decl2);
      F.decl2 = NULL;
      break;
    case 7:
      F.now += step;
      break;
    default:
      fuzz_feed_line(rest, rn, piece, agent_bytes, NULL);
      break;
    }
    (void)acp_mcp_acp_provider_flush(F.prov, F.now);
    drain();
  }
  (void)acp_client_recv_eof(F.c, F.now);
  drain();
  while (F.nslow > 0)
    answer_slow(false);
  (void)acp_mcp_acp_provider_flush(F.prov, F.now);
  drain();
  /* The order the header asks for: the role object, then the provider. */
  acp_client_free(F.c);
  acp_mcp_acp_provider_free(F.prov);
  acp_mcp_server_free(F.server);
  acp_json_doc_free(F.doc);
  return 0;
}
