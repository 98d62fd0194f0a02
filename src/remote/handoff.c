/*
 * The handoff message of acp_remote_serve() (`handoff`) and its agent
 * side. On the control socket (a unix stream socketpair, the agent's
 * descriptor 3), the server sends one line
 *
 *   ACP-HANDOFF 1 PRE_LEN MAX_MESSAGE PING_MS\n
 *
 * with the connection's socket attached (SCM_RIGHTS) to its first byte,
 * then PRE_LEN bytes: what it read past the upgrade request. The agent
 * answers "ok\n" once it adopted the socket; anything else, or the end
 * of the socket, means it did not. A text line rather than a struct: the
 * two ends are separate programs (acp serve may run another version's
 * agent), and a stray `cat` shows what it got.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "remote_int.h"
#include "util.h"

#define HEAD_MAX 128

struct acp_remote_handoff {
  acp_mem mem;
  int control; /* borrowed */
  int fd;      /* the connection's socket, -1 once adopted */
  acp_remote_adopt_options opts;
  char *pre;
  size_t pre_len;
};

int acp__handoff_send_head(int control, int sock, size_t pre_len,
                           size_t max_message, uint64_t ping_ms) {
  char head[HEAD_MAX];
  int n = snprintf(head, sizeof(head), "ACP-HANDOFF 1 %zu %zu %llu\n", pre_len,
                   max_message, (unsigned long long)ping_ms);
  union {
    struct cmsghdr h;
    char b[CMSG_SPACE(sizeof(int))];
  } cm;
  struct iovec iov = {head, (size_t)n};
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
  /* A fresh socket of our own takes a line whole. */
  return w == n ? 0 : ACP_ERR_SYSTEM;
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

static int parse_head(const char *p, acp_remote_handoff *h) {
  unsigned long long pre, max, ping;
  char nl = 0;
  if (sscanf(p, "ACP-HANDOFF 1 %llu %llu %llu%c", &pre, &max, &ping, &nl) !=
          4 ||
      nl != '\n' || pre > ((size_t)1 << 30) || max > SIZE_MAX)
    return ACP_ERR_PROTOCOL;
  h->pre_len = (size_t)pre;
  h->opts.max_message = (size_t)max;
  h->opts.ping_ms = (uint64_t)ping;
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

int acp_remote_handoff_adopt(acp_remote_handoff *h, uv_loop_t *loop,
                             acp_uv_link **out) {
  static const char ok[] = "ok\n";
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
  ssize_t w;
  do
    w = send(h->control, ok, sizeof(ok) - 1, MSG_NOSIGNAL);
  while (w < 0 && errno == EINTR);
  if (w != (ssize_t)sizeof(ok) - 1) {
    /* The server will not let go of the socket: do not use it. */
    acp_uv_link_close(*out, 0, NULL, NULL);
    *out = NULL;
    return ACP_ERR_SYSTEM;
  }
  return 0;
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
