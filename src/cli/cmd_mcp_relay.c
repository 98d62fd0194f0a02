/*
 * `acp mcp relay`: a stdio MCP server that is an HTTP MCP server. JSON-RPC
 * lines read on stdin are POSTed unchanged to the server (Streamable HTTP,
 * or legacy HTTP+SSE) by a raw-mode acp_http_client; every message the
 * server sends is written to stdout, one per line. This lets a program that
 * speaks only stdio MCP (the reference agent, which does not link libcurl)
 * use an HTTP MCP server declared in ACP session/new.
 */
#include "cli.h"

#include "acp/http.h"
#include "acp/json.h"
#include "acp/ndjson.h"
#include "acp/uv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SUB "mcp relay"

/* After end of input, how long answers still owed are awaited. */
#define RELAY_DRAIN_MS 30000
/* How long the session's DELETE and stdout's flush may take at the end. */
#define RELAY_DELETE_MS 2000
#define RELAY_FLUSH_MS 10000

static const char usage_text[] =
    "usage: acp mcp relay --url URL [--header 'Name: value']...\n"
    "                     [--sse | --streamable] [--]\n"
    "\n"
    "A stdio MCP server that forwards to an HTTP MCP server: each JSON-RPC\n"
    "message read on stdin (one per line) is POSTed to URL as it is, and\n"
    "every message of the server (answers, and requests and notifications\n"
    "on the POST streams or the standalone GET stream, opened after\n"
    "initialize) is written to stdout, one per line. MCP-Session-Id and\n"
    "MCP-Protocol-Version are handled; the session is DELETEd at the end.\n"
    "A line that is not JSON is answered with a -32700 error (-32600 for\n"
    "JSON that is not an object or array, or a line over the cap) and\n"
    "skipped.\n"
    "\n"
    "options:\n"
    "  --url URL               the server (http:// or https://)\n"
    "  --header 'Name: value'  add a header to every request (repeatable),\n"
    "                          e.g. 'Authorization: Bearer TOKEN'\n"
    "  --streamable            Streamable HTTP only\n"
    "  --sse                   legacy HTTP+SSE only (URL is the /sse stream)\n"
    "                          default: Streamable HTTP, falling back to\n"
    "                          legacy HTTP+SSE on 400/404/405\n"
    "  --max-line BYTES        longest input line (default 64 MiB)\n"
    "  -h, --help              this help\n"
    "\n"
    "End of stdin (or SIGTERM/SIGINT) ends the relay once the requests\n"
    "already sent are answered (at most 30 s).\n"
    "\n"
    "exit status: 0 end of input; 1 the HTTP session failed or ended (the\n"
    "reason is on stderr); 2 bad command line.\n";

int cli_http_add_header(acp_http_client *hc, const char *spec) {
  const char *colon = strchr(spec, ':');
  const char *v;
  char *name;
  size_t nl;
  int rv;
  if (colon == NULL || colon == spec)
    return ACP_ERR_INVALID_ARGUMENT;
  nl = (size_t)(colon - spec);
  name = malloc(nl + 1);
  if (name == NULL)
    return ACP_ERR_NOMEM;
  memcpy(name, spec, nl);
  name[nl] = 0;
  v = colon + 1;
  while (*v == ' ' || *v == '\t')
    v++;
  rv = acp_http_client_add_header(hc, name, v);
  free(name);
  return rv;
}

typedef struct relay {
  uv_loop_t loop;
  acp_http_client *hc;
  acp_uv_link *io;
  acp_uv_signals *sig;
  uv_timer_t drain;
  acp_json_doc *doc;
  acp_ndjson in; /* frames stdin */
  char **ids;    /* raw ids of requests sent and not answered yet */
  size_t nids, capids;
  bool eof;
  bool closing;
  int status;
} relay;

static void relay_end(relay *r, int status);

static void write_line(relay *r, const char *s, size_t n) {
  int rv;
  if (r->io == NULL)
    return;
  rv = acp_uv_link_write(r->io, s, n);
  if (rv == 0)
    rv = acp_uv_link_write(r->io, "\n", 1);
  /* ACP_ERR_CLOSED: stdout is gone, which its own end reports. Anything
   * else lost a message the client waits for: stop. */
  if (rv != 0 && rv != ACP_ERR_CLOSED) {
    cli_err("mcp relay", "cannot write to stdout: %s", acp_strerror(rv));
    relay_end(r, CLI_EXIT_FAILURE);
  }
}

static void write_error(relay *r, int code, const char *message) {
  char buf[160];
  int n = snprintf(buf, sizeof(buf),
                   "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":%d,"
                   "\"message\":\"%s\"}}",
                   code, message);
  if (n > 0 && (size_t)n < sizeof(buf))
    write_line(r, buf, (size_t)n);
}

/* MARK: - Requests owed an answer */

static int pending_add(relay *r, const char *id, size_t n) {
  char *s;
  if (r->nids == r->capids) {
    size_t cap = r->capids ? r->capids * 2 : 16;
    char **p = realloc(r->ids, cap * sizeof(*p));
    if (p == NULL)
      return ACP_ERR_NOMEM;
    r->ids = p;
    r->capids = cap;
  }
  s = malloc(n + 1);
  if (s == NULL)
    return ACP_ERR_NOMEM;
  memcpy(s, id, n);
  s[n] = 0;
  r->ids[r->nids++] = s;
  return 0;
}

static void pending_remove(relay *r, const char *id, size_t n) {
  size_t i;
  for (i = 0; i < r->nids; i++)
    if (strlen(r->ids[i]) == n && memcmp(r->ids[i], id, n) == 0) {
      free(r->ids[i]);
      r->ids[i] = r->ids[--r->nids];
      return;
    }
}

/* Each request in `v` (a message or a batch): remember (add) or forget. */
static void track(relay *r, const acp_json_val *v, bool add) {
  const acp_json_val *e, *id;
  const char *raw;
  size_t n;
  if (acp_json_type_of(v) == ACP_JSON_ARRAY) {
    for (e = acp_json_child(v); e; e = acp_json_next(e))
      track(r, e, add);
    return;
  }
  id = acp_json_obj_getz(v, "id");
  if (id == NULL || acp_json_type_of(id) == ACP_JSON_NULL)
    return;
  if ((acp_json_obj_getz(v, "method") != NULL) != add)
    return;
  raw = acp_json_raw(id, &n);
  if (add)
    (void)pending_add(r, raw, n);
  else
    pending_remove(r, raw, n);
}

static void maybe_finish(relay *r) {
  if (r->eof && r->nids == 0)
    relay_end(r, CLI_EXIT_OK);
}

/* MARK: - HTTP side */

static void on_msg(acp_http_client *hc, const char *msg, size_t len, void *ud) {
  relay *r = ud;
  (void)hc;
  write_line(r, msg, len);
  if (r->nids > 0 && acp_json_doc_parse(r->doc, msg, len, NULL) == 0) {
    track(r, acp_json_doc_root(r->doc), false);
    maybe_finish(r);
  }
}

static void on_http_end(acp_http_client *hc, int reason, void *ud) {
  relay *r = ud;
  if (r->closing)
    return;
  cli_err(SUB, "connection ended: %s (%s)", acp_strerror(reason),
          acp_http_client_error(hc));
  relay_end(r, CLI_EXIT_FAILURE);
}

/* MARK: - stdin side */

static void handle_line(relay *r, const char *s, size_t n) {
  size_t a = 0;
  int rv;
  while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
    n--;
  while (a < n && (s[a] == ' ' || s[a] == '\t'))
    a++;
  if (a == n)
    return; /* blank line */
  if (acp_json_doc_parse(r->doc, s + a, n - a, NULL) != 0) {
    write_error(r, -32700, "Parse error");
    return;
  }
  if (acp_json_type_of(acp_json_doc_root(r->doc)) != ACP_JSON_OBJECT &&
      acp_json_type_of(acp_json_doc_root(r->doc)) != ACP_JSON_ARRAY) {
    write_error(r, -32600, "Invalid Request");
    return;
  }
  track(r, acp_json_doc_root(r->doc), true);
  rv = acp_http_client_send_raw(r->hc, s + a, n - a);
  if (rv != 0 && !r->closing) {
    cli_err(SUB, "cannot send: %s", acp_strerror(rv));
    relay_end(r, CLI_EXIT_FAILURE);
  }
}

static void on_drain_timeout(uv_timer_t *t) {
  relay *r = t->data;
  cli_err(SUB, "%zu request(s) still unanswered at the end of input", r->nids);
  relay_end(r, CLI_EXIT_OK);
}

static void on_input_end(relay *r) {
  if (r->eof)
    return;
  r->eof = true;
  if (r->nids > 0)
    uv_timer_start(&r->drain, on_drain_timeout, RELAY_DRAIN_MS, 0);
  maybe_finish(r);
}

static void on_overlong(relay *r) {
  char reply[ACP_NDJSON_REPLY_MAX];
  size_t n = acp_ndjson_overlong_reply(reply, sizeof(reply),
                                       acp_ndjson_max_line(&r->in));
  write_line(r, reply, n);
}

static void on_read(acp_uv_link *link, int status, const char *data, size_t len,
                    void *ud) {
  relay *r = ud;
  const char *line;
  size_t n, used;
  int rv;
  (void)link;
  if (status != 0) {
    if (status != UV_EOF)
      cli_err(SUB, "cannot read stdin: %s", uv_strerror(status));
    rv = acp_ndjson_finish(&r->in, &line, &n);
    if (rv == ACP_NDJSON_LINE && !r->closing)
      handle_line(r, line, n);
    else if (rv == ACP_NDJSON_OVERLONG && !r->closing)
      on_overlong(r);
    on_input_end(r);
    return;
  }
  while (len > 0 && !r->closing) {
    rv = acp_ndjson_next(&r->in, data, len, &used, &line, &n);
    data += used;
    len -= used;
    if (rv == ACP_NDJSON_NEED_MORE)
      break;
    if (rv == ACP_NDJSON_LINE)
      handle_line(r, line, n);
    else if (rv == ACP_NDJSON_OVERLONG)
      on_overlong(r);
    else {
      cli_err(SUB, "out of memory");
      relay_end(r, CLI_EXIT_FAILURE);
      return;
    }
  }
}

static void on_signal(acp_uv_signals *sig, int signum, void *ud) {
  relay *r = ud;
  (void)sig;
  (void)signum;
  on_input_end(r);
}

/* MARK: - Ending */

static void on_hc_closed(acp_http_client *hc, void *ud) {
  relay *r = ud;
  (void)hc;
  if (r->io) {
    acp_uv_link_close(r->io, RELAY_FLUSH_MS, NULL, NULL);
    r->io = NULL;
  }
}

static void relay_end(relay *r, int status) {
  if (r->closing)
    return;
  r->closing = true;
  r->status = status;
  if (r->io)
    acp_uv_link_read_stop(r->io);
  if (r->sig) {
    acp_uv_signals_close(r->sig);
    r->sig = NULL;
  }
  uv_close((uv_handle_t *)&r->drain, NULL);
  if (r->hc) {
    acp_http_client_close(r->hc, RELAY_DELETE_MS, on_hc_closed, r);
    r->hc = NULL;
  } else
    on_hc_closed(NULL, r);
}

/* MARK: - Command */

int cmd_mcp_relay(int argc, char **argv) {
  relay r;
  const char *url = NULL;
  const char **headers = NULL;
  size_t nheaders = 0, k;
  acp_http_transport mode = ACP_HTTP_AUTO;
  size_t max_line = ACP_NDJSON_DEFAULT_MAX_LINE;
  int i, ok, rv, status;
  headers = calloc((size_t)argc + 1, sizeof(*headers));
  if (headers == NULL)
    return CLI_EXIT_FAILURE;
  for (i = 1; i < argc; i++) {
    const char *v;
    ok = 0;
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(usage_text, stdout);
      free(headers);
      return CLI_EXIT_OK;
    } else if (strcmp(argv[i], "--sse") == 0)
      mode = ACP_HTTP_LEGACY_SSE;
    else if (strcmp(argv[i], "--streamable") == 0)
      mode = ACP_HTTP_STREAMABLE;
    else if ((v = cli_opt_value(argc, argv, &i, "--url", &ok)) != NULL)
      url = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--header", &ok)) != NULL)
      headers[nheaders++] = v;
    else if ((v = cli_opt_value(argc, argv, &i, "--max-line", &ok)) != NULL) {
      char *end;
      unsigned long long m = strtoull(v, &end, 10);
      if (*v < '0' || *v > '9' || *end != '\0' || m == 0 || m > SIZE_MAX) {
        cli_err(SUB, "bad --max-line '%s': a positive byte count expected", v);
        free(headers);
        return CLI_EXIT_USAGE;
      }
      max_line = (size_t)m;
    } else if (strcmp(argv[i], "--") == 0 && i + 1 == argc)
      break;
    else {
      if (ok >= 0)
        cli_err(SUB, "unexpected argument '%s'", argv[i]);
      fputs(usage_text, stderr);
      free(headers);
      return CLI_EXIT_USAGE;
    }
  }
  if (url == NULL) {
    cli_err(SUB, "--url URL is required");
    fputs(usage_text, stderr);
    free(headers);
    return CLI_EXIT_USAGE;
  }
  memset(&r, 0, sizeof(r));
  acp_ndjson_init(&r.in, max_line, NULL);
  acp_uv_ignore_sigpipe();
  uv_loop_init(&r.loop);
  uv_timer_init(&r.loop, &r.drain);
  r.drain.data = &r;
  status = CLI_EXIT_OK;
  rv = acp_json_doc_new(&r.doc, NULL);
  if (rv == 0) {
    rv = acp_http_client_new_raw(&r.hc, &r.loop, url, mode, on_msg, on_http_end,
                                 &r, NULL);
    if (rv == ACP_ERR_INVALID_ARGUMENT) {
      cli_err(SUB, "bad URL '%s' (http:// or https:// expected)", url);
      status = CLI_EXIT_USAGE;
    }
  }
  for (k = 0; rv == 0 && k < nheaders; k++) {
    rv = cli_http_add_header(r.hc, headers[k]);
    if (rv == ACP_ERR_INVALID_ARGUMENT) {
      cli_err(SUB, "bad --header '%s': 'Name: value' on one line expected",
              headers[k]);
      status = CLI_EXIT_USAGE;
    }
  }
  if (rv == 0) {
    /* Tokens stored by `acp mcp login URL`, unless --header gave one. */
    char *h = NULL;
    int given = 0;
    for (k = 0; k < nheaders; k++)
      given |= strncasecmp(headers[k], "Authorization:", 14) == 0;
    if (!given && cli_mcp_stored_auth(url, &h))
      rv = cli_http_add_header(r.hc, h);
    if (h != NULL) {
      memset(h, 0, strlen(h));
      free(h);
    }
  }
  if (rv == 0) {
    acp_http_client_set_get_stream(r.hc, 1);
    rv = acp_uv_link_new_fds(&r.io, &r.loop, 0, 1, NULL);
    if (rv == 0)
      rv = acp_uv_link_read_start(r.io, on_read, &r);
    if (rv == 0)
      rv = acp_uv_signals_new(&r.sig, &r.loop, on_signal, &r, NULL);
  }
  if (rv != 0) {
    if (status == CLI_EXIT_OK) {
      cli_err(SUB, "cannot start: %s", acp_strerror(rv));
      status = CLI_EXIT_FAILURE;
    }
    relay_end(&r, status);
  }
  uv_run(&r.loop, UV_RUN_DEFAULT);
  uv_loop_close(&r.loop);
  acp_json_doc_free(r.doc);
  for (k = 0; k < r.nids; k++)
    free(r.ids[k]);
  free(r.ids);
  acp_ndjson_dispose(&r.in);
  free(headers);
  return r.status;
}
