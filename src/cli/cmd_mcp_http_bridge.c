/*
 * `acp mcp http-bridge --socket PATH --listen-fd FD`: the helper a
 * conductor runs for `--mcp-bridge http` (see docs/conductor.md,
 * "Bridging"). It lives in acp-mcp because it needs the HTTP stack, which
 * the conductor's program does not load.
 *
 * The conductor binds 127.0.0.1:0 itself and passes the listening socket
 * as FD, so the port is in the rewritten declarations before we run. Our
 * stdin is a control pipe: "+TOKEN" makes a bearer token valid, "-TOKEN"
 * revokes it; its end is our end. Every Streamable HTTP session (opened by
 * an initialize whose `Authorization: Bearer TOKEN` is valid) becomes one
 * connection to the conductor's unix socket PATH, exactly as `acp
 * mcp-shim` makes one: the token as the first line, then one JSON-RPC
 * message per line each way. The conductor checks the token again and
 * relays the lines as mcp messages to the component that offers the
 * server.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acp/http.h"
#include "acp/ndjson.h"
#include "cli.h"

#define SUB "mcp http-bridge"
#define TOKEN_LEN ACP_UV_BRIDGE_TOKEN_LEN

static const char bridge_usage[] =
    "usage: acp mcp http-bridge --socket PATH --listen-fd FD\n"
    "\n"
    "Serve MCP Streamable HTTP on the listening socket FD and relay each\n"
    "session to an ACP conductor's MCP bridge at the unix socket PATH.\n"
    "Bearer tokens are made valid (+TOKEN) and revoked (-TOKEN) by lines on\n"
    "stdin; the end of stdin ends the bridge. Run by `acp conductor\n"
    "--mcp-bridge http`; not meant to be run by hand.\n";

typedef struct hconn hconn;

typedef struct bridge {
  uv_loop_t loop;
  acp_http_server *srv;
  const char *sock;
  uv_poll_t ctl;
  bool ctl_open;
  acp_ndjson ctl_lines; /* frames the control pipe */
  char (*tokens)[TOKEN_LEN + 1];
  size_t ntokens;
  hconn *conns;
  bool ending;
} bridge;

/* One HTTP session and its connection to the conductor. */
struct hconn {
  bridge *b;
  hconn *next;
  acp_http_relay_session *s; /* NULL once the session is gone */
  uv_pipe_t pipe;
  uv_connect_t connect;
  acp_ndjson in; /* frames what the conductor sends */
  bool closing;
};

typedef struct wreq {
  uv_write_t req;
  char data[];
} wreq;

/* MARK: - Tokens (the control pipe) */

static bool token_valid(const bridge *b, const char *t, size_t n) {
  size_t i, j;
  if (n != TOKEN_LEN)
    return false;
  for (i = 0; i < b->ntokens; i++) {
    unsigned char diff = 0;
    for (j = 0; j < TOKEN_LEN; j++)
      diff |= (unsigned char)(b->tokens[i][j] ^ t[j]);
    if (diff == 0)
      return true;
  }
  return false;
}

static void ctl_line(bridge *b, const char *line, size_t n) {
  size_t i;
  int valid;
  const char *tok;
  if (acp_uv_bridge_ctl_parse(line, n, &valid, &tok) != 0)
    return;
  if (valid && !token_valid(b, tok, TOKEN_LEN)) {
    void *nt = realloc(b->tokens, (b->ntokens + 1) * sizeof(*b->tokens));
    if (nt == NULL)
      return;
    b->tokens = nt;
    memcpy(b->tokens[b->ntokens], tok, TOKEN_LEN);
    b->tokens[b->ntokens][TOKEN_LEN] = '\0';
    b->ntokens++;
  } else if (!valid) {
    for (i = 0; i < b->ntokens; i++)
      if (memcmp(b->tokens[i], tok, TOKEN_LEN) == 0) {
        memcpy(b->tokens[i], b->tokens[--b->ntokens], sizeof(*b->tokens));
        break;
      }
  }
}

static void bridge_end(bridge *b);

/* Read what the control pipe has now (non-blocking). Also called before
 * refusing a token: the conductor writes "+TOKEN" before the declaration
 * leaves it, but the agent's request may be seen first. */
static void ctl_read(bridge *b) {
  for (;;) {
    char buf[256];
    ssize_t r = read(0, buf, sizeof(buf));
    size_t i = 0;
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
      bridge_end(b);
      return;
    }
    if (r < 0)
      return;
    /* A line over the cap is no token: the framer drops it. */
    while (i < (size_t)r) {
      const char *line;
      size_t n, used;
      int rv = acp_ndjson_next(&b->ctl_lines, buf + i, (size_t)r - i, &used,
                               &line, &n);
      i += used;
      if (rv == ACP_NDJSON_NEED_MORE)
        break;
      if (rv == ACP_NDJSON_LINE)
        ctl_line(b, line, n);
    }
  }
}

static void on_ctl(uv_poll_t *p, int status, int events) {
  (void)status;
  (void)events;
  ctl_read(p->data);
}

/* MARK: - Connections to the conductor */

static void conn_on_close(uv_handle_t *h) {
  hconn *k = h->data;
  acp_ndjson_dispose(&k->in);
  free(k);
}

/* End a connection; end its HTTP session unless that is what ended. */
static void conn_close(hconn *k) {
  hconn **pp;
  if (k->closing)
    return;
  k->closing = true;
  for (pp = &k->b->conns; *pp != NULL; pp = &(*pp)->next)
    if (*pp == k) {
      *pp = k->next;
      break;
    }
  if (k->s != NULL) {
    acp_http_relay_session *s = k->s;
    k->s = NULL;
    acp_http_relay_session_set_user_data(s, NULL);
    acp_http_relay_session_end(s);
  }
  uv_close((uv_handle_t *)&k->pipe, conn_on_close);
}

static void conn_on_write(uv_write_t *req, int status) {
  (void)status;
  free(req);
}

static int conn_write(hconn *k, const char *d, size_t n) {
  wreq *w;
  uv_buf_t buf;
  if (k->closing)
    return -1;
  w = malloc(sizeof(*w) + n + 1);
  if (w == NULL)
    return -1;
  memcpy(w->data, d, n);
  w->data[n] = '\n';
  buf = uv_buf_init(w->data, (unsigned)(n + 1));
  if (uv_write(&w->req, (uv_stream_t *)&k->pipe, &buf, 1, conn_on_write) != 0) {
    free(w);
    return -1;
  }
  return 0;
}

static void conn_alloc(uv_handle_t *h, size_t sz, uv_buf_t *buf) {
  static char rbuf[65536];
  (void)h;
  (void)sz;
  buf->base = rbuf;
  buf->len = sizeof(rbuf);
}

static void conn_line(hconn *k, const char *line, size_t n) {
  if (k->s != NULL && acp_http_relay_deliver(k->s, line, n) == ACP_ERR_NOMEM)
    conn_close(k);
}

static void conn_on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  hconn *k = st->data;
  const char *d = buf->base;
  size_t len = nread > 0 ? (size_t)nread : 0;
  if (nread < 0) {
    conn_close(k); /* the conductor ended the connection */
    return;
  }
  while (len > 0 && !k->closing) {
    const char *line;
    size_t n, used;
    int rv = acp_ndjson_next(&k->in, d, len, &used, &line, &n);
    d += used;
    len -= used;
    if (rv == ACP_NDJSON_NEED_MORE)
      break;
    if (rv == ACP_NDJSON_LINE)
      conn_line(k, line, n);
    else {
      /* The conductor is ours: a line over the cap, or no memory for one,
       * means the connection cannot go on as it should. */
      conn_close(k);
      return;
    }
  }
}

static void conn_on_connect(uv_connect_t *req, int status) {
  hconn *k = req->data;
  if (k->closing)
    return;
  if (status != 0 ||
      uv_read_start((uv_stream_t *)&k->pipe, conn_alloc, conn_on_read) != 0) {
    fprintf(stderr, "acp " SUB ": cannot reach the conductor at %s: %s\n",
            k->b->sock, status != 0 ? uv_strerror(status) : "read failed");
    conn_close(k);
  }
}

/* MARK: - Relay callbacks */

static int relay_open(acp_http_relay_session *s, const char *authorization,
                      void *ud) {
  bridge *b = ud;
  const char *tok;
  hconn *k;
  if (b->ending || authorization == NULL ||
      strncmp(authorization, "Bearer ", 7) != 0)
    return ACP_ERR_INVALID_ARGUMENT;
  tok = authorization + 7;
  if (!token_valid(b, tok, strlen(tok))) {
    ctl_read(b);
    if (b->ending || !token_valid(b, tok, strlen(tok)))
      return ACP_ERR_INVALID_ARGUMENT;
  }
  k = calloc(1, sizeof(*k));
  if (k == NULL)
    return ACP_ERR_NOMEM;
  k->b = b;
  k->s = s;
  acp_ndjson_init(&k->in, 0, NULL);
  uv_pipe_init(&b->loop, &k->pipe, 0);
  k->pipe.data = k;
  k->connect.data = k;
  k->next = b->conns;
  b->conns = k;
  acp_http_relay_session_set_user_data(s, k);
  /* Writes queue until the connection is made; the token goes first. */
  if (acp_uv_bridge_connect(&k->pipe, &k->connect, b->sock, tok,
                            conn_on_connect) != 0) {
    k->s = NULL; /* refused: the server makes no session */
    conn_close(k);
    return ACP_ERR_NOMEM;
  }
  return 0;
}

static void relay_message(acp_http_relay_session *s, const char *msg,
                          size_t len, void *ud) {
  hconn *k = acp_http_relay_session_get_user_data(s);
  (void)ud;
  if (k != NULL && conn_write(k, msg, len) != 0)
    conn_close(k);
}

static void relay_closed(acp_http_relay_session *s, void *ud) {
  hconn *k = acp_http_relay_session_get_user_data(s);
  (void)ud;
  if (k != NULL) {
    k->s = NULL; /* the session is gone already */
    conn_close(k);
  }
}

/* MARK: - Main */

static void bridge_end(bridge *b) {
  if (b->ending)
    return;
  b->ending = true;
  if (b->ctl_open) {
    b->ctl_open = false;
    uv_poll_stop(&b->ctl);
    uv_close((uv_handle_t *)&b->ctl, NULL);
  }
  /* Closing the server ends every session (relay_closed closes its
   * connection). */
  acp_http_server_close(b->srv, NULL, NULL);
  b->srv = NULL;
  while (b->conns != NULL)
    conn_close(b->conns);
}

int cmd_mcp_http_bridge(int argc, char **argv) {
  static const acp_http_relay_callbacks cbs = {relay_open, relay_message,
                                               relay_closed};
  acp_http_server_options *o = NULL;
  bridge b;
  const char *v;
  long fd = -1;
  int i, ok = 0, rv;

  memset(&b, 0, sizeof(b));
  acp_ndjson_init(&b.ctl_lines, 2 * TOKEN_LEN, NULL);
  for (i = 1; i < argc; i++) {
    ok = 0;
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(bridge_usage, stdout);
      acp_ndjson_dispose(&b.ctl_lines);
      return CLI_EXIT_OK;
    } else if ((v = cli_opt_value(argc, argv, &i, "--socket", &ok)) != NULL) {
      b.sock = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--listen-fd", &ok)) !=
               NULL) {
      char *end;
      fd = strtol(v, &end, 10);
      if (*end != '\0' || fd < 3 || fd > 65535)
        fd = -2;
    } else if (ok == 0) {
      cli_err(SUB, "unknown argument '%s'", argv[i]);
      ok = -1;
    }
    if (ok < 0)
      break;
  }
  if (ok < 0 || b.sock == NULL || fd < 0) {
    if (ok >= 0)
      cli_err(SUB, fd == -2 ? "--listen-fd: expected a descriptor >= 3"
                            : "--socket and --listen-fd are required");
    fputs(bridge_usage, stderr);
    if (fd >= 3)
      close((int)fd);
    acp_ndjson_dispose(&b.ctl_lines);
    return CLI_EXIT_USAGE;
  }
  (void)acp_uv_ignore_sigpipe();
  if (uv_loop_init(&b.loop) != 0) {
    close((int)fd);
    acp_ndjson_dispose(&b.ctl_lines);
    return CLI_EXIT_FAILURE;
  }
  rv = acp_http_server_options_new(&o, NULL);
  if (rv == 0) {
    acp_http_server_options_set_listen_fd(o, (int)fd);
    fd = -1; /* the server owns it from here */
    rv = acp_http_server_new_relay(&b.srv, &b.loop, &cbs, &b, o, NULL);
  }
  acp_http_server_options_free(o);
  if (fd >= 0)
    close((int)fd);
  if (rv == 0) {
    (void)fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    rv = uv_poll_init(&b.loop, &b.ctl, 0) == 0 ? 0 : ACP_ERR_SYSTEM;
  }
  if (rv == 0) {
    b.ctl_open = true;
    b.ctl.data = &b;
    if (uv_poll_start(&b.ctl, UV_READABLE, on_ctl) != 0)
      rv = ACP_ERR_SYSTEM;
  }
  if (rv != 0) {
    cli_err(SUB, "cannot start: %s", acp_strerror(rv));
    bridge_end(&b);
  }
  uv_run(&b.loop, UV_RUN_DEFAULT);
  (void)uv_loop_close(&b.loop);
  free(b.tokens);
  acp_ndjson_dispose(&b.ctl_lines);
  return rv == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}
