/*
 * Child processes: spawn, pipes, exit reporting, the shutdown ladder,
 * process groups, stderr capture, spawn failure. The test binary
 * re-executes itself as the child (tests/support/uv_helpers.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "acp/uv.h"
#include "uv_helpers.h"

typedef struct ctx {
  uv_loop_t loop;
  acp_uv_process *p;
  char out[65536];
  size_t out_len;
  bool out_eof;
  bool exited;
  int64_t status;
  int sig;
  bool shut_done;
  bool closed;
  bool shutdown_on_ready;
  int gpid;
  /* stderr */
  int lines;
  char first_line[64];
  char last_line[64];
  char tail_at_exit[16384];
  size_t tail_at_exit_len;
} ctx;

static void on_closed(acp_uv_process *p, void *ud) {
  ctx *c = ud;
  (void)p;
  c->closed = true;
}

static void on_shutdown_done(acp_uv_process *p, void *ud) {
  ctx *c = ud;
  c->shut_done = true;
  acp_uv_process_close(p, on_closed);
}

static void on_exit_cb(acp_uv_process *p, int64_t status, int sig, void *ud) {
  ctx *c = ud;
  size_t n;
  const char *t = acp_uv_process_tail(p, &n);
  c->exited = true;
  c->status = status;
  c->sig = sig;
  if (t && n < sizeof(c->tail_at_exit)) {
    memcpy(c->tail_at_exit, t, n);
    c->tail_at_exit_len = n;
  }
}

static void on_line(acp_uv_process *p, const char *line, size_t len, void *ud) {
  ctx *c = ud;
  (void)p;
  size_t n = len < 63 ? len : 63;
  if (c->lines == 0) {
    memcpy(c->first_line, line, n);
    c->first_line[n] = '\0';
  }
  memcpy(c->last_line, line, n);
  c->last_line[n] = '\0';
  c->lines++;
}

static void on_read(acp_uv_link *l, int status, const char *data, size_t len,
                    void *ud) {
  ctx *c = ud;
  (void)l;
  if (status < 0) {
    c->out_eof = true;
    return;
  }
  assert_true(c->out_len + len < sizeof(c->out));
  memcpy(c->out + c->out_len, data, len);
  c->out_len += len;
  c->out[c->out_len] = '\0';
  if (c->shutdown_on_ready && memchr(c->out, '\n', c->out_len)) {
    c->shutdown_on_ready = false;
    if (strncmp(c->out, "ready ", 6) == 0)
      c->gpid = atoi(c->out + 6);
    assert_int_equal(acp_uv_process_shutdown(c->p, on_shutdown_done), 0);
    assert_int_equal(acp_uv_process_shutdown(c->p, on_shutdown_done),
                     ACP_ERR_INVALID_STATE);
  }
}

static acp_uv_process_options *make_opts(const char *helper, const char *arg) {
  acp_uv_process_options *o = NULL;
  const char *argv[] = {acp_test_self_exe(), "--helper", helper, arg, NULL};
  assert_int_equal(acp_uv_process_options_new(&o, NULL), 0);
  assert_int_equal(acp_uv_process_options_set_argv(o, argv), 0);
  acp_uv_process_options_set_exit_cb(o, on_exit_cb);
  return o;
}

static void spawn(ctx *c, acp_uv_process_options *o) {
  int uerr = -1;
  assert_int_equal(acp_uv_process_spawn(&c->p, &c->loop, o, c, NULL, &uerr), 0);
  assert_int_equal(uerr, 0);
  assert_non_null(c->p);
  assert_true(acp_uv_process_pid(c->p) > 0);
  acp_uv_process_options_free(o);
  assert_int_equal(
      acp_uv_link_read_start(acp_uv_process_link(c->p), on_read, c), 0);
}

static void finish_loop(ctx *c) {
  assert_int_equal(uv_run(&c->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&c->loop), 0);
}

static void ctx_init(ctx *c) {
  memset(c, 0, sizeof(*c));
  assert_int_equal(uv_loop_init(&c->loop), 0);
}

/* MARK: - Tests */

static void test_uv_process_echo_round_trip(void **state) {
  ctx c;
  (void)state;
  ctx_init(&c);
  spawn(&c, make_opts("echo-lines", NULL));
  acp_uv_link *l = acp_uv_process_link(c.p);
  assert_int_equal(acp_uv_link_write(l, "hello\n", 6), 0);
  assert_int_equal(acp_uv_link_write(l, "world\n", 6), 0);
  assert_int_equal(acp_uv_link_write(l, NULL, 0), 0);
  assert_int_equal(acp_uv_link_write(l, NULL, 1), ACP_ERR_INVALID_ARGUMENT);
  /* The ladder's first rung closes stdin after the writes are flushed. */
  assert_int_equal(acp_uv_process_shutdown(c.p, on_shutdown_done), 0);
  assert_int_equal(acp_uv_link_write(l, "late\n", 5), ACP_ERR_CLOSED);
  finish_loop(&c);
  assert_string_equal(c.out, "hello\nworld\n");
  assert_true(c.out_eof);
  assert_true(c.exited);
  assert_int_equal(c.status, 0);
  assert_int_equal(c.sig, 0);
  assert_true(c.shut_done);
  assert_true(c.closed);
}

static void on_exit_close(acp_uv_process *p, int64_t status, int sig,
                          void *ud) {
  on_exit_cb(p, status, sig, ud);
  assert_int_equal(acp_uv_process_kill(p, SIGTERM), ACP_ERR_CLOSED);
  assert_true(acp_uv_process_exited(p));
  acp_uv_process_close(p, on_closed);
}

static void test_uv_process_reports_exit_status(void **state) {
  ctx c;
  (void)state;
  ctx_init(&c);
  acp_uv_process_options *o = make_opts("exit-code", "7");
  acp_uv_process_options_set_exit_cb(o, on_exit_close);
  spawn(&c, o);
  finish_loop(&c);
  assert_true(c.exited);
  assert_int_equal(c.status, 7);
  assert_int_equal(c.sig, 0);
  assert_true(c.closed);
}

static void test_uv_process_reports_term_signal(void **state) {
  ctx c;
  char num[16];
  (void)state;
  ctx_init(&c);
  snprintf(num, sizeof(num), "%d", SIGUSR1);
  acp_uv_process_options *o = make_opts("raise-signal", num);
  acp_uv_process_options_set_exit_cb(o, on_exit_close);
  spawn(&c, o);
  finish_loop(&c);
  assert_true(c.exited);
  assert_int_equal(c.sig, SIGUSR1);
}

/* Run a helper that prints a "ready" line, then start the ladder. */
static void run_ladder(ctx *c, const char *helper, uint64_t t1, uint64_t t2) {
  ctx_init(c);
  acp_uv_process_options *o = make_opts(helper, NULL);
  acp_uv_process_options_set_grace(o, t1, t2);
  c->shutdown_on_ready = true;
  spawn(c, o);
  finish_loop(c);
  assert_true(c->exited);
  assert_true(c->shut_done);
  assert_true(c->closed);
}

static void test_uv_process_ladder_stdin_eof_suffices(void **state) {
  ctx c;
  (void)state;
  /* echo-lines prints no "ready": shut down right away instead. */
  ctx_init(&c);
  acp_uv_process_options *o = make_opts("echo-lines", NULL);
  acp_uv_process_options_set_grace(o, ACP_UV_FOREVER / 2, 10);
  spawn(&c, o);
  assert_int_equal(acp_uv_process_shutdown(c.p, on_shutdown_done), 0);
  finish_loop(&c);
  assert_int_equal(c.sig, 0);
  assert_int_equal(c.status, 0);
}

static void test_uv_process_ladder_needs_sigterm(void **state) {
  ctx c;
  (void)state;
  run_ladder(&c, "ignore-stdin-eof", 50, 60000);
  assert_int_equal(c.sig, SIGTERM);
}

static void test_uv_process_ladder_needs_sigkill(void **state) {
  ctx c;
  (void)state;
  run_ladder(&c, "trap-sigterm", 50, 50);
  assert_int_equal(c.sig, SIGKILL);
}

static void test_uv_process_ladder_kills_grandchild(void **state) {
  ctx c;
  int st = 0;
  pid_t r = 0;
  (void)state;
#ifdef __linux__
  /* Orphans are reparented to us, so we can reap and inspect them. */
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
#endif
  run_ladder(&c, "spawn-grandchild-then-hang", 50, 60000);
  assert_int_equal(c.sig, SIGTERM);
  assert_true(c.gpid > 0);
#ifdef __linux__
  /* Bounded wait for the kernel to finish killing it (not a threshold:
   * it was signalled before the leader exited). */
  for (int i = 0; i < 1000 && r == 0; i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    r = waitpid(c.gpid, &st, WNOHANG);
    if (r == 0)
      nanosleep(&ts, NULL);
  }
  assert_int_equal(r, c.gpid);
  assert_true(WIFSIGNALED(st));
  assert_int_equal(WTERMSIG(st), SIGTERM);
#endif
  assert_int_equal(kill(c.gpid, 0), -1);
  assert_int_equal(errno, ESRCH);
}

static void test_uv_process_close_kills_running_child(void **state) {
  ctx c;
  (void)state;
  ctx_init(&c);
  spawn(&c, make_opts("ignore-stdin-eof", NULL));
  int pid = acp_uv_process_pid(c.p);
  acp_uv_process_close(c.p, on_closed);
  finish_loop(&c);
  assert_true(c.closed);
  /* Reaped: no zombie left with that pid. */
  assert_int_equal(kill(pid, 0), -1);
  assert_int_equal(errno, ESRCH);
}

static void test_uv_process_stderr_tail_and_lines(void **state) {
  ctx c;
  (void)state;
  ctx_init(&c);
  acp_uv_process_options *o = make_opts("write-stderr-lines", "500");
  acp_uv_process_options_set_stderr(o, ACP_UV_STDERR_CAPTURE);
  acp_uv_process_options_set_tail_size(o, 1024);
  acp_uv_process_options_set_line_cb(o, on_line);
  acp_uv_process_options_set_exit_cb(o, on_exit_close);
  spawn(&c, o);
  finish_loop(&c);
  assert_int_equal(c.status, 3);
  /* Everything was read before the exit callback ran. */
  assert_int_equal(c.lines, 501);
  assert_string_equal(c.first_line, "line 0");
  assert_string_equal(c.last_line, "partial");
  assert_true(c.tail_at_exit_len > 0 && c.tail_at_exit_len <= 1024);
  c.tail_at_exit[c.tail_at_exit_len] = '\0';
  assert_true(strncmp(c.tail_at_exit, "line ", 5) == 0);
  assert_non_null(strstr(c.tail_at_exit, "line 499\npartial"));
  assert_int_equal(strcmp(c.tail_at_exit + c.tail_at_exit_len - 7, "partial"),
                   0);
}

static void test_uv_process_stderr_tail_small_output(void **state) {
  ctx c;
  (void)state;
  ctx_init(&c);
  acp_uv_process_options *o = make_opts("write-stderr-lines", "2");
  acp_uv_process_options_set_stderr(o, ACP_UV_STDERR_CAPTURE);
  acp_uv_process_options_set_exit_cb(o, on_exit_close);
  spawn(&c, o);
  finish_loop(&c);
  c.tail_at_exit[c.tail_at_exit_len] = '\0';
  assert_string_equal(c.tail_at_exit, "line 0\nline 1\npartial");
  assert_int_equal(c.lines, 0); /* no line callback set */
}

static void test_uv_process_stderr_ignored(void **state) {
  ctx c;
  size_t n = 99;
  (void)state;
  ctx_init(&c);
  acp_uv_process_options *o = make_opts("write-stderr-lines", "3");
  acp_uv_process_options_set_stderr(o, ACP_UV_STDERR_IGNORE);
  acp_uv_process_options_set_exit_cb(o, on_exit_close);
  spawn(&c, o);
  assert_null(acp_uv_process_tail(c.p, &n));
  assert_int_equal(n, 0);
  finish_loop(&c);
  assert_int_equal(c.status, 3);
}

static void test_uv_process_spawn_failure_is_clean(void **state) {
  uv_loop_t loop;
  acp_uv_process *p = (acp_uv_process *)&loop;
  acp_uv_process_options *o = NULL;
  const char *argv[] = {"/nonexistent/acp-no-such-program", NULL};
  int uerr = 0;
  (void)state;
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(acp_uv_process_options_new(&o, NULL), 0);
  assert_int_equal(acp_uv_process_options_set_argv(o, argv), 0);
  acp_uv_process_options_set_stderr(o, ACP_UV_STDERR_CAPTURE);
  assert_int_equal(acp_uv_process_spawn(&p, &loop, o, NULL, NULL, &uerr),
                   ACP_ERR_NOT_FOUND);
  assert_null(p);
  assert_int_equal(uerr, UV_ENOENT);
  acp_uv_process_options_free(o);
  /* The handles were closed by the library; the loop reclaims them. */
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static bool fd_open(int fd) {
  return fcntl(fd, F_GETFD) != -1;
}

/* Out of descriptors while making the child's pipes (RLIMIT_NOFILE caps
 * descriptor numbers): spawning fails with EMFILE, nothing is started,
 * and no descriptor is left open, whether the first or the second pipe
 * failed. */
static void test_uv_process_out_of_descriptors(void **state) {
  const char *argv[] = {"/bin/true", NULL};
  struct rlimit saved, lim;
  int extra;
  (void)state;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
  for (extra = 1; extra <= 3; extra += 2) {
    uv_loop_t loop;
    acp_uv_process *p = NULL;
    acp_uv_process_options *o = NULL;
    int uerr = 0, free_fds[3], nfree, fd, i, rv;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(acp_uv_process_options_new(&o, NULL), 0);
    assert_int_equal(acp_uv_process_options_set_argv(o, argv), 0);
    acp_uv_process_options_set_stderr(o, ACP_UV_STDERR_IGNORE);
    /* The lowest `extra` free descriptor numbers, and a limit just above
     * them: one is taken by the loop's reserve (below), so 1 makes the
     * first pipe fail, 3 the second. */
    for (fd = 0, nfree = 0; nfree < extra; fd++)
      if (!fd_open(fd))
        free_fds[nfree++] = fd;
    lim = saved;
    lim.rlim_cur = (rlim_t)fd;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
    rv = acp_uv_process_spawn(&p, &loop, o, NULL, NULL, &uerr);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    assert_int_equal(rv, ACP_ERR_SYSTEM);
    assert_int_equal(uerr, UV_EMFILE);
    assert_null(p);
    acp_uv_process_options_free(o);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    /* After the loop, which keeps a spare descriptor of its own (libuv's
     * reserve for EMFILE) in one of these numbers. */
    assert_int_equal(uv_loop_close(&loop), 0);
    for (i = 0; i < nfree; i++)
      assert_false(fd_open(free_fds[i]));
  }
}

static void test_uv_process_env_and_cwd(void **state) {
  ctx c;
  (void)state;
  ctx_init(&c);
  acp_uv_process_options *o = make_opts("print-env", "ACP_TEST_VAR");
  assert_int_equal(acp_uv_process_options_add_env(o, "ACP_TEST_VAR=first"), 0);
  assert_int_equal(acp_uv_process_options_add_env(o, "ACP_TEST_VAR=second"), 0);
  assert_int_equal(acp_uv_process_options_set_cwd(o, "/"), 0);
  acp_uv_process_options_set_exit_cb(o, on_exit_close);
  spawn(&c, o);
  finish_loop(&c);
  assert_string_equal(c.out, "second /\n");
}

static void test_uv_process_options_reject_bad_input(void **state) {
  acp_uv_process_options *o = NULL;
  const char *empty[] = {NULL};
  uv_loop_t loop;
  acp_uv_process *p = NULL;
  (void)state;
  assert_int_equal(acp_uv_process_options_new(NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_uv_process_options_new(&o, NULL), 0);
  assert_int_equal(acp_uv_process_options_set_argv(o, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_uv_process_options_set_argv(o, empty),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_uv_process_options_add_env(o, "NOEQUALS"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_uv_process_options_add_env(o, "=value"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(uv_loop_init(&loop), 0);
  /* No argv set. */
  assert_int_equal(acp_uv_process_spawn(&p, &loop, o, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(p);
  assert_int_equal(acp_uv_process_shutdown(NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_uv_process_close(NULL, NULL);
  acp_uv_process_options_free(o);
  acp_uv_process_options_free(NULL);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(int argc, char **argv) {
  acp_test_helper_main(argc, argv);
  assert_int_equal(acp_uv_ignore_sigpipe(), 0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_uv_process_echo_round_trip),
      cmocka_unit_test(test_uv_process_reports_exit_status),
      cmocka_unit_test(test_uv_process_reports_term_signal),
      cmocka_unit_test(test_uv_process_ladder_stdin_eof_suffices),
      cmocka_unit_test(test_uv_process_ladder_needs_sigterm),
      cmocka_unit_test(test_uv_process_ladder_needs_sigkill),
      cmocka_unit_test(test_uv_process_ladder_kills_grandchild),
      cmocka_unit_test(test_uv_process_close_kills_running_child),
      cmocka_unit_test(test_uv_process_stderr_tail_and_lines),
      cmocka_unit_test(test_uv_process_stderr_tail_small_output),
      cmocka_unit_test(test_uv_process_stderr_ignored),
      cmocka_unit_test(test_uv_process_spawn_failure_is_clean),
      cmocka_unit_test(test_uv_process_out_of_descriptors),
      cmocka_unit_test(test_uv_process_env_and_cwd),
      cmocka_unit_test(test_uv_process_options_reject_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
