/*
 * The SSE parser (src/http/sse.c, in libacp-http): framing, fields, split
 * feeds, caps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "http/sse.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rec {
  char out[1024];
  size_t n;
  int count;
  const acp__sse *p; /* set by check(): one_line is checked there */
  int one_lines, joined;
} rec;

static int on_ev(void *ud, const char *type, size_t tl, const char *data,
                 size_t dl, const char *id, size_t il) {
  rec *r = ud;
  if (r->p) {
    /* One data field means no LF inside; the reader skips its search. */
    bool one = acp__sse_one_line(r->p);
    assert_int_equal(one, memchr(data, '\n', dl) == NULL);
    if (one)
      r->one_lines++;
    else
      r->joined++;
  }
  int k = snprintf(r->out + r->n, sizeof(r->out) - r->n, "[%.*s|%.*s|%.*s]",
                   (int)tl, type, (int)dl, data, (int)il, id);
  r->n += (size_t)k;
  r->count++;
  return 0;
}

static void feed_all(const char *in, size_t step, rec *r, acp__sse *p) {
  size_t i, n = strlen(in);
  for (i = 0; i < n; i += step)
    assert_int_equal(
        acp__sse_feed(p, in + i, (n - i < step ? n - i : step), on_ev, r), 0);
}

static int checked_one, checked_joined;

static void check(const char *in, const char *want) {
  size_t steps[] = {1, 2, 3, 7, 4096}, i;
  for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
    acp__sse p;
    rec r;
    memset(&r, 0, sizeof(r));
    acp__sse_init(&p, acp_mem_default(), 0);
    r.p = &p;
    feed_all(in, steps[i], &r, &p);
    assert_string_equal(r.out, want);
    checked_one += r.one_lines;
    checked_joined += r.joined;
    acp__sse_dispose(&p);
  }
}

static void test_basic(void **state) {
  (void)state;
  check("data: hello\n\n", "[message|hello|]");
  check("event: endpoint\ndata: /m?x=1\n\n", "[endpoint|/m?x=1|]");
  check("id: 3-0\nretry: 500\ndata: \n\n", "[message||3-0]");
  check("data: a\ndata: b\n\n", "[message|a\nb|]");
  check(": comment\ndata:x\r\n\r\n", "[message|x|]");
  check("data: one\r\rdata: two\n\n", "[message|one|][message|two|]");
  check("id: 1\n\ndata: x\n\n", "[message|x|1]"); /* id persists */
  check("\xEF\xBB\xBF"
        "data: bom\n\n",
        "[message|bom|]");
  check("data: no end", ""); /* not dispatched without a blank */
  check("event: e\n\ndata: y\n\n", "[message|y|]"); /* type resets */
  check("data\n\n", "[message||]");
  check("id: a\0b\n", "");
  /* Several data fields, empty ones and CR-ended ones too, are joined:
   * not one line (on_ev checks each event against its LFs). */
  check("data:\ndata:\n\n", "[message|\n|]");
  check("data: a\rdata: b\r\ndata: c\n\ndata: d\n\n",
        "[message|a\nb\nc|][message|d|]");
  assert_true(checked_one > 20);
  assert_true(checked_joined > 10);
}

static void test_retry(void **state) {
  acp__sse p;
  rec r;
  (void)state;
  memset(&r, 0, sizeof(r));
  acp__sse_init(&p, acp_mem_default(), 0);
  assert_int_equal(acp__sse_retry(&p), -1);
  feed_all("retry: 1500\nretry: x1\nretry:\n", 3, &r, &p);
  assert_int_equal(acp__sse_retry(&p), 1500);
  acp__sse_dispose(&p);
}

static int stop_cb(void *ud, const char *t, size_t tl, const char *d, size_t dl,
                   const char *i, size_t il) {
  (void)ud, (void)t, (void)tl, (void)d, (void)dl, (void)i, (void)il;
  return -1;
}

static void test_limits(void **state) {
  acp__sse p;
  char big[100];
  (void)state;
  acp__sse_init(&p, acp_mem_default(), 16);
  memset(big, 'a', sizeof(big));
  assert_int_equal(acp__sse_feed(&p, big, sizeof(big), stop_cb, NULL),
                   ACP_ERR_LIMIT);
  acp__sse_dispose(&p);
  acp__sse_init(&p, acp_mem_default(), 0);
  assert_int_equal(acp__sse_feed(&p, "data: x\n\n", 9, stop_cb, NULL), -1);
  acp__sse_dispose(&p);
}

/* Events handed over with the LF that ended them still readable after
 * the data (data[data_len], which the remote client delivers in place),
 * for events larger than any feed, and the buffers the parser swaps for a
 * first data line keep later events (one line or several) intact. */
typedef struct big {
  size_t lens[8];
  bool lf_after[8];
  bool pattern[8]; /* data is 'a'..'z' repeated */
  char small[8][16];
  int count;
} big;

static int on_big(void *ud, const char *type, size_t tl, const char *data,
                  size_t dl, const char *id, size_t il) {
  big *b = ud;
  (void)type, (void)tl, (void)id, (void)il;
  assert_true(b->count < 8);
  b->lens[b->count] = dl;
  b->lf_after[b->count] = dl > 0 && data[dl] == '\n';
  bool ok = true;
  for (size_t i = 0; i < dl && ok; i++)
    ok = data[i] == (char)('a' + i % 26);
  b->pattern[b->count] = ok;
  if (dl < 16)
    memcpy(b->small[b->count], data, dl);
  b->count++;
  return 0;
}

static void test_data_in_place(void **state) {
  (void)state;
  size_t n = 300000;
  char *in = malloc(n + 256);
  size_t k = 0;
  assert_non_null(in);
  memcpy(in + k, "data: ", 6);
  k += 6;
  for (size_t i = 0; i < n; i++)
    in[k++] = (char)('a' + i % 26);
  /* then an event of two data lines, then a small one, twice */
  const char *tail = "\n\ndata: abc\ndata:efg\n\ndata: ab\r\n\r\n"
                     "data: abc\ndata:efg\n\ndata: ab\r\n\r\n";
  memcpy(in + k, tail, strlen(tail));
  k += strlen(tail);
  size_t steps[] = {1000, 65536, 7, 1 << 20};
  for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
    acp__sse p;
    big b;
    memset(&b, 0, sizeof(b));
    acp__sse_init(&p, acp_mem_default(), 0);
    for (size_t i = 0; i < k; i += steps[s])
      assert_int_equal(acp__sse_feed(&p, in + i,
                                     k - i < steps[s] ? k - i : steps[s],
                                     on_big, &b),
                       0);
    assert_int_equal(b.count, 5);
    assert_int_equal(b.lens[0], n);
    assert_true(b.pattern[0]);
    for (int e = 0; e < 5; e++)
      assert_true(b.lf_after[e]);
    for (int e = 1; e < 5; e += 2) {
      assert_int_equal(b.lens[e], 7);
      assert_memory_equal(b.small[e], "abc\nefg", 7);
      assert_int_equal(b.lens[e + 1], 2);
      assert_memory_equal(b.small[e + 1], "ab", 2);
    }
    acp__sse_dispose(&p);
  }
  free(in);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_basic),
      cmocka_unit_test(test_retry),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_data_in_place),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
