/*
 * `acp mcp`: an MCP server (stdio or HTTP) and a command-line MCP client
 * (stdio, Streamable HTTP, legacy HTTP+SSE).
 */
#include "cli.h"
#include "mcp_everything.h"
#include "mcp_workers.h"

#include "acp/http.h"
#include "acp/json.h"
#include "acp/mcp.h"
#include "acp/uv.h"

#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SUB "mcp"

/* Exit statuses of the client verbs (documented in --help and acp(1)). */
enum { MCP_EXIT_TOOL_ERROR = 3 };

static const char usage_text[] =
    "usage: acp mcp serve [--http ADDR:PORT [--worker-id NAME] [--workers N]\n"
    "                      [--sse-keepalive MS] [--drain-timeout MS]\n"
    "                      | --stdio [--read-spin-us N] [--no-read-block]]\n"
    "                     [--everything] [AUTH OPTIONS]\n"
    "       acp mcp tools|resources|prompts [--json] [OPTIONS]\n"
    "                (--url URL | --stdio CMD ARGS...)\n"
    "       acp mcp call|read|get [--json] [--task] [ELICIT] [OPTIONS]\n"
    "                (--url URL | --stdio CMD ARGS... --) NAME [key=value...]\n"
    "       acp mcp relay --url URL [--header 'N: V']... [--sse|--streamable]\n"
    "       acp mcp login URL [--timeout SECONDS] | acp mcp logout URL\n"
    "\n"
    "serve: an MCP server on stdin/stdout (default) or over HTTP (Streamable\n"
    "HTTP at /mcp, legacy HTTP+SSE at /sse and /message), on 127.0.0.1 unless\n"
    "ADDR says otherwise; ADDR:PORT may be just PORT (0 picks a free port; "
    "the\n"
    "URL is printed on stderr). Without --everything it serves a small set:\n"
    "tools echo {message}, add {a, b} and ping (pings the client, 10 s\n"
    "timeout), resource acp://readme, prompt greet {name}. --everything\n"
    "serves the MCP conformance fixture set. Both transports speak the\n"
    "stateful revisions (initialize: 2024-11-05 .. 2025-11-25, a session)\n"
    "and 2026-07-28 (version in each request's _meta, no session) at once.\n"
    "--worker-id NAME (1-32 of A-Z a-z 0-9 _) names this process in its\n"
    "session ids (NAME-<32 hex>) and in an X-Acp-Worker answer header, so a\n"
    "proxy in front of several workers routes each session to its worker\n"
    "(examples/deploy/nginx.conf).\n"
    "--workers N (1-64) runs N worker processes on the same port (each its\n"
    "own socket, SO_REUSEPORT: the kernel spreads new connections) under a\n"
    "supervisor that restarts a worker that dies (backoff 100 ms .. 5 s,\n"
    "logged) and forwards SIGINT/SIGTERM; the workers are named NAME1..NAMEN\n"
    "(default w1..wN). For 2026-07-28 (stateless) clients: a 2025 session\n"
    "lives in one worker and a new connection may reach another (404), so\n"
    "sessions need a proxy routing by the id's prefix (examples/deploy/).\n"
    "--sse-keepalive MS: an SSE comment every MS ms on open 2026 streams\n"
    "(subscriptions/listen) and 2025 GET streams (default 15000, 0: none).\n"
    "On SIGINT/SIGTERM open listens end with their result and running calls\n"
    "get up to --drain-timeout MS (default 5000, 0: none); a second signal\n"
    "stops at once (with --workers: forwarded to every worker).\n"
    "--read-spin-us N (stdio): before sleeping, poll stdin for up to N us\n"
    "(yielding the CPU), so a client that sends its next request at once is\n"
    "served without a kernel wake-up; backs off while requests come later,\n"
    "never spins while the machine has no idle CPU, none while idle\n"
    "(default 20, 0: off).\n"
    "--no-read-block (stdio): wait for requests in the event loop (epoll)\n"
    "even when stdin is all there is to wait for; by default the server\n"
    "then waits in read(2) on its stdin pipe: a system call a request fewer.\n"
    "\n"
    "serve --http as an OAuth 2.1 resource server (MCP authorization): every\n"
    "request needs 'Authorization: Bearer TOKEN', a JWT from the issuer\n"
    "(RS256 or ES256, keys from the issuer's jwks_uri; iss, aud, exp, nbf\n"
    "checked) or a token its introspection endpoint says is active; the\n"
    "protected resource metadata is at /.well-known/oauth-protected-resource\n"
    "(and .../mcp); no token: 401, bad token: 401 invalid_token, missing\n"
    "scope: 403 insufficient_scope. Adds the tool whoami (the token's\n"
    "subject and scopes). The legacy HTTP+SSE endpoints are off.\n"
    "  --auth-issuer URL         the authorization server (enables it)\n"
    "  --auth-audience AUD       the aud tokens must carry (default: the\n"
    "                            resource URL)\n"
    "  --auth-resource URL       this server's canonical URL (default:\n"
    "                            http://ADDR:PORT/mcp)\n"
    "  --auth-scopes a,b         scopes every request needs\n"
    "  --auth-tool-scope T=a,b   scopes calling tool T needs (repeatable)\n"
    "  --auth-jwks-uri URL       the issuer's JWK Set (default: its\n"
    "                            metadata's jwks_uri)\n"
    "  --auth-introspect URL     check tokens by introspection (RFC 7662)\n"
    "  --auth-client-id ID       with --auth-introspect: our client id\n"
    "  --auth-client-secret S    ... and secret (default: the environment\n"
    "                            variable ACP_MCP_AUTH_CLIENT_SECRET)\n"
    "\n"
    "client verbs: tools, resources (with templates), prompts list; call NAME\n"
    "calls a tool, read URI reads a resource, get NAME gets a prompt.\n"
    "key=value arguments: a value that parses as JSON is passed as JSON,\n"
    "others as strings (prompt arguments are always strings).\n"
    "\n"
    "options:\n"
    "  --json               print results as JSON (one line) instead of text\n"
    "  --url URL            an HTTP server; Streamable HTTP, falling back to\n"
    "                       legacy HTTP+SSE on 400/404/405\n"
    "  --transport T        auto (default), streamable or sse (with --url)\n"
    "  --header 'N: V'      an HTTP header for every request (with --url;\n"
    "                       repeatable), e.g. 'Authorization: Bearer T'\n"
    "  --stdio CMD ARGS...  spawn an MCP server; for call/read/get end its\n"
    "                       arguments with --\n"
    "  --timeout MS         per-request inactivity timeout (default 60000,\n"
    "                       0: none); progress resets it\n"
    "  --protocol VERSION   the MCP revision: auto (default: server/discover,\n"
    "                       falling back to initialize for servers of earlier\n"
    "                       revisions), 2026-07-28 (stateless only), or a\n"
    "                       stateful one (2025-11-25 ... 2024-11-05: "
    "initialize)\n"
    "  --task               call: as a task (2025-11-25: a task-augmented\n"
    "                       call, then tasks/result; 2026-07-28: the tasks\n"
    "                       extension, then tasks/get polls); the task id "
    "goes\n"
    "                       to stderr; a server may answer at once; over\n"
    "                       HTTP the session's GET stream is opened too (a\n"
    "                       2025 task may ask for input on it)\n"
    "  --elicit-json FILE   answer a server's form elicitation (a 2025\n"
    "                       elicitation/create, a 2026 input request) by\n"
    "                       accepting with FILE's JSON object as content\n"
    "  --accept             ... by accepting with the schema's defaults\n"
    "  --decline            ... by declining\n"
    "                       (none of these, on a terminal: ask for each\n"
    "                       field on it; else elicitation is not offered)\n"
    "  --sample-reply TEXT  answer a server's sampling/createMessage (2025:\n"
    "                       a request, 2026: an input request) with TEXT as\n"
    "                       the assistant's reply (model \"acp-mcp-call\")\n"
    "  --sample-json FILE   ... with FILE's CreateMessageResult object\n"
    "                       (neither, on a terminal: the request is shown\n"
    "                       and the reply typed, an empty line rejects it;\n"
    "                       else sampling is not offered)\n"
    "  --root DIR           a root for roots/list, as a file:// URI\n"
    "                       (repeatable; without it roots are not offered)\n"
    "  -h, --help           this help\n"
    "\n"
    "Progress notifications and server log messages go to stderr. With --json\n"
    "the printed object ends with \"protocolVersion\", the negotiated "
    "revision.\n"
    "\n"
    "exit status: 0 success; 1 failure (connection, protocol, JSON-RPC error,\n"
    "timeout); 2 bad command line; 3 the tool answered isError: true.\n";

static void usage(FILE *f) {
  fputs(usage_text, f);
}

/* whoami (with --auth-issuer): the caller's token subject and scopes. It
 * also says on stderr that it ran (the integration test's witness that a
 * refused call ran nothing). */
static int tool_whoami(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  const char *sub = NULL, *scopes = NULL;
  char text[1024];
  int rv;
  (void)args;
  (void)ud;
  rv = acp_http_call_auth(call, &sub, &scopes);
  if (rv != 0)
    return acp_mcp_call_respond_text(call, "anonymous", 9, 0);
  fprintf(stderr, "acp mcp: whoami ran for %s\n", sub ? sub : "(no subject)");
  fflush(stderr);
  snprintf(text, sizeof(text), "subject=%s scopes=%s", sub ? sub : "",
           scopes ? scopes : "");
  return acp_mcp_call_respond_text(call, text, strlen(text), 0);
}

static int register_whoami(acp_mcp_server *s) {
  acp_mcp_tool_def d;
  memset(&d, 0, sizeof(d));
  d.version = ACP_MCP_DEF_VERSION;
  d.name = "whoami";
  d.description = "The subject and scopes of the caller's access token";
  d.input_schema = "{\"type\":\"object\"}";
  d.handler = tool_whoami;
  return acp_mcp_server_add_tool(s, &d);
}

/* Add comma-separated scopes to `a`, for every request (tool NULL) or for
 * one tool. */
static int add_scopes(acp_http_auth *a, const char *tool, const char *list) {
  char buf[512];
  char *p, *save = NULL;
  int rv = 0;
  if (strlen(list) >= sizeof(buf))
    return ACP_ERR_INVALID_ARGUMENT;
  memcpy(buf, list, strlen(list) + 1);
  for (p = strtok_r(buf, ",", &save); p != NULL && rv == 0;
       p = strtok_r(NULL, ",", &save))
    rv = tool ? acp_http_auth_add_tool_scope(a, tool, p)
              : acp_http_auth_add_scope(a, p);
  return rv;
}

#define MAX_TOOL_SCOPES 64

typedef struct auth_opts {
  const char *issuer, *audience, *resource, *scopes, *jwks_uri;
  const char *introspect, *client_id, *client_secret;
  const char *tool_scopes[MAX_TOOL_SCOPES];
  size_t ntool;
} auth_opts;

/* The acp_http_auth of --auth-*; NULL without --auth-issuer. 0 or a CLI
 * exit status (the error printed). */
static int make_auth(const auth_opts *ao, acp_http_auth **out) {
  acp_http_auth *a = NULL;
  size_t i;
  int rv;
  *out = NULL;
  if (ao->issuer == NULL)
    return 0;
  rv = acp_http_auth_new(&a, ao->issuer, NULL);
  if (rv != 0) {
    cli_err(SUB, "--auth-issuer wants an http(s) URL, not '%s'", ao->issuer);
    return CLI_EXIT_USAGE;
  }
  if (ao->audience != NULL &&
      acp_http_auth_set_audience(a, ao->audience) != 0) {
    cli_err(SUB, "bad --auth-audience");
    goto usage;
  }
  if (ao->resource != NULL &&
      acp_http_auth_set_resource(a, ao->resource) != 0) {
    cli_err(SUB, "--auth-resource wants an http(s) URL");
    goto usage;
  }
  if (ao->jwks_uri != NULL &&
      acp_http_auth_set_jwks_uri(a, ao->jwks_uri) != 0) {
    cli_err(SUB, "--auth-jwks-uri wants an http(s) URL");
    goto usage;
  }
  if (ao->scopes != NULL && add_scopes(a, NULL, ao->scopes) != 0) {
    cli_err(SUB, "bad --auth-scopes '%s'", ao->scopes);
    goto usage;
  }
  for (i = 0; i < ao->ntool; i++) {
    const char *eq = strchr(ao->tool_scopes[i], '=');
    char tool[256];
    size_t tl = eq ? (size_t)(eq - ao->tool_scopes[i]) : 0;
    if (eq == NULL || tl == 0 || tl >= sizeof(tool)) {
      cli_err(SUB, "--auth-tool-scope wants TOOL=SCOPE[,SCOPE...]");
      goto usage;
    }
    memcpy(tool, ao->tool_scopes[i], tl);
    tool[tl] = 0;
    if (add_scopes(a, tool, eq + 1) != 0) {
      cli_err(SUB, "bad --auth-tool-scope '%s'", ao->tool_scopes[i]);
      goto usage;
    }
  }
  if (ao->introspect != NULL) {
    const char *secret = ao->client_secret;
    if (secret == NULL)
      secret = getenv("ACP_MCP_AUTH_CLIENT_SECRET");
    if (ao->client_id == NULL || secret == NULL ||
        acp_http_auth_set_introspection(a, ao->introspect, ao->client_id,
                                        secret) != 0) {
      cli_err(SUB, "--auth-introspect wants an http(s) URL, --auth-client-id "
                   "and --auth-client-secret");
      goto usage;
    }
  } else if (ao->client_id != NULL || ao->client_secret != NULL) {
    cli_err(SUB, "--auth-client-id and --auth-client-secret go with "
                 "--auth-introspect");
    goto usage;
  }
  *out = a;
  return 0;
usage:
  acp_http_auth_free(a);
  return CLI_EXIT_USAGE;
}

/* MARK: - serve */

/* slow_compute's timer (mcp_everything_set_timers()) on the serve loop. */
typedef struct ev_uv_timer {
  uv_timer_t t;
  void (*fire)(void *arg);
  void *arg;
  struct ev_uv_timer *next, *prev;
} ev_uv_timer;

static ev_uv_timer *ev_live; /* armed, not yet closing */

static void ev_timer_closed(uv_handle_t *h) {
  free(h->data);
}

static void ev_timer_close(ev_uv_timer *et) {
  if (et->prev)
    et->prev->next = et->next;
  else
    ev_live = et->next;
  if (et->next)
    et->next->prev = et->prev;
  uv_close((uv_handle_t *)&et->t, ev_timer_closed);
}

static void ev_timer_cb(uv_timer_t *t) {
  ev_uv_timer *et = t->data;
  ev_timer_close(et);
  et->fire(et->arg);
}

static int ev_timer_start(void *ctx, uint64_t ms, void (*fire)(void *arg),
                          void *arg, void **timer) {
  ev_uv_timer *et = calloc(1, sizeof(*et));
  if (et == NULL)
    return ACP_ERR_NOMEM;
  uv_timer_init(ctx, &et->t);
  et->t.data = et;
  et->fire = fire;
  et->arg = arg;
  uv_timer_start(&et->t, ev_timer_cb, ms, 0);
  uv_unref((uv_handle_t *)&et->t); /* a running task does not hold exit */
  et->next = ev_live;
  if (ev_live)
    ev_live->prev = et;
  ev_live = et;
  *timer = et;
  return 0;
}

static void ev_timer_stop(void *ctx, void *timer) {
  ev_uv_timer *et = timer;
  (void)ctx;
  uv_timer_stop(&et->t);
  ev_timer_close(et);
}

typedef struct serve_ctx {
  acp_http_server *srv;
  acp_uv_signals *sig;
  int nsig; /* SIGINT/SIGTERM seen */
} serve_ctx;

static void on_server_closed(acp_http_server *srv, void *ud) {
  serve_ctx *sc = ud;
  (void)srv;
  sc->srv = NULL;
  if (sc->sig != NULL) {
    acp_uv_signals_close(sc->sig);
    sc->sig = NULL;
  }
}

/* The first SIGINT/SIGTERM closes the server, which drains open 2026
 * requests for up to --drain-timeout; the signals stay watched meanwhile,
 * so a second one (an impatient operator, a supervisor forwarding it)
 * stops at once instead of waiting the drain out. */
static void on_signal(acp_uv_signals *sig, int signum, void *ud) {
  serve_ctx *sc = ud;
  (void)sig;
  (void)signum;
  if (sc->srv == NULL)
    return;
  if (++sc->nsig == 1) {
    fprintf(stderr, "acp mcp: stopping (open requests get up to the drain "
                    "timeout; a second signal stops at once)\n");
    fflush(stderr);
    acp_http_server_close(sc->srv, on_server_closed, sc);
  } else {
    fprintf(stderr, "acp mcp: second signal: stopping now\n");
    fflush(stderr);
    acp_http_server_close(sc->srv, NULL, NULL); /* on_server_closed runs */
  }
}

static int parse_addr(const char *s, char *addr, size_t cap, uint16_t *port) {
  const char *colon = strrchr(s, ':');
  const char *p = colon ? colon + 1 : s;
  char *end;
  unsigned long v;
  size_t al;
  errno = 0;
  v = strtoul(p, &end, 10);
  if (*p == 0 || *end != 0 || v > 65535 || errno)
    return -1;
  *port = (uint16_t)v;
  if (colon == NULL) {
    snprintf(addr, cap, "127.0.0.1");
    return 0;
  }
  al = (size_t)(colon - s);
  if (al >= 2 && s[0] == '[' && s[al - 1] == ']') {
    s++;
    al -= 2;
  }
  if (al == 0 || al >= cap)
    return -1;
  memcpy(addr, s, al);
  addr[al] = 0;
  if (strcmp(addr, "localhost") == 0)
    snprintf(addr, cap, "127.0.0.1");
  return 0;
}

static int cmd_serve(int argc, char **argv) {
  const char *http = NULL, *worker = NULL, *workers_s = NULL, *ka_s = NULL;
  const char *drain_s = NULL, *spin_s = NULL;
  unsigned long spin_us = CLI_READ_SPIN_US;
  int no_block = 0;
  unsigned long keepalive = ACP_HTTP_DEFAULT_KEEPALIVE_MS;
  unsigned long drain = ACP_HTTP_DEFAULT_DRAIN_MS;
  int everything = 0, i, ok, rv, status = CLI_EXIT_OK, nworkers = 0;
  int listen_fd = -1;
  mcp_worker_slot slot;
  acp_mcp_server *reg = NULL;
  acp_http_auth *auth = NULL;
  auth_opts ao;
  uv_loop_t loop;
  acp_http_server_options *o = NULL;
  serve_ctx sc = {NULL, NULL, 0};
  char addr[64];
  uint16_t port;
  memset(&ao, 0, sizeof(ao));
  for (i = 1; i < argc; i++) {
    const char *v;
    ok = 0;
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return CLI_EXIT_OK;
    } else if (strcmp(argv[i], "--everything") == 0)
      everything = 1;
    else if (strcmp(argv[i], "--stdio") == 0)
      http = NULL;
    else if ((v = cli_opt_value(argc, argv, &i, "--http", &ok)) != NULL)
      http = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--worker-id", &ok)) != NULL)
      worker = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--workers", &ok)) != NULL)
      workers_s = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--sse-keepalive", &ok)) !=
             NULL)
      ka_s = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--drain-timeout", &ok)) !=
             NULL)
      drain_s = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--read-spin-us", &ok)) != NULL)
      spin_s = v;
    else if (strcmp(argv[i], "--no-read-block") == 0)
      no_block = 1;
    else if ((v = cli_opt_value(argc, argv, &i, "--auth-issuer", &ok)) != NULL)
      ao.issuer = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--auth-audience", &ok)) !=
             NULL)
      ao.audience = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--auth-resource", &ok)) !=
             NULL)
      ao.resource = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--auth-scopes", &ok)) != NULL)
      ao.scopes = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--auth-jwks-uri", &ok)) !=
             NULL)
      ao.jwks_uri = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--auth-tool-scope", &ok)) !=
             NULL) {
      if (ao.ntool == MAX_TOOL_SCOPES) {
        cli_err(SUB, "too many --auth-tool-scope");
        return CLI_EXIT_USAGE;
      }
      ao.tool_scopes[ao.ntool++] = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--auth-introspect", &ok)) !=
               NULL)
      ao.introspect = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--auth-client-id", &ok)) !=
             NULL)
      ao.client_id = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--auth-client-secret", &ok)) !=
             NULL)
      ao.client_secret = v;
    else {
      if (ok >= 0)
        cli_err(SUB, "unknown option '%s'", argv[i]);
      usage(stderr);
      return CLI_EXIT_USAGE;
    }
  }
  if (worker != NULL && http == NULL) {
    cli_err(SUB, "--worker-id needs --http");
    return CLI_EXIT_USAGE;
  }
  if (http == NULL &&
      (ao.issuer || ao.audience || ao.resource || ao.scopes || ao.ntool ||
       ao.jwks_uri || ao.introspect || ao.client_id || ao.client_secret)) {
    cli_err(SUB, "the --auth-* options need --http");
    return CLI_EXIT_USAGE;
  }
  if (ao.issuer == NULL &&
      (ao.audience || ao.resource || ao.scopes || ao.ntool || ao.jwks_uri ||
       ao.introspect || ao.client_id || ao.client_secret)) {
    cli_err(SUB, "the --auth-* options need --auth-issuer");
    return CLI_EXIT_USAGE;
  }
  if (ka_s != NULL) {
    char *end;
    errno = 0;
    keepalive = strtoul(ka_s, &end, 10);
    if (*ka_s == 0 || *end != 0 || errno || keepalive > 3600000 ||
        ka_s[0] == '-') {
      cli_err(SUB, "--sse-keepalive wants milliseconds 0..3600000, not '%s'",
              ka_s);
      return CLI_EXIT_USAGE;
    }
    if (http == NULL) {
      cli_err(SUB, "--sse-keepalive needs --http");
      return CLI_EXIT_USAGE;
    }
  }
  if (drain_s != NULL) {
    char *end;
    errno = 0;
    drain = strtoul(drain_s, &end, 10);
    if (*drain_s == 0 || *end != 0 || errno || drain > 86400000 ||
        drain_s[0] == '-') {
      cli_err(SUB, "--drain-timeout wants milliseconds 0..86400000, not '%s'",
              drain_s);
      return CLI_EXIT_USAGE;
    }
    if (http == NULL) {
      cli_err(SUB, "--drain-timeout needs --http");
      return CLI_EXIT_USAGE;
    }
  }
  if (spin_s != NULL) {
    char *end;
    errno = 0;
    spin_us = strtoul(spin_s, &end, 10);
    if (*spin_s == 0 || *end != 0 || errno || spin_us > 1000000 ||
        spin_s[0] == '-') {
      cli_err(SUB, "--read-spin-us wants microseconds 0..1000000, not '%s'",
              spin_s);
      return CLI_EXIT_USAGE;
    }
    if (http != NULL) {
      cli_err(SUB, "--read-spin-us is for stdio, not --http");
      return CLI_EXIT_USAGE;
    }
  }
  if (no_block && http != NULL) {
    cli_err(SUB, "--no-read-block is for stdio, not --http");
    return CLI_EXIT_USAGE;
  }
  if (workers_s != NULL) {
    char *end;
    long v;
    errno = 0;
    v = strtol(workers_s, &end, 10);
    if (*workers_s == 0 || *end != 0 || errno || v < 1 || v > 64) {
      cli_err(SUB, "--workers wants 1..64, not '%s'", workers_s);
      return CLI_EXIT_USAGE;
    }
    if (http == NULL) {
      cli_err(SUB, "--workers needs --http");
      return CLI_EXIT_USAGE;
    }
    nworkers = (int)v;
  }
  if (http == NULL) /* what acp itself runs (mcp_serve_stdio.c) */
    return cli_mcp_serve_stdio(everything, (uint32_t)spin_us, !no_block);
  if (worker != NULL) {
    /* Checked before anything starts, with the library's own rule. */
    rv = acp_http_server_options_new(&o, NULL);
    if (rv == 0)
      rv = acp_http_server_options_set_session_prefix(o, worker);
    acp_http_server_options_free(o);
    o = NULL;
    if (rv != 0 || worker[0] == 0) {
      cli_err(SUB, "--worker-id wants 1-32 of A-Z a-z 0-9 _, not '%s'", worker);
      return CLI_EXIT_USAGE;
    }
  }
  if (nworkers > 0) {
    /* The supervisor returns here only when it stops; each worker goes on
     * below with its own socket and id. */
    if (worker != NULL && strlen(worker) > 30) {
      cli_err(SUB, "with --workers, --worker-id wants at most 30 characters");
      return CLI_EXIT_USAGE;
    }
    if (parse_addr(http, addr, sizeof(addr), &port) != 0) {
      cli_err(SUB, "--http wants ADDR:PORT or PORT, not '%s'", http);
      return CLI_EXIT_USAGE;
    }
    memset(&slot, 0, sizeof(slot));
    rv = mcp_workers_run(addr, port, nworkers, worker ? worker : "w",
                         (uint32_t)drain + 5000, &slot);
    if (rv != MCP_WORKERS_CHILD)
      return rv == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
    worker = slot.name;
    listen_fd = slot.listen_fd;
  }
  if ((rv = make_auth(&ao, &auth)) != 0) {
    if (listen_fd >= 0)
      close(listen_fd);
    return rv;
  }
  rv = acp_mcp_server_new(&reg, "acp-mcp", "0.1.0", NULL, NULL);
  if (rv == 0)
    rv = everything
             ? mcp_everything_register_with(reg, acp_http_call_close_stream)
             : cli_mcp_register_default(reg);
  if (rv == 0 && auth != NULL)
    rv = register_whoami(reg);
  if (rv == 0)
    rv = cli_mcp_set_state_key(reg);
  acp_mcp_server_set_epoch(reg, cli_mcp_epoch_ms());
  if (rv != 0) {
    cli_err(SUB, "cannot create the server: %s", acp_strerror(rv));
    if (listen_fd >= 0)
      close(listen_fd);
    acp_mcp_server_free(reg);
    acp_http_auth_free(auth);
    return CLI_EXIT_FAILURE;
  }
  if (parse_addr(http, addr, sizeof(addr), &port) != 0) {
    cli_err(SUB, "--http wants ADDR:PORT or PORT, not '%s'", http);
    acp_mcp_server_free(reg);
    acp_http_auth_free(auth);
    return CLI_EXIT_USAGE;
  }
  acp_uv_ignore_sigpipe();
  uv_loop_init(&loop);
  if (everything) {
    mcp_everything_timers tm = {&loop, ev_timer_start, ev_timer_stop};
    mcp_everything_set_timers(&tm);
  }
  rv = acp_http_server_options_new(&o, NULL);
  if (rv == 0)
    rv = acp_http_server_options_set_address(o, addr, port);
  if (rv == 0 && worker != NULL)
    rv = acp_http_server_options_set_session_prefix(o, worker);
  if (rv == 0)
    acp_http_server_options_set_keepalive(o, (uint32_t)keepalive);
  if (rv == 0)
    acp_http_server_options_set_drain_timeout(o, (uint32_t)drain);
  if (rv == 0 && listen_fd >= 0) {
    acp_http_server_options_set_listen_fd(o, listen_fd);
    listen_fd = -1; /* the server's from acp_http_server_new() on */
  }
  if (rv == 0)
    acp_http_server_options_set_auth(o, auth);
  if (rv == 0)
    rv = acp_http_server_new(&sc.srv, &loop, reg, o, NULL);
  acp_http_server_options_free(o);
  if (rv != 0) {
    cli_err(SUB, "cannot listen on %s:%u: %s", addr, port, acp_strerror(rv));
    status = CLI_EXIT_FAILURE;
  } else {
    int v6 = strchr(addr, ':') != NULL;
    if (nworkers > 0)
      fprintf(stderr, "acp mcp: worker %s ready (pid %ld)\n", worker,
              (long)getpid());
    else
      fprintf(stderr, "acp mcp: serving http://%s%s%s:%u/mcp\n", v6 ? "[" : "",
              addr, v6 ? "]" : "", acp_http_server_port(sc.srv));
    fflush(stderr);
    if (acp_uv_signals_new(&sc.sig, &loop, on_signal, &sc, NULL) != 0) {
      acp_http_server_close(sc.srv, NULL, NULL);
      status = CLI_EXIT_FAILURE;
    }
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  mcp_everything_set_timers(NULL);
  while (ev_live) /* timers of tasks still running */
    ev_timer_close(ev_live);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  if (listen_fd >= 0)
    close(listen_fd);
  acp_mcp_server_free(reg);
  acp_http_auth_free(auth);
  return status;
}

/* MARK: - Client */

enum verb { V_TOOLS, V_RESOURCES, V_PROMPTS, V_CALL, V_READ, V_GET };

typedef struct mcli {
  uv_loop_t loop;
  enum verb verb;
  int json;
  const char *name;
  acp_json_writer *args; /* arguments object, or NULL */
  acp_mcp_client *c;
  acp_http_client *hc;
  acp_uv_process *proc;
  acp_uv_rpc *rpc;
  int status;
  int done;
  int list_phase;       /* resources: 0 resources, 1 templates */
  acp_json_writer *out; /* --json list accumulation */
  int first_item;
  int task;          /* call --task */
  char task_id[128]; /* the task being polled */
  uv_timer_t poll;   /* tasks/get pacing */
  int poll_init;
  int elicit;        /* enum elicit_mode */
  char *elicit_json; /* --elicit-json FILE's object */
  size_t elicit_len;
  int sample;        /* enum sample_mode */
  char *sample_json; /* the CreateMessageResult of --sample-* */
  size_t sample_len;
  acp_json_writer *roots; /* --root: the roots/list result, or NULL */
} mcli;

/* How `acp mcp call` answers sampling/createMessage (a 2025 request, a 2026
 * input request). */
enum sample_mode {
  SAMPLE_NONE, /* no callback: the capability is not declared */
  SAMPLE_TTY,  /* show the request on the terminal, the user types a reply */
  SAMPLE_FIXED /* --sample-reply TEXT / --sample-json FILE */
};

/* The options' allocations (every exit path of cmd_client_verb). */
static void mcli_free_opts(mcli *m) {
  acp_json_writer_free(m->args);
  m->args = NULL;
  free(m->elicit_json);
  m->elicit_json = NULL;
  free(m->sample_json);
  m->sample_json = NULL;
  acp_json_writer_free(m->roots);
  m->roots = NULL;
}

/* How `acp mcp call` answers a server's form elicitation (elicitation/create
 * in a 2025 session, an input request of a 2026 input_required result). */
enum elicit_mode {
  ELICIT_NONE,   /* no callback: the capability is not declared */
  ELICIT_TTY,    /* ask on the terminal (stdin and stderr are ttys) */
  ELICIT_JSON,   /* --elicit-json FILE: accept with the file's object */
  ELICIT_ACCEPT, /* --accept: accept with the schema's defaults */
  ELICIT_DECLINE /* --decline */
};

static void finish(mcli *m, int status);

static void on_proc_shutdown(acp_uv_process *p, void *ud) {
  (void)ud;
  acp_uv_process_close(p, NULL);
}

static void finish(mcli *m, int status) {
  if (m->done)
    return;
  m->done = 1;
  m->status = status;
  if (m->poll_init) {
    uv_close((uv_handle_t *)&m->poll, NULL);
    m->poll_init = 0;
  }
  if (m->hc) {
    acp_http_client_close(m->hc, 2000, NULL, NULL);
    m->hc = NULL;
  }
  if (m->rpc) {
    acp_uv_rpc_close(m->rpc, NULL);
    m->rpc = NULL;
  }
  if (m->proc) {
    if (acp_uv_process_shutdown(m->proc, on_proc_shutdown) != 0)
      acp_uv_process_close(m->proc, NULL);
    m->proc = NULL;
  }
}

static void print_rpc_error(const acp_rpc_msg *msg, int status) {
  if (status == ACP_ERR_PROTOCOL && msg)
    cli_err(SUB, "error %lld: %.*s", (long long)msg->error_code,
            (int)msg->error_message_len,
            msg->error_message ? msg->error_message : "");
  else
    cli_err(SUB, "request failed: %s", acp_strerror(status));
}

static void print_json_line(const char *s, size_t n) {
  fwrite(s, 1, n, stdout);
  fputc('\n', stdout);
}

static void print_str(acp_json_doc *doc, const acp_json_val *v) {
  const char *s;
  size_t n;
  if (v && acp_json_doc_str(doc, v, &s, &n) == 0)
    fwrite(s, 1, n, stdout);
}

/* One content block as text. */
static void print_content(acp_json_doc *doc, const acp_json_val *b) {
  const acp_json_val *type = acp_json_obj_getz(b, "type");
  if (ACP_JSON_STR_EQ_LIT(type, "text")) {
    print_str(doc, acp_json_obj_getz(b, "text"));
    fputc('\n', stdout);
  } else if (ACP_JSON_STR_EQ_LIT(type, "image") ||
             ACP_JSON_STR_EQ_LIT(type, "audio")) {
    size_t n = 0;
    acp_json_str_raw(acp_json_obj_getz(b, "data"), &n);
    fputc('[', stdout);
    print_str(doc, type);
    fputs(" ", stdout);
    print_str(doc, acp_json_obj_getz(b, "mimeType"));
    printf(", %zu base64 characters]\n", n);
  } else if (ACP_JSON_STR_EQ_LIT(type, "resource")) {
    const acp_json_val *r = acp_json_obj_getz(b, "resource");
    const acp_json_val *t = acp_json_obj_getz(r, "text");
    fputs("[resource ", stdout);
    print_str(doc, acp_json_obj_getz(r, "uri"));
    fputs("]\n", stdout);
    if (t) {
      print_str(doc, t);
      fputc('\n', stdout);
    }
  } else if (ACP_JSON_STR_EQ_LIT(type, "resource_link")) {
    fputs("[link ", stdout);
    print_str(doc, acp_json_obj_getz(b, "uri"));
    fputs("]\n", stdout);
  } else {
    size_t n;
    const char *raw = acp_json_raw(b, &n);
    print_json_line(raw, n);
  }
}

/* MARK: - Protocol revision (2026-07-28 and the stateful ones) */

/* The result object as one JSON line, with "protocolVersion": the
 * negotiated revision appended as its last member. */
static void print_with_protocol(mcli *m, const acp_rpc_msg *msg) {
  const char *pv = acp_mcp_client_protocol(m->c);
  acp_json_writer *w = NULL;
  const acp_json_val *k;
  const char *s;
  size_t n;

  if (acp_json_writer_new(&w, 0, NULL) != 0)
    return;
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(msg->result); k;
       k = acp_json_next(acp_json_next(k))) {
    if (acp_json_doc_str(msg->doc, k, &s, &n) != 0)
      continue;
    if (n == 15 && memcmp(s, "protocolVersion", 15) == 0)
      continue;
    acp_json_write_key(w, s, n);
    acp_json_write_val(w, acp_json_next(k));
  }
  acp_json_write_keyz(w, "protocolVersion");
  if (pv)
    acp_json_write_strz(w, pv);
  else
    acp_json_write_null(w);
  acp_json_write_obj_end(w);
  s = acp_json_writer_data(w, &n);
  if (acp_json_writer_error(w) == 0)
    print_json_line(s, n);
  acp_json_writer_free(w);
}

static int on_result(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                     void *ud) {
  mcli *m = ud;
  const acp_json_val *r;
  int exit_status = CLI_EXIT_OK;
  (void)c;
  if (status != 0) {
    print_rpc_error(msg, status);
    finish(m, CLI_EXIT_FAILURE);
    return 0;
  }
  r = msg->result;
  if (m->json) {
    print_with_protocol(m, msg);
    if (m->verb == V_CALL) {
      bool e = false;
      acp_json_get_bool(acp_json_obj_getz(r, "isError"), &e);
      if (e)
        exit_status = MCP_EXIT_TOOL_ERROR;
    }
    finish(m, exit_status);
    return 0;
  }
  if (m->verb == V_CALL) {
    const acp_json_val *content = acp_json_obj_getz(r, "content"), *b;
    const acp_json_val *sc = acp_json_obj_getz(r, "structuredContent");
    bool e = false;
    for (b = acp_json_child(content); b; b = acp_json_next(b))
      print_content(msg->doc, b);
    if (acp_json_child(content) == NULL && sc) {
      size_t n;
      const char *raw = acp_json_raw(sc, &n);
      print_json_line(raw, n);
    }
    acp_json_get_bool(acp_json_obj_getz(r, "isError"), &e);
    if (e)
      exit_status = MCP_EXIT_TOOL_ERROR;
  } else if (m->verb == V_READ) {
    const acp_json_val *it;
    for (it = acp_json_child(acp_json_obj_getz(r, "contents")); it;
         it = acp_json_next(it)) {
      const acp_json_val *t = acp_json_obj_getz(it, "text");
      if (t) {
        print_str(msg->doc, t);
        fputc('\n', stdout);
      } else {
        size_t n = 0;
        acp_json_str_raw(acp_json_obj_getz(it, "blob"), &n);
        fputs("[blob ", stdout);
        print_str(msg->doc, acp_json_obj_getz(it, "uri"));
        printf(", %zu base64 characters]\n", n);
      }
    }
  } else if (m->verb == V_GET) {
    const acp_json_val *it, *d = acp_json_obj_getz(r, "description");
    if (d) {
      print_str(msg->doc, d);
      fputc('\n', stdout);
    }
    for (it = acp_json_child(acp_json_obj_getz(r, "messages")); it;
         it = acp_json_next(it)) {
      print_str(msg->doc, acp_json_obj_getz(it, "role"));
      fputs(": ", stdout);
      print_content(msg->doc, acp_json_obj_getz(it, "content"));
    }
  }
  finish(m, exit_status);
  return 0;
}

static int start_list(mcli *m, acp_mcp_list which);

/* MARK: - call --task */

static int on_task_state(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                         void *ud);

static void on_poll(uv_timer_t *t);

/* tasks/update took (or could not take) the answers to a task's input. */
static int on_task_answered(acp_mcp_client *c, int status,
                            const acp_rpc_msg *msg, void *ud) {
  mcli *m = ud;
  (void)c;
  if (status != 0) {
    cli_err(SUB, "task %s needs input, which acp mcp call cannot give: %s",
            m->task_id, acp_strerror(status));
    if (msg != NULL)
      print_rpc_error(msg, status);
    finish(m, CLI_EXIT_FAILURE);
    return 0;
  }
  if (!m->poll_init) {
    uv_timer_init(&m->loop, &m->poll);
    m->poll.data = m;
    m->poll_init = 1;
  }
  uv_timer_start(&m->poll, on_poll, 0, 0);
  return 0;
}

static void on_poll(uv_timer_t *t) {
  mcli *m = t->data;
  int rv = acp_mcp_client_task_get(m->c, m->task_id, uv_now(&m->loop),
                                   on_task_state, m);
  if (rv != 0) {
    cli_err(SUB, "cannot poll the task: %s", acp_strerror(rv));
    finish(m, CLI_EXIT_FAILURE);
  }
}

/*
 * The answer to `call --task` and to each tasks/get: a task in progress is
 * polled (pollInterval, 0.1 to 5 s); a 2025 task's result is fetched with
 * tasks/result (held by the server until the end); a 2026 task's is
 * inlined in tasks/get. A server that answered at once is printed as is.
 */
static int on_task_state(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                         void *ud) {
  mcli *m = ud;
  const char *id, *st;
  size_t il, sl;
  const acp_json_val *r;
  int64_t poll = 500;

  if (status != 0 || !acp_mcp_result_task(msg, &id, &il, &st, &sl))
    return on_result(c, status, msg, ud);
  if (m->task_id[0] == 0) {
    snprintf(m->task_id, sizeof(m->task_id), "%.*s", (int)il, id);
    if (!m->json)
      fprintf(stderr, "task %s\n", m->task_id);
    if (acp_mcp_client_era(c) == ACP_MCP_ERA_STATEFUL) {
      int rv = acp_mcp_client_task_result(c, m->task_id, uv_now(&m->loop),
                                          on_result, m);
      if (rv != 0) {
        cli_err(SUB, "cannot ask the task's result: %s", acp_strerror(rv));
        finish(m, CLI_EXIT_FAILURE);
      }
      return 0;
    }
  }
  r = msg->result;
  if (sl == 9 && memcmp(st, "completed", 9) == 0) {
    acp_rpc_msg inner = *msg;
    inner.result = acp_json_obj_getz(r, "result");
    if (inner.result != NULL)
      return on_result(c, 0, &inner, ud);
  }
  if ((sl == 9 && memcmp(st, "completed", 9) == 0) ||
      (sl == 6 && memcmp(st, "failed", 6) == 0) ||
      (sl == 9 && memcmp(st, "cancelled", 9) == 0)) {
    const acp_json_val *e = acp_json_obj_getz(r, "error");
    const char *em = "";
    size_t en = 0;
    acp_json_doc_str(msg->doc, acp_json_obj_getz(e, "message"), &em, &en);
    cli_err(SUB, "task %s %.*s%s%.*s", m->task_id, (int)sl, st, en ? ": " : "",
            (int)en, em);
    finish(m, CLI_EXIT_FAILURE);
    return 0;
  }
  if (sl == 14 && memcmp(st, "input_required", 14) == 0 &&
      acp_json_obj_getz(r, "inputRequests") != NULL) {
    /* 2026: the task's questions go to the same answers as an
     * input_required result's (--elicit-json, --accept, --decline,
     * --sample-*, --root, the terminal), back with tasks/update; polling
     * goes on once the server took them. */
    int rv = acp_mcp_client_task_answer(c, m->task_id, msg, uv_now(&m->loop),
                                        on_task_answered, m);
    if (rv != 0) {
      cli_err(SUB, "task %s needs input, which acp mcp call cannot give: %s",
              m->task_id, acp_strerror(rv));
      finish(m, CLI_EXIT_FAILURE);
    }
    return 0;
  }
  if (acp_json_get_int64(acp_json_obj_getz(r, "pollIntervalMs"), &poll) != 0 &&
      acp_json_get_int64(acp_json_obj_getz(r, "pollInterval"), &poll) != 0)
    poll = 500;
  if (poll < 100)
    poll = 100;
  if (poll > 5000)
    poll = 5000;
  if (!m->poll_init) {
    uv_timer_init(&m->loop, &m->poll);
    m->poll.data = m;
    m->poll_init = 1;
  }
  uv_timer_start(&m->poll, on_poll, (uint64_t)poll, 0);
  return 0;
}

static int on_page(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                   bool last, void *ud) {
  mcli *m = ud;
  static const char *const keys[] = {"tools", "resources", "resourceTemplates",
                                     "prompts"};
  acp_mcp_list which = m->verb == V_TOOLS     ? ACP_MCP_LIST_TOOLS
                       : m->verb == V_PROMPTS ? ACP_MCP_LIST_PROMPTS
                       : m->list_phase        ? ACP_MCP_LIST_RESOURCE_TEMPLATES
                                              : ACP_MCP_LIST_RESOURCES;
  const acp_json_val *it;
  (void)c;
  if (status != 0) {
    if (which == ACP_MCP_LIST_RESOURCE_TEMPLATES &&
        status == ACP_ERR_PROTOCOL && msg && msg->error_code == -32601)
      last = true; /* no templates: fine */
    else {
      print_rpc_error(msg, status);
      finish(m, CLI_EXIT_FAILURE);
      return 0;
    }
  } else {
    for (it = acp_json_child(acp_json_obj_getz(msg->result, keys[which])); it;
         it = acp_json_next(it)) {
      if (m->json) {
        size_t n;
        const char *raw = acp_json_raw(it, &n);
        acp_json_write_raw(m->out, raw, n);
      } else if (which == ACP_MCP_LIST_TOOLS || which == ACP_MCP_LIST_PROMPTS) {
        const acp_json_val *d = acp_json_obj_getz(it, "description");
        print_str(msg->doc, acp_json_obj_getz(it, "name"));
        if (d) {
          fputs(" - ", stdout);
          print_str(msg->doc, d);
        }
        fputc('\n', stdout);
      } else {
        const acp_json_val *u = acp_json_obj_getz(it, "uri");
        if (u == NULL)
          u = acp_json_obj_getz(it, "uriTemplate");
        print_str(msg->doc, u);
        fputs(" (", stdout);
        print_str(msg->doc, acp_json_obj_getz(it, "name"));
        fputs(")\n", stdout);
      }
    }
  }
  if (!last)
    return 0;
  if (m->json)
    acp_json_write_arr_end(m->out);
  if (m->verb == V_RESOURCES && m->list_phase == 0) {
    m->list_phase = 1;
    if (m->json)
      acp_json_write_keyz(m->out, keys[ACP_MCP_LIST_RESOURCE_TEMPLATES]),
          acp_json_write_arr_begin(m->out);
    if (start_list(m, ACP_MCP_LIST_RESOURCE_TEMPLATES) != 0)
      finish(m, CLI_EXIT_FAILURE);
    return 0;
  }
  if (m->json) {
    size_t n;
    const char *s;
    const char *pv = acp_mcp_client_protocol(m->c);
    acp_json_write_keyz(m->out, "protocolVersion");
    if (pv)
      acp_json_write_strz(m->out, pv);
    else
      acp_json_write_null(m->out);
    acp_json_write_obj_end(m->out);
    s = acp_json_writer_data(m->out, &n);
    print_json_line(s, n);
  }
  finish(m, CLI_EXIT_OK);
  return 0;
}

static int start_list(mcli *m, acp_mcp_list which) {
  int rv =
      acp_mcp_client_list_all(m->c, which, NULL, uv_now(&m->loop), on_page, m);
  if (rv != 0)
    cli_err(SUB, "cannot list: %s", acp_strerror(rv));
  return rv;
}

static int on_progress(acp_mcp_client *c, double progress, double total,
                       const char *message, size_t mlen, void *ud) {
  (void)c;
  (void)ud;
  if (total >= 0)
    fprintf(stderr, "progress: %g/%g", progress, total);
  else
    fprintf(stderr, "progress: %g", progress);
  if (message)
    fprintf(stderr, " %.*s", (int)mlen, message);
  fputc('\n', stderr);
  return 0;
}

/* MARK: - Elicitation */

/* A JSON string's text into buf (cut to cap - 1), "" if not a string. */
static const char *str_of(const acp_json_val *v, char *buf, size_t cap) {
  size_t n = 0;
  int rv = acp_json_str_unescape(v, buf, cap - 1, &n);
  if (rv == ACP_ERR_BUFFER)
    n = cap - 1;
  else if (rv != 0)
    n = 0;
  buf[n] = 0;
  return buf;
}

/* One line from stdin without its newline; -1 at end of input. */
static int read_line(char *buf, size_t cap) {
  size_t n;
  if (fgets(buf, (int)cap, stdin) == NULL)
    return -1;
  n = strlen(buf);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
    buf[--n] = 0;
  return 0;
}

/* Write the answer typed for one property of `type`; 1: not valid, ask
 * again. */
static int put_typed(acp_json_writer *w, const char *type, const char *in) {
  if (strcmp(type, "number") == 0 || strcmp(type, "integer") == 0) {
    char *end;
    double d;
    errno = 0;
    d = strtod(in, &end);
    if (*in == 0 || *end != 0 || errno != 0 ||
        (type[0] == 'i' && (d != (double)(long long)d)))
      return 1;
    /* The typed text is a number; keep its spelling. */
    if (strspn(in, "-+0123456789.eE") != strlen(in) || in[0] == '+' ||
        in[0] == '.')
      return 1;
    return acp_json_validate(in, strlen(in), NULL) == 0
               ? acp_json_write_raw(w, in, strlen(in)) == 0 ? 0 : 1
               : 1;
  }
  if (strcmp(type, "boolean") == 0) {
    if (strcasecmp(in, "y") == 0 || strcasecmp(in, "yes") == 0 ||
        strcasecmp(in, "true") == 0)
      return acp_json_write_bool(w, true) == 0 ? 0 : 1;
    if (strcasecmp(in, "n") == 0 || strcasecmp(in, "no") == 0 ||
        strcasecmp(in, "false") == 0)
      return acp_json_write_bool(w, false) == 0 ? 0 : 1;
    return 1;
  }
  if (strcmp(type, "array") == 0) {
    /* A multi-select: comma-separated values. */
    const char *p = in;
    acp_json_write_arr_begin(w);
    while (*p) {
      const char *e = strchr(p, ',');
      size_t n = e ? (size_t)(e - p) : strlen(p);
      while (n > 0 && p[0] == ' ')
        p++, n--;
      while (n > 0 && p[n - 1] == ' ')
        n--;
      if (n > 0)
        acp_json_write_str(w, p, n);
      p = e ? e + 1 : p + strlen(p);
    }
    acp_json_write_arr_end(w);
    return 0;
  }
  return acp_json_write_strz(w, in) == 0 ? 0 : 1;
}

/* Ask each property of the schema on the terminal. Returns 0 with the
 * result in w, 1 when the user ended input (cancel). */
static int elicit_tty(acp_json_writer *w, const acp_json_val *params) {
  const acp_json_val *schema = acp_json_obj_getz(params, "requestedSchema");
  const acp_json_val *props = acp_json_obj_getz(schema, "properties");
  const acp_json_val *k;
  char line[1024], text[1024];
  fprintf(stderr, "acp mcp: the server asks: %s\n",
          str_of(acp_json_obj_getz(params, "message"), text, sizeof(text)));
  for (;;) {
    fprintf(stderr, "answer (a)ccept, (d)ecline or (c)ancel [a]: ");
    fflush(stderr);
    if (read_line(line, sizeof(line)) != 0)
      return 1;
    if (line[0] == 0 || strcasecmp(line, "a") == 0 ||
        strcasecmp(line, "accept") == 0)
      break;
    if (strcasecmp(line, "d") == 0 || strcasecmp(line, "decline") == 0) {
      acp_json_write_obj_begin(w);
      acp_json_write_keyz(w, "action");
      acp_json_write_strz(w, "decline");
      return acp_json_write_obj_end(w) == 0 ? 0 : 1;
    }
    if (strcasecmp(line, "c") == 0 || strcasecmp(line, "cancel") == 0)
      return 1;
  }
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "action");
  acp_json_write_strz(w, "accept");
  acp_json_write_keyz(w, "content");
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(props); k; k = acp_json_next(acp_json_next(k))) {
    const acp_json_val *pr = acp_json_next(k);
    const acp_json_val *def = acp_json_obj_getz(pr, "default");
    const acp_json_val *en = acp_json_obj_getz(pr, "enum");
    char name[256], type[32], desc[512];
    str_of(k, name, sizeof(name));
    str_of(acp_json_obj_getz(pr, "type"), type, sizeof(type));
    str_of(acp_json_obj_getz(pr, "description"), desc, sizeof(desc));
    for (;;) {
      size_t dl = 0, el = 0;
      const char *draw = acp_json_raw(def, &dl);
      const char *eraw = acp_json_raw(en, &el);
      fprintf(stderr, "  %s%s%s (%s)%s%.*s%s%.*s: ", name, desc[0] ? " - " : "",
              desc, type[0] ? type : "string", el ? " one of " : "", (int)el,
              eraw ? eraw : "", dl ? " [" : "", (int)dl, draw ? draw : "");
      if (dl)
        fputc(']', stderr);
      fflush(stderr);
      if (read_line(line, sizeof(line)) != 0)
        return 1;
      if (line[0] == 0) {
        if (def != NULL) {
          acp_json_write_key(w, name, strlen(name));
          acp_json_write_val(w, def);
        }
        break; /* left out (the server checks what it requires) */
      }
      {
        /* Write into a scratch writer first: a bad answer asks again. */
        acp_json_writer *one = NULL;
        const char *out;
        size_t on;
        int bad;
        if (acp_json_writer_new(&one, 0, NULL) != 0)
          return 1;
        bad = put_typed(one, type[0] ? type : "string", line);
        out = acp_json_writer_data(one, &on);
        if (!bad && out != NULL && on > 0) {
          acp_json_write_key(w, name, strlen(name));
          acp_json_write_raw(w, out, on);
        }
        acp_json_writer_free(one);
        if (!bad)
          break;
        fprintf(stderr, "  not a valid %s\n", type);
      }
    }
  }
  acp_json_write_obj_end(w);
  return acp_json_write_obj_end(w) == 0 ? 0 : 1;
}

static int on_elicitation(acp_mcp_client *c, acp_mcp_client_request *req,
                          const acp_json_val *params, void *ud) {
  mcli *m = ud;
  acp_json_writer *w = NULL;
  const char *out;
  size_t n;
  int rv;
  if (acp_json_writer_new(&w, 0, NULL) != 0)
    return acp_mcp_client_respond_error(c, req, -32603, "no memory");
  switch (m->elicit) {
  case ELICIT_JSON:
    acp_json_write_obj_begin(w);
    acp_json_write_keyz(w, "action");
    acp_json_write_strz(w, "accept");
    acp_json_write_keyz(w, "content");
    acp_json_write_raw(w, m->elicit_json, m->elicit_len);
    acp_json_write_obj_end(w);
    break;
  case ELICIT_ACCEPT: {
    const acp_json_val *props = acp_json_obj_getz(
        acp_json_obj_getz(params, "requestedSchema"), "properties");
    const acp_json_val *k;
    char name[256];
    acp_json_write_obj_begin(w);
    acp_json_write_keyz(w, "action");
    acp_json_write_strz(w, "accept");
    acp_json_write_keyz(w, "content");
    acp_json_write_obj_begin(w);
    for (k = acp_json_child(props); k; k = acp_json_next(acp_json_next(k))) {
      const acp_json_val *def = acp_json_obj_getz(acp_json_next(k), "default");
      if (def == NULL)
        continue;
      str_of(k, name, sizeof(name));
      acp_json_write_key(w, name, strlen(name));
      acp_json_write_val(w, def);
    }
    acp_json_write_obj_end(w);
    acp_json_write_obj_end(w);
    break;
  }
  case ELICIT_DECLINE:
    acp_json_write_obj_begin(w);
    acp_json_write_keyz(w, "action");
    acp_json_write_strz(w, "decline");
    acp_json_write_obj_end(w);
    break;
  default:
    if (elicit_tty(w, params) != 0) {
      acp_json_writer_reset(w);
      acp_json_write_obj_begin(w);
      acp_json_write_keyz(w, "action");
      acp_json_write_strz(w, "cancel");
      acp_json_write_obj_end(w);
    }
    break;
  }
  out = acp_json_writer_data(w, &n);
  rv = out != NULL ? acp_mcp_client_respond(c, req, out, n)
                   : acp_mcp_client_respond_error(c, req, -32603, "no memory");
  acp_json_writer_free(w);
  return rv;
}

/* FILE's JSON object for option `opt` (--elicit-json, --sample-json),
 * copied to *out; `need` lists members it must have (NULL-terminated, or
 * NULL). 0 or a CLI exit status, with the message printed. */
static int load_json_object(const char *opt, const char *path,
                            const char *const *need, const char *what,
                            char **out, size_t *out_len) {
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  size_t n = 0, cap = 0;
  acp_json_doc *doc = NULL;
  int ok = 0;
  if (f == NULL) {
    cli_err(SUB, "%s: cannot read '%s': %s", opt, path, strerror(errno));
    return CLI_EXIT_USAGE;
  }
  for (;;) {
    size_t r;
    if (n == cap) {
      char *nb;
      if (cap >= ((size_t)1 << 20)) {
        cli_err(SUB, "%s: '%s' is over 1 MiB", opt, path);
        break;
      }
      cap = cap ? cap * 2 : 4096;
      nb = realloc(buf, cap);
      if (nb == NULL)
        break;
      buf = nb;
    }
    r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0) {
      ok = !ferror(f);
      break;
    }
  }
  fclose(f);
  if (ok && acp_json_doc_new(&doc, NULL) == 0 &&
      acp_json_doc_parse(doc, buf, n, NULL) == 0 &&
      acp_json_type_of(acp_json_doc_root(doc)) == ACP_JSON_OBJECT) {
    size_t rl, k;
    const char *raw = acp_json_raw(acp_json_doc_root(doc), &rl);
    for (k = 0; need != NULL && need[k] != NULL; k++)
      if (acp_json_obj_getz(acp_json_doc_root(doc), need[k]) == NULL)
        break;
    if (need != NULL && need[k] != NULL)
      cli_err(SUB, "%s: '%s' is not %s (no \"%s\")", opt, path, what, need[k]);
    else if ((*out = malloc(rl)) != NULL) {
      memcpy(*out, raw, rl);
      *out_len = rl;
    }
  } else if (ok)
    cli_err(SUB, "%s: '%s' is not a JSON object", opt, path);
  acp_json_doc_free(doc);
  free(buf);
  return *out != NULL ? 0 : CLI_EXIT_USAGE;
}

/* MARK: - Sampling and roots */

/* --sample-reply TEXT: a CreateMessageResult with TEXT as the assistant's
 * text. */
static int sample_reply_json(mcli *m, const char *text) {
  acp_json_writer *w = NULL;
  const char *out;
  size_t n;
  int rv = acp_json_writer_new(&w, 0, NULL);
  if (rv != 0)
    return rv;
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "role");
  acp_json_write_strz(w, "assistant");
  acp_json_write_keyz(w, "content");
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "type");
  acp_json_write_strz(w, "text");
  acp_json_write_keyz(w, "text");
  acp_json_write_strz(w, text);
  acp_json_write_obj_end(w);
  acp_json_write_keyz(w, "model");
  acp_json_write_strz(w, "acp-mcp-call");
  acp_json_write_keyz(w, "stopReason");
  acp_json_write_strz(w, "endTurn");
  rv = acp_json_write_obj_end(w);
  out = acp_json_writer_data(w, &n);
  if (rv == 0 && out != NULL && (m->sample_json = malloc(n)) != NULL) {
    memcpy(m->sample_json, out, n);
    m->sample_len = n;
  } else
    rv = ACP_ERR_NOMEM;
  acp_json_writer_free(w);
  return rv;
}

/* One content block (or an array of them) on the terminal: text as is,
 * other blocks by their type. */
static void show_content(const acp_json_val *content) {
  const acp_json_val *b = content;
  char text[4096], type[64];
  if (acp_json_type_of(content) == ACP_JSON_ARRAY)
    b = acp_json_child(content);
  for (; b != NULL; b = acp_json_type_of(content) == ACP_JSON_ARRAY
                            ? acp_json_next(b)
                            : NULL) {
    str_of(acp_json_obj_getz(b, "type"), type, sizeof(type));
    if (strcmp(type, "text") == 0)
      fprintf(stderr, " %s",
              str_of(acp_json_obj_getz(b, "text"), text, sizeof(text)));
    else
      fprintf(stderr, " [%s]", type[0] ? type : "?");
  }
}

/* Show the sampling request on the terminal and read the reply: 0 with
 * the text in `reply`, 1 when the user rejects it (empty line, end of
 * input). */
static int sample_tty(const acp_json_val *params, char *reply, size_t cap) {
  const acp_json_val *msg;
  const acp_json_val *sys = acp_json_obj_getz(params, "systemPrompt");
  const acp_json_val *max = acp_json_obj_getz(params, "maxTokens");
  char text[4096];
  size_t ml = 0;
  const char *mraw = acp_json_raw(max, &ml);
  fprintf(stderr, "acp mcp: the server asks for a completion "
                  "(sampling/createMessage");
  if (mraw != NULL)
    fprintf(stderr, ", maxTokens %.*s", (int)ml, mraw);
  fprintf(stderr, "):\n");
  if (sys != NULL)
    fprintf(stderr, "  [system] %s\n", str_of(sys, text, sizeof(text)));
  for (msg = acp_json_child(acp_json_obj_getz(params, "messages")); msg;
       msg = acp_json_next(msg)) {
    fprintf(stderr, "  [%s]",
            str_of(acp_json_obj_getz(msg, "role"), text, sizeof(text)));
    show_content(acp_json_obj_getz(msg, "content"));
    fputc('\n', stderr);
  }
  fprintf(stderr, "reply as the assistant (empty line: reject): ");
  fflush(stderr);
  if (read_line(reply, cap) != 0 || reply[0] == 0)
    return 1;
  return 0;
}

static int on_sampling(acp_mcp_client *c, acp_mcp_client_request *req,
                       const acp_json_val *params, void *ud) {
  mcli *m = ud;
  char reply[4096];
  int rv;
  if (m->sample == SAMPLE_FIXED)
    return acp_mcp_client_respond(c, req, m->sample_json, m->sample_len);
  if (sample_tty(params, reply, sizeof(reply)) != 0) {
    /* The code and message the specification's example uses (at 2026 the
     * error ends the call: an input request has no way to decline). */
    fprintf(stderr, "acp mcp: sampling rejected\n");
    return acp_mcp_client_respond_error(c, req, -1,
                                        "User rejected sampling request");
  }
  rv = sample_reply_json(m, reply);
  if (rv == 0)
    rv = acp_mcp_client_respond(c, req, m->sample_json, m->sample_len);
  else
    rv = acp_mcp_client_respond_error(c, req, -32603, "no memory");
  free(m->sample_json);
  m->sample_json = NULL;
  return rv;
}

/* --root DIR: DIR as a file:// URI (absolute, percent-encoded) with its
 * last component as the name, appended to the roots/list result. 0 or a
 * CLI exit status. */
static int add_root(mcli *m, const char *dir) {
  static const char hex[] = "0123456789ABCDEF";
  char *abs = realpath(dir, NULL);
  const char *p, *base;
  char *uri;
  size_t k = 0;
  struct stat st;
  if (abs == NULL || stat(abs, &st) != 0 || !S_ISDIR(st.st_mode)) {
    cli_err(SUB, "--root: '%s' is not a directory%s%s", dir,
            abs == NULL ? ": " : "", abs == NULL ? strerror(errno) : "");
    free(abs);
    return CLI_EXIT_USAGE;
  }
  uri = malloc(7 + 3 * strlen(abs) + 1);
  if (uri == NULL ||
      (m->roots == NULL && acp_json_writer_new(&m->roots, 0, NULL) != 0)) {
    free(uri);
    free(abs);
    return CLI_EXIT_FAILURE;
  }
  if (acp_json_writer_data(m->roots, &k) == NULL || k == 0) {
    /* The first root: open the result (closed after the options). */
    acp_json_write_obj_begin(m->roots);
    acp_json_write_keyz(m->roots, "roots");
    acp_json_write_arr_begin(m->roots);
  }
  memcpy(uri, "file://", 7);
  k = 7;
  for (p = abs; *p; p++) {
    unsigned char ch = (unsigned char)*p;
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
        (ch >= '0' && ch <= '9') || strchr("-._~/", ch) != NULL)
      uri[k++] = (char)ch;
    else {
      uri[k++] = '%';
      uri[k++] = hex[ch >> 4];
      uri[k++] = hex[ch & 15];
    }
  }
  uri[k] = 0;
  base = strrchr(abs, '/');
  base = base != NULL && base[1] != 0 ? base + 1 : abs;
  acp_json_write_obj_begin(m->roots);
  acp_json_write_keyz(m->roots, "uri");
  acp_json_write_strz(m->roots, uri);
  acp_json_write_keyz(m->roots, "name");
  if (acp_json_write_strz(m->roots, base) == ACP_ERR_INVALID_ARGUMENT) {
    cli_err(SUB, "--root: '%s': the name is not valid UTF-8", dir);
    free(uri);
    free(abs);
    return CLI_EXIT_USAGE;
  }
  acp_json_write_obj_end(m->roots);
  free(uri);
  free(abs);
  return acp_json_writer_error(m->roots) == 0 ? 0 : CLI_EXIT_FAILURE;
}

static int on_roots_list(acp_mcp_client *c, acp_mcp_client_request *req,
                         const acp_json_val *params, void *ud) {
  mcli *m = ud;
  const char *out;
  size_t n;
  (void)params;
  out = acp_json_writer_data(m->roots, &n);
  return out != NULL
             ? acp_mcp_client_respond(c, req, out, n)
             : acp_mcp_client_respond_error(c, req, -32603, "no memory");
}

static int on_log(acp_mcp_client *c, acp_mcp_log_level level,
                  const char *logger, size_t ll, const acp_json_val *data,
                  void *ud) {
  size_t n = 0;
  const char *raw = acp_json_raw(data, &n);
  (void)c;
  (void)ud;
  fprintf(stderr, "log %s%s%.*s: %.*s\n", acp_mcp_log_level_str(level),
          logger ? " " : "", (int)ll, logger ? logger : "", (int)n,
          raw ? raw : "null");
  return 0;
}

static int on_initialized(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                          void *ud) {
  mcli *m = ud;
  acp_mcp_request_opts opts = ACP_MCP_REQUEST_OPTS_INIT;
  const char *args = NULL;
  size_t alen = 0;
  uint64_t now = uv_now(&m->loop);
  int rv = 0;
  (void)c;
  if (status == ACP_ERR_UNSUPPORTED) {
    cli_err(SUB, "the server does not speak the protocol revision asked "
                 "(try --protocol auto)");
    finish(m, CLI_EXIT_FAILURE);
    return 0;
  }
  if (status != 0) {
    print_rpc_error(msg, status);
    finish(m, CLI_EXIT_FAILURE);
    return 0;
  }
  if (m->args)
    args = acp_json_writer_data(m->args, &alen);
  switch (m->verb) {
  case V_TOOLS:
  case V_RESOURCES:
  case V_PROMPTS:
    if (m->json) {
      acp_json_write_obj_begin(m->out);
      acp_json_write_keyz(m->out, m->verb == V_TOOLS     ? "tools"
                                  : m->verb == V_PROMPTS ? "prompts"
                                                         : "resources");
      acp_json_write_arr_begin(m->out);
    }
    rv = start_list(m, m->verb == V_TOOLS     ? ACP_MCP_LIST_TOOLS
                       : m->verb == V_PROMPTS ? ACP_MCP_LIST_PROMPTS
                                              : ACP_MCP_LIST_RESOURCES);
    break;
  case V_CALL:
    opts.on_progress = on_progress;
    if (m->task)
      rv = acp_mcp_client_call_tool_task(m->c, m->name, args, alen, 0, &opts,
                                         now, on_task_state, m, NULL);
    else
      rv = acp_mcp_client_call_tool(m->c, m->name, args, alen, &opts, now,
                                    on_result, m, NULL);
    break;
  case V_READ:
    rv = acp_mcp_client_read_resource(m->c, m->name, NULL, now, on_result, m,
                                      NULL);
    break;
  case V_GET:
    rv = acp_mcp_client_get_prompt(m->c, m->name, args, alen, NULL, now,
                                   on_result, m, NULL);
    break;
  }
  if (rv != 0) {
    cli_err(SUB, "cannot send the request: %s", acp_strerror(rv));
    finish(m, CLI_EXIT_FAILURE);
  }
  return 0;
}

static void on_http_end(acp_http_client *hc, int reason, void *ud) {
  mcli *m = ud;
  if (!m->done) {
    cli_err(SUB, "connection ended: %s (%s)", acp_strerror(reason),
            acp_http_client_error(hc));
    finish(m, CLI_EXIT_FAILURE);
  }
}

static void on_rpc_end(acp_uv_rpc *r, int reason, void *ud) {
  mcli *m = ud;
  (void)r;
  if (!m->done) {
    cli_err(SUB, "the server closed the connection (%s)",
            reason ? acp_strerror(reason) : "end of input");
    finish(m, CLI_EXIT_FAILURE);
  }
}

/* key=value: JSON if it parses (always a string for prompts). */
static int add_arg(acp_json_writer *w, const char *kv, int strings_only) {
  const char *eq = strchr(kv, '=');
  const char *v;
  if (eq == NULL || eq == kv)
    return -1;
  v = eq + 1;
  acp_json_write_key(w, kv, (size_t)(eq - kv));
  if (!strings_only && *v && acp_json_validate(v, strlen(v), NULL) == 0)
    acp_json_write_raw(w, v, strlen(v));
  else
    acp_json_write_strz(w, v);
  return 0;
}

/* Whether --header gave an Authorization (then stored tokens stay out). */
static int has_authorization(const char **hdrs, size_t n) {
  size_t i;
  for (i = 0; i < n; i++)
    if (strncasecmp(hdrs[i], "Authorization:", 14) == 0)
      return 1;
  return 0;
}

static int cmd_client_verb(enum verb verb, int argc, char **argv) {
  mcli m;
  const char *url = NULL, *tname = "auto", *protocol = NULL;
  const char *hdrs[16];
  size_t nhdrs = 0, k;
  char **cmd = NULL;
  int ncmd = 0, i, ok, rv;
  uint64_t timeout = 60000;
  acp_http_transport mode = ACP_HTTP_AUTO;
  acp_mcp_client_callbacks *cbs = NULL;
  const char *elicit_opt = NULL;
  int need_name = verb >= V_CALL;
  memset(&m, 0, sizeof(m));
  m.verb = verb;
  for (i = 1; i < argc; i++) {
    const char *v = NULL;
    ok = 0;
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      mcli_free_opts(&m);
      return CLI_EXIT_OK;
    } else if (strcmp(argv[i], "--json") == 0)
      m.json = 1;
    else if (verb == V_CALL && strcmp(argv[i], "--task") == 0)
      m.task = 1;
    else if (strcmp(argv[i], "--accept") == 0 ||
             strcmp(argv[i], "--decline") == 0 ||
             (v = cli_opt_value(argc, argv, &i, "--elicit-json", &ok)) !=
                 NULL) {
      if (elicit_opt != NULL) {
        cli_err(SUB, "give one of --accept, --decline, --elicit-json");
        mcli_free_opts(&m);
        return CLI_EXIT_USAGE;
      }
      elicit_opt = argv[i];
      /* (v, not argv[i]: after "--elicit-json FILE" argv[i] is FILE.) */
      if (v == NULL && argv[i][2] == 'a')
        m.elicit = ELICIT_ACCEPT;
      else if (v == NULL)
        m.elicit = ELICIT_DECLINE;
      else {
        m.elicit = ELICIT_JSON;
        if ((rv = load_json_object("--elicit-json", v, NULL, NULL,
                                   &m.elicit_json, &m.elicit_len)) != 0) {
          mcli_free_opts(&m);
          return rv;
        }
      }
    } else if ((v = cli_opt_value(argc, argv, &i, "--sample-reply", &ok)) !=
               NULL) {
      if (m.sample != SAMPLE_NONE) {
        cli_err(SUB, "give one of --sample-reply, --sample-json");
        mcli_free_opts(&m);
        return CLI_EXIT_USAGE;
      }
      m.sample = SAMPLE_FIXED;
      if (sample_reply_json(&m, v) != 0) {
        cli_err(SUB, "--sample-reply: not valid UTF-8");
        mcli_free_opts(&m);
        return CLI_EXIT_USAGE;
      }
    } else if ((v = cli_opt_value(argc, argv, &i, "--sample-json", &ok)) !=
               NULL) {
      static const char *const need[] = {"role", "content", "model", NULL};
      if (m.sample != SAMPLE_NONE) {
        cli_err(SUB, "give one of --sample-reply, --sample-json");
        mcli_free_opts(&m);
        return CLI_EXIT_USAGE;
      }
      m.sample = SAMPLE_FIXED;
      if ((rv = load_json_object("--sample-json", v, need,
                                 "a CreateMessageResult", &m.sample_json,
                                 &m.sample_len)) != 0) {
        mcli_free_opts(&m);
        return rv;
      }
    } else if ((v = cli_opt_value(argc, argv, &i, "--root", &ok)) != NULL) {
      if ((rv = add_root(&m, v)) != 0) {
        mcli_free_opts(&m);
        return rv;
      }
    } else if ((v = cli_opt_value(argc, argv, &i, "--url", &ok)) != NULL)
      url = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--transport", &ok)) != NULL)
      tname = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--header", &ok)) != NULL) {
      if (nhdrs == sizeof(hdrs) / sizeof(hdrs[0])) {
        cli_err(SUB, "too many --header options");
        mcli_free_opts(&m);
        return CLI_EXIT_USAGE;
      }
      hdrs[nhdrs++] = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--timeout", &ok)) != NULL) {
      unsigned long long ms;

      if (cli_opt_uint(SUB, "--timeout", v, 0, 86400000, &ms) != 0) {
        mcli_free_opts(&m);
        return CLI_EXIT_USAGE;
      }
      timeout = ms;
    } else if ((v = cli_opt_value(argc, argv, &i, "--protocol", &ok)) != NULL)
      protocol = v;
    else if (strcmp(argv[i], "--stdio") == 0) {
      cmd = argv + i + 1;
      for (i = i + 1; i < argc; i++) {
        if (need_name && strcmp(argv[i], "--") == 0)
          break;
        ncmd++;
      }
    } else if (ok == 0 && argv[i][0] == '-' && argv[i][1] != 0) {
      cli_err(SUB, "unknown option '%s'", argv[i]);
      usage(stderr);
      mcli_free_opts(&m);
      return CLI_EXIT_USAGE;
    } else if (ok < 0) {
      mcli_free_opts(&m);
      return CLI_EXIT_USAGE;
    } else if (need_name && m.name == NULL)
      m.name = argv[i];
    else if (need_name && verb != V_READ) {
      if (m.args == NULL) {
        acp_json_writer_new(&m.args, 0, NULL);
        acp_json_write_obj_begin(m.args);
      }
      if (add_arg(m.args, argv[i], verb == V_GET) != 0) {
        cli_err(SUB, "argument '%s' is not key=value", argv[i]);
        mcli_free_opts(&m);
        return CLI_EXIT_USAGE;
      }
    } else {
      cli_err(SUB, "unexpected argument '%s'", argv[i]);
      mcli_free_opts(&m);
      return CLI_EXIT_USAGE;
    }
  }
  if (m.args)
    acp_json_write_obj_end(m.args);
  if (m.roots) {
    acp_json_write_arr_end(m.roots);
    acp_json_write_obj_end(m.roots);
  }
  if ((url == NULL) == (ncmd == 0) || (need_name && m.name == NULL)) {
    cli_err(SUB, "%s",
            (url == NULL) == (ncmd == 0)
                ? "give exactly one of --url URL or --stdio CMD"
                : "a NAME is required");
    usage(stderr);
    mcli_free_opts(&m);
    return CLI_EXIT_USAGE;
  }
  if (strcmp(tname, "auto") == 0)
    mode = ACP_HTTP_AUTO;
  else if (strcmp(tname, "streamable") == 0)
    mode = ACP_HTTP_STREAMABLE;
  else if (strcmp(tname, "sse") == 0)
    mode = ACP_HTTP_LEGACY_SSE;
  else {
    cli_err(SUB, "--transport is auto, streamable or sse");
    mcli_free_opts(&m);
    return CLI_EXIT_USAGE;
  }
  acp_uv_ignore_sigpipe();
  uv_loop_init(&m.loop);
  if (m.json)
    acp_json_writer_new(&m.out, 0, NULL);
  rv = acp_mcp_client_callbacks_new(&cbs);
  if (rv == 0) {
    acp_mcp_client_callbacks_set_on_log(cbs, on_log);
    /* Declared only when we can answer: on a terminal, or as told. */
    if (m.elicit == ELICIT_NONE && isatty(0) && isatty(2))
      m.elicit = ELICIT_TTY;
    if (m.elicit != ELICIT_NONE)
      acp_mcp_client_callbacks_set_on_elicitation(cbs, on_elicitation);
    if (m.sample == SAMPLE_NONE && isatty(0) && isatty(2))
      m.sample = SAMPLE_TTY;
    if (m.sample != SAMPLE_NONE)
      acp_mcp_client_callbacks_set_on_sampling(cbs, on_sampling);
    if (m.roots != NULL)
      acp_mcp_client_callbacks_set_on_roots_list(cbs, on_roots_list);
    rv = acp_mcp_client_new(&m.c, cbs, "acp-mcp", "0.1.0", &m, NULL);
  }
  acp_mcp_client_callbacks_free(cbs);
  if (rv == 0)
    acp_mcp_client_set_timeouts(m.c, timeout, 0);
  if (rv == 0 && m.task)
    rv = acp_mcp_client_set_tasks(m.c, 1);
  if (rv == 0 && acp_mcp_client_set_protocol(m.c, protocol) != 0) {
    cli_err(SUB,
            "--protocol is auto, 2026-07-28, 2025-11-25, 2025-06-18, "
            "2025-03-26 or 2024-11-05, not '%s'",
            protocol);
    acp_mcp_client_free(m.c);
    mcli_free_opts(&m);
    acp_json_writer_free(m.out);
    uv_loop_close(&m.loop);
    return CLI_EXIT_USAGE;
  }
  if (rv == 0 && url) {
    rv = acp_http_client_new(&m.hc, &m.loop, m.c, url, mode, on_http_end, &m,
                             NULL);
    if (rv != 0)
      cli_err(SUB, "bad URL '%s'", url);
    else if (m.task)
      /* A 2025 task that needs input while it runs sends its request when
       * no request of ours is in flight but the waiting tasks/result: a
       * server may put it on the standalone GET stream (the spec says to
       * expect it on any stream). */
      acp_http_client_set_get_stream(m.hc, 1);
    for (k = 0; rv == 0 && k < nhdrs; k++) {
      rv = cli_http_add_header(m.hc, hdrs[k]);
      if (rv != 0)
        cli_err(SUB, "bad --header '%s': 'Name: value' expected", hdrs[k]);
    }
    if (rv == 0 && !has_authorization(hdrs, nhdrs)) {
      /* Tokens stored by `acp mcp login URL`. */
      char *h = NULL;
      if (cli_mcp_stored_auth(url, &h))
        rv = cli_http_add_header(m.hc, h);
      if (h != NULL) {
        memset(h, 0, strlen(h));
        free(h);
      }
    }
    if (rv == ACP_ERR_INVALID_ARGUMENT)
      m.status = CLI_EXIT_USAGE;
  } else if (rv == 0) {
    acp_uv_process_options *po = NULL;
    char **av = calloc((size_t)ncmd + 1, sizeof(char *));
    int uverr = 0;
    if (av == NULL)
      rv = ACP_ERR_NOMEM;
    else
      memcpy(av, cmd, (size_t)ncmd * sizeof(char *));
    if (rv == 0)
      rv = acp_uv_process_options_new(&po, NULL);
    if (rv == 0)
      rv = acp_uv_process_options_set_argv(po, (const char *const *)av);
    if (rv == 0)
      rv = acp_uv_process_spawn(&m.proc, &m.loop, po, &m, NULL, &uverr);
    if (rv != 0)
      cli_err(SUB, "cannot start '%s': %s", cmd[0],
              uverr ? uv_strerror(uverr) : acp_strerror(rv));
    acp_uv_process_options_free(po);
    free(av);
    if (rv == 0)
      rv = acp_uv_rpc_new(&m.rpc, acp_uv_process_link(m.proc),
                          acp_mcp_client_session(m.c), on_rpc_end, &m, NULL);
  }
  if (rv == 0)
    rv = acp_mcp_client_initialize(m.c, uv_now(&m.loop), on_initialized, &m);
  if (rv != 0)
    finish(&m, m.status ? m.status : CLI_EXIT_FAILURE);
  uv_run(&m.loop, UV_RUN_DEFAULT);
  uv_loop_close(&m.loop);
  acp_mcp_client_free(m.c);
  mcli_free_opts(&m);
  acp_json_writer_free(m.out);
  fflush(stdout);
  return m.status;
}

int cmd_mcp(int argc, char **argv) {
  static const struct {
    const char *name;
    enum verb verb;
  } verbs[] = {{"tools", V_TOOLS},     {"resources", V_RESOURCES},
               {"prompts", V_PROMPTS}, {"call", V_CALL},
               {"read", V_READ},       {"get", V_GET}};
  size_t i;
  if (argc < 2 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "--help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
  }
  if (strcmp(argv[1], "serve") == 0)
    return cmd_serve(argc - 1, argv + 1);
  if (strcmp(argv[1], "relay") == 0)
    return cmd_mcp_relay(argc - 1, argv + 1);
  if (strcmp(argv[1], "http-bridge") == 0)
    return cmd_mcp_http_bridge(argc - 1, argv + 1);
  if (strcmp(argv[1], "login") == 0)
    return cmd_mcp_login(argc - 1, argv + 1);
  if (strcmp(argv[1], "logout") == 0)
    return cmd_mcp_logout(argc - 1, argv + 1);
  for (i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
    if (strcmp(argv[1], verbs[i].name) == 0)
      return cmd_client_verb(verbs[i].verb, argc - 1, argv + 1);
  cli_err(SUB, "unknown command '%s'", argv[1]);
  usage(stderr);
  return CLI_EXIT_USAGE;
}
