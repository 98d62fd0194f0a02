/*
 * relay: the physical floor of a conductor hop. `relay CMD [ARGS...]` runs
 * CMD with pipes on its stdin and stdout and copies whole lines between
 * them without parsing: our stdin -> CMD's stdin, CMD's stdout -> our
 * stdout. Bytes are written out up to the last newline read; a partial line
 * waits for its end. Chain relays (`relay relay relay agent`) to place it
 * as many times as a chain has hops. Built by bench/run-conductor.sh:
 *   cc -O2 -o relay bench/relay.c
 */
#define _GNU_SOURCE /* memrchr */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_io.h"

#define CHUNK (256 * 1024)

typedef struct dir {
  int in, out;
  char *buf;
  size_t len, cap;
  int open;
} dir;

/* Read what is available; write out every complete line. */
static int pump(dir *d) {
  ssize_t n;
  char *nl;
  size_t keep;

  if (d->cap - d->len < CHUNK) {
    size_t nc = d->cap ? d->cap * 2 : 2 * CHUNK;
    char *nb = realloc(d->buf, nc);
    if (nb == NULL)
      return -1;
    d->buf = nb;
    d->cap = nc;
  }
  n = read(d->in, d->buf + d->len, d->cap - d->len);
  if (n < 0)
    return errno == EINTR ? 0 : -1;
  if (n == 0)
    return -1;
  nl = memrchr(d->buf + d->len, '\n', (size_t)n);
  d->len += (size_t)n;
  if (nl == NULL)
    return 0;
  keep = d->len - (size_t)(nl + 1 - d->buf);
  if (bench_write_all(d->out, d->buf, d->len - keep) < 0)
    return -1;
  memmove(d->buf, nl + 1, keep);
  d->len = keep;
  return 0;
}

int main(int argc, char **argv) {
  int to_child[2], from_child[2];
  pid_t pid;
  dir up, down;
  int status = 0;

  if (argc < 2) {
    fputs("usage: relay CMD [ARGS...]\n", stderr);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  if (pipe(to_child) != 0 || pipe(from_child) != 0)
    return 1;
  pid = fork();
  if (pid < 0)
    return 1;
  if (pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    close(to_child[0]);
    close(to_child[1]);
    close(from_child[0]);
    close(from_child[1]);
    execvp(argv[1], argv + 1);
    perror("relay: exec");
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  memset(&up, 0, sizeof(up));
  memset(&down, 0, sizeof(down));
  up.in = 0;
  up.out = to_child[1];
  up.open = 1;
  down.in = from_child[0];
  down.out = 1;
  down.open = 1;
  while (down.open) {
    struct pollfd fds[2];
    int nf = 0, iu = -1, id;
    if (up.open) {
      fds[nf].fd = up.in;
      fds[nf].events = POLLIN;
      iu = nf++;
    }
    fds[nf].fd = down.in;
    fds[nf].events = POLLIN;
    id = nf++;
    if (poll(fds, (nfds_t)nf, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (iu >= 0 && fds[iu].revents && pump(&up) < 0) {
      up.open = 0;
      close(up.out); /* the child sees end of input */
    }
    if (fds[id].revents && pump(&down) < 0)
      down.open = 0;
  }
  if (up.open)
    close(up.out);
  waitpid(pid, &status, 0);
  free(up.buf);
  free(down.buf);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
