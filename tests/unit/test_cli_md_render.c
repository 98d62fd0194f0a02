/*
 * The terminal markdown renderer of acp client (src/cli/md_render.c): the
 * rendering of each construct, and the same bytes whatever the chunking of
 * the stream (every split point, and byte by byte), so a marker cut over
 * two chunks renders as if it came whole.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cli/md_render.h"

typedef struct sink {
  char buf[8192];
  size_t n;
  int calls;
} sink;

static void emit(void *ud, const char *s, size_t n) {
  sink *k = ud;
  assert_true(k->n + n < sizeof(k->buf));
  assert_true(n > 0);
  memcpy(k->buf + k->n, s, n);
  k->n += n;
  k->buf[k->n] = '\0';
  k->calls++;
}

/* Render `text` cut at the given offsets (sorted, in 0..len). */
static void render_split(const char *text, const size_t *cuts, size_t ncuts,
                         sink *k) {
  md_render r;
  size_t at = 0, i, len = strlen(text);

  memset(k, 0, sizeof(*k));
  md_init(&r, emit, k);
  for (i = 0; i <= ncuts; i++) {
    size_t end = i < ncuts ? cuts[i] : len;
    md_feed(&r, text + at, end - at);
    at = end;
  }
  md_flush(&r);
}

static const char *render(const char *text) {
  static sink k;
  render_split(text, NULL, 0, &k);
  return k.buf;
}

#define R "\033[0m"
#define B "\033[1m"
#define D "\033[2m"
#define I "\033[3m"
#define C "\033[36m"
#define Y "\033[33m"

static void test_md_constructs(void **state) {
  (void)state;
  assert_string_equal(render("plain text\n"), "plain text\n");
  assert_string_equal(render("# Title\n"), B "Title" R "\n");
  assert_string_equal(render("### Sub *x*\n"), B "Sub " R B I "x" R B R "\n");
  assert_string_equal(render("a `code` b\n"), "a " C "code" R " b\n");
  assert_string_equal(render("**bold** and *em*\n"),
                      B "bold" R " and " I "em" R "\n");
  assert_string_equal(render("- one\n  * two\n+ three\n"),
                      "\xe2\x80\xa2 one\n  \xe2\x80\xa2 two\n"
                      "\xe2\x80\xa2 three\n");
  assert_string_equal(render("```c\nint *p = `x`;\n```\nafter\n"),
                      D "```c" R "\n" Y "int *p = `x`;" R "\n" D "```" R
                        "\nafter\n");
  /* Literal stars, a marker-like start that is not one, a lone '#'. */
  assert_string_equal(render("2 * 3\n-x\n#tag\n"), "2 * 3\n-x\n#tag\n");
  /* Styles end with the line: an unclosed marker does not leak. */
  assert_string_equal(render("**open\nnext\n"), B "open" R "\nnext\n");
  /* Blank lines and a trailing marker at the end of the stream. */
  assert_string_equal(render("a\n\nb *"), "a\n\nb *");
  assert_string_equal(render("  "), "  ");
  assert_string_equal(render("``"), "``");
  /* An emphasis closed by the last byte of the stream. */
  assert_string_equal(render("end *e*"), "end " I "e" R);
  /* UTF-8 passes through. */
  assert_string_equal(render("# h\xc3\xa9\n"), B "h\xc3\xa9" R "\n");
}

static const char doc[] = "# Heading one\n"
                          "Some **bold** text, *emphasis*, and `inline code`.\n"
                          "\n"
                          "- first item with `code`\n"
                          "  - nested **item**\n"
                          "* star item\n"
                          "```sh\n"
                          "echo \"**not bold**\" `not code`\n"
                          "```\n"
                          "2 * 3 = 6, a*b*c\n"
                          "## Done\n";

static void test_md_same_output_for_every_split(void **state) {
  sink whole, part;
  size_t len = strlen(doc), i, j;
  (void)state;

  render_split(doc, NULL, 0, &whole);
  assert_non_null(strstr(whole.buf, B "Heading one" R));
  assert_non_null(strstr(whole.buf, Y "echo \"**not bold**\" `not code`" R));
  /* Every single cut, and every pair of cuts. */
  for (i = 0; i <= len; i++) {
    render_split(doc, &i, 1, &part);
    if (strcmp(part.buf, whole.buf) != 0)
      fail_msg("cut at %zu differs", i);
    for (j = i; j <= len; j += 3) {
      size_t cuts[2] = {i, j};
      render_split(doc, cuts, 2, &part);
      if (strcmp(part.buf, whole.buf) != 0)
        fail_msg("cuts at %zu, %zu differ", i, j);
    }
  }
  /* Byte by byte. */
  {
    size_t *cuts = malloc(len * sizeof(*cuts));
    assert_non_null(cuts);
    for (i = 0; i < len; i++)
      cuts[i] = i + 1;
    render_split(doc, cuts, len - 1, &part);
    free(cuts);
    assert_string_equal(part.buf, whole.buf);
  }
}

/* Held-back bytes come out at md_flush(); a chunk with nothing decided
 * emits nothing (no empty emit). */
static void test_md_holds_back_only_undecided(void **state) {
  sink k;
  md_render r;
  (void)state;

  memset(&k, 0, sizeof(k));
  md_init(&r, emit, &k);
  md_feed(&r, "#", 1);
  assert_int_equal(k.n, 0);
  md_feed(&r, "#", 1);
  assert_int_equal(k.n, 0);
  md_feed(&r, " T", 2);
  assert_string_equal(k.buf, B "T");
  md_feed(&r, "x *", 3);
  assert_string_equal(k.buf, B "Tx ");
  md_flush(&r);
  assert_string_equal(k.buf, B "Tx *" R);
  /* After a flush the next text starts a line (the caller ended it). */
  md_feed(&r, "# N\n", 4);
  assert_string_equal(k.buf, B "Tx *" R B "N" R "\n");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_md_constructs),
      cmocka_unit_test(test_md_same_output_for_every_split),
      cmocka_unit_test(test_md_holds_back_only_undecided),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
