/*
 * The --workers supervisor of `acp mcp serve --http`.
 *
 * Why processes with SO_REUSEPORT rather than threads or one shared socket:
 * the server is one libuv loop per process and keeps no state a 2026
 * stateless request needs across requests, so N independent processes
 * scale with the cores without any locking; SO_REUSEPORT gives each its own
 * accept queue (the kernel hashes each new connection to one of them), so
 * no worker wakes for another's connection. The price: a 2025 session lives
 * in the worker that created it, and the kernel does not route a later
 * connection by session id, so behind --workers only stateless (2026)
 * clients, or clients keeping one connection, are served reliably; a proxy
 * routing by the session id's worker prefix (examples/deploy/) is the
 * deployment for sessions.
 *
 * The supervisor uses no event loop: it blocks the signals it handles and
 * waits in sigtimedwait(), which also gives it the restart backoff
 * timeout. It forks before anything (libuv loop, curl, threads) exists, so
 * a worker starts from a clean process.
 */
/* SO_REUSEPORT, PR_SET_PDEATHSIG, sigtimedwait */
#define _GNU_SOURCE 1
#include "mcp_workers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 64
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define STABLE_MS 10000 /* a worker that lived this long resets its backoff */
#define STOP_GRACE_MS 10000 /* SIGKILL what is still alive after a stop */

typedef struct worker {
  pid_t pid;          /* 0: not running */
  int64_t started;    /* ms, monotonic */
  int64_t restart_at; /* ms; when pid == 0 and not stopping */
  int backoff;        /* ms of the next restart delay */
} worker;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct bind_addr {
  struct sockaddr_storage ss;
  socklen_t len;
} bind_addr;

static int addr_make(bind_addr *a, const char *addr, uint16_t port) {
  struct sockaddr_in *a4 = (struct sockaddr_in *)&a->ss;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&a->ss;
  memset(a, 0, sizeof(*a));
  if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    a->len = sizeof(*a4);
  } else if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    a->len = sizeof(*a6);
  } else
    return -1;
  return 0;
}

/* A TCP socket with SO_REUSEADDR + SO_REUSEPORT bound to `a`; -1 (errno). */
static int reuse_bind(const bind_addr *a) {
  int one = 1;
  int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
      (a->ss.ss_family == AF_INET6 &&
       setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) ||
      bind(fd, (const struct sockaddr *)&a->ss, a->len) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

typedef struct sup {
  worker w[MAX_WORKERS];
  int n;
  const char *prefix;
  bind_addr addr; /* with the real port */
  int reserve_fd;
  sigset_t oldmask;
} sup;

/* Fork worker `i`. In the child: fill `slot` and return 1. In the parent: 0,
 * or -1 when fork failed (retried after the backoff). */
static int spawn(sup *s, int i, mcp_worker_slot *slot) {
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "acp mcp: cannot fork worker %s%d: %s\n", s->prefix, i + 1,
            strerror(errno));
    return -1;
  }
  if (pid == 0) {
    int fd;
    /* Die with the supervisor, even when it is SIGKILLed. */
    (void)prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1)
      _exit(1);
    close(s->reserve_fd);
    sigprocmask(SIG_SETMASK, &s->oldmask, NULL);
    snprintf(slot->name, sizeof(slot->name), "%s%d", s->prefix, i + 1);
    fd = reuse_bind(&s->addr);
    if (fd < 0 || listen(fd, 511) != 0) {
      fprintf(stderr, "acp mcp: worker %s cannot listen: %s\n", slot->name,
              strerror(errno));
      _exit(1);
    }
    slot->listen_fd = fd;
    return 1;
  }
  s->w[i].pid = pid;
  s->w[i].started = now_ms();
  fprintf(stderr, "acp mcp: worker %s%d started (pid %ld)\n", s->prefix, i + 1,
          (long)pid);
  fflush(stderr);
  return 0;
}

static void describe(int status, char *buf, size_t cap) {
  if (WIFSIGNALED(status))
    snprintf(buf, cap, "killed by signal %d", WTERMSIG(status));
  else
    snprintf(buf, cap, "exited with status %d", WEXITSTATUS(status));
}

int mcp_workers_run(const char *addr, uint16_t port, int n, const char *prefix,
                    uint32_t grace_ms, mcp_worker_slot *slot) {
  static sup s; /* big; one supervisor per process */
  sigset_t set;
  int i, stopping = 0, alive, stop_sig = SIGTERM;
  int64_t kill_at = 0;
  struct sockaddr_storage got;
  socklen_t gl = sizeof(got);
  if (n < 1 || n > MAX_WORKERS || slot == NULL)
    return 1;
  memset(&s, 0, sizeof(s));
  s.n = n;
  s.prefix = prefix;
  if (addr_make(&s.addr, addr, port) != 0) {
    fprintf(stderr, "acp mcp: bad address '%s'\n", addr);
    return 1;
  }
  /* Bound but never listening: it holds the port (a port 0 request gets
   * its number here) and takes no connections, since the kernel only
   * hashes connections over the listening members of the group. */
  s.reserve_fd = reuse_bind(&s.addr);
  if (s.reserve_fd < 0 ||
      getsockname(s.reserve_fd, (struct sockaddr *)&got, &gl) != 0) {
    fprintf(stderr, "acp mcp: cannot bind %s:%u: %s\n", addr, port,
            strerror(errno));
    if (s.reserve_fd >= 0)
      close(s.reserve_fd);
    return 1;
  }
  if (got.ss_family == AF_INET6)
    port = ntohs(((struct sockaddr_in6 *)&got)->sin6_port);
  else
    port = ntohs(((struct sockaddr_in *)&got)->sin_port);
  (void)addr_make(&s.addr, addr, port);

  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigprocmask(SIG_BLOCK, &set, &s.oldmask);

  for (i = 0; i < n; i++) {
    s.w[i].backoff = BACKOFF_MIN_MS;
    if (spawn(&s, i, slot) == 1)
      return MCP_WORKERS_CHILD;
    if (s.w[i].pid == 0)
      s.w[i].restart_at = now_ms() + BACKOFF_MIN_MS;
  }
  {
    int v6 = strchr(addr, ':') != NULL;
    fprintf(stderr, "acp mcp: serving http://%s%s%s:%u/mcp (%d workers)\n",
            v6 ? "[" : "", addr, v6 ? "]" : "", port, n);
    fflush(stderr);
  }

  for (;;) {
    siginfo_t si;
    struct timespec ts;
    int64_t t = now_ms(), next = t + 60000;
    int sig;
    pid_t pid;
    int status;
    alive = 0;
    for (i = 0; i < n; i++) {
      if (s.w[i].pid != 0)
        alive++;
      else if (!stopping && s.w[i].restart_at < next)
        next = s.w[i].restart_at;
    }
    if (stopping && alive == 0)
      break;
    if (stopping && kill_at < next)
      next = kill_at;
    if (next < t)
      next = t;
    ts.tv_sec = (time_t)((next - t) / 1000);
    ts.tv_nsec = (long)((next - t) % 1000) * 1000000L;
    sig = sigtimedwait(&set, &si, &ts);
    if (sig == SIGINT || sig == SIGTERM) {
      if (!stopping) {
        stopping = 1;
        stop_sig = sig;
        /* The workers' drain may take longer than the default grace. */
        kill_at = now_ms() + (grace_ms > STOP_GRACE_MS ? (int64_t)grace_ms
                                                       : STOP_GRACE_MS);
        fprintf(stderr, "acp mcp: stopping %d workers\n", alive);
        fflush(stderr);
      }
      for (i = 0; i < n; i++)
        if (s.w[i].pid != 0)
          kill(s.w[i].pid, stop_sig);
    }
    /* SIGHUP: ignored (a terminal hang-up must not take the workers down;
     * the workers get their own). */
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      char why[64];
      for (i = 0; i < n; i++)
        if (s.w[i].pid == pid)
          break;
      if (i == n)
        continue;
      s.w[i].pid = 0;
      if (stopping)
        continue;
      if (now_ms() - s.w[i].started >= STABLE_MS)
        s.w[i].backoff = BACKOFF_MIN_MS;
      describe(status, why, sizeof(why));
      fprintf(stderr,
              "acp mcp: worker %s%d (pid %ld) %s; restarting in %d ms\n",
              prefix, i + 1, (long)pid, why, s.w[i].backoff);
      fflush(stderr);
      s.w[i].restart_at = now_ms() + s.w[i].backoff;
      s.w[i].backoff *= 2;
      if (s.w[i].backoff > BACKOFF_MAX_MS)
        s.w[i].backoff = BACKOFF_MAX_MS;
    }
    t = now_ms();
    if (stopping && t >= kill_at) {
      for (i = 0; i < n; i++)
        if (s.w[i].pid != 0) {
          fprintf(stderr,
                  "acp mcp: worker %s%d (pid %ld) still running: "
                  "SIGKILL\n",
                  prefix, i + 1, (long)s.w[i].pid);
          kill(s.w[i].pid, SIGKILL);
        }
      kill_at = t + 60000;
    }
    if (!stopping)
      for (i = 0; i < n; i++)
        if (s.w[i].pid == 0 && t >= s.w[i].restart_at) {
          if (spawn(&s, i, slot) == 1)
            return MCP_WORKERS_CHILD;
          if (s.w[i].pid == 0)
            s.w[i].restart_at = t + s.w[i].backoff;
        }
  }
  close(s.reserve_fd);
  sigprocmask(SIG_SETMASK, &s.oldmask, NULL);
  fprintf(stderr, "acp mcp: all workers stopped\n");
  return 0;
}
