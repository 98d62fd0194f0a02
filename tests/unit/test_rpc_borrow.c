/*
 * Borrowed output (acp_rpc_session_set_borrow_output()): an echo agent's
 * output taken as pieces that point into its input must be byte for byte
 * the output of the same agent that copies, for texts with and without
 * escapes, a text that must be decoded (never borrowed), small texts
 * (copied), whatever the reads look like (split at every offset, several
 * lines and a partial one in one read), and for lines at and over the cap.
 * The input is fed as acp_uv_rpc feeds it: into the session's own read
 * buffer when it lends one (the next read overwrites it), else from a
 * buffer of ours poisoned once the output has been taken, so a piece
 * taken too late shows up.
 */
#define _GNU_SOURCE /* memmem */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/agent.h"
#include "acp/json.h"
#include "acp/rpc.h"

typedef struct out_buf {
  char *p;
  size_t len;
  size_t cap;
} out_buf;

static void out_add(out_buf *o, const char *p, size_t n) {
  if (n == 0)
    return;
  if (o->len + n > o->cap) {
    o->cap = (o->len + n) * 2 + 64;
    o->p = realloc(o->p, o->cap);
    assert_non_null(o->p);
  }
  memcpy(o->p + o->len, p, n);
  o->len += n;
}

static int on_new(acp_agent *a, acp_agent_request *req, void *ud) {
  (void)ud;
  return acp_agent_respond_session_new(a, req, "s1", NULL, 0);
}

/* The echo agent of `acp agent --echo`: one text block forwarded as it
 * came (acp_agent_send_message_chunk_val()), then end_turn. */
static int on_prompt(acp_agent *a, acp_agent_request *req, void *ud) {
  const acp_json_val *prompt =
      acp_json_obj_getz(acp_agent_request_params(req), "prompt");
  const acp_json_val *b = acp_json_child(prompt);
  const acp_json_val *tv = acp_json_obj_getz(b, "text");
  const acp_rpc_msg *msg = acp_agent_request_msg(req);
  int rv;

  (void)ud;
  rv = acp_agent_send_message_chunk_val(a, "s1", msg->doc, tv, NULL, 0);
  if (rv != 0)
    fail_msg("send_message_chunk_val: %d, text type %d: %.*s", rv,
             (int)acp_json_type_of(tv),
             (int)(msg->raw_len > 300 ? 300 : msg->raw_len), msg->raw);
  return acp_agent_respond_prompt(a, req, "end_turn", NULL, 0);
}

enum take { TAKE_COPY, TAKE_IOV, TAKE_FLAT };

typedef struct run_result {
  out_buf out;
  size_t max_pieces; /* most pieces one send_iov gave */
} run_result;

/*
 * Feed `in` to a fresh echo agent `split` bytes at a time (whole input if
 * 0), the session borrowing unless TAKE_COPY; take its output after each
 * read: TAKE_COPY and TAKE_FLAT with acp_rpc_session_send(), TAKE_IOV with
 * acp_rpc_session_send_iov().
 */
static void run(const char *in, size_t len, size_t split, size_t max_line,
                enum take take, run_result *res) {
  acp_agent_callbacks *cbs;
  acp_rpc_options *opts;
  acp_agent *a = NULL;
  acp_rpc_session *s;
  char *scratch = malloc(len + 1);
  size_t off = 0;

  assert_non_null(scratch);
  memset(res, 0, sizeof(*res));
  assert_int_equal(acp_agent_callbacks_new(&cbs), 0);
  acp_agent_callbacks_set_on_session_new(cbs, on_new);
  acp_agent_callbacks_set_on_session_prompt(cbs, on_prompt);
  assert_int_equal(acp_rpc_options_new(&opts), 0);
  if (max_line)
    acp_rpc_options_set_max_line(opts, max_line);
  assert_int_equal(acp_agent_new(&a, cbs, NULL, opts, NULL), 0);
  acp_rpc_options_free(opts);
  acp_agent_callbacks_free(cbs);
  s = acp_agent_session(a);
  if (take != TAKE_COPY)
    acp_rpc_session_set_borrow_output(s, 1);
  while (off < len) {
    size_t n = split == 0 || split > len - off ? len - off : split;
    size_t room = 0;
    char *p = acp_rpc_session_read_buf(s, &room);
    acp_ssize used;

    if (p == NULL || room < n)
      p = scratch;
    memcpy(p, in + off, n);
    used = acp_rpc_session_recv(s, p, n, 0);
    assert_int_equal(used, (acp_ssize)n);
    off += n;
    if (take == TAKE_IOV) {
      const acp_rpc_iov *iov;
      size_t niov = 0;
      size_t i;
      size_t total = 0;
      acp_ssize got = acp_rpc_session_send_iov(s, &iov, &niov);

      assert_true(got >= 0);
      for (i = 0; i < niov; i++) {
        out_add(&res->out, iov[i].data, iov[i].len);
        total += iov[i].len;
      }
      assert_int_equal(total, (size_t)got);
      if (niov > res->max_pieces)
        res->max_pieces = niov;
    } else {
      const char *d;
      acp_ssize got = acp_rpc_session_send(s, &d);

      assert_true(got >= 0);
      out_add(&res->out, d, (size_t)got);
    }
    /* Bytes of the caller's own buffer are the caller's again: anything
     * still pointing at them would now see X. (A lent buffer is the
     * session's: the next read overwrites what it handed out.) */
    if (p == scratch)
      memset(p, 'X', n);
  }
  assert_int_equal(acp_rpc_session_recv_eof(s, 0), 0);
  {
    const char *d;
    acp_ssize got = acp_rpc_session_send(s, &d);
    assert_true(got >= 0);
    out_add(&res->out, d, (size_t)got);
  }
  acp_agent_free(a);
  free(scratch);
}

/* The input: initialize, session/new, then one prompt line per text. */
static char *make_input(const char *const *texts, size_t ntexts, size_t *len) {
  out_buf o = {0};
  size_t i;
  char head[128];
  static const char init[] =
      "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
      "\"protocolVersion\":1}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\",\"params\":{"
      "\"cwd\":\"/tmp\",\"mcpServers\":[]}}\n";

  out_add(&o, init, sizeof(init) - 1);
  for (i = 0; i < ntexts; i++) {
    int k = snprintf(head, sizeof(head),
                     "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":"
                     "\"session/prompt\",\"params\":{\"sessionId\":\"s1\","
                     "\"prompt\":[{\"type\":\"text\",\"text\":\"",
                     i + 2);
    out_add(&o, head, (size_t)k);
    out_add(&o, texts[i], strlen(texts[i]));
    out_add(&o, "\"}]}}\n", 6);
  }
  *len = o.len;
  return o.p;
}

/* n bytes of letters, with `esc` (JSON escapes, or NULL) in the middle. */
static char *make_text(size_t n, const char *esc) {
  size_t e = esc ? strlen(esc) : 0;
  char *t = malloc(n + e + 1);
  size_t i;

  assert_non_null(t);
  for (i = 0; i < n; i++)
    t[i] = (char)('a' + i % 26);
  if (esc) {
    memmove(t + n / 2 + e, t + n / 2, n - n / 2);
    memcpy(t + n / 2, esc, e);
  }
  t[n + e] = '\0';
  return t;
}

static void expect_same(const char *in, size_t len, size_t split,
                        size_t max_line, size_t *max_pieces) {
  run_result copy, iov, flat;

  run(in, len, split, max_line, TAKE_COPY, &copy);
  run(in, len, split, max_line, TAKE_IOV, &iov);
  run(in, len, split, max_line, TAKE_FLAT, &flat);
  if (copy.out.len != iov.out.len ||
      memcmp(copy.out.p, iov.out.p, copy.out.len) != 0 ||
      copy.out.len != flat.out.len ||
      memcmp(copy.out.p, flat.out.p, copy.out.len) != 0)
    fail_msg("borrowed output differs (split %zu, cap %zu): %zu/%zu/%zu bytes",
             split, max_line, copy.out.len, iov.out.len, flat.out.len);
  if (max_pieces && iov.max_pieces > *max_pieces)
    *max_pieces = iov.max_pieces;
  free(copy.out.p);
  free(iov.out.p);
  free(flat.out.p);
}

static int under_valgrind(void) {
  return getenv("ACP_VALGRIND") != NULL;
}

/* Every split of a stream of four prompts: plain, with escapes (spliced
 * raw), with a lone surrogate escape (decoded, never borrowed) and a small
 * one (copied). */
static void test_borrow_matches_copy_at_every_split(void **state) {
  char *t[4];
  const char *const *tp = (const char *const *)t;
  size_t len, split, step = under_valgrind() ? 97 : 1;
  size_t pieces = 0;
  char *in;

  (void)state;
  t[0] = make_text(5000, NULL);
  t[1] = make_text(6000, "\\n\\u00e9\\\"\\\\\\t");
  t[2] = make_text(4500, "\\ud800");
  t[3] = make_text(100, "\\n");
  in = make_input(tp, 4, &len);
  for (split = 1; split <= len; split += step)
    expect_same(in, len, split, 0, &pieces);
  expect_same(in, len, 0, 0, &pieces);
  /* The first two texts went out as pieces of the input somewhere. */
  assert_true(pieces >= 3);
  free(in);
  for (split = 0; split < 4; split++)
    free(t[split]);
}

/* Each prompt alone, whole and cut in two at every offset of its line. */
static void test_borrow_each_text_whole(void **state) {
  static const char *esc[] = {NULL, "\\n\\u00e9\\\"", "\\ud800", "\\u0041"};
  size_t i;

  (void)state;
  for (i = 0; i < sizeof(esc) / sizeof(esc[0]); i++) {
    char *t = make_text(70000, esc[i]);
    const char *const tp[1] = {t};
    size_t len, pieces = 0;
    char *in = make_input(tp, 1, &len);

    expect_same(in, len, 0, 0, &pieces);
    expect_same(in, len, 65536, 0, &pieces);
    expect_same(in, len, len - 1, 0, &pieces);
    assert_int_equal(pieces >= 3, i != 2);
    free(in);
    free(t);
  }
}

/* A prompt line exactly at the cap is answered (its text borrowed); one
 * byte over, it is refused as over-long, the same with and without. */
static void test_borrow_line_at_and_over_cap(void **state) {
  char *t = make_text(8192, NULL);
  const char *const tp[1] = {t};
  size_t len, last, pieces = 0;
  char *in = make_input(tp, 1, &len);
  run_result r;

  (void)state;
  /* the prompt line, without its newline */
  for (last = len - 1; last > 0 && in[last - 1] != '\n'; last--)
    ;
  expect_same(in, len, 0, len - 1 - last, &pieces);
  expect_same(in, len, 4096, len - 1 - last, &pieces);
  assert_true(pieces >= 3);
  run(in, len, 0, len - 1 - last, TAKE_IOV, &r);
  assert_non_null(
      memmem(r.out.p, r.out.len, "\"stopReason\":\"end_turn\"", 23));
  free(r.out.p);
  pieces = 0;
  expect_same(in, len, 0, len - 2 - last, &pieces);
  expect_same(in, len, 4096, len - 2 - last, &pieces);
  assert_int_equal(pieces, 1);
  run(in, len, 0, len - 2 - last, TAKE_IOV, &r);
  assert_null(memmem(r.out.p, r.out.len, "end_turn", 8));
  free(r.out.p);
  free(in);
  free(t);
}

/* Turning borrowing off copies what is still borrowed: taken afterwards
 * in one buffer, after the input is gone, it is still the text. */
static void test_borrow_off_copies(void **state) {
  char *t = make_text(10000, NULL);
  const char *const tp[1] = {t};
  size_t len;
  char *in = make_input(tp, 1, &len);
  acp_agent_callbacks *cbs;
  acp_agent *a = NULL;
  acp_rpc_session *s;
  const char *d;
  acp_ssize n;
  const acp_rpc_iov *iov;
  size_t niov;

  (void)state;
  assert_int_equal(acp_agent_callbacks_new(&cbs), 0);
  acp_agent_callbacks_set_on_session_new(cbs, on_new);
  acp_agent_callbacks_set_on_session_prompt(cbs, on_prompt);
  assert_int_equal(acp_agent_new(&a, cbs, NULL, NULL, NULL), 0);
  acp_agent_callbacks_free(cbs);
  s = acp_agent_session(a);
  acp_rpc_session_set_borrow_output(s, 1);
  assert_int_equal(acp_rpc_session_recv(s, in, len, 0), (acp_ssize)len);
  acp_rpc_session_set_borrow_output(s, 0);
  memset(in, 'X', len);
  n = acp_rpc_session_send(s, &d);
  assert_true(n > 10000);
  assert_non_null(memmem(d, (size_t)n, t, 10000));
  /* nothing borrowed without it: one piece */
  assert_int_equal(acp_rpc_session_send_iov(s, &iov, &niov), 0);
  assert_int_equal(acp_rpc_session_send_iov(NULL, &iov, &niov),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_rpc_session_send_iov(s, NULL, &niov),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_rpc_session_set_borrow_output(NULL, 1);
  acp_agent_free(a);
  free(in);
  free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_borrow_matches_copy_at_every_split),
      cmocka_unit_test(test_borrow_each_text_whole),
      cmocka_unit_test(test_borrow_line_at_and_over_cap),
      cmocka_unit_test(test_borrow_off_copies),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
