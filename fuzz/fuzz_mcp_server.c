/*
 * Fuzz target: MCP server dispatch (acp_mcp_conn over its rpc session).
 *
 * Input layout: byte 0 selects options (bit 0: prepend a valid initialize +
 * notifications/initialized so the operation phase is reached, bit 1: that
 * initialize negotiates 2025-03-26 (batches on), bit 2: page size 1, bit 3:
 * the client declares sampling/elicitation/roots); the rest is fed to the
 * conn in pieces of (byte 0 >> 4) + 1 bytes. Handlers answer at once, later
 * (the slow tool), with progress, or issue server->client requests. At the
 * end: pending calls answered, expiry, EOF, drain, free. Every line the
 * server sends must be valid JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static acp_mcp_call *held[4];
static unsigned nheld;

static void check_output(acp_mcp_conn *c) {
  const char *d;
  acp_ssize n = acp_mcp_conn_send(c, &d);
  size_t pos = 0;

  if (n <= 0)
    return;
  while (pos < (size_t)n) {
    const char *nl = memchr(d + pos, '\n', (size_t)n - pos);
    if (nl == NULL)
      abort();
    if (acp_json_validate(d + pos, (size_t)(nl - (d + pos)), NULL) != 0)
      abort();
    pos = (size_t)(nl - d) + 1;
  }
}

static int echo(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  const acp_json_val *m = acp_json_obj_getz(args, "message");
  const char *p = "";
  size_t n = 0;

  (void)ud;
  if (acp_json_type_of(m) == ACP_JSON_STRING &&
      acp_json_doc_str(acp_mcp_call_doc(call), m, &p, &n) != 0)
    return ACP_ERR_NOMEM;
  acp_mcp_call_progress(call, 1, 2, "half");
  acp_mcp_call_log(call, ACP_MCP_LOG_INFO, "echo", "\"x\"", 3);
  return acp_mcp_call_respond_text(call, p, n, false);
}

static int slow(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  (void)args;
  (void)ud;
  if (nheld < 4) {
    held[nheld++] = call;
    return 0;
  }
  return ACP_ERR_UNSUPPORTED; /* becomes an isError result */
}

static int on_sub(acp_mcp_call *call, int status, const acp_rpc_msg *msg,
                  void *ud) {
  (void)msg;
  (void)ud;
  if (acp_mcp_call_is_cancelled(call))
    return acp_mcp_call_respond_text(call, "late", 4, false);
  return acp_mcp_call_respond_text(call, "sub", 3, status != 0);
}

static int ask(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  int rv;
  (void)ud;
  if (acp_json_obj_getz(args, "roots"))
    rv = acp_mcp_call_list_roots(call, 5, on_sub, NULL);
  else if (acp_json_obj_getz(args, "elicit"))
    rv = acp_mcp_call_elicit(call, "{\"message\":\"m\"}", 15, 0, on_sub, NULL);
  else
    rv = acp_mcp_call_create_message(call, "{}", 2, 0, on_sub, NULL);
  if (rv != 0)
    return acp_mcp_call_respond_text(call, "unsupported", 11, true);
  return 0;
}

static int read_cb(acp_mcp_call *call, const char *uri, size_t n, void *ud) {
  const char *v;
  size_t vn = 0;
  (void)ud;
  if (acp_mcp_call_uri_var(call, "id", &v, &vn) == 0 && vn == 1)
    return acp_mcp_call_respond_error(call, -32603, "boom", NULL, 0);
  return acp_mcp_call_respond_resource_text(call, uri, NULL, uri, n);
}

static int lister(acp_mcp_server *s, acp_mcp_resource_list *l, void *ud) {
  (void)s;
  (void)ud;
  acp_mcp_resource_list_add(l, "x://items/1", "one", NULL, NULL);
  return acp_mcp_resource_list_add(l, "x://items/22", "two", "text/plain", "d");
}

static int prompt(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  (void)args;
  (void)ud;
  return acp_mcp_call_respond_raw(call, "{\"messages\":[]}", 15);
}

static int complete(acp_mcp_call *call, const acp_json_val *ref,
                    const acp_json_val *arg, const acp_json_val *ctx,
                    void *ud) {
  static const char *const v[] = {"a", "b"};
  (void)ref;
  (void)arg;
  (void)ctx;
  (void)ud;
  return acp_mcp_call_respond_completion(call, v, 2, -1, false);
}

static void build(acp_mcp_server *s) {
  acp_mcp_tool_def t;
  acp_mcp_resource_def r;
  acp_mcp_template_def tp;
  acp_mcp_prompt_def p;

  memset(&t, 0, sizeof(t));
  t.version = ACP_MCP_DEF_VERSION;
  t.name = "echo";
  t.handler = echo;
  acp_mcp_server_add_tool(s, &t);
  t.name = "slow";
  t.handler = slow;
  acp_mcp_server_add_tool(s, &t);
  t.name = "ask";
  t.handler = ask;
  acp_mcp_server_add_tool(s, &t);
  memset(&r, 0, sizeof(r));
  r.version = ACP_MCP_DEF_VERSION;
  r.uri = "x://a";
  r.name = "a";
  r.size = -1;
  r.handler = read_cb;
  acp_mcp_server_add_resource(s, &r);
  memset(&tp, 0, sizeof(tp));
  tp.version = ACP_MCP_DEF_VERSION;
  tp.uri_template = "x://items/{id}";
  tp.name = "items";
  tp.handler = read_cb;
  tp.lister = lister;
  acp_mcp_server_add_template(s, &tp);
  tp.uri_template = "x://{a}.{b}/{c}";
  tp.lister = NULL;
  acp_mcp_server_add_template(s, &tp);
  memset(&p, 0, sizeof(p));
  p.version = ACP_MCP_DEF_VERSION;
  p.name = "greet";
  p.arguments = "[{\"name\":\"who\",\"required\":true}]";
  p.handler = prompt;
  acp_mcp_server_add_prompt(s, &p);
  acp_mcp_server_set_completion(s, complete, NULL);
  acp_mcp_server_set_logging(s, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char init_fmt[] =
      "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\","
      "\"params\":{\"protocolVersion\":\"%s\",\"capabilities\":%s,"
      "\"clientInfo\":{\"name\":\"f\",\"version\":\"1\"}}}\n"
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
  acp_mcp_server *s = NULL;
  acp_mcp_conn *c = NULL;
  uint8_t flags;
  size_t piece;
  size_t pos = 1;
  uint64_t now = 0;
  unsigned i;

  if (size < 1)
    return 0;
  flags = data[0];
  piece = (size_t)(flags >> 4) + 1;
  nheld = 0;
  if (acp_mcp_server_new(&s, "fuzz", "1", NULL, NULL) != 0)
    return 0;
  build(s);
  if (flags & 4)
    acp_mcp_server_set_page_size(s, 1);
  if (acp_mcp_conn_new(&c, s, NULL) != 0)
    goto done;
  if (flags & 1) {
    char line[512];
    int n = snprintf(line, sizeof(line), init_fmt,
                     (flags & 2) ? "2025-03-26" : "2025-11-25",
                     (flags & 8) ? "{\"sampling\":{},\"elicitation\":{},"
                                   "\"roots\":{}}"
                                 : "{}");
    if (acp_mcp_conn_recv(c, line, (size_t)n, now) < 0)
      goto done;
    check_output(c);
  }
  while (pos < size) {
    size_t n = size - pos < piece ? size - pos : piece;
    acp_ssize r = acp_mcp_conn_recv(c, (const char *)data + pos, n, now);
    if (r < 0)
      goto done;
    pos += n;
    now += 3;
    check_output(c);
  }
  acp_mcp_server_resource_updated(s, "x://a");
  acp_mcp_server_list_changed(s, ACP_MCP_LIST_TOOLS);
  acp_mcp_server_log(s, ACP_MCP_LOG_ERROR, NULL, NULL, 0);
  for (i = 0; i < nheld; i++) {
    if (held[i] != NULL && (i & 1))
      acp_mcp_call_respond_text(held[i], "done", 4, false);
    else if (held[i] != NULL)
      acp_mcp_call_respond_error(held[i], -1, "no", NULL, 0);
    held[i] = NULL;
  }
  check_output(c);
  acp_mcp_conn_handle_expiry(c, now + 1000);
  check_output(c);
  acp_mcp_conn_recv_eof(c, now + 1000);
  check_output(c);
done:
  nheld = 0;
  acp_mcp_conn_free(c);
  acp_mcp_server_free(s);
  return 0;
}
