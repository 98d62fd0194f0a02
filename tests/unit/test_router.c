/*
 * Unit tests of the conductor's routing core (src/router): every rule of
 * include/acp/router.h, driven line by line without processes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/json.h"
#include "acp/router.h"
#include "failmem.h"

/* MARK: - Harness */

typedef struct rec {
  int ntrace;
  size_t last_from;
  size_t last_to;
  size_t last_answers_link;
  int64_t last_answers_id;
  int nevents[8];
  size_t last_event_link;
  int reenter;
} rec;

static rec R;
static char got[1 << 16];

static void on_trace(acp_router *r, const acp_router_hop *hop, void *ud) {
  rec *x = ud;
  const char *d;

  x->ntrace++;
  x->last_from = hop->from;
  x->last_to = hop->to;
  x->last_answers_link = hop->answers_link;
  x->last_answers_id = hop->answers_id;
  /* Every traced message is one valid JSON text. */
  assert_int_equal(acp_json_validate(hop->data, hop->len, NULL), 0);
  if (x->reenter) {
    assert_int_equal(acp_router_recv(r, 0, "{}", 2), ACP_ERR_INVALID_STATE);
    assert_int_equal(acp_router_send(r, 0, &d), ACP_ERR_INVALID_STATE);
    assert_int_equal(acp_router_link_closed(r, 1, "x", NULL, 0),
                     ACP_ERR_INVALID_STATE);
  }
}

static void on_event(acp_router *r, acp_router_event_type t, size_t link,
                     const char *detail, void *ud) {
  rec *x = ud;

  (void)r;
  assert_non_null(detail);
  assert_true(t >= 1 && t < 8);
  x->nevents[t]++;
  x->last_event_link = link;
}

static acp_router *mk(size_t n, acp_router_mode mode,
                      acp_router_proxy_methods pm) {
  acp_router_options *o = NULL;
  acp_router *r = NULL;

  memset(&R, 0, sizeof(R));
  assert_int_equal(acp_router_options_new(&o), 0);
  acp_router_options_set_mode(o, mode);
  acp_router_options_set_proxy_methods(o, pm);
  acp_router_options_set_trace_cb(o, on_trace);
  acp_router_options_set_event_cb(o, on_event);
  assert_int_equal(acp_router_new(&r, n, o, &R, NULL), 0);
  acp_router_options_free(o);
  return r;
}

static acp_router *mk_agent(size_t n) {
  return mk(n, ACP_ROUTER_MODE_AGENT, ACP_ROUTER_PROXY_METHODS_AUTO);
}

static void feed(acp_router *r, size_t link, const char *line) {
  assert_int_equal(acp_router_recv(r, link, line, strlen(line)), 0);
}

/* Drain a link into `got` (NUL-terminated). */
static const char *take(acp_router *r, size_t link) {
  const char *d = NULL;
  acp_ssize n = acp_router_send(r, link, &d);

  assert_true(n >= 0);
  assert_true((size_t)n < sizeof(got));
  if (n > 0)
    memcpy(got, d, (size_t)n);
  got[n] = '\0';
  return got;
}

#define EXPECT(r, link, s) assert_string_equal(take(r, link), s "\n")
#define NOTHING(r, link) assert_string_equal(take(r, link), "")

static void nothing_anywhere(acp_router *r) {
  size_t i;

  for (i = 0; i < acp_router_link_count(r); i++)
    NOTHING(r, i);
}

#define INIT_PARAMS                                                            \
  "{\"protocolVersion\":1,\"clientCapabilities\":{\"fs\":{\"readTextFile\":"   \
  "true}},\"_meta\":{\"x\":1}}"
#define INIT_RESULT "{\"protocolVersion\":1,\"agentCapabilities\":{}}"

/*
 * Initialize a chain of n components (n-1 proxies + agent, agent mode)
 * with each proxy forwarding unchanged; ends with every link drained.
 */
static void init_chain(acp_router *r, size_t n) {
  size_t i;
  char line[512];

  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
       "\"params\":" INIT_PARAMS "}");
  for (i = 1; i < n; i++) {
    EXPECT(r, i,
           "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
           "\"params\":" INIT_PARAMS "}");
    feed(r, i,
         "{\"jsonrpc\":\"2.0\",\"id\":100,\"method\":\"proxy/successor\","
         "\"params\":{\"method\":\"initialize\",\"params\":" INIT_PARAMS "}}");
  }
  EXPECT(r, n,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
         "\"params\":" INIT_PARAMS "}");
  feed(r, n, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":" INIT_RESULT "}");
  for (i = n - 1; i >= 1; i--) {
    EXPECT(r, i, "{\"jsonrpc\":\"2.0\",\"id\":100,\"result\":" INIT_RESULT "}");
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":" INIT_RESULT "}");
    feed(r, i, line);
  }
  EXPECT(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":" INIT_RESULT "}");
  nothing_anywhere(r);
  assert_int_equal(acp_router_pending(r), 0);
}

/* MARK: - Construction */

static void test_router_new_rejects_bad_arguments(void **state) {
  acp_router *r = (acp_router *)1;
  acp_router_options *o = NULL;
  const char *d;

  (void)state;
  assert_int_equal(acp_router_new(NULL, 1, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  /* An agent-mode chain needs the agent. */
  assert_int_equal(acp_router_new(&r, 0, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(r);
  assert_int_equal(acp_router_new(&r, 70000, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_options_new(NULL), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_options_new(&o), 0);
  acp_router_options_set_mode(o, ACP_ROUTER_MODE_PROXY);
  acp_router_options_set_mode(o, (acp_router_mode)77); /* ignored */
  acp_router_options_set_proxy_methods(o, (acp_router_proxy_methods)9);
  acp_router_options_set_max_pending(NULL, 3);
  assert_int_equal(acp_router_new(&r, 0, o, NULL, NULL), 0);
  assert_int_equal(acp_router_link_count(r), 1);
  assert_int_equal(acp_router_recv(r, 1, "{}", 2), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_recv(r, 0, NULL, 2), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_send(r, 1, &d), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_send(r, 0, NULL), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_link_closed(r, 5, NULL, NULL, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_want_write(r, 9), 0);
  assert_int_equal(acp_router_link_state_of(r, 9), ACP_ROUTER_LINK_CLOSED);
  assert_int_equal(acp_router_link_wire(NULL, 0), ACP_ROUTER_WIRE_G2);
  acp_router_free(r);
  acp_router_options_free(o);
  acp_router_free(NULL);
  acp_router_options_free(NULL);
}

/* MARK: - Initialization */

static void test_router_init_one_component_is_a_pass_through(void **state) {
  acp_router *r = mk_agent(1);

  (void)state;
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\","
       "\"params\":" INIT_PARAMS "}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
         "\"params\":" INIT_PARAMS "}");
  assert_int_equal(acp_router_pending(r), 1);
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":" INIT_RESULT "}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"result\":" INIT_RESULT "}");
  assert_int_equal(R.nevents[ACP_ROUTER_EVENT_INITIALIZED], 1);
  /* Later traffic: ids are rewritten per hop, both ways. */
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"session/new\","
       "\"params\":{\"cwd\":\"/\",\"mcpServers\":[]}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/new\","
         "\"params\":{\"cwd\":\"/\",\"mcpServers\":[]}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{}}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"sessionId\":\"s\"}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"sessionId\":\"s\"}}");
  assert_int_equal(acp_router_pending(r), 0);
  acp_router_free(r);
}

static void test_router_init_two_components(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  init_chain(r, 2);
  assert_int_equal(R.nevents[ACP_ROUTER_EVENT_INITIALIZED], 2);
  acp_router_free(r);
}

static void test_router_init_three_components(void **state) {
  acp_router *r = mk_agent(3);

  (void)state;
  init_chain(r, 3);
  assert_int_equal(R.nevents[ACP_ROUTER_EVENT_INITIALIZED], 3);
  assert_int_equal(acp_router_link_wire(r, 1), ACP_ROUTER_WIRE_G2);
  acp_router_free(r);
}

static void test_router_init_order_is_sequential(void **state) {
  acp_router *r = mk_agent(3);

  (void)state;
  /* Nothing reaches proxy 2 or the agent until proxy 1 forwards. */
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
       "\"params\":{}}");
  NOTHING(r, 2);
  NOTHING(r, 3);
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
         "\"params\":{}}");
  /* A proxy may change the params it forwards; they are spliced as sent. */
  feed(r, 1,
       "{\"id\":5,\"method\":\"proxy/successor\",\"jsonrpc\":\"2.0\","
       "\"params\":{\"params\":{\"protocolVersion\":1,\"z\":[1.50]},"
       "\"method\":\"initialize\"}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
         "\"params\":{\"protocolVersion\":1,\"z\":[1.50]}}");
  NOTHING(r, 3);
  acp_router_free(r);
}

static void test_router_init_proxy_mode(void **state) {
  acp_router *r = mk(2, ACP_ROUTER_MODE_PROXY, ACP_ROUTER_PROXY_METHODS_AUTO);

  (void)state;
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"proxy/initialize\","
       "\"params\":{\"protocolVersion\":1}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
         "\"params\":{\"protocolVersion\":1}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
       "1}}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
         "\"params\":{\"protocolVersion\":1}}");
  /* The last proxy's successor is the parent: still wrapped. */
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
       "1}}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/successor\","
         "\"params\":{\"method\":\"initialize\",\"params\":{"
         "\"protocolVersion\":1}}}");
  feed(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"v\":1}}");
  EXPECT(r, 2, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"v\":1}}");
  feed(r, 2, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"v\":2}}");
  EXPECT(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"v\":2}}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"v\":3}}");
  EXPECT(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"v\":3}}");

  /* Parent's successor traffic arrives wrapped and goes, wrapped, to P2. */
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
       "\"method\":\"session/update\",\"params\":{\"u\":1},\"_meta\":{}}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
         "\"method\":\"session/update\",\"params\":{\"u\":1}}}");
  /* P2 sends it on (plainly) toward P1, which receives it wrapped. */
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"u\":"
       "1}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
         "\"method\":\"session/update\",\"params\":{\"u\":1}}}");
  /* P1's plain messages go to the parent plainly. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"u\":"
       "1}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"u\":"
         "1}}");
  /* The parent's plain traffic goes to P1 plainly. */
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{}}");
  nothing_anywhere(r);
  acp_router_free(r);
}

static void test_router_proxy_mode_parent_spellings(void **state) {
  acp_router *r;

  (void)state;
  /* G1 parent: our successor traffic is spelled _proxy/successor. */
  r = mk(1, ACP_ROUTER_MODE_PROXY, ACP_ROUTER_PROXY_METHODS_AUTO);
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"_proxy/initialize\","
       "\"params\":{}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
         "\"params\":{}}");
  assert_int_equal(acp_router_link_wire(r, 0), ACP_ROUTER_WIRE_G1);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"initialize\",\"params\":{}}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"_proxy/successor\","
         "\"params\":{\"method\":\"initialize\",\"params\":{}}}");
  acp_router_free(r);

  /* G0 parent: initialize with _meta.proxy, _proxy/successor/request. */
  r = mk(1, ACP_ROUTER_MODE_PROXY, ACP_ROUTER_PROXY_METHODS_AUTO);
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
       "\"params\":{\"_meta\":{\"proxy\":true}}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
         "\"params\":{\"_meta\":{\"proxy\":true}}}");
  assert_int_equal(acp_router_link_wire(r, 0), ACP_ROUTER_WIRE_G0);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"initialize\",\"params\":{}}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"_proxy/successor/"
         "request\",\"params\":{\"method\":\"initialize\",\"params\":{}}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"n\"}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"method\":\"_proxy/successor/notification\","
         "\"params\":{\"method\":\"n\"}}");
  /* A plain initialize in proxy mode is refused. */
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\","
       "\"params\":{}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32600,"
         "\"message\":\"Invalid Request\",\"data\":\"this conductor runs in "
         "proxy mode: expected proxy/initialize\"}}");
  acp_router_free(r);
}

static void test_router_proxy_mode_empty_chain(void **state) {
  acp_router *r = mk(0, ACP_ROUTER_MODE_PROXY, ACP_ROUTER_PROXY_METHODS_AUTO);

  (void)state;
  /* No proxies: initialize goes straight back to the parent's successor. */
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"proxy/initialize\","
       "\"params\":{\"a\":1}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/successor\","
         "\"params\":{\"method\":\"initialize\",\"params\":{\"a\":1}}}");
  feed(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
  EXPECT(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}");
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
       "\"method\":\"session/update\",\"params\":{}}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{}}");
  acp_router_free(r);
}

/* MARK: - Routing */

static void test_router_reverse_requests_through_two_proxies(void **state) {
  acp_router *r = mk_agent(3);

  (void)state;
  init_chain(r, 3);
  /* The agent asks the client for permission. */
  feed(r, 3,
       "{\"jsonrpc\":\"2.0\",\"id\":\"perm-1\",\"method\":\"session/"
       "request_permission\",\"params\":{\"sessionId\":\"s\",\"options\":[]}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"proxy/successor\","
         "\"params\":{\"method\":\"session/request_permission\",\"params\":{"
         "\"sessionId\":\"s\",\"options\":[]}}}");
  /* P2 forwards it toward its predecessor (plain request to us). */
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":70,\"method\":\"session/"
       "request_permission\",\"params\":{\"sessionId\":\"s\",\"options\":[]}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"proxy/successor\","
         "\"params\":{\"method\":\"session/request_permission\",\"params\":{"
         "\"sessionId\":\"s\",\"options\":[]}}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":80,\"method\":\"session/"
       "request_permission\",\"params\":{\"sessionId\":\"s\",\"options\":[]}}");
  EXPECT(
      r, 0,
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/"
      "request_permission\",\"params\":{\"sessionId\":\"s\",\"options\":[]}}");
  assert_int_equal(acp_router_pending(r), 3);
  /* The answer travels back hop by hop with each hop's own ids. */
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"outcome\":{\"outcome\":"
       "\"selected\",\"optionId\":\"a\"}}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":80,\"result\":{\"outcome\":{\"outcome\":"
         "\"selected\",\"optionId\":\"a\"}}}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"ok\":1}}");
  EXPECT(r, 2, "{\"jsonrpc\":\"2.0\",\"id\":70,\"result\":{\"ok\":1}}");
  feed(r, 2, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"ok\":2}}");
  EXPECT(r, 3, "{\"jsonrpc\":\"2.0\",\"id\":\"perm-1\",\"result\":{\"ok\":2}}");

  /* fs/read_text_file, answered with an error by the client. */
  feed(r, 3,
       "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"fs/read_text_file\","
       "\"params\":{\"path\":\"/a\"}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"proxy/successor\","
         "\"params\":{\"method\":\"fs/read_text_file\",\"params\":{\"path\":"
         "\"/a\"}}}");
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":71,\"method\":\"fs/read_text_file\","
       "\"params\":{\"path\":\"/a\"}}");
  take(r, 1);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":81,\"method\":\"fs/read_text_file\","
       "\"params\":{\"path\":\"/a\"}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"fs/read_text_file\","
         "\"params\":{\"path\":\"/a\"}}");
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32002,\"message\":"
       "\"nope\",\"data\":{\"uri\":\"/a\"}}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":81,\"error\":{\"code\":-32002,"
         "\"message\":\"nope\",\"data\":{\"uri\":\"/a\"}}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32002,\"message\":"
       "\"nope\"}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":71,\"error\":{\"code\":-32002,"
         "\"message\":\"nope\"}}");
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32002,\"message\":"
       "\"nope\"}}");
  EXPECT(r, 3,
         "{\"jsonrpc\":\"2.0\",\"id\":12,\"error\":{\"code\":-32002,"
         "\"message\":\"nope\"}}");
  assert_int_equal(acp_router_pending(r), 0);
  acp_router_free(r);
}

static void test_router_prompt_through_chain(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  init_chain(r, 2);
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session/prompt\","
       "\"params\":{\"sessionId\":\"s\",\"prompt\":[]}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\","
         "\"params\":{\"sessionId\":\"s\",\"prompt\":[]}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"session/prompt\",\"params\":{\"sessionId\":"
       "\"s\",\"prompt\":[]}}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\","
         "\"params\":{\"sessionId\":\"s\",\"prompt\":[]}}");
  /* Notifications from the agent reach the proxy wrapped. */
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
       "\"sessionId\":\"s\"}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
         "\"method\":\"session/update\",\"params\":{\"sessionId\":\"s\"}}}");
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"stopReason\":\"end_"
       "turn\"}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"result\":{\"stopReason\":\"end_"
         "turn\"}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"stopReason\":\"end_"
       "turn\"}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"stopReason\":\"end_"
         "turn\"}}");
  /* A notification without params stays without params. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
       "\"method\":\"x/y\"}}");
  EXPECT(r, 2, "{\"jsonrpc\":\"2.0\",\"method\":\"x/y\"}");
  acp_router_free(r);
}

static void test_router_ids_restored_exactly(void **state) {
  acp_router *r = mk_agent(1);
  static const char *const ids[] = {"12345678901234567890",
                                    "1.000000000000000000001",
                                    "-0",
                                    "1e400",
                                    "\"a\\u0041\\\"b\"",
                                    "\"\"",
                                    "null"};
  size_t i;
  char line[256];
  char want[256];

  (void)state;
  for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"m\"}", ids[i]);
    feed(r, 0, line);
    snprintf(want, sizeof(want),
             "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":\"m\"}\n", i + 1);
    assert_string_equal(take(r, 1), want);
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"result\":1}", i + 1);
    feed(r, 1, line);
    snprintf(want, sizeof(want),
             "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":1}\n", ids[i]);
    assert_string_equal(take(r, 0), want);
  }
  acp_router_free(r);
}

static void test_router_byte_exact_payloads(void **state) {
  acp_router *r = mk_agent(3);
  const char *payload =
      "{\"z\":12345678901234567890,\"a\":1.000000000000000000001,"
      "\"s\":\"\\u00e9\\n\\\"\\/\xc3\xa9\",\"unknown\":{\"deep\":[1E+2,-0.0e-0,"
      "true,null]},\"_meta\":{\"keep\":\"me\"},  \"sp\" : [ ] }";
  char line[1024];
  char want[1100];

  (void)state;
  init_chain(r, 3);
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/prompt\","
           "\"params\":%s}",
           payload);
  feed(r, 0, line);
  snprintf(want, sizeof(want),
           "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\","
           "\"params\":%s}\n",
           payload);
  assert_string_equal(take(r, 1), want);
  /* Through both proxies, wrapped with odd key order and envelope _meta. */
  snprintf(line, sizeof(line),
           "{\"params\":{\"_meta\":{\"hop\":1},\"params\":%s,\"method\":"
           "\"session/prompt\",\"meta\":{}},\"method\":\"proxy/successor\","
           "\"id\":9,\"jsonrpc\":\"2.0\",\"extra\":true}",
           payload);
  feed(r, 1, line);
  assert_string_equal(take(r, 2), want);
  feed(r, 2, line);
  assert_string_equal(take(r, 3), want);
  /* And back: the result bytes are untouched. */
  snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":%s}",
           payload);
  feed(r, 3, line);
  snprintf(want, sizeof(want), "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":%s}\n",
           payload);
  assert_string_equal(take(r, 2), want);
  /* Errors too (P2 answers P1's request, its id 2 there). */
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-1,\"message\":"
           "\"m\\u0000\",\"data\":%s}}",
           payload);
  feed(r, 2, line);
  snprintf(want, sizeof(want),
           "{\"jsonrpc\":\"2.0\",\"id\":9,\"error\":{\"code\":-1,\"message\":"
           "\"m\\u0000\",\"data\":%s}}\n",
           payload);
  assert_string_equal(take(r, 1), want);
  /* Agent notification reaching the client through two wraps/unwraps. */
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":%s}",
           payload);
  feed(r, 3, line);
  take(r, 2);
  feed(r, 2, line);
  take(r, 1);
  feed(r, 1, line);
  snprintf(want, sizeof(want), "%s\n", line);
  assert_string_equal(take(r, 0), want);
  acp_router_free(r);
}

static void test_router_meta_pass_through(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  init_chain(r, 2);
  /* Inner params _meta kept; envelope _meta (and alias meta) hop-local. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
       "\"_meta\":{\"trace\":\"hop\"},\"method\":\"session/cancel\","
       "\"params\":{\"sessionId\":\"s\",\"_meta\":{\"keep\":[1,2]}}}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{"
         "\"sessionId\":\"s\",\"_meta\":{\"keep\":[1,2]}}}");
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
       "\"_meta\":{\"a\":{\"b\":null}}}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
         "\"method\":\"session/update\",\"params\":{\"_meta\":{\"a\":{\"b\":"
         "null}}}}}");
  /* Client requests keep theirs too. */
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"_meta\":{\"c\":"
       "1}}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"_meta\":{\"c\":"
         "1}}}");
  acp_router_free(r);
}

/* MARK: - Cancellation */

static void test_router_cancel_client_to_agent(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  init_chain(r, 2);
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"session/prompt\","
       "\"params\":{}}");
  take(r, 1);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":33,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"session/prompt\",\"params\":{}}}");
  take(r, 2);
  /* The client cancels its id "q": P1 hears about its id 2. */
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
       "\"requestId\":\"q\"}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
         "\"requestId\":2}}");
  NOTHING(r, 2);
  /* P1 cancels its proxy/successor request 33: the agent hears of id 2. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
       "\"requestId\":33}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
         "\"requestId\":2}}");
  NOTHING(r, 0);
  /* The wrapped spelling means the same. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
       "\"method\":\"$/cancel_request\",\"params\":{\"requestId\":33}}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
         "\"requestId\":2}}");
  /* The answer still comes back. */
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"stopReason\":"
       "\"cancelled\"}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":33,\"result\":{\"stopReason\":"
         "\"cancelled\"}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32800,\"message\":"
       "\"c\"}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"error\":{\"code\":-32800,"
         "\"message\":\"c\"}}");
  /* A cancel for an id no longer pending is dropped. */
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
       "\"requestId\":\"q\"}}");
  nothing_anywhere(r);
  assert_true(R.nevents[ACP_ROUTER_EVENT_DROPPED] >= 1);
  acp_router_free(r);
}

static void test_router_cancel_agent_to_client(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  init_chain(r, 2);
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":\"a\\u0062\",\"method\":\"session/"
       "request_permission\",\"params\":{}}");
  take(r, 1);
  /* Escapes differ, the id is the same string "ab". */
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
       "\"requestId\":\"ab\"}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
         "\"requestId\":2}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"session/"
       "request_permission\",\"params\":{}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/"
         "request_permission\",\"params\":{}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
       "\"requestId\":5}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
         "\"requestId\":1}}");
  /* Unknown, malformed and request-shaped cancels. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
       "\"requestId\":6}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
       "\"requestId\":[5]}}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\"}");
  nothing_anywhere(r);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"$/cancel_request\","
       "\"params\":{\"requestId\":5}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":8,\"error\":{\"code\":-32600,"
         "\"message\":\"Invalid Request\",\"data\":\"$/cancel_request must be "
         "a notification\"}}");
  acp_router_free(r);
}

/* MARK: - Wire generations */

static void test_router_g1_component_is_answered_in_g1(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
       "\"params\":{}}");
  take(r, 1);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"_proxy/successor\","
       "\"params\":{\"method\":\"initialize\",\"params\":{}}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
         "\"params\":{}}");
  assert_int_equal(acp_router_link_wire(r, 1), ACP_ROUTER_WIRE_G1);
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"method\":\"_proxy/successor\",\"params\":{"
         "\"method\":\"session/update\",\"params\":{}}}");
  /* A G1 component that sends _proxy/initialize is refused like G2. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"_proxy/initialize\","
       "\"params\":{}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-32600,"
         "\"message\":\"Invalid Request\",\"data\":\"proxy/initialize is sent "
         "by the conductor, not to it\"}}");
  acp_router_free(r);
}

static void test_router_g0_component_is_answered_in_g0(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"_proxy/successor/"
       "request\",\"params\":{\"method\":\"session/new\",\"params\":{}}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\","
         "\"params\":{}}");
  assert_int_equal(acp_router_link_wire(r, 1), ACP_ROUTER_WIRE_G0);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"_proxy/successor/notification\","
       "\"params\":{\"method\":\"session/cancel\",\"params\":{}}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{}}");
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"fs/read_text_file\","
       "\"params\":{}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"_proxy/successor/"
         "request\",\"params\":{\"method\":\"fs/read_text_file\",\"params\":{}"
         "}}");
  feed(r, 2, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\"}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"method\":\"_proxy/successor/notification\","
         "\"params\":{\"method\":\"session/update\"}}");
  /* An escaped spelling of the method name is the same method. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"\\u0070roxy/successor\","
       "\"params\":{\"method\":\"x\"}}");
  EXPECT(r, 2, "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}");
  assert_int_equal(acp_router_link_wire(r, 1), ACP_ROUTER_WIRE_G2);
  acp_router_free(r);
}

static void test_router_option_underscore_emits_g1(void **state) {
  acp_router *r =
      mk(2, ACP_ROUTER_MODE_AGENT, ACP_ROUTER_PROXY_METHODS_UNDERSCORE);

  (void)state;
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
       "\"params\":{}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"_proxy/initialize\","
         "\"params\":{}}");
  /* A G2 message from it is accepted, but the spelling stays G1. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
       "\"method\":\"n\"}}");
  EXPECT(r, 2, "{\"jsonrpc\":\"2.0\",\"method\":\"n\"}");
  feed(r, 2, "{\"jsonrpc\":\"2.0\",\"method\":\"u\"}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"method\":\"_proxy/successor\",\"params\":{"
         "\"method\":\"u\"}}");
  /* No fallback in a fixed spelling: -32601 goes back as is. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,"
       "\"message\":\"Method not found\"}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":0,\"error\":{\"code\":-32601,"
         "\"message\":\"Method not found\"}}");
  acp_router_free(r);
}

static void test_router_option_spec_never_falls_back(void **state) {
  acp_router *r = mk(2, ACP_ROUTER_MODE_AGENT, ACP_ROUTER_PROXY_METHODS_SPEC);

  (void)state;
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
       "\"params\":{}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
         "\"params\":{}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"_proxy/successor\",\"params\":{"
       "\"method\":\"n\"}}");
  EXPECT(r, 2, "{\"jsonrpc\":\"2.0\",\"method\":\"n\"}");
  assert_int_equal(acp_router_link_wire(r, 1), ACP_ROUTER_WIRE_G2);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,"
       "\"message\":\"x\"}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":0,\"error\":{\"code\":-32601,"
         "\"message\":\"x\"}}");
  assert_int_equal(R.nevents[ACP_ROUTER_EVENT_WIRE_FALLBACK], 0);
  acp_router_free(r);
}

static void test_router_auto_fallback_on_method_not_found(void **state) {
  acp_router *r = mk_agent(3);

  (void)state;
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
       "\"params\":{\"protocolVersion\":1,\"_meta\":{\"k\":2}}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
         "\"params\":{\"protocolVersion\":1,\"_meta\":{\"k\":2}}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,"
       "\"message\":\"Method not found\"}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"_proxy/initialize\","
         "\"params\":{\"protocolVersion\":1,\"_meta\":{\"k\":2}}}");
  assert_int_equal(acp_router_link_wire(r, 1), ACP_ROUTER_WIRE_G1);
  NOTHING(r, 0);
  /* Still unknown: the oldest spelling, _meta.proxy merged. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32601,"
       "\"message\":\"Method not found\"}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\","
         "\"params\":{\"_meta\":{\"proxy\":true,\"k\":2},"
         "\"protocolVersion\":1}}");
  assert_int_equal(acp_router_link_wire(r, 1), ACP_ROUTER_WIRE_G0);
  assert_int_equal(R.nevents[ACP_ROUTER_EVENT_WIRE_FALLBACK], 2);
  /* It works now: forwards in G0, next proxy (G1 only) falls back once. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":50,\"method\":\"_proxy/successor/"
       "request\",\"params\":{\"method\":\"initialize\",\"params\":{}}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
         "\"params\":{}}");
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,"
       "\"message\":\"no\"}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"_proxy/initialize\","
         "\"params\":{}}");
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"_proxy/successor\","
       "\"params\":{\"method\":\"initialize\"}}");
  EXPECT(r, 3, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}");
  feed(r, 3, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"r\":3}}");
  EXPECT(r, 2, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"r\":3}}");
  feed(r, 2, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"r\":2}}");
  EXPECT(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":50,\"result\":{\"r\":2}}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"r\":1}}");
  EXPECT(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"r\":1}}");
  /* The agent's -32601 to initialize is an answer, not a spelling issue. */
  assert_int_equal(acp_router_pending(r), 0);
  acp_router_free(r);
}

static void test_router_fallback_exhausted_passes_error_back(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  feed(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\"}");
  take(r, 1);
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601}}");
  take(r, 1);
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32601}}");
  /* No params at all: G0 sends just the marker. */
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\","
         "\"params\":{\"_meta\":{\"proxy\":true}}}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32601}}");
  EXPECT(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":0,\"error\":{\"code\":-32601}}");
  acp_router_free(r);
}

/* MARK: - Batches */

static void test_router_batch_same_destination(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  init_chain(r, 2);
  feed(r, 0,
       "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"},{\"jsonrpc\":\"2.0\","
       "\"method\":\"b\",\"params\":[1]}]");
  EXPECT(
      r, 1,
      "[{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"a\"},{\"jsonrpc\":\"2.0\","
      "\"method\":\"b\",\"params\":[1]}]");
  assert_int_equal(R.last_to, 1);
  /* A batch mixing a response and a notification, both for P1. */
  feed(r, 2,
       "[{\"jsonrpc\":\"2.0\",\"method\":\"u\"},{\"jsonrpc\":\"2.0\",\"id\":"
       "7,\"method\":\"r\"}]");
  EXPECT(r, 1,
         "[{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
         "\"method\":\"u\"}},{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"proxy/"
         "successor\",\"params\":{\"method\":\"r\"}}]");
  acp_router_free(r);
}

static void test_router_batch_split_by_destination(void **state) {
  acp_router *r = mk_agent(3);

  (void)state;
  init_chain(r, 3);
  feed(r, 2,
       "[{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
       "\"method\":\"right1\"}},{\"jsonrpc\":\"2.0\",\"method\":\"left1\"},"
       "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
       "\"method\":\"right2\"}},42,{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":"
       "\"proxy/initialize\"}]");
  EXPECT(r, 3,
         "[{\"jsonrpc\":\"2.0\",\"method\":\"right1\"},{\"jsonrpc\":\"2.0\","
         "\"method\":\"right2\"}]");
  EXPECT(r, 1,
         "[{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
         "\"method\":\"left1\"}}]");
  /* The router's own answers to elements go back as one array. */
  EXPECT(r, 2,
         "[{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
         "\"message\":\"Invalid Request\",\"data\":\"a message must be an "
         "object\"}},{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32600,"
         "\"message\":\"Invalid Request\",\"data\":\"proxy/initialize is sent "
         "by the conductor, not to it\"}}]");
  /* A batch of responses is routed element by element. */
  feed(r, 0, "[]");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
         "\"message\":\"Invalid Request\",\"data\":\"empty batch\"}}");
  feed(r, 0, "[{\"jsonrpc\":\"2.0\",\"id\":999,\"result\":1}]");
  nothing_anywhere(r);
  acp_router_free(r);
}

/* MARK: - Component death and policies */

#define CLOSE_DATA "{\"component\":2,\"name\":\"arrow\",\"exitStatus\":1}"

/* A routed answer names the request it answers as written to its link, so
 * a trace can pair them although the id is rewritten on every hop. */
static void test_router_trace_names_the_answered_request(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  init_chain(r, 2);
  feed(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":\"c\",\"method\":\"m\"}");
  assert_int_equal(R.last_answers_link, ACP_ROUTER_SELF);
  EXPECT(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"m\"}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"m\"}}");
  EXPECT(r, 2, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"m\"}");
  feed(r, 2, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
  assert_int_equal(R.last_from, 2);
  assert_int_equal(R.last_answers_link, 2);
  assert_int_equal(R.last_answers_id, 2);
  EXPECT(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
  assert_int_equal(R.last_answers_link, 1);
  assert_int_equal(R.last_answers_id, 2);
  EXPECT(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":\"c\",\"result\":{}}");
  /* A request then its link dies: the router's error names it too. */
  feed(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"m\"}");
  take(r, 1);
  assert_int_equal(acp_router_link_closed(r, 1, "gone", NULL, 0), 0);
  assert_int_equal(R.last_from, ACP_ROUTER_SELF);
  assert_int_equal(R.last_answers_link, 1);
  assert_int_equal(R.last_answers_id, 3);
  acp_router_free(r);
}

static void test_router_link_death_answers_pending(void **state) {
  acp_router *r = mk_agent(3);

  (void)state;
  init_chain(r, 3);
  /* A prompt in flight client -> P1 -> P2 -> agent. */
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"session/prompt\"}");
  take(r, 1);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"session/prompt\"}}");
  take(r, 2);
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":22,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"session/prompt\"}}");
  take(r, 3);
  /* And a permission request agent -> P2, not answered yet. */
  feed(r, 3, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"perm\"}");
  assert_int_equal(acp_router_want_write(r, 2), 1);
  assert_int_equal(acp_router_pending(r), 4);
  assert_int_equal(
      acp_router_link_closed(r, 2,
                             "component 2 'arrow' exited with status 1: "
                             "boom\n\"quoted\"\t\x01\xff",
                             CLOSE_DATA, strlen(CLOSE_DATA)),
      0);
  assert_int_equal(acp_router_link_state_of(r, 2), ACP_ROUTER_LINK_CLOSED);
  assert_int_equal(acp_router_want_write(r, 2), 0); /* discarded */
  /* P1's request through P2 fails, naming the component. */
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":11,\"error\":{\"code\":-32603,"
         "\"message\":\"component 2 'arrow' exited with status 1: "
         "boom\\n\\\"quoted\\\"\\t\\u0001?\",\"data\":" CLOSE_DATA "}}");
  /* The agent's work for the dead proxy is cancelled, and its own request
   * to the dead proxy fails. */
  EXPECT(r, 3,
         "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
         "\"requestId\":2}}\n"
         "{\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{\"code\":-32603,"
         "\"message\":\"component 2 'arrow' exited with status 1: "
         "boom\\n\\\"quoted\\\"\\t\\u0001?\",\"data\":" CLOSE_DATA "}}");
  NOTHING(r, 0);
  assert_int_equal(acp_router_pending(r), 1);
  /* The late answer to the cancelled request is dropped. */
  feed(r, 3, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
  nothing_anywhere(r);
  /* New requests to the dead link fail at once; notifications vanish. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"session/new\"}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":12,\"error\":{\"code\":-32603,"
         "\"message\":\"component 2 'arrow' exited with status 1: "
         "boom\\n\\\"quoted\\\"\\t\\u0001?\",\"data\":" CLOSE_DATA "}}");
  feed(r, 3, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\"}");
  nothing_anywhere(r);
  /* Lines from the dead link are refused; closing twice too. */
  assert_int_equal(acp_router_recv(r, 2, "{}", 2), ACP_ERR_INVALID_STATE);
  assert_int_equal(acp_router_link_closed(r, 2, NULL, NULL, 0),
                   ACP_ERR_INVALID_STATE);
  /* P1 still answers the client. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32603,\"message\":"
       "\"down\"}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"error\":{\"code\":-32603,"
         "\"message\":\"down\"}}");
  acp_router_free(r);
}

#define S1_PROMPT "{\"sessionId\":\"s1\",\"prompt\":[]}"
#define S1_UPDATE                                                              \
  "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"            \
  "\"sessionId\":\"s1\",\"update\":{}}}"

/* Client -> P1 -> agent: a prompt of session s1 in flight at the agent
 * (id 2 there), its client id "c1". */
static acp_router *prompt_at_agent(void) {
  acp_router *r = mk_agent(2);

  init_chain(r, 2);
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"method\":\"session/prompt\","
       "\"params\":" S1_PROMPT "}");
  take(r, 1);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"session/prompt\",\"params\":" S1_PROMPT "}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\","
         "\"params\":" S1_PROMPT "}");
  return r;
}

/* Issue 10: a proxy dies mid-turn. $/cancel_request is optional in ACP and
 * real agents ignored it, so their turn went on into the client's next
 * one. The agent also gets session/cancel; until it ends the old turn, that
 * turn's updates are dropped, its permission requests answered cancelled,
 * and the next prompt of the session waits, to start a turn of its own. */
static void test_router_proxy_death_cancels_the_turn(void **state) {
  acp_router *r = prompt_at_agent();

  (void)state;
  assert_int_equal(acp_router_link_closed(r, 1, "dead", NULL, 0), 0);
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"error\":{\"code\":-32603,"
         "\"message\":\"dead\"}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
         "\"requestId\":2}}\n"
         "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{"
         "\"sessionId\":\"s1\"}}");
  assert_int_equal(acp_router_link_bypass(r, 1), 0);
  assert_int_equal(acp_router_pending(r), 1); /* the turn still runs */
  /* The old turn's output does not reach the client. */
  feed(r, 2, S1_UPDATE);
  nothing_anywhere(r);
  feed(
      r, 2,
      "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"session/request_permission\","
      "\"params\":{\"sessionId\":\"s1\",\"options\":[]}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"outcome\":{\"outcome\":"
         "\"cancelled\"}}}");
  NOTHING(r, 0);
  /* Other sessions are not concerned. */
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
       "\"sessionId\":\"s2\",\"update\":{}}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
         "\"sessionId\":\"s2\",\"update\":{}}}");
  /* The next prompt waits for the old turn to end; a third is refused. */
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":\"c2\",\"method\":\"session/prompt\","
       "\"params\":" S1_PROMPT "}");
  nothing_anywhere(r);
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":\"c3\",\"method\":\"session/prompt\","
       "\"params\":" S1_PROMPT "}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":\"c3\",\"error\":{\"code\":-32603,"
         "\"message\":\"A prompt is already waiting for the cancelled turn to "
         "end\"}}");
  /* The agent ends the old turn: its answer is consumed, the held prompt
   * goes out. */
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"stopReason\":"
       "\"cancelled\"}}");
  NOTHING(r, 0);
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session/prompt\","
         "\"params\":" S1_PROMPT "}");
  /* The new turn is the client's as usual. */
  feed(r, 2, S1_UPDATE);
  EXPECT(r, 0, S1_UPDATE);
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"stopReason\":"
       "\"end_turn\"}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":\"c2\",\"result\":{\"stopReason\":"
         "\"end_turn\"}}");
  assert_int_equal(acp_router_pending(r), 0);
  nothing_anywhere(r);
  acp_router_free(r);
}

/* A prompt held behind a cancelled turn ends without starting when the
 * client cancels it (session/cancel or $/cancel_request), or with an error
 * when the agent dies first. */
static void test_router_held_prompt_ends(void **state) {
  acp_router *r = prompt_at_agent();

  (void)state;
  assert_int_equal(acp_router_link_closed(r, 1, "dead", NULL, 0), 0);
  take(r, 0);
  take(r, 2);
  assert_int_equal(acp_router_link_restart(r, 1), 0);
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"proxy/initialize\","
         "\"params\":" INIT_PARAMS "}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":" INIT_RESULT "}");
  nothing_anywhere(r);
  /* Through the restarted proxy: held as well. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"session/prompt\",\"params\":" S1_PROMPT "}}");
  nothing_anywhere(r);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
       "\"method\":\"session/cancel\",\"params\":{\"sessionId\":\"s1\"}}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"stopReason\":"
         "\"cancelled\"}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{"
         "\"sessionId\":\"s1\"}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"session/prompt\",\"params\":" S1_PROMPT "}}");
  nothing_anywhere(r);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
       "\"method\":\"$/cancel_request\",\"params\":{\"requestId\":9}}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"stopReason\":"
         "\"cancelled\"}}");
  nothing_anywhere(r);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"session/prompt\",\"params\":" S1_PROMPT "}}");
  nothing_anywhere(r);
  assert_int_equal(acp_router_link_closed(r, 2, "agent gone", NULL, 0), 0);
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":10,\"error\":{\"code\":-32603,"
         "\"message\":\"agent gone\"}}");
  assert_int_equal(acp_router_pending(r), 0);
  acp_router_free(r);
}

static void test_router_link_closed_defaults_and_bad_data(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  feed(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}");
  take(r, 1);
  assert_int_equal(acp_router_link_closed(r, 1, "x", "{bad", 4),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_link_closed(r, 1, "x", NULL, 3),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_link_state_of(r, 1), ACP_ROUTER_LINK_OPEN);
  assert_int_equal(acp_router_link_closed(r, 1, NULL, NULL, 0), 0);
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32603,"
         "\"message\":\"component 1 closed\"}}");
  /* The client going away: the agent's requests to it fail. */
  acp_router_free(r);
  r = mk_agent(1);
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"fs/read\"}");
  take(r, 0);
  assert_int_equal(acp_router_link_closed(r, 0, "client gone", NULL, 0), 0);
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32603,"
         "\"message\":\"client gone\"}}");
  assert_int_equal(acp_router_link_bypass(r, 0), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_link_bypass(r, 1), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_link_restart(r, 1), ACP_ERR_INVALID_ARGUMENT);
  acp_router_free(r);
}

static void test_router_bypass_routes_around_dead_proxy(void **state) {
  acp_router *r = mk_agent(3);

  (void)state;
  init_chain(r, 3);
  assert_int_equal(acp_router_link_bypass(r, 2), ACP_ERR_INVALID_STATE);
  assert_int_equal(acp_router_link_closed(r, 2, "dead", NULL, 0), 0);
  assert_int_equal(acp_router_link_bypass(r, 2), 0);
  assert_int_equal(acp_router_link_state_of(r, 2), ACP_ROUTER_LINK_BYPASSED);
  assert_int_equal(acp_router_link_bypass(r, 2), ACP_ERR_INVALID_STATE);
  /* P1's successor is now the agent, and the agent's predecessor P1. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"session/prompt\",\"params\":{}}}");
  EXPECT(r, 3,
         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\","
         "\"params\":{}}");
  feed(r, 3, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\"}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
         "\"method\":\"session/update\"}}");
  feed(r, 3, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
  EXPECT(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}");
  /* Bypass P1 as well: the client talks to the agent directly. */
  assert_int_equal(acp_router_link_closed(r, 1, "dead too", NULL, 0), 0);
  assert_int_equal(acp_router_link_bypass(r, 1), 0);
  feed(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"session/new\"}");
  EXPECT(r, 3, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session/new\"}");
  feed(r, 3, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\"}");
  EXPECT(r, 0, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\"}");
  acp_router_free(r);
}

/* A dead proxy's MCP-over-ACP servers: the agent's traffic for them is
 * answered -33001, never routed on to the client (issue 10). */
/* The agent (link 2) sends mcp/connect for server S1 as id "k"; the proxy
 * (link 1) takes it and answers with connection `cid`. What reaches the
 * agent is left for the caller. */
static void proxy_connect(acp_router *r, const char *cid) {
  char line[160];
  const char *t;
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":\"k\",\"method\":\"mcp/connect\","
       "\"params\":{\"serverId\":\"S1\"}}");
  t = strstr(take(r, 1), "\"id\":");
  assert_non_null(t);
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"connectionId\":"
           "\"%s\"}}",
           strtol(t + 5, NULL, 10), cid);
  feed(r, 1, line);
}

static void test_router_dead_provider_mcp_traffic_is_not_routed(void **state) {
  acp_router *r = mk_agent(2);
  const char *id;
  size_t n;

  (void)state;
  init_chain(r, 2);
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"session/new\",\"params\":{"
       "\"mcpServers\":[{\"type\":\"acp\",\"name\":\"c\",\"id\":\"C0\"}]}}");
  take(r, 1);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"proxy/"
       "successor\",\"params\":{"
       "\"method\":\"session/new\",\"params\":{\"mcpServers\":[{\"type\":"
       "\"acp\",\"name\":\"c\",\"id\":\"C0\"},{\"type\":\"acp\",\"name\":"
       "\"tools\",\"serverId\":\"S\\u0031\"}]}}}");
  take(r, 2);
  id = acp_router_mcp_server(r, 0, 0, &n);
  assert_non_null(id);
  assert_int_equal(n, 2);
  assert_memory_equal(id, "C0", 2);
  assert_null(acp_router_mcp_server(r, 0, 1, &n));
  id = acp_router_mcp_server(r, 1, 0, &n);
  assert_non_null(id);
  assert_memory_equal(id, "S1", 2);
  assert_null(acp_router_mcp_server(r, 2, 0, &n));
  /* The agent connects to the proxy's server; the proxy answers. */
  proxy_connect(r, "conn-1");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":\"k\",\"result\":{\"connectionId\":"
         "\"conn-1\"}}");
  /* The proxy dies and is bypassed. */
  assert_int_equal(acp_router_link_closed(r, 1, "dead", NULL, 0), 0);
  assert_int_equal(acp_router_link_bypass(r, 1), 0);
  take(r, 0); /* the pending session/new fails */
  take(r, 2); /* the agent: $/cancel_request for it */
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"mcp/message\",\"params\":{"
       "\"connectionId\":\"conn-1\",\"method\":\"tools/call\"}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-33001,"
         "\"message\":\"MCP server unavailable\",\"data\":\"its provider "
         "(component 1) is gone\"}}");
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"mcp/connect\",\"params\":{"
       "\"acpId\":\"S1\"}}");
  assert_non_null(strstr(take(r, 2), "\"id\":8,\"error\":{\"code\":-33001"));
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"method\":\"mcp/message\",\"params\":{"
       "\"connectionId\":\"conn-1\",\"method\":\"notifications/x\"}}");
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"_mcp/connect\",\"params\":{"
       "\"acp_url\":\"acp:S1\"}}");
  assert_non_null(strstr(take(r, 2), "\"id\":9,\"error\":{\"code\":-33001"));
  nothing_anywhere(r);
  /* The client's own server is still routed to it. */
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"mcp/connect\","
       "\"params\":{\"serverId\":\"C0\"}}");
  assert_non_null(strstr(take(r, 0), "mcp/connect"));
  acp_router_free(r);
}

/* Live allocations, for the test below. */
static long live_allocs;
static void *lc_malloc(size_t n, void *ud) {
  (void)ud;
  live_allocs++;
  return malloc(n);
}
static void lc_free(void *p, void *ud) {
  (void)ud;
  if (p != NULL)
    live_allocs--;
  free(p);
}
static void *lc_calloc(size_t k, size_t n, void *ud) {
  (void)ud;
  live_allocs++;
  return calloc(k, n);
}
static void *lc_realloc(void *p, size_t n, void *ud) {
  (void)ud;
  if (p == NULL)
    live_allocs++;
  return realloc(p, n);
}

/* Client, proxy (link 1) and agent initialized; a session/new on which
 * the proxy offers its MCP-over-ACP server S1. */
static void proxy_offers_s1(acp_router *r) {
  init_chain(r, 2);
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"session/new\",\"params\":{"
       "\"mcpServers\":[]}}");
  take(r, 1);
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"session/new\",\"params\":{\"mcpServers\":["
       "{\"type\":\"acp\",\"name\":\"tools\",\"serverId\":\"S1\"}]}}}");
  take(r, 2);
}

/* One mcp/connect from the agent (link 2) answered by the proxy (link 1)
 * with connection `cid`, then its mcp/disconnect, answered too. */
static void connect_cycle(acp_router *r, const char *cid) {
  char line[160];
  const char *t;
  long pid;
  proxy_connect(r, cid);
  assert_non_null(strstr(take(r, 2), cid));
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"mcp/"
           "disconnect\",\"params\":{\"connectionId\":\"%s\"}}",
           cid);
  feed(r, 2, line);
  t = strstr(take(r, 1), "\"id\":");
  assert_non_null(t);
  pid = strtol(t + 5, NULL, 10);
  snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{}}",
           pid);
  feed(r, 1, line);
  assert_non_null(strstr(take(r, 2), "\"id\":\"d\""));
}

/* The router remembers MCP-over-ACP connection ids (to answer for a
 * provider that died); a connection that was disconnected gives its place
 * back, so a long session's connect/disconnect cycles keep the table (and
 * its searches) the size of what is open. The guard still works for a
 * connection in a reused place. */
static void test_router_mcp_connections_reuse_their_place(void **state) {
  acp_mem m = {NULL, lc_malloc, lc_free, lc_calloc, lc_realloc};
  acp_router_options *o = NULL;
  acp_router *r = NULL;
  char cid[32];
  long live = 0;
  int i;

  (void)state;
  memset(&R, 0, sizeof(R));
  live_allocs = 0;
  assert_int_equal(acp_router_options_new(&o), 0);
  acp_router_options_set_mode(o, ACP_ROUTER_MODE_AGENT);
  acp_router_options_set_trace_cb(o, on_trace);
  acp_router_options_set_event_cb(o, on_event);
  assert_int_equal(acp_router_new(&r, 2, o, &R, &m), 0);
  acp_router_options_free(o);
  proxy_offers_s1(r);
  for (i = 0; i < 300; i++) {
    if (i == 20)
      live = live_allocs;
    snprintf(cid, sizeof(cid), "conn-%d", i);
    connect_cycle(r, cid);
  }
  assert_int_equal(live_allocs, live);
  /* One more, left open; then its provider dies: answered here. */
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":\"k\",\"method\":\"mcp/connect\","
       "\"params\":{\"serverId\":\"S1\"}}");
  {
    const char *t = strstr(take(r, 1), "\"id\":");
    char line[128];
    assert_non_null(t);
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"connectionId\":"
             "\"last\"}}",
             strtol(t + 5, NULL, 10));
    feed(r, 1, line);
    take(r, 2);
  }
  assert_int_equal(acp_router_link_closed(r, 1, "dead", NULL, 0), 0);
  assert_int_equal(acp_router_link_bypass(r, 1), 0);
  take(r, 0);
  take(r, 2);
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"mcp/message\",\"params\":{"
       "\"connectionId\":\"last\",\"method\":\"tools/call\"}}");
  assert_non_null(strstr(take(r, 2), "\"id\":7,\"error\":{\"code\":-33001"));
  acp_router_free(r);
  assert_int_equal(live_allocs, 0);
}

/* Past a few open connections the router finds their ids by hash: every
 * one of 300 open at once (the index grown several times, half of them in
 * places given back by disconnected ones) is still known when its
 * provider dies, and a disconnected one is not. */
static void test_router_many_mcp_connections_stay_known(void **state) {
  acp_router *r = mk_agent(2);
  char cid[64];
  char line[192];
  int i;

  (void)state;
  proxy_offers_s1(r);
  for (i = 0; i < 200; i++) {
    snprintf(cid, sizeof(cid), "conn-%d", i);
    proxy_connect(r, cid);
    assert_non_null(strstr(take(r, 2), cid));
  }
  for (i = 0; i < 200; i += 2) {
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"method\":\"mcp/disconnect\",\"params\":{"
             "\"connectionId\":\"conn-%d\"}}",
             i);
    feed(r, 2, line);
    assert_non_null(strstr(take(r, 1), "mcp/disconnect"));
  }
  for (i = 0; i < 200; i++) {
    snprintf(cid, sizeof(cid), "new-%d", i);
    proxy_connect(r, cid);
    assert_non_null(strstr(take(r, 2), cid));
  }
  assert_int_equal(acp_router_link_closed(r, 1, "dead", NULL, 0), 0);
  assert_int_equal(acp_router_link_bypass(r, 1), 0);
  take(r, 0);
  take(r, 2);
  for (i = 0; i < 400; i++) {
    bool open = i >= 200 || i % 2 == 1;
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"mcp/message\","
             "\"params\":{\"connectionId\":\"%s-%d\",\"method\":\"x\"}}",
             1000 + i, i < 200 ? "conn" : "new", i < 200 ? i : i - 200);
    feed(r, 2, line);
    if (open) {
      snprintf(cid, sizeof(cid), "\"id\":%d,\"error\":{\"code\":-33001",
               1000 + i);
      assert_non_null(strstr(take(r, 2), cid));
    } else {
      /* Forgotten: routed on like any message, to the client now. */
      assert_non_null(strstr(take(r, 0), "mcp/message"));
    }
  }
  nothing_anywhere(r);
  acp_router_free(r);
}

static void test_router_restart_reinitializes(void **state) {
  acp_router *r = mk_agent(3);

  (void)state;
  init_chain(r, 3);
  assert_int_equal(acp_router_link_restart(r, 2), ACP_ERR_INVALID_STATE);
  assert_int_equal(acp_router_link_closed(r, 2, "crashed", NULL, 0), 0);
  assert_int_equal(acp_router_link_restart(r, 2), 0);
  assert_int_equal(acp_router_link_state_of(r, 2), ACP_ROUTER_LINK_RESTARTING);
  /* The same params as the first time. */
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"proxy/initialize\","
         "\"params\":" INIT_PARAMS "}");
  /* Traffic routed meanwhile queues behind it. */
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"method\":\"proxy/successor\",\"params\":{"
       "\"method\":\"session/cancel\"}}");
  EXPECT(r, 2, "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\"}");
  /* Its forwarded initialize is answered from the agent's first answer. */
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"initialize\",\"params\":" INIT_PARAMS "}}");
  EXPECT(r, 2, "{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"result\":" INIT_RESULT "}");
  NOTHING(r, 3);
  /* Its own answer is consumed by the router. */
  feed(r, 2, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":" INIT_RESULT "}");
  nothing_anywhere(r);
  assert_int_equal(acp_router_link_state_of(r, 2), ACP_ROUTER_LINK_OPEN);
  assert_int_equal(acp_router_pending(r), 0);
  /* Routing continues as before. */
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"session/prompt\"}}");
  EXPECT(r, 3, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\"}");

  /* A restart whose initialize is refused is reported. */
  assert_int_equal(acp_router_link_closed(r, 1, "crashed", NULL, 0), 0);
  take(r, 0);
  assert_int_equal(acp_router_link_restart(r, 1), 0);
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"proxy/initialize\","
         "\"params\":" INIT_PARAMS "}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-1}}");
  nothing_anywhere(r);
  assert_int_equal(R.nevents[ACP_ROUTER_EVENT_REINIT_FAILED], 1);
  acp_router_free(r);
}

static void test_router_restart_before_initialize(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  assert_int_equal(acp_router_link_closed(r, 1, "early", NULL, 0), 0);
  assert_int_equal(acp_router_link_restart(r, 1), 0);
  assert_int_equal(acp_router_link_state_of(r, 1), ACP_ROUTER_LINK_OPEN);
  nothing_anywhere(r);
  init_chain(r, 2);
  acp_router_free(r);
}

/* MARK: - Bad input */

static void test_router_garbage_is_answered_or_dropped(void **state) {
  acp_router *r = mk_agent(2);
  static const char nl[] = "{\"a\":\n1}";
  char deep[2100];
  size_t i;

  (void)state;
  feed(r, 1, "not json");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,"
         "\"message\":\"Parse error\"}}");
  assert_int_equal(acp_router_recv(r, 1, nl, sizeof(nl) - 1), 0);
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,"
         "\"message\":\"Parse error\"}}");
  assert_int_equal(acp_router_recv(r, 1, "", 0), 0);
  take(r, 1);
  feed(r, 1, "17");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
         "\"message\":\"Invalid Request\",\"data\":\"a message must be an "
         "object\"}}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"m\"}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
         "\"message\":\"Invalid Request\",\"data\":\"id must be a string or "
         "a number\"}}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":4}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32600,"
         "\"message\":\"Invalid Request\",\"data\":\"method must be a "
         "string\"}}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":3}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32600,"
         "\"message\":\"Invalid Request\",\"data\":\"neither a call nor a "
         "response\"}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":5}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32602,"
         "\"message\":\"Invalid params\",\"data\":\"proxy/successor needs a "
         "string method\"}}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"proxy/initialize\"}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32600,"
         "\"message\":\"Invalid Request\",\"data\":\"proxy/initialize is sent "
         "by the conductor, not to it\"}}");
  feed(r, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"x\"}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32600,"
         "\"message\":\"Invalid Request\",\"data\":\"the agent has no "
         "successor\"}}");
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"x\"}}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32600,"
         "\"message\":\"Invalid Request\",\"data\":\"the client is not a "
         "proxy: it has no successor\"}}");
  feed(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"proxy/initialize\"}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32600,"
         "\"message\":\"Invalid Request\",\"data\":\"this conductor is not a "
         "proxy\"}}");
  /* Dropped silently (reported as events): bad notifications, responses
   * nobody waits for, responses with unusable ids. */
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"method\":7}");
  feed(r, 1, "{\"method\":\"proxy/successor\",\"params\":{}}");
  feed(r, 1, "{\"method\":\"proxy/initialize\"}");
  feed(r, 2, "{\"method\":\"proxy/successor\"}");
  feed(r, 0, "{\"method\":\"proxy/successor\"}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":77,\"result\":1}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"result\":1}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"result\":1}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":1}}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":5}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1}\r\n");
  nothing_anywhere(r);
  assert_true(R.nevents[ACP_ROUTER_EVENT_DROPPED] >= 10);
  /* Too deep for the tape. */
  for (i = 0; i < 2000; i++)
    deep[i] = '[';
  deep[2000] = '\0';
  feed(r, 1, deep);
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,"
         "\"message\":\"Parse error\"}}");
  acp_router_free(r);
}

static void test_router_pending_and_output_caps(void **state) {
  acp_router_options *o = NULL;
  acp_router *r = NULL;
  char big[600];

  (void)state;
  assert_int_equal(acp_router_options_new(&o), 0);
  acp_router_options_set_max_pending(o, 1);
  acp_router_options_set_max_output(o, 300);
  assert_int_equal(acp_router_new(&r, 1, o, NULL, NULL), 0);
  acp_router_options_free(o);
  feed(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}");
  feed(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"b\"}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32603,"
         "\"message\":\"Too many pending requests\"}}");
  EXPECT(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":null}");
  take(r, 0);
  memset(big, 'x', sizeof(big));
  memcpy(big, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"c\",\"params\":\"",
         47);
  memcpy(big + sizeof(big) - 3, "\"}", 3);
  feed(r, 0, big);
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32603,"
         "\"message\":\"Message too large\"}}");
  NOTHING(r, 1);
  assert_int_equal(acp_router_pending(r), 0);
  /* A notification too large is dropped. */
  memcpy(big, "{\"jsonrpc\":\"2.0\",\"method\":\"c\",\"params\":\"xxxxxxxx",
         47);
  feed(r, 0, big);
  nothing_anywhere(r);
  acp_router_free(r);
}

static void test_router_trace_sees_every_hop(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  init_chain(r, 2);
  /* 2 requests down, 2 responses up: 4 hops. */
  assert_int_equal(R.ntrace, 4);
  feed(r, 2, "{\"jsonrpc\":\"2.0\",\"method\":\"u\"}");
  assert_int_equal(R.ntrace, 5);
  assert_int_equal(R.last_from, 2);
  assert_int_equal(R.last_to, 1);
  feed(r, 1, "bad");
  assert_int_equal(R.last_from, ACP_ROUTER_SELF);
  assert_int_equal(R.last_to, 1);
  /* Callbacks cannot re-enter. */
  R.reenter = 1;
  feed(r, 2, "{\"jsonrpc\":\"2.0\",\"method\":\"u\"}");
  R.reenter = 0;
  acp_router_release_memory(r);
  assert_int_equal(acp_router_want_write(r, 1), 1);
  take(r, 1);
  acp_router_release_memory(r);
  NOTHING(r, 1);
  feed(r, 2, "{\"jsonrpc\":\"2.0\",\"method\":\"u\"}");
  assert_int_equal(acp_router_want_write(r, 1), 1);
  acp_router_free(r);
}

static void test_router_send_hands_out_once(void **state) {
  acp_router *r = mk_agent(1);
  const char *d1;
  const char *d2;

  (void)state;
  feed(r, 0, "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}");
  feed(r, 0, "{\"jsonrpc\":\"2.0\",\"method\":\"b\"}");
  assert_int_equal(acp_router_send(r, 1, &d1), 62);
  assert_memory_equal(d1,
                      "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n"
                      "{\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n",
                      62);
  assert_int_equal(acp_router_want_write(r, 1), 0);
  assert_int_equal(acp_router_send(r, 1, &d2), 0);
  assert_null(d2);
  acp_router_free(r);
}

static void test_router_many_requests_out_of_order(void **state) {
  acp_router *r = mk_agent(1);
  char line[128];
  char want[128];
  size_t i;

  (void)state;
  for (i = 0; i < 1000; i++) {
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":\"c%zu\",\"method\":\"m\"}", i);
    feed(r, 0, line);
  }
  take(r, 1);
  assert_int_equal(acp_router_pending(r), 1000);
  /* Answer in a scrambled order (7919 is prime to 1000): every answer
   * finds its request, even as deletions reshuffle the hash. */
  for (i = 0; i < 1000; i++) {
    size_t j = (i * 7919) % 1000;
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"result\":%zu}", j + 1, j);
    feed(r, 1, line);
    snprintf(want, sizeof(want),
             "{\"jsonrpc\":\"2.0\",\"id\":\"c%zu\",\"result\":%zu}\n", j, j);
    assert_string_equal(take(r, 0), want);
    /* A second answer to the same id finds nothing. */
    feed(r, 1, line);
    NOTHING(r, 0);
  }
  assert_int_equal(acp_router_pending(r), 0);
  acp_router_free(r);
}

/* MARK: - Allocation failure */

/* A scenario touching every allocating path; returns 1 when it finished. */
static int scenario(failmem *f) {
  acp_mem m = {f, fm_malloc, fm_free, fm_calloc, fm_realloc};
  acp_router *r = NULL;
  static const char *const steps[][2] = {
      {"0", "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
            "\"params\":{\"p\":1}}"},
      {"1", "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601}}"},
      {"1", "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32601}}"},
      {"1", "{\"jsonrpc\":\"2.0\",\"id\":\"a-very-long-string-id-of-more-"
            "than-24-bytes\",\"method\":\"_proxy/successor/request\","
            "\"params\":{\"method\":\"initialize\",\"params\":{}}}"},
      {"2", "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"r\":1}}"},
      {"1", "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"r\":0}}"},
      {"0", "[{\"jsonrpc\":\"2.0\",\"id\":\"\\u0071\",\"method\":\"p\"},5]"},
      {"0", "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
            "\"params\":{\"requestId\":\"q\"}}"},
      {"2", "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"perm\"}"},
      {"0", "garbage"},
  };
  size_t i;
  int rv;
  int done = 0;

  if (acp_router_new(&r, 2, NULL, NULL, &m) != 0)
    return 0;
  for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
    const char *d;
    size_t link = (size_t)(steps[i][0][0] - '0');
    rv = acp_router_recv(r, link, steps[i][1], strlen(steps[i][1]));
    if (rv != 0) {
      assert_int_equal(rv, ACP_ERR_NOMEM);
      /* Fatal: everything else refuses. */
      assert_int_equal(acp_router_recv(r, 0, "{}", 2), ACP_ERR_INVALID_STATE);
      goto out;
    }
    if (i % 2)
      (void)acp_router_send(r, link ? 0 : 1, &d);
  }
  /* Enough requests in flight to grow the table and its hash. */
  for (i = 0; i < 40; i++) {
    char line[64];
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%zu,"
             "\"method\":\"m\"}",
             i + 100);
    rv = acp_router_recv(r, 0, line, strlen(line));
    if (rv != 0)
      goto out;
  }
  rv = acp_router_link_closed(r, 1, "gone \xff", "{\"c\":1}", 7);
  if (rv != 0)
    goto out;
  rv = acp_router_link_restart(r, 1);
  if (rv != 0)
    goto out;
  done = 1;
out:
  acp_router_free(r);
  return done;
}

static void test_router_failmalloc(void **state) {
  (void)state;
  failmem_sweep(scenario, 10);
}

/* MARK: - ACP v2 */

#define V2_PARAMS                                                              \
  "{\"protocolVersion\":2,\"info\":{\"name\":\"c\"},\"capabilities\":{}}"
#define V2_RESULT                                                              \
  "{\"protocolVersion\":2,\"info\":{\"name\":\"a\"},\"capabilities\":{"        \
  "\"session\":{}}}"

/* A v2 chain (proxy + agent both answer 2) is carried byte-exact, later
 * v2-only traffic too: the router reads no method table. */
static void test_router_v2_chain_is_byte_exact(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
       "\"params\":" V2_PARAMS "}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
         "\"params\":" V2_PARAMS "}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":100,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"initialize\",\"params\":" V2_PARAMS "}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
         "\"params\":" V2_PARAMS "}");
  feed(r, 2, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":" V2_RESULT "}");
  EXPECT(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":100,\"result\":" V2_RESULT "}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":" V2_RESULT "}");
  EXPECT(r, 0, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":" V2_RESULT "}");
  nothing_anywhere(r);
  /* tool_call/cancel (v2 only) from the client reaches the proxy as is. */
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tool_call/cancel\","
       "\"params\":{\"sessionId\":\"s\",\"toolCallId\":\"t\"}}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tool_call/cancel\","
         "\"params\":{\"sessionId\":\"s\",\"toolCallId\":\"t\"}}");
  assert_int_equal(R.nevents[ACP_ROUTER_EVENT_REJECTED], 0);
  acp_router_free(r);
}

/* A proxy that answers another protocolVersion than its successor did: the
 * client gets a clear error instead of a chain speaking two versions. */
static void test_router_version_mismatch_is_refused(void **state) {
  acp_router *r = mk_agent(2);

  (void)state;
  feed(r, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
       "\"params\":" V2_PARAMS "}");
  EXPECT(r, 1,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/initialize\","
         "\"params\":" V2_PARAMS "}");
  feed(r, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":100,\"method\":\"proxy/successor\","
       "\"params\":{\"method\":\"initialize\",\"params\":" V2_PARAMS "}}");
  EXPECT(r, 2,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
         "\"params\":" V2_PARAMS "}");
  /* The agent speaks 1, the proxy claims 2. */
  feed(r, 2, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":" INIT_RESULT "}");
  EXPECT(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":100,\"result\":" INIT_RESULT "}");
  feed(r, 1, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":" V2_RESULT "}");
  EXPECT(r, 0,
         "{\"jsonrpc\":\"2.0\",\"id\":0,\"error\":{\"code\":-32603,"
         "\"message\":\"protocol version mismatch in the chain: component 1 "
         "answered initialize with protocolVersion 2, its successor 2 with "
         "1; the conductor translates nothing between versions\","
         "\"data\":{\"component\":1,\"protocolVersion\":2,\"successor\":2,"
         "\"successorProtocolVersion\":1}}}");
  assert_int_equal(R.nevents[ACP_ROUTER_EVENT_REJECTED], 1);
  nothing_anywhere(r);
  assert_int_equal(acp_router_pending(r), 0);
  acp_router_free(r);
}

/* MARK: - Lines from a framer (acp_router_recv_framed) */

/* The output a router gives for one message from link 0 (after init), in
 * a malloc'd copy; `framed` feeds it through an acp_ndjson in reads of
 * `step` bytes (0: whole) and acp_router_recv_framed(), else
 * acp_router_recv(). */
/* A router like mk_agent(1) without a trace callback (with one, nothing is
 * borrowed). */
static acp_router *mk_untraced(size_t n, size_t max_output) {
  acp_router_options *o = NULL;
  acp_router *r = NULL;

  memset(&R, 0, sizeof(R));
  assert_int_equal(acp_router_options_new(&o), 0);
  acp_router_options_set_event_cb(o, on_event);
  acp_router_options_set_max_output(o, max_output);
  assert_int_equal(acp_router_new(&r, n, o, &R, NULL), 0);
  acp_router_options_free(o);
  return r;
}

/* Output gathered from lent lines (route_big's ref mode): per link, and
 * whether any piece pointed into a line (borrowed, not copied). */
typedef struct gathered {
  char *data[4];
  size_t len[4];
  int borrowed;
} gathered;

static void gather_put(gathered *g, size_t k, const char *p, size_t n) {
  g->data[k] = realloc(g->data[k], g->len[k] + n + 1);
  assert_non_null(g->data[k]);
  memcpy(g->data[k] + g->len[k], p, n);
  g->len[k] += n;
}

/* Take every link's output as pieces, right after a lent line was routed
 * and before the framer moves on (acp_router_recv_framed_ref()'s rule). */
static void gather_iov(acp_router *r, gathered *g, const char *line,
                       size_t ll) {
  size_t k, i;

  for (k = 0; k < acp_router_link_count(r); k++) {
    const acp_rpc_iov *iov = NULL;
    size_t niov = 0, sum = 0;
    acp_ssize n = acp_router_send_iov(r, k, &iov, &niov);
    assert_true(n >= 0);
    assert_true(n == 0 || niov >= 1);
    for (i = 0; i < niov; i++) {
      uintptr_t p = (uintptr_t)iov[i].data;
      if (p >= (uintptr_t)line && p < (uintptr_t)line + ll)
        g->borrowed++;
      gather_put(g, k, iov[i].data, iov[i].len);
      sum += iov[i].len;
    }
    assert_int_equal(sum, (size_t)n);
  }
  assert_int_equal(acp_router_borrowed(r), 0);
}

/* mode for route_big() */
enum { RB_WHOLE = 0, RB_FRAMED = 1, RB_REF = 2 };

static char *route_big_mode(const char *msg, size_t len, int mode, size_t step,
                            size_t *out_len, size_t *out_link, int *borrowed) {
  acp_router *r = mode == RB_REF ? mk_untraced(1, 0) : mk_agent(1);
  acp_ndjson f;
  char *in = malloc(len + 1);
  char *out = NULL;
  size_t pos = 0, k;
  int lines = 0;
  gathered g;
  bool framed = mode != RB_WHOLE;

  memset(&g, 0, sizeof(g));

  assert_non_null(in);
  init_chain(r, 1);
  memcpy(in, msg, len);
  in[len] = '\n';
  if (!framed) {
    assert_int_equal(acp_router_recv(r, 0, in, len), 0);
  } else {
    acp_ndjson_init(&f, SIZE_MAX, NULL);
    while (pos < len + 1) {
      size_t n = step == 0 || len + 1 - pos < step ? len + 1 - pos : step;
      size_t off = 0;
      while (off < n) {
        const char *line;
        size_t used, ll;
        int rc =
            acp_ndjson_next(&f, in + pos + off, n - off, &used, &line, &ll);
        off += used;
        if (rc == ACP_NDJSON_NEED_MORE)
          break;
        assert_int_equal(rc, ACP_NDJSON_LINE);
        if (mode == RB_REF) {
          assert_int_equal(acp_router_recv_framed_ref(r, 0, &f, line, ll), 0);
          gather_iov(r, &g, line, ll);
        } else {
          assert_int_equal(acp_router_recv_framed(r, 0, &f, line, ll), 0);
        }
        lines++;
      }
      pos += n;
    }
    assert_int_equal(lines, 1);
    acp_ndjson_dispose(&f);
  }
  *out_len = 0;
  *out_link = SIZE_MAX;
  if (borrowed != NULL)
    *borrowed = g.borrowed;
  for (k = 0; mode == RB_REF && k < 4; k++) {
    if (g.len[k] > 0 && out == NULL) {
      out = g.data[k];
      *out_len = g.len[k];
      *out_link = k;
    } else {
      free(g.data[k]);
    }
  }
  for (k = 0; k < acp_router_link_count(r) && out == NULL; k++) {
    const char *d;
    acp_ssize n = acp_router_send(r, k, &d);
    assert_true(n >= 0);
    if (n > 0) {
      out = malloc((size_t)n);
      assert_non_null(out);
      memcpy(out, d, (size_t)n);
      *out_len = (size_t)n;
      *out_link = k;
    }
  }
  free(in);
  acp_router_free(r);
  return out;
}

static char *route_big(const char *msg, size_t len, bool framed, size_t step,
                       size_t *out_len, size_t *out_link) {
  return route_big_mode(msg, len, framed ? RB_FRAMED : RB_WHOLE, step, out_len,
                        out_link, NULL);
}

/*
 * A 200 KB prompt, plain or spoiled by one special byte at offsets around
 * the framer's windows and read splits, read in pieces of several sizes:
 * the framed path (which skips the line feed check and lets the parse jump
 * over the framer's plain run) routes exactly what acp_router_recv() routes
 * from the whole line: the same bytes to the same link, or the same error.
 */
static void test_router_framed_lines_route_as_whole_lines(void **state) {
  static const char *const spoil[] = {
      "\\\"",         /* an escape */
      "\\n",          /* another */
      "\"",           /* a bare quote: not JSON any more */
      "\x01",         /* a control byte: not JSON */
      "\xff",         /* not UTF-8 */
      "\xc3\xa9",     /* a 2-byte character */
      "\xe2\x82\xac", /* a 3-byte character */
      "\xed\xa0\x80", /* a surrogate: not UTF-8 */
      "\\u00e9",      /* an escaped character */
  };
  static const size_t at[] = {0,     1,     63,    64,     4095,
                              4096,  4097,  16383, 16384,  65535,
                              65536, 65600, 99999, 131072, 199998};
  static const size_t steps[] = {0, 4096, 65536, 65537, 100000};
  const size_t text = 200000;
  const char *head = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"session/"
                     "prompt\",\"params\":{\"sessionId\":\"s\",\"prompt\":[{"
                     "\"type\":\"text\",\"text\":\"";
  const char *tail = "\"}]}}";
  size_t hl = strlen(head), tl = strlen(tail);
  char *msg = malloc(hl + text + 8 + tl);
  size_t i, j, st;

  (void)state;
  assert_non_null(msg);
  for (i = 0; i <= sizeof(spoil) / sizeof(spoil[0]); i++) {
    for (j = 0; j < sizeof(at) / sizeof(at[0]); j++) {
      size_t len = 0, wl, wk,
             sl = i < sizeof(spoil) / sizeof(spoil[0]) ? strlen(spoil[i]) : 0;
      char *want;

      if (i == sizeof(spoil) / sizeof(spoil[0]) && j > 0)
        break; /* the plain text: once */
      memcpy(msg, head, hl);
      len = hl;
      memset(msg + len, 'a', at[j]);
      len += at[j];
      if (sl > 0)
        memcpy(msg + len, spoil[i], sl);
      len += sl;
      memset(msg + len, 'a', text - at[j]);
      len += text - at[j];
      memcpy(msg + len, tail, tl);
      len += tl;
      want = route_big(msg, len, false, 0, &wl, &wk);
      assert_non_null(want);
      for (st = 0; st < sizeof(steps) / sizeof(steps[0]); st++) {
        size_t gl, gk;
        char *got_ = route_big(msg, len, true, steps[st], &gl, &gk);
        int lent = 0;
        assert_non_null(got_);
        if (gl != wl || gk != wk || memcmp(got_, want, wl) != 0)
          fail_msg("spoil %zu at %zu, reads of %zu: routed differently", i,
                   at[j], steps[st]);
        free(got_);
        /* Lent (acp_router_recv_framed_ref(), acp_router_send_iov()): the
         * same bytes, and a prompt that reaches the agent is written from
         * the line, not copied. (Under valgrind, every other read size.) */
        if (getenv("ACP_VALGRIND") != NULL && st % 2 == 1)
          continue;
        got_ = route_big_mode(msg, len, RB_REF, steps[st], &gl, &gk, &lent);
        assert_non_null(got_);
        if (gl != wl || gk != wk || memcmp(got_, want, wl) != 0)
          fail_msg("spoil %zu at %zu, reads of %zu, lent: routed differently",
                   i, at[j], steps[st]);
        if ((wk == 1) != (lent == 1))
          fail_msg("spoil %zu at %zu, reads of %zu: %d pieces borrowed", i,
                   at[j], steps[st], lent);
        free(got_);
      }
      /* The plain text reaches the agent; the broken ones are answered. */
      {
        bool ok = i == sizeof(spoil) / sizeof(spoil[0]) || i == 0 || i == 1 ||
                  i == 5 || i == 6 || i == 8;
        if (wk != (ok ? 1u : 0u))
          fail_msg("spoil %zu at %zu: went to link %zu", i, at[j], wk);
      }
      free(want);
    }
  }
  free(msg);
}

/* Without a framer it is acp_router_recv(): a line feed inside is refused. */
static void test_router_framed_null_framer_checks_line_feeds(void **state) {
  acp_router *r = mk_agent(1);
  const char *l = "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n{\"x\":1}";

  (void)state;
  init_chain(r, 1);
  assert_int_equal(acp_router_recv_framed(r, 0, NULL, l, strlen(l)), 0);
  assert_non_null(strstr(take(r, 0), "Parse error"));
  NOTHING(r, 1);
  assert_int_equal(acp_router_recv_framed(NULL, 0, NULL, l, 1),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_router_free(r);
}

/* MARK: - Lent lines (acp_router_recv_framed_ref) */

#define BIG_TEXT 20000

/* A message with a text of BIG_TEXT bytes: `pre` + text + `post`. */
static char *big_msg(const char *pre, const char *post, char fill,
                     size_t *len) {
  size_t pl = strlen(pre), ql = strlen(post);
  char *m = malloc(pl + BIG_TEXT + ql + 1);

  assert_non_null(m);
  memcpy(m, pre, pl);
  memset(m + pl, fill, BIG_TEXT);
  memcpy(m + pl + BIG_TEXT, post, ql + 1);
  *len = pl + BIG_TEXT + ql;
  return m;
}

/* Route the same lines through two routers, one with acp_router_recv()
 * and one lending each line and taking pieces (or, `join`, taking
 * acp_router_send()'s one buffer after acp_router_copy_borrowed() and a
 * scribble over the line): every link gets the same bytes. */
static void same_either_way(size_t max_output, const char *const *lines,
                            const size_t *links, size_t n, bool join) {
  acp_router *a = mk_untraced(2, max_output);
  rec ra;
  acp_router *b;
  size_t i, k;

  ra = R;
  init_chain(a, 2);
  b = mk_untraced(2, max_output);
  init_chain(b, 2);
  for (i = 0; i < n; i++) {
    size_t ll = strlen(lines[i]);
    char *copy = malloc(ll + 1);
    gathered g;

    memset(&g, 0, sizeof(g));
    memcpy(copy, lines[i], ll + 1);
    assert_int_equal(acp_router_recv(a, links[i], lines[i], ll), 0);
    assert_int_equal(acp_router_recv_framed_ref(b, links[i], NULL, copy, ll),
                     0);
    if (join) {
      assert_int_equal(acp_router_copy_borrowed(b), 0);
      assert_int_equal(acp_router_borrowed(b), 0);
      memset(copy, 'Z', ll); /* the line is free again */
      for (k = 0; k < 3; k++) {
        const char *d;
        acp_ssize m = acp_router_send(b, k, &d);
        assert_true(m >= 0);
        if (m > 0)
          gather_put(&g, k, d, (size_t)m);
      }
    } else {
      gather_iov(b, &g, copy, ll);
      memset(copy, 'Z', ll);
    }
    for (k = 0; k < 3; k++) {
      const char *d;
      acp_ssize m = acp_router_send(a, k, &d);
      assert_true(m >= 0);
      if ((size_t)m != g.len[k] || (m > 0 && memcmp(d, g.data[k], g.len[k])))
        fail_msg("line %zu, link %zu: %zd bytes copied, %zu lent", i, k, m,
                 g.len[k]);
      free(g.data[k]);
    }
    free(copy);
  }
  (void)ra;
  acp_router_free(a);
  acp_router_free(b);
}

/*
 * Large prompts, answers and batches, lent: the bytes every link gets are
 * those of acp_router_recv(), with the output cap counting borrowed bytes
 * exactly (caps around a message's size refuse the same messages), and
 * whether taken as pieces or joined after acp_router_copy_borrowed().
 */
static void test_router_lent_lines_route_as_copied(void **state) {
  size_t l1, l2, l3, l4;
  char *prompt = big_msg("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":"
                         "\"session/prompt\",\"params\":{\"sessionId\":"
                         "\"s\",\"prompt\":[{\"type\":\"text\",\"text\":\"",
                         "\"}]}}", 'p', &l1);
  char *update = big_msg("{\"jsonrpc\":\"2.0\",\"method\":\"session/update\","
                         "\"params\":{\"sessionId\":\"s\",\"text\":\"",
                         "\"}}", 'u', &l2);
  char *answer = big_msg("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{"
                         "\"stopReason\":\"end_turn\",\"x\":\"",
                         "\"}}", 'r', &l3);
  char *batch = malloc(2 * l1 + 8);
  const char *lines[6];
  size_t links[6];
  /* The agent's big answer goes to link 1 (the proxy): its output is
   * {"jsonrpc":"2.0","id":100,"result":...} (it wraps nothing). */
  static const size_t caps[] = {0, 1, 2, 3, 4, 39, 40, 41, 42, 60, 80, 100};
  size_t c;

  (void)state;
  assert_non_null(batch);
  /* Two prompts in one batch from the client, to the proxy. */
  memcpy(batch, "[", 1);
  memcpy(batch + 1, prompt, l1);
  batch[1 + l1] = ',';
  memcpy(batch + 2 + l1, prompt, l1);
  memcpy(batch + 2 + 2 * l1, "]", 2);
  l4 = 2 * l1 + 3;
  (void)l4;
  lines[0] = prompt; /* client -> proxy (1) */
  links[0] = 0;
  lines[1] = update; /* agent -> proxy, wrapped */
  links[1] = 2;
  lines[2] = batch; /* client -> proxy, one array line */
  links[2] = 0;
  lines[3] = "{\"jsonrpc\":\"2.0\",\"id\":100,\"method\":\"proxy/successor\","
             "\"params\":{\"method\":\"session/prompt\",\"params\":{}}}";
  links[3] = 1;      /* the proxy forwards a small prompt: id 1 on the agent */
  lines[4] = answer; /* the agent's big answer to it */
  links[4] = 2;
  lines[5] = update;
  links[5] = 2;
  /* Caps: the default, then a message's size and a few bytes either side,
   * so that the cap falls inside, on and past each message's own bytes. */
  for (c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
    size_t cap = caps[c] == 0 ? 0 : BIG_TEXT + caps[c] * 2;
    same_either_way(cap, lines, links, 6, false);
    same_either_way(cap, lines, links, 6, true);
  }
  /* Past two messages: the batch's second prompt meets the cap. */
  same_either_way(2 * l1, lines, links, 6, false);
  same_either_way(2 * l1 + 200, lines, links, 6, true);
  free(prompt);
  free(update);
  free(answer);
  free(batch);
}

/* With a trace callback nothing is borrowed (a hop is one stretch); small
 * pieces are never borrowed; bad arguments are refused. */
static void test_router_lent_lines_borrow_only_large_untraced(void **state) {
  acp_router *r = mk_agent(1);
  size_t len;
  char *prompt = big_msg("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":"
                         "\"session/prompt\",\"params\":{\"t\":\"",
                         "\"}}", 'p', &len);
  const acp_rpc_iov *iov = NULL;
  size_t niov = 9;
  const char *small = "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"x\","
                      "\"params\":{\"a\":1}}";

  (void)state;
  init_chain(r, 1);
  assert_int_equal(acp_router_recv_framed_ref(r, 0, NULL, prompt, len), 0);
  assert_int_equal(R.ntrace, 3); /* init's two hops and this one */
  assert_int_equal(acp_router_borrowed(r), 0);
  assert_true(acp_router_send_iov(r, 1, &iov, &niov) > (acp_ssize)len);
  assert_int_equal(niov, 1);
  acp_router_free(r);

  r = mk_untraced(1, 0);
  init_chain(r, 1);
  assert_int_equal(acp_router_recv_framed_ref(r, 0, NULL, small, strlen(small)),
                   0);
  assert_int_equal(acp_router_borrowed(r), 0);
  assert_true(acp_router_send_iov(r, 1, &iov, &niov) > 0);
  assert_int_equal(niov, 1);
  assert_int_equal(acp_router_send_iov(r, 1, &iov, &niov), 0);
  assert_null(iov);
  assert_int_equal(niov, 0);
  assert_int_equal(acp_router_recv_framed_ref(r, 0, NULL, prompt, len), 0);
  assert_int_equal(acp_router_borrowed(r), 1);
  assert_int_equal(acp_router_want_write(r, 1), 1);
  assert_true(acp_router_send_iov(r, 1, &iov, &niov) > (acp_ssize)len);
  assert_int_equal(niov, 3); /* envelope, the text's params, closing */
  assert_ptr_equal(iov[1].data, strstr(prompt, "{\"t\""));
  assert_int_equal(acp_router_borrowed(r), 0);
  assert_int_equal(acp_router_want_write(r, 1), 0);
  /* A line feed inside a lent line without a framer is still refused. */
  assert_int_equal(acp_router_recv_framed_ref(r, 0, NULL, "{}\n{}", 5), 0);
  assert_non_null(strstr(take(r, 0), "Parse error"));
  assert_int_equal(acp_router_send_iov(r, 9, &iov, &niov),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_send_iov(r, 0, NULL, &niov),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_send_iov(NULL, 0, &iov, &niov),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_recv_framed_ref(NULL, 0, NULL, small, 1),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_copy_borrowed(NULL), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_router_borrowed(NULL), 0);
  /* Output still borrowed when the link closes is dropped with it; memory
   * released while borrowed output waits keeps it. */
  assert_int_equal(acp_router_recv_framed_ref(r, 0, NULL, prompt, len), 0);
  acp_router_release_memory(r);
  assert_int_equal(acp_router_borrowed(r), 1);
  assert_true(acp_router_send_iov(r, 1, &iov, &niov) > (acp_ssize)len);
  acp_router_release_memory(r);
  assert_int_equal(acp_router_recv_framed_ref(r, 0, NULL, prompt, len), 0);
  assert_int_equal(acp_router_link_closed(r, 1, "gone", NULL, 0), 0);
  assert_int_equal(acp_router_borrowed(r), 0);
  assert_non_null(strstr(take(r, 0), "gone"));
  acp_router_free(r);
  free(prompt);
}

/* Allocation failure while lending: the span list, the piece array and
 * the join each fail cleanly (ACP_ERR_NOMEM, nothing leaked). */
static int scenario_lent(failmem *f) {
  acp_mem m = {f, fm_malloc, fm_free, fm_calloc, fm_realloc};
  acp_router *r = NULL;
  size_t len, i;
  char *prompt = big_msg("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":"
                         "\"session/prompt\",\"params\":{\"t\":\"",
                         "\"}}", 'p', &len);
  const char *init = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":"
                     "\"initialize\",\"params\":{}}";
  int done = 0;
  int rv;

  if (acp_router_new(&r, 1, NULL, NULL, &m) != 0)
    goto out;
  rv = acp_router_recv(r, 0, init, strlen(init));
  if (rv != 0)
    goto out;
  for (i = 0; i < 3; i++) {
    const acp_rpc_iov *iov;
    size_t niov;
    const char *d;
    acp_ssize n;

    rv = acp_router_recv_framed_ref(r, 0, NULL, prompt, len);
    if (rv != 0) {
      assert_int_equal(rv, ACP_ERR_NOMEM);
      goto out;
    }
    if (i == 0)
      n = acp_router_send_iov(r, 1, &iov, &niov);
    else if (i == 1)
      n = (acp_ssize)acp_router_copy_borrowed(r);
    else
      n = acp_router_send(r, 1, &d);
    if (n < 0) {
      assert_int_equal(n, ACP_ERR_NOMEM);
      goto out;
    }
  }
  done = 1;
out:
  acp_router_free(r);
  free(prompt);
  return done;
}

static void test_router_lent_failmalloc(void **state) {
  (void)state;
  failmem_sweep(scenario_lent, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_router_v2_chain_is_byte_exact),
      cmocka_unit_test(test_router_version_mismatch_is_refused),
      cmocka_unit_test(test_router_new_rejects_bad_arguments),
      cmocka_unit_test(test_router_init_one_component_is_a_pass_through),
      cmocka_unit_test(test_router_init_two_components),
      cmocka_unit_test(test_router_init_three_components),
      cmocka_unit_test(test_router_init_order_is_sequential),
      cmocka_unit_test(test_router_init_proxy_mode),
      cmocka_unit_test(test_router_proxy_mode_parent_spellings),
      cmocka_unit_test(test_router_proxy_mode_empty_chain),
      cmocka_unit_test(test_router_reverse_requests_through_two_proxies),
      cmocka_unit_test(test_router_prompt_through_chain),
      cmocka_unit_test(test_router_ids_restored_exactly),
      cmocka_unit_test(test_router_byte_exact_payloads),
      cmocka_unit_test(test_router_meta_pass_through),
      cmocka_unit_test(test_router_cancel_client_to_agent),
      cmocka_unit_test(test_router_cancel_agent_to_client),
      cmocka_unit_test(test_router_g1_component_is_answered_in_g1),
      cmocka_unit_test(test_router_g0_component_is_answered_in_g0),
      cmocka_unit_test(test_router_option_underscore_emits_g1),
      cmocka_unit_test(test_router_option_spec_never_falls_back),
      cmocka_unit_test(test_router_auto_fallback_on_method_not_found),
      cmocka_unit_test(test_router_fallback_exhausted_passes_error_back),
      cmocka_unit_test(test_router_batch_same_destination),
      cmocka_unit_test(test_router_batch_split_by_destination),
      cmocka_unit_test(test_router_trace_names_the_answered_request),
      cmocka_unit_test(test_router_link_death_answers_pending),
      cmocka_unit_test(test_router_proxy_death_cancels_the_turn),
      cmocka_unit_test(test_router_held_prompt_ends),
      cmocka_unit_test(test_router_link_closed_defaults_and_bad_data),
      cmocka_unit_test(test_router_bypass_routes_around_dead_proxy),
      cmocka_unit_test(test_router_dead_provider_mcp_traffic_is_not_routed),
      cmocka_unit_test(test_router_mcp_connections_reuse_their_place),
      cmocka_unit_test(test_router_many_mcp_connections_stay_known),
      cmocka_unit_test(test_router_restart_reinitializes),
      cmocka_unit_test(test_router_restart_before_initialize),
      cmocka_unit_test(test_router_garbage_is_answered_or_dropped),
      cmocka_unit_test(test_router_pending_and_output_caps),
      cmocka_unit_test(test_router_trace_sees_every_hop),
      cmocka_unit_test(test_router_send_hands_out_once),
      cmocka_unit_test(test_router_many_requests_out_of_order),
      cmocka_unit_test(test_router_failmalloc),
      cmocka_unit_test(test_router_framed_lines_route_as_whole_lines),
      cmocka_unit_test(test_router_framed_null_framer_checks_line_feeds),
      cmocka_unit_test(test_router_lent_lines_route_as_copied),
      cmocka_unit_test(test_router_lent_lines_borrow_only_large_untraced),
      cmocka_unit_test(test_router_lent_failmalloc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
