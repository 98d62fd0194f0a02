/*
 * Helper behaviours for runtime tests (see uv_helpers.h). Plain POSIX: the
 * helpers must not depend on the code under test.
 */
#include "uv_helpers.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      _exit(99);
    }
    p += w;
    n -= (size_t)w;
  }
}

static void read_to_eof(void) {
  char buf[4096];
  for (;;) {
    ssize_t n = read(0, buf, sizeof(buf));
    if (n == 0 || (n < 0 && errno != EINTR))
      return;
  }
}

static void hang(void) {
  for (;;)
    pause();
}

static void rpc_server(void) {
  char buf[65536];
  size_t len = 0;
  for (;;) {
    ssize_t n = read(0, buf + len, sizeof(buf) - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    len += (size_t)n;
    char *nl;
    while ((nl = memchr(buf, '\n', len)) != NULL) {
      *nl = '\0';
      const char *id = strstr(buf, "\"id\":");
      if (id && strstr(buf, "\"method\":\"echo\"")) {
        id += 5;
        size_t idlen = strcspn(id, ",}");
        char out[512];
        int k = snprintf(out, sizeof(out),
                         "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"result\":"
                         "{\"echo\":true}}\n",
                         (int)idlen, id);
        write_all(1, out, (size_t)k);
      }
      size_t used = (size_t)(nl - buf) + 1;
      memmove(buf, nl + 1, len - used);
      len -= used;
    }
    if (len == sizeof(buf))
      len = 0;
  }
}

void acp_test_helper_main(int argc, char **argv) {
  if (argc < 3 || strcmp(argv[1], "--helper") != 0)
    return;
  const char *name = argv[2];
  const char *arg = argc > 3 ? argv[3] : "0";
  if (strcmp(name, "echo-lines") == 0) {
    char buf[4096];
    for (;;) {
      ssize_t n = read(0, buf, sizeof(buf));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      write_all(1, buf, (size_t)n);
    }
    exit(0);
  }
  if (strcmp(name, "exit-code") == 0)
    exit(atoi(arg));
  if (strcmp(name, "raise-signal") == 0) {
    signal(atoi(arg), SIG_DFL);
    kill(getpid(), atoi(arg));
    hang();
  }
  if (strcmp(name, "ignore-stdin-eof") == 0) {
    write_all(1, "ready\n", 6);
    read_to_eof();
    hang();
  }
  if (strcmp(name, "trap-sigterm") == 0) {
    signal(SIGTERM, SIG_IGN);
    write_all(1, "ready\n", 6);
    read_to_eof();
    hang();
  }
  if (strcmp(name, "spawn-grandchild-then-hang") == 0) {
    pid_t g = fork();
    if (g == 0) {
      close(0);
      close(1);
      hang();
    }
    char out[64];
    int k = snprintf(out, sizeof(out), "ready %d\n", (int)g);
    write_all(1, out, (size_t)k);
    read_to_eof();
    hang();
  }
  if (strcmp(name, "write-stderr-lines") == 0) {
    int n = atoi(arg);
    for (int i = 0; i < n; i++) {
      char out[64];
      int k = snprintf(out, sizeof(out), "line %d\n", i);
      write_all(2, out, (size_t)k);
    }
    write_all(2, "partial", 7);
    exit(3);
  }
  if (strcmp(name, "flood-stdout") == 0) {
    size_t total = (size_t)strtoull(arg, NULL, 10);
    static char chunk[65536];
    size_t done = 0;
    while (done < total) {
      size_t n = total - done < sizeof(chunk) ? total - done : sizeof(chunk);
      for (size_t i = 0; i < n; i++)
        chunk[i] = (char)((done + i) % 251);
      write_all(1, chunk, n);
      done += n;
    }
    exit(0);
  }
  if (strcmp(name, "print-env") == 0) {
    char cwd[4096];
    const char *v = getenv(arg);
    if (!getcwd(cwd, sizeof(cwd)))
      strcpy(cwd, "?");
    char out[8192];
    int k = snprintf(out, sizeof(out), "%s %s\n", v ? v : "(unset)", cwd);
    write_all(1, out, (size_t)k);
    exit(0);
  }
  if (strcmp(name, "rpc-server") == 0) {
    rpc_server();
    exit(0);
  }
  fprintf(stderr, "unknown helper %s\n", name);
  exit(98);
}

const char *acp_test_self_exe(void) {
  static char path[4096];
  if (path[0] == '\0') {
    ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
    if (n < 0)
      n = 0;
    path[n] = '\0';
  }
  return path;
}
