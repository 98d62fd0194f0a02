/*
 * MCP over HTTP: the server (acp_http_server) on a uv loop in a thread of
 * its own, hit with raw sockets for the status codes and SSE framing, and
 * with our libcurl client (acp_http_client) on a second loop for round
 * trips over Streamable HTTP, legacy HTTP+SSE and fallback probing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "acp/http.h"
#include "http/http_internal.h"
#include "http_test.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* MARK: - Server thread */

typedef struct srv_thread {
  ht_server s;        /* first: ht_setup()/ht_teardown() */
  acp_mcp_call *held; /* a tools/call left unanswered by "slow" */
} srv_thread;

/* Sends progress and stays unanswered until "finish" is called. */
static int tool_slow(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  srv_thread *t = ud;
  (void)args;
  t->held = call;
  return acp_mcp_call_progress(call, 1, 2, "half");
}

static int tool_finish(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  srv_thread *t = ud;
  (void)args;
  if (t->held) {
    acp_mcp_call_respond_text(t->held, "slow done", 9, false);
    t->held = NULL;
  }
  return acp_mcp_call_respond_text(call, "ok", 2, false);
}

/* SSE polling: progress, close the HTTP response, then answer at once. */
static int tool_poll(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  int rv;
  (void)args;
  (void)ud;
  rv = acp_mcp_call_progress(call, 1, 2, "before close");
  if (rv == 0)
    rv = acp_http_call_close_stream(call);
  if (rv != 0)
    return rv;
  return acp_mcp_call_respond_text(call, "polled", 6, false);
}

/* Announces a change of the tool list (to subscriptions/listen streams and
 * sessions). */
static int tool_change(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  int rv;
  (void)args;
  rv = acp_mcp_server_list_changed((acp_mcp_server *)ud, ACP_MCP_LIST_TOOLS);
  if (rv != 0)
    return rv;
  return acp_mcp_call_respond_text(call, "changed", 7, false);
}

/* Answers the notification "test/poke" with "test/poked" on the conn's
 * standalone (GET) stream. */
static int on_poke(acp_mcp_conn *conn, const acp_rpc_msg *msg, void *ud) {
  (void)msg;
  (void)ud;
  return acp_mcp_conn_notify(conn, "test/poked", NULL, 0);
}

static int srv_start(ht_server *s) {
  srv_thread *t = s->user_data;
  acp_http_server_options *o = NULL;
  assert_int_equal(acp_mcp_server_new(&s->reg, "t", "1", NULL, NULL), 0);
  assert_int_equal(ht_add_tool(s->reg, "echo", NULL, ht_tool_echo, NULL), 0);
  assert_int_equal(ht_add_tool(s->reg, "slow", NULL, tool_slow, t), 0);
  assert_int_equal(ht_add_tool(s->reg, "finish", NULL, tool_finish, t), 0);
  assert_int_equal(ht_add_tool(s->reg, "poll", NULL, tool_poll, t), 0);
  assert_int_equal(ht_add_tool(s->reg, "change", NULL, tool_change, s->reg), 0);
  {
    /* `region` and `n` are mirrored in Mcp-Param-* headers (x-mcp-header). */
    acp_mcp_tool_def d;
    memset(&d, 0, sizeof(d));
    d.version = ACP_MCP_DEF_VERSION;
    d.name = "where";
    d.input_schema =
        "{\"type\":\"object\",\"properties\":{\"region\":{\"type\":"
        "\"string\",\"x-mcp-header\":\"Region\"},\"n\":{\"type\":\"number\","
        "\"x-mcp-header\":\"N\"},\"message\":{\"type\":\"string\"}}}";
    d.handler = ht_tool_echo;
    assert_int_equal(acp_mcp_server_add_tool(s->reg, &d), 0);
  }
  acp_mcp_server_set_on_notification(s->reg, on_poke);
  assert_int_equal(acp_http_server_options_new(&o, NULL), 0);
  acp_http_server_options_set_max_body(o, 1000);
  assert_int_equal(acp_http_server_new(&s->srv, &s->loop, s->reg, o, NULL), 0);
  acp_http_server_options_free(o);
  return 0;
}

static int setup(void **state) {
  return ht_setup(state, sizeof(srv_thread), srv_start);
}

/* MARK: - Raw HTTP */

/* Initialize; return the session id (static buffer). */
static const char *new_session(uint16_t port) {
  char *r = ht_post(port, "", ht_init_body, NULL);
  const char *sid;
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "application/json"));
  assert_non_null(strstr(r, "\"protocolVersion\":\"2025-11-25\""));
  sid = ht_session_id(r);
  free(r);
  return sid;
}

/* MARK: - Tests */

static void test_initialize_and_call(void **state) {
  srv_thread *t = *state;
  const char *sid = new_session(t->s.port);
  char *r;
  r = ht_post_s(
      t->s.port, sid, "",
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", NULL);
  assert_int_equal(ht_status(r), 202);
  free(r);
  r = ht_post_s(
      t->s.port, sid, "MCP-Protocol-Version: 2025-11-25\r\n",
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
      "\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":\"hi\"}}}",
      NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "Content-Type: application/json"));
  assert_non_null(strstr(r, "\"text\":\"hi\""));
  free(r);
  /* A body with raw newlines (pretty-printed JSON) works too. */
  r = ht_post_s(
      t->s.port, sid, "",
      "{\n \"jsonrpc\": \"2.0\",\n \"id\": 3,\n \"method\": \"ping\"\n}", NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "\"id\":3"));
  free(r);
}

static void test_bad_input(void **state) {
  srv_thread *t = *state;
  const char *sid = new_session(t->s.port);
  char big[2000], *r;
  /* malformed JSON */
  r = ht_post_s(t->s.port, sid, "", "{\"jsonrpc\":", NULL);
  assert_int_equal(ht_status(r), 400);
  assert_non_null(strstr(r, "-32700"));
  free(r);
  /* not a JSON-RPC message */
  r = ht_post_s(t->s.port, sid, "", "42", NULL);
  assert_int_equal(ht_status(r), 400);
  assert_non_null(strstr(r, "-32600"));
  free(r);
  /* missing session */
  r = ht_post(t->s.port, "",
              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL);
  assert_int_equal(ht_status(r), 400);
  free(r);
  /* unknown session */
  r = ht_post_s(t->s.port, "00000000000000000000000000000000", "",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);
  /* unsupported protocol version */
  r = ht_post_s(t->s.port, sid, "MCP-Protocol-Version: 1999-01-01\r\n",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL);
  assert_int_equal(ht_status(r), 400);
  free(r);
  /* wrong Origin, wrong Host */
  r = ht_post_s(t->s.port, sid, "Origin: http://evil.example\r\n",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL);
  assert_int_equal(ht_status(r), 403);
  free(r);
  r = ht_post_s(t->s.port, sid, "Origin: http://localhost:3000\r\n",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL);
  assert_int_equal(ht_status(r), 200);
  free(r);
  {
    char req[512];
    snprintf(req, sizeof(req),
             "GET /mcp HTTP/1.1\r\nHost: evil.example:%u\r\n"
             "Connection: close\r\nAccept: text/event-stream\r\n"
             "MCP-Session-Id: %s\r\n\r\n",
             t->s.port, sid);
    r = ht_raw(t->s.port, req, NULL);
    assert_int_equal(ht_status(r), 403);
    free(r);
  }
  /* body over the cap (1000 bytes) */
  memset(big, ' ', sizeof(big) - 1);
  big[sizeof(big) - 1] = 0;
  big[0] = '{';
  big[sizeof(big) - 2] = '}';
  r = ht_post_s(t->s.port, sid, "", big, NULL);
  assert_int_equal(ht_status(r), 413);
  free(r);
  /* One byte over the cap without Content-Length (chunked): 413 too, not a
   * 202 for a notification that was never delivered (the newline it is fed
   * with did not fit, and that error was dropped). */
  {
    static const char poke[] = "{\"jsonrpc\":\"2.0\",\"method\":\"test/poke\"}";
    char req[1600];
    int n;
    memset(big, ' ', 1001);
    memcpy(big, poke, sizeof(poke) - 1);
    big[1001] = 0;
    n = snprintf(req, sizeof(req),
                 "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Connection: close\r\nContent-Type: application/json\r\n"
                 "Accept: application/json, text/event-stream\r\n"
                 "MCP-Session-Id: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "3e9\r\n%s\r\n0\r\n\r\n",
                 sid, big);
    assert_true(n > 0 && (size_t)n < sizeof(req));
    r = ht_raw(t->s.port, req, NULL);
    assert_int_equal(ht_status(r), 413);
    free(r);
  }
  /* wrong content type, other path, other method */
  {
    char req[512];
    snprintf(req, sizeof(req),
             "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
             "Content-Type: text/plain\r\nMCP-Session-Id: %s\r\n"
             "Content-Length: 2\r\n\r\n{}",
             sid);
    r = ht_raw(t->s.port, req, NULL);
    assert_int_equal(ht_status(r), 415);
    free(r);
    r = ht_raw(t->s.port,
               "GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               "Connection: close\r\n\r\n",
               NULL);
    assert_int_equal(ht_status(r), 404);
    free(r);
    r = ht_raw(t->s.port,
               "PUT /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               "Connection: close\r\nContent-Length: 0\r\n\r\n",
               NULL);
    assert_int_equal(ht_status(r), 405);
    free(r);
  }
  /* The session still works after all that. */
  r = ht_post_s(t->s.port, sid, "",
                "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}", NULL);
  assert_int_equal(ht_status(r), 200);
  free(r);
}

/* The header block is bounded by libmicrohttpd's per-connection pool
 * (CONN_POOL_BYTES in http_server.c): a 10 KiB header is served, a 20 KiB
 * one gets 431, and the same server keeps serving afterwards. */
static void test_header_block_limit(void **state) {
  srv_thread *t = *state;
  const char *sid = new_session(t->s.port);
  static const char body[] =
      "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}";
  size_t sizes[2] = {10 * 1024, 20 * 1024};
  int want[2] = {200, 431};
  size_t i, cap = 32 * 1024;
  char *hdr, *req, *r;
  for (i = 0; i < 2; i++) {
    hdr = malloc(cap);
    req = malloc(cap + 1024);
    assert_non_null(hdr);
    assert_non_null(req);
    /* ht_post() formats into a fixed 8 KiB buffer: build this one here. */
    snprintf(hdr, cap, "MCP-Session-Id: %s\r\nX-Big: %0*d\r\n", sid,
             (int)sizes[i], 0);
    ht_fmt_post(req, cap + 1024, t->s.port, hdr, body);
    r = ht_raw(t->s.port, req, NULL);
    assert_int_equal(ht_status(r), want[i]);
    if (want[i] == 200)
      assert_non_null(strstr(r, "\"id\":7"));
    free(r);
    free(req);
    free(hdr);
  }
  r = ht_post_s(t->s.port, sid, "",
                "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}", NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "\"id\":8"));
  free(r);
}

static void test_delete(void **state) {
  srv_thread *t = *state;
  const char *sid = new_session(t->s.port);
  char req[512], *r;
  snprintf(req, sizeof(req),
           "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
           "MCP-Session-Id: %s\r\n\r\n",
           sid);
  r = ht_raw(t->s.port, req, NULL);
  assert_int_equal(ht_status(r), 200);
  free(r);
  r = ht_post_s(t->s.port, sid, "",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);
  r = ht_raw(t->s.port, req, NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);
}

static void test_sse_and_resume(void **state) {
  srv_thread *t = *state;
  const char *sid = new_session(t->s.port);
  char req[512], ev[64], *r;
  unsigned no = 0;
  /* A call that reports progress and stays open: SSE, priming first. */
  r = ht_post_s(
      t->s.port, sid, "",
      "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":"
      "{\"name\":\"slow\",\"_meta\":{\"progressToken\":\"tk\"}}}",
      "\"half\"");
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "text/event-stream"));
  {
    const char *p = strstr(r, "\r\n\r\n");
    assert_non_null(p);
    p = strstr(p, "id: ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "id: %u-0\n", &no), 1);
    snprintf(ev, sizeof(ev), "id: %u-0\nretry: 1000\ndata: \n\n", no);
    assert_non_null(strstr(r, ev));
    snprintf(ev, sizeof(ev), "id: %u-1\ndata: {", no);
    assert_non_null(strstr(r, ev));
  }
  assert_non_null(strstr(r, "notifications/progress"));
  free(r); /* disconnect before the answer */
  r = ht_post_s(
      t->s.port, sid, "",
      "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":"
      "{\"name\":\"finish\"}}",
      NULL);
  assert_int_equal(ht_status(r), 200);
  free(r);
  /* Resume after event 1-1: only the answer (1-2), then the end. */
  snprintf(req, sizeof(req), "Last-Event-ID: %u-1\r\n", no);
  r = ht_request(t->s.port, "GET", sid, req, NULL);
  assert_int_equal(ht_status(r), 200);
  snprintf(ev, sizeof(ev), "id: %u-2\ndata: {", no);
  assert_non_null(strstr(r, ev));
  assert_non_null(strstr(r, "slow done"));
  assert_null(strstr(r, "notifications/progress"));
  snprintf(ev, sizeof(ev), "id: %u-0", no);
  assert_null(strstr(r, ev));
  free(r);
  /* A malformed or unknown Last-Event-ID. */
  r = ht_request(t->s.port, "GET", sid, "Last-Event-ID: nonsense\r\n", NULL);
  assert_int_equal(ht_status(r), 400);
  free(r);
  r = ht_request(t->s.port, "GET", sid, "Last-Event-ID: 77-0\r\n", NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);
}

/* A GET stream whose client leaves while nothing is being sent: the server
 * notices the close (not only at its next write), so the session's one GET
 * is free again for the reconnecting client instead of 409 Conflict. */
/* MARK: - 2026-07-28 */

#define META26_HTTP                                                            \
  "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","     \
  "\"io.modelcontextprotocol/clientCapabilities\":{}}"
#define H26 "MCP-Protocol-Version: 2026-07-28\r\n"

static void test_stateless_requests(void **state) {
  srv_thread *t = *state;
  const char *sid = new_session(t->s.port);
  char *r;

  /* A 2026 request needs no session and opens none. */
  r = ht_post(t->s.port, H26 "Mcp-Method: tools/call\r\nMcp-Name: echo\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
              "\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":"
              "\"hi\"}," META26_HTTP "}}",
              NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "Content-Type: application/json"));
  assert_null(strstr(r, "MCP-Session-Id"));
  assert_non_null(strstr(r, "\"resultType\":\"complete\""));
  free(r);
  /* The name may come base64-encoded ("echo"). */
  r = ht_post(t->s.port,
              H26 "Mcp-Method: tools/call\r\nMcp-Name: =?base64?ZWNobw==?=\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
              "\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":"
              "\"b64\"}," META26_HTTP "}}",
              NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "b64"));
  free(r);
  /* Missing or disagreeing headers: 400 HeaderMismatch with the id. */
  r = ht_post(t->s.port, H26 "Mcp-Method: tools/call\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
              "\"params\":{\"name\":\"echo\"," META26_HTTP "}}",
              NULL);
  assert_int_equal(ht_status(r), 400);
  assert_non_null(strstr(r, "\"id\":3,\"error\":{\"code\":-32020"));
  free(r);
  r = ht_post(t->s.port, H26 "Mcp-Method: tools/list\r\nMcp-Name: echo\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\","
              "\"params\":{\"name\":\"echo\"," META26_HTTP "}}",
              NULL);
  assert_int_equal(ht_status(r), 400);
  assert_non_null(strstr(r, "-32020"));
  free(r);
  r = ht_post(t->s.port,
              "MCP-Protocol-Version: 2025-11-25\r\nMcp-Method: tools/list\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\","
              "\"params\":{" META26_HTTP "}}",
              NULL);
  assert_int_equal(ht_status(r), 400);
  assert_non_null(strstr(r, "-32020"));
  free(r);
  r = ht_post(t->s.port, "Mcp-Method: tools/list\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/list\","
              "\"params\":{" META26_HTTP "}}",
              NULL);
  assert_int_equal(ht_status(r), 400);
  assert_non_null(strstr(r, "-32020"));
  free(r);
  /* Errors the transport binds to a status. */
  r = ht_post(t->s.port, H26 "Mcp-Method: ping\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\","
              "\"params\":{" META26_HTTP "}}",
              NULL);
  assert_int_equal(ht_status(r), 404);
  assert_non_null(strstr(r, "\"id\":7,\"error\":{\"code\":-32601"));
  free(r);
  r = ht_post(t->s.port, H26 "Mcp-Method: server/discover\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"server/discover\","
              "\"params\":{}}",
              NULL);
  assert_int_equal(ht_status(r), 400);
  assert_non_null(strstr(r, "-32602"));
  free(r);
  r = ht_post(t->s.port,
              "MCP-Protocol-Version: 1999-01-01\r\nMcp-Method: tools/list\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\","
              "\"params\":{\"_meta\":{\"io.modelcontextprotocol/"
              "protocolVersion\":\"1999-01-01\",\"io.modelcontextprotocol/"
              "clientCapabilities\":{}}}}",
              NULL);
  assert_int_equal(ht_status(r), 400);
  assert_non_null(strstr(r, "\"code\":-32022"));
  free(r);
  /* A streamed answer has no event ids (nothing to resume) and no session;
   * the session opened above is untouched. */
  r = ht_post(t->s.port, H26 "Mcp-Method: tools/call\r\nMcp-Name: poll\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\","
              "\"params\":{\"name\":\"poll\",\"_meta\":{\"progressToken\":1,"
              "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
              "\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
              NULL);
  assert_int_equal(ht_status(r), 200);
  assert_null(strstr(r, "MCP-Session-Id"));
  assert_null(strstr(r, "\nid: "));
  assert_non_null(strstr(r, "notifications/progress"));
  /* The tool's close_stream was refused (it answers with that error): the
   * answer is on this stream, not held for a reconnection. */
  assert_non_null(strstr(r, "\"id\":10,\"result\""));
  assert_non_null(strstr(r, "\"isError\":true"));
  free(r);
  assert_int_equal(acp_http_server_session_count(t->s.srv), 1);
  /* x-mcp-header parameters: header and argument must agree. */
  {
    static const struct {
      const char *headers;
      int status;
    } cases[] = {
        {"Mcp-Param-Region: eu-west\r\nMcp-Param-N: 42.0\r\n", 200},
        {"Mcp-Param-Region: =?base64?ZXUtd2VzdA==?=\r\nmcp-param-n: 42\r\n",
         200},
        {"Mcp-Param-N: 42\r\n", 400},                              /* missing */
        {"Mcp-Param-Region: us-east\r\nMcp-Param-N: 42\r\n", 400}, /* differs */
        {"Mcp-Param-Region: eu-west\r\nMcp-Param-N: 41\r\n", 400},
        {"Mcp-Param-Region: =?base64?ZXUtd2VzdA?=\r\nMcp-Param-N: 42\r\n",
         400}, /* bad padding */
        {"Mcp-Param-Region: =?base64?ZXUt!!!2VzdA==?=\r\nMcp-Param-N: 42\r\n",
         400}, /* not base64 */
    };
    size_t i;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
      char h[512];
      snprintf(h, sizeof(h),
               H26 "Mcp-Method: tools/call\r\nMcp-Name: where\r\n%s",
               cases[i].headers);
      r = ht_post(t->s.port, h,
                  "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\","
                  "\"params\":{\"name\":\"where\",\"arguments\":{\"region\":"
                  "\"eu-west\",\"n\":42,\"message\":\"m\"}," META26_HTTP "}}",
                  NULL);
      if (ht_status(r) != cases[i].status)
        fail_msg("case %zu: %s", i, r);
      if (cases[i].status == 400)
        assert_non_null(strstr(r, "\"code\":-32020"));
      free(r);
    }
    /* A null or absent argument expects no header. */
    r = ht_post(t->s.port, H26 "Mcp-Method: tools/call\r\nMcp-Name: where\r\n",
                "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"where\",\"arguments\":{\"region\":"
                "null,\"message\":\"m\"}," META26_HTTP "}}",
                NULL);
    assert_int_equal(ht_status(r), 200);
    free(r);
  }
  r = ht_post_s(t->s.port, sid, "MCP-Protocol-Version: 2025-11-25\r\n",
                "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/list\"}",
                NULL);
  assert_int_equal(ht_status(r), 200);
  assert_null(strstr(r, "resultType"));
  free(r);
}

/* subscriptions/listen: its POST's SSE response stays open, carries the
 * acknowledgement first, then the changes another request causes, tagged
 * with its id; the client leaving ends it. */
static void test_stateless_listen(void **state) {
  srv_thread *t = *state;
  char req[2048], buf[8192];
  const char *ack;
  size_t n;
  int eof = 0;
  int fd;
  char *r;

  ht_fmt_post(req, sizeof(req), t->s.port,
              H26 "Mcp-Method: subscriptions/listen\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"subscriptions/"
              "listen\",\"params\":{" META26_HTTP ",\"notifications\":{"
              "\"toolsListChanged\":true,\"promptsListChanged\":true}}}");
  fd = ht_connect(t->s.port);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
  n = ht_read_until(fd, buf, sizeof(buf), 0, "}}}\n", &eof);
  assert_false(eof);
  assert_int_equal(ht_status(buf), 200);
  assert_non_null(strstr(buf, "text/event-stream"));
  assert_null(strstr(buf, "MCP-Session-Id"));
  assert_null(strstr(buf, "\nid: "));
  /* The first event is the acknowledgement: prompts are not offered. */
  ack = strstr(buf, "data: ");
  assert_non_null(ack);
  {
    static const char want[] =
        "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
        "subscriptions/acknowledged\",\"params\":{\"_meta\":{"
        "\"io.modelcontextprotocol/subscriptionId\":7},"
        "\"notifications\":{\"toolsListChanged\":true}}}\n";
    if (strncmp(ack, want, sizeof(want) - 1) != 0)
      fail_msg("first event: %s", ack);
  }
  assert_null(strstr(buf, "\"id\":7,"));
  /* Another 2026 request changes the tools: the open stream hears it. */
  r = ht_post(t->s.port, H26 "Mcp-Method: tools/call\r\nMcp-Name: change\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\","
              "\"params\":{\"name\":\"change\"," META26_HTTP "}}",
              NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "\"changed\""));
  assert_null(strstr(r, "list_changed"));
  free(r);
  n = ht_read_until(fd, buf, sizeof(buf), n, "}}}\n", &eof);
  assert_false(eof);
  assert_non_null(
      strstr(buf, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                  "tools/list_changed\",\"params\":{\"_meta\":{"
                  "\"io.modelcontextprotocol/subscriptionId\":7}}}\n"));
  (void)n;
  close(fd);
  /* Its conn went with it; changes keep working for everyone else. */
  r = ht_post(t->s.port, H26 "Mcp-Method: tools/call\r\nMcp-Name: change\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\","
              "\"params\":{\"name\":\"change\"," META26_HTTP "}}",
              NULL);
  assert_int_equal(ht_status(r), 200);
  free(r);
  assert_int_equal(acp_http_server_session_count(t->s.srv), 0);
}

static void test_get_client_leaves(void **state) {
  srv_thread *t = *state;
  const char *sid = new_session(t->s.port);
  char req[512], *r;
  ht_fmt_request(req, sizeof(req), "GET", sid, "");
  r = ht_raw(t->s.port, req, "retry: ");
  assert_int_equal(ht_status(r), 200);
  free(r); /* the socket is closed here, with the stream idle */
  /* The close reaches the server's loop asynchronously. */
  assert_int_equal(ht_status_after(t->s.port, req, "retry: ", 409), 200);
}

/* acp_http_call_close_stream() then an immediate answer: the POST's
 * response ends after what came before the close (priming, progress); the
 * answer waits for the GET with Last-Event-ID. */
static void test_close_stream_holds_answer(void **state) {
  srv_thread *t = *state;
  const char *sid = new_session(t->s.port);
  char req[512], ev[64], *r;
  const char *p;
  unsigned no = 0;
  r = ht_post_s(
      t->s.port, sid, "",
      "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":"
      "{\"name\":\"poll\",\"_meta\":{\"progressToken\":\"pt\"}}}",
      NULL); /* read until the server ends the response */
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "text/event-stream"));
  p = strstr(r, "\r\n\r\n");
  assert_non_null(p);
  p = strstr(p, "id: ");
  assert_non_null(p);
  assert_int_equal(sscanf(p, "id: %u-0\n", &no), 1);
  assert_non_null(strstr(r, "before close"));
  assert_null(strstr(r, "polled"));
  free(r);
  /* Reconnect after the progress event (1): the answer, then the end. */
  snprintf(req, sizeof(req), "Last-Event-ID: %u-1\r\n", no);
  r = ht_request(t->s.port, "GET", sid, req, NULL);
  assert_int_equal(ht_status(r), 200);
  snprintf(ev, sizeof(ev), "id: %u-2\ndata: {", no);
  assert_non_null(strstr(r, ev));
  assert_non_null(strstr(r, "polled"));
  assert_null(strstr(r, "before close"));
  free(r);
}

/* A session at `version` (which the answer must echo): its id (static
 * buffer, as ht_session_id()). */
static const char *session_at(uint16_t port, const char *version) {
  char body[512], want[64];
  const char *sid;
  char *r;
  snprintf(body, sizeof(body),
           "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
           "\"params\":{\"protocolVersion\":\"%s\",\"capabilities\":{},"
           "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}",
           version);
  r = ht_post(port, "", body, NULL);
  assert_int_equal(ht_status(r), 200);
  snprintf(want, sizeof(want), "\"protocolVersion\":\"%s\"", version);
  assert_non_null(strstr(r, want));
  sid = ht_session_id(r);
  free(r);
  return sid;
}

/* The SSE priming event (an id, retry and empty data) came with
 * 2025-11-25; a client of an earlier revision parses its empty data as a
 * message and fails. Streams of a session get it only from 2025-11-25 on:
 * the POST stream of a call and the standalone GET stream, at each
 * version. Each stream is read up to a message that would follow the
 * priming event, so its absence is not a matter of timing. */
static void priming_at(uint16_t port, const char *version, bool primed) {
  char req[512], buf[8192], *r;
  const char *sid = session_at(port, version);
  size_t n;
  int fd, eof;
  /* A call with progress: the POST turns into a stream. */
  r = ht_post_s(
      port, sid, "",
      "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":"
      "{\"name\":\"slow\",\"_meta\":{\"progressToken\":\"tk\"}}}",
      "\"half\"");
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "text/event-stream"));
  assert_int_equal(strstr(r, "retry: ") != NULL, primed);
  assert_int_equal(strstr(r, "data: \n\n") != NULL, primed);
  free(r);
  r = ht_post_s(port, sid, "",
                "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"finish\"}}",
                NULL);
  assert_int_equal(ht_status(r), 200);
  free(r);
  /* The GET stream, open before anything is sent on it. */
  ht_fmt_request(req, sizeof(req), "GET", sid, "");
  fd = ht_connect(port);
  assert_true(fd >= 0);
  assert_int_equal(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
  n = ht_read_until(fd, buf, sizeof(buf), 0, "\r\n\r\n", &eof);
  assert_int_equal(ht_status(buf), 200);
  r = ht_post_s(port, sid, "", "{\"jsonrpc\":\"2.0\",\"method\":\"test/poke\"}",
                NULL);
  assert_int_equal(ht_status(r), 202);
  free(r);
  n = ht_read_until(fd, buf, sizeof(buf), n, "test/poked", &eof);
  assert_non_null(strstr(buf, "test/poked"));
  assert_int_equal(strstr(buf, "retry: ") != NULL, primed);
  assert_int_equal(strstr(buf, "data: \n\n") != NULL, primed);
  close(fd);
}

static void test_priming_only_from_2025_11_25(void **state) {
  srv_thread *t = *state;
  priming_at(t->s.port, "2024-11-05", false);
  priming_at(t->s.port, "2025-03-26", false);
  priming_at(t->s.port, "2025-06-18", false);
  priming_at(t->s.port, "2025-11-25", true);
}

/*
 * Requests whose answers could not be told apart got none: a batch on a
 * session without batches (the conn answers it with one error, id null)
 * and a request whose id is an object or a boolean (answered id null as
 * well) left the POST waiting for ever, its stream kept by the session.
 * Both are refused at once with -32600; a null, fractional or big id is
 * answered as it came; 2025-03-26 keeps its batches.
 */
/* POST `body` on session `sid` at `version`: the status must be `status`
 * and the answer hold `want` and `want2` (each NULL for no check). */
static void post_at(uint16_t port, const char *sid, const char *version,
                    const char *body, int status, const char *want,
                    const char *want2) {
  char h[64];
  char *r;
  snprintf(h, sizeof(h), "MCP-Protocol-Version: %s\r\n", version);
  r = ht_post_s(port, sid, h, body, NULL);
  assert_int_equal(ht_status(r), status);
  if (want != NULL)
    assert_non_null(strstr(r, want));
  if (want2 != NULL)
    assert_non_null(strstr(r, want2));
  free(r);
}

static void test_unanswerable_requests_refused(void **state) {
  srv_thread *t = *state;
  uint16_t port = t->s.port;
  char sid[128];
  snprintf(sid, sizeof(sid), "%s", session_at(port, "2025-06-18"));
  post_at(port, sid, "2025-06-18",
          "[{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"},"
          "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}]",
          400, "batches need protocol version 2025-03-26", NULL);
  post_at(port, sid, "2025-06-18",
          "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", 400, "-32600",
          NULL);
  post_at(port, sid, "2025-06-18",
          "{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", 400, NULL,
          NULL);
  post_at(port, sid, "2025-06-18",
          "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", 200,
          "\"id\":null,\"result\":{}", NULL);
  post_at(port, sid, "2025-06-18",
          "{\"jsonrpc\":\"2.0\",\"id\":1e2,\"method\":\"ping\"}", 200,
          "\"id\":1e2,\"result\":{}", NULL);
  /* 2025-03-26: batches are answered, one with an object id is refused. */
  snprintf(sid, sizeof(sid), "%s", session_at(port, "2025-03-26"));
  post_at(port, sid, "2025-03-26",
          "[{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"},"
          "{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"method\":\"ping\"}]",
          200, "\"id\":2,\"result\":{}", "\"id\":\"b\",\"result\":{}");
  post_at(port, sid, "2025-03-26",
          "[{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"},"
          "{\"jsonrpc\":\"2.0\",\"id\":[5],\"method\":\"ping\"}]",
          400, "-32600", NULL);
  /* An id already waiting for its answer (here: earlier in the batch)
   * is refused, and the batch leaves nothing behind: the same ids go
   * through at once after. A repeated progress token is not an error. */
  post_at(port, sid, "2025-03-26",
          "[{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"},"
          "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}]",
          400, "already waits for its answer", NULL);
  post_at(port, sid, "2025-03-26",
          "[{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"},"
          "{\"jsonrpc\":\"2.0\",\"id\":\"6\",\"method\":\"ping\"}]",
          200, "\"id\":6,\"result\":{}", "\"id\":\"6\",\"result\":{}");
  post_at(port, sid, "2025-03-26",
          "[{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\",\"params\":{"
          "\"_meta\":{\"progressToken\":\"t\"}}},"
          "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"params\":{"
          "\"_meta\":{\"progressToken\":\"t\"}}}]",
          200, "\"id\":8,\"result\":{}", "\"id\":9,\"result\":{}");
}

static void test_legacy_raw(void **state) {
  srv_thread *t = *state;
  char *r = ht_raw(t->s.port,
                   "GET /sse HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Accept: text/event-stream\r\n\r\n",
                   "sessionId=");
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "event: endpoint\ndata: /message?sessionId="));
  free(r);
  r = ht_raw(t->s.port,
             "POST /message?sessionId=nope HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Connection: close\r\nContent-Type: application/json\r\n"
             "Content-Length: 2\r\n\r\n{}",
             NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);
}

/* MARK: - Our client against our server */

typedef struct cl {
  ht_client h;
  int status;
  char text[256];
  int done;
  int want_get;                 /* call the tool once the GET stream is open */
  acp_http_get_state states[4]; /* GET states reported, in order */
  int nstates;
} cl;

static int on_call(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                   void *ud) {
  cl *x = ud;
  (void)c;
  x->status = status;
  if (status == 0) {
    size_t n;
    const char *raw = acp_json_raw(msg->result, &n);
    snprintf(x->text, sizeof(x->text), "%.*s", (int)n, raw);
  }
  x->done = 1;
  acp_http_client_close(x->h.hc, 1000, NULL, NULL);
  return 0;
}

static int on_init(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                   void *ud) {
  cl *x = ud;
  (void)msg;
  if (status != 0) {
    x->status = status;
    x->done = 1;
    acp_http_client_close(x->h.hc, 0, NULL, NULL);
    return 0;
  }
  if (x->want_get)
    return 0; /* on_get calls the tool */
  return acp_mcp_client_call_tool(c, "echo", "{\"message\":\"round trip\"}", 24,
                                  NULL, uv_now(&x->h.loop), on_call, x, NULL);
}

static void on_get(acp_http_client *hc, acp_http_get_state st, void *ud) {
  cl *x = ud;
  assert_ptr_equal(hc, x->h.hc);
  assert_int_equal(acp_http_client_get_state(hc), st);
  if (x->nstates < 4)
    x->states[x->nstates++] = st;
  if (st == ACP_HTTP_GET_OPEN)
    assert_int_equal(acp_mcp_client_call_tool(
                         x->h.c, "echo", "{\"message\":\"round trip\"}", 24,
                         NULL, uv_now(&x->h.loop), on_call, x, NULL),
                     0);
}

static void roundtrip(uint16_t port, const char *path, acp_http_transport mode,
                      acp_http_transport expect) {
  cl x;
  memset(&x, 0, sizeof(x));
  x.status = -1;
  ht_client_open(&x.h, port, path, mode);
  ht_client_run(&x.h, on_init, &x);
  assert_int_equal(x.done, 1);
  assert_int_equal(x.status, 0);
  assert_non_null(strstr(x.text, "round trip"));
  (void)expect;
  ht_client_close(&x.h);
}

/* The standalone GET stream reports OPEN through the callback (the tool is
 * called from there), and the state query agrees. */
static void test_client_get_stream(void **state) {
  srv_thread *t = *state;
  cl x;
  memset(&x, 0, sizeof(x));
  x.status = -1;
  x.want_get = 1;
  ht_client_open(&x.h, t->s.port, "/mcp", ACP_HTTP_STREAMABLE);
  assert_int_equal(acp_http_client_get_state(x.h.hc), ACP_HTTP_GET_NONE);
  assert_int_equal(acp_http_client_get_state(NULL), ACP_HTTP_GET_NONE);
  acp_http_client_set_get_stream(x.h.hc, 1);
  acp_http_client_set_get_cb(x.h.hc, on_get, &x);
  ht_client_run(&x.h, on_init, &x);
  assert_int_equal(x.done, 1);
  assert_int_equal(x.status, 0);
  assert_non_null(strstr(x.text, "round trip"));
  /* Closing reports nothing more. */
  assert_int_equal(x.nstates, 1);
  assert_int_equal(x.states[0], ACP_HTTP_GET_OPEN);
  ht_client_close(&x.h);
}

static void test_client_streamable(void **state) {
  srv_thread *t = *state;
  size_t before = 0;
  roundtrip(t->s.port, "/mcp", ACP_HTTP_STREAMABLE, ACP_HTTP_STREAMABLE);
  (void)before;
}

static void test_client_legacy(void **state) {
  srv_thread *t = *state;
  roundtrip(t->s.port, "/sse", ACP_HTTP_LEGACY_SSE, ACP_HTTP_LEGACY_SSE);
}

static void test_client_fallback(void **state) {
  srv_thread *t = *state;
  /* POST /sse is 405: the client falls back to GET /sse. */
  roundtrip(t->s.port, "/sse", ACP_HTTP_AUTO, ACP_HTTP_LEGACY_SSE);
  roundtrip(t->s.port, "/mcp", ACP_HTTP_AUTO, ACP_HTTP_STREAMABLE);
}

static void test_client_bad_url(void **state) {
  uv_loop_t loop;
  acp_mcp_client *c = NULL;
  acp_http_client *hc = NULL;
  (void)state;
  uv_loop_init(&loop);
  assert_int_equal(acp_mcp_client_new(&c, NULL, "t", "1", NULL, NULL), 0);
  assert_int_equal(acp_http_client_new(&hc, &loop, c, "ftp://x/", ACP_HTTP_AUTO,
                                       NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(hc);
  acp_mcp_client_free(c);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* MARK: - Helpers */

static void test_origin_host_checks(void **state) {
  acp_http_server_options *o = NULL;
  char hex[33];
  (void)state;
  assert_int_equal(acp_http_server_options_new(&o, NULL), 0);
  assert_true(acp__http_origin_ok(o, NULL));
  assert_true(acp__http_origin_ok(o, "http://localhost:6274"));
  assert_true(acp__http_origin_ok(o, "https://127.0.0.1"));
  assert_true(acp__http_origin_ok(o, "http://[::1]:80"));
  assert_false(acp__http_origin_ok(o, "http://localhost.evil.com"));
  assert_false(acp__http_origin_ok(o, "http://evil.com"));
  assert_false(acp__http_origin_ok(o, "null"));
  assert_false(acp__http_origin_ok(o, "http://127.0.0.1.nip.io"));
  assert_int_equal(acp_http_server_options_add_origin(o, "https://app.example"),
                   0);
  assert_true(acp__http_origin_ok(o, "https://app.example"));
  assert_true(acp__http_host_ok(o, "localhost:1234"));
  assert_true(acp__http_host_ok(o, "[::1]:1234"));
  assert_false(acp__http_host_ok(o, "evil.com"));
  assert_false(acp__http_host_ok(o, "localhost.evil.com:80"));
  assert_int_equal(acp_http_server_options_add_host(o, "myhost"), 0);
  assert_true(acp__http_host_ok(o, "MyHost:80"));
  assert_int_equal(acp_http_server_options_set_address(o, "not-an-ip", 1),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_server_options_set_path(o, "nope"),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_http_server_options_free(o);
  assert_int_equal(acp__http_random_hex(hex, 16), 0);
  assert_int_equal(strlen(hex), 32);
}

/* MARK: - Worker prefix */

static int srv_start_prefixed(ht_server *s) {
  acp_http_server_options *o = NULL;
  assert_int_equal(acp_mcp_server_new(&s->reg, "t", "1", NULL, NULL), 0);
  assert_int_equal(ht_add_tool(s->reg, "echo", NULL, ht_tool_echo, NULL), 0);
  assert_int_equal(acp_http_server_options_new(&o, NULL), 0);
  assert_int_equal(acp_http_server_options_set_session_prefix(o, "w_7"), 0);
  assert_int_equal(acp_http_server_new(&s->srv, &s->loop, s->reg, o, NULL), 0);
  acp_http_server_options_free(o);
  return 0;
}

static int setup_prefixed(void **state) {
  return ht_setup(state, sizeof(srv_thread), srv_start_prefixed);
}

/* The session id of an initialize answer, "w_7-<32 hex>" (static). */
static const char *prefixed_session(const char *resp) {
  static char sid[80];
  const char *h = strstr(resp, "MCP-Session-Id: ");
  char hex[40];
  assert_non_null(h);
  assert_int_equal(sscanf(h + 16, "%79[^\r\n]", sid), 1);
  assert_int_equal(strlen(sid), 4 + 32);
  assert_memory_equal(sid, "w_7-", 4);
  assert_int_equal(sscanf(sid + 4, "%39[0-9a-f]", hex), 1);
  assert_int_equal(strlen(hex), 32);
  return sid;
}

static void test_session_prefix(void **state) {
  srv_thread *t = *state;
  char sid[80], *r;
  r = ht_post(t->s.port, "", ht_init_body, NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "X-Acp-Worker: w_7\r\n"));
  snprintf(sid, sizeof(sid), "%s", prefixed_session(r));
  free(r);
  /* A second session gets other random bits behind the same name. */
  r = ht_post(t->s.port, "", ht_init_body, NULL);
  assert_int_equal(ht_status(r), 200);
  assert_string_not_equal(prefixed_session(r), sid);
  free(r);
  /* The prefixed id is the session's name: requests with it work... */
  r = ht_post_s(t->s.port, sid, "MCP-Protocol-Version: 2025-11-25\r\n",
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":"
                "\"hi\"}}}",
                NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "\"text\":\"hi\""));
  assert_non_null(strstr(r, "X-Acp-Worker: w_7\r\n"));
  free(r);
  /* ...its random part alone, or another worker's name, is unknown. */
  r = ht_post_s(t->s.port, sid + 4, "",
                "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}", NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);
  sid[0] = 'v';
  r = ht_post_s(t->s.port, sid, "",
                "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}", NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);
  /* A 2026 stateless answer names the worker too, and opens no session. */
  r = ht_post(t->s.port, H26 "Mcp-Method: tools/call\r\nMcp-Name: echo\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\","
              "\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":"
              "\"s\"}," META26_HTTP "}}",
              NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "X-Acp-Worker: w_7\r\n"));
  assert_null(strstr(r, "MCP-Session-Id"));
  free(r);
}

static void test_session_prefix_option(void **state) {
  acp_http_server_options *o = NULL;
  char longest[ACP_HTTP_MAX_SESSION_PREFIX + 2];
  (void)state;
  assert_int_equal(acp_http_server_options_set_session_prefix(NULL, "w"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_server_options_new(&o, NULL), 0);
  assert_int_equal(acp_http_server_options_set_session_prefix(o, "a-b"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_server_options_set_session_prefix(o, "a b"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_server_options_set_session_prefix(o, "w\xc3\xa9"),
                   ACP_ERR_INVALID_ARGUMENT);
  memset(longest, 'x', sizeof(longest) - 1);
  longest[sizeof(longest) - 1] = 0; /* one too many */
  assert_int_equal(acp_http_server_options_set_session_prefix(o, longest),
                   ACP_ERR_INVALID_ARGUMENT);
  longest[ACP_HTTP_MAX_SESSION_PREFIX] = 0;
  assert_int_equal(acp_http_server_options_set_session_prefix(o, longest), 0);
  assert_int_equal(acp_http_server_options_set_session_prefix(o, "Az09_"), 0);
  assert_int_equal(acp_http_server_options_set_session_prefix(o, ""), 0);
  assert_int_equal(acp_http_server_options_set_session_prefix(o, NULL), 0);
  acp_http_server_options_free(o);
}

/* MARK: - Keep-alive and drain */

static int srv_start_keepalive(ht_server *s) {
  acp_http_server_options *o = NULL;
  assert_int_equal(acp_mcp_server_new(&s->reg, "t", "1", NULL, NULL), 0);
  assert_int_equal(ht_add_tool(s->reg, "echo", NULL, ht_tool_echo, NULL), 0);
  assert_int_equal(ht_add_tool(s->reg, "change", NULL, tool_change, s->reg), 0);
  assert_int_equal(acp_http_server_options_new(&o, NULL), 0);
  acp_http_server_options_set_keepalive(o, 20);
  acp_http_server_options_set_keepalive(NULL, 20); /* accepted */
  assert_int_equal(acp_http_server_new(&s->srv, &s->loop, s->reg, o, NULL), 0);
  acp_http_server_options_free(o);
  return 0;
}

static int setup_keepalive(void **state) {
  return ht_setup(state, sizeof(srv_thread), srv_start_keepalive);
}

/* Occurrences of `needle` in `hay`. */
static int count_in(const char *hay, const char *needle) {
  int k = 0;
  size_t n = strlen(needle);
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += n)
    k++;
  return k;
}

/*
 * Every answer of a large batch finds its request: 3,000 requests (numbers
 * and strings for ids, pings and tool calls), posted twice on one
 * 2025-03-26 session, are answered once each. The ids are looked up in
 * the session's index (which grows and reuses its removed slots here);
 * the search it replaced made such a batch quadratic.
 */
static void test_large_batch_answers_each_request(void **state) {
  srv_thread *t = *state;
  enum { N = 3000 };
  size_t cap = (size_t)1 << 20;
  char *body = malloc(cap), *req = malloc(cap + 1024), *buf = malloc(cap);
  char sid[128], want[64];
  size_t len = 0, n;
  int round, i, fd, eof = 0;
  assert_non_null(body);
  assert_non_null(req);
  assert_non_null(buf);
  snprintf(sid, sizeof(sid), "%s", session_at(t->s.port, "2025-03-26"));
  body[len++] = '[';
  for (i = 0; i < N; i++) {
    if (i % 3 == 2)
      len += (size_t)snprintf(
          body + len, cap - len,
          "%s{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
          "\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":"
          "\"m%d\"}}}",
          i ? "," : "", i, i);
    else if (i % 3 == 1)
      len += (size_t)snprintf(
          body + len, cap - len,
          "%s{\"jsonrpc\":\"2.0\",\"id\":\"s%d\",\"method\":\"ping\"}",
          i ? "," : "", i);
    else
      len += (size_t)snprintf(
          body + len, cap - len,
          "%s{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}", i ? "," : "",
          i);
  }
  body[len++] = ']';
  body[len] = '\0';
  for (round = 0; round < 2; round++) {
    char head[256];
    snprintf(head, sizeof(head),
             "MCP-Session-Id: %s\r\nMCP-Protocol-Version: 2025-03-26\r\n", sid);
    ht_fmt_post(req, cap + 1024, t->s.port, head, body);
    fd = ht_connect(t->s.port);
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    n = ht_read_until(fd, buf, cap, 0, NULL, &eof);
    close(fd);
    assert_true(n > 0);
    assert_int_equal(ht_status(buf), 200);
    assert_int_equal(count_in(buf, "\"result\":"), N);
    assert_int_equal(count_in(buf, "\"error\":"), 0);
    for (i = 0; i < N; i += 97) {
      if (i % 3 == 1)
        snprintf(want, sizeof(want), "\"id\":\"s%d\",\"result\"", i);
      else
        snprintf(want, sizeof(want), "\"id\":%d,\"result\"", i);
      assert_int_equal(count_in(buf, want), 1);
    }
    assert_int_equal(count_in(buf, "\"text\":\"m2999\""), 1);
  }
  free(body);
  free(req);
  free(buf);
}

static int srv_start_two_sessions(ht_server *s) {
  acp_http_server_options *o = NULL;
  assert_int_equal(acp_mcp_server_new(&s->reg, "t", "1", NULL, NULL), 0);
  assert_int_equal(ht_add_tool(s->reg, "echo", NULL, ht_tool_echo, NULL), 0);
  assert_int_equal(acp_http_server_options_new(&o, NULL), 0);
  acp_http_server_options_set_max_sessions(o, 2);
  assert_int_equal(acp_http_server_new(&s->srv, &s->loop, s->reg, o, NULL), 0);
  acp_http_server_options_free(o);
  return 0;
}

static int setup_two_sessions(void **state) {
  return ht_setup(state, sizeof(srv_thread), srv_start_two_sessions);
}

/* A ping on session `sid`: the HTTP status. */
static int ping_status(uint16_t port, const char *sid) {
  char *r =
      ht_post_s(port, sid, "",
                "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}", NULL);
  int st = ht_status(r);
  free(r);
  return st;
}

/* The GET stream of `sid`, connected (its 200 head read): the socket. */
static int open_get(uint16_t port, const char *sid) {
  char req[512], buf[4096];
  int fd, eof = 0;
  ht_fmt_request(req, sizeof(req), "GET", sid, "");
  fd = ht_connect(port);
  assert_int_equal(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
  ht_read_until(fd, buf, sizeof(buf), 0, "\r\n\r\n", &eof);
  assert_int_equal(ht_status(buf), 200);
  return fd;
}

/*
 * Sessions left without a DELETE do not fill the server for good: at the
 * cap (2 here) a new session ends the one idle for longest (its client
 * gets 404), never one with a stream connected; only when every session
 * is busy is a new one refused (503).
 */
static void test_idle_session_makes_room(void **state) {
  srv_thread *t = *state;
  char a[80], b[80], c[80];
  char *r;
  int fa, fc;
  snprintf(a, sizeof(a), "%s", new_session(t->s.port));
  snprintf(b, sizeof(b), "%s", new_session(t->s.port));
  /* a was used last: b is the idlest. */
  assert_int_equal(ping_status(t->s.port, a), 200);
  snprintf(c, sizeof(c), "%s", new_session(t->s.port));
  assert_int_equal(ping_status(t->s.port, b), 404);
  assert_int_equal(ping_status(t->s.port, a), 200);
  assert_int_equal(ping_status(t->s.port, c), 200);
  /* Both busy (a GET stream connected each): refused. */
  fa = open_get(t->s.port, a);
  fc = open_get(t->s.port, c);
  r = ht_post(t->s.port, "", ht_init_body, NULL);
  assert_int_equal(ht_status(r), 503);
  assert_non_null(strstr(r, "Too many sessions"));
  free(r);
  /* c's stream let go (once the server saw it close): c is idle, and
   * makes room. */
  close(fc);
  {
    char req[2048];
    ht_fmt_post(req, sizeof(req), t->s.port, "", ht_init_body);
    assert_int_equal(ht_status_after(t->s.port, req, NULL, 503), 200);
  }
  assert_int_equal(ping_status(t->s.port, c), 404);
  assert_int_equal(ping_status(t->s.port, a), 200);
  close(fa);
}

/* The server was stopped by the test itself. */
static int teardown_stopped(void **state) {
  ht_server *s = *state;
  assert_int_equal(s->close_rv, 0);
  free(s);
  return 0;
}

/* Open a subscriptions/listen with id 7; return its socket after the
 * acknowledgement (in buf, length in *n). */
static int open_listen(uint16_t port, char *buf, size_t cap, size_t *n) {
  char req[2048];
  int eof = 0, fd;
  ht_fmt_post(req, sizeof(req), port,
              H26 "Mcp-Method: subscriptions/listen\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"subscriptions/"
              "listen\",\"params\":{" META26_HTTP ",\"notifications\":{"
              "\"toolsListChanged\":true}}}");
  fd = ht_connect(port);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
  *n = ht_read_until(fd, buf, cap, 0, "}}}\n", &eof);
  assert_false(eof);
  assert_int_equal(ht_status(buf), 200);
  assert_non_null(strstr(buf, "subscriptions/acknowledged"));
  return fd;
}

/* An open listen gets ": keep-alive" comments between its events, and
 * its events still arrive whole. */
static void test_listen_keepalive(void **state) {
  srv_thread *t = *state;
  char buf[16384], *r;
  size_t n;
  int eof = 0, fd = open_listen(t->s.port, buf, sizeof(buf), &n);
  const char *p;
  n = ht_read_until(fd, buf, sizeof(buf), n, "\n: keep-alive\n\n", &eof);
  assert_false(eof);
  p = strstr(buf, "\n: keep-alive\n\n");
  assert_non_null(p);
  /* A second one: they repeat. */
  while (strstr(p + 1, "\n: keep-alive\n\n") == NULL) {
    ssize_t k = read(fd, buf + n, sizeof(buf) - n - 1);
    assert_true(k > 0);
    n += (size_t)k;
    buf[n] = 0;
  }
  /* Nothing else in between: no event came. */
  assert_null(strstr(buf, "list_changed"));
  r = ht_post(t->s.port, H26 "Mcp-Method: tools/call\r\nMcp-Name: change\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\","
              "\"params\":{\"name\":\"change\"," META26_HTTP "}}",
              NULL);
  assert_int_equal(ht_status(r), 200);
  free(r);
  n = ht_read_until(fd, buf, sizeof(buf), n, "list_changed", &eof);
  assert_false(eof);
  n = ht_read_until(fd, buf, sizeof(buf), n, "}}}\n\n", &eof);
  assert_non_null(strstr(buf, "data: {\"jsonrpc\":\"2.0\",\"method\":"
                              "\"notifications/tools/list_changed\""));
  (void)n;
  close(fd);
}

/* A 2025 session's standalone GET stream gets the same ": keep-alive"
 * comments (no event id), and an event that follows still arrives whole
 * with the next id. */
static void test_get_keepalive(void **state) {
  srv_thread *t = *state;
  char sid[64], req[512], buf[16384], *r;
  const char *p;
  size_t n;
  int eof = 0, fd;
  snprintf(sid, sizeof(sid), "%s", new_session(t->s.port));
  r = ht_post_s(
      t->s.port, sid, "",
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", NULL);
  assert_int_equal(ht_status(r), 202);
  free(r);
  ht_fmt_request(req, sizeof(req), "GET", sid, "");
  fd = ht_connect(t->s.port);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
  n = ht_read_until(fd, buf, sizeof(buf), 0, "\n: keep-alive\n\n", &eof);
  assert_false(eof);
  assert_int_equal(ht_status(buf), 200);
  p = strstr(buf, "\n: keep-alive\n\n");
  assert_non_null(p);
  /* A second one: they repeat. */
  while (strstr(p + 1, "\n: keep-alive\n\n") == NULL) {
    ssize_t k = read(fd, buf + n, sizeof(buf) - n - 1);
    assert_true(k > 0);
    n += (size_t)k;
    buf[n] = 0;
  }
  assert_null(strstr(buf, "list_changed"));
  /* A change made by another client (a 2026 call: the session's own call
   * would get it on its POST stream) reaches the GET stream. */
  r = ht_post(t->s.port, H26 "Mcp-Method: tools/call\r\nMcp-Name: change\r\n",
              "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\","
              "\"params\":{\"name\":\"change\"," META26_HTTP "}}",
              NULL);
  assert_int_equal(ht_status(r), 200);
  free(r);
  n = ht_read_until(fd, buf, sizeof(buf), n, "list_changed\"}\n\n", &eof);
  assert_false(eof);
  /* The event has an id line right before its data: not split by a
   * comment. */
  p = strstr(buf, "data: {\"jsonrpc\":\"2.0\",\"method\":"
                  "\"notifications/tools/list_changed\"}\n\n");
  if (p == NULL || p - buf < 5 || strncmp(p - 1, "\n", 1) != 0)
    fail_msg("no whole event: %s", buf);
  {
    const char *line = p - 2;
    while (line > buf && *line != '\n')
      line--;
    if (strncmp(line, "\nid: ", 5) != 0)
      fail_msg("no id before the event: %s", buf);
  }
  (void)n;
  close(fd);
}

/* Closing the server ends an open listen with its result, then the
 * response, before the server stops. */
static void test_close_ends_listens(void **state) {
  srv_thread *t = *state;
  char buf[16384];
  size_t n;
  int eof = 0, fd = open_listen(t->s.port, buf, sizeof(buf), &n);
  ht_server_stop(&t->s); /* returns once the server is closed */
  n = ht_read_until(fd, buf, sizeof(buf), n, NULL, &eof);
  assert_true(eof);
  if (strstr(buf, "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{") == NULL ||
      strstr(buf, "\"resultType\":\"complete\"") == NULL)
    fail_msg("no complete result: %s", buf);
  /* The chunked response ended properly (its last chunk). */
  assert_non_null(strstr(buf, "\r\n0\r\n\r\n"));
  (void)n;
  close(fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_initialize_and_call, setup,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_bad_input, setup, ht_teardown),
      cmocka_unit_test_setup_teardown(test_delete, setup, ht_teardown),
      cmocka_unit_test_setup_teardown(test_header_block_limit, setup,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_sse_and_resume, setup, ht_teardown),
      cmocka_unit_test_setup_teardown(test_get_client_leaves, setup,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_close_stream_holds_answer, setup,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_priming_only_from_2025_11_25, setup,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_legacy_raw, setup, ht_teardown),
      cmocka_unit_test_setup_teardown(test_unanswerable_requests_refused, setup,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_stateless_listen, setup,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_stateless_requests, setup,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_client_streamable, setup,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_client_get_stream, setup,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_client_legacy, setup, ht_teardown),
      cmocka_unit_test_setup_teardown(test_client_fallback, setup, ht_teardown),
      cmocka_unit_test(test_client_bad_url),
      cmocka_unit_test(test_origin_host_checks),
      cmocka_unit_test_setup_teardown(test_session_prefix, setup_prefixed,
                                      ht_teardown),
      cmocka_unit_test(test_session_prefix_option),
      cmocka_unit_test_setup_teardown(test_listen_keepalive, setup_keepalive,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_get_keepalive, setup_keepalive,
                                      ht_teardown),
      cmocka_unit_test_setup_teardown(test_idle_session_makes_room,
                                      setup_two_sessions, ht_teardown),
      cmocka_unit_test_setup_teardown(test_large_batch_answers_each_request,
                                      setup_keepalive, ht_teardown),
      cmocka_unit_test_setup_teardown(test_close_ends_listens, setup_keepalive,
                                      teardown_stopped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
