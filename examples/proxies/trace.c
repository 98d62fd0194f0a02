/*
 * `acp proxy trace --file PATH`: appends every message this proxy receives
 * to PATH, one JSON line each, {"from":"client"|"agent","msg":<the message
 * exactly as received>}, and forwards everything unchanged. Messages that
 * arrive wrapped in proxy/successor are logged with their envelope (that is
 * what is on the wire). `$/cancel_request` is consumed by the session and
 * not logged.
 */
#include <stdio.h>
#include <string.h>

#include "proxy_run.h"

static const char trace_usage[] =
    "usage: acp proxy trace --file PATH\n"
    "\n"
    "An ACP proxy (run it under a conductor) that appends every message it\n"
    "receives to PATH as one JSON line {\"from\", \"msg\"} and forwards\n"
    "everything unchanged.\n"
    "\n"
    "options:\n"
    "  --file PATH  the log file (appended to; required)\n"
    "  -h, --help   show this help\n";

static int on_receive(acp_proxy *p, acp_proxy_dir from, const acp_rpc_msg *msg,
                      void *ud) {
  FILE *f = ud;

  (void)p;
  fprintf(f, "{\"from\":\"%s\",\"msg\":",
          from == ACP_PROXY_FROM_CLIENT ? "client" : "agent");
  fwrite(msg->raw, 1, msg->raw_len, f);
  fputs("}\n", f);
  fflush(f);
  return 0;
}

int proxy_trace_main(int argc, char **argv) {
  const char *path = NULL;
  acp_proxy_callbacks *cbs = NULL;
  acp_proxy *p = NULL;
  FILE *f = NULL;
  int status = 1;
  int i;

  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(trace_usage, stdout);
      return 0;
    } else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc) {
      path = argv[++i];
    } else if (strncmp(argv[i], "--file=", 7) == 0) {
      path = argv[i] + 7;
    } else {
      fprintf(stderr, "acp proxy trace: bad argument '%s'\n", argv[i]);
      fputs(trace_usage, stderr);
      return 2;
    }
  }
  if (path == NULL) {
    fputs("acp proxy trace: --file PATH is required\n", stderr);
    fputs(trace_usage, stderr);
    return 2;
  }
  f = fopen(path, "a");
  if (f == NULL) {
    proxy_log("trace", "cannot open %s", path);
    return 1;
  }
  if (acp_proxy_callbacks_new(&cbs) != 0)
    goto cleanup;
  acp_proxy_callbacks_set_on_receive(cbs, on_receive);
  if (acp_proxy_new(&p, cbs, f, NULL, NULL) != 0)
    goto cleanup;
  status = proxy_run_stdio(p, "trace");
cleanup:
  acp_proxy_free(p);
  acp_proxy_callbacks_free(cbs);
  fclose(f);
  return status;
}
