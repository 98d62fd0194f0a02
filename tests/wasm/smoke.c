/*
 * Smoke test of the core built for wasm32-wasi (tools/check-wasm.sh): the
 * JSON reader and writer and a JSON-RPC session round trip, with no OS
 * underneath but WASI's stdout.
 */
#include <stdio.h>
#include <string.h>

#include "acp/json.h"
#include "acp/rpc.h"

static int passed;
static int failed;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (cond) {                                                                \
      passed++;                                                                \
    } else {                                                                   \
      failed++;                                                                \
      printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                   \
    }                                                                          \
  } while (0)

static int on_request(acp_rpc_session *s, const acp_rpc_msg *msg, void *ud) {
  size_t len;
  const char *raw = acp_json_raw(msg->params, &len);

  (void)ud;
  return acp_rpc_session_respond(s, msg->handle, raw, len);
}

static void test_json(void) {
  static const char text[] =
      "{\"a\":[1,12345678901234567890,1.000000000000000000001],"
      "\"s\":\"caf\\u00e9\"}";
  acp_json_doc *doc = NULL;
  acp_json_writer *w = NULL;
  const acp_json_val *root;
  const acp_json_val *arr;
  const char *s;
  size_t len;
  int64_t i;

  CHECK(acp_json_doc_new(&doc, NULL) == 0);
  CHECK(acp_json_doc_parse(doc, text, sizeof(text) - 1, NULL) == 0);
  root = acp_json_doc_root(doc);
  arr = acp_json_obj_getz(root, "a");
  CHECK(acp_json_len(arr) == 3);
  CHECK(acp_json_get_int64(acp_json_arr_get(arr, 0), &i) == 0 && i == 1);
  CHECK(acp_json_get_int64(acp_json_arr_get(arr, 1), &i) == ACP_ERR_RANGE);
  s = acp_json_raw(acp_json_arr_get(arr, 2), &len);
  CHECK(len == 23 && memcmp(s, "1.000000000000000000001", len) == 0);
  CHECK(acp_json_doc_str(doc, acp_json_obj_getz(root, "s"), &s, &len) == 0);
  CHECK(len == 5 && memcmp(s, "caf\xc3\xa9", 5) == 0);
  CHECK(acp_json_doc_parse(doc, "[1,]", 4, NULL) == ACP_ERR_PARSE);

  CHECK(acp_json_writer_new(&w, 0, NULL) == 0);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "k");
  acp_json_write_strz(w, "a\"b");
  acp_json_write_obj_end(w);
  s = acp_json_writer_data(w, &len);
  CHECK(acp_json_writer_error(w) == 0);
  CHECK(len == 12 && memcmp(s, "{\"k\":\"a\\\"b\"}", len) == 0);
  acp_json_writer_free(w);
  acp_json_doc_free(doc);
}

static void test_rpc(void) {
  static const char in[] =
      "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"echo\",\"params\":[1]}\n"
      "not json\n";
  static const char want[] = "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":[1]}\n";
  acp_rpc_callbacks *cbs = NULL;
  acp_rpc_session *s = NULL;
  const char *out;
  acp_ssize n;

  CHECK(acp_rpc_callbacks_new(&cbs) == 0);
  acp_rpc_callbacks_set_on_request(cbs, on_request);
  CHECK(acp_rpc_session_new(&s, cbs, NULL, NULL, NULL) == 0);
  CHECK(acp_rpc_session_recv(s, in, sizeof(in) - 1, 0) ==
        (acp_ssize)(sizeof(in) - 1));
  n = acp_rpc_session_send(s, &out);
  CHECK(n > (acp_ssize)(sizeof(want) - 1));
  CHECK(n > 0 && memcmp(out, want, sizeof(want) - 1) == 0);
  CHECK(n > 0 && strstr(out + sizeof(want) - 1, "-32700") != NULL);
  acp_rpc_session_free(s);
  acp_rpc_callbacks_free(cbs);
}

/* Lines of one shape: from the third on, the session's document matches
 * them against a kept line (json_read.c, "Shapes") on this target's
 * string steps (no SSE2); the answers echo every params as it came. */
static void test_rpc_kept_lines(void) {
  static const char *const params[] = {"[\"a\",1]",
                                       "[\"bb\",22]",
                                       "[\"ccc\",-3]",
                                       "[\"a longer text, 24 b\",4.5]",
                                       "[\"\",0]",
                                       "[\"esc \\\" \\u00e9\",6e2]",
                                       "[\"caf\xc3\xa9\",7]",
                                       "[\"x\",8]"};
  char in[1024];
  char want[1024];
  size_t n = 0;
  size_t m = 0;
  acp_rpc_callbacks *cbs = NULL;
  acp_rpc_session *s = NULL;
  const char *out;
  acp_ssize got;

  for (int i = 0; i < 8; i++) {
    n += (size_t)snprintf(
        in + n, sizeof(in) - n,
        "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"echo\",\"params\":%s}\n",
        i + 1, params[i]);
    m += (size_t)snprintf(want + m, sizeof(want) - m,
                          "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":%s}\n",
                          i + 1, params[i]);
  }
  CHECK(acp_rpc_callbacks_new(&cbs) == 0);
  acp_rpc_callbacks_set_on_request(cbs, on_request);
  CHECK(acp_rpc_session_new(&s, cbs, NULL, NULL, NULL) == 0);
  /* A line at a time, as they would come from a peer. */
  for (size_t at = 0; at < n;) {
    const char *nl = memchr(in + at, '\n', n - at);
    size_t len = (size_t)(nl - (in + at)) + 1;
    CHECK(acp_rpc_session_recv(s, in + at, len, 0) == (acp_ssize)len);
    at += len;
  }
  got = acp_rpc_session_send(s, &out);
  CHECK(got == (acp_ssize)m && memcmp(out, want, m) == 0);
  acp_rpc_session_free(s);
  acp_rpc_callbacks_free(cbs);
}

int main(void) {
  test_json();
  test_rpc();
  test_rpc_kept_lines();
  printf("wasm32 smoke: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
