/*
 * bench_mcp_stdio: `tools/call echo` round trips to an MCP
 * server over stdio, on our sans-I/O MCP client (acp_mcp_client) with
 * blocking read(2)/write(2) on the pipes: no event loop on the client side,
 * so the client adds as little as possible to each round trip.
 *
 *   bench_mcp_stdio [--calls N] [--warmup N] [--message TEXT] [--impl NAME]
 *                   [--inflight K] -- SERVER_CMD ARGS...
 *
 * Spawns the server, initializes, sends `warmup` unmeasured calls, then N
 * measured ones, K in flight (default 1: one at a time; each answer sends
 * the next call): echo {"message": TEXT}; each answer must be
 * one text block equal to TEXT. Before closing the server's stdin it reads
 * the server's VmHWM from /proc/PID/status. Prints one JSON line:
 *   {"impl":..,"calls":N,"inflight":K,"seconds":..,"rtps":..,"p50_us":..,
 *    "p99_us":..,"server_peak_rss_kib":..,"server_pid":..,
 *    "client_cpu_us":..,"server_cpu_us":..}  (CPU: whole runs)
 * (latency: from a call's write to its answer).
 * Exit 0, or 1 with a message on stderr (a call failed or answered wrong).
 */
#include "acp/json.h"
#include "acp/mcp.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static uint64_t now_ms(void) {
  return now_ns() / 1000000u;
}

typedef struct bench bench;

/* One call in flight. */
typedef struct slot {
  bench *b;
  uint64_t t0;
} slot;

struct bench {
  acp_mcp_client *c;
  int to_srv, from_srv; /* pipe ends */
  const char *impl;
  const char *message;
  char *args; /* {"message": ...} */
  long calls, warmup, done, issued, inflight;
  slot *slots;
  uint64_t start;
  double *lat_us;
  long rss_kib;
  int pid;
  int failed;
  int finished;
};

static long read_hwm(int pid) {
  char path[64], line[256];
  long v = -1;
  FILE *f;
  snprintf(path, sizeof(path), "/proc/%d/status", pid);
  f = fopen(path, "r");
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f))
    if (strncmp(line, "VmHWM:", 6) == 0) {
      v = strtol(line + 6, NULL, 10);
      break;
    }
  fclose(f);
  return v;
}

static void finish(bench *b, int failed) {
  if (b->finished)
    return;
  b->finished = 1;
  b->failed = failed;
  if (b->pid > 0)
    b->rss_kib = read_hwm(b->pid);
}

static int next_call(slot *sl);

static int on_call(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                   void *ud) {
  slot *sl = ud;
  bench *b = sl->b;
  const acp_json_val *content, *block;
  uint64_t now = now_ns();
  (void)c;
  if (status != 0) {
    fprintf(stderr, "bench_mcp_stdio: tools/call failed: %s\n",
            acp_strerror(status));
    finish(b, 1);
    return 0;
  }
  content = acp_json_obj_getz(msg->result, "content");
  block = acp_json_arr_get(content, 0);
  if (acp_json_len(content) != 1 ||
      !acp_json_str_eq(acp_json_obj_getz(block, "text"), b->message,
                       strlen(b->message))) {
    /* server-everything answers "Echo: TEXT": accept that prefix too. */
    const char *s;
    size_t n, ml = strlen(b->message);
    if (acp_json_doc_str(msg->doc, acp_json_obj_getz(block, "text"), &s, &n) !=
            0 ||
        n < ml || memcmp(s + n - ml, b->message, ml) != 0) {
      fprintf(stderr, "bench_mcp_stdio: unexpected answer\n");
      finish(b, 1);
      return 0;
    }
  }
  if (b->done >= b->warmup)
    b->lat_us[b->done - b->warmup] = (double)(now - sl->t0) / 1e3;
  b->done++;
  if (b->done == b->warmup)
    b->start = now_ns();
  return next_call(sl);
}

static int next_call(slot *sl) {
  bench *b = sl->b;
  int rv;
  if (b->done >= b->warmup + b->calls) {
    b->start = now_ns() - b->start;
    finish(b, 0);
    return 0;
  }
  if (b->issued >= b->warmup + b->calls)
    return 0; /* the last calls are in flight */
  b->issued++;
  sl->t0 = now_ns();
  rv = acp_mcp_client_call_tool(b->c, "echo", b->args, strlen(b->args), NULL,
                                now_ms(), on_call, sl, NULL);
  if (rv != 0) {
    fprintf(stderr, "bench_mcp_stdio: cannot call: %s\n", acp_strerror(rv));
    finish(b, 1);
  }
  return 0;
}

static int on_init(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                   void *ud) {
  bench *b = ud;
  (void)c;
  (void)msg;
  if (status != 0) {
    fprintf(stderr, "bench_mcp_stdio: initialize failed: %s\n",
            acp_strerror(status));
    finish(b, 1);
    return 0;
  }
  b->start = now_ns();
  for (long k = 0; k < b->inflight && !b->finished; k++)
    next_call(&b->slots[k]);
  return 0;
}

/* Write everything the client has to send. */
static int flush_out(bench *b) {
  const char *d;
  acp_ssize n;
  while ((n = acp_mcp_client_send(b->c, &d)) > 0) {
    size_t off = 0;
    while (off < (size_t)n) {
      ssize_t w = write(b->to_srv, d + off, (size_t)n - off);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        return -1;
      off += (size_t)w;
    }
  }
  return n < 0 ? -1 : 0;
}

static int spawn(bench *b, char **argv) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0)
    return -1;
  b->pid = fork();
  if (b->pid < 0)
    return -1;
  if (b->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    execvp(argv[0], argv);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  b->to_srv = in[1];
  b->from_srv = out[0];
  return 0;
}

/* Close the server's stdin; wait up to 5 s, then SIGTERM, then SIGKILL. */
static void reap(bench *b) {
  int i, st;
  close(b->to_srv);
  for (i = 0; i < 100; i++) {
    if (waitpid(b->pid, &st, WNOHANG) == b->pid)
      goto done;
    sleep_ms(50);
  }
  kill(b->pid, SIGTERM);
  for (i = 0; i < 40; i++) {
    if (waitpid(b->pid, &st, WNOHANG) == b->pid)
      goto done;
    sleep_ms(50);
  }
  kill(b->pid, SIGKILL);
  waitpid(b->pid, &st, 0);
done:
  close(b->from_srv);
}

static long long cpu_us(const struct rusage *ru) {
  return (long long)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000 +
         ru->ru_utime.tv_usec + ru->ru_stime.tv_usec;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Nearest rank. */
static double pct(const double *v, long n, double p) {
  long k = (long)(p / 100.0 * (double)n + 0.999999);
  if (k < 1)
    k = 1;
  if (k > n)
    k = n;
  return v[k - 1];
}

int main(int argc, char **argv) {
  bench b;
  acp_json_writer *w = NULL;
  int i, rv;
  memset(&b, 0, sizeof(b));
  b.calls = 10000;
  b.warmup = 200;
  b.message = "hello";
  b.impl = "server";
  b.inflight = 1;
  b.rss_kib = -1;
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    } else if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc)
      b.calls = strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
      b.warmup = strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--message") == 0 && i + 1 < argc)
      b.message = argv[++i];
    else if (strcmp(argv[i], "--inflight") == 0 && i + 1 < argc)
      b.inflight = strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--impl") == 0 && i + 1 < argc)
      b.impl = argv[++i];
    else {
      fprintf(stderr, "usage: bench_mcp_stdio [--calls N] [--warmup N] "
                      "[--message TEXT] [--impl NAME] [--inflight K] "
                      "-- CMD ARGS...\n");
      return 2;
    }
  }
  if (i >= argc || b.calls <= 0 || b.warmup < 0 || b.inflight <= 0) {
    fprintf(stderr, "bench_mcp_stdio: a server command is required after --\n");
    return 2;
  }
  b.lat_us = calloc((size_t)b.calls, sizeof(double));
  b.slots = calloc((size_t)b.inflight, sizeof(slot));
  for (long k = 0; b.slots != NULL && k < b.inflight; k++)
    b.slots[k].b = &b;
  if (b.lat_us == NULL || b.slots == NULL ||
      acp_json_writer_new(&w, 0, NULL) != 0)
    return 1;
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "message");
  acp_json_write_strz(w, b.message);
  acp_json_write_obj_end(w);
  {
    size_t n;
    const char *p = acp_json_writer_data(w, &n);
    b.args = calloc(1, n + 1);
    if (b.args == NULL)
      return 1;
    memcpy(b.args, p, n);
  }
  acp_json_writer_free(w);

  signal(SIGPIPE, SIG_IGN);
  rv = acp_mcp_client_new(&b.c, NULL, "bench_mcp_stdio", "1", &b, NULL);
  if (rv == 0)
    acp_mcp_client_set_timeouts(b.c, 30000, 0);
  if (rv != 0 || spawn(&b, argv + i) != 0) {
    fprintf(stderr, "bench_mcp_stdio: cannot start '%s'\n", argv[i]);
    return 1;
  }
  rv = acp_mcp_client_initialize(b.c, now_ms(), on_init, &b);
  if (rv != 0 || flush_out(&b) != 0)
    finish(&b, 1);
  while (!b.finished) {
    char buf[65536];
    ssize_t n = read(b.from_srv, buf, sizeof(buf));
    acp_ssize r;
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      fprintf(stderr, "bench_mcp_stdio: the server closed its output\n");
      finish(&b, 1);
      break;
    }
    r = acp_mcp_client_recv(b.c, buf, (size_t)n, now_ms());
    if (r < 0 && acp_is_fatal((int)r)) {
      fprintf(stderr, "bench_mcp_stdio: %s\n", acp_strerror((int)r));
      finish(&b, 1);
      break;
    }
    if (flush_out(&b) != 0) {
      fprintf(stderr, "bench_mcp_stdio: cannot write to the server\n");
      finish(&b, 1);
    }
  }
  reap(&b);
  acp_mcp_client_free(b.c);
  if (!b.failed && b.done == b.warmup + b.calls) {
    double secs = (double)b.start / 1e9;
    struct rusage ru_self, ru_kids;
    /* CPU (user + system) of the whole run, warm-up included: this
     * process, and the server, reaped by now. */
    getrusage(RUSAGE_SELF, &ru_self);
    getrusage(RUSAGE_CHILDREN, &ru_kids);
    qsort(b.lat_us, (size_t)b.calls, sizeof(double), cmp_d);
    printf("{\"impl\":\"%s\",\"calls\":%ld,\"inflight\":%ld,\"seconds\":%.3f,"
           "\"rtps\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
           "\"server_peak_rss_kib\":",
           b.impl, b.calls, b.inflight, secs, (double)b.calls / secs,
           pct(b.lat_us, b.calls, 50), pct(b.lat_us, b.calls, 99));
    if (b.rss_kib >= 0)
      printf("%ld", b.rss_kib);
    else
      printf("null");
    printf(
        ",\"server_pid\":%d,\"client_cpu_us\":%lld,\"server_cpu_us\":%lld}\n",
        b.pid, cpu_us(&ru_self), cpu_us(&ru_kids));
  } else
    b.failed = 1;
  free(b.lat_us);
  free(b.slots);
  free(b.args);
  return b.failed ? 1 : 0;
}
