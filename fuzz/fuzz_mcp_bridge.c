/*
 * Fuzz target: the conductor's MCP-over-ACP bridge (src/acp/mcp_bridge.c).
 *
 * Input layout: byte 0 picks the transport (bits 0-1: off, stdio, http)
 * and whether the HTTP helper can start (bit 2). The rest is split at
 * '\n'; the first byte of each piece picks the step (as libgit2's fuzzers
 * use data[0]): b % 8 = 0 a line the router has for the agent, 1 a line
 * from the agent, 2 a new endpoint, 3-5 the rest of the piece plus a
 * newline from endpoint (b >> 3) % 4 + 1, 6 that endpoint ends, 7 the
 * provider of the server named by the rest is gone. Tokens are all '1'
 * (32 of them) so that a corpus can connect. After every step the lines
 * for the router are taken and held lines released; every line the bridge
 * writes to the router or to an endpoint must be one valid JSON text.
 */
#include <stdlib.h>
#include <string.h>

#include "acp/json.h"
#include "acp/mcp_bridge.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_lines(const char *d, size_t n) {
  size_t pos = 0;

  while (pos < n) {
    const char *nl = memchr(d + pos, '\n', n - pos);
    if (nl == NULL)
      abort(); /* output must be whole lines */
    if (acp_json_validate(d + pos, (size_t)(nl - (d + pos)), NULL) != 0)
      abort();
    pos = (size_t)(nl - d) + 1;
  }
}

static int on_random(acp_mcp_bridge *b, uint8_t out[16], void *ud) {
  (void)b;
  (void)ud;
  memset(out, 0x11, 16);
  return 0;
}

static int on_prepare(acp_mcp_bridge *b, acp_mcp_bridge_transport t, void *ud) {
  const uint8_t *flags = ud;

  if (t == ACP_MCP_BRIDGE_TRANSPORT_HTTP) {
    if (*flags & 4)
      return -1;
    acp_mcp_bridge_set_http_port(b, 8080);
    return 0;
  }
  return acp_mcp_bridge_set_socket(b, "/tmp/fuzz.sock");
}

static void on_write(acp_mcp_bridge *b, uint64_t ep, const char *d, size_t n,
                     void *ud) {
  (void)b;
  (void)ep;
  (void)ud;
  check_lines(d, n);
}

static void drain(acp_mcp_bridge *b) {
  const char *d;
  acp_ssize n = acp_mcp_bridge_send(b, &d);

  if (n < 0)
    abort();
  check_lines(d, (size_t)n);
  if (acp_mcp_bridge_want_release(b) &&
      acp_mcp_bridge_release(b, &d) == ACP_ERR_INVALID_ARGUMENT)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  acp_mcp_bridge_options *o = NULL;
  acp_mcp_bridge *b = NULL;
  uint64_t eps[4] = {0, 0, 0, 0};
  size_t neps = 0;
  size_t pos = 1;
  uint8_t flags;
  char *buf = NULL;
  int rv;

  if (size < 1)
    return 0;
  flags = data[0];
  if (acp_mcp_bridge_options_new(&o) != 0)
    return 0;
  acp_mcp_bridge_options_set_transport(o,
                                       (acp_mcp_bridge_transport)(flags % 3));
  acp_mcp_bridge_options_set_max_line(o, 512);
  if (acp_mcp_bridge_options_set_program(o, "/bin/acp") != 0) {
    acp_mcp_bridge_options_free(o);
    return 0;
  }
  acp_mcp_bridge_options_set_random_cb(o, on_random);
  acp_mcp_bridge_options_set_prepare_cb(o, on_prepare);
  acp_mcp_bridge_options_set_endpoint_write_cb(o, on_write);
  rv = acp_mcp_bridge_new(&b, o, &flags, NULL);
  acp_mcp_bridge_options_free(o);
  if (rv != 0)
    return 0;
  buf = malloc(size + 1);
  if (buf == NULL)
    goto out;
  while (pos < size) {
    const uint8_t *nl = memchr(data + pos, '\n', size - pos);
    size_t end = nl ? (size_t)(nl - data) : size;
    uint8_t op = data[pos];
    const char *rest = (const char *)data + pos + 1;
    size_t len = end - pos - (end > pos ? 1 : 0);
    uint64_t ep = eps[(op >> 3) % 4];
    const char *d;

    if (end == pos) {
      pos++;
      continue;
    }
    switch (op % 8) {
    case 0:
      memcpy(buf, rest, len);
      buf[len] = '\n';
      if (acp_mcp_bridge_to_agent(b, buf, len + 1, &d) < 0)
        goto out;
      break;
    case 1:
      if (acp_mcp_bridge_from_agent(b, rest, len, &d) < 0)
        goto out;
      break;
    case 2:
      if (neps < 4 && acp_mcp_bridge_endpoint_new(b, &eps[neps]) == 0)
        neps++;
      break;
    case 3:
    case 4:
    case 5:
      memcpy(buf, rest, len);
      buf[len] = '\n';
      if (ep != 0 &&
          acp_mcp_bridge_endpoint_recv(b, ep, buf, len + 1) == ACP_ERR_NOMEM)
        goto out;
      break;
    case 6:
      acp_mcp_bridge_endpoint_closed(b, ep);
      break;
    default:
      (void)acp_mcp_bridge_server_gone(b, rest, len, "fuzz");
      break;
    }
    drain(b);
    pos = end + 1;
  }
out:
  free(buf);
  acp_mcp_bridge_free(b);
  return 0;
}
