/*
 * bench_pass_proxy: the smallest proxy the proxy SDK makes, forwarding
 * everything untouched (no callbacks). bench/run-conductor.sh places three
 * of them between `acp conductor` and the agent to measure what a chain of
 * pass-through proxies costs. Not a benchmark by itself.
 */
#include <stdio.h>

#include "acp/proxy.h"
#include "acp/uv.h"

int main(void) {
  acp_proxy *p = NULL;
  int rv;

  if (acp_proxy_new(&p, NULL, NULL, NULL, NULL) != 0) {
    fputs("bench_pass_proxy: out of memory\n", stderr);
    return 1;
  }
  rv = acp_uv_run_stdio(acp_proxy_session(p), 2000);
  acp_proxy_free(p);
  if (rv != 0) {
    fprintf(stderr, "bench_pass_proxy: %s\n", acp_strerror(rv));
    return 1;
  }
  return 0;
}
