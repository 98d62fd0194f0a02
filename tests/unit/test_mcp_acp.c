/*
 * MCP over ACP in memory: an acp_client provides an MCP server (provider),
 * an acp_agent consumes it with an acp_mcp_client (consumer), in the three
 * wire shapes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "acp_roles_pair.h"
#include "acp/mcp_acp.h"
#include "failmem.h"

static const uint8_t ID1[16] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
                                0,    1,    2,    3,    4,    5,    6,    7};
#define ID1_HEX "0123456789abcdef0001020304050607"

typedef struct fx {
  acp_mem mem;
  acp_mcp_server *server;
  acp_mcp_acp_provider *prov;
  acp_mcp_acp_consumer *cons;
  acp_client *c;
  acp_agent *a;
  acp_mcp_acp_decl *decl;
  pair_wire wire;
  /* state seen by the callbacks */
  acp_mcp_call *slow[4];
  int nslow;
  int cancelled;
  char session_seen[64];
  int list_changed;
  int opened;
  int open_status;
  int done;
  int last_status;
  char last_text[256];
  int64_t last_code;
  char raw[512];
  /* the fake SDK 2.4 provider (sdk_req) */
  int sdk;                      /* route the client's requests to sdk_req */
  int no_m0;                    /* the provider refuses _mcp/... with -32601 */
  acp_client_request *sdk_slow; /* a tools/call "slow" not answered yet */
  int sdk_cancelled;
  int sdk_bad_meta; /* requests without the required 2026 _meta */
  int sdk_inits;    /* `initialize` received (must stay 0) */
} fx;

/* MARK: - Tools */

static int tool_echo(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  acp_json_doc *doc = acp_mcp_call_doc(call);
  const char *s;
  size_t n;

  (void)ud;
  if (acp_json_doc_str(doc, acp_json_obj_getz(args, "message"), &s, &n) != 0)
    return acp_mcp_call_respond_text(call, "no message", 10, true);
  return acp_mcp_call_respond_text(call, s, n, false);
}

static int tool_whoami(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  const char *sid = acp_mcp_acp_call_session_id(call);
  fx *f = ud;

  (void)args;
  snprintf(f->session_seen, sizeof(f->session_seen), "%s",
           sid ? sid : "(none)");
  return acp_mcp_call_respond_text(call, sid ? sid : "", sid ? strlen(sid) : 0,
                                   false);
}

static int on_slow_cancel(acp_mcp_call *call, void *ud) {
  fx *f = ud;

  (void)call;
  f->cancelled++;
  return 0;
}

static int tool_slow(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  fx *f = ud;

  (void)args;
  if (f->nslow < 4)
    f->slow[f->nslow++] = call;
  acp_mcp_call_set_on_cancel(call, on_slow_cancel, f);
  return 0; /* answered later */
}

/* MARK: - A provider as the TypeScript SDK 2.4 builds it */

/*
 * What McpOverAcpProvider + fromMcpServer (sdk/dist/mcp/core.js) answer:
 * no mcp/connect (-32601); mcp/message {serverId, requestId, method,
 * params} only, an unknown serverId -33001 (outer); the inner params must
 * carry _meta io.modelcontextprotocol/protocolVersion "2026-07-28" and
 * clientCapabilities (else an inner -32602); results carry resultType (and
 * ttlMs/cacheScope on lists); the outcome is a {result}/{error} carrier.
 */
static int sdk_carrier(acp_client *c, acp_client_request *req,
                       const char *json) {
  return acp_client_respond(c, req, json, strlen(json));
}

static int sdk_req(fx *f, acp_client *c, acp_client_request *req) {
  const acp_rpc_msg *msg = acp_client_request_msg(req);
  const acp_json_val *p = msg->params;
  const acp_json_val *inner = acp_json_obj_getz(p, "params");
  const acp_json_val *meta = acp_json_obj_getz(inner, "_meta");
  const acp_json_val *m = acp_json_obj_getz(p, "method");
  char buf[512];
  size_t n = 0;
  const char *rid;

  if (msg->method_len != 11 || memcmp(msg->method, "mcp/message", 11) != 0)
    return acp_client_respond_error(c, req, ACP_RPC_METHOD_NOT_FOUND, NULL,
                                    NULL, 0);
  if (!acp_json_str_eq(acp_json_obj_getz(p, "serverId"), LIT(ID1_HEX)))
    return acp_client_respond_error(c, req, ACP_MCP_ACP_SERVER_UNAVAILABLE,
                                    "MCP server registration unavailable", NULL,
                                    0);
  if (acp_json_type_of(acp_json_obj_getz(p, "requestId")) != ACP_JSON_STRING)
    return acp_client_respond_error(c, req, ACP_RPC_INVALID_PARAMS,
                                    "Invalid params", NULL, 0);
  if (acp_json_str_eq(m, LIT("initialize")))
    f->sdk_inits++;
  if (!acp_json_str_eq(
          acp_json_obj_getz(meta, "io.modelcontextprotocol/protocolVersion"),
          LIT("2026-07-28")) ||
      acp_json_type_of(acp_json_obj_getz(
          meta, "io.modelcontextprotocol/clientCapabilities")) !=
          ACP_JSON_OBJECT) {
    f->sdk_bad_meta++;
    return sdk_carrier(c, req,
                       "{\"error\":{\"code\":-32602,\"message\":\"Invalid "
                       "params: missing _meta\"}}");
  }
  if (acp_json_str_eq(m, LIT("server/discover")))
    return sdk_carrier(
        c, req,
        "{\"result\":{\"resultType\":\"complete\",\"supportedVersions\":["
        "\"2026-07-28\"],\"capabilities\":{\"tools\":{\"listChanged\":true}},"
        "\"_meta\":{\"io.modelcontextprotocol/serverInfo\":{\"name\":"
        "\"sdk-tools\",\"version\":\"2.4.0\"}},\"instructions\":\"hi\","
        "\"ttlMs\":0,\"cacheScope\":\"public\"}}");
  if (acp_json_str_eq(m, LIT("tools/list")))
    return sdk_carrier(
        c, req,
        "{\"result\":{\"resultType\":\"complete\",\"tools\":[{\"name\":"
        "\"echo\",\"inputSchema\":{\"type\":\"object\"}}],\"ttlMs\":0,"
        "\"cacheScope\":\"public\"}}");
  if (acp_json_str_eq(m, LIT("tools/call")) &&
      acp_json_str_eq(acp_json_obj_getz(inner, "name"), LIT("echo"))) {
    const acp_json_val *t =
        acp_json_obj_getz(acp_json_obj_getz(inner, "arguments"), "message");
    const char *raw = acp_json_raw(t, &n);

    snprintf(buf, sizeof(buf),
             "{\"result\":{\"resultType\":\"complete\",\"content\":[{"
             "\"type\":\"text\",\"text\":%.*s}]}}",
             (int)n, raw);
    return sdk_carrier(c, req, buf);
  }
  if (acp_json_str_eq(m, LIT("tools/call")) &&
      acp_json_str_eq(acp_json_obj_getz(inner, "name"), LIT("slow"))) {
    /* A request-scoped notification while it runs, then one for a request
     * that is not running (dropped by the consumer). */
    rid = acp_json_raw(acp_json_obj_getz(p, "requestId"), &n);
    snprintf(buf, sizeof(buf),
             "{\"serverId\":\"" ID1_HEX "\",\"requestId\":%.*s,\"method\":"
             "\"notifications/tools/list_changed\"}",
             (int)n, rid);
    if (acp_client_notify(c, "mcp/message", buf, strlen(buf)) != 0)
      return ACP_ERR_NOMEM;
    snprintf(buf, sizeof(buf),
             "{\"serverId\":\"" ID1_HEX "\",\"requestId\":\"99999\",\"method\":"
             "\"notifications/tools/list_changed\"}");
    if (acp_client_notify(c, "mcp/message", buf, strlen(buf)) != 0)
      return ACP_ERR_NOMEM;
    f->sdk_slow = req;
    return 0;
  }
  if (acp_json_str_eq(m, LIT("tools/call")) &&
      acp_json_str_eq(acp_json_obj_getz(inner, "name"), LIT("ask")))
    return sdk_carrier(c, req,
                       "{\"result\":{\"resultType\":\"input_required\","
                       "\"inputRequests\":{}}}");
  if (acp_json_str_eq(m, LIT("tools/call")))
    return sdk_carrier(c, req,
                       "{\"error\":{\"code\":-32602,\"message\":\"Unknown "
                       "tool\"}}");
  return sdk_carrier(c, req,
                     "{\"error\":{\"code\":-32601,\"message\":\"Method not "
                     "found\"}}");
}

/* MARK: - Role handlers */

static int c_req(acp_client *c, acp_client_request *req, void *ud) {
  fx *f = ud;
  const acp_rpc_msg *msg = acp_client_request_msg(req);
  int rv;

  if (f->sdk)
    return sdk_req(f, c, req);
  if (f->no_m0 && msg->method_len > 5 && memcmp(msg->method, "_mcp/", 5) == 0)
    return acp_client_respond_error(c, req, ACP_RPC_METHOD_NOT_FOUND, NULL,
                                    NULL, 0);
  rv = acp_mcp_acp_provider_client_request(f->prov, req);

  if (rv == ACP_MCP_ACP_NOT_MINE)
    return acp_client_respond_error(c, req, ACP_RPC_METHOD_NOT_FOUND, NULL,
                                    NULL, 0);
  return rv;
}

static int c_notif(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  fx *f = ud;
  int rv = acp_mcp_acp_provider_client_notification(f->prov, msg);

  (void)c;
  return rv == ACP_MCP_ACP_NOT_MINE ? 0 : rv;
}

static int c_cancel(acp_client *c, acp_client_request *req, void *ud) {
  fx *f = ud;
  int rv;

  if (f->sdk && req == f->sdk_slow) {
    /* The SDK aborts the handler and answers -32800. */
    f->sdk_slow = NULL;
    f->sdk_cancelled++;
    return acp_client_respond_error(c, req, ACP_RPC_REQUEST_CANCELLED,
                                    "Request cancelled", NULL, 0);
  }
  rv = acp_mcp_acp_provider_client_cancel(f->prov, req);

  (void)c;
  return rv == ACP_MCP_ACP_NOT_MINE ? 0 : rv;
}

static int a_req(acp_agent *a, acp_agent_request *req, void *ud) {
  fx *f = ud;
  int rv = acp_mcp_acp_consumer_agent_request(f->cons, req);

  if (rv == ACP_MCP_ACP_NOT_MINE)
    return acp_agent_respond_error(a, req, ACP_RPC_METHOD_NOT_FOUND, NULL, NULL,
                                   0);
  return rv;
}

static int a_notif(acp_agent *a, const acp_rpc_msg *msg, void *ud) {
  fx *f = ud;
  int rv = acp_mcp_acp_consumer_agent_notification(f->cons, msg);

  (void)a;
  return rv == ACP_MCP_ACP_NOT_MINE ? 0 : rv;
}

/* MARK: - Fixture */

static int fx_init(fx *f, const acp_mem *mem) {
  acp_client_callbacks *cc = NULL;
  acp_agent_callbacks *ac = NULL;
  acp_mcp_tool_def def;
  int rv;

  memset(f, 0, sizeof(*f));
  memset(&def, 0, sizeof(def));
  def.version = ACP_MCP_DEF_VERSION;
  if (mem != NULL)
    f->mem = *mem;
  rv = acp_mcp_server_new(&f->server, "tools", "1.0", f, mem);
  def.user_data = f;
  def.name = "echo";
  def.handler = tool_echo;
  if (rv == 0)
    rv = acp_mcp_server_add_tool(f->server, &def);
  def.name = "whoami";
  def.handler = tool_whoami;
  if (rv == 0)
    rv = acp_mcp_server_add_tool(f->server, &def);
  def.name = "slow";
  def.handler = tool_slow;
  if (rv == 0)
    rv = acp_mcp_server_add_tool(f->server, &def);
  if (rv == 0)
    rv = acp_client_callbacks_new(&cc);
  if (rv == 0)
    rv = acp_agent_callbacks_new(&ac);
  if (rv != 0)
    goto done;
  acp_client_callbacks_set_on_mcp_connect(cc, c_req);
  acp_client_callbacks_set_on_mcp_message(cc, c_req);
  acp_client_callbacks_set_on_mcp_disconnect(cc, c_req);
  acp_client_callbacks_set_on_ext_request(cc, c_req);
  acp_client_callbacks_set_on_mcp_message_notification(cc, c_notif);
  acp_client_callbacks_set_on_ext_notification(cc, c_notif);
  acp_client_callbacks_set_on_cancel_request(cc, c_cancel);
  acp_agent_callbacks_set_on_mcp_message(ac, a_req);
  acp_agent_callbacks_set_on_ext_request(ac, a_req);
  acp_agent_callbacks_set_on_mcp_message_notification(ac, a_notif);
  acp_agent_callbacks_set_on_ext_notification(ac, a_notif);
  rv = acp_client_new(&f->c, cc, f, NULL, mem);
  if (rv == 0)
    rv = acp_agent_new(&f->a, ac, f, NULL, mem);
  if (rv == 0)
    rv = acp_mcp_acp_provider_new(&f->prov, f, mem);
  if (rv == 0)
    rv = acp_mcp_acp_provider_attach_client(f->prov, f->c);
  if (rv == 0)
    rv = acp_mcp_acp_consumer_new(&f->cons, f->a, f, mem);
  if (rv == 0)
    rv = acp_mcp_acp_provider_declare(f->prov, f->server, "tools", "sess-1",
                                      ID1, &f->decl);
done:
  acp_client_callbacks_free(cc);
  acp_agent_callbacks_free(ac);
  return rv;
}

static void fx_free(fx *f) {
  acp_client_free(f->c);
  acp_agent_free(f->a);
  acp_mcp_acp_provider_free(f->prov);
  acp_mcp_acp_consumer_free(f->cons);
  acp_mcp_server_free(f->server);
  tbuf_clear(&f->wire.a2c);
  tbuf_clear(&f->wire.c2a);
}

/* Flush both tunnels and shuttle bytes until quiet. */
static int run(fx *f) {
  int i;

  for (i = 0; i < 50; i++) {
    int rv = acp_mcp_acp_consumer_flush(f->cons, 0);

    if (rv == 0)
      rv = acp_mcp_acp_provider_flush(f->prov, 0);
    if (rv == 0)
      rv = pump(f->a, f->c, &f->wire);
    if (rv != 0)
      return rv;
    if (acp_rpc_session_want_write(acp_agent_session(f->a)) == 0 &&
        acp_rpc_session_want_write(acp_client_session(f->c)) == 0)
      return 0;
  }
  return 0;
}

/* MARK: - Consumer callbacks */

static int on_open(acp_mcp_acp_link *link, int status, const acp_rpc_msg *msg,
                   void *ud) {
  fx *f = ud;

  (void)link;
  (void)msg;
  f->opened++;
  f->open_status = status;
  return 0;
}

static int on_result(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                     void *ud) {
  fx *f = ud;

  (void)c;
  f->done++;
  f->last_status = status;
  f->last_text[0] = '\0';
  f->last_code = 0;
  if (status == 0 && msg != NULL) {
    const acp_json_val *content = acp_json_obj_getz(msg->result, "content");
    const acp_json_val *text =
        acp_json_obj_getz(acp_json_arr_get(content, 0), "text");
    size_t n = 0;
    const char *raw = acp_json_raw(msg->result, &n);
    const char *s;

    snprintf(f->raw, sizeof(f->raw), "%.*s", (int)n, raw);
    if (text != NULL && acp_json_doc_str(msg->doc, text, &s, &n) == 0)
      snprintf(f->last_text, sizeof(f->last_text), "%.*s", (int)n, s);
  } else if (status == ACP_ERR_PROTOCOL && msg != NULL) {
    f->last_code = msg->error_code;
  }
  return 0;
}

static int on_list_changed(acp_mcp_client *c, acp_mcp_list which, void *ud) {
  fx *f = ud;

  (void)c;
  (void)which;
  f->list_changed++;
  return 0;
}

static acp_mcp_client *new_mcp_client(fx *f, const acp_mem *mem) {
  acp_mcp_client_callbacks *cbs = NULL;
  acp_mcp_client *mc = NULL;

  if (acp_mcp_client_callbacks_new(&cbs) != 0)
    return NULL;
  acp_mcp_client_callbacks_set_on_list_changed(cbs, on_list_changed);
  (void)acp_mcp_client_new(&mc, cbs, "agent", "1", f, mem);
  acp_mcp_client_callbacks_free(cbs);
  return mc;
}

/* Open + initialize one link. */
static int connect_link(fx *f, acp_mcp_client *mc, acp_mcp_acp_shape shape,
                        acp_mcp_acp_link **out) {
  int rv =
      acp_mcp_acp_consumer_open(f->cons, ID1_HEX, shape, mc, on_open, f, out);

  if (rv == 0)
    rv = run(f);
  if (rv == 0 && f->open_status != 0)
    rv = f->open_status;
  if (rv == 0)
    rv = acp_mcp_client_initialize(mc, 0, on_result, f);
  if (rv == 0)
    rv = run(f);
  if (rv == 0 && f->last_status != 0)
    rv = f->last_status;
  return rv;
}

static int call_tool(fx *f, acp_mcp_client *mc, const char *name,
                     const char *args, int64_t *id) {
  int rv = acp_mcp_client_call_tool(mc, name, args, args ? strlen(args) : 0,
                                    NULL, 0, on_result, f, id);

  return rv != 0 ? rv : run(f);
}

/* The writer's bytes equal `want`. */
static void assert_writer(acp_json_writer *w, const char *want) {
  size_t len;
  const char *got = acp_json_writer_data(w, &len);
  char buf[512];

  snprintf(buf, sizeof(buf), "%.*s", (int)len, got);
  assert_string_equal(buf, want);
}

/* MARK: - Tests */

static void test_mcp_acp_end_to_end(void **state) {
  fx f;
  acp_mcp_client *mc;
  acp_mcp_acp_link *link = NULL;

  (void)state;
  assert_int_equal(fx_init(&f, NULL), 0);
  mc = new_mcp_client(&f, NULL);
  assert_non_null(mc);
  assert_int_equal(connect_link(&f, mc, ACP_MCP_ACP_SHAPE_M1, &link), 0);
  assert_int_equal(f.opened, 1);
  assert_true(acp_mcp_acp_link_is_open(link));
  assert_non_null(strstr(f.wire.a2c.data, "\"method\":\"mcp/connect\""));
  assert_non_null(
      strstr(f.wire.c2a.data, "\"connectionId\":\"" ID1_HEX ":1\""));
  assert_int_equal(acp_mcp_acp_provider_connection_count(f.prov), 1);

  assert_int_equal(acp_mcp_client_list(mc, ACP_MCP_LIST_TOOLS, NULL, NULL, 0,
                                       on_result, &f, NULL),
                   0);
  assert_int_equal(run(&f), 0);
  assert_int_equal(f.last_status, 0);
  assert_non_null(strstr(f.raw, "\"echo\""));
  assert_non_null(strstr(f.raw, "\"whoami\""));

  assert_int_equal(
      call_tool(&f, mc, "echo", "{\"message\":\"hi there\"}", NULL), 0);
  assert_int_equal(f.last_status, 0);
  assert_string_equal(f.last_text, "hi there");
  assert_non_null(strstr(f.wire.a2c.data, "\"method\":\"mcp/message\""));

  /* The tool handler learns the ACP session of the declaration. */
  assert_int_equal(call_tool(&f, mc, "whoami", "{}", NULL), 0);
  assert_string_equal(f.session_seen, "sess-1");
  assert_string_equal(f.last_text, "sess-1");

  /* Inner MCP errors become outer JSON-RPC errors, and come back inside. */
  assert_int_equal(call_tool(&f, mc, "nope", "{}", NULL), 0);
  assert_int_equal(f.last_status, ACP_ERR_PROTOCOL);
  assert_int_equal(f.last_code, -32602);

  /* Server notifications travel as mcp/message notifications. */
  assert_int_equal(acp_mcp_server_list_changed(f.server, ACP_MCP_LIST_TOOLS),
                   0);
  assert_int_equal(run(&f), 0);
  assert_int_equal(f.list_changed, 1);

  acp_mcp_acp_link_close(link);
  assert_int_equal(run(&f), 0);
  assert_non_null(strstr(f.wire.a2c.data, "\"method\":\"mcp/disconnect\""));
  assert_int_equal(acp_mcp_acp_provider_connection_count(f.prov), 0);
  acp_mcp_client_free(mc);
  fx_free(&f);
}

static void test_mcp_acp_concurrent_connections(void **state) {
  fx f;
  acp_mcp_client *mc[3];
  acp_mcp_acp_link *link[3];
  int i;

  (void)state;
  assert_int_equal(fx_init(&f, NULL), 0);
  for (i = 0; i < 3; i++) {
    mc[i] = new_mcp_client(&f, NULL);
    assert_non_null(mc[i]);
    assert_int_equal(connect_link(&f, mc[i], ACP_MCP_ACP_SHAPE_M1, &link[i]),
                     0);
  }
  assert_int_equal(acp_mcp_acp_provider_connection_count(f.prov), 3);
  assert_string_not_equal(acp_mcp_acp_link_connection_id(link[0]),
                          acp_mcp_acp_link_connection_id(link[1]));
  for (i = 0; i < 3; i++)
    assert_int_equal(call_tool(&f, mc[i], "slow", "{}", NULL), 0);
  assert_int_equal(f.nslow, 3);
  /* Answer in reverse order: each reaches its own client. */
  f.done = 0;
  for (i = 2; i >= 0; i--) {
    char text[8];

    snprintf(text, sizeof(text), "r%d", i);
    assert_int_equal(
        acp_mcp_call_respond_text(f.slow[i], text, strlen(text), false), 0);
    assert_int_equal(run(&f), 0);
    assert_string_equal(f.last_text, text);
  }
  assert_int_equal(f.done, 3);
  for (i = 0; i < 3; i++) {
    acp_mcp_acp_link_close(link[i]);
    acp_mcp_client_free(mc[i]);
  }
  assert_int_equal(run(&f), 0);
  assert_int_equal(acp_mcp_acp_provider_connection_count(f.prov), 0);
  fx_free(&f);
}

static void test_mcp_acp_cancel_mid_flight(void **state) {
  fx f;
  acp_mcp_client *mc;
  acp_mcp_acp_link *link;
  int64_t id;

  (void)state;
  assert_int_equal(fx_init(&f, NULL), 0);
  mc = new_mcp_client(&f, NULL);
  assert_int_equal(connect_link(&f, mc, ACP_MCP_ACP_SHAPE_M1, &link), 0);
  assert_int_equal(call_tool(&f, mc, "slow", "{}", &id), 0);
  assert_int_equal(f.nslow, 1);
  assert_int_equal(acp_mcp_client_cancel(mc, id, "user", 0), 0);
  assert_int_equal(f.last_status, ACP_ERR_CANCELLED);
  assert_int_equal(run(&f), 0);
  /* notifications/cancelled went over mcp/message, naming the outer id. */
  assert_non_null(strstr(f.wire.a2c.data, "notifications/cancelled"));
  assert_int_equal(f.cancelled, 1);
  assert_true(acp_mcp_call_is_cancelled(f.slow[0]));
  /* The outer request was answered -32800. */
  assert_non_null(strstr(f.wire.c2a.data, "-32800"));
  /* A late answer is dropped. */
  assert_int_equal(acp_mcp_call_respond_text(f.slow[0], "late", 4, false), 0);
  assert_int_equal(run(&f), 0);
  assert_null(strstr(f.wire.c2a.data, "late"));
  acp_mcp_acp_link_close(link);
  acp_mcp_client_free(mc);
  fx_free(&f);
}

static int on_raw(acp_agent *a, const acp_rpc_msg *msg, void *ud) {
  fx *f = ud;
  size_t n = 0;
  const char *s;

  (void)a;
  f->done++;
  f->last_code = msg->error != NULL ? msg->error_code : 0;
  s = msg->result != NULL ? acp_json_raw(msg->result, &n) : msg->raw;
  if (msg->result == NULL)
    n = msg->raw_len;
  snprintf(f->raw, sizeof(f->raw), "%.*s", (int)n, s);
  return 0;
}

static int raw_call(fx *f, const char *method, const char *params) {
  int rv =
      acp_agent_call(f->a, method, params, strlen(params), on_raw, f, NULL);

  f->raw[0] = '\0';
  return rv != 0 ? rv : run(f);
}

static void test_mcp_acp_connectionless_m2(void **state) {
  fx f;

  (void)state;
  assert_int_equal(fx_init(&f, NULL), 0);
  assert_int_equal(
      raw_call(&f, "mcp/message",
               "{\"serverId\":\"" ID1_HEX "\",\"requestId\":7,"
               "\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
               "\"arguments\":{\"message\":\"m2\"}}}"),
      0);
  assert_int_equal(f.last_code, 0);
  assert_string_equal(
      f.raw,
      "{\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"m2\"}]}}");
  /* The inner error is carried, not an outer error. */
  assert_int_equal(raw_call(&f, "mcp/message",
                            "{\"serverId\":\"" ID1_HEX "\",\"requestId\":\"x\","
                            "\"method\":\"tools/call\",\"params\":{\"name\":"
                            "\"missing\"}}"),
                   0);
  assert_int_equal(f.last_code, 0);
  assert_true(strncmp(f.raw, "{\"error\":{\"code\":-32602", 23) == 0);
  /* Whoami sees the session in this form too. */
  assert_int_equal(raw_call(&f, "mcp/message",
                            "{\"serverId\":\"" ID1_HEX "\",\"requestId\":1,"
                            "\"method\":\"tools/call\",\"params\":{\"name\":"
                            "\"whoami\"}}"),
                   0);
  assert_string_equal(f.session_seen, "sess-1");
  /* Unknown server: a binding failure, an outer error. */
  assert_int_equal(raw_call(&f, "mcp/message",
                            "{\"serverId\":\"ffff\",\"requestId\":1,"
                            "\"method\":\"tools/list\"}"),
                   0);
  assert_int_equal(f.last_code, ACP_MCP_ACP_SERVER_UNAVAILABLE);
  assert_non_null(strstr(f.raw, "Unknown MCP server"));
  assert_int_equal(acp_mcp_acp_provider_connection_count(f.prov), 0);
  fx_free(&f);
}

static void test_mcp_acp_m0_form(void **state) {
  fx f;
  acp_mcp_client *mc;
  acp_mcp_acp_link *link;
  const char *json;
  size_t len;

  (void)state;
  assert_int_equal(fx_init(&f, NULL), 0);
  /* The raw connect is answered with the snake_case member. */
  assert_int_equal(
      raw_call(&f, "_mcp/connect", "{\"acp_url\":\"acp:" ID1_HEX "\"}"), 0);
  assert_string_equal(f.raw, "{\"connection_id\":\"" ID1_HEX ":1\"}");
  assert_int_equal(raw_call(&f, "mcp/connect", "{\"acpId\":\"" ID1_HEX "\"}"),
                   0);
  assert_string_equal(f.raw, "{\"connectionId\":\"" ID1_HEX ":2\"}");
  assert_int_equal(raw_call(&f, "mcp/connect", "{\"id\":\"" ID1_HEX "\"}"), 0);
  assert_string_equal(f.raw, "{\"connectionId\":\"" ID1_HEX ":3\"}");

  mc = new_mcp_client(&f, NULL);
  assert_int_equal(connect_link(&f, mc, ACP_MCP_ACP_SHAPE_M0, &link), 0);
  assert_int_equal(call_tool(&f, mc, "echo", "{\"message\":\"old\"}", NULL), 0);
  assert_string_equal(f.last_text, "old");
  assert_non_null(strstr(f.wire.a2c.data, "\"method\":\"_mcp/message\""));
  acp_mcp_acp_link_close(link);
  assert_int_equal(run(&f), 0);
  assert_non_null(strstr(f.wire.a2c.data, "\"method\":\"_mcp/disconnect\""));
  acp_mcp_client_free(mc);

  assert_int_equal(
      acp_mcp_acp_decl_json(f.decl, ACP_MCP_ACP_DECL_URL, &json, &len), 0);
  assert_string_equal(json, "{\"type\":\"http\",\"name\":\"tools\",\"url\":"
                            "\"acp:" ID1_HEX "\",\"headers\":[]}");
  fx_free(&f);
}

static void test_mcp_acp_unknown_ids(void **state) {
  fx f;

  (void)state;
  assert_int_equal(fx_init(&f, NULL), 0);
  assert_int_equal(raw_call(&f, "mcp/message",
                            "{\"connectionId\":\"nope\",\"method\":\"ping\"}"),
                   0);
  assert_int_equal(f.last_code, -32602);
  assert_non_null(strstr(f.raw, "Unknown MCP connection"));
  assert_int_equal(raw_call(&f, "mcp/connect", "{\"serverId\":\"zz\"}"), 0);
  assert_int_equal(f.last_code, -32602);
  assert_non_null(strstr(f.raw, "Unknown MCP server"));
  assert_int_equal(raw_call(&f, "mcp/connect", "{}"), 0);
  assert_int_equal(f.last_code, -32602);
  assert_int_equal(
      raw_call(&f, "mcp/disconnect", "{\"connectionId\":\"nope\"}"), 0);
  assert_int_equal(f.last_code, -32602);
  /* A connection with a message lacking its method. */
  assert_int_equal(
      raw_call(&f, "mcp/connect", "{\"serverId\":\"" ID1_HEX "\"}"), 0);
  assert_int_equal(
      raw_call(&f, "mcp/message", "{\"connectionId\":\"" ID1_HEX ":1\"}"), 0);
  assert_int_equal(f.last_code, -32602);
  assert_int_equal(
      raw_call(&f, "mcp/disconnect", "{\"connectionId\":\"" ID1_HEX ":1\"}"),
      0);
  assert_int_equal(f.last_code, 0);
  assert_string_equal(f.raw, "{}");
  fx_free(&f);
}

/* An agent that connects and never disconnects gets ACP_MCP_ACP_MAX_CONNS
 * connections to a server, then -33001 until it disconnects one. */
static void test_mcp_acp_connections_per_server_capped(void **state) {
  fx f;
  int i;

  (void)state;
  assert_int_equal(fx_init(&f, NULL), 0);
  for (i = 0; i < ACP_MCP_ACP_MAX_CONNS; i++) {
    assert_int_equal(
        raw_call(&f, "mcp/connect", "{\"serverId\":\"" ID1_HEX "\"}"), 0);
    assert_int_equal(f.last_code, 0);
  }
  assert_int_equal(acp_mcp_acp_provider_connection_count(f.prov),
                   ACP_MCP_ACP_MAX_CONNS);
  assert_int_equal(
      raw_call(&f, "mcp/connect", "{\"serverId\":\"" ID1_HEX "\"}"), 0);
  assert_int_equal(f.last_code, ACP_MCP_ACP_SERVER_UNAVAILABLE);
  assert_non_null(strstr(f.raw, "too many connections"));
  assert_int_equal(acp_mcp_acp_provider_connection_count(f.prov),
                   ACP_MCP_ACP_MAX_CONNS);
  assert_int_equal(
      raw_call(&f, "mcp/disconnect", "{\"connectionId\":\"" ID1_HEX ":7\"}"),
      0);
  assert_int_equal(f.last_code, 0);
  assert_int_equal(
      raw_call(&f, "mcp/connect", "{\"serverId\":\"" ID1_HEX "\"}"), 0);
  assert_int_equal(f.last_code, 0);
  assert_non_null(strstr(f.raw, "\"connectionId\":"));
  fx_free(&f);
}

static void test_mcp_acp_decl_and_caps(void **state) {
  fx f;
  const char *json;
  size_t len;
  acp_json_doc *doc;
  acp_json_writer *w;
  const char *id;
  size_t idn;
  acp_mcp_acp_shape shape;
  uint8_t id2[16] = {0};

  (void)state;
  assert_int_equal(fx_init(&f, NULL), 0);
  assert_int_equal(
      acp_mcp_acp_decl_json(f.decl, ACP_MCP_ACP_DECL_ID, &json, &len), 0);
  assert_string_equal(
      json, "{\"type\":\"acp\",\"name\":\"tools\",\"id\":\"" ID1_HEX "\"}");
  assert_int_equal(
      acp_mcp_acp_provider_declare(f.prov, f.server, "x", NULL, ID1, NULL),
      ACP_ERR_INVALID_STATE);
  assert_int_equal(
      acp_mcp_acp_provider_declare(f.prov, f.server, "y", "s2", id2, NULL), 0);
  assert_int_equal(acp_mcp_acp_provider_close_session(f.prov, "s2"), 1);
  assert_null(
      acp_mcp_acp_provider_find(f.prov, "00000000000000000000000000000000"));

  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  assert_int_equal(acp_json_writer_new(&w, 0, NULL), 0);
  /* Every declaration form parses. */
  {
    static const char *const forms[] = {
        "{\"type\":\"acp\",\"name\":\"n\",\"id\":\"abc\"}",
        "{\"type\":\"acp\",\"name\":\"n\",\"serverId\":\"abc\"}",
        "{\"transport\":\"acp\",\"id\":\"abc\"}",
        "{\"type\":\"http\",\"name\":\"n\",\"url\":\"acp:abc\"}"};
    size_t i;

    for (i = 0; i < 4; i++) {
      assert_int_equal(
          acp_json_doc_parse(doc, forms[i], strlen(forms[i]), NULL), 0);
      assert_int_equal(acp_mcp_acp_decl_parse(doc, acp_json_doc_root(doc), &id,
                                              &idn, &shape),
                       0);
      assert_int_equal(idn, 3);
      assert_memory_equal(id, "abc", 3);
      assert_int_equal(shape,
                       i == 3 ? ACP_MCP_ACP_SHAPE_M0 : ACP_MCP_ACP_SHAPE_M1);
    }
    assert_int_equal(
        acp_json_doc_parse(doc, LIT("{\"type\":\"http\",\"url\":\"http://x\"}"),
                           NULL),
        0);
    assert_int_equal(
        acp_mcp_acp_decl_parse(doc, acp_json_doc_root(doc), &id, &idn, NULL),
        ACP_ERR_NOT_FOUND);
  }
  /* Adding a server to session/new params keeps the other bytes. */
  assert_int_equal(
      acp_json_doc_parse(
          doc,
          LIT("{\"cwd\":\"/x\",\"mcpServers\":[{\"name\":\"a\"}],\"n\":1.0}"),
          NULL),
      0);
  assert_int_equal(acp_mcp_acp_params_add_server(w, acp_json_doc_root(doc),
                                                 LIT("{\"b\":2}")),
                   0);
  assert_writer(
      w,
      "{\"cwd\":\"/x\",\"mcpServers\":[{\"name\":\"a\"},{\"b\":2}],\"n\":1.0}");
  acp_json_writer_reset(w);
  assert_int_equal(acp_mcp_acp_caps_enable(
                       w, LIT("{\"loadSession\":true,\"mcpCapabilities\":{"
                              "\"http\":true}}")),
                   0);
  assert_writer(w, "{\"loadSession\":true,\"mcpCapabilities\":{"
                   "\"http\":true,\"acp\":true}}");
  json = acp_json_writer_data(w, &len);
  assert_int_equal(acp_json_doc_parse(doc, json, len, NULL), 0);
  assert_true(acp_mcp_acp_caps_has_acp(acp_json_doc_root(doc)));
  acp_json_writer_reset(w);
  assert_int_equal(acp_mcp_acp_caps_enable(w, LIT("[]")),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_json_writer_free(w);
  acp_json_doc_free(doc);
  fx_free(&f);
}

/* An M1 link to a provider that knows only the connectionless form (the
 * TypeScript SDK 2.4's) falls back to M2, and the consumer's 2025 client
 * works through the era translation. */
static void test_mcp_acp_consumer_falls_back_to_connectionless(void **state) {
  fx f;
  acp_mcp_client *mc;
  acp_mcp_acp_link *link = NULL;
  const char *info;
  size_t len;

  (void)state;
  assert_int_equal(fx_init(&f, NULL), 0);
  f.sdk = 1;
  mc = new_mcp_client(&f, NULL);
  assert_non_null(mc);
  assert_int_equal(connect_link(&f, mc, ACP_MCP_ACP_SHAPE_M1, &link), 0);
  assert_int_equal(f.opened, 1);
  assert_int_equal(f.open_status, 0);
  assert_int_equal(acp_mcp_acp_link_shape(link), ACP_MCP_ACP_SHAPE_M2);
  assert_true(acp_mcp_acp_link_is_open(link));
  assert_null(acp_mcp_acp_link_connection_id(link));
  assert_non_null(strstr(f.wire.a2c.data, "\"method\":\"mcp/connect\""));
  /* initialize went out as server/discover, with the 2026 _meta made of
   * what the client's initialize said. */
  assert_int_equal(f.sdk_inits, 0);
  assert_non_null(strstr(
      f.wire.a2c.data,
      "{\"serverId\":\"" ID1_HEX "\",\"requestId\":\"1\",\"method\":\"server/"
      "discover\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/"
      "protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/"
      "clientCapabilities\":{},\"io.modelcontextprotocol/clientInfo\":{"
      "\"name\":\"agent\",\"version\":\"1\"}}}}"));
  /* ... and was answered from its result. */
  assert_int_equal(f.last_status, 0);
  assert_int_equal(acp_mcp_client_version(mc), ACP_MCP_VERSION_LATEST);
  info = acp_mcp_client_server_info(mc, &len);
  assert_non_null(info);
  assert_memory_equal(info, "{\"name\":\"sdk-tools\",\"version\":\"2.4.0\"}",
                      len);
  assert_string_equal(acp_mcp_client_instructions(mc), "hi");
  /* notifications/initialized has no connectionless form. */
  assert_null(strstr(f.wire.a2c.data, "notifications/initialized"));

  assert_int_equal(acp_mcp_client_list(mc, ACP_MCP_LIST_TOOLS, NULL, NULL, 0,
                                       on_result, &f, NULL),
                   0);
  assert_int_equal(run(&f), 0);
  assert_int_equal(f.last_status, 0);
  /* The 2026-only members are gone for the 2025 client. */
  assert_string_equal(
      f.raw, "{\"tools\":[{\"name\":\"echo\",\"inputSchema\":{\"type\":"
             "\"object\"}}]}");
  assert_int_equal(
      call_tool(&f, mc, "echo", "{\"message\":\"hi \\\"there\\\"\"}", NULL), 0);
  assert_int_equal(f.last_status, 0);
  assert_string_equal(f.last_text, "hi \"there\"");
  assert_string_equal(f.raw, "{\"content\":[{\"type\":\"text\",\"text\":"
                             "\"hi \\\"there\\\"\"}]}");
  /* An inner MCP error comes back as the client's error. */
  assert_int_equal(call_tool(&f, mc, "nope", "{}", NULL), 0);
  assert_int_equal(f.last_status, ACP_ERR_PROTOCOL);
  assert_int_equal(f.last_code, -32602);
  /* A result that needs input has no 2025 form. */
  assert_int_equal(call_tool(&f, mc, "ask", "{}", NULL), 0);
  assert_int_equal(f.last_status, ACP_ERR_PROTOCOL);
  assert_int_equal(f.last_code, ACP_RPC_INTERNAL_ERROR);
  /* ping is answered by the consumer: 2026-07-28 has none. */
  f.done = 0;
  assert_int_equal(acp_mcp_client_ping(mc, 0, on_result, &f), 0);
  assert_int_equal(run(&f), 0);
  assert_int_equal(f.done, 1);
  assert_int_equal(f.last_status, 0);
  assert_null(strstr(f.wire.a2c.data, "\"ping\""));
  assert_int_equal(f.sdk_bad_meta, 0);
  acp_mcp_acp_link_close(link);
  acp_mcp_client_free(mc);
  fx_free(&f);
}

/* Over M2, a request-scoped notification reaches the client while its
 * request runs; cancelling sends $/cancel_request for the outer request. */
static void test_mcp_acp_connectionless_notify_and_cancel(void **state) {
  fx f;
  acp_mcp_client *mc;
  acp_mcp_acp_link *link = NULL;
  int64_t id;

  (void)state;
  assert_int_equal(fx_init(&f, NULL), 0);
  f.sdk = 1;
  mc = new_mcp_client(&f, NULL);
  assert_int_equal(connect_link(&f, mc, ACP_MCP_ACP_SHAPE_M2, &link), 0);
  /* Opened connectionless directly: no connect at all. */
  assert_null(strstr(f.wire.a2c.data, "mcp/connect"));
  assert_int_equal(f.opened, 1);
  f.done = 0;
  assert_int_equal(call_tool(&f, mc, "slow", "{}", &id), 0);
  assert_non_null(f.sdk_slow);
  assert_int_equal(f.done, 0);
  assert_int_equal(f.list_changed, 1); /* the one for the running request */
  assert_int_equal(acp_mcp_client_cancel(mc, id, "user", 0), 0);
  assert_int_equal(f.last_status, ACP_ERR_CANCELLED);
  assert_int_equal(run(&f), 0);
  assert_non_null(strstr(f.wire.a2c.data, "\"method\":\"$/cancel_request\""));
  assert_int_equal(f.sdk_cancelled, 1);
  assert_non_null(strstr(f.wire.c2a.data, "-32800"));
  assert_int_equal(f.done, 1); /* the late -32800 is not a second answer */
  /* Closing a link cancels what it still runs. */
  assert_int_equal(call_tool(&f, mc, "slow", "{}", &id), 0);
  assert_non_null(f.sdk_slow);
  acp_mcp_acp_link_close(link);
  assert_int_equal(run(&f), 0);
  assert_int_equal(f.sdk_cancelled, 2);
  acp_mcp_client_free(mc);
  fx_free(&f);
}

/* A connectionless server the provider does not offer: the binding's
 * -33001 fails the client's initialize. */
static void test_mcp_acp_connectionless_unknown_server(void **state) {
  fx f;
  acp_mcp_client *mc;
  acp_mcp_acp_link *link = NULL;

  (void)state;
  assert_int_equal(fx_init(&f, NULL), 0);
  f.sdk = 1;
  mc = new_mcp_client(&f, NULL);
  assert_int_equal(acp_mcp_acp_consumer_open(f.cons, "0000",
                                             ACP_MCP_ACP_SHAPE_M1, mc, on_open,
                                             &f, &link),
                   0);
  assert_int_equal(run(&f), 0);
  assert_int_equal(f.open_status, 0);
  assert_int_equal(acp_mcp_client_initialize(mc, 0, on_result, &f), 0);
  assert_int_equal(run(&f), 0);
  assert_int_equal(f.last_status, ACP_ERR_PROTOCOL);
  assert_int_equal(f.last_code, ACP_MCP_ACP_SERVER_UNAVAILABLE);
  acp_mcp_acp_link_close(link);
  acp_mcp_client_free(mc);
  fx_free(&f);
}

/* libacp's own provider over M2: its server answers server/discover (it
 * serves both eras), so the initialize result carries the server's own
 * identity and 2026 capabilities; each request is served statelessly from
 * its _meta and the tools work. */
static void test_mcp_acp_connectionless_to_libacp_provider(void **state) {
  fx f;
  acp_mcp_client *mc;
  acp_mcp_acp_link *link = NULL;
  const char *info;
  size_t len;

  (void)state;
  assert_int_equal(fx_init(&f, NULL), 0);
  mc = new_mcp_client(&f, NULL);
  assert_int_equal(connect_link(&f, mc, ACP_MCP_ACP_SHAPE_M2, &link), 0);
  info = acp_mcp_client_server_info(mc, &len);
  assert_non_null(info);
  assert_int_equal(len, 32);
  assert_memory_equal(info, "{\"name\":\"tools\",\"version\":\"1.0\"}", len);
  info = acp_mcp_client_server_capabilities(mc, &len);
  assert_int_equal(len, 30);
  assert_memory_equal(info, "{\"tools\":{\"listChanged\":true}}", len);
  assert_int_equal(
      call_tool(&f, mc, "echo", "{\"message\":\"m2 native\"}", NULL), 0);
  assert_string_equal(f.last_text, "m2 native");
  assert_int_equal(call_tool(&f, mc, "whoami", "{}", NULL), 0);
  assert_string_equal(f.session_seen, "sess-1");
  acp_mcp_acp_link_close(link);
  acp_mcp_client_free(mc);
  assert_int_equal(run(&f), 0);
  assert_int_equal(acp_mcp_acp_provider_connection_count(f.prov), 0);
  fx_free(&f);
}

/* An acp: URL declaration starts with _mcp/connect; a provider without the
 * sacp methods answers -32601 and the link moves on to mcp/connect. */
static void test_mcp_acp_consumer_falls_back_from_m0_to_m1(void **state) {
  fx f;
  acp_mcp_client *mc;
  acp_mcp_acp_link *link = NULL;

  (void)state;
  assert_int_equal(fx_init(&f, NULL), 0);
  f.no_m0 = 1;
  mc = new_mcp_client(&f, NULL);
  assert_int_equal(connect_link(&f, mc, ACP_MCP_ACP_SHAPE_M0, &link), 0);
  assert_non_null(strstr(f.wire.a2c.data, "\"method\":\"_mcp/connect\""));
  assert_non_null(strstr(f.wire.a2c.data, "\"method\":\"mcp/connect\""));
  assert_int_equal(acp_mcp_acp_link_shape(link), ACP_MCP_ACP_SHAPE_M1);
  assert_string_equal(acp_mcp_acp_link_connection_id(link), ID1_HEX ":1");
  assert_int_equal(call_tool(&f, mc, "echo", "{\"message\":\"m1\"}", NULL), 0);
  assert_string_equal(f.last_text, "m1");
  acp_mcp_acp_link_close(link);
  acp_mcp_client_free(mc);
  fx_free(&f);
}

/* The end-to-end scenario under allocation failure: every run fails cleanly
 * and leaks nothing. */
static int scenario(const acp_mem *mem) {
  fx f;
  acp_mcp_client *mc = NULL;
  acp_mcp_acp_link *link = NULL;
  int rv = fx_init(&f, mem);

  if (rv == 0) {
    mc = new_mcp_client(&f, mem);
    rv = mc != NULL ? 0 : ACP_ERR_NOMEM;
  }
  if (rv == 0)
    rv = connect_link(&f, mc, ACP_MCP_ACP_SHAPE_M1, &link);
  if (rv == 0)
    rv = call_tool(&f, mc, "echo", "{\"message\":\"x\"}", NULL);
  if (rv == 0 && strcmp(f.last_text, "x") != 0)
    rv = ACP_ERR_PROTOCOL;
  if (rv == 0)
    rv = raw_call(&f, "mcp/message",
                  "{\"serverId\":\"" ID1_HEX "\",\"requestId\":7,"
                  "\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
                  "\"arguments\":{\"message\":\"m2\"}}}");
  if (link != NULL && rv == 0)
    acp_mcp_acp_link_close(link);
  acp_mcp_client_free(mc);
  mc = NULL;
  link = NULL;
  /* The fallback to the connectionless form and the era translation. */
  if (rv == 0) {
    f.sdk = 1;
    mc = new_mcp_client(&f, mem);
    rv = mc != NULL ? 0 : ACP_ERR_NOMEM;
  }
  if (rv == 0)
    rv = connect_link(&f, mc, ACP_MCP_ACP_SHAPE_M1, &link);
  if (rv == 0)
    rv = call_tool(&f, mc, "echo", "{\"message\":\"y\"}", NULL);
  if (rv == 0 && strcmp(f.last_text, "y") != 0)
    rv = ACP_ERR_PROTOCOL;
  if (link != NULL && rv == 0)
    acp_mcp_acp_link_close(link);
  acp_mcp_client_free(mc);
  fx_free(&f);
  return rv;
}

static void test_mcp_acp_allocation_failures(void **state) {
  failmem fm = {0, -1, 0};
  acp_mem mem = failmem_start(&fm, -1);
  long total;
  long i;

  (void)state;
  assert_int_equal(scenario(&mem), 0);
  assert_int_equal(fm.live, 0);
  total = fm.count;
  assert_true(total > 10);
  for (i = 0; i < total; i++) {
    mem = failmem_start(&fm, i);
    (void)scenario(&mem);
    assert_int_equal(fm.live, 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mcp_acp_end_to_end),
      cmocka_unit_test(test_mcp_acp_concurrent_connections),
      cmocka_unit_test(test_mcp_acp_cancel_mid_flight),
      cmocka_unit_test(test_mcp_acp_connectionless_m2),
      cmocka_unit_test(test_mcp_acp_m0_form),
      cmocka_unit_test(test_mcp_acp_unknown_ids),
      cmocka_unit_test(test_mcp_acp_connections_per_server_capped),
      cmocka_unit_test(test_mcp_acp_decl_and_caps),
      cmocka_unit_test(test_mcp_acp_consumer_falls_back_to_connectionless),
      cmocka_unit_test(test_mcp_acp_connectionless_notify_and_cancel),
      cmocka_unit_test(test_mcp_acp_connectionless_unknown_server),
      cmocka_unit_test(test_mcp_acp_connectionless_to_libacp_provider),
      cmocka_unit_test(test_mcp_acp_consumer_falls_back_from_m0_to_m1),
      cmocka_unit_test(test_mcp_acp_allocation_failures),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
