/*
 * `acp mcp-shim SOCKET TOKEN`: the stdio MCP server a conductor puts in an
 * agent's session when it bridges an MCP-over-ACP server (see
 * docs/conductor.md, "Bridging"). It connects to the conductor's private
 * unix socket, sends TOKEN and a newline, then copies bytes both ways:
 * stdin -> socket, socket -> stdout. It exits when either side ends.
 * Faster path (the default): the token goes with our stdin and stdout
 * attached (SCM_RIGHTS); the conductor then reads and writes the agent's
 * pipes itself and we only wait for the control connection to end.
 * ACP_MCP_SHIM_RELAY=1 forces the relay. Plain POSIX (poll), no libuv: it
 * is spawned once per MCP connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli.h"

static const char shim_usage[] =
    "usage: acp mcp-shim SOCKET TOKEN\n"
    "\n"
    "Relay an MCP stdio connection to an ACP conductor's MCP bridge: connect\n"
    "to the unix socket SOCKET, send TOKEN as the first line, then copy\n"
    "stdin to the socket and the socket to stdout until either ends.\n"
    "Written into session/new by `acp conductor`; not meant to be run by "
    "hand.\n";

/* Send "TOKEN\n" with fds 0 and 1 attached. 0 or -1. */
static int send_token_fds(int fd, const char *token) {
  char line[160];
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

int cmd_mcp_shim(int argc, char **argv) {
  struct sockaddr_un sa;
  struct pollfd pf[2];
  char buf[65536];
  int fd;
  bool in_open = true;
  const char *relay;

  if (argc >= 2 &&
      (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
    fputs(shim_usage, stdout);
    return CLI_EXIT_OK;
  }
  if (argc != 3) {
    fputs(shim_usage, stderr);
    return CLI_EXIT_USAGE;
  }
  if (strlen(argv[1]) >= sizeof(sa.sun_path)) {
    cli_err("mcp-shim", "socket path too long");
    return CLI_EXIT_USAGE;
  }
  signal(SIGPIPE, SIG_IGN);
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, argv[1], strlen(argv[1]));
  fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    cli_err("mcp-shim", "cannot connect to %s: %s", argv[1], strerror(errno));
    if (fd >= 0)
      close(fd);
    return CLI_EXIT_FAILURE;
  }
  relay = getenv("ACP_MCP_SHIM_RELAY");
  if ((relay == NULL || strcmp(relay, "1") != 0) &&
      send_token_fds(fd, argv[2]) == 0) {
    /* The conductor has our stdio now: drop our copies (so the agent sees
     * the end when the conductor closes them) and wait for its end. */
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
    close(fd);
    return CLI_EXIT_OK;
  }
  if (write_all(fd, argv[2], strlen(argv[2])) != 0 ||
      write_all(fd, "\n", 1) != 0) {
    close(fd);
    return CLI_EXIT_FAILURE;
  }
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
      if (r <= 0) {
        /* The agent closed our stdin: end of the MCP connection. */
        break;
      }
      if (write_all(fd, buf, (size_t)r) != 0)
        break;
    }
  }
  close(fd);
  return CLI_EXIT_OK;
}
