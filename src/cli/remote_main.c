/*
 * acp-remote: the commands of `acp` that need libacp-remote (OpenSSL,
 * nghttp2) or the line editor (libedit). acp execs this program for them
 * (cli.h says when), so that every other acp process maps none of those
 * libraries: at rest they were most of a stdio process's RSS
 * (docs/decisions.md).
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int tls_new(acp_remote_tls **out, const char *ca, const char *cert,
                   const char *key, char *err, size_t errcap) {
  acp_remote_tls *tls = NULL;
  int rv = acp_remote_tls_new(&tls, ACP_REMOTE_TLS_CLIENT, NULL);

  if (rv == 0 && ca != NULL)
    rv = acp_remote_tls_set_ca(tls, ca);
  if (rv == 0 && cert != NULL)
    rv = acp_remote_tls_set_cert(tls, cert, key);
  if (rv != 0) {
    snprintf(err, errcap, "%s",
             tls != NULL ? acp_remote_tls_error(tls) : "out of memory");
    acp_remote_tls_free(tls);
    tls = NULL;
  }
  *out = tls;
  return rv;
}

static int handoff_link(acp_uv_link **out, uv_loop_t *loop, int control_fd,
                        acp_remote_handoff_park_cb on_park, void *user_data,
                        char *err, size_t errcap) {
  int rv =
      acp_remote_handoff_open(out, loop, control_fd, on_park, user_data, NULL);

  if (rv != 0)
    snprintf(err, errcap, "no connection adopted from descriptor %d: %s",
             control_fd, acp_strerror(rv));
  return rv;
}

static const cli_remote_ops remote_ops = {
    acp_remote_connect, acp_remote_http_version, tls_new, acp_remote_tls_free,
    handoff_link,
};

const cli_remote_ops *const cli_remote = &remote_ops;
#ifdef ACP_HAVE_LIBEDIT
const bool cli_helper_has_editor = true;
#else
const bool cli_helper_has_editor = false;
#endif

/* The commands here spawn acp itself (the client's default agent, the
 * conductor's MCP shim), which is installed beside this program. */
const char *cli_acp_path(void) {
  static char path[PATH_MAX];
  const char *self;
  const char *slash;

  if (path[0] != '\0')
    return path;
  self = cli_self_path();
  slash = strrchr(self, '/');
  if (slash == NULL || (size_t)(slash - self) + sizeof("/acp") > sizeof(path))
    snprintf(path, sizeof(path), "acp");
  else
    snprintf(path, sizeof(path), "%.*s/acp", (int)(slash - self), self);
  return path;
}

struct command {
  const char *name;
  int (*run)(int argc, char **argv);
};

static const struct command commands[] = {
    {"client", cmd_client},
    {"conductor", cmd_conductor},
    {"bench-client", cmd_bench_client},
    {"serve", cmd_acp_serve},
    /* acp agent execs this one under `acp serve --handoff` (cmd_agent.c). */
    {"agent", cmd_agent},
};

int main(int argc, char **argv) {
  size_t i;

  /* Called as `acp-remote COMMAND ARGS` by acp. */
  for (i = 0; argc >= 2 && i < sizeof(commands) / sizeof(commands[0]); i++) {
    if (strcmp(argv[1], commands[i].name) == 0)
      return commands[i].run(argc - 1, argv + 1);
  }
  fputs("usage: acp-remote client|conductor|bench-client|serve [options]\n"
        "\n"
        "The commands of acp that need the remote transports or the line\n"
        "editor; acp runs this program for them. Run them as `acp COMMAND`\n"
        "(see acp(1)).\n",
        stderr);
  return CLI_EXIT_USAGE;
}
