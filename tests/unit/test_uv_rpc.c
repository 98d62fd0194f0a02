/*
 * The rpc glue: a session over a child's pipes (request/response, timeout
 * through the timer), ACP_ERR_PAUSE and resume, the blocking run_fds.
 */
#define _GNU_SOURCE /* sched_getcpu, CPU_SET */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acp/mcp.h"
#include "acp/uv.h"
#include "uv_helpers.h"
#include "uv/uv_internal.h"

static void finish_loop(uv_loop_t *loop) {
  assert_int_equal(uv_run(loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(loop), 0);
}

static char *tmp_file(const char *content, int *fd_out) {
  static char names[4][64];
  static int k;
  char *name = names[k++ % 4];
  size_t len = strlen(content);
  strcpy(name, "/tmp/acp-uv-rpc-XXXXXX");
  int fd = mkstemp(name);
  assert_true(fd >= 0);
  if (len)
    assert_int_equal(write(fd, content, len), (ssize_t)len);
  assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
  *fd_out = fd;
  return name;
}

static char *slurp(int fd, size_t *len) {
  static char buf[65536];
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  assert_true(n >= 0);
  buf[n] = '\0';
  *len = (size_t)n;
  return buf;
}

static bool contains(const char *hay, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(hay + i, needle, k) == 0)
      return true;
  return false;
}

/* MARK: - Over a child's pipes */

typedef struct child_ctx {
  uv_loop_t loop;
  acp_uv_process *p;
  acp_uv_rpc *r;
  acp_rpc_session *s;
  int echo_ok;
  int timeouts;
  int ends;
  int end_reason;
  bool rpc_closed;
  bool proc_closed;
} child_ctx;

static void close_rpc(child_ctx *c) {
  if (c->r) {
    acp_uv_rpc_close(c->r, NULL);
    c->r = NULL;
    c->rpc_closed = true;
  }
}

static void child_end(acp_uv_rpc *r, int reason, void *ud) {
  child_ctx *c = ud;
  (void)r;
  c->ends++;
  c->end_reason = reason;
  close_rpc(c);
}

static void proc_closed(acp_uv_process *p, void *ud) {
  child_ctx *c = ud;
  (void)p;
  c->proc_closed = true;
}

static void on_shut(acp_uv_process *p, void *ud) {
  child_ctx *c = ud;
  close_rpc(c);
  acp_uv_process_close(p, proc_closed);
}

static int on_silent(acp_rpc_session *s, const acp_rpc_msg *msg, void *ud) {
  child_ctx *c = ud;
  (void)s;
  assert_true(msg->local);
  assert_int_equal(msg->error_code, ACP_RPC_REQUEST_TIMEOUT);
  c->timeouts++;
  assert_int_equal(acp_uv_process_shutdown(c->p, on_shut), 0);
  return 0;
}

static int on_echo(acp_rpc_session *s, const acp_rpc_msg *msg, void *ud) {
  child_ctx *c = ud;
  assert_int_equal(msg->kind, ACP_RPC_RESPONSE);
  assert_false(msg->local);
  assert_null(msg->error);
  assert_non_null(msg->result);
  assert_true(contains(msg->raw, msg->raw_len, "\"echo\":true"));
  c->echo_ok++;
  /* Submitted from inside a callback: flushed by the prepare handle, and
   * its deadline armed on the timer. */
  assert_int_equal(acp_rpc_session_request(s, "silent", 6, "{}", 2, 50,
                                           uv_now(&c->loop), on_silent, c,
                                           NULL),
                   0);
  return 0;
}

static void test_uv_rpc_round_trip_and_timeout_over_child(void **state) {
  child_ctx c;
  acp_uv_process_options *o = NULL;
  const char *argv[] = {acp_test_self_exe(), "--helper", "rpc-server", NULL};
  (void)state;
  memset(&c, 0, sizeof(c));
  assert_int_equal(uv_loop_init(&c.loop), 0);
  assert_int_equal(acp_uv_process_options_new(&o, NULL), 0);
  assert_int_equal(acp_uv_process_options_set_argv(o, argv), 0);
  assert_int_equal(acp_uv_process_spawn(&c.p, &c.loop, o, &c, NULL, NULL), 0);
  acp_uv_process_options_free(o);
  assert_int_equal(acp_rpc_session_new(&c.s, NULL, &c, NULL, NULL), 0);
  assert_int_equal(
      acp_uv_rpc_new(&c.r, acp_uv_process_link(c.p), c.s, child_end, &c, NULL),
      0);
  /* Submitted outside any callback, before the loop runs. */
  int64_t id = -1;
  assert_int_equal(acp_rpc_session_request(c.s, "echo", 4, "{\"x\":1}", 7, 0,
                                           uv_now(&c.loop), on_echo, &c, &id),
                   0);
  assert_int_equal(id, 0);
  finish_loop(&c.loop);
  assert_int_equal(c.echo_ok, 1);
  assert_int_equal(c.timeouts, 1);
  assert_true(c.rpc_closed);
  assert_true(c.proc_closed);
  assert_int_equal(acp_rpc_session_pending(c.s), 0);
  acp_rpc_session_free(c.s);
}

/* MARK: - Pause and resume */

typedef struct pause_ctx {
  uv_loop_t loop;
  acp_uv_link *l;
  acp_uv_rpc *r;
  acp_rpc_session *s;
  uv_timer_t resume;
  int requests;
  int at_resume;
  bool was_paused;
  int end_reason;
  int ends;
  int closed;
  int closed_rpc;
} pause_ctx;

static void on_link_closed(acp_uv_link *l, void *ud) {
  (void)l;
  (*(int *)ud)++;
}

static void on_rpc_closed(acp_uv_rpc *r, void *ud) {
  (void)r;
  ((pause_ctx *)ud)->closed_rpc++;
}

static void do_resume(uv_timer_t *t) {
  pause_ctx *c = t->data;
  c->at_resume = c->requests;
  c->was_paused = acp_uv_rpc_paused(c->r);
  assert_int_equal(acp_uv_link_is_reading(c->l), 0);
  acp_uv_rpc_resume(c->r);
  uv_close((uv_handle_t *)t, NULL);
}

static int pause_on_request(acp_rpc_session *s, const acp_rpc_msg *msg,
                            void *ud) {
  pause_ctx *c = ud;
  c->requests++;
  assert_int_equal(acp_rpc_session_respond(s, msg->handle, "1", 1), 0);
  if (c->requests == 1) {
    uv_timer_start(&c->resume, do_resume, 0, 0);
    return ACP_ERR_PAUSE;
  }
  return 0;
}

static void pause_end(acp_uv_rpc *r, int reason, void *ud) {
  pause_ctx *c = ud;
  c->ends++;
  c->end_reason = reason;
  acp_uv_rpc_close(r, on_rpc_closed);
  acp_uv_link_close(c->l, ACP_UV_FOREVER, on_link_closed, &c->closed);
}

static void test_uv_rpc_pause_holds_input_until_resume(void **state) {
  pause_ctx c;
  acp_rpc_callbacks *cbs = NULL;
  int in_fd, out_fd;
  size_t n;
  (void)state;
  memset(&c, 0, sizeof(c));
  char *in_name = tmp_file("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\n"
                           "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"b\"}\n"
                           "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"c\"}\n",
                           &in_fd);
  char *out_name = tmp_file("", &out_fd);
  assert_int_equal(uv_loop_init(&c.loop), 0);
  uv_timer_init(&c.loop, &c.resume);
  c.resume.data = &c;
  assert_int_equal(acp_rpc_callbacks_new(&cbs), 0);
  acp_rpc_callbacks_set_on_request(cbs, pause_on_request);
  assert_int_equal(acp_rpc_session_new(&c.s, cbs, &c, NULL, NULL), 0);
  acp_rpc_callbacks_free(cbs);
  assert_int_equal(acp_uv_link_new_fds(&c.l, &c.loop, in_fd, out_fd, NULL), 0);
  assert_int_equal(acp_uv_rpc_new(&c.r, c.l, c.s, pause_end, &c, NULL), 0);
  finish_loop(&c.loop);
  assert_true(c.was_paused);
  assert_int_equal(c.at_resume, 1);
  assert_int_equal(c.requests, 3);
  assert_int_equal(c.ends, 1);
  assert_int_equal(c.end_reason, 0);
  assert_int_equal(c.closed, 1);
  assert_int_equal(c.closed_rpc, 1);
  const char *out = slurp(out_fd, &n);
  assert_string_equal(out, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1}\n"
                           "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":1}\n"
                           "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":1}\n");
  acp_rpc_session_free(c.s);
  close(in_fd);
  close(out_fd);
  unlink(in_name);
  unlink(out_name);
}

/* MARK: - Blocking convenience */

static int answer_ping(acp_rpc_session *s, const acp_rpc_msg *msg, void *ud) {
  (void)ud;
  return acp_rpc_session_respond(s, msg->handle, "\"pong\"", 6);
}

static int closed_response(acp_rpc_session *s, const acp_rpc_msg *msg,
                           void *ud) {
  (void)s;
  assert_true(msg->local);
  assert_int_equal(msg->error_code, ACP_RPC_CONNECTION_CLOSED);
  (*(int *)ud)++;
  return 0;
}

static void test_uv_rpc_run_fds_until_eof(void **state) {
  acp_rpc_callbacks *cbs = NULL;
  acp_rpc_session *s = NULL;
  int in_fd, out_fd;
  int closed_responses = 0;
  size_t n;
  (void)state;
  char *in_name =
      tmp_file("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n"
               "not json\n",
               &in_fd);
  char *out_name = tmp_file("", &out_fd);
  assert_int_equal(acp_rpc_callbacks_new(&cbs), 0);
  acp_rpc_callbacks_set_on_request(cbs, answer_ping);
  assert_int_equal(acp_rpc_session_new(&s, cbs, NULL, NULL, NULL), 0);
  acp_rpc_callbacks_free(cbs);
  /* Never answered: completed locally at EOF. */
  assert_int_equal(acp_rpc_session_request(s, "hello", 5, NULL, 0, 0, 0,
                                           closed_response, &closed_responses,
                                           NULL),
                   0);
  assert_int_equal(acp_uv_run_fds(s, in_fd, out_fd, ACP_UV_FOREVER), 0);
  assert_int_equal(closed_responses, 1);
  const char *out = slurp(out_fd, &n);
  assert_non_null(strstr(out, "\"method\":\"hello\""));
  assert_non_null(strstr(out, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":"
                              "\"pong\"}\n"));
  assert_non_null(strstr(out, "-32700"));
  assert_int_equal(acp_uv_run_fds(NULL, 0, 1, 0), ACP_ERR_INVALID_ARGUMENT);
  acp_rpc_session_free(s);
  close(in_fd);
  close(out_fd);
  unlink(in_name);
  unlink(out_name);
}

static void ignore_signal(uv_signal_t *h, int signum) {
  (void)h;
  (void)signum;
}

static void test_uv_rpc_run_fds_ends_on_sigterm(void **state) {
  acp_rpc_session *s = NULL;
  int p[2];
  int closed_responses = 0;
  uv_loop_t guard_loop;
  uv_signal_t guard;
  sigset_t term;
  (void)state;
  /* The child keeps signalling until it is killed, so a SIGTERM can land
   * before the runtime watches it and after it stopped. libuv puts the
   * default action back when the last watcher of a signal stops, and the
   * default action ends this process. A watcher on a loop that never runs
   * keeps libuv's handler installed around the whole call: signals outside
   * the runtime's watch are caught and dropped. */
  assert_int_equal(uv_loop_init(&guard_loop), 0);
  assert_int_equal(uv_signal_init(&guard_loop, &guard), 0);
  assert_int_equal(uv_signal_start(&guard, ignore_signal, SIGTERM), 0);
  assert_int_equal(pipe(p), 0);
  pid_t parent = getpid();
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    /* Keeps the pipe open (no EOF) and keeps asking the parent to stop. */
    close(p[0]);
    for (int i = 0; i < 1000; i++) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      kill(parent, SIGTERM);
      nanosleep(&ts, NULL);
    }
    _exit(0);
  }
  close(p[1]);
  int out = open("/dev/null", O_WRONLY);
  assert_true(out >= 0);
  assert_int_equal(acp_rpc_session_new(&s, NULL, NULL, NULL, NULL), 0);
  assert_int_equal(acp_rpc_session_request(s, "hello", 5, NULL, 0, 0, 0,
                                           closed_response, &closed_responses,
                                           NULL),
                   0);
  assert_int_equal(acp_uv_run_fds(s, p[0], out, 0), 0);
  kill(child, SIGKILL);
  assert_int_equal(waitpid(child, NULL, 0), child);
  /* No more signals are sent, but one may still be pending (valgrind
   * delivers at the next syscall): closing the guard puts SIG_DFL back.
   * Blocked, it waits while the guard goes, then SIG_IGN drops it; SIGTERM
   * stays ignored for the rest of this program, which no test here minds. */
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  assert_int_equal(sigprocmask(SIG_BLOCK, &term, NULL), 0);
  uv_close((uv_handle_t *)&guard, NULL);
  uv_run(&guard_loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&guard_loop), 0);
  signal(SIGTERM, SIG_IGN);
  assert_int_equal(sigprocmask(SIG_UNBLOCK, &term, NULL), 0);
  /* The signal acted as end of input: the pending request completed. */
  assert_int_equal(closed_responses, 1);
  assert_int_equal(acp_rpc_session_want_read(s), 0);
  acp_rpc_session_free(s);
  close(p[0]);
  close(out);
}

typedef struct sig_ctx {
  uv_timer_t keepalive;
  int signum;
} sig_ctx;

static void on_sig(acp_uv_signals *sig, int signum, void *ud) {
  sig_ctx *c = ud;
  c->signum = signum;
  acp_uv_signals_close(sig);
  acp_uv_signals_close(sig); /* idempotent */
  uv_close((uv_handle_t *)&c->keepalive, NULL);
}

static void keepalive_expired(uv_timer_t *t) {
  (void)t;
  fail_msg("no signal callback");
}

static void test_uv_signals_reports_sigint(void **state) {
  uv_loop_t loop;
  acp_uv_signals *sig = NULL;
  sig_ctx c;
  (void)state;
  memset(&c, 0, sizeof(c));
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(acp_uv_signals_new(&sig, &loop, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(sig);
  assert_int_equal(acp_uv_signals_new(&sig, &loop, on_sig, &c, NULL), 0);
  /* The watcher does not keep the loop alive; this timer does. */
  uv_timer_init(&loop, &c.keepalive);
  assert_int_equal(uv_timer_start(&c.keepalive, keepalive_expired, 600000, 0),
                   0);
  assert_int_equal(raise(SIGINT), 0);
  finish_loop(&loop);
  assert_int_equal(c.signum, SIGINT);
}

/* MARK: - Blocking reads */

/* How many of the parent's descriptors are the pipe `ino`: blocking reads
 * add one (a second, blocking open of the pipe). */
static int parent_pipe_fds(pid_t parent, ino_t ino) {
  char path[64], want[64], got[64];
  int n = 0;
  snprintf(want, sizeof(want), "pipe:[%lu]", (unsigned long)ino);
  for (int fd = 0; fd < 256; fd++) {
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)parent, fd);
    ssize_t k = readlink(path, got, sizeof(got) - 1);
    if (k <= 0)
      continue;
    got[k] = '\0';
    n += strcmp(got, want) == 0;
  }
  return n;
}

/* The parent's /proc/PID/wchan: the kernel function it sleeps in ("0"
 * while it runs, or always where the kernel hides it). */
static void parent_wchan(pid_t parent, char *w, size_t cap) {
  char path[64];
  size_t n = 0;
  snprintf(path, sizeof(path), "/proc/%d/wchan", (int)parent);
  FILE *f = fopen(path, "r");
  if (f) {
    n = fread(w, 1, cap - 1, f);
    fclose(f);
  }
  w[n] = '\0';
}

/* Whether the kernel shows wchan at all: the parent sleeps in epoll until
 * the first message, so a name shows within moments where it is shown. */
static bool wchan_shown(pid_t parent) {
  for (int i = 0; i < 300; i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    char w[64];
    parent_wchan(parent, w, sizeof(w));
    if (w[0] != '\0' && strcmp(w, "0") != 0)
      return true;
    nanosleep(&ts, NULL);
  }
  return false;
}

/* The child's side: whether the parent waits in read(2) on a pipe or a
 * unix socket (not in epoll): pipe_read (anon_pipe_read on newer kernels)
 * or unix_stream_read_generic. Where the kernel hides wchan, a pipe is
 * judged by the parent's extra, blocking descriptor of it (the test then
 * cannot tell that the read has begun yet), a socket not at all. */
static bool parent_in_read_n(pid_t parent, ino_t ino, bool sock, bool shown,
                             int fds) {
  char w[64];
  if (!shown)
    return sock || parent_pipe_fds(parent, ino) >= fds;
  parent_wchan(parent, w, sizeof(w));
  return strstr(w, sock ? "unix_stream_read" : "pipe_read") != NULL;
}

/* Polls (10 ms steps, 30 s at most) until the parent sleeps in read(2).
 * `fds`: how many descriptors of the pipe the parent holds once it has
 * reopened it (the judge where wchan is hidden). */
static bool wait_parent_blocked_n(pid_t parent, ino_t ino, bool sock,
                                  bool shown, int fds) {
  for (int i = 0; i < 3000; i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    if (parent_in_read_n(parent, ino, sock, shown, fds))
      return true;
    nanosleep(&ts, NULL);
  }
  return false;
}

/* The link of read_block_over() holds the pipe's end, its dup and the
 * reopened description. */
static bool wait_parent_blocked(pid_t parent, ino_t ino, bool sock,
                                bool shown) {
  return wait_parent_blocked_n(parent, ino, sock, shown, 3);
}

/* One request line out, one answer line back (whose text must hold
 * `want`). */
static bool child_call(int wfd, int rfd, const char *line, const char *want) {
  char buf[512];
  size_t got = 0;
  if (write(wfd, line, strlen(line)) != (ssize_t)strlen(line))
    return false;
  while (got < sizeof(buf) - 1) {
    ssize_t n = read(rfd, buf + got, sizeof(buf) - 1 - got);
    if (n <= 0)
      return false;
    got += (size_t)n;
    if (buf[got - 1] == '\n')
      break;
  }
  buf[got] = '\0';
  return strstr(buf, want) != NULL;
}

typedef struct block_ctx {
  uv_loop_t loop;
  acp_uv_link *l;
  acp_uv_rpc *r;
  acp_rpc_session *s;
  uv_prepare_t other;
  /* What block_parent_run() makes of `other`: a handle (referenced),
   * an unreferenced one, or none. */
  enum { OTHER_REF, OTHER_UNREF, OTHER_NONE } other_mode;
  uv_prepare_t fresh;
  bool fresh_init;
  uv_signal_t usr1;
  uint64_t later;
  int pings;
  int laters;
  int freshes;
  int signals;
  pid_t child;
  bool child_alive_at_signal;
  uint32_t spin_us; /* acp_uv_rpc_set_read_spin(), 0: none */
  int hold_ms;      /* a ping's handler computes this long first */
  /* acp__uv_link_spin_counts() when block_finish() closed the link. */
  unsigned long hits, misses, got;
} block_ctx;

static void on_other_prepare(uv_prepare_t *h) {
  block_ctx *c = h->data;
  uv_prepare_stop(h);
  assert_int_equal(acp_rpc_session_respond(c->s, c->later, "\"later\"", 7), 0);
  assert_int_equal(acp_uv_rpc_flush(c->r), 0);
}

static void on_fresh_prepare(uv_prepare_t *h) {
  block_ctx *c = h->data;
  uv_prepare_stop(h);
  assert_int_equal(acp_rpc_session_respond(c->s, c->later, "\"fresh\"", 7), 0);
  assert_int_equal(acp_uv_rpc_flush(c->r), 0);
}

static void busy_for(int ms);

static int block_on_request(acp_rpc_session *s, const acp_rpc_msg *msg,
                            void *ud) {
  block_ctx *c = ud;
  if (msg->method_len == 5 && memcmp(msg->method, "fresh", 5) == 0 &&
      !c->fresh_init) {
    /* Like "later", but a handle that did not exist at the last check,
     * and unreferenced: the loop's count of active handles stays. */
    c->freshes++;
    c->later = msg->handle;
    c->fresh_init = true;
    if (uv_prepare_init(&c->loop, &c->fresh) != 0)
      return ACP_ERR_SYSTEM;
    c->fresh.data = c;
    if (uv_prepare_start(&c->fresh, on_fresh_prepare) != 0)
      return ACP_ERR_SYSTEM;
    uv_unref((uv_handle_t *)&c->fresh);
    return 0;
  }
  if (msg->method_len == 5 && memcmp(msg->method, "later", 5) == 0) {
    /* Answered by another prepare handle, which this callback starts: it
     * runs only if the loop goes round again without new input. */
    c->laters++;
    c->later = msg->handle;
    return uv_prepare_start(&c->other, on_other_prepare) == 0 ? 0
                                                              : ACP_ERR_SYSTEM;
  }
  if (msg->method_len == 5 && memcmp(msg->method, "raise", 5) == 0) {
    /* The signal comes while the loop is busy in here: libuv's handler
     * leaves it in the loop's signal pipe, for the loop to find. */
    raise(SIGUSR1);
    return acp_rpc_session_respond(s, msg->handle, "\"raised\"", 8);
  }
  c->pings++;
  busy_for(c->hold_ms);
  return acp_rpc_session_respond(s, msg->handle, "\"pong\"", 6);
}

static void block_finish(block_ctx *c) {
  if (c->r == NULL)
    return;
  acp__uv_link_spin_counts(c->l, &c->hits, &c->misses, &c->got);
  uv_close((uv_handle_t *)&c->usr1, NULL);
  if (c->other_mode != OTHER_NONE)
    uv_close((uv_handle_t *)&c->other, NULL);
  if (c->fresh_init)
    uv_close((uv_handle_t *)&c->fresh, NULL);
  acp_uv_rpc_close(c->r, NULL);
  c->r = NULL;
  acp_uv_link_close(c->l, 0, NULL, NULL);
}

static void block_on_usr1(uv_signal_t *h, int signum) {
  block_ctx *c = h->data;
  (void)signum;
  c->signals++;
  /* Still running: the child holds the pipe open until it is killed, so
   * the read did not end by end of input. */
  c->child_alive_at_signal = waitpid(c->child, NULL, WNOHANG) == 0;
  block_finish(c);
}

/* The child ended its side (it failed a step): the test ends too. */
static void block_on_end(acp_uv_rpc *r, int reason, void *ud) {
  (void)r;
  (void)reason;
  block_finish(ud);
}

/* The parent's side of the tests below: a loop with a SIGUSR1 watcher and
 * a prepare handle for "later", an rpc with blocking reads over rfd (in)
 * and wfd (out), run until block_finish() closes everything. */
static void block_parent_run(block_ctx *c, int rfd, int wfd) {
  acp_rpc_callbacks *cbs = NULL;
  assert_int_equal(uv_loop_init(&c->loop), 0);
  if (c->other_mode != OTHER_NONE)
    assert_int_equal(uv_prepare_init(&c->loop, &c->other), 0);
  if (c->other_mode == OTHER_UNREF)
    uv_unref((uv_handle_t *)&c->other);
  c->other.data = c;
  assert_int_equal(uv_signal_init(&c->loop, &c->usr1), 0);
  c->usr1.data = c;
  assert_int_equal(uv_signal_start(&c->usr1, block_on_usr1, SIGUSR1), 0);
  assert_int_equal(acp_rpc_callbacks_new(&cbs), 0);
  acp_rpc_callbacks_set_on_request(cbs, block_on_request);
  assert_int_equal(acp_rpc_session_new(&c->s, cbs, c, NULL, NULL), 0);
  acp_rpc_callbacks_free(cbs);
  assert_int_equal(acp_uv_link_new_fds(&c->l, &c->loop, rfd, wfd, NULL), 0);
  assert_int_equal(acp_uv_rpc_new(&c->r, c->l, c->s, block_on_end, c, NULL), 0);
  acp_uv_rpc_set_read_block(c->r, 1);
  acp_uv_rpc_set_read_spin(c->r, c->spin_us);
  assert_int_equal(uv_run(&c->loop, UV_RUN_DEFAULT), 0);
}

/* The child's side of read_block_over() and read_block_unseen(), over
 * its ends wfd (to the parent) and rfd: two pings, then `ask` (answered
 * with `want`), the parent seen waiting in read(2) after each (`ino`: the
 * pipe or socket it reads), then SIGUSR1 to it. The pipe stays open until
 * the parent kills us (60 s at most); the exit status names the step that
 * failed. `secs`: the alarm that ends a step that never ends. */
static void block_child_script(pid_t parent, int wfd, int rfd, ino_t ino,
                               bool sock, const char *ask, const char *want,
                               unsigned secs) {
  int code = 0;
  alarm(secs);
  bool shown = wchan_shown(parent);
  /* The first message wakes the loop through epoll (the link's
   * descriptor is registered in the first wait); from then on the
   * parent waits in read(2). */
  if (!child_call(wfd, rfd,
                  "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n",
                  "\"pong\""))
    code = 2;
  else if (!wait_parent_blocked(parent, ino, sock, shown))
    code = 3;
  else if (!child_call(wfd, rfd,
                       "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n",
                       "\"pong\""))
    code = 4;
  else if (!wait_parent_blocked(parent, ino, sock, shown))
    code = 5;
  else if (!child_call(wfd, rfd, ask, want))
    code = 6;
  else if (!wait_parent_blocked(parent, ino, sock, shown))
    code = 7;
  if (code == 0)
    kill(parent, SIGUSR1);
  for (int i = 0; code == 0 && i < 600; i++) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  _exit(code);
}

/* After block_parent_run(): the child, killed by us, must have passed
 * every step (an exit status says which step failed). */
static void block_reap_child(const block_ctx *c) {
  int status = 0;
  kill(c->child, SIGKILL);
  assert_int_equal(waitpid(c->child, &status, 0), c->child);
  if (WIFEXITED(status))
    fail_msg("the child failed at step %d", WEXITSTATUS(status));
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGKILL);
}

/* With blocking reads on, a program whose one link is all it serves waits
 * in read(2) (seen from the child through /proc/PID/wchan), answers a
 * request after request from in there, lets another handle that a
 * callback started run without new input (the prepare handle started by
 * "later"), and sees a watched signal while it blocks: the signal ends the
 * read, not the child's end of the pipe. Over pipes (sock false) or
 * socketpairs. */
static void read_block_over(bool sock) {
  block_ctx c;
  int to_parent[2], to_child[2];
  memset(&c, 0, sizeof(c));
  if (sock) {
    /* What Node's child_process (libuv's UV_CREATE_PIPE) gives a child. */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, to_parent), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, to_child), 0);
  } else {
    assert_int_equal(pipe(to_parent), 0);
    assert_int_equal(pipe(to_child), 0);
  }
  pid_t parent = getpid();
  c.child = fork();
  assert_true(c.child >= 0);
  if (c.child == 0) {
    struct stat st;
    ino_t ino = fstat(to_parent[1], &st) == 0 ? st.st_ino : 0;
    close(to_parent[0]);
    close(to_child[1]);
    block_child_script(parent, to_parent[1], to_child[0], ino, sock,
                       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"later\"}\n",
                       "\"later\"", 90);
  }
  close(to_parent[1]);
  close(to_child[0]);
  block_parent_run(&c, to_parent[0], to_child[1]);
  bool alive = c.child_alive_at_signal;
  block_reap_child(&c);
  assert_int_equal(c.pings, 2);
  assert_int_equal(c.laters, 1);
  assert_int_equal(c.signals, 1);
  assert_true(alive);
  assert_int_equal(uv_loop_close(&c.loop), 0);
  acp_rpc_session_free(c.s);
  close(to_parent[0]);
  close(to_child[1]);
}

static void test_uv_rpc_read_block(void **state) {
  (void)state;
  read_block_over(false);
}

/* The same over socketpairs: the socket itself is made blocking while the
 * loop stays quiet, and non-blocking again when it does not. */
static void test_uv_rpc_read_block_socket(void **state) {
  (void)state;
  read_block_over(true);
}

/* A signal that comes while the loop runs a callback (not while it sleeps)
 * is not slept through: after answering, the parent must not block in
 * read(2) with the signal waiting in libuv's pipe. The child asks, gets
 * the answer, and then only waits for the parent to end (its signal
 * callback closes the pipe); 4: the parent stayed asleep for 20 s. */
static void test_uv_rpc_read_block_signal_in_callback(void **state) {
  block_ctx c;
  int to_parent[2], to_child[2];
  int status = 0;
  (void)state;
  memset(&c, 0, sizeof(c));
  assert_int_equal(pipe(to_parent), 0);
  assert_int_equal(pipe(to_child), 0);
  c.child = fork();
  assert_true(c.child >= 0);
  if (c.child == 0) {
    char buf[256];
    struct pollfd pf;
    close(to_parent[0]);
    close(to_child[1]);
    alarm(90);
    if (!child_call(to_parent[1], to_child[0],
                    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"raise\"}\n",
                    "\"raised\""))
      _exit(2);
    pf.fd = to_child[0];
    pf.events = POLLIN;
    for (;;) {
      pf.revents = 0;
      if (poll(&pf, 1, 20000) <= 0)
        _exit(4);
      if (read(to_child[0], buf, sizeof(buf)) <= 0)
        _exit(0);
    }
  }
  close(to_parent[1]);
  close(to_child[0]);
  block_parent_run(&c, to_parent[0], to_child[1]);
  /* The link holds duplicates: ours go too, so that the child sees the
   * end. */
  close(to_parent[0]);
  close(to_child[1]);
  assert_int_equal(waitpid(c.child, &status, 0), c.child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(c.signals, 1);
  assert_int_equal(uv_loop_close(&c.loop), 0);
  acp_rpc_session_free(c.s);
}

/* The link remembers a check that found the loop quiet and nothing that
 * could start unseen, and skips the walk over the handles while that
 * holds. Two handles that the loop's count of active handles does not
 * show (unreferenced) must still be seen when a callback starts them,
 * answering without new input: one created after that check (`fresh`:
 * the loop has no other handle but the signal watcher, so the check is
 * remembered), or one that was there, inactive (not fresh: `other`; then
 * the check is not remembered). A parent that blocked instead leaves the
 * child waiting until its alarm (status: SIGALRM, not our SIGKILL). */
static void read_block_unseen(bool fresh) {
  block_ctx c;
  int to_parent[2], to_child[2];
  const char *ask =
      fresh ? "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"fresh\"}\n"
            : "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"later\"}\n";
  memset(&c, 0, sizeof(c));
  c.other_mode = fresh ? OTHER_NONE : OTHER_UNREF;
  assert_int_equal(pipe(to_parent), 0);
  assert_int_equal(pipe(to_child), 0);
  pid_t parent = getpid();
  c.child = fork();
  assert_true(c.child >= 0);
  if (c.child == 0) {
    struct stat st;
    ino_t ino = fstat(to_parent[1], &st) == 0 ? st.st_ino : 0;
    close(to_parent[0]);
    close(to_child[1]);
    block_child_script(parent, to_parent[1], to_child[0], ino, false, ask,
                       fresh ? "\"fresh\"" : "\"later\"", 30);
  }
  close(to_parent[1]);
  close(to_child[0]);
  block_parent_run(&c, to_parent[0], to_child[1]);
  block_reap_child(&c);
  assert_int_equal(c.pings, 2);
  assert_int_equal(c.freshes, fresh ? 1 : 0);
  assert_int_equal(c.laters, fresh ? 0 : 1);
  assert_int_equal(c.signals, 1);
  assert_int_equal(uv_loop_close(&c.loop), 0);
  acp_rpc_session_free(c.s);
  close(to_parent[0]);
  close(to_child[1]);
}

static void test_uv_rpc_read_block_new_handle(void **state) {
  (void)state;
  read_block_unseen(true);
}

static void test_uv_rpc_read_block_unref_handle(void **state) {
  (void)state;
  read_block_unseen(false);
}

/* MARK: - Spinning reads before the blocking ones */

/* CPU time, not sleep: the task stays runnable for `ms`. */
static void busy_for(int ms) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do
    clock_gettime(CLOCK_MONOTONIC, &t);
  while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 <
         ms);
}

/* A spin test: the child's pings (spin_child()), the parent's spin and
 * the load checks' switch (acp__uv_spin_room_force). */
typedef struct spin_opts {
  bool sock;          /* socketpairs, not pipes */
  int n;              /* pings */
  int gap_ms;         /* the child's pause before each */
  int busy_ms;        /* the child computes after each */
  int hold_ms;        /* the parent computes before each pong */
  bool ahead;         /* the child sends one ping ahead of the pongs */
  bool signal_parent; /* SIGUSR1 to the parent after the last pong */
  int room;           /* acp__uv_spin_room_force */
  uint32_t spin_us;   /* the parent's spin */
} spin_opts;

/* The child of the spin tests: o->n pings, each after o->gap_ms, with
 * o->busy_ms of computing after each (before it reads the pong); each
 * sent when the previous pong came, or with o->ahead when the pong before
 * the previous one came (one ping always waiting for the parent). Then,
 * with o->signal_parent, SIGUSR1 to the parent and a wait for the
 * parent's end (status 4: it did not end within 20 s), else the end of
 * its pipes. Status 2: a pong that did not come. */
static void spin_child(pid_t parent, int wfd, int rfd, const spin_opts *o) {
  char line[96], buf[256];
  struct pollfd pf;
  int sent = 0;
  alarm(120);
  for (int i = 0; i < o->n; i++) {
    size_t len, got = 0;
    while (sent < o->n && sent <= i + (o->ahead ? 1 : 0)) {
      if (o->gap_ms > 0) {
        struct timespec ts = {0, (long)o->gap_ms * 1000000L};
        nanosleep(&ts, NULL);
      }
      len = (size_t)snprintf(
          line, sizeof(line),
          "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}\n", ++sent);
      if (write(wfd, line, len) != (ssize_t)len)
        _exit(2);
    }
    busy_for(o->busy_ms);
    while (got == 0 || buf[got - 1] != '\n') {
      ssize_t r = read(rfd, buf + got, sizeof(buf) - 1 - got);
      if (r <= 0 || (got += (size_t)r) >= sizeof(buf) - 1)
        _exit(2);
    }
    buf[got] = '\0';
    if (strstr(buf, "\"pong\"") == NULL)
      _exit(2);
  }
  if (!o->signal_parent)
    _exit(0);
  kill(parent, SIGUSR1);
  pf.fd = rfd;
  pf.events = POLLIN;
  for (;;) {
    pf.revents = 0;
    if (poll(&pf, 1, 20000) <= 0)
      _exit(4);
    if (read(rfd, buf, sizeof(buf)) <= 0)
      _exit(0);
  }
}

/* A parent with blocking reads and a spin before each against
 * spin_child(); every pong must have reached the child, which must end
 * well. */
static void spin_run(block_ctx *c, const spin_opts *o) {
  int to_parent[2], to_child[2], status = 0;
  memset(c, 0, sizeof(*c));
  c->other_mode = OTHER_NONE;
  c->spin_us = o->spin_us;
  c->hold_ms = o->hold_ms;
  if (o->sock) {
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, to_parent), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, to_child), 0);
  } else {
    assert_int_equal(pipe(to_parent), 0);
    assert_int_equal(pipe(to_child), 0);
  }
  pid_t parent = getpid();
  c->child = fork();
  assert_true(c->child >= 0);
  if (c->child == 0) {
    close(to_parent[0]);
    close(to_child[1]);
    spin_child(parent, to_parent[1], to_child[0], o);
  }
  close(to_parent[1]);
  close(to_child[0]);
  acp__uv_spin_room_force = o->room;
  block_parent_run(c, to_parent[0], to_child[1]);
  acp__uv_spin_room_force = 0;
  close(to_parent[0]);
  close(to_child[1]);
  assert_int_equal(waitpid(c->child, &status, 0), c->child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(c->pings, o->n);
  assert_int_equal(uv_loop_close(&c->loop), 0);
  acp_rpc_session_free(c->s);
}

/* A peer that answers at once is read by the spin (a 10 s budget: the
 * first spin cannot give up before the bytes come), and what it reads is
 * handled as the blocking read's bytes are: fifty pings, fifty pongs.
 * Over pipes (libuv's non-blocking description is polled) and over
 * sockets (MSG_DONTWAIT, the socket itself may be blocking). */
static void read_spin_delivers(bool sock) {
  block_ctx c;
  spin_opts o = {.sock = sock, .n = 50, .room = 1, .spin_us = 10000000};
  spin_run(&c, &o);
  assert_true(c.got >= 1);
}

static void test_uv_rpc_read_spin_delivers(void **state) {
  (void)state;
  read_spin_delivers(false);
}

static void test_uv_rpc_read_spin_delivers_socket(void **state) {
  (void)state;
  read_spin_delivers(true);
}

/* A peer slower than the budget (20 ms between pings, a 1 ms spin): each
 * spin misses, and the misses back the spin off, 1, 3, 7, 15 waits
 * skipped: about four spins over 22 waits, not one a wait. */
static void test_uv_rpc_read_spin_backs_off(void **state) {
  block_ctx c;
  (void)state;
  spin_opts o = {.n = 21, .gap_ms = 20, .room = 1, .spin_us = 1000};
  spin_run(&c, &o);
  assert_true(c.misses >= 1);
  assert_true(c.hits + c.misses <= 8);
}

/* No idle CPU on the machine: no spin at all, however long its budget. */
static void test_uv_rpc_read_spin_needs_room(void **state) {
  block_ctx c;
  (void)state;
  spin_opts o = {.n = 10, .room = -1, .spin_us = 10000000};
  spin_run(&c, &o);
  assert_int_equal(c.hits + c.misses + c.got, 0);
}

/* A watched signal ends a spin (a 30 s budget) at once: the parent's
 * SIGUSR1 watcher ends it while the child still waits for its pipe's end
 * (status 4 if the parent slept or spun through it for 20 s). */
static void test_uv_rpc_read_spin_signal(void **state) {
  block_ctx c;
  (void)state;
  spin_opts o = {.n = 1, .signal_parent = true, .room = 1, .spin_us = 30000000};
  spin_run(&c, &o);
  assert_int_equal(c.signals, 1);
}

/* A spin whose yield runs another task on this CPU takes a CPU somebody
 * wants, even when the bytes then come: parent and child on one CPU, the
 * child computing for 5 ms after each ping, so that the parent's yields
 * hand it the CPU. Those spins count as misses and back off (about five
 * spins over sixteen waits); taken as hits, every wait would spin on, a
 * 10 s budget each. */
static void test_uv_rpc_read_spin_crowded(void **state) {
  block_ctx c;
  cpu_set_t all, one;
  int cpu;
  (void)state;
  assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
  cpu = sched_getcpu();
  if (cpu < 0 || !CPU_ISSET(cpu, &all))
    skip(); /* cannot tell which CPU this thread may keep */
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
  spin_opts o = {.n = 16, .busy_ms = 5, .room = 2, .spin_us = 10000000};
  spin_run(&c, &o);
  assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
  assert_true(c.hits + c.misses <= 8);
  assert_true(c.misses >= 1);
}

/* Bytes the first poll finds count neither way: the read would not have
 * slept for them (on one CPU a woken peer often answers before the poll,
 * and taking that for a hit undid the back-off every turn). The parent
 * computes 50 ms on each ping while the child's next one, sent 10 ms
 * after the last pong, waits in the pipe: ten pings, at most the first
 * a hit (it may come during a spin). Counted as hits, about ten. */
static void test_uv_rpc_read_spin_first_poll(void **state) {
  block_ctx c;
  (void)state;
  spin_opts o = {.n = 10,
                 .gap_ms = 10,
                 .hold_ms = 50,
                 .ahead = true,
                 .room = 1,
                 .spin_us = 10000000};
  spin_run(&c, &o);
  assert_true(c.hits <= 3);
  assert_true(c.got >= 7);
}

/* The running count of a /proc/loadavg text. */
static void test_uv_loadavg_running(void **state) {
  (void)state;
  assert_int_equal(acp__uv_loadavg_running("0.66 0.71 0.92 1/75 17798\n"), 1);
  assert_int_equal(acp__uv_loadavg_running("0.00 0.01 0.05 12/300 5"), 12);
  assert_int_equal(acp__uv_loadavg_running("1.0 2.0 3.0 /75 1"), -1);
  assert_int_equal(acp__uv_loadavg_running("no slash here"), -1);
  assert_int_equal(acp__uv_loadavg_running(""), -1);
  assert_int_equal(acp__uv_loadavg_running("99999999999/1"), -1);
}

/* MARK: - Blocking reads in a client that spawned its agent */

/* The child of test_uv_rpc_read_block_spawned_child (this binary, run with
 * --block-child): answers the first request, starts a grandchild that
 * keeps our stdout open (30 s), names it in a notification, waits until
 * the parent sleeps in read(2) on that pipe and exits 7 without another
 * word; 2 or 3 name the step that failed. */
static int block_child_main(void) {
  pid_t parent = getppid();
  struct stat st;
  ino_t ino = fstat(1, &st) == 0 ? st.st_ino : 0;
  char line[512];
  char out[160];
  size_t got = 0;
  pid_t gc;
  int n;

  alarm(90);
  bool shown = wchan_shown(parent);
  while (got < sizeof(line) && (got == 0 || line[got - 1] != '\n')) {
    ssize_t k = read(0, line + got, sizeof(line) - got);
    if (k <= 0)
      return 2;
    got += (size_t)k;
  }
  n = snprintf(out, sizeof(out),
               "{\"jsonrpc\":\"2.0\",\"id\":0,"
               "\"result\":\"pong\"}\n");
  if (write(1, out, (size_t)n) != n)
    return 2;
  gc = fork();
  if (gc == 0) {
    struct timespec ts = {30, 0};
    nanosleep(&ts, NULL);
    _exit(0);
  }
  n = snprintf(out, sizeof(out),
               "{\"jsonrpc\":\"2.0\",\"method\":\"grandchild\","
               "\"params\":{\"pid\":%d}}\n",
               (int)gc);
  if (gc < 0 || write(1, out, (size_t)n) != n)
    return 2;
  /* The parent holds its end of our stdout and the reopened one. */
  if (!wait_parent_blocked_n(parent, ino, false, shown, 2))
    return 3;
  return 7;
}

typedef struct spawn_block_ctx {
  uv_loop_t loop;
  acp_uv_process *p;
  acp_uv_rpc *r;
  acp_rpc_session *s;
  int pongs;
  pid_t gc;
  int exits;
  int64_t exit_status;
  bool gc_alive_at_exit;
  bool proc_closed;
} spawn_block_ctx;

static int spawn_block_on_pong(acp_rpc_session *s, const acp_rpc_msg *msg,
                               void *ud) {
  spawn_block_ctx *c = ud;
  (void)s;
  assert_false(msg->local);
  assert_true(contains(msg->raw, msg->raw_len, "\"pong\""));
  c->pongs++;
  return 0;
}

static int spawn_block_on_note(acp_rpc_session *s, const acp_rpc_msg *msg,
                               void *ud) {
  spawn_block_ctx *c = ud;
  int64_t pid = 0;
  (void)s;
  assert_int_equal(
      acp_json_get_int64(acp_json_obj_get(msg->params, "pid", 3), &pid), 0);
  c->gc = (pid_t)pid;
  return 0;
}

/* Whether `pid` runs still: not gone, and not a zombie that its new
 * parent has yet to reap (kill(pid, 0) succeeds on one). */
static bool running(pid_t pid) {
  char path[64], buf[256];
  size_t n = 0;
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return false;
  n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* "PID (COMM) S ...": the state follows the last ')'. */
  const char *rp = strrchr(buf, ')');
  return rp != NULL && rp[1] == ' ' && rp[2] != '\0' && rp[2] != 'Z' &&
         rp[2] != 'X';
}

static void spawn_block_proc_closed(acp_uv_process *p, void *ud) {
  (void)p;
  ((spawn_block_ctx *)ud)->proc_closed = true;
}

static void spawn_block_on_exit(acp_uv_process *p, int64_t status, int sig,
                                void *ud) {
  spawn_block_ctx *c = ud;
  (void)sig;
  c->exits++;
  c->exit_status = status;
  /* Seen while the grandchild still holds the pipe: the read ended by
   * SIGCHLD, not by the end of the pipe. */
  c->gc_alive_at_exit = c->gc > 0 && running(c->gc);
  if (c->r) {
    acp_uv_rpc_close(c->r, NULL);
    c->r = NULL;
  }
  acp_uv_process_close(p, spawn_block_proc_closed);
}

/* A client whose loop has its agent's process handle active (a client that
 * spawned its agent: acp bench-client) waits in read(2) too: the child
 * sees its parent asleep in pipe_read, and the child's exit ends that read
 * through SIGCHLD while a grandchild keeps the pipe open (without it, the
 * exit would be seen only when the grandchild ends, 30 s later). */
static void test_uv_rpc_read_block_spawned_child(void **state) {
  spawn_block_ctx c;
  acp_uv_process_options *o = NULL;
  acp_rpc_callbacks *cbs = NULL;
  const char *argv[] = {acp_test_self_exe(), "--block-child", NULL};
  (void)state;
  memset(&c, 0, sizeof(c));
  assert_int_equal(uv_loop_init(&c.loop), 0);
  assert_int_equal(acp_uv_process_options_new(&o, NULL), 0);
  assert_int_equal(acp_uv_process_options_set_argv(o, argv), 0);
  acp_uv_process_options_set_exit_cb(o, spawn_block_on_exit);
  assert_int_equal(acp_uv_process_spawn(&c.p, &c.loop, o, &c, NULL, NULL), 0);
  acp_uv_process_options_free(o);
  assert_int_equal(acp_rpc_callbacks_new(&cbs), 0);
  acp_rpc_callbacks_set_on_notification(cbs, spawn_block_on_note);
  assert_int_equal(acp_rpc_session_new(&c.s, cbs, &c, NULL, NULL), 0);
  acp_rpc_callbacks_free(cbs);
  assert_int_equal(
      acp_uv_rpc_new(&c.r, acp_uv_process_link(c.p), c.s, NULL, &c, NULL), 0);
  acp_uv_rpc_set_read_block(c.r, 1);
  assert_int_equal(acp_rpc_session_request(c.s, "ping", 4, "{}", 2, 0,
                                           uv_now(&c.loop), spawn_block_on_pong,
                                           &c, NULL),
                   0);
  finish_loop(&c.loop);
  if (c.gc > 0)
    kill(c.gc, SIGKILL);
  assert_int_equal(c.pongs, 1);
  assert_true(c.gc > 0);
  assert_int_equal(c.exits, 1);
  /* 7: the child saw us block in read(2) (3: it never did). */
  assert_int_equal(c.exit_status, 7);
  assert_true(c.gc_alive_at_exit);
  assert_true(c.proc_closed);
  acp_rpc_session_free(c.s);
}

/* MARK: - Blocking reads in acp_mcp_run_fds_ex() */

/* The stdio MCP server's runner with read_block set: between requests the
 * server waits in read(2) on its input pipe (the child checks), answers
 * initialize and two pings, and returns 0 at the end of input. The child
 * exits 2 (a call failed) or 3 (the server never slept in read(2)). */
static void test_mcp_run_fds_ex_blocks(void **state) {
  acp_mcp_server *reg = NULL;
  acp_mcp_conn *conn = NULL;
  int to_parent[2], to_child[2];
  int status = 0;
  pid_t child;
  (void)state;
  assert_int_equal(pipe(to_parent), 0);
  assert_int_equal(pipe(to_child), 0);
  pid_t parent = getpid();
  child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    struct stat st;
    ino_t ino = fstat(to_parent[1], &st) == 0 ? st.st_ino : 0;
    alarm(90);
    bool shown = wchan_shown(parent);
    close(to_parent[0]);
    close(to_child[1]);
    if (!child_call(to_parent[1], to_child[0],
                    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
                    "\"params\":{\"protocolVersion\":\"2025-06-18\","
                    "\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
                    "\"version\":\"1\"}}}\n",
                    "\"protocolVersion\""))
      _exit(2);
    static const char done[] =
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    if (write(to_parent[1], done, sizeof(done) - 1) !=
            (ssize_t)sizeof(done) - 1 ||
        !child_call(to_parent[1], to_child[0],
                    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n",
                    "\"id\":2"))
      _exit(2);
    /* The runner holds the pipe's end, its dup and the reopened one. */
    if (!wait_parent_blocked_n(parent, ino, false, shown, 3))
      _exit(3);
    if (!child_call(to_parent[1], to_child[0],
                    "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n",
                    "\"id\":3"))
      _exit(2);
    _exit(0);
  }
  close(to_parent[1]);
  close(to_child[0]);
  assert_int_equal(acp_mcp_server_new(&reg, "t", "1", NULL, NULL), 0);
  assert_int_equal(acp_mcp_conn_new(&conn, reg, NULL), 0);
  assert_int_equal(
      acp_mcp_run_fds_ex(conn, to_parent[0], to_child[1], 1000, 0, 1), 0);
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  acp_mcp_conn_free(conn);
  acp_mcp_server_free(reg);
  close(to_parent[0]);
  close(to_child[1]);
}

static void test_uv_rpc_rejects_bad_arguments(void **state) {
  acp_uv_rpc *r = (acp_uv_rpc *)state;
  (void)state;
  assert_int_equal(acp_uv_rpc_new(&r, NULL, NULL, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(r);
  assert_int_equal(acp_uv_rpc_flush(NULL), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_uv_rpc_paused(NULL), 0);
  acp_uv_rpc_resume(NULL);
  acp_uv_rpc_close(NULL, NULL);
  acp_uv_rpc_set_read_block(NULL, 1);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--block-child") == 0)
    return block_child_main();
  acp_test_helper_main(argc, argv);
  assert_int_equal(acp_uv_ignore_sigpipe(), 0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_uv_rpc_round_trip_and_timeout_over_child),
      cmocka_unit_test(test_uv_rpc_pause_holds_input_until_resume),
      cmocka_unit_test(test_uv_rpc_run_fds_until_eof),
      cmocka_unit_test(test_uv_rpc_run_fds_ends_on_sigterm),
      cmocka_unit_test(test_uv_signals_reports_sigint),
      cmocka_unit_test(test_uv_rpc_read_block),
      cmocka_unit_test(test_uv_rpc_read_block_socket),
      cmocka_unit_test(test_uv_rpc_read_block_spawned_child),
      cmocka_unit_test(test_uv_rpc_read_block_signal_in_callback),
      cmocka_unit_test(test_uv_rpc_read_block_new_handle),
      cmocka_unit_test(test_uv_rpc_read_block_unref_handle),
      cmocka_unit_test(test_mcp_run_fds_ex_blocks),
      cmocka_unit_test(test_uv_rpc_read_spin_delivers),
      cmocka_unit_test(test_uv_rpc_read_spin_delivers_socket),
      cmocka_unit_test(test_uv_rpc_read_spin_backs_off),
      cmocka_unit_test(test_uv_rpc_read_spin_needs_room),
      cmocka_unit_test(test_uv_rpc_read_spin_signal),
      cmocka_unit_test(test_uv_rpc_read_spin_crowded),
      cmocka_unit_test(test_uv_rpc_read_spin_first_poll),
      cmocka_unit_test(test_uv_loadavg_running),
      cmocka_unit_test(test_uv_rpc_rejects_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
