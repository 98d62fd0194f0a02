/*
 * The runner shared by the example proxies: the proxy's session on stdio
 * through the libuv runtime.
 */
#include <stdarg.h>
#include <stdio.h>

#include "acp/uv.h"
#include "proxy_run.h"

#define FLUSH_TIMEOUT_MS 2000

void proxy_log(const char *name, const char *fmt, ...) {
  va_list ap;

  fprintf(stderr, "acp proxy %s: ", name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

int proxy_run_stdio(acp_proxy *p, const char *name) {
  int rv = acp_uv_run_stdio(acp_proxy_session(p), FLUSH_TIMEOUT_MS);

  if (rv != 0) {
    proxy_log(name, "connection ended: %s", acp_strerror(rv));
    return 1;
  }
  return 0;
}
