/*
 * bench_io.h: the blocking I/O of the floor programs (mcp_null_server,
 * acp_null_agent, relay). Header only: they are single files built without
 * the library (relay by `cc` in bench/run-conductor.sh), and each wants
 * nothing between it and read(2)/write(2).
 */
#ifndef ACP_BENCH_IO_H
#define ACP_BENCH_IO_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* All n bytes at p to fd, across short writes and EINTR: 0, or -1. */
static inline int bench_write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/*
 * Read standard input into buf (cap bytes) with blocking reads and hand
 * every complete line to answer(line, end), end at its line feed. Returns
 * 0 at the end of input, 1 when answer() returns nonzero or a line does
 * not fit in buf (said on stderr under the name prog).
 */
static inline int bench_serve_lines(char *buf, size_t cap, const char *prog,
                                    int (*answer)(const char *, const char *)) {
  size_t len = 0;
  for (;;) {
    ssize_t r = read(0, buf + len, cap - len);
    const char *p = buf, *nl, *stop;
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return 0;
    /* Lines end in the bytes just read: the search starts there. */
    stop = buf + len + (size_t)r;
    for (const char *from = buf + len;
         (nl = memchr(from, '\n', (size_t)(stop - from))) != NULL; from = p) {
      if (answer(p, nl) != 0)
        return 1;
      p = nl + 1;
    }
    len = (size_t)(stop - p);
    memmove(buf, p, len);
    if (len == cap) {
      fprintf(stderr, "%s: line longer than %zu bytes\n", prog, cap);
      return 1;
    }
  }
}

#endif
