/*
 * Fuzz target: the conductor's router (src/router).
 *
 * Input layout: byte 0 picks the chain (bits 0-1: 1 + N components, bit 2
 * proxy mode with N - 1 proxies, bits 3-4 the proxy_methods option, bit 5 a
 * small output cap, bit 6 at most 3 requests in flight). The rest is split
 * at '\n'; the first byte of each piece picks what happens (as libgit2's
 * fuzzers use data[0]): the link is byte % (N + 1); top bits 11 make it a
 * control step (bits 3-4: link closed, bypass, restart, release memory),
 * anything else feeds the rest of the piece to that link. After every step
 * each link is drained and every line written must be one valid JSON text.
 * At the end every link is closed, after which nothing may stay pending.
 */
#include <stdlib.h>
#include <string.h>

#include "acp/json.h"
#include "acp/router.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_output(acp_router *r) {
  size_t link;

  for (link = 0; link < acp_router_link_count(r); link++) {
    const char *d;
    acp_ssize n = acp_router_send(r, link, &d);
    size_t pos = 0;

    if (n < 0)
      abort();
    while (pos < (size_t)n) {
      const char *nl = memchr(d + pos, '\n', (size_t)n - pos);
      if (nl == NULL)
        abort(); /* output must be whole lines */
      if (acp_json_validate(d + pos, (size_t)(nl - (d + pos)), NULL) != 0)
        abort();
      pos = (size_t)(nl - d) + 1;
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  acp_router_options *o = NULL;
  acp_router *r = NULL;
  size_t n;
  size_t pos = 1;
  size_t link;
  int rv;

  if (size < 1)
    return 0;
  n = 1 + (data[0] & 3);
  if (acp_router_options_new(&o) != 0)
    return 0;
  if (data[0] & 4) {
    acp_router_options_set_mode(o, ACP_ROUTER_MODE_PROXY);
    n--;
  }
  acp_router_options_set_proxy_methods(
      o, (acp_router_proxy_methods)((data[0] >> 3) & 3));
  if (data[0] & 32)
    acp_router_options_set_max_output(o, 256);
  if (data[0] & 64)
    acp_router_options_set_max_pending(o, 3);
  rv = acp_router_new(&r, n, o, NULL, NULL);
  acp_router_options_free(o);
  if (rv != 0)
    return 0;
  while (pos < size) {
    const uint8_t *nl = memchr(data + pos, '\n', size - pos);
    size_t end = nl ? (size_t)(nl - data) : size;
    uint8_t b = data[pos];

    if (end == pos) { /* empty piece */
      pos++;
      continue;
    }
    link = b % (n + 1);
    if ((b & 0xC0) == 0xC0) {
      switch ((b >> 3) & 3) {
      case 0:
        rv = acp_router_link_closed(r, link, "fuzz \xff reason",
                                    "{\"component\":1}", 15);
        break;
      case 1:
        rv = acp_router_link_bypass(r, link);
        break;
      case 2:
        rv = acp_router_link_restart(r, link);
        break;
      default:
        acp_router_release_memory(r);
        rv = 0;
        break;
      }
    } else {
      rv =
          acp_router_recv(r, link, (const char *)data + pos + 1, end - pos - 1);
    }
    if (rv == ACP_ERR_NOMEM || rv == ACP_ERR_INTERNAL)
      abort();
    check_output(r);
    pos = end + 1;
  }
  for (link = 0; link < acp_router_link_count(r); link++) {
    rv = acp_router_link_closed(r, link, NULL, NULL, 0);
    if (rv != 0 && rv != ACP_ERR_INVALID_STATE)
      abort();
  }
  if (acp_router_pending(r) != 0)
    abort();
  check_output(r);
  acp_router_free(r);
  return 0;
}
