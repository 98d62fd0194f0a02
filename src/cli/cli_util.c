/*
 * Helpers shared by the acp and acp-mcp programs.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acp/mcp.h"
#include "cli.h"

const char *cli_self_path(void) {
  static char path[PATH_MAX];
  ssize_t n;

  if (path[0] != '\0')
    return path;
  n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) {
    strcpy(path, "acp");
    return path;
  }
  path[n] = '\0';
  return path;
}

int cli_exec_beside(const char *prog, int argc, char **argv) {
  char path[PATH_MAX];
  const char *self = cli_self_path();
  const char *slash = strrchr(self, '/');
  size_t dir = slash != NULL ? (size_t)(slash - self) : 0;
  char **args;
  int err;
  int i;

  if (slash == NULL || dir + 1 + strlen(prog) + 1 > sizeof(path))
    snprintf(path, sizeof(path), "%s", prog);
  else
    snprintf(path, sizeof(path), "%.*s/%s", (int)dir, self, prog);
  args = calloc((size_t)argc + 2, sizeof(*args));
  if (args == NULL) {
    fprintf(stderr, "acp %s: out of memory\n", argv[0]);
    return CLI_EXIT_FAILURE;
  }
  args[0] = path;
  for (i = 0; i < argc; i++)
    args[i + 1] = argv[i];
  execv(path, args);
  err = errno;
  /* Not beside us (an uninstalled copy?): try PATH. The reason printed is
   * the first one: the program beside us is the one that should be. */
  args[0] = (char *)prog;
  execvp(prog, args);
  fprintf(stderr, "acp %s: cannot run %s: %s\n", argv[0], path, strerror(err));
  free(args);
  return CLI_EXIT_FAILURE;
}

const char *cli_opt_value(int argc, char **argv, int *i, const char *name,
                          int *ok) {
  const char *arg = argv[*i];
  size_t n = strlen(name);

  *ok = 0;
  if (strncmp(arg, name, n) != 0)
    return NULL;
  if (arg[n] == '=') {
    *ok = 1;
    return arg + n + 1;
  }
  if (arg[n] != '\0')
    return NULL;
  if (*i + 1 >= argc) {
    fprintf(stderr, "acp: option %s needs a value\n", name);
    *ok = -1;
    return NULL;
  }
  *ok = 1;
  (*i)++;
  return argv[*i];
}

int cli_opt_uint(const char *sub, const char *opt, const char *v,
                 unsigned long long min, unsigned long long max,
                 unsigned long long *out) {
  unsigned long long n = 0;
  const char *p = v;

  /* By hand rather than strtoull: that one takes a sign, leading spaces
   * and wraps "-1" to the largest value. */
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (n > (ULLONG_MAX - d) / 10) {
      p = v; /* overflow: reported as not a number in range */
      break;
    }
    n = n * 10 + d;
  }
  if (p == v || *p != '\0' || n < min || n > max) {
    cli_err(sub, "%s: expected a number %llu..%llu, not '%s'", opt, min, max,
            v);
    return -1;
  }
  *out = n;
  return 0;
}

uint64_t cli_fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 1099511628211ULL;
  }
  return h;
}

void cli_err(const char *sub, const char *fmt, ...) {
  va_list ap;

  fprintf(stderr, "acp %s: ", sub);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

int cli_mcp_echo(acp_mcp_call *call, const acp_json_val *args,
                 const char *bad_message) {
  const acp_json_val *m = acp_json_obj_getz(args, "message");
  const char *s;
  size_t n;

  if (acp_json_type_of(m) != ACP_JSON_STRING ||
      acp_json_doc_str(acp_mcp_call_doc(call), m, &s, &n) != 0)
    return acp_mcp_call_respond_text(call, bad_message, strlen(bad_message),
                                     true);
  return acp_mcp_call_respond_text(call, s, n, false);
}
