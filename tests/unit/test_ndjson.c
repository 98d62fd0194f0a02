/*
 * Unit tests of the NDJSON line framer (src/rpc/ndjson.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/ndjson.h"
#include "failmem.h"

/* MARK: - Harness */

/* Events as text: each line as "L:<bytes>|", each over-long as "O|",
 * the unterminated last line as "E:<bytes>|" (or "EO|"). */
static char events[4096];
static size_t nevents;

static void ev(const char *tag, const char *p, size_t n) {
  size_t t = strlen(tag);
  assert_true(nevents + t + n + 1 < sizeof(events));
  memcpy(events + nevents, tag, t);
  nevents += t;
  if (p != NULL) {
    memcpy(events + nevents, p, n);
    nevents += n;
  }
  events[nevents++] = '|';
  events[nevents] = '\0';
}

/* Feed data[0..len) to f in one call (loop until need-more). */
static void feed(acp_ndjson *f, const char *data, size_t len) {
  size_t pos = 0;
  int guard = 0;

  for (;;) {
    const char *line = NULL;
    size_t n = 0, used = 0;
    int rv = acp_ndjson_next(f, data + pos, len - pos, &used, &line, &n);

    assert_true(used <= len - pos);
    pos += used;
    if (rv == ACP_NDJSON_NEED_MORE) {
      assert_int_equal(pos, len);
      return;
    }
    if (rv == ACP_NDJSON_LINE) {
      assert_non_null(line);
      assert_true(n > 0);
      ev("L:", line, n);
    } else {
      assert_int_equal(rv, ACP_NDJSON_OVERLONG);
      ev("O", NULL, 0);
    }
    assert_true(++guard < 10000);
  }
}

static void finish(acp_ndjson *f) {
  const char *line = NULL;
  size_t n = 0;
  int rv = acp_ndjson_finish(f, &line, &n);

  if (rv == ACP_NDJSON_LINE)
    ev("E:", line, n);
  else if (rv == ACP_NDJSON_OVERLONG)
    ev("EO", NULL, 0);
  else
    assert_int_equal(rv, ACP_NDJSON_NEED_MORE);
}

/* The events of `in` with the framer fed in pieces of `step` bytes, each
 * piece in a fresh heap block of exactly that size (so ASan sees any read
 * past the piece). */
static const char *frame(const char *in, size_t len, size_t max_line,
                         size_t step) {
  acp_ndjson f;
  size_t i;

  nevents = 0;
  events[0] = '\0';
  acp_ndjson_init(&f, max_line, NULL);
  for (i = 0; i < len; i += step) {
    size_t n = len - i < step ? len - i : step;
    char *piece = malloc(n ? n : 1);

    assert_non_null(piece);
    memcpy(piece, in + i, n);
    feed(&f, piece, n);
    free(piece);
  }
  finish(&f);
  acp_ndjson_dispose(&f);
  return events;
}

/* As frame(), each piece read in place: copied into the framer's own
 * buffer (acp_ndjson_read_buf()) and fed from there, as a runtime reading
 * straight into it does; a piece larger than the room goes in parts, and
 * when the framer lends nothing, from a heap block as above. */
static const char *frame_inplace(const char *in, size_t len, size_t max_line,
                                 size_t step, size_t *lent) {
  acp_ndjson f;
  size_t i = 0;

  nevents = 0;
  events[0] = '\0';
  acp_ndjson_init(&f, max_line, NULL);
  while (i < len) {
    size_t n = len - i < step ? len - i : step;
    size_t room = 0;
    char *buf = acp_ndjson_read_buf(&f, &room);

    if (buf != NULL) {
      assert_true(room >= 4096);
      if (n > room)
        n = room;
      memcpy(buf, in + i, n);
      feed(&f, buf, n);
      (*lent)++;
    } else {
      char *piece = malloc(n ? n : 1);
      assert_non_null(piece);
      memcpy(piece, in + i, n);
      feed(&f, piece, n);
      free(piece);
    }
    i += n;
  }
  finish(&f);
  acp_ndjson_dispose(&f);
  return events;
}

/* Every split of `in` in two pieces, and every step size, gives `want`,
 * fed from the caller's buffers or read in place. */
static void check_all_splits(const char *in, size_t max_line,
                             const char *want) {
  size_t len = strlen(in);
  size_t cut, step;

  size_t lent = 0;

  for (step = 1; step <= len + 1; step++)
    assert_string_equal(frame(in, len, max_line, step), want);
  for (step = 1; step <= len + 1; step++)
    assert_string_equal(frame_inplace(in, len, max_line, step, &lent), want);
  assert_true(lent > 0 || len == 0);
  for (cut = 0; cut <= len; cut++) {
    acp_ndjson f;

    nevents = 0;
    events[0] = '\0';
    acp_ndjson_init(&f, max_line, NULL);
    feed(&f, in, cut);
    feed(&f, in + cut, len - cut);
    finish(&f);
    acp_ndjson_dispose(&f);
    assert_string_equal(events, want);
  }
}

/* MARK: - Lines */

static void test_ndjson_lines_at_every_chunk_boundary(void **state) {
  (void)state;
  check_all_splits("{\"a\":1}\n[2]\n\"three\"\n", 0,
                   "L:{\"a\":1}|L:[2]|L:\"three\"|");
}

static void test_ndjson_crlf_is_a_line_ending(void **state) {
  (void)state;
  check_all_splits("a\r\nb\r\n", 0, "L:a|L:b|");
  /* Only the '\r' right before '\n' belongs to the ending. */
  check_all_splits("a\rb\r\r\n", 0, "L:a\rb\r|");
}

static void test_ndjson_empty_lines_are_skipped(void **state) {
  (void)state;
  check_all_splits("\n\r\n\nx\n\n \n", 0, "L:x|L: |");
}

static void test_ndjson_last_line_without_newline(void **state) {
  (void)state;
  check_all_splits("a\nlast", 0, "L:a|E:last|");
  check_all_splits("a\nlast\r", 0, "L:a|E:last|");
  check_all_splits("a\n", 0, "L:a|");
}

static void test_ndjson_bytes_pass_unvalidated(void **state) {
  static const char in[] = "\xff\xfe\0x\n\xc3\x28\n";

  (void)state;
  assert_string_equal(frame(in, sizeof(in) - 1, 0, 1), "L:\xff\xfe");
  assert_memory_equal(events, "L:\xff\xfe\0x|L:\xc3\x28|", 12);
}

/* MARK: - Over-long lines */

static void test_ndjson_overlong_reported_once_and_skipped(void **state) {
  (void)state;
  /* Cap 4: "abcd" fits, with or without '\r'; "abcde" does not. */
  check_all_splits("abcd\nabcd\r\nabcde\nok\n", 4, "L:abcd|L:abcd|O|L:ok|");
  check_all_splits("abcdefghijklmnop\nok\n", 4, "O|L:ok|");
  check_all_splits("abcde\r\nok\n", 4, "O|L:ok|");
  /* Over the cap at the end of input: reported, no line handed out. */
  check_all_splits("ok\nabcdefghij", 4, "L:ok|O|");
  check_all_splits("ok\nabcde", 4, "L:ok|EO|");
}

static void test_ndjson_overlong_holds_at_most_cap_plus_one(void **state) {
  acp_ndjson f;
  int i;

  (void)state;
  acp_ndjson_init(&f, 8, NULL);
  nevents = 0;
  for (i = 0; i < 1000; i++)
    feed(&f, "xxxxxxx", 7);
  assert_true(f.cap <= 9);
  assert_int_equal(acp_ndjson_pending(&f), 0);
  feed(&f, "\nyes\n", 5);
  assert_string_equal(events, "O|L:yes|");
  acp_ndjson_dispose(&f);
}

static void test_ndjson_default_and_unlimited_caps(void **state) {
  acp_ndjson f;

  (void)state;
  acp_ndjson_init(&f, 0, NULL);
  assert_int_equal(acp_ndjson_max_line(&f), ACP_NDJSON_DEFAULT_MAX_LINE);
  acp_ndjson_dispose(&f);
  acp_ndjson_init(&f, SIZE_MAX, NULL);
  nevents = 0;
  feed(&f, "abc", 3);
  feed(&f, "def\n", 4);
  assert_string_equal(events, "L:abcdef|");
  acp_ndjson_dispose(&f);
}

static void test_ndjson_dispose_leaves_it_usable(void **state) {
  acp_ndjson f;

  (void)state;
  acp_ndjson_init(&f, 8, NULL);
  nevents = 0;
  feed(&f, "partial", 7);
  assert_int_equal(acp_ndjson_pending(&f), 7);
  acp_ndjson_dispose(&f);
  assert_int_equal(acp_ndjson_pending(&f), 0);
  assert_null(f.buf);
  feed(&f, "ok\n0123456789\nyes", 17);
  finish(&f);
  assert_string_equal(events, "L:ok|O|E:yes|");
  acp_ndjson_dispose(&f);
}

/* A runtime gives an over-long line's carry back as soon as it is reported:
 * the rest of that line is still dropped, and a new stream starts with
 * acp_ndjson_init(). */
static void test_ndjson_dispose_after_overlong_keeps_dropping(void **state) {
  acp_ndjson f;

  (void)state;
  acp_ndjson_init(&f, 8, NULL);
  nevents = 0;
  feed(&f, "0123", 4);
  feed(&f, "456789", 6);
  assert_string_equal(events, "O|");
  acp_ndjson_dispose(&f);
  assert_null(f.buf);
  feed(&f, "still the same line\nok\n", 23);
  assert_string_equal(events, "O|L:ok|");
  feed(&f, "0123456789", 10);
  acp_ndjson_dispose(&f);
  acp_ndjson_init(&f, 8, NULL);
  feed(&f, "new\n", 4);
  assert_string_equal(events, "O|L:ok|O|L:new|");
  acp_ndjson_dispose(&f);
}

static void test_ndjson_overlong_reply_text(void **state) {
  char buf[ACP_NDJSON_REPLY_MAX];
  size_t n;

  (void)state;
  n = acp_ndjson_overlong_reply(buf, sizeof(buf), 64);
  assert_string_equal(buf,
                      "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":"
                      "-32600,\"message\":\"Message exceeds 64 bytes\"}}");
  assert_int_equal(n, strlen(buf));
  n = acp_ndjson_overlong_message(buf, sizeof(buf), SIZE_MAX);
  assert_int_equal(n, strlen(buf));
  assert_true(strncmp(buf, "Message exceeds ", 16) == 0);
  /* The longest reply fits ACP_NDJSON_REPLY_MAX. */
  assert_true(acp_ndjson_overlong_reply(buf, sizeof(buf), SIZE_MAX) > 0);
  /* Too small: 0 and an empty string. */
  assert_int_equal(acp_ndjson_overlong_reply(buf, 20, 64), 0);
  assert_string_equal(buf, "");
  assert_int_equal(acp_ndjson_overlong_message(buf, 5, 64), 0);
  assert_int_equal(acp_ndjson_overlong_reply(NULL, 10, 1), 0);
}

/* MARK: - Errors */

/* Long lines read in place: the buffer grows to the line, the lines come
 * out whole and unchanged, bytes after a line move to the front, and the
 * next long line of the same size needs no new growth. */
static void test_ndjson_read_in_place_long_lines(void **state) {
  static const size_t steps[] = {65536, 1000, 4097, 300000};
  size_t big = 200000, mid = 70000;
  size_t len = 2 * (big + 1) + 3 + mid + 2 + 4;
  char *in = malloc(len);
  size_t k, at = 0;

  (void)state;
  assert_non_null(in);
  for (k = 0; k < 2; k++) {
    memset(in + at, k ? 'z' : 'x', big);
    at += big;
    in[at++] = '\n';
  }
  memcpy(in + at, "{}\n", 3);
  at += 3;
  memset(in + at, 'y', mid);
  at += mid;
  memcpy(in + at, "\r\ntail", 6);
  at += 6;
  assert_int_equal(at, len);
  for (k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
    acp_ndjson f;
    size_t i = 0, nlines = 0, cap_after_first = 0;
    const char *line;
    size_t n;

    acp_ndjson_init(&f, 0, NULL);
    while (i < len) {
      size_t room = 0, used = 0, pos = 0;
      char *buf = acp_ndjson_read_buf(&f, &room);
      size_t got = len - i < steps[k] ? len - i : steps[k];

      assert_non_null(buf);
      if (got > room)
        got = room;
      memcpy(buf, in + i, got);
      i += got;
      for (;;) {
        int rv = acp_ndjson_next(&f, buf + pos, got - pos, &used, &line, &n);
        pos += used;
        if (rv == ACP_NDJSON_NEED_MORE)
          break;
        assert_int_equal(rv, ACP_NDJSON_LINE);
        nlines++;
        if (nlines == 1 || nlines == 2) {
          assert_int_equal(n, big);
          assert_int_equal(line[0], nlines == 1 ? 'x' : 'z');
          assert_int_equal(line[n - 1], nlines == 1 ? 'x' : 'z');
          assert_null(memchr(line, nlines == 1 ? 'z' : 'x', n));
          if (nlines == 1)
            cap_after_first = f.cap;
          else
            assert_int_equal(f.cap, cap_after_first);
        } else if (nlines == 3) {
          assert_int_equal(n, 2);
          assert_memory_equal(line, "{}", 2);
        } else {
          assert_int_equal(nlines, 4);
          assert_int_equal(n, mid);
          assert_int_equal(line[0], 'y');
          assert_int_equal(line[n - 1], 'y');
        }
      }
      assert_int_equal(pos, got);
    }
    assert_int_equal(nlines, 4);
    assert_int_equal(acp_ndjson_finish(&f, &line, &n), ACP_NDJSON_LINE);
    assert_int_equal(n, 4);
    assert_memory_equal(line, "tail", 4);
    acp_ndjson_dispose(&f);
  }
  free(in);
}

/* The framer lends nothing while dropping an over-long line, nor without
 * its arguments. */
static void test_ndjson_read_buf_refusals(void **state) {
  acp_ndjson f;
  size_t room = 7, used = 0, n = 0;
  const char *line = NULL;
  char *buf;

  (void)state;
  assert_null(acp_ndjson_read_buf(NULL, &room));
  assert_int_equal(room, 0);
  acp_ndjson_init(&f, 8, NULL);
  assert_null(acp_ndjson_read_buf(&f, NULL));
  buf = acp_ndjson_read_buf(&f, &room);
  assert_non_null(buf);
  memcpy(buf, "0123456789", 10);
  assert_int_equal(acp_ndjson_next(&f, buf, 10, &used, &line, &n),
                   ACP_NDJSON_OVERLONG);
  assert_null(acp_ndjson_read_buf(&f, &room));
  assert_int_equal(room, 0);
  assert_int_equal(acp_ndjson_next(&f, "x\nok\n", 5, &used, &line, &n),
                   ACP_NDJSON_LINE);
  assert_memory_equal(line, "ok", 2);
  assert_non_null(acp_ndjson_read_buf(&f, &room));
  acp_ndjson_dispose(&f);
}

static void test_ndjson_bad_arguments(void **state) {
  acp_ndjson f;
  const char *line = "x";
  size_t n = 7, used = 7;

  (void)state;
  acp_ndjson_init(&f, 0, NULL);
  assert_int_equal(acp_ndjson_next(&f, NULL, 1, &used, &line, &n),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(line);
  assert_int_equal(used, 0);
  assert_int_equal(acp_ndjson_next(NULL, "a", 1, &used, &line, &n),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_ndjson_next(&f, "a", 1, NULL, &line, &n),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_ndjson_finish(&f, NULL, &n), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_ndjson_next(&f, NULL, 0, &used, &line, &n),
                   ACP_NDJSON_NEED_MORE);
  acp_ndjson_dispose(&f);
  acp_ndjson_dispose(NULL);
  assert_int_equal(acp_ndjson_pending(NULL), 0);
}

static void test_ndjson_allocation_failure_drops_the_line(void **state) {
  failmem fm;
  acp_mem mem = failmem_start(&fm, 0);
  acp_ndjson f;
  const char *line;
  size_t n, used;

  (void)state;
  acp_ndjson_init(&f, 0, &mem);
  /* A whole line needs no memory. */
  assert_int_equal(acp_ndjson_next(&f, "ab\n", 3, &used, &line, &n),
                   ACP_NDJSON_LINE);
  /* A partial one does: it fails, the line is dropped to its newline. */
  assert_int_equal(acp_ndjson_next(&f, "cd", 2, &used, &line, &n),
                   ACP_ERR_NOMEM);
  assert_int_equal(used, 2);
  assert_int_equal(acp_ndjson_next(&f, "ef\ngh\n", 6, &used, &line, &n),
                   ACP_NDJSON_LINE);
  assert_int_equal(used, 6);
  assert_memory_equal(line, "gh", 2);
  acp_ndjson_dispose(&f);
  assert_int_equal(fm.live, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ndjson_lines_at_every_chunk_boundary),
      cmocka_unit_test(test_ndjson_crlf_is_a_line_ending),
      cmocka_unit_test(test_ndjson_empty_lines_are_skipped),
      cmocka_unit_test(test_ndjson_last_line_without_newline),
      cmocka_unit_test(test_ndjson_bytes_pass_unvalidated),
      cmocka_unit_test(test_ndjson_overlong_reported_once_and_skipped),
      cmocka_unit_test(test_ndjson_overlong_holds_at_most_cap_plus_one),
      cmocka_unit_test(test_ndjson_default_and_unlimited_caps),
      cmocka_unit_test(test_ndjson_dispose_leaves_it_usable),
      cmocka_unit_test(test_ndjson_dispose_after_overlong_keeps_dropping),
      cmocka_unit_test(test_ndjson_overlong_reply_text),
      cmocka_unit_test(test_ndjson_read_in_place_long_lines),
      cmocka_unit_test(test_ndjson_read_buf_refusals),
      cmocka_unit_test(test_ndjson_bad_arguments),
      cmocka_unit_test(test_ndjson_allocation_failure_drops_the_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
