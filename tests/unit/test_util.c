/* The shared helpers of src/util: Base64 in both forms (RFC 4648 section 10
 * vectors, URL-safe alphabet, strict decoding) and the capped buffer it
 * writes into. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "util.h"

static acp_mem mem;

static const char *const plain[] = {"",     "f",     "fo",    "foo",
                                    "foob", "fooba", "foobar"};
static const char *const std_enc[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
static const char *const url_enc[] = {"",       "Zg",      "Zm8",     "Zm9v",
                                      "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};

static void check_round_trip(const char *in, const char *want, int form) {
  acp__buf b;
  char out[32];
  size_t n = strlen(in), o;

  assert_int_equal(acp__b64_encoded_len(n, form), strlen(want));
  o = acp__b64_encode(out, in, n, form);
  assert_int_equal(o, strlen(want));
  assert_memory_equal(out, want, o);
  acp__buf_init(&b, &mem, 0);
  assert_int_equal(acp__b64_decode(&b, want, strlen(want), form), 0);
  assert_int_equal(b.len, n);
  if (n > 0)
    assert_memory_equal(b.data, in, n);
  acp__buf_clear(&b);
  assert_int_equal(acp__b64_append(&b, in, n, form), 0);
  assert_int_equal(b.len, strlen(want));
  if (b.len > 0)
    assert_memory_equal(b.data, want, b.len);
  acp__buf_dispose(&b);
}

static void test_b64_rfc4648_vectors(void **state) {
  size_t i;
  (void)state;
  for (i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
    check_round_trip(plain[i], std_enc[i], ACP__B64_STD);
    check_round_trip(plain[i], url_enc[i], ACP__B64_URL);
  }
}

/* Bytes 0xfb 0xff use the two alphabet-specific characters. */
static void test_b64_alphabets(void **state) {
  static const uint8_t in[] = {0xfb, 0xff, 0xbf};
  char out[8];
  acp__buf b;
  (void)state;
  assert_int_equal(acp__b64_encode(out, in, 3, ACP__B64_STD), 4);
  assert_memory_equal(out, "+/+/", 4);
  assert_int_equal(acp__b64_encode(out, in, 3, ACP__B64_URL), 4);
  assert_memory_equal(out, "-_-_", 4);
  acp__buf_init(&b, &mem, 0);
  assert_int_equal(acp__b64_decode(&b, "-_-_", 4, ACP__B64_STD),
                   ACP_ERR_INVALID_ARGUMENT);
  acp__buf_clear(&b);
  assert_int_equal(acp__b64_decode(&b, "+/+/", 4, ACP__B64_URL),
                   ACP_ERR_INVALID_ARGUMENT);
  acp__buf_dispose(&b);
}

static void test_b64_strict(void **state) {
  static const char *const bad_std[] = {
      "Zg=", "Zg", "Z===", "Zg=a", "Zm9v\n", "Zm 9"};
  static const char *const bad_url[] = {"Zg==", "Z", "Zm9vY", "Zm9v!"};
  acp__buf b;
  size_t i;
  (void)state;
  acp__buf_init(&b, &mem, 0);
  for (i = 0; i < sizeof(bad_std) / sizeof(bad_std[0]); i++) {
    acp__buf_clear(&b);
    assert_int_equal(
        acp__b64_decode(&b, bad_std[i], strlen(bad_std[i]), ACP__B64_STD),
        ACP_ERR_INVALID_ARGUMENT);
  }
  for (i = 0; i < sizeof(bad_url) / sizeof(bad_url[0]); i++) {
    acp__buf_clear(&b);
    assert_int_equal(
        acp__b64_decode(&b, bad_url[i], strlen(bad_url[i]), ACP__B64_URL),
        ACP_ERR_INVALID_ARGUMENT);
  }
  /* A NUL inside the counted input is not part of the alphabet. */
  acp__buf_clear(&b);
  assert_int_equal(acp__b64_decode(&b, "Zm\0v", 4, ACP__B64_URL),
                   ACP_ERR_INVALID_ARGUMENT);
  acp__buf_dispose(&b);
}

/* The buffer's cap is honoured: encoding past it fails and writes nothing. */
static void test_b64_append_cap(void **state) {
  acp__buf b;
  (void)state;
  acp__buf_init(&b, &mem, 7);
  assert_int_equal(acp__b64_append(&b, "foobar", 6, ACP__B64_STD),
                   ACP_ERR_LIMIT);
  assert_int_equal(b.len, 0);
  assert_int_equal(acp__b64_append(&b, "fooba", 5, ACP__B64_URL), 0);
  assert_int_equal(b.len, 7);
  acp__buf_dispose(&b);
}

/* The inline append/putc/reserve honour max as the out-of-line grow does:
 * exactly up to max, then ACP_ERR_LIMIT with the contents kept; a size
 * that overflows is refused; and a buffer whose max was lowered below its
 * cap (the router does so around a batch's closing bytes) refuses the
 * bytes past max although the room is there. */
static void test_buf_inline_appends_keep_the_cap(void **state) {
  acp__buf b;
  size_t i;
  (void)state;
  acp__buf_init(&b, &mem, 300);
  for (i = 0; i < 299; i++)
    assert_int_equal(acp__buf_putc(&b, (char)('a' + i % 26)), 0);
  assert_int_equal(acp__buf_append(&b, "xy", 2), ACP_ERR_LIMIT);
  assert_int_equal(acp__buf_reserve(&b, 2), ACP_ERR_LIMIT);
  assert_int_equal(acp__buf_append(&b, "x", 1), 0);
  assert_int_equal(b.len, 300);
  assert_int_equal(acp__buf_putc(&b, 'z'), ACP_ERR_LIMIT);
  assert_int_equal(acp__buf_append(&b, "", 0), 0);
  assert_int_equal(acp__buf_reserve(&b, 0), 0);
  assert_int_equal(acp__buf_reserve(&b, SIZE_MAX), ACP_ERR_LIMIT);
  assert_int_equal(b.len, 300);
  for (i = 0; i < 299; i++)
    assert_int_equal(b.data[i], (char)('a' + i % 26));
  assert_int_equal(b.data[299], 'x');
  acp__buf_dispose(&b);

  acp__buf_init(&b, &mem, 0);
  assert_int_equal(acp__buf_append(&b, "0123456789", 10), 0);
  assert_true(b.cap >= 256);
  b.max = 12; /* below cap, as the router leaves it */
  assert_int_equal(acp__buf_append(&b, "ab", 2), 0);
  assert_int_equal(acp__buf_putc(&b, 'c'), ACP_ERR_LIMIT);
  assert_int_equal(acp__buf_append(&b, "c", 1), ACP_ERR_LIMIT);
  assert_int_equal(acp__buf_reserve(&b, 1), ACP_ERR_LIMIT);
  assert_int_equal(b.len, 12);
  assert_memory_equal(b.data, "0123456789ab", 12);
  b.max = SIZE_MAX;
  assert_int_equal(acp__buf_putc(&b, 'c'), 0);
  assert_int_equal(b.len, 13);
  acp__buf_dispose(&b);
}

/* Every byte: the sixteen digits in both cases give their value, anything
 * else -1. */
static void test_hexval(void **state) {
  int c;
  (void)state;
  for (c = 0; c < 256; c++) {
    int want = -1;
    if (c >= '0' && c <= '9')
      want = c - '0';
    else if (c >= 'a' && c <= 'f')
      want = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      want = c - 'A' + 10;
    assert_int_equal(acp__hexval((char)c), want);
  }
  assert_int_equal(acp__hexval('f'), 15);
  assert_int_equal(acp__hexval('G'), -1);
}

int main(void) {
  acp__mem_init(&mem, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_b64_rfc4648_vectors),
      cmocka_unit_test(test_b64_alphabets),
      cmocka_unit_test(test_b64_strict),
      cmocka_unit_test(test_b64_append_cap),
      cmocka_unit_test(test_buf_inline_appends_keep_the_cap),
      cmocka_unit_test(test_hexval),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
