/*
 * Long lines split across reads and lent prompt texts (docs/decisions.md,
 * "1 MiB turns: one pass fewer on each side"):
 *
 * - the line framer's line feed search over a long stretch records a run of
 *   plain bytes (acp_ndjson.plain_lo/hi), which the session's parse then
 *   skips: the run must really be plain, every line must end exactly where
 *   its line feed is, and a message split anywhere must give the verdict
 *   and the text that the same message read whole gives (the whole one
 *   takes the fast path, which never uses a run);
 * - acp_client_prompt_text_ref(): the text is referenced only where that is
 *   safe, the bytes sent are those of acp_client_prompt_text(), errors
 *   queue nothing, and a text freed from inside the response callback is
 *   not read afterwards.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/client.h"
#include "acp/json.h"
#include "acp/ndjson.h"
#include "acp/rpc.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* MARK: - Messages */

#define TEXT_LEN 24000

static const char HEAD[] = "{\"jsonrpc\":\"2.0\",\"method\":\"t\",\"params\":{"
                           "\"text\":\"";
static const char TAIL[] = "\"}}\n";

static int is_plain(unsigned char c) {
  return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* HEAD + text + TAIL, with `ins` (insn bytes) replacing the text's bytes at
 * q (insn = 0: plain text). Returns the length. */
static size_t make_msg(char *buf, size_t text_len, size_t q, const char *ins,
                       size_t insn) {
  size_t n = 0;
  size_t i;

  memcpy(buf, HEAD, sizeof(HEAD) - 1);
  n = sizeof(HEAD) - 1;
  for (i = 0; i < text_len; i++)
    buf[n + i] = (char)('a' + (i * 7) % 26);
  if (insn > 0)
    memcpy(buf + n + q, ins, insn);
  n += text_len;
  memcpy(buf + n, TAIL, sizeof(TAIL) - 1);
  return n + sizeof(TAIL) - 1;
}

/* MARK: - Framer */

typedef struct framed {
  char *lines[4];
  size_t lens[4];
  size_t lo[4];
  size_t hi[4];
  int n;
} framed;

/* Feed in[0..n) cut at cuts[], each chunk in a private copy freed after its
 * call; record each line, its run, and check the run is plain. */
static void frame(const char *in, size_t n, const size_t *cuts, size_t ncuts,
                  framed *out) {
  acp_ndjson f;
  size_t pos = 0;
  size_t i;

  memset(out, 0, sizeof(*out));
  acp_ndjson_init(&f, 0, NULL);
  for (i = 0; i <= ncuts; i++) {
    size_t end = i < ncuts ? cuts[i] : n;
    char *chunk;
    size_t at = 0;

    if (end <= pos)
      continue;
    chunk = malloc(end - pos);
    assert_non_null(chunk);
    memcpy(chunk, in + pos, end - pos);
    while (at < end - pos) {
      const char *line;
      size_t len;
      size_t used;
      int rv =
          acp_ndjson_next(&f, chunk + at, end - pos - at, &used, &line, &len);
      size_t k;

      at += used;
      if (rv == ACP_NDJSON_NEED_MORE)
        break;
      assert_int_equal(rv, ACP_NDJSON_LINE);
      assert_true(out->n < 4);
      assert_true(f.plain_lo <= f.plain_hi);
      assert_true(f.plain_hi <= len);
      for (k = f.plain_lo; k < f.plain_hi; k++)
        assert_true(is_plain((unsigned char)line[k]));
      out->lines[out->n] = malloc(len + 1);
      assert_non_null(out->lines[out->n]);
      memcpy(out->lines[out->n], line, len);
      out->lens[out->n] = len;
      out->lo[out->n] = f.plain_lo;
      out->hi[out->n] = f.plain_hi;
      out->n++;
    }
    free(chunk);
    pos = end;
  }
  acp_ndjson_dispose(&f);
}

static void framed_free(framed *x) {
  int i;

  for (i = 0; i < x->n; i++)
    free(x->lines[i]);
}

/* A long plain line: one line, and a run over most of its text, whole or
 * split at any of these offsets (two reads and three). */
static void test_framer_run_is_plain_and_found(void **state) {
  static char buf[TEXT_LEN + 256];
  size_t n = make_msg(buf, TEXT_LEN, 0, NULL, 0);
  size_t cuts[] = {1,       40,     70,     4096,   4160,  8192,  16384, 20000,
                   n - 200, n - 66, n - 65, n - 64, n - 5, n - 2, n - 1};
  framed x;
  size_t i;

  (void)state;
  frame(buf, n, NULL, 0, &x);
  assert_int_equal(x.n, 1);
  assert_int_equal(x.lens[0], n - 1);
  assert_memory_equal(x.lines[0], buf, n - 1);
  /* Found at all (the parse has something to skip): all of the text but
   * the first window and the last partial block. */
  assert_true(x.hi[0] - x.lo[0] >= TEXT_LEN - 2 * 4096);
  framed_free(&x);
  for (i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
    size_t two[2] = {cuts[i], cuts[(i + 7) % (sizeof(cuts) / sizeof(cuts[0]))]};

    frame(buf, n, &cuts[i], 1, &x);
    assert_int_equal(x.n, 1);
    assert_int_equal(x.lens[0], n - 1);
    assert_memory_equal(x.lines[0], buf, n - 1);
    framed_free(&x);
    if (two[1] > two[0]) {
      frame(buf, n, two, 2, &x);
      assert_int_equal(x.n, 1);
      assert_memory_equal(x.lines[0], buf, n - 1);
      framed_free(&x);
    }
  }
}

/* Cut every `step` bytes up to n (the first 64 cuts). */
static size_t every(size_t *cuts, size_t n, size_t step) {
  size_t k = 0, at;

  for (at = step; at < n && k < 64; at += step)
    cuts[k++] = at;
  return k;
}

/* A plain text read in many pieces is one run: each read goes on with the
 * run the earlier ones ended (after checking the part-block before the cut
 * byte by byte), so all of it but the first window and the last partial
 * block is skipped by the parse, not only the longest piece. A special
 * byte in that part-block, or at the cut, ends the run there. */
static void test_framer_run_joins_reads(void **state) {
  enum { BIG = 200000 };
  static char buf[BIG + 256];
  static const size_t steps[] = {64,    4099,  16384, 17000,
                                 20000, 65536, 65537, 100000};
  static const char *const spoil[] = {"\"", "\\", "\x01", "\xc3\xa9"};
  const size_t h = sizeof(HEAD) - 1;
  size_t cuts[64];
  size_t i, j, d;
  framed x;

  (void)state;
  for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
    size_t n = make_msg(buf, BIG, 0, NULL, 0);
    size_t k = every(cuts, n, steps[i]);

    frame(buf, n, cuts, k, &x);
    assert_int_equal(x.n, 1);
    assert_memory_equal(x.lines[0], buf, n - 1);
    /* (A run starts in a read of 16 KiB or more.) */
    if (steps[i] >= 16384)
      assert_true(x.hi[0] - x.lo[0] >= BIG - 2 * 4096 - 128);
    framed_free(&x);
    /* A special byte just before a cut (in the part-block the next read
     * checks byte by byte), at it, and just after it: the run stays plain
     * (frame() checks every byte of it) and the line is whole. */
    for (j = 0; j < sizeof(spoil) / sizeof(spoil[0]); j++)
      for (d = 0; d < 5 && k > 2; d++) {
        size_t q = cuts[k / 2] - h + d - 2;
        size_t m = make_msg(buf, BIG, q, spoil[j], strlen(spoil[j]));

        frame(buf, m, cuts, k, &x);
        assert_int_equal(x.n, 1);
        assert_memory_equal(x.lines[0], buf, m - 1);
        framed_free(&x);
      }
  }
}

/* A line feed anywhere in a long line ends it exactly there, in or beside
 * a window, inside what would otherwise be one plain run; so does any
 * other control byte not (it is a byte of the line). */
static void test_framer_line_feed_never_skipped(void **state) {
  static char buf[TEXT_LEN + 256];
  const size_t h = sizeof(HEAD) - 1;
  size_t qs[] = {0,     1,     63,    64,    4000,          4095,        4096,
                 4097,  4159,  4160,  8191,  8192,          12345,       16384,
                 20000, 20479, 20480, 22222, TEXT_LEN - 65, TEXT_LEN - 1};
  size_t i;

  (void)state;
  for (i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
    size_t n = make_msg(buf, TEXT_LEN, qs[i], "\n", 1);
    size_t cut = n / 2;
    framed x;

    frame(buf, n, NULL, 0, &x);
    assert_int_equal(x.n, 2);
    assert_int_equal(x.lens[0], h + qs[i]);
    assert_memory_equal(x.lines[0], buf, h + qs[i]);
    assert_int_equal(x.lens[1], n - 1 - (h + qs[i] + 1));
    framed_free(&x);
    frame(buf, n, &cut, 1, &x);
    assert_int_equal(x.n, 2);
    assert_int_equal(x.lens[0], h + qs[i]);
    framed_free(&x);
    /* A tab (a control byte) ends a run but not the line. */
    n = make_msg(buf, TEXT_LEN, qs[i], "\t", 1);
    frame(buf, n, &cut, 1, &x);
    assert_int_equal(x.n, 1);
    assert_int_equal(x.lens[0], n - 1);
    framed_free(&x);
  }
}

/* MARK: - Session: split lines give the whole line's verdict */

typedef struct verdict {
  int nnotif;
  int nperr;
  size_t text_len;
  char *text;
} verdict;

static int on_note(acp_rpc_session *s, const acp_rpc_msg *msg, void *ud) {
  verdict *v = ud;
  const acp_json_val *t = acp_json_obj_getz(msg->params, "text");
  const char *p;
  size_t n;

  (void)s;
  v->nnotif++;
  assert_int_equal(acp_json_doc_str(msg->doc, t, &p, &n), 0);
  free(v->text);
  v->text = malloc(n + 1);
  assert_non_null(v->text);
  memcpy(v->text, p, n);
  v->text_len = n;
  return 0;
}

static void on_perr(acp_rpc_session *s, int code, const char *msg, void *ud) {
  verdict *v = ud;

  (void)s;
  (void)code;
  (void)msg;
  v->nperr++;
}

static void feed(const char *in, size_t n, const size_t *cuts, size_t ncuts,
                 verdict *v) {
  acp_rpc_callbacks *cbs;
  acp_rpc_session *s;
  size_t pos = 0;
  size_t i;

  memset(v, 0, sizeof(*v));
  assert_int_equal(acp_rpc_callbacks_new(&cbs), 0);
  acp_rpc_callbacks_set_on_notification(cbs, on_note);
  acp_rpc_callbacks_set_on_protocol_error(cbs, on_perr);
  assert_int_equal(acp_rpc_session_new(&s, cbs, v, NULL, NULL), 0);
  acp_rpc_callbacks_free(cbs);
  for (i = 0; i <= ncuts; i++) {
    size_t end = i < ncuts ? cuts[i] : n;
    char *chunk;

    if (end <= pos)
      continue;
    /* Read where the session lends, as the runtime does, when it lends
     * enough; else from a private copy freed at once. */
    {
      size_t room = 0;
      char *rb = acp_rpc_session_read_buf(s, &room);

      if (rb != NULL && room >= end - pos) {
        memcpy(rb, in + pos, end - pos);
        assert_int_equal(acp_rpc_session_recv(s, rb, end - pos, 0),
                         (acp_ssize)(end - pos));
      } else {
        chunk = malloc(end - pos);
        assert_non_null(chunk);
        memcpy(chunk, in + pos, end - pos);
        assert_int_equal(acp_rpc_session_recv(s, chunk, end - pos, 0),
                         (acp_ssize)(end - pos));
        free(chunk);
      }
    }
    pos = end;
  }
  acp_rpc_session_free(s);
}

static void same_verdict(const verdict *a, const verdict *b) {
  assert_int_equal(a->nnotif, b->nnotif);
  assert_int_equal(a->nperr, b->nperr);
  if (a->nnotif > 0) {
    assert_int_equal(a->text_len, b->text_len);
    assert_memory_equal(a->text, b->text, a->text_len);
  }
}

typedef struct variant {
  const char *ins;
  size_t insn;
  int valid;
} variant;

static const variant VARIANTS[] = {
    {NULL, 0, 1},           /* plain */
    {"\x01", 1, 0},         /* a control byte */
    {"\"", 1, 0},           /* the string ends early: junk follows */
    {"\xff", 1, 0},         /* not UTF-8 */
    {"\xc3\xa9", 2, 1},     /* é */
    {"\xe4\xb8\xad", 3, 1}, /* 中 */
    {"\xed\xa0\x80", 3, 0}, /* a UTF-8 surrogate */
    {"\\n", 2, 1},          /* an escape */
    {"\\u12", 4, 0},        /* a short \u escape */
};

static void check_variant(const variant *va, size_t q, const size_t *cuts,
                          size_t ncuts, size_t stride) {
  static char buf[TEXT_LEN + 256];
  size_t n = make_msg(buf, TEXT_LEN, q, va->ins, va->insn);
  verdict whole;
  verdict split;
  size_t i;

  feed(buf, n, NULL, 0, &whole);
  assert_int_equal(whole.nnotif, va->valid ? 1 : 0);
  assert_int_equal(whole.nperr, va->valid ? 0 : 1);
  for (i = 0; i < ncuts; i++) {
    feed(buf, n, &cuts[i], 1, &split);
    same_verdict(&whole, &split);
    free(split.text);
  }
  /* Every offset (every stride-th under valgrind). */
  for (i = 1; stride > 0 && i < n; i += stride) {
    feed(buf, n, &i, 1, &split);
    same_verdict(&whole, &split);
    free(split.text);
  }
  free(whole.text);
}

static void test_session_split_lines_keep_their_verdict(void **state) {
  static const size_t qs[] = {0,
                              1,
                              60,
                              63,
                              64,
                              100,
                              4000,
                              4095,
                              4096,
                              4097,
                              4159,
                              8191,
                              8192,
                              20000,
                              22222,
                              TEXT_LEN - 65,
                              TEXT_LEN - 64,
                              TEXT_LEN - 4};
  const size_t h = sizeof(HEAD) - 1;
  size_t cuts[24];
  size_t nc = 0;
  size_t vi;
  size_t qi;
  /* Every offset natively; every few under the sanitizers and valgrind,
   * which are 50-100 times slower (the cut sets above stay whole). */
  size_t stride = getenv("ACP_VALGRIND") ? 61 : SANITIZED ? 3 : 1;

  (void)state;
  for (vi = 0; vi < sizeof(VARIANTS) / sizeof(VARIANTS[0]); vi++) {
    for (qi = 0; qi < sizeof(qs) / sizeof(qs[0]); qi++) {
      size_t q = qs[qi];

      /* Cuts right at, before and after the inserted bytes (a UTF-8
       * sequence or an escape cut between reads), at the windows and near
       * the end. */
      nc = 0;
      cuts[nc++] = h + q;
      cuts[nc++] = h + q + 1;
      cuts[nc++] = h + q + 2;
      cuts[nc++] = h + q > 0 ? h + q - 1 : 1;
      cuts[nc++] = 4096;
      cuts[nc++] = 20000;
      cuts[nc++] = h + TEXT_LEN - 1;
      cuts[nc++] = h + TEXT_LEN + 2;
      check_variant(&VARIANTS[vi], q, cuts, nc, 0);
    }
  }
  /* Split at every offset: plain, and one of each kind of bad byte deep in
   * what would be a plain run. */
  check_variant(&VARIANTS[0], 0, NULL, 0, stride);
  check_variant(&VARIANTS[1], 20000, NULL, 0, stride * 5);
  check_variant(&VARIANTS[3], 18001, NULL, 0, stride * 5);
  check_variant(&VARIANTS[4], 12345, NULL, 0, stride * 5);
}

#if defined(__SSE2__) && defined(__x86_64__) && defined(__GNUC__) &&           \
    !defined(ACP_NO_AVX2)
extern int acp__json_no_avx2;
extern int acp__json_no_avx512;
#define HAVE_AVX2_SWITCH 1
#endif

#ifdef HAVE_AVX2_SWITCH
/* The framer and split-line checks again with *off set (a path of the
 * wide steps switched off). */
static void split_lines_with(void **state, int *off) {
  size_t cut = 20000;

  *off = 1;
  test_framer_run_is_plain_and_found(state);
  test_framer_line_feed_never_skipped(state);
  check_variant(&VARIANTS[0], 0, &cut, 1, 0);
  check_variant(&VARIANTS[1], 20000, NULL, 0, 97);
  check_variant(&VARIANTS[3], 8191, NULL, 0, 97);
  check_variant(&VARIANTS[4], 12345, NULL, 0, 97);
  *off = 0;
}
#endif

/* The same without the AVX2 steps (SSE2 blocks only, as on CPUs without
 * it): the framer's runs and the parse's jump take the other path. */
static void test_split_lines_without_avx2(void **state) {
#ifdef HAVE_AVX2_SWITCH
  split_lines_with(state, &acp__json_no_avx2);
#else
  (void)state;
  skip();
#endif
}

/* And with AVX2 but not AVX-512 (the path of CPUs without it; on those,
 * the same as the default run). */
static void test_split_lines_avx2_only(void **state) {
#ifdef HAVE_AVX2_SWITCH
  split_lines_with(state, &acp__json_no_avx512);
#else
  (void)state;
  skip();
#endif
}

/* MARK: - Lent prompt texts */

typedef struct cctx {
  int nresp;
  char *text; /* the lent text, spoiled by the callback */
  size_t len;
} cctx;

static int on_resp(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  cctx *x = ud;

  (void)c;
  (void)msg;
  x->nresp++;
  /* The text is the caller's again: spoil it, as reuse or free would. */
  if (x->text != NULL)
    memset(x->text, 'X', x->len);
  return 0;
}

static acp_client *client(cctx *x, int borrow) {
  acp_client_callbacks *cbs;
  acp_client *c = NULL;

  assert_int_equal(acp_client_callbacks_new(&cbs), 0);
  assert_int_equal(acp_client_new(&c, cbs, x, NULL, NULL), 0);
  acp_client_callbacks_free(cbs);
  acp_rpc_session_set_borrow_output(acp_client_session(c), borrow);
  return c;
}

/* The output as pieces, joined into a fresh buffer; *lent: whether a piece
 * is the text itself. */
static char *take(acp_client *c, const char *text, size_t *len, int *lent) {
  const acp_rpc_iov *iov;
  size_t niov;
  acp_ssize n = acp_rpc_session_send_iov(acp_client_session(c), &iov, &niov);
  char *d;
  size_t at = 0;
  size_t i;

  assert_true(n >= 0);
  d = malloc((size_t)n + 1);
  assert_non_null(d);
  *lent = 0;
  for (i = 0; i < niov; i++) {
    if (text != NULL && iov[i].data == text)
      *lent = 1;
    memcpy(d + at, iov[i].data, iov[i].len);
    at += iov[i].len;
  }
  assert_int_equal(at, (size_t)n);
  d[at] = '\0';
  *len = at;
  return d;
}

/* What acp_client_prompt_text() sends for the same text. */
static char *expected(const char *text, size_t len, size_t *out_len) {
  cctx x = {0};
  acp_client *c = client(&x, 0);
  int lent;
  char *d;

  assert_int_equal(
      acp_client_prompt_text(c, "s1", text, len, on_resp, &x, NULL), 0);
  d = take(c, NULL, out_len, &lent);
  acp_client_free(c);
  return d;
}

static void check_ref(const char *text, size_t len, int borrow, int want_lent) {
  cctx x = {0};
  acp_client *c = client(&x, borrow);
  size_t elen;
  char *e = expected(text, len, &elen);
  size_t glen;
  int lent;
  char *g;

  assert_int_equal(
      acp_client_prompt_text_ref(c, "s1", text, len, on_resp, &x, NULL), 0);
  g = take(c, text, &glen, &lent);
  assert_int_equal(glen, elen);
  assert_memory_equal(g, e, elen);
  assert_int_equal(lent, want_lent);
  free(g);
  free(e);
  acp_client_free(c);
}

static void
test_client_prompt_text_ref_lends_only_plain_large_text(void **state) {
  size_t n = 70000;
  char *t = malloc(n);
  size_t i;

  (void)state;
  assert_non_null(t);
  for (i = 0; i < n; i++)
    t[i] = (char)('a' + i % 26);
  check_ref(t, n, 1, 1);    /* plain, large, borrowing: lent */
  check_ref(t, n, 0, 0);    /* no borrowing: copied */
  check_ref(t, 4095, 1, 0); /* under 4 KiB: copied */
  check_ref(t, 4096, 1, 1); /* 4 KiB: lent */
  memcpy(t + 5000, "\xc3\xa9\xe4\xb8\xad", 5);
  check_ref(t, n, 1, 1);    /* UTF-8 needs no escaping: lent */
  for (i = 0; i < 3; i++) { /* escapes at the start, middle, end */
    size_t at = i == 0 ? 0 : i == 1 ? n / 2 : n - 1;
    char keep = t[at];

    t[at] = i == 1 ? '"' : '\n';
    check_ref(t, n, 1, 0); /* escaped: copied, same bytes */
    t[at] = keep;
  }
  check_ref("", 0, 1, 0);
  free(t);
}

static void test_client_prompt_text_ref_errors_queue_nothing(void **state) {
  cctx x = {0};
  acp_client *c = client(&x, 1);
  acp_rpc_session *s = acp_client_session(c);
  size_t n = 8192;
  char *t = malloc(n);
  int64_t id = -1;

  (void)state;
  assert_non_null(t);
  memset(t, 'a', n);
  assert_int_equal(acp_client_prompt_text_ref(c, "s1", t, n, NULL, &x, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(
      acp_client_prompt_text_ref(NULL, "s1", t, n, on_resp, &x, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_client_prompt_text_ref(c, NULL, t, n, on_resp, &x, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(
      acp_client_prompt_text_ref(c, "s1", NULL, 3, on_resp, &x, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  t[7000] = (char)0xff; /* not UTF-8, after a long plain run */
  assert_int_equal(acp_client_prompt_text_ref(c, "s1", t, n, on_resp, &x, &id),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_rpc_session_want_write(s), 0);
  assert_int_equal(x.nresp, 0);
  free(t);
  acp_client_free(c);
}

/* The answer comes before the runtime took the output (a peer answering an
 * id it guessed, in the read that also carried the previous answer): the
 * callback may spoil the text, and what goes out is still the text. The
 * same for a local completion (the input's end). */
static void test_client_prompt_text_ref_copied_before_callback(void **state) {
  size_t n = 20000;
  int round;

  (void)state;
  for (round = 0; round < 2; round++) {
    cctx x = {0};
    acp_client *c = client(&x, 1);
    acp_rpc_session *s = acp_client_session(c);
    char *t = malloc(n);
    char *keep = malloc(n);
    size_t elen;
    char *e;
    size_t glen;
    int lent;
    char *g;
    int64_t id = -1;
    char ans[128];
    int k;

    assert_non_null(t);
    assert_non_null(keep);
    memset(t, 'q', n);
    memcpy(keep, t, n);
    x.text = t;
    x.len = n;
    e = expected(keep, n, &elen);
    assert_int_equal(
        acp_client_prompt_text_ref(c, "s1", t, n, on_resp, &x, &id), 0);
    if (round == 0) {
      k = snprintf(ans, sizeof(ans),
                   "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":"
                   "{\"stopReason\":\"end_turn\"}}\n",
                   (long long)id);
      assert_int_equal(acp_rpc_session_recv(s, ans, (size_t)k, 0), k);
    } else {
      assert_int_equal(acp_rpc_session_recv_eof(s, 0), 0);
    }
    assert_int_equal(x.nresp, 1);
    assert_int_equal(t[0], 'X'); /* spoiled by the callback */
    g = take(c, t, &glen, &lent);
    assert_int_equal(lent, 0);
    assert_int_equal(glen, elen);
    assert_memory_equal(g, e, elen);
    free(g);
    free(e);
    free(keep);
    free(t);
    acp_client_free(c);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_framer_run_is_plain_and_found),
      cmocka_unit_test(test_framer_run_joins_reads),
      cmocka_unit_test(test_framer_line_feed_never_skipped),
      cmocka_unit_test(test_session_split_lines_keep_their_verdict),
      cmocka_unit_test(test_split_lines_without_avx2),
      cmocka_unit_test(test_split_lines_avx2_only),
      cmocka_unit_test(test_client_prompt_text_ref_lends_only_plain_large_text),
      cmocka_unit_test(test_client_prompt_text_ref_errors_queue_nothing),
      cmocka_unit_test(test_client_prompt_text_ref_copied_before_callback),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
