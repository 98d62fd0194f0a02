/*
 * Unit tests of the conductor's MCP-over-ACP bridge (src/acp/mcp_bridge.c,
 * include/acp/mcp_bridge.h), without processes: lines for the agent in,
 * endpoint bytes in, and what the agent, the router and each endpoint get.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/mcp_acp.h"
#include "acp/mcp_bridge.h"
#include "acp/ndjson.h"
#include "failmem.h"

/* MARK: - Harness */

#define NEP 8
#define CAP (1 << 16)

typedef struct h {
  acp_mcp_bridge *b;
  char agent[CAP]; /* what the agent got (to_agent, release) */
  char up[CAP];    /* what the bridge wrote for the router, last take */
  char routed[CAP];
  char ep[NEP][CAP];
  int closed[NEP];
  int tokens_added, tokens_removed;
  char log[CAP];
  int fail_stdio, fail_http;
  int prepares;
  uint8_t seed;
  int hops[5];
  char trace[CAP];
} h;

static void cat(char *dst, const char *s, size_t n) {
  size_t l = strlen(dst);
  if (l + n + 1 > CAP)
    n = CAP - 1 - l;
  memcpy(dst + l, s, n);
  dst[l + n] = '\0';
}

static int cb_random(acp_mcp_bridge *b, uint8_t out[16], void *ud) {
  h *x = ud;
  (void)b;
  memset(out, ++x->seed, 16);
  return 0;
}

static int cb_prepare(acp_mcp_bridge *b, acp_mcp_bridge_transport t, void *ud) {
  h *x = ud;
  x->prepares++;
  if (t == ACP_MCP_BRIDGE_TRANSPORT_HTTP) {
    if (x->fail_http)
      return ACP_ERR_SYSTEM;
    acp_mcp_bridge_set_http_port(b, 4242);
    return 0;
  }
  if (x->fail_stdio)
    return ACP_ERR_SYSTEM;
  return acp_mcp_bridge_set_socket(b, "/tmp/x/mcp.sock");
}

static void cb_write(acp_mcp_bridge *b, uint64_t ep, const char *d, size_t n,
                     void *ud) {
  h *x = ud;
  (void)b;
  assert_true(ep > 0 && ep < NEP);
  assert_true(n > 0 && d[n - 1] == '\n');
  cat(x->ep[ep], d, n);
}

static void cb_close(acp_mcp_bridge *b, uint64_t ep, void *ud) {
  h *x = ud;
  (void)b;
  assert_true(ep > 0 && ep < NEP);
  x->closed[ep]++;
}

static void cb_event(acp_mcp_bridge *b, acp_mcp_bridge_event_type t,
                     const char *detail, void *ud) {
  h *x = ud;
  (void)b;
  if (t == ACP_MCP_BRIDGE_EVENT_TOKEN_ADDED) {
    assert_int_equal(strlen(detail), 32);
    x->tokens_added++;
  } else if (t == ACP_MCP_BRIDGE_EVENT_TOKEN_REMOVED) {
    x->tokens_removed++;
  } else {
    cat(x->log, detail, strlen(detail));
    cat(x->log, "\n", 1);
  }
}

static void cb_trace(acp_mcp_bridge *b, const acp_mcp_bridge_hop *hop,
                     void *ud) {
  h *x = ud;
  char head[80];
  (void)b;
  assert_true(hop->type >= 1 && hop->type <= 4);
  assert_true(hop->len == 0 || hop->data[hop->len - 1] != '\n');
  x->hops[hop->type]++;
  snprintf(head, sizeof(head), "%d:%llu:%s:", (int)hop->type,
           (unsigned long long)hop->endpoint, hop->server ? hop->server : "-");
  cat(x->trace, head, strlen(head));
  cat(x->trace, hop->data, hop->len);
  cat(x->trace, "\n", 1);
}

/* The harness's to_agent() hands lines over in pieces of this many bytes
 * (acp_mcp_bridge_to_agent_iov()) when nonzero; `untraced` leaves the
 * trace callback unset (with one, the pieces are always joined). */
static size_t iov_cut;
static int untraced;

static acp_mcp_bridge_options *opts_for(acp_mcp_bridge_transport t) {
  acp_mcp_bridge_options *o = NULL;
  assert_int_equal(acp_mcp_bridge_options_new(&o), 0);
  acp_mcp_bridge_options_set_transport(o, t);
  assert_int_equal(acp_mcp_bridge_options_set_program(o, "/bin/acp"), 0);
  acp_mcp_bridge_options_set_max_line(o, 4096);
  acp_mcp_bridge_options_set_random_cb(o, cb_random);
  acp_mcp_bridge_options_set_prepare_cb(o, cb_prepare);
  acp_mcp_bridge_options_set_endpoint_write_cb(o, cb_write);
  acp_mcp_bridge_options_set_endpoint_close_cb(o, cb_close);
  acp_mcp_bridge_options_set_event_cb(o, cb_event);
  if (!untraced)
    acp_mcp_bridge_options_set_trace_cb(o, cb_trace);
  return o;
}

static h *h_new(acp_mcp_bridge_transport t) {
  h *x = calloc(1, sizeof(*x));
  acp_mcp_bridge_options *o = opts_for(t);
  assert_non_null(x);
  assert_int_equal(acp_mcp_bridge_new(&x->b, o, x, NULL), 0);
  acp_mcp_bridge_options_free(o);
  return x;
}

static void h_free(h *x) {
  acp_mcp_bridge_free(x->b);
  free(x);
}

/* Take what the bridge wrote for the router into x->up (also x->routed). */
static const char *take_up(h *x) {
  const char *d;
  acp_ssize n = acp_mcp_bridge_send(x->b, &d);
  assert_true(n >= 0);
  x->up[0] = '\0';
  if (n > 0) {
    cat(x->up, d, (size_t)n);
    cat(x->routed, d, (size_t)n);
  }
  return x->up;
}

/* A line the router has for the agent; returns what the agent got now. */
static const char *to_agent(h *x, const char *line) {
  static char buf[CAP];
  const char *out;
  acp_ssize n;
  size_t l = strlen(line);
  char *in = malloc(l + 1);
  assert_non_null(in);
  memcpy(in, line, l);
  in[l] = '\n';
  if (iov_cut > 0) {
    acp_rpc_iov *pieces = malloc((l + 1) * sizeof(*pieces));
    const acp_rpc_iov *o = NULL;
    size_t k = 0, at = 0, no = 0, i, sum = 0;
    assert_non_null(pieces);
    for (at = 0; at < l + 1; at += iov_cut, k++) {
      pieces[k].data = in + at;
      pieces[k].len = l + 1 - at < iov_cut ? l + 1 - at : iov_cut;
    }
    n = acp_mcp_bridge_to_agent_iov(x->b, pieces, k, &o, &no);
    assert_true(n >= 0);
    for (i = 0; i < no; i++) {
      memcpy(buf + sum, o[i].data, o[i].len);
      sum += o[i].len;
    }
    assert_int_equal(sum, (size_t)n);
    free(pieces);
  } else {
    n = acp_mcp_bridge_to_agent(x->b, in, l + 1, &out);
    assert_true(n >= 0);
    memcpy(buf, out, (size_t)n);
  }
  buf[n] = '\0';
  cat(x->agent, buf, (size_t)n);
  free(in);
  return buf;
}

static const char *release(h *x) {
  static char buf[CAP];
  const char *out;
  acp_ssize n = acp_mcp_bridge_release(x->b, &out);
  assert_true(n >= 0);
  if (n > 0)
    memcpy(buf, out, (size_t)n);
  buf[n] = '\0';
  cat(x->agent, buf, (size_t)n);
  return buf;
}

static const char *from_agent(h *x, const char *line) {
  static char buf[CAP];
  const char *out;
  acp_ssize n = acp_mcp_bridge_from_agent(x->b, line, strlen(line), &out);
  assert_true(n >= 0);
  memcpy(buf, out, (size_t)n);
  buf[n] = '\0';
  return buf;
}

static void ep_send(h *x, uint64_t ep, const char *s) {
  assert_int_equal(acp_mcp_bridge_endpoint_recv(x->b, ep, s, strlen(s)), 0);
}

#define HAS(hay, needle)                                                       \
  do {                                                                         \
    if (strstr((hay), (needle)) == NULL)                                       \
      fail_msg("missing %s in:\n%s", (needle), (hay));                         \
  } while (0)
#define HASNT(hay, needle)                                                     \
  do {                                                                         \
    if (strstr((hay), (needle)) != NULL)                                       \
      fail_msg("unexpected %s in:\n%s", (needle), (hay));                      \
  } while (0)

#define INIT_REQ                                                               \
  "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"       \
  "\"protocolVersion\":1}}"
#define DECL_ID "{\"type\":\"acp\",\"name\":\"tools\",\"id\":\"S1\"}"
#define DECL_SID "{\"type\":\"acp\",\"name\":\"tools\",\"serverId\":\"S1\"}"
#define DECL_URL                                                               \
  "{\"type\":\"http\",\"name\":\"tools\",\"url\":\"acp:S1\",\"headers\":[]}"
#define STDIO_DECL "{\"name\":\"fs\",\"command\":\"/bin/fs\",\"args\":[]}"

/* The agent answers initialize with `caps` (an agentCapabilities object). */
static const char *init_agent(h *x, const char *caps) {
  char line[512];
  to_agent(x, INIT_REQ);
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":1,"
           "\"agentCapabilities\":%s}}",
           caps);
  return from_agent(x, line);
}

static const char *session_line(const char *method, const char *id,
                                const char *decl) {
  static char line[1024];
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"%s\",\"params\":{"
           "\"cwd\":\"/w\",\"sessionId\":\"sess\",\"mcpServers\":[%s,%s],"
           "\"x\":1.000000000000000000001}}",
           id, method, STDIO_DECL, decl);
  return line;
}

/* The last 32-hex string in `s` (quoted, or after "Bearer "): the token
 * of the last declaration. 1 if found. */
static int find_token(const char *s, char tok[33]) {
  const char *q = s + strlen(s);
  while (q > s) {
    q--;
    if (q - s >= 33 && q[0] == '"' && (q[-33] == '"' || q[-33] == ' ')) {
      int ok = 1, i;
      for (i = 0; i < 32; i++) {
        char ch = q[-32 + i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
          ok = 0;
      }
      if (ok) {
        memcpy(tok, q - 32, 32);
        tok[32] = '\0';
        return 1;
      }
    }
  }
  return 0;
}

static void last_token(h *x, char tok[33]) {
  if (!find_token(x->agent, tok))
    fail_msg("no token in %s", x->agent);
}

/* A bridge whose agent answered initialize without acp, one declaration
 * bridged, one endpoint connected (connection "c1"). */
static h *connected(uint64_t *ep) {
  h *x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
  char tok[33], line[64];
  init_agent(x, "{}");
  to_agent(x, session_line("session/new", "2", DECL_ID));
  from_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"sessionId\":"
                "\"sess-1\"}}");
  last_token(x, tok);
  assert_int_equal(acp_mcp_bridge_endpoint_new(x->b, ep), 0);
  snprintf(line, sizeof(line), "%s\n", tok);
  ep_send(x, *ep, line);
  assert_true(acp_mcp_bridge_endpoint_accepted(x->b, *ep));
  HAS(take_up(x), "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-1\",\"method\":"
                  "\"mcp/connect\",\"params\":{\"acpId\":\"S1\",\"serverId\":"
                  "\"S1\"}}\n");
  assert_string_equal(
      to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-1\",\"result\":{"
                  "\"connectionId\":\"c1\"}}"),
      "");
  return x;
}

/* MARK: - Declarations */

static void test_mcp_bridge_rejects_bad_arguments(void **state) {
  acp_mcp_bridge *b = NULL;
  const char *d;
  uint64_t ep;
  (void)state;
  assert_int_equal(acp_mcp_bridge_new(NULL, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_bridge_options_new(NULL), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_bridge_to_agent(NULL, "x", 1, &d),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_bridge_send(NULL, &d), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_bridge_new(&b, NULL, NULL, NULL), 0);
  assert_int_equal(acp_mcp_bridge_endpoint_recv(b, 9, "x", 1),
                   ACP_ERR_NOT_FOUND);
  assert_int_equal(acp_mcp_bridge_endpoint_new(b, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_bridge_endpoint_new(b, &ep), 0);
  assert_true(ep != 0);
  acp_mcp_bridge_endpoint_closed(b, 77); /* unknown: ignored */
  assert_int_equal(acp_mcp_bridge_server_gone(b, "S", 1, NULL), 0);
  acp_mcp_bridge_free(b);
  acp_mcp_bridge_free(NULL);
  acp_mcp_bridge_options_free(NULL);
}

static void
test_mcp_bridge_rewrites_every_session_method_and_form(void **state) {
  static const char *const methods[] = {"session/new", "session/load",
                                        "session/resume", "session/fork"};
  static const char *const decls[] = {DECL_ID, DECL_SID, DECL_URL};
  size_t i, j;
  (void)state;
  for (i = 0; i < 4; i++)
    for (j = 0; j < 3; j++) {
      h *x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
      const char *got;
      init_agent(x, "{\"loadSession\":true}");
      got = to_agent(x, session_line(methods[i], "\"s-7\"", decls[j]));
      /* The acp declaration becomes the shim; everything else is kept
       * byte for byte, in order. */
      HAS(got, "\"mcpServers\":[" STDIO_DECL ",{\"name\":\"tools\","
               "\"command\":\"/bin/acp\",\"args\":[\"mcp-shim\","
               "\"/tmp/x/mcp.sock\",\"");
      HAS(got, "\"],\"env\":[]}],\"x\":1.000000000000000000001}}\n");
      HAS(got, "{\"jsonrpc\":\"2.0\",\"id\":\"s-7\",\"method\":\"");
      HASNT(got, "\"acp");
      assert_int_equal(x->tokens_added, 1);
      /* The same server declared again keeps its token. */
      to_agent(x, session_line(methods[i], "9", decls[j]));
      assert_int_equal(x->tokens_added, 1);
      h_free(x);
    }
}

static void
test_mcp_bridge_rewrites_to_http_when_the_agent_has_it(void **state) {
  h *x = h_new(ACP_MCP_BRIDGE_TRANSPORT_HTTP);
  char tok[33], want[128];
  const char *got;
  (void)state;
  init_agent(x, "{\"mcpCapabilities\":{\"http\":true}}");
  got = to_agent(x, session_line("session/new", "2", DECL_ID));
  HAS(got, "{\"type\":\"http\",\"name\":\"tools\",\"url\":"
           "\"http://127.0.0.1:4242/mcp\",\"headers\":[{\"name\":"
           "\"Authorization\",\"value\":\"Bearer ");
  last_token(x, tok);
  snprintf(want, sizeof(want), "Bearer %s\"}]}", tok);
  HAS(got, want);
  /* Announced once (the helper had started before it was declared). */
  assert_int_equal(x->tokens_added, 1);
  h_free(x);
}

static void test_mcp_bridge_http_falls_back_to_stdio(void **state) {
  h *x = h_new(ACP_MCP_BRIDGE_TRANSPORT_HTTP);
  (void)state;
  init_agent(x, "{}"); /* no mcpCapabilities.http */
  HAS(to_agent(x, session_line("session/new", "2", DECL_ID)), "mcp-shim");
  HAS(x->log, "does not advertise mcpCapabilities.http");
  h_free(x);
  x = h_new(ACP_MCP_BRIDGE_TRANSPORT_HTTP);
  x->fail_http = 1;
  init_agent(x, "{\"mcpCapabilities\":{\"http\":true}}");
  HAS(to_agent(x, session_line("session/new", "2", DECL_ID)), "mcp-shim");
  HAS(x->log, "cannot start the HTTP bridge");
  h_free(x);
  /* No socket: the line goes unchanged. */
  x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
  x->fail_stdio = 1;
  init_agent(x, "{}");
  HAS(to_agent(x, session_line("session/new", "2", DECL_ID)), DECL_ID);
  h_free(x);
}

/* Without a program the bridge rewrites nothing (never our own binary by
 * accident) and says so once. */
static void
test_mcp_bridge_without_a_program_leaves_declarations(void **state) {
  h *x = calloc(1, sizeof(*x));
  acp_mcp_bridge_options *bare = NULL;
  (void)state;
  assert_non_null(x);
  assert_int_equal(acp_mcp_bridge_options_new(&bare), 0);
  acp_mcp_bridge_options_set_random_cb(bare, cb_random);
  acp_mcp_bridge_options_set_prepare_cb(bare, cb_prepare);
  acp_mcp_bridge_options_set_event_cb(bare, cb_event);
  assert_int_equal(acp_mcp_bridge_new(&x->b, bare, x, NULL), 0);
  init_agent(x, "{}");
  HAS(to_agent(x, session_line("session/new", "2", DECL_ID)), DECL_ID);
  HAS(to_agent(x, session_line("session/new", "3", DECL_ID)), DECL_ID);
  HAS(x->log, "no bridge program");
  assert_null(
      strstr(strstr(x->log, "no bridge program") + 1, "no bridge program"));
  assert_int_equal(x->prepares, 0);
  acp_mcp_bridge_options_free(bare);
  h_free(x);
}

static void
test_mcp_bridge_native_agent_and_off_leave_declarations(void **state) {
  h *x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
  const char *ans;
  const char *line = session_line("session/new", "2", DECL_ID);
  (void)state;
  ans = init_agent(x, "{\"mcpCapabilities\":{\"acp\":true}}");
  HAS(ans, "{\"mcpCapabilities\":{\"acp\":true}}"); /* unchanged */
  assert_true(acp_mcp_bridge_agent_native(x->b));
  {
    char want[1100];
    snprintf(want, sizeof(want), "%s\n", line);
    assert_string_equal(to_agent(x, line), want);
  }
  assert_int_equal(x->prepares, 0);
  h_free(x);
  /* off: the client is still told acp, declarations are not touched. */
  x = h_new(ACP_MCP_BRIDGE_TRANSPORT_OFF);
  ans = init_agent(x, "{\"loadSession\":true}");
  HAS(ans, "\"acp\":true");
  assert_false(acp_mcp_bridge_agent_native(x->b));
  HAS(to_agent(x, line), DECL_ID);
  h_free(x);
}

static void test_mcp_bridge_initialize_answer_gets_acp(void **state) {
  h *x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
  const char *ans;
  (void)state;
  ans = init_agent(x, "{\"loadSession\":true,\"mcpCapabilities\":{\"http\":"
                      "true}}");
  HAS(ans, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":1,"
           "\"agentCapabilities\":{\"loadSession\":true,");
  HAS(ans, "\"acp\":true");
  h_free(x);
  /* Without agentCapabilities: added. */
  x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
  to_agent(x, INIT_REQ);
  ans = from_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{"
                      "\"protocolVersion\":1}}");
  HAS(ans, "\"agentCapabilities\":{\"mcpCapabilities\":{\"acp\":true}}");
  /* Other lines from the agent are untouched. */
  assert_string_equal(from_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":0,"
                                    "\"result\":{}}"),
                      "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}");
  h_free(x);
}

static void
test_mcp_bridge_holds_session_lines_until_initialized(void **state) {
  h *x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
  const char *got;
  (void)state;
  HAS(to_agent(x, INIT_REQ), "initialize");
  /* A pipelining client: session/new before the agent's answer. */
  assert_string_equal(to_agent(x, session_line("session/new", "2", DECL_ID)),
                      "");
  assert_string_equal(to_agent(x, "{\"jsonrpc\":\"2.0\",\"method\":\"n\"}"),
                      "");
  assert_false(acp_mcp_bridge_want_release(x->b));
  assert_string_equal(release(x), "");
  from_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{"
                "\"agentCapabilities\":{}}}");
  assert_true(acp_mcp_bridge_want_release(x->b));
  got = release(x);
  HAS(got, "mcp-shim");
  HAS(got, "\"env\":[]}],\"x\":1.000000000000000000001}}\n{\"jsonrpc\":"
           "\"2.0\",\"method\":\"n\"}\n");
  assert_false(acp_mcp_bridge_want_release(x->b));
  /* Session lines without acp declarations are never held. */
  h_free(x);
  x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
  to_agent(x, INIT_REQ);
  HAS(to_agent(x, session_line("session/new", "2", STDIO_DECL)), "/bin/fs");
  h_free(x);
}

/* MARK: - Traffic */

static void test_mcp_bridge_tool_list_and_call_round_trip(void **state) {
  h *x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
  char tok[33], line[256];
  uint64_t ep;
  (void)state;
  init_agent(x, "{}");
  to_agent(x, session_line("session/new", "2", DECL_ID));
  last_token(x, tok);
  assert_int_equal(acp_mcp_bridge_endpoint_new(x->b, &ep), 0);
  /* Token and two MCP lines in one read, split across two reads. */
  snprintf(line, sizeof(line),
           "%s\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
           "\"params\":{}}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
           "initi",
           tok);
  ep_send(x, ep, line);
  ep_send(x, ep, "alized\"}\n\n");
  /* Only mcp/connect until it is answered. */
  assert_string_equal(take_up(x),
                      "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-1\",\"method\":"
                      "\"mcp/connect\",\"params\":{\"acpId\":\"S1\","
                      "\"serverId\":\"S1\"}}\n");
  assert_string_equal(
      to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-1\",\"result\":{"
                  "\"connectionId\":\"c1\"}}"),
      "");
  assert_string_equal(
      take_up(x),
      "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-2\",\"method\":\"mcp/message\","
      "\"params\":{\"connectionId\":\"c1\",\"method\":\"initialize\","
      "\"params\":{}}}\n"
      "{\"jsonrpc\":\"2.0\",\"method\":\"mcp/message\",\"params\":{"
      "\"connectionId\":\"c1\",\"method\":\"notifications/initialized\"}}\n");
  to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-2\",\"result\":{"
              "\"protocolVersion\":\"2025-06-18\"}}");
  assert_string_equal(x->ep[ep], "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{"
                                 "\"protocolVersion\":\"2025-06-18\"}}\n");
  /* tools/list and tools/call with string and number ids. */
  ep_send(x, ep,
          "{\"jsonrpc\":\"2.0\",\"id\":\"L\",\"method\":\"tools/"
          "list\"}\n{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/"
          "call\",\"params\":{\"name\":\"echo\",\"arguments\":{"
          "\"message\":\"hi\"}}}\n");
  HAS(take_up(x), "\"id\":\"acpbr-4\",\"method\":\"mcp/message\",\"params\":{"
                  "\"connectionId\":\"c1\",\"method\":\"tools/call\"");
  x->ep[ep][0] = '\0';
  /* Answers to unknown bridge ids are taken, not passed to the agent. */
  assert_string_equal(
      to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-99\",\"result\":{}}"),
      "");
  /* Answers in the other order; an error is passed as it is. */
  to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-4\",\"result\":{"
              "\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}");
  to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-3\",\"error\":{\"code\":"
              "-32000,\"message\":\"tool failed\",\"data\":{\"k\":1}}}");
  assert_string_equal(x->ep[ep],
                      "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":"
                      "[{\"type\":\"text\",\"text\":\"hi\"}]}}\n"
                      "{\"jsonrpc\":\"2.0\",\"id\":\"L\",\"error\":{\"code\":"
                      "-32000,\"message\":\"tool failed\",\"data\":{\"k\":1}}}"
                      "\n");
  /* Not ours: passed. */
  HAS(to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr\",\"result\":{}}"),
      "acpbr");
  assert_int_equal(x->hops[ACP_MCP_BRIDGE_HOP_FROM_ENDPOINT], 4);
  HAS(x->trace, "1:1:tools:{\"jsonrpc\":\"2.0\",\"id\":3,");
  HAS(x->trace, "2:1:tools:{\"jsonrpc\":\"2.0\",\"id\":3,\"result\"");
  HAS(x->trace, "4:0:-:{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-4\"");
  HAS(x->trace, "3:0:-:{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/"
                "new\",\"params\":{\"cwd\":\"/w\",\"sessionId\":\"sess\","
                "\"mcpServers\":[" STDIO_DECL ",{\"name\":\"tools\",\"command");
  h_free(x);
}

static void
test_mcp_bridge_provider_requests_and_notifications_down(void **state) {
  uint64_t ep;
  h *x = connected(&ep);
  (void)state;
  /* A provider->agent request on our connection goes to the endpoint. */
  assert_string_equal(
      to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"mcp/message\","
                  "\"params\":{\"connectionId\":\"c1\",\"method\":\"roots/"
                  "list\",\"params\":{\"a\":[1]}}}"),
      "");
  assert_string_equal(x->ep[ep], "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
                                 "\"roots/list\",\"params\":{\"a\":[1]}}\n");
  ep_send(x, ep, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"roots\":[]}}\n");
  assert_string_equal(take_up(x), "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{"
                                  "\"roots\":[]}}\n");
  /* An error answer keeps code, message and data. */
  to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"mcp/message\","
              "\"params\":{\"connectionId\":\"c1\",\"method\":\"x\"}}");
  ep_send(x, ep,
          "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-5,"
          "\"message\":\"no\",\"data\":[2]}}\n");
  assert_string_equal(take_up(x),
                      "{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"error\":{\"code\":"
                      "-5,\"message\":\"no\",\"data\":[2]}}\n");
  /* A notification. */
  x->ep[ep][0] = '\0';
  assert_string_equal(
      to_agent(x, "{\"jsonrpc\":\"2.0\",\"method\":\"mcp/message\",\"params\":"
                  "{\"connectionId\":\"c1\",\"method\":\"notifications/tools/"
                  "list_changed\"}}"),
      "");
  assert_string_equal(x->ep[ep], "{\"jsonrpc\":\"2.0\",\"method\":"
                                 "\"notifications/tools/list_changed\"}\n");
  /* Another connection id is not ours: the agent gets it. */
  HAS(to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"mcp/message\","
                  "\"params\":{\"connectionId\":\"zz\",\"method\":\"x\"}}"),
      "\"zz\"");
  h_free(x);
}

static void test_mcp_bridge_cancel_from_the_endpoint(void **state) {
  uint64_t ep;
  h *x = connected(&ep);
  (void)state;
  ep_send(x, ep, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\"}\n");
  HAS(take_up(x), "\"id\":\"acpbr-2\"");
  ep_send(x, ep,
          "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
          "\"params\":{\"requestId\":5,\"reason\":\"user\"}}\n");
  /* Hop by hop: $/cancel_request for the outer request, never tunnelled. */
  assert_string_equal(take_up(x),
                      "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
                      "\"params\":{\"requestId\":\"acpbr-2\"}}\n");
  /* Twice, or for an unknown id: nothing. */
  ep_send(x, ep,
          "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
          "\"params\":{\"requestId\":5}}\n{\"jsonrpc\":\"2.0\","
          "\"method\":\"notifications/cancelled\",\"params\":{"
          "\"requestId\":99}}\n");
  assert_string_equal(take_up(x), "");
  /* Its answer is dropped. */
  assert_string_equal(
      to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-2\",\"error\":{"
                  "\"code\":-32800,\"message\":\"cancelled\"}}"),
      "");
  assert_string_equal(x->ep[ep], "");
  h_free(x);
}

static void test_mcp_bridge_cancel_from_the_provider(void **state) {
  uint64_t ep;
  h *x = connected(&ep);
  (void)state;
  to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"mcp/message\","
              "\"params\":{\"connectionId\":\"c1\",\"method\":\"sampling/"
              "createMessage\"}}");
  x->ep[ep][0] = '\0';
  assert_string_equal(
      to_agent(x, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
                  "\"params\":{\"requestId\":11}}"),
      "");
  assert_string_equal(x->ep[ep], "{\"jsonrpc\":\"2.0\",\"method\":"
                                 "\"notifications/cancelled\",\"params\":{"
                                 "\"requestId\":1}}\n");
  assert_string_equal(take_up(x), "{\"jsonrpc\":\"2.0\",\"id\":11,\"error\":{"
                                  "\"code\":-32800,\"message\":\"Request "
                                  "cancelled\"}}\n");
  /* The endpoint's late answer goes nowhere. */
  ep_send(x, ep, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
  assert_string_equal(take_up(x), "");
  /* A cancel for something else is the agent's. */
  HAS(to_agent(x, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
                  "\"params\":{\"requestId\":12}}"),
      "\"requestId\":12");
  h_free(x);
}

/* MARK: - Errors and ends */

static void test_mcp_bridge_refuses_wrong_and_long_tokens(void **state) {
  h *x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
  uint64_t a, b2, c2;
  char big[300];
  (void)state;
  init_agent(x, "{}");
  to_agent(x, session_line("session/new", "2", DECL_ID));
  assert_int_equal(acp_mcp_bridge_endpoint_new(x->b, &a), 0);
  ep_send(x, a, "0123456789abcdef0123456789abcdef\n{\"x\":1}\n");
  assert_int_equal(x->closed[a], 1);
  HAS(x->log, "wrong token");
  assert_int_equal(acp_mcp_bridge_endpoint_recv(x->b, a, "x\n", 2),
                   ACP_ERR_NOT_FOUND);
  assert_int_equal(acp_mcp_bridge_endpoint_new(x->b, &b2), 0);
  memset(big, 'a', sizeof(big));
  assert_int_equal(acp_mcp_bridge_endpoint_recv(x->b, b2, big, sizeof(big)), 0);
  assert_int_equal(x->closed[b2], 1);
  HAS(x->log, "first line is not a token");
  /* Empty lines are skipped (acp/ndjson.h, rule 2): the token is still
   * awaited, and a wrong one refused. */
  assert_int_equal(acp_mcp_bridge_endpoint_new(x->b, &c2), 0);
  ep_send(x, c2, "\n\r\n");
  assert_int_equal(x->closed[c2], 0);
  ep_send(x, c2, "nope\n");
  assert_int_equal(x->closed[c2], 1);
  assert_string_equal(take_up(x), "");
  assert_int_equal(acp_mcp_bridge_endpoint_count(x->b), 0);
  h_free(x);
}

/* The token line is framed with a 128-byte cap, the lines after it with the
 * bridge's: a long MCP line in the same read as the token goes through. */
static void test_mcp_bridge_long_line_after_token_in_one_read(void **state) {
  h *x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
  char tok[33], pad[1001], in[1200];
  uint64_t ep;
  (void)state;
  init_agent(x, "{}");
  to_agent(x, session_line("session/new", "2", DECL_ID));
  from_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"sessionId\":"
                "\"sess-1\"}}");
  last_token(x, tok);
  assert_int_equal(acp_mcp_bridge_endpoint_new(x->b, &ep), 0);
  memset(pad, 'p', sizeof(pad) - 1);
  pad[sizeof(pad) - 1] = '\0';
  snprintf(in, sizeof(in),
           "%s\r\n{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\","
           "\"params\":{\"pad\":\"%s\"}}\n",
           tok, pad);
  ep_send(x, ep, in);
  assert_true(acp_mcp_bridge_endpoint_accepted(x->b, ep));
  HAS(take_up(x), "\"method\":\"mcp/connect\"");
  to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-1\",\"result\":{"
              "\"connectionId\":\"c1\"}}");
  HAS(take_up(x), pad);
  assert_int_equal(x->closed[ep], 0);
  assert_string_equal(x->ep[ep], "");
  h_free(x);
}

static void test_mcp_bridge_bad_and_oversized_lines(void **state) {
  uint64_t ep;
  h *x = connected(&ep);
  char big[5000];
  char reply[ACP_NDJSON_REPLY_MAX + 2];
  (void)state;
  /* Not JSON, not an object: dropped, the connection goes on. */
  ep_send(x, ep,
          "nonsense\n[1,2]\n\"s\"\n{\"jsonrpc\":\"2.0\",\"id\":1,"
          "\"method\":\"ping\"}\n");
  HAS(take_up(x), "\"method\":\"ping\"");
  /* Longer than max_line: answered as every libacp component answers it
   * (the relay would answer this MCP client the same way); the rest of the
   * line is dropped, the endpoint goes on, the provider is not told. */
  x->ep[ep][0] = '\0';
  memset(big, 'x', sizeof(big));
  assert_int_equal(acp_mcp_bridge_endpoint_recv(x->b, ep, big, sizeof(big)), 0);
  assert_int_equal(acp_ndjson_overlong_reply(reply, sizeof(reply), 4096) > 0,
                   1);
  strcat(reply, "\n");
  assert_string_equal(x->ep[ep], reply);
  HAS(x->log, "over-long line");
  assert_int_equal(x->closed[ep], 0);
  assert_string_equal(take_up(x), "");
  ep_send(x, ep, "xxxx\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n");
  HAS(take_up(x), "\"id\":\"acpbr-3\"");
  /* The answers to both pings reach it. */
  x->ep[ep][0] = '\0';
  to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-2\",\"result\":{}}");
  to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-3\",\"result\":{}}");
  HAS(x->ep[ep], "\"id\":1,");
  HAS(x->ep[ep], "\"id\":2,");
  assert_int_equal(x->closed[ep], 0);
  h_free(x);
}

static void test_mcp_bridge_connect_refused(void **state) {
  h *x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
  char tok[33], line[64];
  uint64_t ep;
  (void)state;
  init_agent(x, "{}");
  to_agent(x, session_line("session/new", "2", DECL_ID));
  last_token(x, tok);
  assert_int_equal(acp_mcp_bridge_endpoint_new(x->b, &ep), 0);
  snprintf(line, sizeof(line), "%s\n{\"jsonrpc\":\"2.0\",\"id\":1}\n", tok);
  ep_send(x, ep, line);
  take_up(x);
  to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-1\",\"error\":{\"code\":"
              "-32602,\"message\":\"Unknown MCP server\"}}");
  assert_int_equal(x->closed[ep], 1);
  HAS(x->log, "mcp/connect failed: {\"code\":-32602");
  assert_string_equal(take_up(x), "");
  /* An answer without a connectionId is a refusal too. */
  assert_int_equal(acp_mcp_bridge_endpoint_new(x->b, &ep), 0);
  snprintf(line, sizeof(line), "%s\n", tok);
  ep_send(x, ep, line);
  take_up(x);
  to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-2\",\"result\":{}}");
  assert_int_equal(x->closed[ep], 1);
  h_free(x);
}

/* A provider that knows no mcp/connect (the ACP TypeScript SDK 2.4) answers
 * it -32601: the endpoint goes on in the connectionless form. Its 2025-era
 * MCP client's initialize becomes server/discover, each request carries the
 * 2026 _meta, results lose their 2026-only members, ping is answered here,
 * request-scoped notifications reach it, a cancel goes hop by hop. */
/* The answer `body` ("result":... or "error":...) to the request the bridge
 * wrote last in `up`, sent to the agent side. */
static const char *answer_last(h *x, const char *up, const char *body) {
  static char line[2048];
  const char *p = strstr(up, "\"id\":\"acpbr-");
  size_t n;
  assert_non_null(p);
  p += 6;
  n = strcspn(p, "\"");
  snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":\"%.*s\",%s}",
           (int)n, p, body);
  return to_agent(x, line);
}

static void test_mcp_bridge_connectionless_fallback(void **state) {
  h *x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
  char tok[33], line[512];
  uint64_t ep;
  const char *up;
  (void)state;
  init_agent(x, "{}");
  to_agent(x, session_line("session/new", "2", DECL_SID));
  last_token(x, tok);
  assert_int_equal(acp_mcp_bridge_endpoint_new(x->b, &ep), 0);
  snprintf(line, sizeof(line),
           "%s\n{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
           "\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":"
           "{},\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}}\n",
           tok);
  ep_send(x, ep, line);
  HAS(take_up(x), "\"method\":\"mcp/connect\"");
  to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-1\",\"error\":{\"code\":"
              "-32601,\"message\":\"Method not found\"}}");
  assert_int_equal(x->closed[ep], 0);
  up = take_up(x);
  HAS(up, "\"method\":\"mcp/message\"");
  HAS(up, "\"serverId\":\"S1\"");
  HAS(up, "\"method\":\"server/discover\"");
  snprintf(line, sizeof(line), "%s", up);
  HAS(up, "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"");
  HAS(up, "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"c\"");
  HASNT(up, "connectionId");
  HASNT(up, "\"initialize\"");
  answer_last(x, line,
              "\"result\":{\"result\":"
              "{\"supportedVersions\":[\"2026-07-28\"],\"capabilities\":{"
              "\"tools\":{}},\"resultType\":\"complete\",\"_meta\":{"
              "\"io.modelcontextprotocol/serverInfo\":{\"name\":\"sdk\","
              "\"version\":\"2\"}}}}");
  HAS(x->ep[ep], "\"id\":0,\"result\":{");
  HAS(x->ep[ep], "\"protocolVersion\":\"2025-06-18\"");
  HAS(x->ep[ep], "\"serverInfo\":{\"name\":\"sdk\"");
  HASNT(x->ep[ep], "supportedVersions");
  x->ep[ep][0] = '\0';
  /* ping: answered here, nothing goes up. */
  ep_send(x, ep,
          "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
          "initialized\"}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
          "\"ping\"}\n");
  assert_string_equal(x->ep[ep],
                      "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
  assert_string_equal(take_up(x), "");
  x->ep[ep][0] = '\0';
  /* tools/call: _meta added, resultType stripped from the answer. */
  ep_send(x, ep,
          "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
          "\"params\":{\"name\":\"echo\",\"arguments\":{\"m\":"
          "1.000000000000000000001}}}\n");
  up = take_up(x);
  HAS(up, "\"method\":\"tools/call\"");
  HAS(up, "\"arguments\":{\"m\":1.000000000000000000001}");
  HAS(up, "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"");
  snprintf(line, sizeof(line), "%s", up);
  {
    /* A progress notification for that request (named by the requestId
     * the bridge gave it) reaches the endpoint. */
    const char *p = strstr(line, "\"requestId\":\"");
    char note[512];
    assert_non_null(p);
    p += 13;
    snprintf(note, sizeof(note),
             "{\"jsonrpc\":\"2.0\",\"method\":\"mcp/message\",\"params\":{"
             "\"serverId\":\"S1\",\"requestId\":\"%.*s\",\"method\":"
             "\"notifications/progress\",\"params\":{\"progress\":1}}}",
             (int)strcspn(p, "\""), p);
    assert_string_equal(to_agent(x, note), "");
    HAS(x->ep[ep], "\"method\":\"notifications/progress\"");
    /* One for another request is not the endpoint's: passed on. */
    HAS(to_agent(x, "{\"jsonrpc\":\"2.0\",\"method\":\"mcp/message\","
                    "\"params\":{\"serverId\":\"S1\",\"requestId\":\"x9\","
                    "\"method\":\"notifications/progress\"}}"),
        "\"x9\"");
  }
  answer_last(x, line,
              "\"result\":{\"result\":"
              "{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],"
              "\"resultType\":\"complete\"}}");
  HAS(x->ep[ep], "\"id\":2,\"result\":{\"content\":[{\"type\":\"text\","
                 "\"text\":\"hi\"}]}");
  HASNT(x->ep[ep], "resultType");
  /* A carried MCP error is the endpoint's error. */
  ep_send(x, ep,
          "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
          "\"params\":{\"name\":\"nope\"}}\n");
  snprintf(line, sizeof(line), "%s", take_up(x));
  answer_last(x, line,
              "\"result\":{\"error\":"
              "{\"code\":-32602,\"message\":\"Unknown tool\"}}");
  HAS(x->ep[ep], "\"id\":3,\"error\":{\"code\":-32602,\"message\":"
                 "\"Unknown tool\"}");
  /* Cancelled by the endpoint: $/cancel_request for the outer request, and
   * its late answer is dropped. */
  ep_send(x, ep,
          "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\","
          "\"params\":{\"name\":\"slow\"}}\n");
  snprintf(line, sizeof(line), "%s", take_up(x));
  ep_send(x, ep,
          "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
          "cancelled\",\"params\":{\"requestId\":4}}\n");
  up = take_up(x);
  HAS(up, "\"method\":\"$/cancel_request\"");
  {
    /* It names the outer request of the call. */
    const char *p = strstr(line, "\"id\":\"acpbr-");
    char want[64];
    assert_non_null(p);
    snprintf(want, sizeof(want), "\"requestId\":\"%.*s\"",
             (int)strcspn(p + 6, "\""), p + 6);
    HAS(up, want);
  }
  x->ep[ep][0] = '\0';
  answer_last(x, line,
              "\"error\":{\"code\":"
              "-32800,\"message\":\"Cancelled\"}");
  assert_string_equal(x->ep[ep], "");
  h_free(x);
}

static void test_mcp_bridge_endpoint_end_disconnects(void **state) {
  uint64_t ep, ep2;
  h *x = connected(&ep);
  char tok[33], line[64];
  (void)state;
  to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"mcp/message\","
              "\"params\":{\"connectionId\":\"c1\",\"method\":\"roots/"
              "list\"}}");
  acp_mcp_bridge_endpoint_closed(x->b, ep);
  assert_int_equal(x->closed[ep], 0); /* the runtime closed it */
  /* The provider's pending request is answered, then mcp/disconnect. */
  HAS(take_up(x), "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32603,"
                  "\"message\":\"MCP connection closed\"}}\n");
  HAS(x->up, "\"method\":\"mcp/disconnect\",\"params\":{\"connectionId\":"
             "\"c1\"}}\n");
  /* Later traffic for c1 is not ours any more. */
  HAS(to_agent(x, "{\"jsonrpc\":\"2.0\",\"method\":\"mcp/message\","
                  "\"params\":{\"connectionId\":\"c1\",\"method\":\"n\"}}"),
      "\"c1\"");
  /* Closed while connecting: no disconnect, the late answer is dropped. */
  last_token(x, tok);
  assert_int_equal(acp_mcp_bridge_endpoint_new(x->b, &ep2), 0);
  snprintf(line, sizeof(line), "%s\n", tok);
  ep_send(x, ep2, line);
  HAS(take_up(x), "mcp/connect");
  acp_mcp_bridge_endpoint_closed(x->b, ep2);
  assert_string_equal(take_up(x), "");
  HAS(x->routed, "\"acpbr-3\",\"method\":\"mcp/connect\"");
  assert_string_equal(
      to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-3\",\"result\":{"
                  "\"connectionId\":\"c2\"}}"),
      "");
  assert_string_equal(x->ep[ep2], "");
  h_free(x);
}

static void test_mcp_bridge_provider_disconnect(void **state) {
  uint64_t ep;
  h *x = connected(&ep);
  (void)state;
  assert_string_equal(
      to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"mcp/"
                  "disconnect\",\"params\":{\"connectionId\":\"c1\"}}"),
      "");
  assert_int_equal(x->closed[ep], 1);
  assert_string_equal(take_up(x),
                      "{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"result\":{}}\n");
  h_free(x);
}

static void test_mcp_bridge_session_close_ends_its_servers(void **state) {
  uint64_t ep, ep2;
  h *x = connected(&ep);
  char tok[33], line[64];
  (void)state;
  last_token(x, tok);
  /* Another session's close changes nothing. */
  HAS(to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"session/close\","
                  "\"params\":{\"sessionId\":\"other\"}}"),
      "session/close");
  assert_int_equal(x->closed[ep], 0);
  HAS(to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"session/close\","
                  "\"params\":{\"sessionId\":\"sess-1\"}}"),
      "\"sess-1\"");
  assert_int_equal(x->closed[ep], 1);
  assert_int_equal(x->tokens_removed, 1);
  HAS(take_up(x), "\"method\":\"mcp/disconnect\"");
  /* The token no longer works. */
  assert_int_equal(acp_mcp_bridge_endpoint_new(x->b, &ep2), 0);
  snprintf(line, sizeof(line), "%s\n", tok);
  ep_send(x, ep2, line);
  assert_int_equal(x->closed[ep2], 1);
  /* session/load binds at once. */
  to_agent(x, session_line("session/load", "6", DECL_SID));
  HAS(to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"session/close\","
                  "\"params\":{\"sessionId\":\"sess\"}}"),
      "session/close");
  assert_int_equal(x->tokens_removed, 2);
  h_free(x);
}

/* A session request the agent refuses takes its declarations away: the
 * token of a session/new answered with an error (no session to close) or
 * of a refused session/load stops working at once. A load's success (no
 * sessionId in its answer) keeps them, bound to the loaded session. */
static void test_mcp_bridge_refused_session_drops_its_servers(void **state) {
  h *x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
  char tok[33], line[64];
  uint64_t ep;
  (void)state;
  init_agent(x, "{}");
  to_agent(x, session_line("session/new", "2", DECL_ID));
  last_token(x, tok);
  assert_int_equal(x->tokens_added, 1);
  from_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32603,"
                "\"message\":\"no\"}}");
  assert_int_equal(x->tokens_removed, 1);
  assert_int_equal(acp_mcp_bridge_endpoint_new(x->b, &ep), 0);
  snprintf(line, sizeof(line), "%s\n", tok);
  ep_send(x, ep, line);
  assert_int_equal(x->closed[ep], 1);
  /* A refused load. */
  to_agent(x, session_line("session/load", "3", DECL_SID));
  last_token(x, tok);
  assert_int_equal(x->tokens_added, 2);
  from_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32002,"
                "\"message\":\"Resource not found\"}}");
  assert_int_equal(x->tokens_removed, 2);
  /* A load answered {} keeps its server, and session/close ends it. */
  to_agent(x, session_line("session/load", "4", DECL_SID));
  last_token(x, tok);
  from_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}");
  assert_int_equal(x->tokens_removed, 2);
  assert_int_equal(acp_mcp_bridge_endpoint_new(x->b, &ep), 0);
  snprintf(line, sizeof(line), "%s\n", tok);
  ep_send(x, ep, line);
  assert_true(acp_mcp_bridge_endpoint_accepted(x->b, ep));
  to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"session/close\","
              "\"params\":{\"sessionId\":\"sess\"}}");
  assert_int_equal(x->tokens_removed, 3);
  h_free(x);
}

static void test_mcp_bridge_dead_provider(void **state) {
  uint64_t ep, ep2;
  h *x = connected(&ep);
  char tok[33], line[64];
  (void)state;
  last_token(x, tok);
  ep_send(x, ep, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\"}\n");
  HAS(take_up(x), "acpbr-2");
  to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"mcp/message\","
              "\"params\":{\"connectionId\":\"c1\",\"method\":\"roots/"
              "list\"}}");
  x->ep[ep][0] = '\0';
  assert_int_equal(
      acp_mcp_bridge_server_gone(x->b, "S1", 2, "component 1 'tools' exited"),
      1);
  /* The pending call gets the MCP error naming the component. */
  assert_string_equal(x->ep[ep],
                      "{\"jsonrpc\":\"2.0\",\"id\":9,\"error\":{\"code\":"
                      "-33001,\"message\":\"MCP server 'tools' is "
                      "unavailable: its provider is gone (component 1 "
                      "'tools' exited)\"}}\n");
  assert_int_equal(x->tokens_removed, 1);
  HAS(x->log, "server 'tools' is gone");
  take_up(x); /* the provider's own request, answered -32603: harmless */
  /* Later calls are answered at once; nothing reaches the router. */
  x->ep[ep][0] = '\0';
  ep_send(x, ep,
          "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\"}\n"
          "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}\n");
  assert_string_equal(take_up(x), "");
  HAS(x->ep[ep], "{\"jsonrpc\":\"2.0\",\"id\":10,\"error\":{\"code\":-33001,");
  assert_int_equal(x->closed[ep], 0);
  /* The router's own error for the dead request is dropped. */
  assert_string_equal(
      to_agent(x, "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-2\",\"error\":{"
                  "\"code\":-32603,\"message\":\"component died\"}}"),
      "");
  assert_int_equal(acp_mcp_bridge_server_gone(x->b, "S1", 2, NULL), 0);
  /* The token is refused. */
  assert_int_equal(acp_mcp_bridge_endpoint_new(x->b, &ep2), 0);
  snprintf(line, sizeof(line), "%s\n", tok);
  ep_send(x, ep2, line);
  assert_int_equal(x->closed[ep2], 1);
  assert_string_equal(take_up(x), "");
  acp_mcp_bridge_endpoint_closed(x->b, ep);
  assert_string_equal(take_up(x), "");
  h_free(x);
}

/* MARK: - Allocation failure */

static int scenario(failmem *f) {
  acp_mem m = {f, fm_malloc, fm_free, fm_calloc, fm_realloc};
  acp_mcp_bridge_options *o = opts_for(ACP_MCP_BRIDGE_TRANSPORT_HTTP);
  h *x = calloc(1, sizeof(*x));
  char tok[33], line[128];
  const char *d;
  uint64_t ep = 0;
  int done = 0;
  static const char *const down[] = {
      "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-1\",\"result\":{\"connectionId\":"
      "\"c1\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":\"acpbr-2\",\"result\":{\"r\":1}}",
      "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"mcp/message\",\"params\":{"
      "\"connectionId\":\"c1\",\"method\":\"roots/list\"}}",
      "{\"jsonrpc\":\"2.0\",\"method\":\"mcp/message\",\"params\":{"
      "\"connectionId\":\"c1\",\"method\":\"n\"}}",
      "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
      "\"requestId\":7}}",
      "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"mcp/message\",\"params\":{"
      "\"connectionId\":\"c1\",\"method\":\"roots/list\"}}",
  };
  size_t i;

  assert_non_null(x);
  if (acp_mcp_bridge_new(&x->b, o, x, &m) != 0)
    goto out;
#define STEP(call)                                                             \
  do {                                                                         \
    if ((call) < 0)                                                            \
      goto out;                                                                \
  } while (0)
  STEP(acp_mcp_bridge_to_agent(x->b, INIT_REQ "\n", strlen(INIT_REQ) + 1, &d));
  {
    const char *s = session_line("session/new", "2", DECL_ID);
    snprintf(x->agent, sizeof(x->agent), "%s\n", s);
    STEP(acp_mcp_bridge_to_agent(x->b, x->agent, strlen(x->agent), &d));
    x->agent[0] = '\0';
  }
  {
    static const char a[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{"
                            "\"agentCapabilities\":{\"mcpCapabilities\":{"
                            "\"http\":true}}}}";
    STEP(acp_mcp_bridge_from_agent(x->b, a, sizeof(a) - 1, &d));
  }
  if (!acp_mcp_bridge_want_release(x->b))
    goto out;
  {
    acp_ssize n = acp_mcp_bridge_release(x->b, &d);
    if (n <= 0)
      goto out;
    cat(x->agent, d, (size_t)n);
  }
  if (!find_token(x->agent, tok))
    goto out;
  {
    static const char a[] =
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"sessionId\":\"s\"}}";
    STEP(acp_mcp_bridge_from_agent(x->b, a, sizeof(a) - 1, &d));
  }
  STEP(acp_mcp_bridge_endpoint_new(x->b, &ep));
  snprintf(line, sizeof(line),
           "%s\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n",
           tok);
  STEP(acp_mcp_bridge_endpoint_recv(x->b, ep, line, strlen(line)));
  if (!acp_mcp_bridge_endpoint_accepted(x->b, ep) || x->closed[ep])
    goto out;
  for (i = 0; i < sizeof(down) / sizeof(down[0]); i++) {
    char buf[512];
    snprintf(buf, sizeof(buf), "%s\n", down[i]);
    STEP(acp_mcp_bridge_to_agent(x->b, buf, strlen(buf), &d));
    STEP(acp_mcp_bridge_send(x->b, &d));
  }
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n{\"jsonrpc\":\"2.0\","
           "\"id\":3,\"method\":\"t\"}\n");
  STEP(acp_mcp_bridge_endpoint_recv(x->b, ep, line, strlen(line)));
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
           "\"params\":{\"requestId\":3}}\n");
  STEP(acp_mcp_bridge_endpoint_recv(x->b, ep, line, strlen(line)));
  STEP(acp_mcp_bridge_send(x->b, &d));
  (void)acp_mcp_bridge_server_gone(x->b, "S1", 2, "gone");
  STEP(acp_mcp_bridge_endpoint_recv(x->b, ep, line, strlen(line)));
  acp_mcp_bridge_endpoint_closed(x->b, ep);
  {
    static const char a[] = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":"
                            "\"session/close\",\"params\":{\"sessionId\":"
                            "\"s\"}}\n";
    STEP(acp_mcp_bridge_to_agent(x->b, a, sizeof(a) - 1, &d));
  }
  done = 1;
out:
  acp_mcp_bridge_free(x->b);
  acp_mcp_bridge_options_free(o);
  free(x);
  return done;
}

static void test_mcp_bridge_failmalloc(void **state) {
  (void)state;
  failmem_sweep(scenario, 20);
}

/* MARK: - The router's output in pieces (acp_mcp_bridge_to_agent_iov) */

/*
 * The behaviours above, with every line handed over in pieces of 1, 2, 7,
 * 64 and 170 bytes (a line's head cut anywhere, the newline alone in a
 * piece) and whole, traced (always joined) and untraced (the fast path
 * judges each line by its head gathered across pieces): the agent gets
 * what acp_mcp_bridge_to_agent() gives it.
 */
static void test_mcp_bridge_pieces_filter_as_one_buffer(void **state) {
  static const size_t cuts[] = {1, 2, 7, 64, 170, 100000};
  size_t c;

  for (c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
    for (untraced = 0; untraced <= 1; untraced++) {
      iov_cut = cuts[c];
      test_mcp_bridge_rewrites_every_session_method_and_form(state);
      test_mcp_bridge_rewrites_to_http_when_the_agent_has_it(state);
      test_mcp_bridge_native_agent_and_off_leave_declarations(state);
      test_mcp_bridge_initialize_answer_gets_acp(state);
      test_mcp_bridge_holds_session_lines_until_initialized(state);
      test_mcp_bridge_cancel_from_the_endpoint(state);
      test_mcp_bridge_cancel_from_the_provider(state);
      test_mcp_bridge_session_close_ends_its_servers(state);
      test_mcp_bridge_dead_provider(state);
      if (!untraced)
        test_mcp_bridge_tool_list_and_call_round_trip(state);
    }
  }
  iov_cut = 0;
  untraced = 0;
}

/* Nothing for the bridge: the pieces themselves come back, a large one
 * too (no copy); a bad argument is refused. */
static void test_mcp_bridge_pieces_pass_through_uncopied(void **state) {
  h *x;
  static char text[100000];
  acp_rpc_iov in[3];
  const acp_rpc_iov *out = NULL;
  size_t nout = 0;
  const char *head = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":"
                     "\"session/prompt\",\"params\":";
  const char *tail = "}\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n";

  (void)state;
  untraced = 1;
  x = h_new(ACP_MCP_BRIDGE_TRANSPORT_STDIO);
  untraced = 0;
  init_agent(x, "{}");
  memset(text, 'a', sizeof(text));
  text[0] = '"';
  text[sizeof(text) - 1] = '"';
  in[0].data = head;
  in[0].len = strlen(head);
  in[1].data = text;
  in[1].len = sizeof(text);
  in[2].data = tail;
  in[2].len = strlen(tail);
  assert_int_equal(acp_mcp_bridge_to_agent_iov(x->b, in, 3, &out, &nout),
                   (acp_ssize)(in[0].len + in[1].len + in[2].len));
  assert_ptr_equal(out, in);
  assert_int_equal(nout, 3);
  /* Nothing at all. */
  assert_int_equal(acp_mcp_bridge_to_agent_iov(x->b, in, 0, &out, &nout), 0);
  assert_int_equal(nout, 0);
  assert_int_equal(acp_mcp_bridge_to_agent_iov(x->b, NULL, 1, &out, &nout),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_bridge_to_agent_iov(x->b, in, 3, NULL, &nout),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_bridge_to_agent_iov(NULL, in, 3, &out, &nout),
                   ACP_ERR_INVALID_ARGUMENT);
  in[1].data = NULL;
  assert_int_equal(acp_mcp_bridge_to_agent_iov(x->b, in, 3, &out, &nout),
                   ACP_ERR_INVALID_ARGUMENT);
  h_free(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mcp_bridge_rejects_bad_arguments),
      cmocka_unit_test(test_mcp_bridge_rewrites_every_session_method_and_form),
      cmocka_unit_test(test_mcp_bridge_rewrites_to_http_when_the_agent_has_it),
      cmocka_unit_test(test_mcp_bridge_http_falls_back_to_stdio),
      cmocka_unit_test(test_mcp_bridge_native_agent_and_off_leave_declarations),
      cmocka_unit_test(test_mcp_bridge_without_a_program_leaves_declarations),
      cmocka_unit_test(test_mcp_bridge_initialize_answer_gets_acp),
      cmocka_unit_test(test_mcp_bridge_holds_session_lines_until_initialized),
      cmocka_unit_test(test_mcp_bridge_tool_list_and_call_round_trip),
      cmocka_unit_test(
          test_mcp_bridge_provider_requests_and_notifications_down),
      cmocka_unit_test(test_mcp_bridge_cancel_from_the_endpoint),
      cmocka_unit_test(test_mcp_bridge_cancel_from_the_provider),
      cmocka_unit_test(test_mcp_bridge_refuses_wrong_and_long_tokens),
      cmocka_unit_test(test_mcp_bridge_long_line_after_token_in_one_read),
      cmocka_unit_test(test_mcp_bridge_bad_and_oversized_lines),
      cmocka_unit_test(test_mcp_bridge_connect_refused),
      cmocka_unit_test(test_mcp_bridge_connectionless_fallback),
      cmocka_unit_test(test_mcp_bridge_endpoint_end_disconnects),
      cmocka_unit_test(test_mcp_bridge_provider_disconnect),
      cmocka_unit_test(test_mcp_bridge_session_close_ends_its_servers),
      cmocka_unit_test(test_mcp_bridge_refused_session_drops_its_servers),
      cmocka_unit_test(test_mcp_bridge_dead_provider),
      cmocka_unit_test(test_mcp_bridge_failmalloc),
      cmocka_unit_test(test_mcp_bridge_pieces_filter_as_one_buffer),
      cmocka_unit_test(test_mcp_bridge_pieces_pass_through_uncopied),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
