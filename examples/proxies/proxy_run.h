/*
 * Shared runner of the example proxies, and their entry points. Each example
 * is a small program built on acp/proxy.h; `acp proxy NAME ...` calls
 * proxy_NAME_main() with argv[0] = NAME. Examples are meant to be copied.
 */
#ifndef ACP_EXAMPLES_PROXY_RUN_H
#define ACP_EXAMPLES_PROXY_RUN_H

#include "acp/proxy.h"

/*
 * Run `p` on stdin/stdout with a libuv loop until stdin reaches EOF (or
 * SIGTERM/SIGINT), flush, and return an exit status: 0 after a clean EOF,
 * 1 on a failure (reported on stderr with `name`).
 */
int proxy_run_stdio(acp_proxy *p, const char *name);

/* Print "acp proxy NAME: message" to stderr. */
void proxy_log(const char *name, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Exit statuses: 0 ok, 1 runtime failure, 2 bad command line. */
int proxy_arrow_main(int argc, char **argv);
int proxy_context_main(int argc, char **argv);
int proxy_guard_main(int argc, char **argv);
int proxy_trace_main(int argc, char **argv);
int proxy_tools_main(int argc, char **argv);

#endif /* ACP_EXAMPLES_PROXY_RUN_H */
