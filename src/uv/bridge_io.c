/*
 * The MCP bridge's handshakes (acp/uv.h, "MCP bridge handshakes"): the
 * shim, the conductor's side of its descriptor passing, the HTTP helper's
 * control lines and its connection to the conductor.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "acp/uv.h"
#include "util.h"

/* MARK: - Shim */

/* Send "TOKEN\n" with fds 0 and 1 attached. 0 or -1. */
static int send_token_fds(int fd, const char *token) {
  char line[ACP_UV_BRIDGE_TOKEN_LEN + 2];
  struct iovec iov;
  struct msghdr mh;
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(2 * sizeof(int))];
  } u;
  struct cmsghdr *cm;
  int fds[2] = {0, 1};
  size_t n = strlen(token);
  ssize_t w;

  if (n + 1 > sizeof(line))
    return -1;
  memcpy(line, token, n);
  line[n++] = '\n';
  memset(&mh, 0, sizeof(mh));
  memset(&u, 0, sizeof(u));
  iov.iov_base = line;
  iov.iov_len = n;
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = u.buf;
  mh.msg_controllen = sizeof(u.buf);
  cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(fds));
  memcpy(CMSG_DATA(cm), fds, sizeof(fds));
  do
    w = sendmsg(fd, &mh, 0);
  while (w < 0 && errno == EINTR);
  return w == (ssize_t)n ? 0 : -1;
}

static int write_all(int fd, const char *d, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, d, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    d += w;
    n -= (size_t)w;
  }
  return 0;
}

/* The conductor has our stdio now: drop our copies (so that the agent sees
 * the end when the conductor closes them) and wait for its end. */
static void wait_for_end(int fd) {
  char buf[4096];
  int nul = open("/dev/null", O_RDWR);

  if (nul >= 0) {
    dup2(nul, 0);
    dup2(nul, 1);
    if (nul > 1)
      close(nul);
  }
  for (;;) {
    ssize_t r = read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
  }
}

/* Copy stdin to the socket and the socket to stdout until either ends. */
static void relay(int fd) {
  static char buf[65536];
  struct pollfd pf[2];
  bool in_open = true;

  for (;;) {
    int n;
    pf[0].fd = in_open ? 0 : -1;
    pf[0].events = POLLIN;
    pf[1].fd = fd;
    pf[1].events = POLLIN;
    n = poll(pf, 2, -1);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (pf[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t r = read(fd, buf, sizeof(buf));
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0 || write_all(1, buf, (size_t)r) != 0)
        break; /* the conductor closed: the MCP server is gone */
    }
    if (in_open && (pf[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t r = read(0, buf, sizeof(buf));
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        break; /* the agent closed our stdin: end of the MCP connection */
      if (write_all(fd, buf, (size_t)r) != 0)
        break;
    }
  }
}

int acp_uv_bridge_shim_run(const char *socket_path, const char *token,
                           int relay_only) {
  struct sockaddr_un sa;
  int fd, err;

  if (socket_path == NULL || token == NULL ||
      strlen(socket_path) >= sizeof(sa.sun_path))
    return ACP_ERR_INVALID_ARGUMENT;
  (void)acp_uv_ignore_sigpipe();
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, socket_path, strlen(socket_path));
  fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    err = errno;
    if (fd >= 0)
      close(fd);
    errno = err;
    return ACP_ERR_SYSTEM;
  }
  if (!relay_only && send_token_fds(fd, token) == 0) {
    wait_for_end(fd);
  } else {
    if (write_all(fd, token, strlen(token)) != 0 ||
        write_all(fd, "\n", 1) != 0) {
      err = errno;
      close(fd);
      errno = err;
      return ACP_ERR_SYSTEM;
    }
    relay(fd);
  }
  close(fd);
  return 0;
}

/* MARK: - Conductor */

int acp_uv_bridge_take_fds(uv_loop_t *loop, uv_pipe_t *control, uv_pipe_t *rd,
                           uv_pipe_t *wr) {
  if (uv_pipe_pending_count(control) != 2)
    return 0;
  uv_pipe_init(loop, rd, 0);
  uv_pipe_init(loop, wr, 0);
  if (uv_accept((uv_stream_t *)control, (uv_stream_t *)rd) != 0 ||
      uv_accept((uv_stream_t *)control, (uv_stream_t *)wr) != 0)
    return ACP_ERR_SYSTEM;
  return 1;
}

/* MARK: - HTTP helper */

int acp_uv_bridge_ctl_format(char *out, size_t cap, int valid,
                             const char *token) {
  if (out == NULL || token == NULL ||
      strlen(token) != ACP_UV_BRIDGE_TOKEN_LEN ||
      cap < ACP_UV_BRIDGE_TOKEN_LEN + 3)
    return ACP_ERR_INVALID_ARGUMENT;
  out[0] = valid ? '+' : '-';
  memcpy(out + 1, token, ACP_UV_BRIDGE_TOKEN_LEN);
  out[ACP_UV_BRIDGE_TOKEN_LEN + 1] = '\n';
  out[ACP_UV_BRIDGE_TOKEN_LEN + 2] = '\0';
  return ACP_UV_BRIDGE_TOKEN_LEN + 2;
}

int acp_uv_bridge_ctl_parse(const char *line, size_t len, int *valid,
                            const char **token) {
  if (line == NULL || valid == NULL || token == NULL ||
      len != ACP_UV_BRIDGE_TOKEN_LEN + 1 || (line[0] != '+' && line[0] != '-'))
    return ACP_ERR_PARSE;
  *valid = line[0] == '+';
  *token = line + 1;
  return 0;
}

typedef struct token_write {
  uv_write_t req;
  char line[ACP_UV_BRIDGE_TOKEN_LEN + 2];
} token_write;

static void on_token_written(uv_write_t *req, int status) {
  (void)status;
  free(req);
}

int acp_uv_bridge_connect(uv_pipe_t *pipe, uv_connect_t *req,
                          const char *socket_path, const char *token,
                          uv_connect_cb cb) {
  token_write *w;
  uv_buf_t b;
  size_t n;

  if (pipe == NULL || req == NULL || socket_path == NULL || token == NULL ||
      (n = strlen(token)) != ACP_UV_BRIDGE_TOKEN_LEN)
    return ACP_ERR_INVALID_ARGUMENT;
  w = malloc(sizeof(*w));
  if (w == NULL)
    return ACP_ERR_NOMEM;
  memcpy(w->line, token, n);
  w->line[n] = '\n';
  uv_pipe_connect(req, pipe, socket_path, cb);
  b = uv_buf_init(w->line, (unsigned)(n + 1));
  /* Queued behind the connection: the token goes first. */
  if (uv_write(&w->req, (uv_stream_t *)pipe, &b, 1, on_token_written) != 0) {
    free(w);
    return ACP_ERR_SYSTEM;
  }
  return 0;
}
