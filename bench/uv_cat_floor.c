/*
 * uv_cat_floor: the floor of a prompt turn on this machine
 * (bench/run-turns.sh). A libuv program that writes one line of S bytes to
 * `cat` and reads the same S + 1 bytes back, one line in flight, N times. No
 * JSON, no framing beyond counting bytes: what an event loop, two pipes, a
 * second process and the copies through the kernel cost for a payload of that
 * size. A prompt turn does the same trip (the prompt out, the echoed chunk and
 * the response back) plus the protocol, so ours/floor says how much of a turn
 * is our own work.
 *
 * Usage: uv_cat_floor [--payload S] [--turns N] [--impl NAME] [--pipes]
 *                     [--block] [--pipe-size BYTES] [-- CMD ARGS...]
 * (default command: cat). By default the command's stdin and stdout are
 * what libuv's UV_CREATE_PIPE makes, AF_UNIX socketpairs; --pipes makes
 * them real pipes as acp's are (src/uv/process.c), and --pipe-size asks
 * for pipes of that capacity (F_SETPIPE_SZ; --block, with --pipes, runs
 * the turns without the event loop: a blocking write(2), then read(2)
 * until the line is back, the floor of a client that waits in read(2) as
 * `acp bench-client` does by default; acp grows its pipes to 1 MiB
 * once a message is larger than 64 KiB, and beyond to fit a larger message
 * where the kernel allows; a size over 1 MiB that is refused falls back to
 * 1 MiB, as acp's does). bench/run-turns.sh runs the
 * floor both ways ("floor" on socketpairs, "floor-pipes" with acp's
 * pipes). The JSON line's "pipe_bytes" is the capacity the pipes got (-1
 * for socketpairs). Reads take 64 KiB, or a full pipe's worth if larger. Prints
 * one JSON line with the fields of `acp bench-client` (bench/README.md),
 * "agent" being the command, and exits 0; exits 1 with a message if the echo
 * comes back wrong or short.
 */
#define _GNU_SOURCE /* F_SETPIPE_SZ */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

typedef struct {
  uv_loop_t loop;
  uv_process_t proc;
  uv_pipe_t in;  /* cat's stdin: we write */
  uv_pipe_t out; /* cat's stdout: we read */
  uv_write_t wr;
  char *line; /* S bytes + '\n' */
  size_t len; /* S + 1 */
  size_t got; /* bytes of the current echo read so far */
  long turns, done;
  uint64_t *lat;
  uint64_t t0, t_start, t_end;
  long agent_rss_kib;
  int64_t agent_exit;
  int failed;
  char *rbuf; /* 64 KiB, or the pipe's capacity if larger */
  size_t rbuf_len;
} floor_bench;

static long vmhwm_kib(int pid) {
  char path[64], line[256];
  long kib = -1;
  FILE *f;

  snprintf(path, sizeof(path), "/proc/%d/status", pid);
  f = fopen(path, "r");
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, "VmHWM:", 6) == 0)
      kib = strtol(line + 6, NULL, 10);
  fclose(f);
  return kib;
}

static void fail(floor_bench *b, const char *msg) {
  if (!b->failed)
    fprintf(stderr, "uv_cat_floor: %s (after %ld turns)\n", msg, b->done);
  b->failed = 1;
  uv_read_stop((uv_stream_t *)&b->out);
  if (!uv_is_closing((uv_handle_t *)&b->in))
    uv_close((uv_handle_t *)&b->in, NULL);
}

static void on_write(uv_write_t *req, int status) {
  if (status != 0)
    fail(req->data, "write failed");
}

static void send_line(floor_bench *b) {
  uv_buf_t buf = uv_buf_init(b->line, (unsigned)b->len);

  b->got = 0;
  b->wr.data = b;
  b->t0 = uv_hrtime();
  if (uv_write(&b->wr, (uv_stream_t *)&b->in, &buf, 1, on_write) != 0)
    fail(b, "uv_write failed");
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  floor_bench *b = h->data;

  (void)suggested;
  *buf = uv_buf_init(b->rbuf, (unsigned)b->rbuf_len);
}

/* n more bytes of the echo came (n < 0: its end), the last of them in
 * last[0]: 1 when the line is whole (its turn counted), 0 when more must
 * come, -1 on a failure (reported). Both ways of running share it. */
static int echo_step(floor_bench *b, ssize_t n, const char *last) {
  if (n < 0) {
    fail(b, "the command closed its output early");
    return -1;
  }
  b->got += (size_t)n;
  if (b->got > b->len) {
    fail(b, "more bytes came back than were sent");
    return -1;
  }
  if (b->got < b->len)
    return 0;
  /* The whole line is back: only then is its last byte the newline. */
  if (n == 0 || *last != '\n') {
    fail(b, "the echo does not end with the line's newline");
    return -1;
  }
  b->lat[b->done++] = uv_hrtime() - b->t0;
  return 1;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  floor_bench *b = s->data;

  if (echo_step(b, n, n > 0 ? buf->base + n - 1 : NULL) != 1)
    return;
  if (b->done < b->turns) {
    send_line(b);
    return;
  }
  b->t_end = uv_hrtime();
  /* Read cat's peak RSS before closing its stdin, as bench-client does. */
  b->agent_rss_kib = vmhwm_kib(b->proc.pid);
  uv_read_stop(s);
  uv_close((uv_handle_t *)&b->in, NULL);
}

/* --block: the turns without the loop, then the command's stdin closed so
 * that it ends (the loop then sees its exit). */
static void run_blocking(floor_bench *b, int wfd, int rfd) {
  b->t_start = uv_hrtime();
  while (!b->failed && b->done < b->turns) {
    size_t off = 0;
    ssize_t n = 0;

    b->t0 = uv_hrtime();
    while (off < b->len) {
      n = write(wfd, b->line + off, b->len - off);
      if (n <= 0) {
        fail(b, "write failed");
        break;
      }
      off += (size_t)n;
    }
    for (b->got = 0; !b->failed;) {
      n = read(rfd, b->rbuf, b->rbuf_len);
      if (echo_step(b, n > 0 ? n : -1, n > 0 ? b->rbuf + n - 1 : NULL) != 0)
        break;
    }
  }
  b->t_end = uv_hrtime();
  b->agent_rss_kib = vmhwm_kib(b->proc.pid);
  close(wfd);
  close(rfd);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig) {
  floor_bench *b = p->data;

  b->agent_exit = sig ? -sig : status;
  uv_close((uv_handle_t *)p, NULL);
  uv_close((uv_handle_t *)&b->out, NULL);
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;
  return a < c ? -1 : a > c;
}

/* Nearest-rank percentile in microseconds, as bench-client computes it. */
static double pct_us(const uint64_t *v, long n, double p) {
  long rank;

  if (n <= 0)
    return 0;
  rank = (long)(p / 100.0 * (double)n + 0.999999);
  if (rank < 1)
    rank = 1;
  if (rank > n)
    rank = n;
  return (double)v[rank - 1] / 1000.0;
}

static long long cpu_us(const struct rusage *ru) {
  return (long long)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000 +
         ru->ru_utime.tv_usec + ru->ru_stime.tv_usec;
}

int main(int argc, char **argv) {
  static floor_bench b;
  char *default_cmd[] = {"cat", NULL};
  char **cmd = default_cmd;
  const char *impl = "floor";
  size_t size = 5;
  long pipe_size = 0;
  int pipe_bytes = -1; /* the smaller of the two pipes' capacity */
  int use_pipes = 0;
  int block = 0;
  uv_file in_fds[2], out_fds[2];
  uv_os_fd_t raw[2] = {-1, -1}; /* --block: our ends, blocking */
  uv_process_options_t opts;
  uv_stdio_container_t stdio[3];
  double secs;
  struct rusage ru_self, ru_kids;
  int i, rc;

  b.turns = 20000;
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      if (i + 1 < argc)
        cmd = argv + i + 1;
      break;
    } else if (strcmp(argv[i], "--payload") == 0 && i + 1 < argc) {
      size = strtoul(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--turns") == 0 && i + 1 < argc) {
      b.turns = strtol(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--impl") == 0 && i + 1 < argc) {
      impl = argv[++i];
    } else if (strcmp(argv[i], "--pipes") == 0) {
      use_pipes = 1;
    } else if (strcmp(argv[i], "--block") == 0) {
      block = 1;
    } else if (strcmp(argv[i], "--pipe-size") == 0 && i + 1 < argc) {
      pipe_size = strtol(argv[++i], NULL, 10);
    } else {
      fprintf(stderr, "usage: uv_cat_floor [--payload S] [--turns N] "
                      "[--impl NAME] [--pipes] [--block] "
                      "[--pipe-size BYTES] "
                      "[-- CMD ARGS...]\n");
      return 2;
    }
  }
  if (b.turns <= 0) {
    fprintf(stderr, "uv_cat_floor: --turns must be positive\n");
    return 2;
  }
  if (block && !use_pipes) {
    fprintf(stderr, "uv_cat_floor: --block needs --pipes\n");
    return 2;
  }
  b.len = size + 1;
  b.line = malloc(b.len);
  b.lat = calloc((size_t)b.turns, sizeof(uint64_t));
  if (b.line == NULL || b.lat == NULL)
    return 1;
  /* The same bytes as bench-client's prompt text. */
  for (size_t k = 0; k < size; k++)
    b.line[k] = (char)('a' + k % 26);
  b.line[size] = '\n';
  b.agent_exit = -1;
  b.agent_rss_kib = -1;
  signal(SIGPIPE, SIG_IGN);

  uv_loop_init(&b.loop);
  uv_pipe_init(&b.loop, &b.in, 0);
  uv_pipe_init(&b.loop, &b.out, 0);
  b.in.data = b.out.data = b.proc.data = &b;
  memset(&opts, 0, sizeof(opts));
  if (use_pipes) {
    /* What acp does (src/uv/process.c): real pipes, our ends
     * non-blocking, the child's blocking. */
    if (uv_pipe(in_fds, 0, UV_NONBLOCK_PIPE) != 0 ||
        uv_pipe(out_fds, UV_NONBLOCK_PIPE, 0) != 0) {
      fprintf(stderr, "uv_cat_floor: cannot make pipes\n");
      return 1;
    }
    stdio[0].flags = UV_INHERIT_FD;
    stdio[0].data.fd = in_fds[0];
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = out_fds[1];
  } else {
    stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
    stdio[0].data.stream = (uv_stream_t *)&b.in;
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = (uv_stream_t *)&b.out;
  }
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = 2;
  opts.file = cmd[0];
  opts.args = cmd;
  opts.exit_cb = on_exit_cb;
  opts.stdio = stdio;
  opts.stdio_count = 3;
  rc = uv_spawn(&b.loop, &b.proc, &opts);
  if (rc != 0) {
    fprintf(stderr, "uv_cat_floor: cannot start %s: %s\n", cmd[0],
            uv_strerror(rc));
    return 1;
  }
  if (use_pipes) {
    close(in_fds[0]);
    close(out_fds[1]);
    if (block) {
      raw[0] = in_fds[1];
      raw[1] = out_fds[0];
      for (i = 0; i < 2; i++)
        (void)fcntl(raw[i], F_SETFL, fcntl(raw[i], F_GETFL) & ~O_NONBLOCK);
    } else {
      uv_pipe_open(&b.in, in_fds[1]);
      uv_pipe_open(&b.out, out_fds[0]);
    }
  }
  {
    /* The pipes' capacity, reported: asked for with --pipe-size, which
     * the kernel may refuse (over pipe-max-size, or once the user's pipes
     * hold pipe-user-pages-soft pages), as it may refuse acp's. */
    uv_os_fd_t fd;
    uv_stream_t *ends[2] = {(uv_stream_t *)&b.in, (uv_stream_t *)&b.out};
    for (i = 0; i < 2; i++) {
      int got = -1;
      if (block)
        fd = raw[i];
      if (block || uv_fileno((uv_handle_t *)ends[i], &fd) == 0) {
        if (pipe_size > 0 && fcntl(fd, F_SETPIPE_SZ, (int)pipe_size) < 0) {
          fprintf(stderr, "uv_cat_floor: pipe size %ld refused\n", pipe_size);
          /* As acp: a pipe it cannot grow to fit a message stays at the
           * 1 MiB it grew to first (src/uv/link.c, fit_pipe()). */
          if (pipe_size > 1048576)
            (void)fcntl(fd, F_SETPIPE_SZ, 1048576);
        }
        got = fcntl(fd, F_GETPIPE_SZ);
      }
      if (i == 0 || got < pipe_bytes)
        pipe_bytes = got;
    }
  }
  /* Reads take what a full pipe holds, as acp's do (it reads into its
   * line buffer, which grows to the line). */
  b.rbuf_len = pipe_bytes > 65536 ? (size_t)pipe_bytes : 65536;
  b.rbuf = malloc(b.rbuf_len);
  if (b.rbuf == NULL)
    return 1;
  if (block) {
    run_blocking(&b, raw[0], raw[1]);
    if (!uv_is_closing((uv_handle_t *)&b.in))
      uv_close((uv_handle_t *)&b.in, NULL);
  } else {
    uv_read_start((uv_stream_t *)&b.out, on_alloc, on_read);
    b.t_start = uv_hrtime();
    send_line(&b);
  }
  uv_run(&b.loop, UV_RUN_DEFAULT);
  uv_loop_close(&b.loop);
  if (b.failed || b.done != b.turns)
    return 1;
  qsort(b.lat, (size_t)b.done, sizeof(uint64_t), cmp_u64);
  secs = (double)(b.t_end - b.t_start) / 1e9;
  /* CPU (user + system) of the whole run, as acp bench-client reports it:
   * this process, and the agent, reaped by now. */
  getrusage(RUSAGE_SELF, &ru_self);
  getrusage(RUSAGE_CHILDREN, &ru_kids);
  printf("{\"impl\":\"%s\",\"payload\":%zu,\"turns\":%ld,\"seconds\":%.4f,"
         "\"rtps\":%.1f,\"mibps\":%.3f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
         "\"client_peak_rss_kib\":%ld,\"agent_peak_rss_kib\":%ld,"
         "\"agent_pid\":%d,\"agent_exit\":%lld,\"pipe_bytes\":%d,"
         "\"client_cpu_us\":%lld,\"agent_cpu_us\":%lld}\n",
         impl, size, b.done, secs, (double)b.done / secs,
         (double)b.done * (double)size / secs / 1048576.0,
         pct_us(b.lat, b.done, 50), pct_us(b.lat, b.done, 99),
         vmhwm_kib((int)getpid()), b.agent_rss_kib, b.proc.pid,
         (long long)b.agent_exit, pipe_bytes, cpu_us(&ru_self),
         cpu_us(&ru_kids));
  free(b.line);
  free(b.lat);
  free(b.rbuf);
  return 0;
}
