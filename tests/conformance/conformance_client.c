/*
 * conformance_client - the MCP client the conformance suite's client mode
 * runs once per scenario, built on our MCP client (acp/mcp.h) and its HTTP
 * transport (acp/http.h).
 *
 *   conformance_client [--legacy] URL
 *
 * The scenario comes from MCP_CONFORMANCE_SCENARIO, the protocol version to
 * ask (optional) from MCP_CONFORMANCE_PROTOCOL_VERSION. The mock server's
 * URL is the last argument. Behaviour per scenario:
 *
 *   initialize      initialize, tools/list, close.
 *   tools_call      initialize, tools/list, call every listed tool with
 *                   arguments made from its inputSchema (numbers 1, 2, ...,
 *                   strings "test", booleans true), close.
 *   elicitation-sep1034-client-defaults
 *                   open the standalone GET stream (the mock's tool asks on
 *                   it); answer every elicitation/create with action
 *                   "accept" and content holding each requested property's
 *                   `default`; call every listed tool once the server has
 *                   answered the GET (acp_http_client_set_get_cb()).
 *   sse-retry       initialize, tools/list, call every listed tool: the
 *                   transport honours the SSE `retry` field and resumes with
 *                   Last-Event-ID.
 *   json-schema-2020-12-preservation
 *                   call the tool that takes a `schema` object with the
 *                   inputSchema of json_schema_2020_12_tool, verbatim.
 *   a scenario whose MCP_CONFORMANCE_CONTEXT has "toolCalls"
 *                   initialize (or discover), tools/list, then exactly
 *                   those calls (name and arguments from the context) of
 *                   the tools still listed.
 *   anything else   the same as tools_call. A run that ends in HTTP 401
 *                   (or 403 insufficient_scope) authorizes with
 * acp_http_oauth_* (the authorization URL fetched without following its
 *                   redirect) and runs again with the bearer token.
 *
 * Every run also declares sampling (answered with a fixed assistant text)
 * and roots (one root, file:///tmp). Exit status: 0 when every step
 * succeeded, 1 otherwise (with the reason on stderr), 2 for usage.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "acp/http.h"
#include "acp/json.h"
#include "acp/mcp.h"

/* The whole run must end within this (the suite's own timeout is 30 s). */
#define CC_DEADLINE_MS 25000
/* Per-request inactivity timeout (reset by progress). */
#define CC_REQUEST_TIMEOUT_MS 20000

typedef struct cc {
  uv_loop_t *loop;
  uv_timer_t deadline;
  acp_mcp_client *client;
  acp_http_client *http;
  const char *scenario;
  int failed;         /* nonzero: exit 1 */
  bool finished;      /* closing started */
  bool tools_waiting; /* tools/call waits for the GET stream */
  bool closed;
  /* tools to call after tools/list: names and argument objects */
  char **tool_names;
  char **tool_args;
  size_t ntools;
  size_t next_tool;
  /* how the last transport ended, for the OAuth flow */
  long end_status;
  char *www_auth;
} cc;

static cc G;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("conformance_client: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static uint64_t now_ms(void) {
  return uv_now(G.loop);
}

/* MARK: - Ending */

static void on_http_closed(acp_http_client *hc, void *ud) {
  (void)hc;
  (void)ud;
  G.closed = true;
}

static void on_timer_closed(uv_handle_t *h) {
  (void)h;
}

static void finish(int failed) {
  if (G.finished)
    return;
  G.finished = true;
  if (failed)
    G.failed = 1;
  uv_timer_stop(&G.deadline);
  uv_close((uv_handle_t *)&G.deadline, on_timer_closed);
  G.end_status = acp_http_client_last_status(G.http);
  {
    const char *wa = acp_http_client_www_authenticate(G.http);
    free(G.www_auth);
    G.www_auth = wa ? strdup(wa) : NULL;
  }
  /* DELETE the session (bounded), then release the transport. */
  acp_http_client_close(G.http, 2000, on_http_closed, NULL);
  G.http = NULL;
}

static void on_deadline(uv_timer_t *t) {
  (void)t;
  say("scenario %s did not finish within %d ms", G.scenario, CC_DEADLINE_MS);
  finish(1);
}

static void on_http_end(acp_http_client *hc, int reason, void *ud) {
  (void)ud;
  if (G.finished)
    return;
  say("transport ended: %d (HTTP %ld, %s)", reason,
      acp_http_client_last_status(hc), acp_http_client_error(hc));
  finish(1);
}

/* MARK: - JSON helpers */

static char *dup_str(acp_json_doc *doc, const acp_json_val *v) {
  const char *p;
  size_t n;
  char *s;

  if (acp_json_doc_str(doc, v, &p, &n) != 0)
    return NULL;
  s = malloc(n + 1);
  if (s == NULL)
    return NULL;
  memcpy(s, p, n);
  s[n] = '\0';
  return s;
}

/* Write the (decoded) text of object key `key` as a key. */
static int write_key_of(acp_json_writer *w, const acp_json_val *key) {
  char buf[512];
  size_t n = 0;
  int rv = acp_json_str_unescape(key, buf, sizeof(buf), &n);

  if (rv != 0)
    return rv;
  return acp_json_write_key(w, buf, n);
}

/*
 * Arguments for a tool from its inputSchema: every property gets a value of
 * its type (its `default` when it has one). Returns a malloc'ed JSON object.
 */
static char *args_for_schema(const acp_json_val *schema) {
  const acp_json_val *props = acp_json_obj_getz(schema, "properties");
  const acp_json_val *p;
  acp_json_writer *w = NULL;
  const char *data;
  size_t n;
  int64_t num = 1;
  char *out = NULL;

  if (acp_json_writer_new(&w, 0, NULL) != 0)
    return NULL;
  acp_json_write_obj_begin(w);
  for (p = acp_json_child(props); p != NULL; p = acp_json_next(p)) {
    /* Object members: the child is the key, its next the value. */
    const acp_json_val *key = p;
    const acp_json_val *val = acp_json_next(p);
    const acp_json_val *type, *def;

    if (val == NULL)
      break;
    p = val;
    if (write_key_of(w, key) != 0)
      break;
    def = acp_json_obj_getz(val, "default");
    type = acp_json_obj_getz(val, "type");
    if (def != NULL)
      acp_json_write_val(w, def);
    else if (ACP_JSON_STR_EQ_LIT(type, "number") ||
             ACP_JSON_STR_EQ_LIT(type, "integer"))
      acp_json_write_int(w, num++);
    else if (ACP_JSON_STR_EQ_LIT(type, "boolean"))
      acp_json_write_bool(w, true);
    else if (ACP_JSON_STR_EQ_LIT(type, "object"))
      acp_json_write_raw(w, "{}", 2);
    else if (ACP_JSON_STR_EQ_LIT(type, "array"))
      acp_json_write_raw(w, "[]", 2);
    else
      acp_json_write_strz(w, "test");
  }
  if (acp_json_write_obj_end(w) == 0) {
    data = acp_json_writer_data(w, &n);
    out = malloc(n + 1);
    if (out != NULL) {
      memcpy(out, data, n);
      out[n] = '\0';
    }
  }
  acp_json_writer_free(w);
  return out;
}

/* {"schema": <v verbatim>}, malloc'ed. */
static char *wrap_schema_arg(const acp_json_val *v) {
  size_t n;
  const char *raw = acp_json_raw(v, &n);
  char *out = malloc(n + 13);

  if (out == NULL || raw == NULL) {
    free(out);
    return NULL;
  }
  memcpy(out, "{\"schema\":", 10);
  memcpy(out + 10, raw, n);
  out[10 + n] = '}';
  out[11 + n] = '\0';
  return out;
}

/* MARK: - Client request handlers */

/* elicitation/create: accept with every property's default (SEP-1034). */
static int on_elicitation(acp_mcp_client *c, acp_mcp_client_request *req,
                          const acp_json_val *params, void *ud) {
  const acp_json_val *schema = acp_json_obj_getz(params, "requestedSchema");
  const acp_json_val *props = acp_json_obj_getz(schema, "properties");
  const acp_json_val *p;
  acp_json_writer *w = NULL;
  const char *data;
  size_t n;
  int rv;

  (void)ud;
  say("elicitation/create received; accepting with the schema's defaults");
  if (acp_json_writer_new(&w, 0, NULL) != 0)
    return acp_mcp_client_respond_error(c, req, -32603, "out of memory");
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "action");
  acp_json_write_strz(w, "accept");
  acp_json_write_keyz(w, "content");
  acp_json_write_obj_begin(w);
  for (p = acp_json_child(props); p != NULL; p = acp_json_next(p)) {
    const acp_json_val *val = acp_json_next(p);
    const acp_json_val *key = p;
    const acp_json_val *def;

    if (val == NULL)
      break;
    def = acp_json_obj_getz(val, "default");
    p = val;
    if (def == NULL)
      continue;
    if (write_key_of(w, key) != 0)
      break;
    acp_json_write_val(w, def);
  }
  acp_json_write_obj_end(w);
  rv = acp_json_write_obj_end(w);
  if (rv == 0) {
    data = acp_json_writer_data(w, &n);
    rv = acp_mcp_client_respond(c, req, data, n);
  }
  acp_json_writer_free(w);
  return rv;
}

static int on_sampling(acp_mcp_client *c, acp_mcp_client_request *req,
                       const acp_json_val *params, void *ud) {
  static const char r[] =
      "{\"role\":\"assistant\",\"content\":{\"type\":\"text\",\"text\":"
      "\"This is a response from the conformance client\"},\"model\":"
      "\"conformance-client\",\"stopReason\":\"endTurn\"}";
  (void)params;
  (void)ud;
  return acp_mcp_client_respond(c, req, r, sizeof(r) - 1);
}

static int on_roots(acp_mcp_client *c, acp_mcp_client_request *req,
                    const acp_json_val *params, void *ud) {
  static const char r[] =
      "{\"roots\":[{\"uri\":\"file:///tmp\",\"name\":\"tmp\"}]}";
  (void)params;
  (void)ud;
  return acp_mcp_client_respond(c, req, r, sizeof(r) - 1);
}

/* MARK: - Scenario steps */

static void call_next_tool(void);

/* The GET stream is up (or will not be): call the tools if they wait. */
static void on_get_state(acp_http_client *hc, acp_http_get_state st, void *ud) {
  (void)hc;
  (void)ud;
  if (st == ACP_HTTP_GET_REFUSED)
    say("the server refused the GET stream");
  if (G.tools_waiting) {
    G.tools_waiting = false;
    call_next_tool();
  }
}

static int on_tool_result(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                          void *ud) {
  size_t i = (size_t)(uintptr_t)ud;
  (void)c;
  if (status != 0) {
    if (status == ACP_ERR_PROTOCOL)
      say("tools/call %s: error %lld %.*s", G.tool_names[i],
          (long long)msg->error_code, (int)msg->error_message_len,
          msg->error_message);
    else
      say("tools/call %s: status %d", G.tool_names[i], status);
    finish(1);
    return 0;
  } else {
    size_t n;
    const char *raw = acp_json_raw(msg->result, &n);
    printf("tools/call %s: %.*s\n", G.tool_names[i], (int)n, raw);
  }
  call_next_tool();
  return 0;
}

static void call_next_tool(void) {
  size_t i = G.next_tool;
  int rv;

  if (G.finished)
    return;
  if (i >= G.ntools) {
    finish(0);
    return;
  }
  G.next_tool++;
  rv = acp_mcp_client_call_tool(G.client, G.tool_names[i], G.tool_args[i],
                                strlen(G.tool_args[i]), NULL, now_ms(),
                                on_tool_result, (void *)(uintptr_t)i, NULL);
  if (rv != 0) {
    say("cannot send tools/call: %d", rv);
    finish(1);
  }
}

/*
 * The calls a scenario names in MCP_CONFORMANCE_CONTEXT {"toolCalls":
 * [{"name", "arguments"}]}, made instead of the generated ones when given
 * (http-custom-headers: values chosen to test header encoding, a null that
 * must give no header). Only tools the listed `tools` still have are called
 * (the client drops tools whose x-mcp-header is invalid). Returns 1 when
 * the context named calls (G.tool_* filled), 0 otherwise.
 */
static int context_tool_calls(const acp_json_val *tools) {
  const char *ctx = getenv("MCP_CONFORMANCE_CONTEXT");
  const acp_json_val *calls, *tc, *t;
  acp_json_doc *doc = NULL;
  size_t n;
  int named = 0;

  if (ctx == NULL || acp_json_doc_new(&doc, NULL) != 0)
    return 0;
  if (acp_json_doc_parse(doc, ctx, strlen(ctx), NULL) != 0) {
    acp_json_doc_free(doc);
    return 0;
  }
  calls = acp_json_obj_getz(acp_json_doc_root(doc), "toolCalls");
  n = acp_json_len(calls);
  if (acp_json_type_of(calls) == ACP_JSON_ARRAY && n > 0) {
    named = 1;
    G.tool_names = calloc(n, sizeof(char *));
    G.tool_args = calloc(n, sizeof(char *));
    for (tc = acp_json_child(calls); tc != NULL && G.tool_names && G.tool_args;
         tc = acp_json_next(tc)) {
      const acp_json_val *name = acp_json_obj_getz(tc, "name");
      const acp_json_val *args = acp_json_obj_getz(tc, "arguments");
      const char *raw;
      size_t rn;
      bool listed = false;

      for (t = acp_json_child(tools); t != NULL; t = acp_json_next(t)) {
        const acp_json_val *tn = acp_json_obj_getz(t, "name");
        size_t ln;
        const char *lr = acp_json_raw(tn, &ln);
        const char *cr = acp_json_raw(name, &rn);
        if (lr && cr && ln == rn && memcmp(lr, cr, ln) == 0)
          listed = true;
      }
      if (!listed || acp_json_type_of(name) != ACP_JSON_STRING)
        continue;
      G.tool_names[G.ntools] = dup_str(doc, name);
      raw = args ? acp_json_raw(args, &rn) : "{}";
      if (args == NULL)
        rn = 2;
      G.tool_args[G.ntools] = malloc(rn + 1);
      if (G.tool_names[G.ntools] == NULL || G.tool_args[G.ntools] == NULL) {
        free(G.tool_names[G.ntools]);
        free(G.tool_args[G.ntools]);
        break;
      }
      memcpy(G.tool_args[G.ntools], raw, rn);
      G.tool_args[G.ntools][rn] = '\0';
      G.ntools++;
    }
  }
  acp_json_doc_free(doc);
  return named;
}

static int on_tools_list(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                         void *ud) {
  const acp_json_val *tools, *t, *focal = NULL;
  size_t n = 0, i;

  (void)c;
  (void)ud;
  if (status != 0) {
    say("tools/list failed: %d", status);
    finish(1);
    return 0;
  }
  tools = acp_json_obj_getz(msg->result, "tools");
  printf("tools/list: %zu tool(s)\n", acp_json_len(tools));
  if (strcmp(G.scenario, "initialize") == 0) {
    finish(0);
    return 0;
  }
  if (context_tool_calls(tools) != 0) {
    call_next_tool();
    return 0;
  }
  n = acp_json_len(tools);
  G.tool_names = calloc(n ? n : 1, sizeof(char *));
  G.tool_args = calloc(n ? n : 1, sizeof(char *));
  if (G.tool_names == NULL || G.tool_args == NULL) {
    finish(1);
    return 0;
  }
  /* json-schema-2020-12-preservation: the focal tool's inputSchema goes
   * back verbatim (our JSON layer splices the original bytes) as the
   * `schema` argument of the echo tool. */
  if (strcmp(G.scenario, "json-schema-2020-12-preservation") == 0)
    for (t = acp_json_child(tools); t != NULL; t = acp_json_next(t))
      if (ACP_JSON_STR_EQ_LIT(acp_json_obj_getz(t, "name"),
                              "json_schema_2020_12_tool"))
        focal = acp_json_obj_getz(t, "inputSchema");
  for (i = 0, t = acp_json_child(tools); t != NULL && i < n;
       t = acp_json_next(t), i++) {
    const acp_json_val *schema = acp_json_obj_getz(t, "inputSchema");
    const acp_json_val *sp =
        acp_json_obj_getz(acp_json_obj_getz(schema, "properties"), "schema");

    G.tool_names[i] = dup_str(msg->doc, acp_json_obj_getz(t, "name"));
    if (focal != NULL && sp != NULL)
      G.tool_args[i] = wrap_schema_arg(focal);
    else
      G.tool_args[i] = args_for_schema(schema);
    if (G.tool_names[i] == NULL || G.tool_args[i] == NULL) {
      finish(1);
      return 0;
    }
    G.ntools++;
  }
  if (acp_http_client_transport(G.http) == ACP_HTTP_STREAMABLE &&
      strcmp(G.scenario, "elicitation-sep1034-client-defaults") == 0 &&
      acp_http_client_get_state(G.http) == ACP_HTTP_GET_OPENING) {
    /* The GET stream is opened right after initialize, concurrently with
     * the next POSTs. A server that sends on it as soon as a tool is
     * called (this mock) must have it first: on_get_state calls the
     * tools once the server answered the GET. */
    G.tools_waiting = true;
    return 0;
  }
  call_next_tool();
  return 0;
}

static int on_initialized(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                          void *ud) {
  int rv;

  (void)ud;
  if (status != 0) {
    if (status == ACP_ERR_PROTOCOL && msg != NULL)
      say("initialize failed: %lld %.*s", (long long)msg->error_code,
          (int)msg->error_message_len, msg->error_message);
    else
      say("initialize failed: %d", status);
    finish(1);
    return 0;
  }
  printf("initialized: protocol %s\n", acp_mcp_client_protocol(c));
  rv = acp_mcp_client_list(c, ACP_MCP_LIST_TOOLS, NULL, NULL, now_ms(),
                           on_tools_list, NULL, NULL);
  if (rv != 0) {
    say("cannot send tools/list: %d", rv);
    finish(1);
  }
  return 0;
}

/* MARK: - Main */

static void usage(void) {
  fprintf(stderr, "usage: conformance_client [--legacy] URL\n"
                  "  (scenario in MCP_CONFORMANCE_SCENARIO)\n");
}

/* MARK: - OAuth */

/* The suite's authorization server redirects at once: fetch the URL
 * without following the redirect and hand back its Location. */
static int open_auth_url(acp_http_oauth *o, const char *auth_url,
                         char **redirect_url, void *ud) {
  (void)o;
  (void)ud;
  return acp_http_oauth_fetch_redirect(auth_url, redirect_url);
}

/* What MCP_CONFORMANCE_CONTEXT hands the client, when it has it:
 * pre-registered credentials {"client_id", "client_secret"}, a signing key
 * {"private_key_pem", "signing_algorithm"} (private_key_jwt), a workload
 * assertion {"valid_jwt"} (JWT bearer grant), an enterprise IdP
 * {"idp_token_endpoint", "idp_id_token", "idp_client_id"} (SEP-990).
 * Returns the acp_http_oauth_authorize() flags they call for. */
static int context_client(acp_http_oauth *oa) {
  const char *ctx = getenv("MCP_CONFORMANCE_CONTEXT");
  acp_json_doc *doc = NULL;
  int flags = 0;
  if (ctx == NULL || acp_json_doc_new(&doc, NULL) != 0)
    return 0;
  if (acp_json_doc_parse(doc, ctx, strlen(ctx), NULL) == 0) {
    const acp_json_val *root = acp_json_doc_root(doc);
    char *id = dup_str(doc, acp_json_obj_getz(root, "client_id"));
    char *sec = dup_str(doc, acp_json_obj_getz(root, "client_secret"));
    char *pem = dup_str(doc, acp_json_obj_getz(root, "private_key_pem"));
    char *alg = dup_str(doc, acp_json_obj_getz(root, "signing_algorithm"));
    char *jwt = dup_str(doc, acp_json_obj_getz(root, "valid_jwt"));
    char *idp = dup_str(doc, acp_json_obj_getz(root, "idp_token_endpoint"));
    char *idt = dup_str(doc, acp_json_obj_getz(root, "idp_id_token"));
    char *idc = dup_str(doc, acp_json_obj_getz(root, "idp_client_id"));
    if (id != NULL)
      acp_http_oauth_set_client(oa, id, sec);
    if (pem != NULL) {
      if (acp_http_oauth_set_client_key(oa, pem, strlen(pem), alg) != 0)
        say("client key refused: %s", acp_http_oauth_error(oa));
      flags = ACP_HTTP_OAUTH_CLIENT_CREDENTIALS;
    } else if (jwt != NULL) {
      acp_http_oauth_set_assertion(oa, jwt);
      flags = ACP_HTTP_OAUTH_JWT_BEARER;
    } else if (idp != NULL && idt != NULL) {
      acp_http_oauth_set_idp(oa, idp, idt, idc, NULL);
      flags = ACP_HTTP_OAUTH_ID_JAG;
    }
    free(id);
    free(sec);
    free(pem);
    free(alg);
    free(jwt);
    free(idp);
    free(idt);
    free(idc);
  }
  acp_json_doc_free(doc);
  return flags;
}

/* One run of the scenario over a new transport and MCP client; `bearer`
 * (may be NULL) goes in the Authorization header. */
static int run_once(const char *url, acp_http_transport mode,
                    acp_http_oauth *oa) {
  acp_mcp_client_callbacks *cbs = NULL;
  const char *pv;
  size_t i;
  int rv;

  for (i = 0; i < G.ntools; i++) {
    free(G.tool_names[i]);
    free(G.tool_args[i]);
  }
  free(G.tool_names);
  free(G.tool_args);
  G.tool_names = G.tool_args = NULL;
  G.ntools = G.next_tool = 0;
  G.failed = 0;
  G.finished = G.tools_waiting = G.closed = false;
  G.end_status = 0;
  G.loop = uv_default_loop();

  if (acp_mcp_client_callbacks_new(&cbs) != 0)
    return 1;
  acp_mcp_client_callbacks_set_on_elicitation(cbs, on_elicitation);
  acp_mcp_client_callbacks_set_on_sampling(cbs, on_sampling);
  acp_mcp_client_callbacks_set_on_roots_list(cbs, on_roots);
  rv = acp_mcp_client_new(&G.client, cbs, "libacp-conformance-client", "0.1.0",
                          NULL, NULL);
  acp_mcp_client_callbacks_free(cbs);
  if (rv != 0) {
    say("cannot create the MCP client: %d", rv);
    return 1;
  }
  acp_mcp_client_set_timeouts(G.client, CC_REQUEST_TIMEOUT_MS, 0);
  pv = getenv("MCP_CONFORMANCE_PROTOCOL_VERSION");
  if (pv != NULL && pv[0] != '\0') {
    /* "2026-07-28": stateless (server/discover, _meta on every request);
     * a stateful revision: initialize asking it. */
    if (acp_mcp_client_set_protocol(G.client, pv) != 0)
      say("protocol version %s is not spoken; asking the latest", pv);
  }

  uv_timer_init(G.loop, &G.deadline);
  uv_timer_start(&G.deadline, on_deadline, CC_DEADLINE_MS, 0);
  rv = acp_http_client_new(&G.http, G.loop, G.client, url, mode, on_http_end,
                           NULL, NULL);
  if (rv != 0) {
    say("cannot open %s: %d", url, rv);
    G.finished = true;
    G.failed = 1;
    uv_close((uv_handle_t *)&G.deadline, on_timer_closed);
  } else {
    /* The token (Bearer or DPoP with a proof per request) once the
     * flow got one; none before. */
    acp_http_client_set_oauth(G.http, oa);
    /* Servers send requests not tied to a client request (the SDK's
     * server.request() from a tool handler) on the standalone GET stream:
     * open it where a scenario's server does that. (Not for sse-retry, whose
     * mock serves the pending answer on any GET and so would never see the
     * retry-timed reconnection it measures.) */
    if (strcmp(G.scenario, "elicitation-sep1034-client-defaults") == 0) {
      acp_http_client_set_get_stream(G.http, 1);
      acp_http_client_set_get_cb(G.http, on_get_state, NULL);
    }
    rv = acp_mcp_client_initialize(G.client, now_ms(), on_initialized, NULL);
    if (rv != 0) {
      say("cannot send initialize: %d", rv);
      finish(1);
    }
  }
  uv_run(G.loop, UV_RUN_DEFAULT);
  if (!G.finished)
    G.failed = 1;
  uv_loop_close(G.loop);
  acp_mcp_client_free(G.client);
  G.client = NULL;
  return G.failed;
}

int main(int argc, char **argv) {
  acp_http_transport mode = ACP_HTTP_STREAMABLE;
  acp_http_oauth *oa = NULL;
  const char *url;
  size_t i;
  int attempt, flags = 0;

  if (argc < 2) {
    usage();
    return 2;
  }
  for (i = 1; i + 1 < (size_t)argc; i++) {
    if (strcmp(argv[i], "--legacy") == 0) {
      mode = ACP_HTTP_LEGACY_SSE;
    } else {
      usage();
      return 2;
    }
  }
  url = argv[argc - 1];
  memset(&G, 0, sizeof(G));
  G.scenario = getenv("MCP_CONFORMANCE_SCENARIO");
  if (G.scenario == NULL || G.scenario[0] == '\0')
    G.scenario = "initialize";
  if (acp_http_oauth_new(&oa, url) != 0) {
    say("cannot set up OAuth for %s", url);
    return 1;
  }
  acp_http_oauth_set_open_cb(oa, open_auth_url, NULL);
  acp_http_oauth_set_redirect_uri(oa, "http://localhost:3000/callback");
  acp_http_oauth_set_metadata_url(
      oa, "https://conformance-test.local/client-metadata.json");
  flags = context_client(oa);
  if (strcmp(G.scenario, "auth/client-credentials-basic") == 0)
    flags |= ACP_HTTP_OAUTH_CLIENT_CREDENTIALS;
  /* DPoP whenever the authorization server offers it (the dpop scenarios'
   * does; the others' do not, so they keep Bearer tokens). */
  if (acp_http_oauth_set_dpop(oa, 1) != 0) {
    say("cannot create a DPoP key");
    return 1;
  }

  /* A run that ends in 401 (or 403 insufficient_scope) authorizes and
   * runs again with the token; the OAuth object bounds step-ups. */
  for (attempt = 0; attempt < 5; attempt++) {
    int r;
    if (run_once(url, mode, oa) == 0)
      break;
    if (G.end_status != 401 && G.end_status != 403)
      break;
    r = acp_http_oauth_authorize(oa, G.end_status, G.www_auth, flags);
    if (r != 0) {
      say("authorization failed: %d (%s)", r, acp_http_oauth_error(oa));
      break;
    }
    say("authorized (%s); running again with the token",
        acp_http_oauth_token_type(oa));
  }
  acp_http_oauth_free(oa);
  for (i = 0; i < G.ntools; i++) {
    free(G.tool_names[i]);
    free(G.tool_args[i]);
  }
  free(G.tool_names);
  free(G.tool_args);
  free(G.www_auth);
  fflush(stdout);
  if (!G.failed)
    say("scenario %s: ok", G.scenario);
  return G.failed ? 1 : 0;
}
