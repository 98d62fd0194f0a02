/*
 * `acp mcp serve --http ADDR:PORT --workers N`: a supervisor process and N
 * worker processes sharing one port with SO_REUSEPORT.
 */
#ifndef ACP_CLI_MCP_WORKERS_H
#define ACP_CLI_MCP_WORKERS_H

#include <stddef.h>
#include <stdint.h>

/* What mcp_workers_run() hands a worker process. */
typedef struct mcp_worker_slot {
  int listen_fd; /* its own listening socket (SO_REUSEPORT), owned */
  char name[40]; /* its worker id: PREFIX then its number, e.g. "w2" */
} mcp_worker_slot;

/* mcp_workers_run()'s answer in a worker process: go on serving `slot`. */
#define MCP_WORKERS_CHILD (-1)

/*
 * Fork `n` (1..64) workers on `addr`:`port` (an IPv4 or IPv6 literal; port
 * 0 picks a free one, reserved by the supervisor's own bound but never
 * listening socket so a restarted worker gets the same port) and supervise
 * them: a worker that dies is restarted after a backoff (100 ms doubling
 * to 5 s, back to 100 ms once a worker has lived 10 s), each restart
 * logged on stderr; every SIGINT/SIGTERM is forwarded to every worker (so
 * a second one cuts their drain short too; SIGKILL `grace_ms` after the
 * first, at least 10 s) and the supervisor returns once all are gone. Each
 * worker
 * binds its own socket with SO_REUSEADDR + SO_REUSEPORT and listens, so the
 * kernel spreads new connections over the workers; a worker dies with its
 * supervisor (PR_SET_PDEATHSIG).
 *
 * Returns MCP_WORKERS_CHILD in a worker (with `*slot` filled and the
 * signal mask restored), or in the supervisor its exit status (0 after a
 * requested stop, 1 when it could not start).
 */
int mcp_workers_run(const char *addr, uint16_t port, int n, const char *prefix,
                    uint32_t grace_ms, mcp_worker_slot *slot);

#endif /* ACP_CLI_MCP_WORKERS_H */
