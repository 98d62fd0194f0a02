/*
 * bench_conductor: the conductor embedded in the smallest program that can
 * run it (acp/conductor.h, linked with libacp-uv only), for
 * bench/run-conductor.sh to measure the conductor's own footprint apart
 * from the `acp` program, which also links the HTTP stack.
 *
 *   bench_conductor agent|proxy COMPONENT...
 *
 * Components are given as `acp conductor` takes them; stderr passthrough is
 * off. Exit status as acp_conductor_run() reports it.
 */
#include <stdio.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "acp/conductor.h"

int main(int argc, char **argv) {
#ifdef __GLIBC__
  /* As acp conductor does (docs/conductor.md): keep freed large buffers
   * in the heap for the next message. */
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 16 << 20);
#endif
  acp_conductor_options *o = NULL;
  char err[256];
  int i, status = 2, rc;

  if (argc < 2 || acp_conductor_options_new(&o, NULL) != 0) {
    fputs("usage: bench_conductor agent|proxy COMPONENT...\n", stderr);
    return 2;
  }
  acp_conductor_options_set_mode(o, strcmp(argv[1], "proxy") == 0
                                        ? ACP_ROUTER_MODE_PROXY
                                        : ACP_ROUTER_MODE_AGENT);
  acp_conductor_options_set_stderr_passthrough(o, false);
  for (i = 2; i < argc; i++) {
    if (acp_conductor_options_add_component_spec(o, argv[i], err,
                                                 sizeof(err)) != 0) {
      fprintf(stderr, "bench_conductor: %s: %s\n", argv[i], err);
      goto out;
    }
  }
  rc = acp_conductor_run(o, 0, 1, &status);
  if (rc != 0) {
    fprintf(stderr, "bench_conductor: %s\n", acp_strerror(rc));
    status = 1;
  }
out:
  acp_conductor_options_free(o);
  return status;
}
