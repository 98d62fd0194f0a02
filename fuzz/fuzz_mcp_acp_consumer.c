/*
 * Fuzz target: MCP-over-ACP, the side that uses the servers
 * (src/acp/mcp_acp.c, the consumer on an acp_agent), against a client
 * that says anything: answers to the agent's mcp/connect (or their
 * refusal, which makes the consumer fall back to another shape),
 * mcp/message requests and notifications from the servers, answers to
 * what the agent's MCP clients ask, at any time.
 *
 * Input layout: byte 0: bits 0-3 the piece size lines are fed in (1..16,
 * 0: whole lines). The rest is split at '\n'; the first byte of each
 * piece picks the step (b % 8):
 *   0-3 the rest is a line from the client;
 *   4 open a link to server "S" in shape (b >> 3) % 3 (M0, M1, M2) with
 *     an MCP client of its own, initialized once the link is open;
 *   5 a request on the newest open link's MCP client (tools/list,
 *     tools/call with the rest as its name, ping; by b >> 3);
 *   6 close the newest link;
 *   7 let b * 10 ms pass: expiry and flushes.
 * At the end the input closes and everything is freed. Every line the
 * agent sends must be valid JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/acp.h"
#include "acp/mcp.h"
#include "acp/mcp_acp.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LINKS 6

static struct {
  acp_agent *a;
  acp_mcp_acp_consumer *cons;
  acp_json_doc *doc;
  acp_mcp_client *clients[LINKS];
  acp_mcp_acp_link *links[LINKS]; /* NULL: none, closed or refused */
  unsigned n;
  uint64_t now;
  volatile size_t sink;
} F;

static void drain(void) {
  const char *d;
  acp_ssize n;

  while ((n = acp_agent_send(F.a, &d)) > 0)
    fuzz_check_lines(d, (size_t)n, F.doc, NULL, NULL);
  CHECK(n == 0);
}

static void pump(void) {
  (void)acp_mcp_acp_consumer_flush(F.cons, F.now);
  drain();
}

static int on_result(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                     void *ud) {
  (void)c;
  (void)ud;
  CHECK(status != 0 || (msg != NULL && msg->result != NULL));
  if (msg != NULL) {
    size_t n = 0;
    const char *raw = acp_json_raw(msg->result, &n);
    for (size_t i = 0; raw != NULL && i < n; i++)
      F.sink += (unsigned char)raw[i];
  }
  return 0;
}

static int on_open(acp_mcp_acp_link *link, int status, const acp_rpc_msg *msg,
                   void *ud) {
  unsigned i = (unsigned)(uintptr_t)ud;

  (void)msg;
  /* `out` is set before the callback runs. */
  CHECK(F.links[i] == NULL || F.links[i] == link);
  if (status != 0) {
    F.links[i] = NULL; /* freed when this returns */
    return 0;
  }
  F.links[i] = link;
  (void)acp_mcp_client_initialize(acp_mcp_acp_link_client(link), F.now,
                                  on_result, NULL);
  return 0;
}

/* Server requests to the agent's MCP clients: answered at once. */
static int on_elicit(acp_mcp_client *c, acp_mcp_client_request *req,
                     const acp_json_val *params, void *ud) {
  (void)params;
  (void)ud;
  return acp_mcp_client_respond(c, req, "{\"action\":\"decline\"}", 20);
}

static int a_req(acp_agent *a, acp_agent_request *req, void *ud) {
  int rv = acp_mcp_acp_consumer_agent_request(F.cons, req);

  (void)ud;
  if (rv == ACP_MCP_ACP_NOT_MINE)
    return acp_agent_respond_error(a, req, ACP_RPC_METHOD_NOT_FOUND, NULL, NULL,
                                   0);
  return rv;
}

static int a_notif(acp_agent *a, const acp_rpc_msg *msg, void *ud) {
  int rv = acp_mcp_acp_consumer_agent_notification(F.cons, msg);

  (void)a;
  (void)ud;
  return rv == ACP_MCP_ACP_NOT_MINE ? 0 : rv;
}

static void setup(void) {
  acp_agent_callbacks *ac = NULL;

  if (acp_agent_callbacks_new(&ac) != 0)
    abort();
  acp_agent_callbacks_set_on_mcp_message(ac, a_req);
  acp_agent_callbacks_set_on_ext_request(ac, a_req);
  acp_agent_callbacks_set_on_mcp_message_notification(ac, a_notif);
  acp_agent_callbacks_set_on_ext_notification(ac, a_notif);
  if (acp_agent_new(&F.a, ac, NULL, NULL, NULL) != 0)
    abort();
  acp_agent_callbacks_free(ac);
  if (acp_mcp_acp_consumer_new(&F.cons, F.a, NULL, NULL) != 0 ||
      acp_json_doc_new(&F.doc, NULL) != 0)
    abort();
}

static void open_link(unsigned shape) {
  acp_mcp_client_callbacks *cbs = NULL;
  unsigned i = F.n;
  static const acp_mcp_acp_shape shapes[3] = {
      ACP_MCP_ACP_SHAPE_M0, ACP_MCP_ACP_SHAPE_M1, ACP_MCP_ACP_SHAPE_M2};

  if (i >= LINKS)
    return;
  if (acp_mcp_client_callbacks_new(&cbs) != 0)
    abort();
  acp_mcp_client_callbacks_set_on_elicitation(cbs, on_elicit);
  if (acp_mcp_client_new(&F.clients[i], cbs, "agent", "1", NULL, NULL) != 0)
    abort();
  acp_mcp_client_callbacks_free(cbs);
  F.n++;
  (void)acp_mcp_acp_consumer_open(F.cons, "S", shapes[shape % 3], F.clients[i],
                                  on_open, (void *)(uintptr_t)i, &F.links[i]);
}

static acp_mcp_acp_link *newest(unsigned *at) {
  for (unsigned i = F.n; i > 0; i--)
    if (F.links[i - 1] != NULL) {
      *at = i - 1;
      return F.links[i - 1];
    }
  return NULL;
}

static void request(unsigned which, const uint8_t *p, size_t n) {
  unsigned at;
  acp_mcp_acp_link *l = newest(&at);
  acp_mcp_client *c;
  char name[32];

  if (l == NULL || !acp_mcp_acp_link_is_open(l))
    return;
  c = acp_mcp_acp_link_client(l);
  snprintf(name, sizeof(name), "%.*s", (int)(n < 31 ? n : 31), (const char *)p);
  switch (which % 3) {
  case 0:
    (void)acp_mcp_client_list(c, ACP_MCP_LIST_TOOLS, NULL, NULL, F.now,
                              on_result, NULL, NULL);
    break;
  case 1:
    (void)acp_mcp_client_call_tool(c, name, "{}", 2, NULL, F.now, on_result,
                                   NULL, NULL);
    break;
  default:
    (void)acp_mcp_client_ping(c, F.now, on_result, NULL);
    break;
  }
}

/* A piece of a line from the client; non-zero once the connection is
 * over. */
static int client_bytes(const char *d, size_t k, void *ud) {
  (void)ud;
  if (acp_agent_recv(F.a, d, k, F.now) < 0)
    return 1;
  pump();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_pieces it;
  uint8_t step;
  const uint8_t *rest;
  size_t rn;
  size_t piece;
  unsigned at;

  if (size < 1)
    return 0;
  memset(&F, 0, sizeof(F));
  F.now = 1;
  setup();
  piece = data[0] & 15;
  it.p = data + 1;
  it.end = data + size;
  while (fuzz_next_piece(&it, &step, &rest, &rn)) {
    acp_mcp_acp_link *l;

    switch (step % 8) {
    case 4:
      open_link((unsigned)(step >> 3));
      break;
    case 5:
      request((unsigned)(step >> 3), rest, rn);
      break;
    case 6:
      l = newest(&at);
      if (l != NULL) {
        F.links[at] = NULL;
        acp_mcp_acp_link_close(l);
      }
      break;
    case 7:
      F.now += (uint64_t)step * 10;
      for (unsigned i = 0; i < F.n; i++)
        if (F.links[i] != NULL)
          (void)acp_mcp_client_handle_expiry(F.clients[i], F.now);
      break;
    default:
      fuzz_feed_line(rest, rn, piece, client_bytes, NULL);
      break;
    }
    pump();
  }
  (void)acp_agent_recv_eof(F.a, F.now);
  pump();
  /* The order the header asks for: the agent, the consumer (its links),
   * then the MCP clients the links borrowed. */
  acp_agent_free(F.a);
  acp_mcp_acp_consumer_free(F.cons);
  for (unsigned i = 0; i < F.n; i++)
    acp_mcp_client_free(F.clients[i]);
  acp_json_doc_free(F.doc);
  return 0;
}
