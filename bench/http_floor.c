/*
 * http_floor: the floor of the MCP Streamable HTTP benchmark
 * (bench/run-mcp.sh). A minimal HTTP/1.1 responder: one thread, one epoll loop
 * (as our server: libmicrohttpd in epoll mode driven by one libuv loop),
 * keep-alive, and for every request (any method, any path) once its headers and
 * its Content-Length body are in, the same fixed answer: 200, Content-Type
 * application/json, and the body read from FILE (the bytes our server
 * answered to the bench's tools/call). It parses nothing but the end of the
 * headers and Content-Length: what the sockets, the wake-ups and HTTP's
 * framing cost, so ours/floor says how much of a request is our own work.
 *
 * Usage: http_floor --port PORT --body FILE   (listens on 127.0.0.1 only;
 * runs until killed). A measuring tool, not a server: no chunked bodies, no
 * limits beyond a 16 KiB request.
 */
#define _GNU_SOURCE /* memmem, strncasecmp, accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define REQ_MAX 16384

typedef struct {
  int fd;
  size_t in_len;
  char in[REQ_MAX];
  char *out; /* answers not yet written */
  size_t out_len, out_off, out_cap;
  int want_out; /* EPOLLOUT is in the set */
} conn;

static char *answer;
static size_t answer_len;
static int ep;

static void drop(conn *c) {
  close(c->fd); /* also removes it from the epoll set */
  free(c->out);
  free(c);
}

/* The length of the first whole request in c->in, 0 if it is not all in
 * yet, -1 if it cannot be served. */
static long request_len(const conn *c) {
  const char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
  const char *p;
  long body = 0;

  if (end == NULL)
    return c->in_len >= REQ_MAX ? -1 : 0;
  for (p = c->in; p < end; p++) {
    if (*p == '\n' && strncasecmp(p + 1, "content-length:", 15) == 0) {
      body = strtol(p + 16, NULL, 10);
      break;
    }
  }
  if (body < 0 || (end + 4 - c->in) + body > REQ_MAX)
    return -1;
  if ((size_t)(end + 4 - c->in) + (size_t)body > c->in_len)
    return 0;
  return (long)(end + 4 - c->in) + body;
}

static int queue_answer(conn *c) {
  if (c->out_len + answer_len > c->out_cap) {
    size_t cap = (c->out_len + answer_len) * 2;
    char *n = realloc(c->out, cap);
    if (n == NULL)
      return -1;
    c->out = n;
    c->out_cap = cap;
  }
  memcpy(c->out + c->out_len, answer, answer_len);
  c->out_len += answer_len;
  return 0;
}

/* Write what is queued; EPOLLOUT is asked for only while some is left. */
static int flush(conn *c) {
  struct epoll_event ev;
  int want_out;

  while (c->out_off < c->out_len) {
    ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    if (w <= 0)
      return -1;
    c->out_off += (size_t)w;
  }
  want_out = c->out_off < c->out_len;
  if (!want_out)
    c->out_off = c->out_len = 0;
  /* Change the epoll set only when it must change: no syscall per answer. */
  if (want_out == c->want_out)
    return 0;
  c->want_out = want_out;
  ev.events = EPOLLIN | (want_out ? EPOLLOUT : 0);
  ev.data.ptr = c;
  return epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static int on_readable(conn *c) {
  for (;;) {
    ssize_t n = read(c->fd, c->in + c->in_len, REQ_MAX - c->in_len);
    long len;
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    if (n <= 0)
      return -1;
    c->in_len += (size_t)n;
    /* Answer every whole request in (wrk may pipeline). */
    while ((len = request_len(c)) > 0) {
      if (queue_answer(c) != 0)
        return -1;
      memmove(c->in, c->in + len, c->in_len - (size_t)len);
      c->in_len -= (size_t)len;
    }
    if (len < 0)
      return -1;
  }
  return flush(c);
}

static int load_answer(const char *path) {
  static char body[1 << 20];
  FILE *f = fopen(path, "rb");
  size_t n;
  int h;

  if (f == NULL)
    return -1;
  n = fread(body, 1, sizeof(body), f);
  fclose(f);
  answer = malloc(n + 256);
  if (answer == NULL)
    return -1;
  h = snprintf(answer, 256,
               "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
               "Content-Length: %zu\r\n\r\n",
               n);
  memcpy(answer + h, body, n);
  answer_len = (size_t)h + n;
  return 0;
}

int main(int argc, char **argv) {
  struct sockaddr_in sa;
  struct epoll_event ev, evs[64];
  const char *body = NULL;
  int port = 0, lfd, one = 1, i;

  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--port") == 0)
      port = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--body") == 0)
      body = argv[i + 1];
    else
      break;
  }
  if (i != argc || port <= 0 || body == NULL) {
    fprintf(stderr, "usage: http_floor --port PORT --body FILE\n");
    return 2;
  }
  if (load_answer(body) != 0) {
    fprintf(stderr, "http_floor: cannot read %s\n", body);
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);
  lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons((unsigned short)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
      listen(lfd, 1024) != 0) {
    perror("http_floor: listen");
    return 1;
  }
  ep = epoll_create1(0);
  ev.events = EPOLLIN;
  ev.data.ptr = NULL; /* the listener */
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  for (;;) {
    int n = epoll_wait(ep, evs, 64, -1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      perror("http_floor: epoll_wait");
      return 1;
    }
    for (i = 0; i < n; i++) {
      conn *c = evs[i].data.ptr;
      if (c == NULL) {
        int fd;
        while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          c = calloc(1, sizeof(*c));
          if (c == NULL) {
            close(fd);
            continue;
          }
          c->fd = fd;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          ev.events = EPOLLIN;
          ev.data.ptr = c;
          if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
            drop(c);
        }
        continue;
      }
      if ((evs[i].events & (EPOLLERR | EPOLLHUP)) != 0 &&
          (evs[i].events & EPOLLIN) == 0) {
        drop(c);
        continue;
      }
      if ((evs[i].events & EPOLLIN) ? on_readable(c) != 0 : flush(c) != 0)
        drop(c);
    }
  }
}
