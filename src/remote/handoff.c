/*
 * The handoff message of acp_remote_serve() (`handoff`) and its agent
 * side. On the control socket (a unix stream socketpair, the agent's
 * descriptor 3), the server sends one line
 *
 *   ACP-HANDOFF 2 PRE_LEN MAX_MESSAGE PING_MS STALL_MS RESUME\n
 *
 * with the connection's socket attached (SCM_RIGHTS) to its first byte,
 * then PRE_LEN bytes: what it read past the upgrade request. MAX_MESSAGE,
 * PING_MS and STALL_MS are the server's WebSocket settings (what a relayed
 * connection gets; 0 for the defaults, 18446744073709551615 for "never");
 * RESUME is 1 when the server keeps an agent whose connection dropped
 * (a session grace), else 0. Version 1 (acp serve before the stall
 * setting) had only PRE_LEN MAX_MESSAGE PING_MS and is still read (stall
 * default, no resume). The agent answers "ok\n" once it adopted the
 * socket; anything else, or the end of the socket, means it did not.
 *
 * With RESUME 1 the control socket stays in use: when the connection
 * drops (error or end without a close frame) the agent writes "parked\n"
 * and waits; the server then parks it (grace timer, affinity cookie) and
 * hands a reconnect presenting the cookie over with a second message of
 * the same form, answered "ok\n" again. The end of the control socket
 * while parked means nobody comes back: the agent ends.
 *
 * A text line rather than a struct: the two ends are separate programs
 * (acp serve may run another version's agent), and a stray `cat` shows
 * what it got.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "remote_int.h"
#include "util.h"

#define HEAD_MAX 160

struct acp_remote_handoff {
  acp_mem mem;
  int control; /* borrowed */
  int fd;      /* the connection's socket, -1 once adopted */
  acp_remote_adopt_options opts;
  bool resume; /* RESUME 1: the server parks a dropped connection */
  char *pre;
  size_t pre_len;
};

int acp__handoff_send_line(int control, int sock, const char *line, size_t n) {
  union {
    struct cmsghdr h;
    char b[CMSG_SPACE(sizeof(int))];
  } cm;
  struct iovec iov = {(void *)line, n};
  struct msghdr m;
  memset(&m, 0, sizeof(m));
  memset(&cm, 0, sizeof(cm));
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = cm.b;
  m.msg_controllen = sizeof(cm.b);
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &sock, sizeof(int));
  ssize_t w;
  do
    w = sendmsg(control, &m, MSG_NOSIGNAL);
  while (w < 0 && errno == EINTR);
  /* A socket of our own with nothing queued takes a line whole. */
  return w == (ssize_t)n ? 0 : ACP_ERR_SYSTEM;
}

int acp__handoff_send_head(int control, int sock, size_t pre_len,
                           const acp_remote_adopt_options *o, int resume) {
  char head[HEAD_MAX];
  int n = snprintf(head, sizeof(head), "ACP-HANDOFF 2 %zu %zu %llu %llu %d\n",
                   pre_len, o->max_message, (unsigned long long)o->ping_ms,
                   (unsigned long long)o->stall_ms, resume ? 1 : 0);
  return acp__handoff_send_line(control, sock, head, (size_t)n);
}

/* Take the descriptors a message carried: keep the first, close others. */
static void take_fds(struct msghdr *m, int *fd) {
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
      continue;
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int f;
      memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*fd < 0)
        *fd = f;
      else
        close(f);
    }
  }
}

/* Version 1 (PRE_LEN MAX_MESSAGE PING_MS) or 2 (... STALL_MS RESUME). */
static int parse_head(const char *p, acp_remote_handoff *h) {
  unsigned long long pre, max, ping, stall = 0;
  unsigned resume = 0;
  char nl = 0;
  if (strncmp(p, "ACP-HANDOFF 1 ", 14) == 0) {
    if (sscanf(p, "ACP-HANDOFF 1 %llu %llu %llu%c", &pre, &max, &ping, &nl) !=
        4)
      return ACP_ERR_PROTOCOL;
  } else if (strncmp(p, "ACP-HANDOFF 2 ", 14) == 0) {
    if (sscanf(p, "ACP-HANDOFF 2 %llu %llu %llu %llu %u%c", &pre, &max, &ping,
               &stall, &resume, &nl) != 6 ||
        resume > 1)
      return ACP_ERR_PROTOCOL;
  } else {
    return ACP_ERR_PROTOCOL;
  }
  /* sscanf's %llu takes a sign: a '-' past "ACP-HANDOFF" is not ours. */
  if (nl != '\n' || strchr(p + 12, '-') || pre > ((size_t)1 << 30) ||
      max > SIZE_MAX)
    return ACP_ERR_PROTOCOL;
  h->pre_len = (size_t)pre;
  h->opts.max_message = (size_t)max;
  h->opts.ping_ms = (uint64_t)ping;
  h->opts.stall_ms = (uint64_t)stall;
  h->resume = resume == 1;
  return 0;
}

int acp_remote_handoff_receive(acp_remote_handoff **out, int control_fd,
                               const acp_mem *mem) {
  char buf[HEAD_MAX + 1];
  size_t have = 0;
  int rv = 0;
  acp_remote_handoff *h;
  acp_mem mm;
  if (out)
    *out = NULL;
  if (!out || control_fd < 0)
    return ACP_ERR_INVALID_ARGUMENT;
  acp__mem_init(&mm, mem);
  h = acp__calloc(&mm, 1, sizeof(*h));
  if (!h)
    return ACP_ERR_NOMEM;
  h->mem = mm;
  h->control = control_fd;
  h->fd = -1;
  h->opts = (acp_remote_adopt_options)ACP_REMOTE_ADOPT_OPTIONS_INIT;
  /* The head, byte by byte up to its '\n' (what follows is the payload,
   * read whole below); the descriptor comes with its first byte. */
  while (rv == 0) {
    union {
      struct cmsghdr h;
      char b[CMSG_SPACE(sizeof(int) * 4)];
    } cm;
    struct iovec iov = {buf + have, 1};
    struct msghdr m;
    memset(&m, 0, sizeof(m));
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = cm.b;
    m.msg_controllen = sizeof(cm.b);
    ssize_t r = recvmsg(control_fd, &m, MSG_CMSG_CLOEXEC);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      rv = errno == EBADF || errno == ENOTSOCK ? ACP_ERR_INVALID_ARGUMENT
                                               : ACP_ERR_SYSTEM;
      break;
    }
    if (r == 0) {
      rv = ACP_ERR_CLOSED;
      break;
    }
    take_fds(&m, &h->fd);
    if (buf[have++] == '\n')
      break;
    if (have == HEAD_MAX)
      rv = ACP_ERR_PROTOCOL;
  }
  if (rv == 0) {
    buf[have] = '\0';
    rv = parse_head(buf, h);
  }
  if (rv == 0 && h->fd < 0)
    rv = ACP_ERR_PROTOCOL;
  if (rv == 0 && h->pre_len > 0) {
    h->pre = acp__malloc(&h->mem, h->pre_len);
    if (!h->pre)
      rv = ACP_ERR_NOMEM;
    for (size_t got = 0; rv == 0 && got < h->pre_len;) {
      ssize_t r = read(control_fd, h->pre + got, h->pre_len - got);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        rv = r == 0 ? ACP_ERR_CLOSED : ACP_ERR_SYSTEM;
      else
        got += (size_t)r;
    }
  }
  if (rv != 0) {
    acp_remote_handoff_free(h);
    return rv;
  }
  *out = h;
  return 0;
}

/* A short line to the server on the control socket. */
static int ctl_say(int control, const char *line) {
  size_t n = strlen(line);
  ssize_t w;
  do
    w = send(control, line, n, MSG_NOSIGNAL);
  while (w < 0 && errno == EINTR);
  return w == (ssize_t)n ? 0 : ACP_ERR_SYSTEM;
}

int acp_remote_handoff_adopt(acp_remote_handoff *h, uv_loop_t *loop,
                             acp_uv_link **out) {
  if (out)
    *out = NULL;
  if (!h || !loop || !out || h->fd < 0)
    return ACP_ERR_INVALID_ARGUMENT;
  int fd = h->fd;
  h->fd = -1; /* acp_remote_adopt() takes it either way */
  int rv =
      acp_remote_adopt(out, loop, fd, h->pre, h->pre_len, &h->opts, &h->mem);
  if (rv != 0)
    return rv;
  if (ctl_say(h->control, "ok\n") != 0) {
    /* The server will not let go of the socket: do not use it. */
    acp_uv_link_close(*out, 0, NULL, NULL);
    *out = NULL;
    return ACP_ERR_SYSTEM;
  }
  return 0;
}

int acp_remote_handoff_resumable(const acp_remote_handoff *h) {
  return h && h->resume ? 1 : 0;
}

void acp_remote_handoff_free(acp_remote_handoff *h) {
  if (!h)
    return;
  if (h->fd >= 0)
    close(h->fd);
  acp__free(&h->mem, h->pre);
  acp_mem m = h->mem;
  acp__free(&m, h);
}

/* MARK: - A link that outlives its connections (RESUME 1) */

/*
 * The caller's link (`front`, a user link) stays for the agent's whole
 * life; behind it is the connection of the moment (`ws`, an adopted
 * WebSocket), or none while parked. Bytes are passed through as they
 * come: the WebSocket link delivers whole messages (one line each), so a
 * drop never leaves half a client line in the front. The agent's writes
 * may end inside a line, so a new connection starts at the agent's next
 * line (as serve's relay does for a resumed agent). What the agent writes
 * while parked is dropped (nothing is replayed, as with the relay).
 *
 * Backpressure: the front is coupled to the connection like a relayed
 * agent's stdout to its socket (a client that does not read stops the
 * front's reading, so the agent takes no new requests); the front's own
 * writes are reported sent at once (the connection's queue holds them,
 * and its stall timeout cuts a client that never reads).
 */
typedef struct hlink {
  acp_mem mem;
  uv_loop_t *loop;
  int control;        /* borrowed */
  acp_uv_link *front; /* the caller's link; NULL once it closed */
  acp_uv_link *ws;    /* the connection now; NULL while parked */
  uv_poll_t poll;     /* the control socket, while parked */
  uv_timer_t kick;    /* feeds held bytes from the loop */
  bool resume;        /* the server parks a dropped connection */
  bool parked;
  bool front_reading; /* the front wants bytes */
  bool line_start;    /* the agent's last byte ended a line */
  bool skip_line;     /* drop the agent's bytes up to its next '\n' */
  acp__buf held;      /* bytes the front refused (not reading) */
  unsigned refs;      /* front open + ws closing + 2 handles */
  acp_remote_handoff_park_cb cb;
  void *ud;
} hlink;

static void hl_unref(hlink *h) {
  if (--h->refs > 0)
    return;
  acp__buf_dispose(&h->held);
  acp_mem m = h->mem;
  acp__free(&m, h);
}

static void hl_handle_closed(uv_handle_t *hd) {
  hl_unref(hd->data);
}

static void hl_ws_closed(acp_uv_link *l, void *ud) {
  (void)l;
  hl_unref(ud);
}

static void hl_close_ws(hlink *h, uint64_t flush_ms, int code) {
  acp_uv_link *ws = h->ws;
  if (!ws)
    return;
  h->ws = NULL;
  if (code)
    acp_uv_link_set_close_code(ws, code);
  acp_uv_link_close(ws, flush_ms, hl_ws_closed, h); /* holds its ref */
}

/* The front's read side ends (the connection ended for good). */
static void hl_end(hlink *h, int status) {
  uv_poll_stop(&h->poll);
  h->parked = false;
  if (h->front)
    acp_uv_link_user_end(h->front, status);
}

static void hl_ws_read(acp_uv_link *l, int status, const char *d, size_t n,
                       void *ud);

/* Hand bytes to the front, or hold them while it does not read. */
static void hl_deliver(hlink *h, const char *d, size_t n) {
  if (h->held.len == 0 && acp_uv_link_user_deliver(h->front, d, n) == 0)
    return;
  if (acp__buf_append(&h->held, d, n) != 0) {
    hl_close_ws(h, 0, 1011);
    hl_end(h, UV_ENOMEM);
    return;
  }
  if (h->ws)
    acp_uv_link_read_stop(h->ws);
}

static void hl_on_kick(uv_timer_t *t) {
  hlink *h = t->data;
  while (h->front && h->held.len > 0) {
    /* One line at a time: the front may stop reading after any. */
    const char *nl = memchr(h->held.data, '\n', h->held.len);
    size_t n = nl ? (size_t)(nl + 1 - h->held.data) : h->held.len;
    if (acp_uv_link_user_deliver(h->front, h->held.data, n) != 0)
      return;
    acp__buf_consume(&h->held, n);
  }
  if (h->front && h->ws && h->front_reading)
    acp_uv_link_read_start(h->ws, hl_ws_read, h);
}

static void hl_park(hlink *h, int status);

static void hl_ws_read(acp_uv_link *l, int status, const char *d, size_t n,
                       void *ud) {
  hlink *h = ud;
  if (l != h->ws || !h->front)
    return;
  if (status == 0) {
    hl_deliver(h, d, n);
    return;
  }
  /* Dropped, not ended (as serve's relay defines it: a close frame is
   * UV_EOF, a broken socket, a dead peer or a stall anything else). */
  if (status != UV_EOF && h->resume) {
    hl_park(h, status);
    return;
  }
  hl_end(h, status);
}

static void hl_on_control(uv_poll_t *p, int status, int events);

static void hl_park(hlink *h, int status) {
  hl_close_ws(h, 0, 0);
  if (ctl_say(h->control, "parked\n") != 0 ||
      uv_poll_start(&h->poll, UV_READABLE, hl_on_control) != 0) {
    hl_end(h, status); /* nobody to wait for */
    return;
  }
  h->parked = true;
  if (h->cb)
    h->cb(h->front, 1, h->ud);
}

static void hl_on_control(uv_poll_t *p, int status, int events) {
  hlink *h = p->data;
  acp_remote_handoff *m = NULL;
  acp_uv_link *ws = NULL;
  (void)events;
  if (!h->parked || !h->front) {
    uv_poll_stop(p);
    return;
  }
  /* The server writes a message whole at once: reading it blocks for
   * no longer than its pre-read bytes take to follow its head. */
  int rv = status < 0 ? ACP_ERR_SYSTEM
                      : acp_remote_handoff_receive(&m, h->control, &h->mem);
  if (rv == 0)
    rv = acp_remote_handoff_adopt(m, h->loop, &ws);
  if (rv != 0) {
    /* ACP_ERR_CLOSED: the server let the grace run out (or went away).
     * Anything else: it cannot resume us either way. */
    acp_remote_handoff_free(m);
    hl_end(h, rv == ACP_ERR_CLOSED ? UV_EOF : UV_EPROTO);
    return;
  }
  h->resume = m->resume;
  acp_remote_handoff_free(m);
  uv_poll_stop(p);
  h->parked = false;
  h->ws = ws;
  h->refs++;
  h->skip_line = !h->line_start;
  acp_uv_link_couple(h->front, ws, 0, 0);
  if (h->front_reading && h->held.len == 0)
    acp_uv_link_read_start(ws, hl_ws_read, h);
  else if (h->front_reading)
    uv_timer_start(&h->kick, hl_on_kick, 0, 0);
  if (h->cb)
    h->cb(h->front, 0, h->ud);
}

static int hl_op_write(acp_uv_link *l, const char *d, size_t n, void *ud) {
  hlink *h = ud;
  const char *p = d;
  size_t len = n;
  if (h->ws && h->skip_line) {
    /* The previous connection got part of this line. */
    const char *nl = memchr(p, '\n', len);
    if (nl) {
      h->skip_line = false;
      len -= (size_t)(nl + 1 - p);
      p = nl + 1;
    } else {
      len = 0;
    }
  }
  h->line_start = d[n - 1] == '\n';
  /* A failed write (the connection is ending) is told by its read side. */
  if (h->ws && len > 0)
    (void)acp_uv_link_write(h->ws, p, len);
  acp_uv_link_user_written(l, n);
  return 0;
}

static void hl_op_read_changed(acp_uv_link *l, int reading, void *ud) {
  hlink *h = ud;
  (void)l;
  h->front_reading = reading != 0;
  if (!h->ws)
    return;
  if (!reading) {
    acp_uv_link_read_stop(h->ws);
  } else if (h->held.len > 0) {
    /* From the loop, not from inside the caller's read_start. */
    uv_timer_start(&h->kick, hl_on_kick, 0, 0);
  } else {
    acp_uv_link_read_start(h->ws, hl_ws_read, h);
  }
}

static void hl_op_shutdown(acp_uv_link *l, void *ud) {
  hlink *h = ud;
  if (h->ws) {
    acp_uv_link_set_close_code(h->ws, acp_uv_link_close_code(l));
    acp_uv_link_shutdown(h->ws);
  }
}

static void hl_op_close(acp_uv_link *l, void *ud) {
  hlink *h = ud;
  /* The caller's close code (1001 for an agent told to stop) goes to the
   * client with the connection's close frame. */
  hl_close_ws(h, 1000, acp_uv_link_close_code(l));
  h->front = NULL;
  h->parked = false;
  uv_close((uv_handle_t *)&h->poll, hl_handle_closed);
  uv_close((uv_handle_t *)&h->kick, hl_handle_closed);
  hl_unref(h);
}

static const acp_uv_link_ops hl_ops = {hl_op_write, hl_op_read_changed,
                                       hl_op_shutdown, hl_op_close};

int acp_remote_handoff_open(acp_uv_link **out, uv_loop_t *loop, int control_fd,
                            acp_remote_handoff_park_cb cb, void *user_data,
                            const acp_mem *mem) {
  acp_remote_handoff *m = NULL;
  acp_uv_link *ws = NULL;
  hlink *h;
  int rv;
  if (out)
    *out = NULL;
  if (!out || !loop || control_fd < 0)
    return ACP_ERR_INVALID_ARGUMENT;
  rv = acp_remote_handoff_receive(&m, control_fd, mem);
  if (rv != 0)
    return rv;
  if (!m->resume) {
    /* Nothing to outlive: the connection's own link, no layer. */
    rv = acp_remote_handoff_adopt(m, loop, out);
    acp_remote_handoff_free(m);
    return rv;
  }
  h = acp__calloc(&m->mem, 1, sizeof(*h));
  if (!h) {
    acp_remote_handoff_free(m);
    return ACP_ERR_NOMEM;
  }
  h->mem = m->mem;
  h->loop = loop;
  h->control = control_fd;
  h->resume = true;
  h->line_start = true;
  h->cb = cb;
  h->ud = user_data;
  acp__buf_init(&h->held, &h->mem, SIZE_MAX);
  if (uv_poll_init(loop, &h->poll, control_fd) != 0) {
    acp_remote_handoff_free(m);
    acp__free(&h->mem, h);
    return ACP_ERR_SYSTEM;
  }
  h->poll.data = h;
  /* uv_poll_init() made it non-blocking; a message's payload is read
   * right after its head, waiting for it (it follows at once). */
  int fl = fcntl(control_fd, F_GETFL);
  if (fl >= 0)
    (void)fcntl(control_fd, F_SETFL, fl & ~O_NONBLOCK);
  uv_timer_init(loop, &h->kick);
  h->kick.data = h;
  h->refs = 3; /* the front, the two handles */
  rv = acp_uv_link_new_user(&h->front, loop, &hl_ops, h, &h->mem);
  if (rv == 0)
    rv = acp_remote_handoff_adopt(m, loop, &ws);
  acp_remote_handoff_free(m);
  if (rv != 0) {
    if (h->front) {
      acp_uv_link_close(h->front, 0, NULL, NULL); /* frees h */
    } else {
      h->refs = 2;
      uv_close((uv_handle_t *)&h->poll, hl_handle_closed);
      uv_close((uv_handle_t *)&h->kick, hl_handle_closed);
    }
    return rv;
  }
  h->ws = ws;
  h->refs++;
  acp_uv_link_couple(h->front, ws, 0, 0);
  *out = h->front;
  return 0;
}
