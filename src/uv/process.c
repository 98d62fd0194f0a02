/*
 * Child processes: spawn in a new process group with pipes on stdin and
 * stdout, optional stderr capture (tail + per-line callback), exit
 * reporting and the shutdown ladder (stdin EOF, SIGTERM, SIGKILL).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "uv_internal.h"

extern char **environ;

#define ERR_CHUNK 4096

/* MARK: - Options */

struct acp_uv_process_options {
  acp_mem mem;
  char **argv;
  size_t argc;
  char **env;
  size_t nenv;
  char *cwd;
  acp_uv_stderr_mode err_mode;
  size_t tail_size;
  acp_uv_process_exit_cb exit_cb;
  acp_uv_process_line_cb line_cb;
  uint64_t t1;
  uint64_t t2;
  int fd3; /* given to the child as its descriptor 3, or -1 */
};

static void free_strv(const acp_mem *m, char **v, size_t n) {
  if (!v)
    return;
  for (size_t i = 0; i < n; i++)
    acp__free(m, v[i]);
  acp__free(m, v);
}

int acp_uv_process_options_new(acp_uv_process_options **out,
                               const acp_mem *mem) {
  acp_mem m;
  if (!out)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  acp__mem_init(&m, mem);
  acp_uv_process_options *o = acp__calloc(&m, 1, sizeof(*o));
  if (!o)
    return ACP_ERR_NOMEM;
  o->mem = m;
  o->t1 = ACP_UV_DEFAULT_GRACE_MS;
  o->t2 = ACP_UV_DEFAULT_GRACE_MS;
  o->fd3 = -1;
  *out = o;
  return 0;
}

void acp_uv_process_options_free(acp_uv_process_options *o) {
  if (!o)
    return;
  acp_mem m = o->mem;
  free_strv(&m, o->argv, o->argc);
  free_strv(&m, o->env, o->nenv);
  acp__free(&m, o->cwd);
  acp__free(&m, o);
}

int acp_uv_process_options_set_argv(acp_uv_process_options *o,
                                    const char *const *argv) {
  size_t n = 0;
  char **v = NULL;
  int rv = ACP_ERR_NOMEM;
  if (!o || !argv || !argv[0])
    return ACP_ERR_INVALID_ARGUMENT;
  while (argv[n])
    n++;
  v = acp__calloc(&o->mem, n + 1, sizeof(char *));
  if (!v)
    goto cleanup;
  for (size_t i = 0; i < n; i++) {
    v[i] = acp__strdup(&o->mem, argv[i]);
    if (!v[i])
      goto cleanup;
  }
  free_strv(&o->mem, o->argv, o->argc);
  o->argv = v;
  o->argc = n;
  return 0;
cleanup:
  free_strv(&o->mem, v, n);
  return rv;
}

int acp_uv_process_options_add_env(acp_uv_process_options *o, const char *kv) {
  const char *eq;
  if (!o || !kv)
    return ACP_ERR_INVALID_ARGUMENT;
  eq = strchr(kv, '=');
  if (!eq || eq == kv)
    return ACP_ERR_INVALID_ARGUMENT;
  char **v = acp__realloc(&o->mem, o->env, (o->nenv + 1) * sizeof(char *));
  if (!v)
    return ACP_ERR_NOMEM;
  o->env = v;
  v[o->nenv] = acp__strdup(&o->mem, kv);
  if (!v[o->nenv])
    return ACP_ERR_NOMEM;
  o->nenv++;
  return 0;
}

int acp_uv_process_options_set_cwd(acp_uv_process_options *o, const char *cwd) {
  char *c = NULL;
  if (!o)
    return ACP_ERR_INVALID_ARGUMENT;
  if (cwd) {
    c = acp__strdup(&o->mem, cwd);
    if (!c)
      return ACP_ERR_NOMEM;
  }
  acp__free(&o->mem, o->cwd);
  o->cwd = c;
  return 0;
}

void acp_uv_process_options_set_fd3(acp_uv_process_options *o, int fd) {
  if (o)
    o->fd3 = fd < 0 ? -1 : fd;
}

void acp_uv_process_options_set_stderr(acp_uv_process_options *o,
                                       acp_uv_stderr_mode mode) {
  if (o)
    o->err_mode = mode;
}

void acp_uv_process_options_set_tail_size(acp_uv_process_options *o,
                                          size_t bytes) {
  if (o)
    o->tail_size = bytes;
}

void acp_uv_process_options_set_exit_cb(acp_uv_process_options *o,
                                        acp_uv_process_exit_cb cb) {
  if (o)
    o->exit_cb = cb;
}

void acp_uv_process_options_set_line_cb(acp_uv_process_options *o,
                                        acp_uv_process_line_cb cb) {
  if (o)
    o->line_cb = cb;
}

void acp_uv_process_options_set_grace(acp_uv_process_options *o,
                                      uint64_t stdin_grace_ms,
                                      uint64_t term_grace_ms) {
  if (!o)
    return;
  o->t1 = stdin_grace_ms;
  o->t2 = term_grace_ms;
}

/* MARK: - Process (Private) */

enum { LAD_NONE, LAD_STDIN, LAD_TERM, LAD_KILL, LAD_DONE };

struct acp_uv_process {
  acp_mem mem;
  uv_loop_t *loop;
  void *ud;
  uv_process_t proc;
  uv_pipe_t errpipe;
  uv_timer_t timer;
  acp_uv_link *link;

  acp_uv_process_exit_cb exit_cb;
  acp_uv_process_line_cb line_cb;
  uint64_t t1;
  uint64_t t2;
  bool capture;
  size_t tail_cap;

  char *tail; /* capacity 2 * tail_cap */
  size_t tail_len;
  bool tail_trimmed;
  char tail_prev; /* the byte just before tail[0] when trimmed */
  char *line;     /* capacity tail_cap */
  size_t line_len;
  char *errbuf;
  bool err_eof;

  bool proc_init; /* uv_spawn() ran (it initialises p->proc, even failing) */
  bool spawned;
  bool exited;
  int pid;
  int ladder;
  acp_uv_process_shutdown_cb shutdown_cb;

  bool closing;
  unsigned outstanding;
  acp_uv_process_close_cb close_cb;
};

static void proc_free(acp_uv_process *p) {
  acp_mem m = p->mem;
  acp__free(&m, p->tail);
  acp__free(&m, p->line);
  acp__free(&m, p->errbuf);
  acp__free(&m, p);
}

static void proc_done_one(acp_uv_process *p) {
  p->outstanding--;
  if (p->outstanding == 0) {
    if (p->close_cb)
      p->close_cb(p, p->ud);
    proc_free(p);
  }
}

static void on_proc_handle_closed(uv_handle_t *h) {
  proc_done_one(h->data);
}

static void on_proc_link_closed(acp_uv_link *l, void *ud) {
  (void)l;
  proc_done_one(ud);
}

static int kill_group(acp_uv_process *p, int sig) {
  if (p->pid <= 0)
    return ACP_ERR_SYSTEM; /* never kill(0) or kill(-1): that is us */
  if (kill(-p->pid, sig) == 0)
    return 0;
  if (errno == ESRCH && !p->exited && kill(p->pid, sig) == 0)
    return 0;
  return ACP_ERR_SYSTEM;
}

/* Stderr: tail ring and line splitting. */

static void tail_append(acp_uv_process *p, const char *d, size_t n) {
  size_t cap = p->tail_cap;
  if (n >= cap) {
    if (n > cap) {
      p->tail_prev = d[n - cap - 1];
      p->tail_trimmed = true;
    } else if (p->tail_len > 0) {
      p->tail_prev = p->tail[p->tail_len - 1];
      p->tail_trimmed = true;
    }
    memcpy(p->tail, d + n - cap, cap);
    p->tail_len = cap;
    return;
  }
  if (p->tail_len + n > 2 * cap) {
    size_t drop = p->tail_len - (cap - n);
    p->tail_prev = p->tail[drop - 1];
    memmove(p->tail, p->tail + drop, p->tail_len - drop);
    p->tail_len -= drop;
    p->tail_trimmed = true;
  }
  memcpy(p->tail + p->tail_len, d, n);
  p->tail_len += n;
}

static void emit_line(acp_uv_process *p, const char *s, size_t n) {
  if (n > 0 && s[n - 1] == '\r')
    n--;
  if (p->line_cb)
    p->line_cb(p, s, n, p->ud);
}

static void line_feed(acp_uv_process *p, const char *d, size_t n) {
  while (n > 0) {
    const char *nl = memchr(d, '\n', n);
    size_t seg = nl ? (size_t)(nl - d) : n;
    size_t room = p->tail_cap - p->line_len;
    if (seg > room) {
      /* An over-long line: deliver what fits as one piece. */
      memcpy(p->line + p->line_len, d, room);
      emit_line(p, p->line, p->tail_cap);
      p->line_len = 0;
      d += room;
      n -= room;
      continue;
    }
    if (!nl) {
      memcpy(p->line + p->line_len, d, seg);
      p->line_len += seg;
      return;
    }
    if (p->line_len == 0) {
      emit_line(p, d, seg);
    } else {
      memcpy(p->line + p->line_len, d, seg);
      emit_line(p, p->line, p->line_len + seg);
      p->line_len = 0;
    }
    d += seg + 1;
    n -= seg + 1;
  }
}

static void err_data(acp_uv_process *p, const char *d, size_t n) {
  tail_append(p, d, n);
  line_feed(p, d, n);
}

static void err_end(acp_uv_process *p) {
  if (p->err_eof)
    return;
  p->err_eof = true;
  uv_read_stop((uv_stream_t *)&p->errpipe);
  if (p->line_len > 0) {
    size_t n = p->line_len;
    p->line_len = 0;
    emit_line(p, p->line, n);
  }
}

static void on_err_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  acp_uv_process *p = h->data;
  (void)hint;
  *buf = uv_buf_init(p->errbuf, ERR_CHUNK);
}

static void on_err_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  acp_uv_process *p = s->data;
  if (n > 0)
    err_data(p, buf->base, (size_t)n);
  else if (n < 0)
    err_end(p);
}

/* Read what the dead child left in the stderr pipe, so that the tail and
 * the line callback are complete when the exit callback runs. The pipe is
 * non-blocking; a grandchild still holding it open just stops the loop at
 * EAGAIN and is read later by the normal read callback. */
static void err_drain(acp_uv_process *p) {
  uv_os_fd_t fd;
  if (!p->capture || p->err_eof ||
      uv_fileno((uv_handle_t *)&p->errpipe, &fd) != 0)
    return;
  for (;;) {
    ssize_t n = read(fd, p->errbuf, ERR_CHUNK);
    if (n > 0) {
      err_data(p, p->errbuf, (size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n == 0)
      err_end(p);
    break;
  }
}

static void ladder_finish(acp_uv_process *p) {
  uv_timer_stop(&p->timer);
  p->ladder = LAD_DONE;
  if (p->shutdown_cb)
    p->shutdown_cb(p, p->ud);
}

static void on_exit_cb(uv_process_t *h, int64_t status, int sig) {
  acp_uv_process *p = h->data;
  p->exited = true;
  if (p->closing) {
    /* Counted as outstanding by proc_close_all(). */
    (void)kill(-p->pid, SIGKILL);
    uv_close((uv_handle_t *)&p->proc, on_proc_handle_closed);
    return;
  }
  err_drain(p);
  if (p->exit_cb)
    p->exit_cb(p, status, sig, p->ud);
  if (p->ladder != LAD_NONE && p->ladder != LAD_DONE && !p->closing) {
    /* Stragglers left in the group are orphans of a stopped component. */
    (void)kill(-p->pid, SIGKILL);
    ladder_finish(p);
  }
}

static void on_ladder_timer(uv_timer_t *t) {
  acp_uv_process *p = t->data;
  if (p->exited) {
    if (p->ladder != LAD_DONE) {
      (void)kill(-p->pid, SIGKILL);
      ladder_finish(p);
    }
    return;
  }
  if (p->ladder == LAD_STDIN) {
    p->ladder = LAD_TERM;
    (void)kill_group(p, SIGTERM);
    uv_timer_start(&p->timer, on_ladder_timer, p->t2, 0);
  } else if (p->ladder == LAD_TERM) {
    p->ladder = LAD_KILL;
    (void)kill_group(p, SIGKILL);
  }
}

static void disable_inheritance(void) {
  uv_disable_stdio_inheritance();
}

/* Close everything the process holds; memory goes from the callbacks. */
static void proc_close_all(acp_uv_process *p) {
  p->closing = true;
  uv_timer_stop(&p->timer);
  /* Link, timer and the process handle (closed now or once reaped; none
   * when spawning failed before uv_spawn()). */
  p->outstanding = p->proc_init ? 3 : 2;
  acp_uv_link_close(p->link, 0, on_proc_link_closed, p);
  uv_close((uv_handle_t *)&p->timer, on_proc_handle_closed);
  if (p->capture) {
    p->outstanding++;
    uv_close((uv_handle_t *)&p->errpipe, on_proc_handle_closed);
  }
  if (!p->proc_init) {
    /* nothing to close */
  } else if (!p->spawned || p->exited) {
    uv_close((uv_handle_t *)&p->proc, on_proc_handle_closed);
  } else {
    (void)kill_group(p, SIGKILL);
  }
}

/* Our environment plus the additions; an addition replaces an inherited
 * variable of the same name and a later addition an earlier one. */
static int build_env(const acp_uv_process_options *o, const acp_mem *m,
                     char ***out) {
  size_t n = 0;
  size_t k = 0;
  *out = NULL;
  if (o->nenv == 0)
    return 0;
  while (environ && environ[n])
    n++;
  char **v = acp__calloc(m, n + o->nenv + 1, sizeof(char *));
  if (!v)
    return ACP_ERR_NOMEM;
  for (size_t i = 0; i < n; i++) {
    const char *e = environ[i];
    const char *eq = strchr(e, '=');
    size_t klen = eq ? (size_t)(eq - e) : strlen(e);
    bool replaced = false;
    for (size_t j = 0; j < o->nenv && !replaced; j++)
      replaced = strncmp(o->env[j], e, klen) == 0 && o->env[j][klen] == '=';
    if (!replaced)
      v[k++] = (char *)e;
  }
  for (size_t j = 0; j < o->nenv; j++) {
    size_t klen = (size_t)(strchr(o->env[j], '=') - o->env[j]);
    bool later = false;
    for (size_t i = j + 1; i < o->nenv && !later; i++)
      later = strncmp(o->env[i], o->env[j], klen + 1) == 0;
    if (!later)
      v[k++] = o->env[j];
  }
  *out = v;
  return 0;
}

static void close_fd(uv_file *fd) {
  if (*fd >= 0)
    (void)close(*fd);
  *fd = -1;
}

/* MARK: - Process (Public) */

int acp_uv_process_spawn(acp_uv_process **out, uv_loop_t *loop,
                         const acp_uv_process_options *opts, void *user_data,
                         const acp_mem *mem, int *uv_err_out) {
  static uv_once_t once = UV_ONCE_INIT;
  acp_uv_process *p = NULL;
  uv_pipe_t *rd = NULL;
  uv_pipe_t *wr = NULL;
  char **env = NULL;
  uv_file in_fds[2] = {-1, -1};  /* the child's stdin: [0] theirs, [1] ours */
  uv_file out_fds[2] = {-1, -1}; /* its stdout: [0] ours, [1] theirs */
  acp_mem m;
  int rv;
  int r;

  if (uv_err_out)
    *uv_err_out = 0;
  if (out)
    *out = NULL;
  if (!out || !loop || !opts || !opts->argv)
    return ACP_ERR_INVALID_ARGUMENT;
  uv_once(&once, disable_inheritance);

  acp__mem_init(&m, mem);
  p = acp__calloc(&m, 1, sizeof(*p));
  if (!p)
    return ACP_ERR_NOMEM;
  p->mem = m;
  p->loop = loop;
  p->ud = user_data;
  p->exit_cb = opts->exit_cb;
  p->line_cb = opts->line_cb;
  p->t1 = opts->t1;
  p->t2 = opts->t2;
  p->capture = opts->err_mode == ACP_UV_STDERR_CAPTURE;
  p->tail_cap = opts->tail_size ? opts->tail_size : ACP_UV_DEFAULT_TAIL;

  rv = acp__uv_link_new_child(&p->link, loop, &m, &rd, &wr);
  if (rv != 0) {
    acp__free(&m, p);
    return rv;
  }
  uv_timer_init(loop, &p->timer);
  p->timer.data = p;
  p->proc.data = p;
  if (p->capture) {
    uv_pipe_init(loop, &p->errpipe, 0);
    p->errpipe.data = p;
    size_t twice;
    if (acp__mul_overflow(p->tail_cap, 2, &twice) != 0) {
      rv = ACP_ERR_INVALID_ARGUMENT;
      goto cleanup;
    }
    p->tail = acp__malloc(&m, twice);
    p->line = acp__malloc(&m, p->tail_cap);
    p->errbuf = acp__malloc(&m, ERR_CHUNK);
    if (!p->tail || !p->line || !p->errbuf) {
      rv = ACP_ERR_NOMEM;
      goto cleanup;
    }
  }
  rv = build_env(opts, &m, &env);
  if (rv != 0)
    goto cleanup;

  /* Real pipes, not the socketpairs UV_CREATE_PIPE makes: a pipe wakes
   * its reader sooner (a blocking ping-pong here takes ~8.5 us per round
   * trip over pipes and ~11 us over socketpairs), which every message to
   * a proxy or agent pays twice; and children get the stdio a shell gives
   * them. Our ends are non-blocking, theirs blocking, all close-on-exec.
   * Pipes that carry big messages are grown by the link (link.c). */
  r = uv_pipe(in_fds, 0, UV_NONBLOCK_PIPE);
  if (r == 0)
    r = uv_pipe(out_fds, UV_NONBLOCK_PIPE, 0);
  if (r < 0) {
    if (uv_err_out)
      *uv_err_out = r;
    rv = ACP_ERR_SYSTEM;
    goto cleanup;
  }

  uv_stdio_container_t stdio[4];
  memset(stdio, 0, sizeof(stdio));
  stdio[3].flags = UV_INHERIT_FD;
  stdio[3].data.fd = opts->fd3;
  stdio[0].flags = UV_INHERIT_FD;
  stdio[0].data.fd = in_fds[0];
  stdio[1].flags = UV_INHERIT_FD;
  stdio[1].data.fd = out_fds[1];
  if (p->capture) {
    stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[2].data.stream = (uv_stream_t *)&p->errpipe;
  } else if (opts->err_mode == ACP_UV_STDERR_IGNORE) {
    stdio[2].flags = UV_IGNORE;
  } else {
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
  }

  uv_process_options_t po;
  memset(&po, 0, sizeof(po));
  po.file = opts->argv[0];
  po.args = opts->argv;
  po.env = env;
  po.cwd = opts->cwd;
  po.flags = UV_PROCESS_DETACHED;
  po.stdio_count = opts->fd3 >= 0 ? 4 : 3;
  po.stdio = stdio;
  po.exit_cb = on_exit_cb;
  r = uv_spawn(loop, &p->proc, &po);
  p->proc_init = true;
  acp__free(&m, env);
  env = NULL;
  /* The child holds its ends now (or never will): drop ours. */
  close_fd(&in_fds[0]);
  close_fd(&out_fds[1]);
  if (r < 0) {
    if (uv_err_out)
      *uv_err_out = r;
    rv = r == UV_ENOENT ? ACP_ERR_NOT_FOUND : ACP_ERR_SYSTEM;
    goto cleanup;
  }
  p->spawned = true;
  p->pid = p->proc.pid;
  /* Once opened, a descriptor belongs to its handle. A failure here (not
   * seen for a fresh pipe) kills the child in cleanup. */
  r = uv_pipe_open(wr, in_fds[1]);
  if (r == 0) {
    in_fds[1] = -1;
    r = uv_pipe_open(rd, out_fds[0]);
    if (r == 0)
      out_fds[0] = -1;
  }
  if (r < 0) {
    if (uv_err_out)
      *uv_err_out = r;
    rv = ACP_ERR_SYSTEM;
    goto cleanup;
  }
  if (p->capture)
    uv_read_start((uv_stream_t *)&p->errpipe, on_err_alloc, on_err_read);
  *out = p;
  return 0;

cleanup:
  close_fd(&in_fds[0]);
  close_fd(&in_fds[1]);
  close_fd(&out_fds[0]);
  close_fd(&out_fds[1]);
  acp__free(&m, env);
  /* uv_spawn needs uv_close even when it failed; so do the pipes. */
  proc_close_all(p);
  return rv;
}

acp_uv_link *acp_uv_process_link(const acp_uv_process *p) {
  return p ? p->link : NULL;
}

int acp_uv_process_pid(const acp_uv_process *p) {
  return p ? p->pid : 0;
}

int acp_uv_process_exited(const acp_uv_process *p) {
  return p && p->exited ? 1 : 0;
}

const char *acp_uv_process_tail(const acp_uv_process *p, size_t *len) {
  size_t n;
  const char *s;
  if (len)
    *len = 0;
  if (!p || !p->capture || p->tail_len == 0)
    return NULL;
  n = p->tail_len < p->tail_cap ? p->tail_len : p->tail_cap;
  s = p->tail + (p->tail_len - n);
  char before = s == p->tail ? p->tail_prev : s[-1];
  if ((p->tail_trimmed || s != p->tail) && before != '\n') {
    const char *nl = memchr(s, '\n', n);
    if (nl && (size_t)(nl - s) + 1 < n) {
      n -= (size_t)(nl - s) + 1;
      s = nl + 1;
    }
  }
  if (len)
    *len = n;
  return s;
}

int acp_uv_process_kill(acp_uv_process *p, int signum) {
  if (!p)
    return ACP_ERR_INVALID_ARGUMENT;
  if (p->exited || p->closing)
    return ACP_ERR_CLOSED;
  return kill_group(p, signum);
}

int acp_uv_process_shutdown(acp_uv_process *p, acp_uv_process_shutdown_cb cb) {
  if (!p)
    return ACP_ERR_INVALID_ARGUMENT;
  if (p->ladder != LAD_NONE || p->closing)
    return ACP_ERR_INVALID_STATE;
  p->shutdown_cb = cb;
  p->ladder = LAD_STDIN;
  if (p->exited) {
    uv_timer_start(&p->timer, on_ladder_timer, 0, 0);
    return 0;
  }
  (void)acp_uv_link_shutdown(p->link);
  uv_timer_start(&p->timer, on_ladder_timer, p->t1, 0);
  return 0;
}

void acp_uv_process_close(acp_uv_process *p, acp_uv_process_close_cb cb) {
  if (!p || p->closing)
    return;
  p->close_cb = cb;
  proc_close_all(p);
}
