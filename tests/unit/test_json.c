/*
 * Unit tests of the JSON layer: reader accessors, iteration, strings,
 * numbers, limits, writer and allocation failure.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/json.h"
#include "failmem.h"
#include "json/json_int.h"

#define S(lit) lit, sizeof(lit) - 1

static acp_json_doc *parse_ok(const char *s, size_t n) {
  acp_json_doc *doc = NULL;
  acp_json_err err;

  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  if (acp_json_doc_parse(doc, s, n, &err) != 0)
    fail_msg("parse failed: %s at %zu", err.msg, err.pos);
  assert_int_equal(err.code, 0);
  return doc;
}

static int parse_rv(const char *s, size_t n) {
  acp_json_doc *doc = NULL;
  int rv;
  int rv2;

  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  rv = acp_json_doc_parse(doc, s, n, NULL);
  rv2 = acp_json_validate(s, n, NULL);
  assert_int_equal(rv, rv2);
  acp_json_doc_free(doc);
  return rv;
}

/* MARK: - Reader */

static void test_json_accessors_and_types(void **state) {
  static const char in[] =
      " {\"a\": [1, -2.5, true, false, null, \"x\"], \"b\": {}, \"c\": []} ";
  acp_json_doc *doc = parse_ok(S(in));
  const acp_json_val *root = acp_json_doc_root(doc);
  const acp_json_val *a, *v;
  bool b;
  int64_t i;
  double d;
  size_t len;
  const char *raw;

  (void)state;
  assert_int_equal(acp_json_type_of(root), ACP_JSON_OBJECT);
  assert_int_equal(acp_json_len(root), 3);
  raw = acp_json_raw(root, &len);
  assert_int_equal(len, sizeof(in) - 3);
  assert_memory_equal(raw, in + 1, len);
  a = acp_json_obj_getz(root, "a");
  assert_int_equal(acp_json_type_of(a), ACP_JSON_ARRAY);
  assert_int_equal(acp_json_len(a), 6);
  assert_int_equal(acp_json_get_int64(acp_json_arr_get(a, 0), &i), 0);
  assert_int_equal(i, 1);
  assert_int_equal(acp_json_get_int64(acp_json_arr_get(a, 1), &i),
                   ACP_ERR_TYPE);
  assert_int_equal(acp_json_get_double(acp_json_arr_get(a, 1), &d), 0);
  assert_true(d == -2.5);
  assert_int_equal(acp_json_get_bool(acp_json_arr_get(a, 2), &b), 0);
  assert_true(b);
  assert_int_equal(acp_json_get_bool(acp_json_arr_get(a, 3), &b), 0);
  assert_false(b);
  assert_int_equal(acp_json_type_of(acp_json_arr_get(a, 4)), ACP_JSON_NULL);
  assert_int_equal(acp_json_get_bool(acp_json_arr_get(a, 4), &b), ACP_ERR_TYPE);
  v = acp_json_arr_get(a, 5);
  assert_true(acp_json_str_eq(v, S("x")));
  assert_null(acp_json_arr_get(a, 6));
  assert_null(acp_json_arr_get(root, 0));
  assert_int_equal(acp_json_len(acp_json_obj_getz(root, "b")), 0);
  assert_null(acp_json_child(acp_json_obj_getz(root, "b")));
  assert_null(acp_json_child(acp_json_obj_getz(root, "c")));
  assert_int_equal(acp_json_type_of(acp_json_obj_getz(root, "c")),
                   ACP_JSON_ARRAY);
  assert_null(acp_json_obj_getz(root, "d"));
  assert_null(acp_json_obj_getz(a, "a"));
  assert_int_equal(acp_json_type_of(NULL), ACP_JSON_NONE);
  assert_null(acp_json_raw(NULL, &len));
  assert_int_equal(len, 0);
  assert_null(acp_json_str_raw(a, &len));
  assert_int_equal(acp_json_len(v), 0);
  assert_null(acp_json_next(root));
  acp_json_doc_free(doc);
}

static void test_json_iteration_skips_subtrees(void **state) {
  static const char in[] =
      "{\"k1\":{\"x\":[1,[2,[3]],{\"y\":4}]},\"k2\":[[],[[]]],\"k3\":\"v\"}";
  acp_json_doc *doc = parse_ok(S(in));
  const acp_json_val *root = acp_json_doc_root(doc);
  const acp_json_val *k;
  const char *names[] = {"k1", "k2", "k3"};
  int n = 0;

  (void)state;
  for (k = acp_json_child(root); k; k = acp_json_next(acp_json_next(k))) {
    assert_true(n < 3);
    assert_true(acp_json_str_eq(k, names[n], 2));
    n++;
  }
  assert_int_equal(n, 3);
  assert_true(acp_json_str_eq(acp_json_obj_getz(root, "k3"), S("v")));
  assert_int_equal(acp_json_len(acp_json_obj_getz(root, "k2")), 2);
  {
    const acp_json_val *x =
        acp_json_obj_getz(acp_json_obj_getz(root, "k1"), "x");
    const acp_json_val *e = acp_json_child(x);
    size_t len;
    int c = 0;
    for (; e; e = acp_json_next(e))
      c++;
    assert_int_equal(c, 3);
    acp_json_raw(acp_json_arr_get(x, 1), &len);
    assert_int_equal(len, strlen("[2,[3]]"));
    assert_true(
        acp_json_str_eq(acp_json_child(acp_json_arr_get(x, 2)), S("y")));
  }
  acp_json_doc_free(doc);
}

static void test_json_obj_get_escaped_keys(void **state) {
  static const char in[] =
      "{\"a\\u0062c\":1,\"n\\u0000l\":2,\"\\u00e9t\\u00e9\":3,\"q\\\"\":4,"
      "\"abc\":5}";
  acp_json_doc *doc = parse_ok(S(in));
  const acp_json_val *root = acp_json_doc_root(doc);
  int64_t i;

  (void)state;
  assert_int_equal(acp_json_get_int64(acp_json_obj_getz(root, "abc"), &i), 0);
  assert_int_equal(i, 1); /* first match wins */
  assert_int_equal(acp_json_get_int64(acp_json_obj_get(root, S("n\0l")), &i),
                   0);
  assert_int_equal(i, 2);
  assert_null(acp_json_obj_getz(root, "n"));
  assert_int_equal(
      acp_json_get_int64(acp_json_obj_getz(root, "\xc3\xa9t\xc3\xa9"), &i), 0);
  assert_int_equal(i, 3);
  assert_int_equal(acp_json_get_int64(acp_json_obj_getz(root, "q\""), &i), 0);
  assert_int_equal(i, 4);
  assert_null(acp_json_obj_getz(root, "ab"));
  assert_null(acp_json_obj_getz(root, "abcd"));
  acp_json_doc_free(doc);
}

/* A lookup walks plain keys inline and continues out of line from the
 * first key with escapes (or from the start for a key over 16 bytes): the
 * members before, at and after that point are all found, first match
 * first, and a missing key ends at the last member. */
static void test_json_obj_get_plain_then_escaped_keys(void **state) {
  static const char in[] =
      "{\"x\":0,\"abc\":1,\"a\\u0062d\":2,\"abd\":3,"
      "\"k_is_longer_than_16\":4,\"k_is_longer_than_1\\u0037\":5,\"zz\":6}";
  static const char plain[] = "{\"p\":1,\"k_is_longer_than_16\":2,\"q\":3}";
  acp_json_doc *doc = parse_ok(S(in));
  const acp_json_val *root = acp_json_doc_root(doc);
  int64_t i;

  (void)state;
#define GET(k, want)                                                           \
  do {                                                                         \
    assert_int_equal(acp_json_get_int64(acp_json_obj_get(root, S(k)), &i), 0); \
    assert_int_equal(i, want);                                                 \
  } while (0)
  GET("x", 0);
  GET("abc", 1);
  GET("abd", 2); /* the escaped key comes first */
  GET("k_is_longer_than_16", 4);
  GET("k_is_longer_than_17", 5);
  GET("zz", 6);
  assert_null(acp_json_obj_get(root, S("y")));
  assert_null(acp_json_obj_get(root, S("zzz")));
  assert_null(acp_json_obj_get(root, S("k_is_longer_than_18")));
  acp_json_doc_free(doc);
  doc = parse_ok(S(plain));
  root = acp_json_doc_root(doc);
  GET("p", 1);
  GET("k_is_longer_than_16", 2);
  GET("q", 3);
  assert_null(acp_json_obj_get(root, S("k_is_longer_than_1")));
  assert_null(acp_json_obj_get(root, S("k_is_longer_than_166")));
#undef GET
  acp_json_doc_free(doc);
}

/*
 * The inline lookups of json_int.h (ACP__OBJ_GETI, ACP__STR_EQI,
 * acp__json_doc_str_inl) against the general functions, on random objects:
 * keys of every length around the 4/8/16-byte steps, keys with escapes
 * before, at and after the match, duplicates (the first one wins),
 * non-ASCII keys, near misses; values that are strings (plain and escaped),
 * numbers, objects. Any difference in the answer fails.
 */
static void test_json_inline_lookups_match_general(void **state) {
  /* Raw key text as it appears between the quotes, and what it decodes to. */
  static const struct {
    const char *raw;
    const char *dec;
  } pool[] = {
      {"", ""},
      {"a", "a"},
      {"ab", "ab"},
      {"abc", "abc"},
      {"axc", "axc"},
      {"type", "type"},
      {"typf", "typf"},
      {"text", "text"},
      {"texts", "texts"},
      {"tex\\u0074", "text"},
      {"\\u0074ype", "type"},
      {"update", "update"},
      {"content", "content"},
      {"contenu", "contenu"},
      {"sessionId", "sessionId"},
      {"sessionI\\u0064", "sessionId"},
      {"sessionUpdate", "sessionUpdate"},
      {"sessionUpdatf", "sessionUpdatf"},
      {"abcdefghijklmnop", "abcdefghijklmnop"},
      {"abcdefghijklmnoq", "abcdefghijklmnoq"},
      {"abcdefghijklmnopq", "abcdefghijklmnopq"},
      {"k_is_longer_than_16", "k_is_longer_than_16"},
      {"\xc3\xa9t\xc3\xa9", "\xc3\xa9t\xc3\xa9"},
      {"\\u00e9t\\u00e9", "\xc3\xa9t\xc3\xa9"},
      {"_meta", "_meta"},
      {"name", "name"},
      {"nam", "nam"},
      {"arguments", "arguments"},
      {"argumentz", "argumentz"},
  };
  const size_t np = sizeof(pool) / sizeof(pool[0]);
  char in[4096];
  uint32_t seed = 12345;
  int round;

  (void)state;
#define RND() (seed = seed * 1103515245u + 12345u, (seed >> 16) & 0x7fff)
  for (round = 0; round < 3000; round++) {
    size_t at = 0;
    int nm = (int)(RND() % 9);
    int m;
    acp_json_doc *doc;
    const acp_json_val *root;
    const acp_json_val *e;
    size_t q;

    in[at++] = '{';
    for (m = 0; m < nm; m++) {
      size_t k = RND() % np;
      int kind = (int)(RND() % 4);
      if (m > 0)
        in[at++] = ',';
      at += (size_t)snprintf(in + at, sizeof(in) - at, "\"%s\":", pool[k].raw);
      if (kind == 0)
        at += (size_t)snprintf(in + at, sizeof(in) - at, "%d", m);
      else if (kind == 1)
        at += (size_t)snprintf(in + at, sizeof(in) - at, "{\"x\":%d}", m);
      else
        at += (size_t)snprintf(in + at, sizeof(in) - at, "\"%s\"",
                               pool[RND() % np].raw);
    }
    in[at++] = '}';
    doc = parse_ok(in, at);
    root = acp_json_doc_root(doc);
    for (q = 0; q < np; q++) {
      const char *k = pool[q].dec;
      size_t kn = strlen(k);
      assert_ptr_equal(acp__json_obj_get_inl(root, k, kn),
                       acp_json_obj_get(root, k, kn));
    }
    /* With literal keys, as the handlers call it (lengths constant). */
#define SAME_AS_GENERAL(k)                                                     \
  assert_ptr_equal(ACP__OBJ_GETI(root, k), acp_json_obj_get(root, S(k)))
    SAME_AS_GENERAL("type");
    SAME_AS_GENERAL("text");
    SAME_AS_GENERAL("sessionId");
    SAME_AS_GENERAL("sessionUpdate");
    SAME_AS_GENERAL("abcdefghijklmnop");
    SAME_AS_GENERAL("k_is_longer_than_16");
    SAME_AS_GENERAL("");
#undef SAME_AS_GENERAL
    /* Every key and value (child/next walks both): string compares and
     * views. */
    for (e = acp_json_child(root); e != NULL; e = acp_json_next(e)) {
      const acp_json_val *v = e;
      const char *s1 = NULL;
      const char *s2 = NULL;
      size_t n1 = 0;
      size_t n2 = 0;
      int r1;
      int r2;

      for (q = 0; q < np; q++) {
        const char *k = pool[q].dec;
        assert_int_equal(acp__json_str_eq_inl(v, k, strlen(k)) != 0,
                         acp_json_str_eq(v, k, strlen(k)) != 0);
      }
      assert_int_equal(ACP__STR_EQI(v, "text") != 0,
                       acp_json_str_eq(v, S("text")) != 0);
      r1 = acp__json_doc_str_inl(doc, v, &s1, &n1);
      r2 = acp_json_doc_str(doc, v, &s2, &n2);
      assert_int_equal(r1, r2);
      if (r1 == 0) {
        assert_int_equal(n1, n2);
        assert_memory_equal(s1, s2, n1);
      }
    }
    /* Not an object, and no object at all. */
    assert_null(acp__json_obj_get_inl(acp_json_child(root), S("type")));
    assert_null(ACP__OBJ_GETI(NULL, "type"));
    assert_false(ACP__STR_EQI(NULL, "text"));
    acp_json_doc_free(doc);
  }
#undef RND
}

static void test_json_str_eq_and_unescape(void **state) {
  static const char in[] =
      "[\"plain\",\"t\\tx\\n\\\\\\/\\\"\\b\\f\\r\",\"nul\\u0000end\","
      "\"\\ud83d\\ude00\",\"\\ud800x\",\"\\udc00\",\"\\ud800\\u0041\","
      "\"\xe2\x82\xac\",\"\"]";
  acp_json_doc *doc = parse_ok(S(in));
  const acp_json_val *root = acp_json_doc_root(doc);
  const acp_json_val *v;
  char buf[64];
  size_t len;
  const char *s;

  (void)state;
  v = acp_json_arr_get(root, 0);
  assert_false(acp_json_str_has_escapes(v));
  assert_int_equal(acp_json_doc_str(doc, v, &s, &len), 0);
  assert_int_equal(len, 5);
  assert_memory_equal(s, "plain", 5);
  assert_true(acp_json_str_eq(v, S("plain")));
  assert_false(acp_json_str_eq(v, S("plai")));
  assert_false(acp_json_str_eq(v, S("plainx")));

  v = acp_json_arr_get(root, 1);
  assert_true(acp_json_str_has_escapes(v));
  assert_true(acp_json_str_eq(v, S("t\tx\n\\/\"\b\f\r")));
  assert_false(acp_json_str_eq(v, S("t\tx\n\\/\"\b\f")));
  assert_int_equal(acp_json_str_unescape(v, buf, sizeof(buf), &len), 0);
  assert_int_equal(len, 10);
  assert_string_equal(buf, "t\tx\n\\/\"\b\f\r");
  s = acp_json_str_raw(v, &len);
  assert_int_equal(len, strlen("t\\tx\\n\\\\\\/\\\"\\b\\f\\r"));
  assert_memory_equal(s, "t\\tx", 4);

  v = acp_json_arr_get(root, 2);
  assert_true(acp_json_str_eq(v, S("nul\0end")));
  assert_true(ACP_JSON_STR_EQ_LIT(v, "nul\0end"));
  assert_false(ACP_JSON_STR_EQ_LIT(v, "nul"));
  assert_false(acp_json_str_eq(v, S("nul")));
  assert_int_equal(acp_json_doc_str(doc, v, &s, &len), 0);
  assert_int_equal(len, 7);
  assert_memory_equal(s, "nul\0end", 7);

  v = acp_json_arr_get(root, 3);
  assert_true(acp_json_str_eq(v, S("\xf0\x9f\x98\x80")));
  /* measure, then too small, then exact (no room for NUL), then room */
  assert_int_equal(acp_json_str_unescape(v, NULL, 0, &len), ACP_ERR_BUFFER);
  assert_int_equal(len, 4);
  assert_int_equal(acp_json_str_unescape(v, buf, 3, &len), ACP_ERR_BUFFER);
  memset(buf, 'Z', sizeof(buf));
  assert_int_equal(acp_json_str_unescape(v, buf, 4, &len), 0);
  assert_int_equal(buf[4], 'Z');
  assert_int_equal(acp_json_str_unescape(v, buf, 5, &len), 0);
  assert_string_equal(buf, "\xf0\x9f\x98\x80");

  /* decoding is cached: a second call returns the same bytes */
  {
    const char *s1, *s2;
    size_t l1, l2;
    assert_int_equal(acp_json_doc_str(doc, v, &s1, &l1), 0);
    assert_int_equal(acp_json_doc_str(doc, v, &s2, &l2), 0);
    assert_ptr_equal(s1, s2);
    assert_int_equal(l1, l2);
  }

  /* lone surrogates decode to U+FFFD */
  assert_true(acp_json_str_eq(acp_json_arr_get(root, 4), S("\xef\xbf\xbdx")));
  assert_true(acp_json_str_eq(acp_json_arr_get(root, 5), S("\xef\xbf\xbd")));
  assert_true(acp_json_str_eq(acp_json_arr_get(root, 6), S("\xef\xbf\xbd"
                                                           "A")));
  assert_true(acp_json_str_eq(acp_json_arr_get(root, 7), S("\xe2\x82\xac")));
  v = acp_json_arr_get(root, 8);
  assert_true(ACP_JSON_STR_EQ_LIT(v, ""));
  assert_false(ACP_JSON_STR_EQ_LIT(v, "x"));
  /* The literal form: the compiler counts, escapes and NULs included. */
  assert_true(ACP_JSON_STR_EQ_LIT(acp_json_arr_get(root, 7), "\xe2\x82\xac"));
  assert_false(ACP_JSON_STR_EQ_LIT(acp_json_arr_get(root, 7), "\xe2\x82"));
  assert_int_equal(acp_json_doc_str(doc, v, &s, &len), 0);
  assert_int_equal(len, 0);
  assert_int_equal(acp_json_str_unescape(v, buf, sizeof(buf), &len), 0);
  assert_string_equal(buf, "");

  /* wrong types */
  assert_int_equal(acp_json_doc_str(doc, root, &s, &len), ACP_ERR_TYPE);
  assert_int_equal(acp_json_str_unescape(root, buf, 8, &len), ACP_ERR_TYPE);
  assert_false(acp_json_str_eq(root, S("x")));
  assert_false(acp_json_str_has_escapes(root));
  acp_json_doc_free(doc);
}

static void test_json_doc_str_many_escaped_strings_stay_valid(void **state) {
  /* Enough escaped strings to need several arena blocks; every pointer
   * handed out must stay valid until the next parse. */
  char *in = malloc(200000);
  const char *ptrs[2000];
  size_t lens[2000];
  size_t n = 0;
  int i;
  acp_json_doc *doc;
  const acp_json_val *v;

  (void)state;
  assert_non_null(in);
  in[n++] = '[';
  for (i = 0; i < 2000; i++)
    n += (size_t)sprintf(in + n, "%s\"s\\n%04d%s\"", i ? "," : "", i,
                         i % 100 == 0 ? "\\u00e9xxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                      : "");
  in[n++] = ']';
  doc = parse_ok(in, n);
  for (i = 0, v = acp_json_child(acp_json_doc_root(doc)); v;
       v = acp_json_next(v), i++)
    assert_int_equal(acp_json_doc_str(doc, v, &ptrs[i], &lens[i]), 0);
  assert_int_equal(i, 2000);
  for (i = 0; i < 2000; i++) {
    char want[16];
    snprintf(want, sizeof(want), "s\n%04d", i);
    assert_memory_equal(ptrs[i], want, 6);
  }
  /* Reparse: the arena is reused. */
  assert_int_equal(acp_json_doc_parse(doc, in, n, NULL), 0);
  v = acp_json_arr_get(acp_json_doc_root(doc), 1999);
  assert_int_equal(acp_json_doc_str(doc, v, &ptrs[0], &lens[0]), 0);
  assert_memory_equal(ptrs[0], "s\n1999", 6);
  /* a value of another document is decoded into this one's arena */
  {
    acp_json_doc *other = parse_ok(S("\"o\\u0041\""));
    assert_int_equal(
        acp_json_doc_str(doc, acp_json_doc_root(other), &ptrs[1], &lens[1]), 0);
    assert_int_equal(lens[1], 2);
    assert_memory_equal(ptrs[1], "oA", 2);
    acp_json_doc_free(other);
  }
  acp_json_doc_free(doc);
  free(in);
}

static void test_json_raw_spans_are_byte_exact(void **state) {
  static const char in[] =
      "{\"a\":1.000000000000000000001,\"b\":12345678901234567890,"
      "\"c\":-0.0e-0,\"d\" : [ 1 , {\"e\" :\"\\u00e9\"} ] ,\"f\":1E400}";
  acp_json_doc *doc = parse_ok(S(in));
  const acp_json_val *root = acp_json_doc_root(doc);
  const char *raw;
  size_t len;
  double d;
  uint64_t u;
  int64_t i;

  (void)state;
  raw = acp_json_raw(acp_json_obj_getz(root, "a"), &len);
  assert_int_equal(len, strlen("1.000000000000000000001"));
  assert_memory_equal(raw, "1.000000000000000000001", len);
  raw = acp_json_raw(acp_json_obj_getz(root, "b"), &len);
  assert_memory_equal(raw, "12345678901234567890", len);
  assert_int_equal(len, 20);
  assert_int_equal(acp_json_get_uint64(acp_json_obj_getz(root, "b"), &u), 0);
  assert_true(u == UINT64_C(12345678901234567890));
  assert_int_equal(acp_json_get_int64(acp_json_obj_getz(root, "b"), &i),
                   ACP_ERR_RANGE);
  raw = acp_json_raw(acp_json_obj_getz(root, "c"), &len);
  assert_int_equal(len, 7);
  assert_memory_equal(raw, "-0.0e-0", 7);
  raw = acp_json_raw(acp_json_obj_getz(root, "d"), &len);
  assert_int_equal(len, strlen("[ 1 , {\"e\" :\"\\u00e9\"} ]"));
  assert_memory_equal(raw, "[ 1 , {\"e\" :\"\\u00e9\"} ]", len);
  raw = acp_json_raw(
      acp_json_child(acp_json_arr_get(acp_json_obj_getz(root, "d"), 1)), &len);
  assert_memory_equal(raw, "\"e\"", len);
  assert_int_equal(acp_json_get_double(acp_json_obj_getz(root, "a"), &d), 0);
  assert_true(d == 1.0);
  assert_int_equal(acp_json_get_double(acp_json_obj_getz(root, "f"), &d),
                   ACP_ERR_RANGE);
  acp_json_doc_free(doc);
}

static void test_json_integer_edges(void **state) {
  static const char in[] =
      "[-9223372036854775808,9223372036854775807,18446744073709551615,"
      "-9223372036854775809,9223372036854775808,18446744073709551616,"
      "-0,0,-1,1e2,1.0,99999999999999999999999999]";
  acp_json_doc *doc = parse_ok(S(in));
  const acp_json_val *r = acp_json_doc_root(doc);
  int64_t i;
  uint64_t u;
  double d;

  (void)state;
  assert_int_equal(acp_json_get_int64(acp_json_arr_get(r, 0), &i), 0);
  assert_true(i == INT64_MIN);
  assert_int_equal(acp_json_get_uint64(acp_json_arr_get(r, 0), &u),
                   ACP_ERR_RANGE);
  assert_int_equal(acp_json_get_int64(acp_json_arr_get(r, 1), &i), 0);
  assert_true(i == INT64_MAX);
  assert_int_equal(acp_json_get_uint64(acp_json_arr_get(r, 1), &u), 0);
  assert_true(u == (uint64_t)INT64_MAX);
  assert_int_equal(acp_json_get_int64(acp_json_arr_get(r, 2), &i),
                   ACP_ERR_RANGE);
  assert_int_equal(acp_json_get_uint64(acp_json_arr_get(r, 2), &u), 0);
  assert_true(u == UINT64_MAX);
  assert_int_equal(acp_json_get_int64(acp_json_arr_get(r, 3), &i),
                   ACP_ERR_RANGE);
  assert_int_equal(acp_json_get_int64(acp_json_arr_get(r, 4), &i),
                   ACP_ERR_RANGE);
  assert_int_equal(acp_json_get_uint64(acp_json_arr_get(r, 4), &u), 0);
  assert_true(u == (uint64_t)INT64_MAX + 1);
  assert_int_equal(acp_json_get_uint64(acp_json_arr_get(r, 5), &u),
                   ACP_ERR_RANGE);
  assert_int_equal(acp_json_get_int64(acp_json_arr_get(r, 6), &i), 0);
  assert_true(i == 0);
  assert_int_equal(acp_json_get_uint64(acp_json_arr_get(r, 6), &u), 0);
  assert_true(u == 0);
  assert_int_equal(acp_json_get_uint64(acp_json_arr_get(r, 8), &u),
                   ACP_ERR_RANGE);
  assert_int_equal(acp_json_get_int64(acp_json_arr_get(r, 8), &i), 0);
  assert_true(i == -1);
  assert_int_equal(acp_json_get_int64(acp_json_arr_get(r, 9), &i),
                   ACP_ERR_TYPE);
  assert_int_equal(acp_json_get_uint64(acp_json_arr_get(r, 10), &u),
                   ACP_ERR_TYPE);
  assert_int_equal(acp_json_get_double(acp_json_arr_get(r, 9), &d), 0);
  assert_true(d == 100.0);
  assert_int_equal(acp_json_get_double(acp_json_arr_get(r, 11), &d), 0);
  assert_true(d == 1e26);
  assert_int_equal(acp_json_get_int64(NULL, &i), ACP_ERR_TYPE);
  assert_int_equal(acp_json_get_double(r, &d), ACP_ERR_TYPE);
  acp_json_doc_free(doc);
}

/* Integers of every digit count 1..22 (19 and fewer take a path without
 * an overflow check per digit), both signs, against strtoull/strtoll. */
static void test_json_integers_every_digit_count(void **state) {
  static const char fill[] = {'9', '1', '8', '5', '0'};
  acp_json_doc *doc = NULL;
  char num[32];
  size_t nd, f, neg;

  (void)state;
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  for (nd = 1; nd <= 22; nd++) {
    for (f = 0; f < sizeof(fill); f++) {
      for (neg = 0; neg < 2; neg++) {
        size_t m = 0, i;
        int64_t iv = 0;
        uint64_t uv = 0;
        int rv_i, rv_u;
        unsigned long long ref_u;
        long long ref_i;
        int over_u, over_i;

        if (neg)
          num[m++] = '-';
        for (i = 0; i < nd; i++) /* first digit nonzero: valid JSON */
          num[m++] = i == 0 ? (char)('1' + (f * 3 + nd) % 9) : fill[f];
        num[m] = '\0';
        assert_int_equal(acp_json_doc_parse(doc, num, m, NULL), 0);
        rv_i = acp_json_get_int64(acp_json_doc_root(doc), &iv);
        rv_u = acp_json_get_uint64(acp_json_doc_root(doc), &uv);
        errno = 0;
        ref_i = strtoll(num, NULL, 10);
        over_i = errno == ERANGE;
        errno = 0;
        ref_u = strtoull(num + neg, NULL, 10);
        over_u = errno == ERANGE || neg; /* no "-0": nonzero lead */
        if (over_i) {
          assert_int_equal(rv_i, ACP_ERR_RANGE);
        } else {
          assert_int_equal(rv_i, 0);
          assert_true(iv == (int64_t)ref_i);
        }
        if (over_u) {
          assert_int_equal(rv_u, ACP_ERR_RANGE);
        } else {
          assert_int_equal(rv_u, 0);
          assert_true(uv == (uint64_t)ref_u);
        }
      }
    }
  }
  acp_json_doc_free(doc);
}

static void test_json_double_long_forms(void **state) {
  /* Numbers long enough to take the shortening path must still round
   * correctly, including a halfway case decided by a far digit. */
  char buf[4096];
  size_t n;
  acp_json_doc *doc;
  double d;
  int k;

  (void)state;
  /* 2^53 + 1 = 9007199254740993 is halfway between two doubles; a nonzero
   * digit far after it rounds up to 9007199254740994. */
  n = (size_t)sprintf(buf, "9007199254740993.");
  for (k = 0; k < 1500; k++)
    buf[n++] = '0';
  buf[n++] = '1';
  doc = parse_ok(buf, n);
  assert_int_equal(acp_json_get_double(acp_json_doc_root(doc), &d), 0);
  assert_true(d == 9007199254740994.0);
  acp_json_doc_free(doc);
  /* ... and exactly halfway rounds to even. */
  n = (size_t)sprintf(buf, "9007199254740993.");
  for (k = 0; k < 1500; k++)
    buf[n++] = '0';
  doc = parse_ok(buf, n);
  assert_int_equal(acp_json_get_double(acp_json_doc_root(doc), &d), 0);
  assert_true(d == 9007199254740992.0);
  acp_json_doc_free(doc);
  /* Leading fraction zeros and a large exponent. */
  n = (size_t)sprintf(buf, "-0.");
  for (k = 0; k < 300; k++)
    buf[n++] = '0';
  n += (size_t)sprintf(buf + n, "125e301");
  doc = parse_ok(buf, n);
  assert_int_equal(acp_json_get_double(acp_json_doc_root(doc), &d), 0);
  assert_true(d == -1.25);
  acp_json_doc_free(doc);
  /* Long zero. */
  n = (size_t)sprintf(buf, "0.");
  for (k = 0; k < 100; k++)
    buf[n++] = '0';
  doc = parse_ok(buf, n);
  assert_int_equal(acp_json_get_double(acp_json_doc_root(doc), &d), 0);
  assert_true(d == 0.0);
  acp_json_doc_free(doc);
  /* Long integer part with exponent going to infinity. */
  n = 0;
  for (k = 0; k < 100; k++)
    buf[n++] = '9';
  n += (size_t)sprintf(buf + n, "e99999999999999999999999");
  doc = parse_ok(buf, n);
  assert_int_equal(acp_json_get_double(acp_json_doc_root(doc), &d),
                   ACP_ERR_RANGE);
  acp_json_doc_free(doc);
}

static void test_json_rejects_bad_input(void **state) {
  static const char *bad[] = {
      "",
      " ",
      "[",
      "]",
      "{",
      "{\"a\"}",
      "{\"a\":}",
      "{\"a\":1,}",
      "[1,]",
      "[1 2]",
      "01",
      "-",
      "1.",
      "1e",
      "1e+",
      ".5",
      "+1",
      "tru",
      "nul",
      "falsey",
      "\"abc",
      "\"\\x\"",
      "\"\\u12\"",
      "\"\\u12G4\"",
      "[1]]",
      "{\"a\":1}x",
      "'a'",
      "NaN",
      "Infinity",
      "\"\t\"",
      "{1:2}",
      "{\"a\" 1}",
      "[,1]",
      "\"\\\"",
      "{\"a\":1\"b\":2}",
      "{\"a\":\"b\":\"c\"}",
  };
  size_t i;
  acp_json_err err;

  (void)state;
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (parse_rv(bad[i], strlen(bad[i])) != ACP_ERR_PARSE)
      fail_msg("accepted: %s", bad[i]);
  }
  /* UTF-8: overlong, surrogate, > U+10FFFF, truncated, stray, BOM */
  assert_int_equal(parse_rv(S("\"\xc0\xaf\"")), ACP_ERR_PARSE);
  assert_int_equal(parse_rv(S("\"\xe0\x80\xaf\"")), ACP_ERR_PARSE);
  assert_int_equal(parse_rv(S("\"\xf0\x80\x80\xaf\"")), ACP_ERR_PARSE);
  assert_int_equal(parse_rv(S("\"\xed\xa0\x80\"")), ACP_ERR_PARSE);
  assert_int_equal(parse_rv(S("\"\xf4\x90\x80\x80\"")), ACP_ERR_PARSE);
  assert_int_equal(parse_rv(S("\"\xe2\x82\"")), ACP_ERR_PARSE);
  assert_int_equal(parse_rv(S("\"\xe2\x82")), ACP_ERR_PARSE);
  assert_int_equal(parse_rv(S("\"\x80\"")), ACP_ERR_PARSE);
  assert_int_equal(parse_rv(S("\xef\xbb\xbf{}")), ACP_ERR_PARSE);
  assert_int_equal(parse_rv(S("\"\xf4\x8f\xbf\xbf\"")), 0);
  assert_int_equal(parse_rv(S("\"\xed\x9f\xbf\"")), 0);
  /* embedded NUL outside and inside a string */
  assert_int_equal(parse_rv(S("[1]\0")), ACP_ERR_PARSE);
  assert_int_equal(parse_rv(S("\"a\0b\"")), ACP_ERR_PARSE);
  /* error position */
  assert_int_equal(acp_json_validate(S("[1, 2, x]"), &err), ACP_ERR_PARSE);
  assert_int_equal(err.code, ACP_ERR_PARSE);
  assert_int_equal(err.pos, 7);
  assert_non_null(err.msg);
  assert_int_equal(acp_json_validate(NULL, 0, &err), ACP_ERR_PARSE);
  assert_int_equal(acp_json_validate(NULL, 1, &err), ACP_ERR_INVALID_ARGUMENT);
}

static void test_json_long_strings_swar_boundaries(void **state) {
  /* Put each special byte at every offset of an 8-byte word. */
  char buf[64];
  int off;
  acp_json_doc *doc = NULL;

  (void)state;
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  for (off = 0; off < 20; off++) {
    size_t n;
    memset(buf, 'a', sizeof(buf));
    buf[0] = '"';
    buf[1 + off] = '\x01';
    buf[30] = '"';
    assert_int_equal(acp_json_doc_parse(doc, buf, 31, NULL), ACP_ERR_PARSE);
    buf[1 + off] = '"';
    n = (size_t)off + 2;
    assert_int_equal(acp_json_doc_parse(doc, buf, n, NULL), 0);
    assert_int_equal(acp_json_doc_parse(doc, buf, 31, NULL), ACP_ERR_PARSE);
    memcpy(buf + 1 + off, "\xc3\xa9", 2);
    assert_int_equal(acp_json_doc_parse(doc, buf, 31, NULL), 0);
    assert_int_equal(acp_json_len(acp_json_doc_root(doc)), 0);
    buf[2 + off] = 'x';
    assert_int_equal(acp_json_doc_parse(doc, buf, 31, NULL), ACP_ERR_PARSE);
    memcpy(buf + 1 + off, "\\n", 2);
    assert_int_equal(acp_json_doc_parse(doc, buf, 31, NULL), 0);
    assert_true(acp_json_str_has_escapes(acp_json_doc_root(doc)));
  }
  acp_json_doc_free(doc);
}

static void test_json_depth_limit(void **state) {
  char buf[2100];
  acp_json_doc *doc = NULL;
  acp_json_err err;
  int i;

  (void)state;
  for (i = 0; i < 1000; i++) {
    buf[i] = '[';
    buf[2000 - 1 - i] = ']';
  }
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  /* 512 levels pass, 513 fail with ACP_ERR_LIMIT */
  assert_int_equal(acp_json_doc_parse(doc, buf + 1000 - 512, 1024, NULL), 0);
  assert_int_equal(acp_json_doc_parse(doc, buf + 1000 - 513, 1026, &err),
                   ACP_ERR_LIMIT);
  assert_int_equal(err.code, ACP_ERR_LIMIT);
  assert_null(acp_json_doc_root(doc));
  assert_int_equal(acp_json_validate(buf + 1000 - 512, 1024, NULL), 0);
  assert_int_equal(acp_json_validate(buf + 1000 - 513, 1026, NULL),
                   ACP_ERR_LIMIT);
  acp_json_doc_set_max_depth(doc, 3);
  assert_int_equal(acp_json_doc_parse(doc, S("[[[1]]]"), NULL), 0);
  assert_int_equal(acp_json_doc_parse(doc, S("[[{\"a\":[]}]]"), NULL),
                   ACP_ERR_LIMIT);
  acp_json_doc_set_max_depth(doc, 1000);
  assert_int_equal(acp_json_doc_parse(doc, buf, 2000, NULL), 0);
  acp_json_doc_set_max_depth(doc, 0);
  assert_int_equal(acp_json_doc_parse(doc, buf, 2000, NULL), ACP_ERR_LIMIT);
  acp_json_doc_free(doc);
}

static void test_json_doc_reuse_across_parses(void **state) {
  acp_json_doc *doc = NULL;
  char a[] = "{\"x\":[1,2,3],\"y\":\"a\\nb\"}";
  char b[] = "[true]";
  const char *s;
  size_t len;
  int k;

  (void)state;
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  assert_null(acp_json_doc_root(doc));
  for (k = 0; k < 3; k++) {
    assert_int_equal(acp_json_doc_parse(doc, a, strlen(a), NULL), 0);
    assert_int_equal(acp_json_len(acp_json_doc_root(doc)), 2);
    assert_int_equal(
        acp_json_doc_str(doc, acp_json_obj_getz(acp_json_doc_root(doc), "y"),
                         &s, &len),
        0);
    assert_memory_equal(s, "a\nb", 3);
    assert_int_equal(acp_json_doc_parse(doc, b, strlen(b), NULL), 0);
    assert_int_equal(acp_json_type_of(acp_json_doc_root(doc)), ACP_JSON_ARRAY);
    assert_int_equal(acp_json_len(acp_json_doc_root(doc)), 1);
    assert_int_equal(acp_json_doc_parse(doc, S("[1,"), NULL), ACP_ERR_PARSE);
    assert_null(acp_json_doc_root(doc));
  }
  assert_int_equal(acp_json_doc_parse(doc, NULL, 0, NULL), ACP_ERR_PARSE);
  assert_int_equal(acp_json_doc_parse(doc, NULL, 1, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_json_doc_parse(NULL, "1", 1, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_json_doc_new(NULL, NULL), ACP_ERR_INVALID_ARGUMENT);
  acp_json_doc_free(doc);
  acp_json_doc_free(NULL);
}

static void test_json_size_cap(void **state) {
  acp_json_doc *doc = NULL;
  acp_json_err err;

  (void)state;
  if (sizeof(size_t) < 8)
    skip();
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  /* The size is checked before any byte is read. */
  assert_int_equal(acp_json_doc_parse(doc, "1", (size_t)UINT32_MAX + 1, &err),
                   ACP_ERR_LIMIT);
  assert_int_equal(err.code, ACP_ERR_LIMIT);
  assert_int_equal(acp_json_validate("1", (size_t)UINT32_MAX + 1, NULL),
                   ACP_ERR_LIMIT);
  acp_json_doc_free(doc);
}

/* MARK: - Writer */

static void expect_out(acp_json_writer *w, const char *want) {
  size_t len;
  const char *d;

  assert_int_equal(acp_json_writer_error(w), 0);
  d = acp_json_writer_data(w, &len);
  if (len != strlen(want) || memcmp(d, want, len) != 0)
    fail_msg("got '%.*s' want '%s'", (int)len, d, want);
}

static void test_json_writer_builds_and_parses_back(void **state) {
  acp_json_writer *w = NULL;
  acp_json_doc *doc = NULL;
  const char *d;
  size_t len;
  const acp_json_val *r;
  int64_t i;
  uint64_t u;
  double x;

  (void)state;
  assert_int_equal(acp_json_writer_new(&w, 0, NULL), 0);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "s");
  acp_json_write_str(
      w, S("q\"b\\n\n\r\t\b\f\x01\x1f\x7f\xc3\xa9\xf0\x9f\x98\x80"));
  acp_json_write_key(w, S("k\0"));
  acp_json_write_int(w, INT64_MIN);
  acp_json_write_keyz(w, "u");
  acp_json_write_uint(w, UINT64_MAX);
  acp_json_write_keyz(w, "a");
  acp_json_write_arr_begin(w);
  acp_json_write_double(w, 0.1);
  acp_json_write_double(w, 1e300);
  acp_json_write_double(w, -0.0);
  acp_json_write_double(w, 5e-324);
  acp_json_write_double(w, 100);
  acp_json_write_bool(w, true);
  acp_json_write_bool(w, false);
  acp_json_write_null(w);
  acp_json_write_arr_begin(w);
  acp_json_write_arr_end(w);
  acp_json_write_obj_begin(w);
  acp_json_write_obj_end(w);
  acp_json_write_raw(w, S("{\"r\":1.50}"));
  acp_json_write_strz(w, "");
  acp_json_write_arr_end(w);
  acp_json_write_obj_end(w);
  expect_out(w, "{\"s\":\"q\\\"b\\\\n\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\xc3\xa9"
                "\xf0\x9f\x98\x80\",\"k\\u0000\":-9223372036854775808,"
                "\"u\":18446744073709551615,\"a\":[0.1,1e+300,-0,"
                "4.94065645841247e-324,100,true,false,null,[],{},"
                "{\"r\":1.50},\"\"]}");
  d = acp_json_writer_data(w, &len);
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  assert_int_equal(acp_json_doc_parse(doc, d, len, NULL), 0);
  r = acp_json_doc_root(doc);
  assert_true(acp_json_str_eq(
      acp_json_obj_getz(r, "s"),
      S("q\"b\\n\n\r\t\b\f\x01\x1f\x7f\xc3\xa9\xf0\x9f\x98\x80")));
  assert_int_equal(acp_json_get_int64(acp_json_obj_get(r, S("k\0")), &i), 0);
  assert_true(i == INT64_MIN);
  assert_int_equal(acp_json_get_uint64(acp_json_obj_getz(r, "u"), &u), 0);
  assert_true(u == UINT64_MAX);
  assert_int_equal(
      acp_json_get_double(acp_json_arr_get(acp_json_obj_getz(r, "a"), 0), &x),
      0);
  assert_true(x == 0.1);
  assert_int_equal(
      acp_json_get_double(acp_json_arr_get(acp_json_obj_getz(r, "a"), 3), &x),
      0);
  assert_true(x == 5e-324);
  acp_json_doc_free(doc);
  acp_json_writer_free(w);
}

static void test_json_writer_double_round_trips(void **state) {
  static const double vals[] = {0.1,
                                0.2,
                                1.0 / 3,
                                2.0 / 3,
                                1e21,
                                1e22,
                                123456789,
                                1.5e-7,
                                -1e-300,
                                1.7976931348623157e308,
                                2.2250738585072014e-308,
                                9007199254740993.0};
  acp_json_writer *w = NULL;
  acp_json_doc *doc = NULL;
  size_t k;

  (void)state;
  assert_int_equal(acp_json_writer_new(&w, 0, NULL), 0);
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  for (k = 0; k < sizeof(vals) / sizeof(vals[0]); k++) {
    const char *d;
    size_t len;
    double back;
    acp_json_writer_reset(w);
    assert_int_equal(acp_json_write_double(w, vals[k]), 0);
    d = acp_json_writer_data(w, &len);
    assert_int_equal(acp_json_doc_parse(doc, d, len, NULL), 0);
    assert_int_equal(acp_json_get_double(acp_json_doc_root(doc), &back), 0);
    assert_true(back == vals[k]);
  }
  acp_json_writer_reset(w);
  assert_int_equal(acp_json_write_double(w, 0.1), 0);
  expect_out(w, "0.1");
  acp_json_writer_reset(w);
  assert_int_equal(acp_json_write_double(w, INFINITY),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_json_writer_reset(w);
  assert_int_equal(acp_json_write_double(w, NAN), ACP_ERR_INVALID_ARGUMENT);
  acp_json_writer_reset(w);
  assert_int_equal(acp_json_write_double(w, -INFINITY),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_json_doc_free(doc);
  acp_json_writer_free(w);
}

static void test_json_writer_splices_parsed_values(void **state) {
  static const char in[] =
      "{\"id\":12345678901234567890,\"params\":{\"x\":1.000000000000000000001,"
      "\"s\":\"\\u00e9\\n\",\"z\":[ 1 ,2 ]},\"e\":\"\"}";
  acp_json_doc *doc = parse_ok(S(in));
  acp_json_writer *w = NULL;
  const acp_json_val *r = acp_json_doc_root(doc);

  (void)state;
  assert_int_equal(acp_json_writer_new(&w, 0, NULL), 0);
  assert_int_equal(acp_json_write_val(w, r), 0);
  expect_out(w, in);
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "jsonrpc");
  acp_json_write_strz(w, "2.0");
  acp_json_write_keyz(w, "id");
  acp_json_write_val(w, acp_json_obj_getz(r, "id"));
  acp_json_write_keyz(w, "result");
  acp_json_write_val(w, acp_json_obj_getz(r, "params"));
  acp_json_write_obj_end(w);
  expect_out(w, "{\"jsonrpc\":\"2.0\",\"id\":12345678901234567890,\"result\":"
                "{\"x\":1.000000000000000000001,\"s\":\"\\u00e9\\n\","
                "\"z\":[ 1 ,2 ]}}");
  acp_json_writer_free(w);
  acp_json_doc_free(doc);
}

/* A parsed string passes through as its raw text unless it has a \u
 * escape of a UTF-16 surrogate; either way the output decodes to what
 * acp_json_doc_str() gives. */
static void test_json_str_passthrough(void **state) {
  static const struct {
    const char *in;  /* a JSON string */
    int pass;        /* acp_json_str_passthrough() */
    const char *out; /* what acp_json_write_str_val() writes */
  } cases[] = {
      {"\"plain\"", 1, "\"plain\""},
      {"\"\"", 1, "\"\""},
      {"\"a\\nb\\\"c\\\\d\\/e\\u00e9\\u0001\"", 1,
       "\"a\\nb\\\"c\\\\d\\/e\\u00e9\\u0001\""},
      {"\"caf\xc3\xa9 \xf0\x9f\x98\x80\"", 1,
       "\"caf\xc3\xa9 \xf0\x9f\x98\x80\""},
      {"\"\\ucfff\\ue000\"", 1, "\"\\ucfff\\ue000\""},
      /* lone surrogates decode to U+FFFD: decoded and escaped again */
      {"\"x\\ud800y\"", 0, "\"x\xef\xbf\xbdy\""},
      {"\"\\uDFFF\"", 0, "\"\xef\xbf\xbd\""},
      {"\"\\uDbff\\n\"", 0, "\"\xef\xbf\xbd\\n\""},
      /* a pair is a surrogate escape too: decoded to its UTF-8 */
      {"\"\\ud83d\\ude00\"", 0, "\"\xf0\x9f\x98\x80\""},
  };
  acp_json_writer *w = NULL;
  size_t i;

  (void)state;
  assert_int_equal(acp_json_writer_new(&w, 0, NULL), 0);
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    acp_json_doc *doc = parse_ok(cases[i].in, strlen(cases[i].in));
    const acp_json_val *v = acp_json_doc_root(doc);
    acp_json_doc *back = NULL;
    const char *a, *b;
    size_t an, bn, len;
    const char *d;

    assert_int_equal(acp_json_str_passthrough(v), cases[i].pass);
    acp_json_writer_reset(w);
    assert_int_equal(acp_json_write_str_val(w, doc, v), 0);
    expect_out(w, cases[i].out);
    /* same decoded string */
    d = acp_json_writer_data(w, &len);
    back = parse_ok(d, len);
    assert_int_equal(acp_json_doc_str(doc, v, &a, &an), 0);
    assert_int_equal(acp_json_doc_str(back, acp_json_doc_root(back), &b, &bn),
                     0);
    assert_int_equal(an, bn);
    assert_memory_equal(a, b, an);
    acp_json_doc_free(back);
    /* without a document only the raw text can be written */
    acp_json_writer_reset(w);
    assert_int_equal(acp_json_write_str_val(w, NULL, v),
                     cases[i].pass ? 0 : ACP_ERR_INVALID_ARGUMENT);
    acp_json_doc_free(doc);
  }
  {
    acp_json_doc *doc = parse_ok(S("[1,{\"a\":\"b\"}]"));
    const acp_json_val *r = acp_json_doc_root(doc);

    assert_int_equal(acp_json_str_passthrough(r), 0);
    assert_int_equal(acp_json_str_passthrough(acp_json_child(r)), 0);
    assert_int_equal(acp_json_str_passthrough(NULL), 0);
    acp_json_writer_reset(w);
    assert_int_equal(acp_json_write_str_val(w, doc, r), ACP_ERR_TYPE);
    acp_json_writer_reset(w);
    assert_int_equal(acp_json_write_str_val(w, doc, NULL),
                     ACP_ERR_INVALID_ARGUMENT);
    assert_int_equal(acp_json_write_str_val(NULL, doc, r),
                     ACP_ERR_INVALID_ARGUMENT);
    acp_json_doc_free(doc);
  }
  acp_json_writer_free(w);
}

/* The reader's and the writer's wide steps (64 bytes, after a first block
 * of 16) must stop at a special byte wherever it falls: a quote, a
 * backslash, a control byte, a valid or an invalid UTF-8 sequence at every
 * offset of a long string, compared with a byte-at-a-time reference. */
static size_t ref_escape(const unsigned char *s, size_t n, char *out,
                         int *bad) {
  static const char hexd[] = "0123456789abcdef";
  size_t i, o = 0;

  *bad = 0;
  out[o++] = '"';
  for (i = 0; i < n; i++) {
    unsigned char c = s[i];
    if (c == '"' || c == '\\') {
      out[o++] = '\\';
      out[o++] = (char)c;
    } else if (c == '\n') {
      out[o++] = '\\';
      out[o++] = 'n';
    } else if (c < 0x20 && c != '\b' && c != '\f' && c != '\r' && c != '\t') {
      memcpy(out + o, "\\u00", 4);
      out[o + 4] = hexd[c >> 4];
      out[o + 5] = hexd[c & 15];
      o += 6;
    } else if (c == '\t' || c == '\r' || c == '\b' || c == '\f') {
      out[o++] = '\\';
      out[o++] = c == '\t' ? 't' : c == '\r' ? 'r' : c == '\b' ? 'b' : 'f';
    } else if (c >= 0x80) {
      /* the cases below use only E2 82 AC (U+20AC) as valid UTF-8 */
      if (c == 0xE2 && i + 2 < n && s[i + 1] == 0x82 && s[i + 2] == 0xAC) {
        memcpy(out + o, s + i, 3);
        o += 3;
        i += 2;
      } else {
        *bad = 1;
        return 0;
      }
    } else {
      out[o++] = (char)c;
    }
  }
  out[o++] = '"';
  return o;
}

/* The wide steps for long strings: four SSE2 blocks, or two AVX2 blocks
 * once a string has shown 80 plain bytes and the CPU has AVX2 (pass 0 runs
 * whichever the CPU takes; pass 1 turns AVX2 off). LEN spans several AVX2
 * steps. */
/* One case of the test below: `seq` written over `filler` at `at`, read
 * and written with the wide UTF-8 steps on and off: both must give the
 * same verdict, the same error offset and the same bytes. Returns 1 if the
 * text was valid. */
static int utf8_case(acp_json_doc *doc, acp_json_writer *w, const char *filler,
                     size_t flen, size_t shift, const unsigned char *seq,
                     size_t sl, size_t at) {
  enum { LEN = 112 };
  char text[LEN + 2];
  char out[2][LEN * 6 + 8];
  size_t outn[2];
  char dec[2][LEN];
  size_t decn[2];
  int rv[2];
  int wrv[2];
  size_t eoff[2];
  int pass;
  size_t i;

  /* `shift` ASCII bytes, whole characters of the filler, 'z' where the
   * next character would not fit, then seq written over it. */
  text[0] = '"';
  for (i = 0; i < shift; i++)
    text[1 + i] = 'x';
  while (i < LEN) {
    unsigned char lead = (unsigned char)filler[(i - shift) % flen];
    size_t cl = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    size_t j;

    if (i + cl > LEN) {
      while (i < LEN)
        text[1 + i++] = 'z';
      break;
    }
    for (j = 0; j < cl; j++, i++)
      text[1 + i] = filler[(i - shift) % flen];
  }
  memcpy(text + 1 + at, seq, sl);
  text[LEN + 1] = '"';
  for (pass = 0; pass < 2; pass++) {
    acp_json_err e;
    const char *d;
    size_t n;

#ifdef ACP__JSON_AVX2
    acp__json_no_avx2 = pass;
#endif
    memset(&e, 0, sizeof(e));
    rv[pass] = acp_json_doc_parse(doc, text, LEN + 2, &e);
    eoff[pass] = rv[pass] == 0 ? 0 : e.pos;
    outn[pass] = 0;
    decn[pass] = 0;
    if (rv[pass] == 0) {
      /* Escapes in seq ("\\n") make the decoded text shorter. */
      assert_int_equal(acp_json_doc_str(doc, acp_json_doc_root(doc), &d, &n),
                       0);
      assert_true(n <= LEN);
      memcpy(dec[pass], d, n);
      decn[pass] = n;
    }
    acp_json_writer_reset(w);
    wrv[pass] = acp_json_write_str(w, text + 1, LEN);
    if (wrv[pass] == 0) {
      d = acp_json_writer_data(w, &n);
      assert_true(n <= sizeof(out[pass]));
      memcpy(out[pass], d, n);
      outn[pass] = n;
    }
  }
#ifdef ACP__JSON_AVX2
  acp__json_no_avx2 = 0;
#endif
  assert_int_equal(rv[0], rv[1]);
  assert_int_equal(eoff[0], eoff[1]);
  assert_int_equal(wrv[0], wrv[1]);
  assert_int_equal(outn[0], outn[1]);
  assert_memory_equal(out[0], out[1], outn[0]);
  assert_int_equal(decn[0], decn[1]);
  assert_memory_equal(dec[0], dec[1], decn[0]);
  return rv[0] == 0;
}

/* Text that is not ASCII takes 32-byte UTF-8 steps (json_avx2.c): every
 * pair of bytes, and every run of four from the bytes where the rules
 * change, over fillers of two-, three- and four-byte characters and across
 * a block boundary, gets the verdict and the bytes of the character-at-a-
 * time path. */
static void test_json_utf8_wide_steps_match_byte_steps(void **state) {
  static const char *const fillers[] = {
      "\xc3\xa9",
      "\xe4\xb8\xad",
      "\xf0\x9f\x98\x80",
      "a\xc3\xa9\xe4\xb8\xadz",
      "\xf0\x9f\x98\x80\xc3\xa9xy\xe4\xb8\xad",
      "\xc3\xa9\xf0\x9f\x98\x80"
      "abc"};
  static const unsigned char edges[] = {
      0x1f, 0x20, 0x22, 0x5c, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0,
      0xc1, 0xc2, 0xe0, 0xe1, 0xed, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xff};
  enum { NE = sizeof(edges) };
  acp_json_writer *w = NULL;
  acp_json_doc *doc = NULL;
  unsigned char seq[4];
  size_t f, a, b, c, d;
  size_t valid = 0;
  size_t total = 0;

  (void)state;
  assert_int_equal(acp_json_writer_new(&w, 0, NULL), 0);
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  /* Every byte pair, over each filler, straddling the first and second
   * block ends of a run that starts at the text's first character. */
  for (f = 0; f < sizeof(fillers) / sizeof(fillers[0]); f++) {
    size_t fl = strlen(fillers[f]);
    for (a = 0; a < 256; a++) {
      for (b = 0; b < 256; b++) {
        seq[0] = (unsigned char)a;
        seq[1] = (unsigned char)b;
        valid += (size_t)utf8_case(doc, w, fillers[f], fl, 0, seq, 2,
                                   (a + b) % 2 == 0 ? 31 : 63);
        total++;
      }
    }
  }
  /* Runs of four where three- and four-byte characters are decided. */
  for (a = 0; a < NE; a++)
    for (b = 0; b < NE; b++)
      for (c = 0; c < NE; c++)
        for (d = 0; d < NE; d++) {
          seq[0] = edges[a];
          seq[1] = edges[b];
          seq[2] = edges[c];
          seq[3] = edges[d];
          valid += (size_t)utf8_case(doc, w, fillers[(a + c) % 6],
                                     strlen(fillers[(a + c) % 6]), 0, seq, 4,
                                     30 + (b + d) % 4);
          total++;
        }
  /* Valid text whose block ends fall at every byte of a character: the
   * wide steps must stop on a whole character and accept it all. */
  for (f = 0; f < sizeof(fillers) / sizeof(fillers[0]); f++)
    for (a = 0; a < 8; a++)
      assert_int_equal(
          utf8_case(doc, w, fillers[f], strlen(fillers[f]), a, seq, 0, 0), 1);
#ifdef ACP__JSON_AVX2
  /* And the steps themselves take valid text to within a block and a
   * character of its end (a rejection would be safe, the byte steps
   * deciding, but slow): the tables must not flag what is valid. */
  if (acp__json_have_avx2()) {
    for (f = 0; f < sizeof(fillers) / sizeof(fillers[0]); f++) {
      const char *fl = fillers[f];
      unsigned char run[200];
      size_t n = 0;
      size_t got;
      size_t cl = strlen(fl);

      while (n + cl <= sizeof(run)) {
        memcpy(run + n, fl, cl);
        n += cl;
      }
      got = acp__json_plain_utf8_avx2(run, n);
      assert_true(got + 32 + 3 >= n);
      assert_true(got == n || (run[got] & 0xC0) != 0x80);
      got = acp__json_copy_utf8_avx2(run, run, n);
      assert_true(got + 32 + 3 >= n);
    }
  }
#endif
  /* Both verdicts were reached many times. */
  assert_true(valid > 1000);
  assert_true(total - valid > 1000);
  acp_json_doc_free(doc);
  acp_json_writer_free(w);
}

/* The Unicode Standard's table 3-7 (well-formed UTF-8 byte sequences),
 * byte by byte: the length of the longest valid prefix of s[0..n). Written
 * apart from acp__utf8_seq() so that the two can disagree. */
static size_t utf8_ref_len(const unsigned char *s, size_t n) {
  static const struct {
    unsigned char lo, hi; /* lead bytes */
    unsigned char len;
    unsigned char lo2, hi2; /* second byte */
  } rows[] = {{0x00, 0x7F, 1, 0, 0},       {0xC2, 0xDF, 2, 0x80, 0xBF},
              {0xE0, 0xE0, 3, 0xA0, 0xBF}, {0xE1, 0xEC, 3, 0x80, 0xBF},
              {0xED, 0xED, 3, 0x80, 0x9F}, {0xEE, 0xEF, 3, 0x80, 0xBF},
              {0xF0, 0xF0, 4, 0x90, 0xBF}, {0xF1, 0xF3, 4, 0x80, 0xBF},
              {0xF4, 0xF4, 4, 0x80, 0x8F}};
  size_t i = 0;

  while (i < n) {
    size_t r, k;
    for (r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
      if (s[i] >= rows[r].lo && s[i] <= rows[r].hi)
        break;
    if (r == sizeof(rows) / sizeof(rows[0]) || i + rows[r].len > n)
      return i;
    for (k = 1; k < rows[r].len; k++) {
      unsigned char lo = k == 1 ? rows[r].lo2 : 0x80;
      unsigned char hi = k == 1 ? rows[r].hi2 : 0xBF;
      if (s[i + k] < lo || s[i + k] > hi)
        return i;
    }
    i += rows[r].len;
  }
  return n;
}

/* The first CR or LF of s[0..n), or n: what acp__eol_find() must give. */
static size_t eol_ref(const unsigned char *s, size_t n) {
  size_t i;
  for (i = 0; i < n; i++)
    if (s[i] == '\r' || s[i] == '\n')
      break;
  return i;
}

/* acp__eol_find() (the SSE parser's search for a line's end) and
 * acp__eol_blank() (a POST body made one line) against a byte loop: one
 * CR or LF at every offset around the 16- and 64-byte steps, in texts
 * with bytes over 0x7F (which stop neither); then random texts. */
static void test_eol_find_and_blank_match_a_byte_loop(void **state) {
  unsigned char buf[300], line[300];
  unsigned seed = 777;
  size_t n, at, j, found = 0;
  int i;
  (void)state;

  memset(buf, 'a', sizeof(buf));
  for (n = 0; n <= 140; n++)
    for (at = 0; at <= n; at++) {
      for (j = 0; j < n; j++)
        buf[j] = (unsigned char)(j % 3 == 0 ? 0xC3 : 'a' + j % 26);
      if (at < n)
        buf[at] = (n + at) % 2 ? '\n' : '\r';
      assert_int_equal(acp__eol_find(buf, n), at);
      memcpy(line, buf, n);
      acp__eol_blank(line, n);
      for (j = 0; j < n; j++)
        assert_int_equal(line[j], j == at ? ' ' : buf[j]);
    }
  for (i = 0; i < 20000; i++) {
    n = (size_t)(i % 300);
    for (j = 0; j < n; j++) {
      unsigned r;
      seed = seed * 1103515245u + 12345u;
      r = (seed >> 16) & 0x7FFF;
      buf[j] = r % 131 == 0   ? '\n'
               : r % 127 == 0 ? '\r'
                              : (unsigned char)(r >> 7);
    }
    at = eol_ref(buf, n);
    found += at < n;
    assert_int_equal(acp__eol_find(buf, n), at);
    memcpy(line, buf, n);
    acp__eol_blank(line, n);
    for (j = 0; j < n; j++)
      assert_int_equal(line[j],
                       buf[j] == '\n' || buf[j] == '\r' ? ' ' : buf[j]);
  }
  assert_true(found > 5000 && found < 19000); /* both outcomes, often */
  assert_int_equal(acp__eol_find(NULL, 0), 0);
}

/* The same four scans over long runs, where they go on in 64-byte
 * registers after their first kilobyte on a CPU with AVX-512BW: a line
 * break, a character or a bad byte at every offset around and past the
 * switch, against the byte loops, with the wide steps on and off. */
static void test_utf8_and_eol_wide_steps_past_the_switch(void **state) {
  static const char *const stops[] = {
      "\n", "\r", "\xc3\xa9", "\xf0\x9f\x98\x80", "\xff", "\xe2\x82"};
  enum { N = 16 + 1024 + 700 };
  unsigned char *buf = malloc(N), *line = malloc(N), *exp = malloc(N);
  size_t k, at, j;
  int pass;
  (void)state;
  assert_non_null(buf);
  assert_non_null(line);
  assert_non_null(exp);
  for (pass = 0; pass < 2; pass++) {
    acp__utf8_no_wide = pass;
    for (k = 0; k < sizeof(stops) / sizeof(stops[0]); k++) {
      size_t sl = strlen(stops[k]);
      for (at = 16 + 1024 - 80; at + sl <= N; at++) {
        size_t want, weol;
        for (j = 0; j < N; j++)
          buf[j] = (unsigned char)('a' + j % 26);
        memcpy(buf + at, stops[k], sl);
        want = utf8_ref_len(buf, N);
        weol = eol_ref(buf, N);
        assert_int_equal(acp__utf8_valid_len(buf, N), want);
        assert_int_equal(acp__eol_find(buf, N), weol);
        for (j = 0; j < N; j++)
          exp[j] =
              j < want && (buf[j] == '\n' || buf[j] == '\r') ? ' ' : buf[j];
        memcpy(line, buf, N);
        assert_int_equal(acp__utf8_line(line, N), want);
        assert_memory_equal(line, exp, N);
        for (j = 0; j < N; j++)
          exp[j] = buf[j] == '\n' || buf[j] == '\r' ? ' ' : buf[j];
        memcpy(line, buf, N);
        acp__eol_blank(line, N);
        assert_memory_equal(line, exp, N);
      }
    }
    /* and a run with nothing in it, to the end */
    for (j = 0; j < N; j++)
      buf[j] = (unsigned char)('a' + j % 26);
    assert_int_equal(acp__utf8_valid_len(buf, N), N);
    assert_int_equal(acp__eol_find(buf, N), N);
  }
  acp__utf8_no_wide = 0;
  free(exp);
  free(line);
  free(buf);
}

/* acp__utf8_valid_len() (the WebSocket codec's check of every text
 * message) against the table: every lead byte with second bytes on both
 * sides of each range's edges, at offsets on both sides of its 16- and
 * 64-byte steps, whole and cut short; then random mostly-ASCII texts,
 * also through acp__utf8_line(), which blanks their CRs and LFs. */
static void test_utf8_valid_len_matches_the_table(void **state) {
  static const unsigned char seconds[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90,
                                          0x9F, 0xA0, 0xBF, 0xC0, 0xFF};
  static const unsigned char thirds[] = {0x80, 0xBF, 0x41, 0xC0};
  static const size_t offsets[] = {0,  1,  15, 16, 17, 47,
                                   63, 64, 65, 79, 80, 130};
  static const size_t tails[] = {0, 1, 15, 16, 70};
  unsigned char buf[256];
  size_t cases = 0, valid = 0, blanked = 0;
  unsigned lead;
  unsigned seed = 12345;
  int i;
  (void)state;

  for (lead = 0x80; lead <= 0xFF; lead++) {
    size_t a, b, c, o, t;
    for (a = 0; a < sizeof(seconds); a++)
      for (b = 0; b < sizeof(thirds); b++)
        for (c = 0; c < 2; c++)
          for (o = 0; o < sizeof(offsets) / sizeof(offsets[0]); o++)
            for (t = 0; t < sizeof(tails) / sizeof(tails[0]); t++) {
              size_t at = offsets[o];
              size_t n = at + 4 + tails[t];
              /* cut after each byte of the sequence, and whole */
              const size_t cuts[] = {at + 1, at + 2, at + 3, n};
              size_t k;
              memset(buf, 'a', sizeof(buf));
              buf[at] = (unsigned char)lead;
              buf[at + 1] = seconds[a];
              buf[at + 2] = thirds[b];
              buf[at + 3] = thirds[c];
              for (k = 0; k < 4; k++) {
                size_t want = utf8_ref_len(buf, cuts[k]);
                assert_int_equal(acp__utf8_valid_len(buf, cuts[k]), want);
                cases++;
                valid += want == cuts[k];
              }
            }
  }
  /* Random texts: mostly ASCII, now and then any byte, or a valid
   * two-, three- or four-byte character. */
  for (i = 0; i < 20000; i++) {
    size_t n = 0, want;
    size_t len = (size_t)(i % 250);
    while (n < len) {
      unsigned r;
      seed = seed * 1103515245u + 12345u;
      r = (seed >> 16) & 0x7FFF;
      if (r % 97 == 0) {
        buf[n++] = (unsigned char)(r >> 7);
      } else if (r % 89 == 0) {
        buf[n++] = (r & 1) ? '\n' : '\r';
      } else if (r % 13 == 0 && n + 4 <= len) {
        static const char *const chars[] = {"\xc3\xa9", "\xe2\x82\xac",
                                            "\xf0\x9f\x98\x80", "\xed\x9f\xbf"};
        const char *ch = chars[(r >> 4) & 3];
        memcpy(buf + n, ch, strlen(ch));
        n += strlen(ch);
      } else {
        buf[n++] = (unsigned char)(0x20 + r % 95);
      }
    }
    want = utf8_ref_len(buf, n);
    assert_int_equal(acp__utf8_valid_len(buf, n), want);
    valid += want == n;
    cases++;
    /* The line form: the same length, and CR and LF of that prefix
     * blanked, nothing else touched. */
    {
      unsigned char line[256];
      size_t j;
      memcpy(line, buf, n);
      assert_int_equal(acp__utf8_line(line, n), want);
      for (j = 0; j < n; j++)
        assert_int_equal(line[j], j < want && (buf[j] == '\n' || buf[j] == '\r')
                                      ? ' '
                                      : buf[j]);
      blanked += memchr(buf, '\n', want) != NULL;
    }
  }
  /* Both verdicts, many times each; line feeds blanked now and then. */
  assert_true(blanked > 100);
  assert_true(valid > 10000);
  assert_true(cases - valid > 10000);
  assert_int_equal(acp__utf8_valid_len(NULL, 0), 0);
}

/* The paths of the long-string steps (json_int.h): pass 0 takes the
 * widest the CPU has, pass 1 SSE2 blocks only, pass 2 AVX2 without
 * AVX-512. */
#ifndef ACP__JSON_WIDE_FROM
#define ACP__JSON_WIDE_FROM ((size_t)1024)
#endif
static void wide_mode(int pass) {
#ifdef ACP__JSON_AVX2
  acp__json_no_avx2 = pass == 1;
  acp__json_no_avx512 = pass == 2;
#else
  (void)pass;
#endif
}

/* A text of `len` bytes with one special byte or sequence at every offset
 * from `from` on, written and read back on each path: the writer's output
 * must be the reference escaping, the reader must give the text back, and
 * what is not JSON must be refused by both. */
static void wide_steps_case(size_t len, size_t from, int passes) {
  static const char *const specials[] = {
      "\"",           "\\",   "\n",       "\x01", "\x1f",
      "\xe2\x82\xac", "\xff", "\xe2\x82", "\xc3", "\x80"};
  unsigned char *src = malloc(len + 4);
  char *want = malloc(len * 6 + 8);
  char *doc_text = malloc(len * 6 + 8);
  acp_json_writer *w = NULL;
  acp_json_doc *doc = NULL;
  size_t k, at, i, n, wlen;
  int bad;
  int pass;

  assert_non_null(src);
  assert_non_null(want);
  assert_non_null(doc_text);
  assert_int_equal(acp_json_writer_new(&w, 0, NULL), 0);
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  for (pass = 0; pass < passes; pass++) {
    wide_mode(pass);
    for (k = 0; k < sizeof(specials) / sizeof(specials[0]); k++) {
      size_t sl = strlen(specials[k]);
      for (at = from; at + sl <= len; at++) {
        const char *d;
        const char *s;

        for (i = 0; i < len; i++)
          src[i] = (unsigned char)('a' + i % 26);
        memcpy(src + at, specials[k], sl);
        wlen = ref_escape(src, len, want, &bad);
        acp_json_writer_reset(w);
        if (bad) {
          assert_int_equal(acp_json_write_str(w, (const char *)src, len),
                           ACP_ERR_INVALID_ARGUMENT);
          /* the raw bytes in quotes are not JSON for the reader either */
          doc_text[0] = '"';
          memcpy(doc_text + 1, src, len);
          doc_text[len + 1] = '"';
          assert_int_not_equal(acp_json_doc_parse(doc, doc_text, len + 2, NULL),
                               0);
          continue;
        }
        assert_int_equal(acp_json_write_str(w, (const char *)src, len), 0);
        d = acp_json_writer_data(w, &n);
        assert_int_equal(n, wlen);
        assert_memory_equal(d, want, wlen);
        /* and the reader takes it back whole */
        assert_int_equal(acp_json_doc_parse(doc, want, wlen, NULL), 0);
        assert_int_equal(acp_json_doc_str(doc, acp_json_doc_root(doc), &s, &n),
                         0);
        assert_int_equal(n, len);
        assert_memory_equal(s, src, len);
        /* an unescaped control byte or quote inside is an error for it */
        if (specials[k][0] == '\n' || specials[k][0] == 1 ||
            specials[k][0] == 0x1f || specials[k][0] == '"') {
          doc_text[0] = '"';
          memcpy(doc_text + 1, src, len);
          doc_text[len + 1] = '"';
          assert_int_not_equal(acp_json_doc_parse(doc, doc_text, len + 2, NULL),
                               0);
        }
      }
    }
  }
  wide_mode(0);
  acp_json_doc_free(doc);
  acp_json_writer_free(w);
  free(doc_text);
  free(want);
  free(src);
}

static void test_json_wide_steps_stop_at_every_offset(void **state) {
  (void)state;
  wide_steps_case(420, 0, 2);
}

/* Past ACP__JSON_WIDE_FROM, where a long run goes on in 64-byte registers
 * on a CPU with AVX-512BW: a special byte at every offset from a block
 * before the switch to the end, on all three paths. */
static void test_json_wide_steps_past_the_avx512_switch(void **state) {
  (void)state;
  wide_steps_case(ACP__JSON_WIDE_FROM + 700, ACP__JSON_WIDE_FROM - 130, 3);
}

#ifdef ACP__JSON_AVX2
static int plain_byte(unsigned b) {
  return b >= 0x20 && b < 0x80 && b != '"' && b != '\\';
}

/* One case of the test below: byte b at `at` of s[0..n). */
static void plain_wide_case(unsigned char *s, unsigned char *d, size_t n,
                            size_t at, unsigned b, int pass) {
  size_t full = acp__json_have_avx2() ? n & ~(size_t)63 : 0;
  size_t want = full;
  size_t got;
  size_t i;
  unsigned char keep = s[at];

  s[at] = (unsigned char)b;
  if (!plain_byte(b) && at < full)
    want = at & ~(size_t)63;
  got = acp__json_plain_wide(s, n);
  if (got != want)
    fail_msg("pass %d, length %zu, byte 0x%02x at %zu: %zu, not %zu", pass, n,
             b, at, got, want);
  memset(d, 0xEE, n);
  got = acp__json_copy_plain_wide(d, s, n);
  assert_int_equal(got, want);
  assert_memory_equal(d, s, got);
  for (i = got; i < n; i++)
    assert_int_equal(d[i], 0xEE);
  s[at] = keep;
}
#endif

/* The run functions themselves (json_int.h): for lengths on both sides of
 * the AVX-512 threshold, bytes of each kind at every offset of the last
 * 700 and every byte value at offsets around the switch and block ends,
 * each path returns the leading whole 64-byte blocks free of special
 * bytes (0 without AVX2), and the copy stores just those bytes. Says which
 * paths this CPU has. */
static void test_json_plain_wide_every_byte(void **state) {
#ifdef ACP__JSON_AVX2
  enum { N = ACP__JSON_WIDE_FROM + 1100 };
  static const size_t lens[] = {0,
                                63,
                                64,
                                200,
                                ACP__JSON_WIDE_FROM,
                                ACP__JSON_WIDE_FROM + 255,
                                ACP__JSON_WIDE_FROM + 256,
                                ACP__JSON_WIDE_FROM + 319,
                                ACP__JSON_WIDE_FROM + 577,
                                N};
  /* each kind of byte and its neighbours */
  static const unsigned char kinds[] = {0x00, 0x1F, 0x20, 0x21, '"',  0x23,
                                        0x5B, '\\', 0x5D, 0x7F, 0x80, 0xFF};
  static const size_t spots[] = {0,
                                 63,
                                 64,
                                 ACP__JSON_WIDE_FROM - 1,
                                 ACP__JSON_WIDE_FROM,
                                 ACP__JSON_WIDE_FROM + 255,
                                 ACP__JSON_WIDE_FROM + 256,
                                 ACP__JSON_WIDE_FROM + 447,
                                 N - 1};
  unsigned char *s = malloc(N);
  unsigned char *d = malloc(N);
  size_t li, at, i, k;
  unsigned b;
  int pass;

  (void)state;
  assert_non_null(s);
  assert_non_null(d);
  print_message("wide steps here: AVX2 %s, AVX-512BW %s\n",
                __builtin_cpu_supports("avx2") ? "yes" : "no",
                __builtin_cpu_supports("avx512bw") ? "yes" : "no");
  for (i = 0; i < N; i++)
    s[i] = (unsigned char)('a' + i % 26);
  for (pass = 0; pass < 3; pass++) {
    wide_mode(pass);
    for (li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
      size_t n = lens[li];

      assert_int_equal(acp__json_plain_wide(s, n),
                       acp__json_have_avx2() ? n & ~(size_t)63 : 0);
      for (at = n > 700 ? n - 700 : 0; at < n; at++)
        for (k = 0; k < sizeof(kinds); k++)
          plain_wide_case(s, d, n, at, kinds[k], pass);
      for (k = 0; k < sizeof(spots) / sizeof(spots[0]); k++)
        for (b = 0; spots[k] < n && b < 256; b++)
          plain_wide_case(s, d, n, spots[k], b, pass);
    }
  }
  wide_mode(0);
  free(d);
  free(s);
#else
  (void)state;
  skip(); /* no wide steps in this build (not x86-64, or ACP_NO_AVX2) */
#endif
}

/* Short strings (keys, names, ids, small texts): every length up to 48,
 * plain or with one special byte (or sequence) at every offset. The
 * writer's last block overlaps the one before it (16 bytes, then 8), so
 * each length ends in a different overlap; the output must equal the
 * reference escaping, and invalid UTF-8 must be refused. */
static void
test_json_writer_short_strings_every_length_and_offset(void **state) {
  static const char *const specials[] = {
      "",     "\"",   "\\",           "\n",   "\x01",    "\x1f",
      "\x7f", "\xff", "\xe2\x82\xac", "\xc3", "\xe2\x82"};
  enum { MAXLEN = 48 };
  unsigned char src[MAXLEN + 4];
  char want[MAXLEN * 6 + 8];
  acp_json_writer *w = NULL;
  size_t k, at, len, i, wlen, olen;
  int bad;
  int pass;

  (void)state;
  assert_int_equal(acp_json_writer_new(&w, 0, NULL), 0);
  for (pass = 0; pass < 2; pass++) {
#ifdef ACP__JSON_AVX2
    acp__json_no_avx2 = pass;
#endif
    for (k = 0; k < sizeof(specials) / sizeof(specials[0]); k++) {
      size_t sl = strlen(specials[k]);
      for (len = sl; len <= MAXLEN; len++) {
        for (at = 0; at + sl <= len; at++) {
          const char *d;
          for (i = 0; i < len; i++)
            src[i] = (unsigned char)('A' + (i * 7) % 58);
          for (i = 0; i < len; i++)
            if (src[i] == '\\')
              src[i] = 'z';
          memcpy(src + at, specials[k], sl);
          wlen = ref_escape(src, len, want, &bad);
          acp_json_writer_reset(w);
          if (bad) {
            assert_int_equal(acp_json_write_str(w, (const char *)src, len),
                             ACP_ERR_INVALID_ARGUMENT);
            continue;
          }
          assert_int_equal(acp_json_write_str(w, (const char *)src, len), 0);
          d = acp_json_writer_data(w, &olen);
          assert_int_equal(olen, wlen);
          assert_memory_equal(d, want, wlen);
          if (sl == 0)
            break; /* a plain string: one per length */
        }
      }
    }
  }
#ifdef ACP__JSON_AVX2
  acp__json_no_avx2 = 0;
#endif
  acp_json_writer_free(w);
}

static void test_json_writer_structural_misuse(void **state) {
  acp_json_writer *w = NULL;
  int k;

  (void)state;
  assert_int_equal(acp_json_writer_new(&w, 0, NULL), 0);
  /* value where a key is expected; error is sticky */
  acp_json_write_obj_begin(w);
  assert_int_equal(acp_json_write_int(w, 1), ACP_ERR_INVALID_STATE);
  assert_int_equal(acp_json_write_keyz(w, "a"), ACP_ERR_INVALID_STATE);
  assert_int_equal(acp_json_writer_error(w), ACP_ERR_INVALID_STATE);
  acp_json_writer_reset(w);
  assert_int_equal(acp_json_writer_error(w), 0);
  /* key outside an object */
  assert_int_equal(acp_json_write_keyz(w, "a"), ACP_ERR_INVALID_STATE);
  acp_json_writer_reset(w);
  acp_json_write_arr_begin(w);
  assert_int_equal(acp_json_write_keyz(w, "a"), ACP_ERR_INVALID_STATE);
  acp_json_writer_reset(w);
  /* unbalanced ends */
  assert_int_equal(acp_json_write_arr_end(w), ACP_ERR_INVALID_STATE);
  acp_json_writer_reset(w);
  acp_json_write_arr_begin(w);
  assert_int_equal(acp_json_write_obj_end(w), ACP_ERR_INVALID_STATE);
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "k");
  assert_int_equal(acp_json_write_obj_end(w), ACP_ERR_INVALID_STATE);
  acp_json_writer_reset(w);
  /* two top-level values */
  assert_int_equal(acp_json_write_null(w), 0);
  assert_int_equal(acp_json_write_null(w), ACP_ERR_INVALID_STATE);
  acp_json_writer_reset(w);
  /* key twice */
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "k");
  assert_int_equal(acp_json_write_keyz(w, "k"), ACP_ERR_INVALID_STATE);
  acp_json_writer_reset(w);
  /* invalid UTF-8 and NULL arguments */
  assert_int_equal(acp_json_write_str(w, S("\xc3")), ACP_ERR_INVALID_ARGUMENT);
  acp_json_writer_reset(w);
  assert_int_equal(acp_json_write_str(w, S("a\xed\xa0\x80")),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_json_writer_reset(w);
  assert_int_equal(acp_json_write_str(w, S("\xc0\x80")),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  assert_int_equal(acp_json_write_key(w, S("\xff")), ACP_ERR_INVALID_ARGUMENT);
  acp_json_writer_reset(w);
  assert_int_equal(acp_json_write_strz(w, NULL), ACP_ERR_INVALID_ARGUMENT);
  acp_json_writer_reset(w);
  assert_int_equal(acp_json_write_val(w, NULL), ACP_ERR_INVALID_ARGUMENT);
  acp_json_writer_reset(w);
  assert_int_equal(acp_json_write_raw(w, NULL, 0), ACP_ERR_INVALID_ARGUMENT);
  acp_json_writer_reset(w);
  /* nesting limit of 1024 */
  for (k = 0; k < 1024; k++)
    assert_int_equal(acp_json_write_arr_begin(w), 0);
  assert_int_equal(acp_json_write_arr_begin(w), ACP_ERR_LIMIT);
  acp_json_writer_reset(w);
  for (k = 0; k < 1024; k++)
    acp_json_write_arr_begin(w);
  for (k = 0; k < 1024; k++)
    assert_int_equal(acp_json_write_arr_end(w), 0);
  assert_int_equal(acp_json_write_arr_end(w), ACP_ERR_INVALID_STATE);
  assert_int_equal(acp_json_write_null(NULL), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_json_writer_new(NULL, 0, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_json_writer_free(w);
  acp_json_writer_free(NULL);
}

static void test_json_writer_cap(void **state) {
  acp_json_writer *w = NULL;
  size_t len;

  (void)state;
  assert_int_equal(acp_json_writer_new(&w, 10, NULL), 0);
  assert_int_equal(acp_json_write_str(w, S("12345678")), 0); /* 10 bytes */
  acp_json_writer_data(w, &len);
  assert_int_equal(len, 10);
  acp_json_writer_reset(w);
  acp_json_write_arr_begin(w);
  assert_int_equal(acp_json_write_str(w, S("12345678")), ACP_ERR_LIMIT);
  assert_int_equal(acp_json_write_arr_end(w), ACP_ERR_LIMIT);
  assert_int_equal(acp_json_writer_error(w), ACP_ERR_LIMIT);
  acp_json_writer_reset(w);
  /* escapes count toward the cap: "\u0001" is 8 bytes with quotes */
  assert_int_equal(acp_json_write_str(w, S("\x01\x01")), ACP_ERR_LIMIT);
  acp_json_writer_reset(w);
  assert_int_equal(acp_json_write_str(w, S("\x01")), 0);
  acp_json_writer_free(w);
}

/* MARK: - Allocation failure */

/* One scenario: parse, decode strings, write back. Returns 0 when it ran to
 * completion, or the first error (which must be ACP_ERR_NOMEM). */
static int scenario(failmem *fm, const char *in, size_t n) {
  acp_mem mem = {fm, fm_malloc, fm_free, fm_calloc, fm_realloc};
  acp_json_doc *doc = NULL;
  acp_json_writer *w = NULL;
  const acp_json_val *v;
  const char *s;
  size_t len;
  int rv;
  int k;

  rv = acp_json_doc_new(&doc, &mem);
  if (rv != 0)
    goto cleanup;
  for (k = 0; k < 2; k++) {
    rv = acp_json_doc_parse(doc, in, n, NULL);
    if (rv != 0)
      goto cleanup;
    for (v = acp_json_child(acp_json_doc_root(doc)); v; v = acp_json_next(v)) {
      if (acp_json_type_of(v) != ACP_JSON_STRING)
        continue;
      rv = acp_json_doc_str(doc, v, &s, &len);
      if (rv != 0)
        goto cleanup;
    }
  }
  rv = acp_json_writer_new(&w, 0, &mem);
  if (rv != 0)
    goto cleanup;
  acp_json_write_arr_begin(w);
  for (v = acp_json_child(acp_json_doc_root(doc)); v; v = acp_json_next(v)) {
    if (acp_json_type_of(v) == ACP_JSON_STRING) {
      acp_json_doc_str(doc, v, &s, &len);
      acp_json_write_str(w, s, len);
    } else {
      acp_json_write_val(w, v);
    }
  }
  acp_json_write_arr_end(w);
  rv = acp_json_writer_error(w);
cleanup:
  acp_json_writer_free(w);
  acp_json_doc_free(doc);
  return rv;
}

static void test_json_allocation_failures(void **state) {
  char *in = malloc(1 << 20);
  size_t n = 0;
  long i;
  int k;
  int rv;
  failmem fm = {.count = 0, .fail_at = -1, .live = 0};

  (void)state;
  assert_non_null(in);
  /* deep enough to grow the stack, long enough to grow the tape, strings
   * with escapes large enough for several arena blocks */
  in[n++] = '[';
  for (k = 0; k < 40; k++)
    in[n++] = '[';
  for (k = 0; k < 40; k++)
    in[n++] = ']';
  for (k = 0; k < 100; k++)
    n += (size_t)sprintf(in + n, ",%d,\"e\\n%0*d\"", k, k * 40 + 1, k);
  in[n++] = ']';
  assert_int_equal(acp_json_validate(in, n, NULL), 0);
  assert_int_equal(scenario(&fm, in, n), 0);
  assert_int_equal(fm.live, 0);
  for (i = 0;; i++) {
    fm.fail_at = i;
    fm.count = 0;
    fm.live = 0;
    rv = scenario(&fm, in, n);
    assert_int_equal(fm.live, 0);
    if (rv == 0)
      break;
    assert_int_equal(rv, ACP_ERR_NOMEM);
  }
  assert_true(i > 5);
  printf("allocation failure test: %ld failure points\n", i);
  free(in);
}

/* The string writer copies plain runs 16 or 8 bytes at a time and escapes
 * the rest: random strings of every length around those block sizes, made
 * of plain bytes, quotes, backslashes, control bytes, multi-byte UTF-8 and
 * invalid bytes, must read back identical, or be refused when not UTF-8.
 * Deterministic (fixed seed). */
static uint32_t rng_next(uint32_t *st) {
  uint32_t x = *st;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  *st = x;
  return x;
}

static void test_writer_random_strings_round_trip(void **state) {
  static const char *const pieces[] = {"a",
                                       "Z",
                                       " ",
                                       "~",
                                       "\"",
                                       "\\",
                                       "\n",
                                       "\x01",
                                       "\x1f",
                                       "\x7f",
                                       "\xc3\xa9",
                                       "\xe2\x82\xac",
                                       "\xf0\x9f\x98\x80",
                                       "/"};
  static const char *const bad[] = {"\xff", "\xc3", "\xed\xa0\x80", "\xc0\xaf"};
  acp_json_writer *w = NULL;
  acp_json_doc *doc = NULL;
  char in[300];
  uint32_t st = 12345;
  int round;
  int refused = 0;

  (void)state;
  assert_int_equal(acp_json_writer_new(&w, 0, NULL), 0);
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  for (round = 0; round < 4000; round++) {
    size_t target = rng_next(&st) % 70;
    size_t n = 0;
    int invalid = (rng_next(&st) % 10) == 0;
    const char *out;
    const char *dec;
    size_t olen;
    size_t dlen;
    int rv;

    /* Mostly plain bytes, so that long plain runs cross block edges. */
    while (n < target) {
      const char *p = (rng_next(&st) % 4) ? "x" : pieces[rng_next(&st) % 14];
      size_t pl = strlen(p) ? strlen(p) : 1;
      if (n + pl > sizeof(in) - 8)
        break;
      memcpy(in + n, p, pl);
      n += pl;
    }
    if (invalid) {
      const char *b = bad[rng_next(&st) % 4];
      size_t at = n ? rng_next(&st) % (n + 1) : 0;
      size_t bl = strlen(b);
      memmove(in + at + bl, in + at, n - at);
      memcpy(in + at, b, bl);
      n += bl;
    }
    acp_json_writer_reset(w);
    rv = acp_json_write_str(w, in, n);
    if (invalid) {
      assert_int_equal(rv, ACP_ERR_INVALID_ARGUMENT);
      refused++;
      continue;
    }
    assert_int_equal(rv, 0);
    out = acp_json_writer_data(w, &olen);
    assert_int_equal(acp_json_doc_parse(doc, out, olen, NULL), 0);
    assert_int_equal(acp_json_doc_str(doc, acp_json_doc_root(doc), &dec, &dlen),
                     0);
    assert_int_equal(dlen, n);
    assert_memory_equal(dec, in, n);
  }
  assert_true(refused > 100);
  acp_json_doc_free(doc);
  acp_json_writer_free(w);
}

/* The tape's sibling links and counts, for random nested documents with
 * random whitespace: walking child/next must give back every value in
 * order (re-serialized, it equals the compact text), each container's
 * acp_json_len() must be the number of children walked, and its raw text
 * must span exactly its brackets. Deterministic (fixed seed). */
struct tape_gen {
  char sp[4096];
  char co[4096];
  size_t ns;
  size_t nc;
  uint32_t st;
};

static void tg_put(struct tape_gen *g, const char *t) {
  size_t l = strlen(t);
  memcpy(g->sp + g->ns, t, l);
  g->ns += l;
  memcpy(g->co + g->nc, t, l);
  g->nc += l;
}

static void tg_ws(struct tape_gen *g) {
  static const char *const ws[] = {"", "", "", " ", "\n", "\t ", "\r\n  "};
  const char *w = ws[rng_next(&g->st) % 7];
  size_t l = strlen(w);
  memcpy(g->sp + g->ns, w, l);
  g->ns += l;
}

static void tg_value(struct tape_gen *g, int depth) {
  static const char *const scalars[] = {"0",
                                        "-1",
                                        "12.5e3",
                                        "true",
                                        "false",
                                        "null",
                                        "\"\"",
                                        "\"abc\"",
                                        "\"a\\n\\u00e9\"",
                                        "\"0123456789abcdefghij\""};
  uint32_t r = rng_next(&g->st) % 10;
  int i;
  int n;

  if (depth < 5 && g->ns < 2500 && r < 4) {
    int obj = r < 2;
    n = (int)(rng_next(&g->st) % 5);
    tg_put(g, obj ? "{" : "[");
    for (i = 0; i < n; i++) {
      if (i > 0)
        tg_put(g, ",");
      tg_ws(g);
      if (obj) {
        tg_put(g, i % 2 ? "\"k\"" : "\"key\\t\"");
        tg_ws(g);
        tg_put(g, ":");
        tg_ws(g);
      }
      tg_value(g, depth + 1);
      tg_ws(g);
    }
    tg_ws(g);
    tg_put(g, obj ? "}" : "]");
    return;
  }
  tg_put(g, scalars[rng_next(&g->st) % 10]);
}

static void tape_walk(const acp_json_val *v, char *out, size_t *n) {
  acp_json_type t = acp_json_type_of(v);
  const acp_json_val *c;
  const char *raw;
  size_t len;
  size_t kids = 0;
  int obj = t == ACP_JSON_OBJECT;

  raw = acp_json_raw(v, &len);
  if (t != ACP_JSON_OBJECT && t != ACP_JSON_ARRAY) {
    memcpy(out + *n, raw, len);
    *n += len;
    return;
  }
  assert_int_equal(raw[0], obj ? '{' : '[');
  assert_int_equal(raw[len - 1], obj ? '}' : ']');
  out[(*n)++] = raw[0];
  for (c = acp_json_child(v); c; c = acp_json_next(c)) {
    if (kids > 0)
      out[(*n)++] = ',';
    if (obj) {
      tape_walk(c, out, n);
      out[(*n)++] = ':';
      c = acp_json_next(c);
      assert_non_null(c);
    }
    tape_walk(c, out, n);
    kids++;
  }
  assert_int_equal(acp_json_len(v), kids);
  out[(*n)++] = raw[len - 1];
}

static void test_json_tape_links_random_documents(void **state) {
  struct tape_gen g;
  acp_json_doc *doc = NULL;
  char out[4096];
  size_t n;
  int round;

  (void)state;
  g.st = 424242;
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  for (round = 0; round < 2000; round++) {
    g.ns = 0;
    g.nc = 0;
    tg_ws(&g);
    tg_value(&g, 0);
    tg_ws(&g);
    assert_int_equal(acp_json_doc_parse(doc, g.sp, g.ns, NULL), 0);
    assert_int_equal(acp_json_validate(g.sp, g.ns, NULL), 0);
    n = 0;
    tape_walk(acp_json_doc_root(doc), out, &n);
    assert_int_equal(n, g.nc);
    assert_memory_equal(out, g.co, n);
    assert_null(acp_json_next(acp_json_doc_root(doc)));
  }
  acp_json_doc_free(doc);
}

/* Whitespace before the byte a step expects is skipped only when that byte
 * is not there: errors after whitespace keep their code, message and
 * position, in acp_json_doc_parse() and acp_json_validate() alike. */
static void test_json_errors_after_whitespace(void **state) {
  static const struct {
    const char *in;
    size_t pos;
    const char *msg;
  } cases[] = {
      {"[1 , 2 x]", 7, "expected ',' or ']' in array"},
      {"{\"a\":1 \t x}", 9, "expected ',' or '}' in object"},
      {"{\"a\" x 1}", 5, "expected ':' after key"},
      {"{\"a\" ", 5, "expected ':' after key"},
      {"{\"a\":1,  x}", 9, "expected a string key"},
      {"{ x}", 2, "expected a string key"},
      {"[1,  ]", 5, "unexpected character, expected a value"},
      {"{\"a\": }", 6, "unexpected character, expected a value"},
      {"[1 ,\t", 5, "unexpected end of input, expected a value"},
      {"  ", 2, "unexpected end of input, expected a value"},
      {"[1  ", 4, "unexpected end of input in container"},
      {"[1] x", 4, "unexpected data after the JSON value"},
  };
  acp_json_doc *doc = NULL;
  acp_json_err err;
  size_t i;

  (void)state;
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    size_t len = strlen(cases[i].in);
    assert_int_equal(acp_json_doc_parse(doc, cases[i].in, len, &err),
                     ACP_ERR_PARSE);
    assert_int_equal(err.pos, cases[i].pos);
    assert_string_equal(err.msg, cases[i].msg);
    assert_null(acp_json_doc_root(doc));
    assert_int_equal(acp_json_validate(cases[i].in, len, &err), ACP_ERR_PARSE);
    assert_int_equal(err.pos, cases[i].pos);
    assert_string_equal(err.msg, cases[i].msg);
  }
  acp_json_doc_free(doc);
}

/* Key lookup and str_eq compare short keys without memcmp (overlapping
 * loads): every length 0-40, a difference at every position, the key and
 * the document each in a heap block of exactly their size (so that ASan
 * sees any read past either). */
/*
 * The parser's string entry tests the first 16, 32 and 48 bytes inline and
 * hands everything else to an out-of-line walk (string_rest()). Each special
 * (an escape, UTF-8, a bad byte) at every offset of strings of every
 * length up to 72, as a value and as a key, with 0..20 bytes after the
 * document, so both sides of the 16-byte test and of the input's end are
 * taken: the verdict, the error offset, the escape flag, the decoded text
 * and the value after the string must all come out the same, through
 * acp_json_doc_parse(), acp_json_validate() and the NDJSON line parse.
 */
static void test_json_parse_strings_every_length_offset_and_tail(void **state) {
  static const struct {
    const char *src;  /* as it appears in the JSON text */
    const char *text; /* decoded, NULL when the string is invalid */
    int esc;
  } specials[] = {
      {"", "", 0},
      {"\\\"", "\"", 1},
      {"\\\\", "\\", 1},
      {"\\n", "\n", 1},
      {"\\/", "/", 1},
      {"\\u00e9", "\xc3\xa9", 1},
      {"\\ud83d\\ude00", "\xf0\x9f\x98\x80", 1},
      {"\xc3\xa9", "\xc3\xa9", 0},
      {"\xe2\x82\xac", "\xe2\x82\xac", 0},
      {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80", 0},
      {"\x7f", "\x7f", 0},
      {"\x01", NULL, 0},
      {"\x1f", NULL, 0},
      {"\n", NULL, 0},
      {"\xff", NULL, 0},
      {"\xc3", NULL, 0},
      {"\xed\xa0\x80", NULL, 0},
      {"\\x", NULL, 0},
      {"\\u12G4", NULL, 0},
  };
  enum { MAXLEN = 72, MAXTAIL = 20 };
  char body[MAXLEN + 16];
  char want[MAXLEN + 16];
  char in[MAXLEN + MAXTAIL + 32];
  acp_json_doc *doc = NULL;
  size_t k, len, at, tail, i, n, wlen;
  int as_key;

  (void)state;
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  for (k = 0; k < sizeof(specials) / sizeof(specials[0]); k++) {
    size_t sl = strlen(specials[k].src);
    for (len = 0; len <= MAXLEN; len++) {
      for (at = 0; at <= len; at++) {
        /* len plain bytes with the special inserted at `at` */
        for (i = 0, n = 0; i < len; i++) {
          if (i == at) {
            memcpy(body + n, specials[k].src, sl);
            n += sl;
          }
          body[n++] = (char)('A' + (i * 7) % 26);
        }
        if (at == len) {
          memcpy(body + n, specials[k].src, sl);
          n += sl;
        }
        wlen = 0;
        if (specials[k].text != NULL) {
          size_t tl = strlen(specials[k].text);
          for (i = 0; i < len; i++) {
            if (i == at) {
              memcpy(want + wlen, specials[k].text, tl);
              wlen += tl;
            }
            want[wlen++] = (char)('A' + (i * 7) % 26);
          }
          if (at == len) {
            memcpy(want + wlen, specials[k].text, tl);
            wlen += tl;
          }
        }
        for (as_key = 0; as_key < 2; as_key++) {
          for (tail = 0; tail <= MAXTAIL; tail++) {
            size_t m = 0;
            size_t line_len = 0;
            acp_json_err err = {0};
            const acp_json_val *v;
            const acp_json_val *after;
            const char *d;
            size_t dl;
            int64_t iv;
            int rv;

            memcpy(in + m, as_key ? "{\"" : "[\"", 2);
            m += 2;
            memcpy(in + m, body, n);
            m += n;
            memcpy(in + m, as_key ? "\":7}" : "\",7]", 4);
            m += 4;
            memset(in + m, ' ', tail);
            m += tail;
            in[m] = '\n';
            rv = acp_json_doc_parse(doc, in, m, &err);
            assert_int_equal(acp_json_validate(in, m, NULL) == 0, rv == 0);
            if (specials[k].text == NULL) {
              if (rv == 0)
                fail_msg("special %zu len %zu at %zu tail %zu: accepted", k,
                         len, at, tail);
              assert_int_equal(err.code, ACP_ERR_PARSE);
              assert_int_equal(err.pos, 2 + at);
              assert_int_not_equal(
                  acp__json_doc_parse_line(doc, in, m + 1, &line_len), 0);
              continue;
            }
            if (rv != 0)
              fail_msg("special %zu len %zu at %zu tail %zu: %s at %zu", k, len,
                       at, tail, err.msg, err.pos);
            for (int pass = 0; pass < 2; pass++) {
              if (pass == 1) {
                assert_int_equal(
                    acp__json_doc_parse_line(doc, in, m + 1, &line_len), 0);
                assert_int_equal(line_len, m);
              }
              v = acp_json_child(acp_json_doc_root(doc));
              after = as_key
                          ? acp_json_obj_get(acp_json_doc_root(doc), want, wlen)
                          : acp_json_next(v);
              assert_int_equal(acp_json_type_of(v), ACP_JSON_STRING);
              assert_int_equal(acp_json_str_has_escapes(v), specials[k].esc);
              assert_int_equal(acp_json_raw(v, &dl) - in, 1);
              assert_int_equal(dl, n + 2);
              assert_int_equal(acp_json_doc_str(doc, v, &d, &dl), 0);
              assert_int_equal(dl, wlen);
              assert_memory_equal(d, want, wlen);
              assert_int_equal(acp_json_get_int64(after, &iv), 0);
              assert_int_equal(iv, 7);
            }
          }
        }
        if (sl == 0)
          break; /* a plain string: one per length */
      }
    }
  }
  acp_json_doc_free(doc);
}

/* MARK: - Kept lines (acp__json_doc_parse_line) */

/* The tapes of two documents that parsed the same bytes: record for
 * record, raw included. */
static void assert_same_tape(const acp_json_doc *a, const acp_json_doc *b) {
  assert_int_equal(a->tape_n, b->tape_n);
  for (uint32_t i = 0; i < a->tape_n; i++) {
    assert_ptr_equal(a->tape[i].raw, b->tape[i].raw);
    assert_int_equal(a->tape[i].len, b->tape[i].len);
    assert_int_equal(a->tape[i].next, b->tape[i].next);
    assert_int_equal(a->tape[i].count, b->tape[i].count);
    assert_int_equal(a->tape[i].type, b->tape[i].type);
    assert_int_equal(a->tape[i].flags, b->tape[i].flags);
  }
}

/* A document keeps short lines from its third on and takes a later line
 * that differs from one only in the strings and numbers of its values
 * without running the parser ("Shapes" in json_read.c). Each line below,
 * after its kept line, gives what a fresh document gives (verdict, line
 * length, tape), and is taken from the kept line (shape_hits) or parsed as
 * listed. `depth`: the limit set after the kept line (0: unchanged). */
static void test_json_parse_line_kept_shapes(void **state) {
#define PROMPT(id, text)                                                       \
  "{\"jsonrpc\":\"2.0\",\"id\":" id ",\"method\":\"session/prompt\","          \
  "\"params\":{\"sessionId\":\"sess_b3c02249a35bac78a35b4cc61370c98e\","       \
  "\"prompt\":[{\"type\":\"text\",\"text\":" text "}]}}\n"
  static const struct {
    const char *kept;
    const char *line;
    bool ok;
    bool match;
    uint32_t depth;
  } cases[] = {
      {PROMPT("2", "\"abcde\""), PROMPT("3", "\"abcde\""), true, true, 0},
      {PROMPT("2", "\"abcde\""),
       PROMPT("123456", "\"a longer text, still plain\""), true, true, 0},
      {PROMPT("2", "\"abcde\""), PROMPT("-7", "\"\""), true, true, 0},
      /* Escapes (and a surrogate pair), UTF-8, 200 bytes: the parser's
       * own string steps. */
      {PROMPT("2", "\"abcde\""),
       PROMPT("2", "\"a\\nb\\\"c\\u00e9\\ud83d\\ude00\""), true, true, 0},
      {PROMPT("2", "\"abcde\""),
       PROMPT("2", "\"h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93\""), true, true,
       0},
      {PROMPT("2", "\"abcde\""),
       PROMPT(
           "2",
           "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
           "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
           "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
           "xxxxxxxx\""),
       true, true, 0},
      /* What a hole must not hold: both refuse it. */
      {PROMPT("2", "\"abcde\""), PROMPT("2", "\"ab\tc\""), false, false, 0},
      {PROMPT("2", "\"abcde\""), PROMPT("2", "\"ab\xc3\x28\""), false, false,
       0},
      {PROMPT("2", "\"abcde\""), PROMPT("2", "\"ab\\x\""), false, false, 0},
      {PROMPT("2", "\"abcde\""), PROMPT("02", "\"abcde\""), false, false, 0},
      {PROMPT("2", "\"abcde\""), PROMPT("2.", "\"abcde\""), false, false, 0},
      /* Another shape: parsed. */
      {PROMPT("2", "\"abcde\""), PROMPT("\"2\"", "\"abcde\""), true, false, 0},
      {PROMPT("2", "\"abcde\""), PROMPT("2", "7"), true, false, 0},
      {PROMPT("2", "\"abcde\""), PROMPT("2", "\"abcde\",\"x\":1"), true, false,
       0},
      {"{\"a\":true,\"b\":null}\n", "{\"a\":false,\"b\":null}\n", true, false,
       0},
      {"{\"a\":\"b\"}\n", "{\"a\": \"b\"}\n", true, false, 0},
      {"{\"a\":\"b\"}\n", "{\"A\":\"b\"}\n", true, false, 0},
      /* Numbers of every form; nested containers, whose lengths change
       * with their holes'. */
      {"{\"a\":[1,2.5,-3e2,0]}\n", "{\"a\":[-10,0.001,7E+5,123456789]}\n", true,
       true, 0},
      {"{\"x\":{\"y\":[\"s\",{\"z\":\"t\"}],\"w\":1},\"v\":[]}\n",
       "{\"x\":{\"y\":[\"sss\",{\"z\":\"\"}],\"w\":100},\"v\":[]}\n", true,
       true, 0},
      {"[[\"a\"],[\"b\",[\"c\"]]]\n", "[[\"\"],[\"bbbb\",[\"cc\"]]]\n", true,
       true, 0},
      /* Scalars alone, whitespace (part of the kept bytes), escaped keys
       * (kept as they are), a quote in a hole. */
      {"\"abc\"\n", "\"abcdef\"\n", true, true, 0},
      {"5\n", "-5.5e-3\n", true, true, 0},
      {" { \"a\" : \"b\" } \r\n", " { \"a\" : \"bbb\" } \r\n", true, true, 0},
      {"{\"\\u0061\":\"x\"}\n", "{\"\\u0061\":\"yy\"}\n", true, true, 0},
      {"[\"a\",\"b\"]\n", "[\"a\\\"\",\"b\"]\n", true, true, 0},
      /* An escaped quote does not end a hole: read as the end, the rest
       * would match the kept line's bytes (`,"` then `"]`). */
      {"[\"a\",\"b\"]\n", "[\"x\\\",\",\"]\n", false, false, 0},
      {"\"a\"\n", "\"\\\"\n", false, false, 0},
      /* The line ends at its line feed; one without is refused. */
      {"{\"a\":\"b\"}\n", "{\"a\":\"c\"}\n{\"a\":\"d\"}\n", true, true, 0},
      {"{\"a\":\"b\"}\n", "{\"a\":\"c\"}", false, false, 0},
      {"{\"a\":\"b\"}\n", "{\"a\":\"c\"} x\n", false, false, 0},
      /* A kept line deeper than the limit set since: parsed, refused. */
      {"[[[1]]]\n", "[[[2]]]\n", false, false, 2},
      {"[[[1]]]\n", "[[[2]]]\n", true, true, 3},
  };
#undef PROMPT
  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    acp_json_doc *doc = NULL;
    acp_json_doc *fresh = NULL;
    size_t n = strlen(cases[i].line);
    char *line = malloc(n); /* exactly the line: no byte after it */
    size_t at = 0;
    size_t at_fresh = 0;
    uint64_t hits;
    int rv;
    int rf;

    assert_non_null(line);
    memcpy(line, cases[i].line, n);
    assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
    assert_int_equal(acp_json_doc_new(&fresh, NULL), 0);
    /* The first two lines are not kept; the third is. */
    assert_int_equal(acp__json_doc_parse_line(doc, "{}\n", 3, &at), 0);
    assert_int_equal(acp__json_doc_parse_line(doc, "[]\n", 3, &at), 0);
    assert_int_equal(acp__json_doc_parse_line(doc, cases[i].kept,
                                              strlen(cases[i].kept), &at),
                     0);
    if (cases[i].depth != 0) {
      acp_json_doc_set_max_depth(doc, cases[i].depth);
      acp_json_doc_set_max_depth(fresh, cases[i].depth);
    }
    hits = doc->shape_hits;
    rv = acp__json_doc_parse_line(doc, line, n, &at);
    rf = acp__json_doc_parse_line(fresh, line, n, &at_fresh);
    if ((rv == 0) != cases[i].ok || (rf == 0) != cases[i].ok)
      fail_msg("case %zu: %d (fresh %d), want %s", i, rv, rf,
               cases[i].ok ? "ok" : "an error");
    if (doc->shape_hits - hits != (cases[i].match ? 1u : 0u))
      fail_msg("case %zu: %s the kept line", i,
               cases[i].match ? "did not match" : "matched");
    if (rv == 0) {
      assert_int_equal(at, at_fresh);
      assert_int_equal(line[at], '\n');
      assert_same_tape(doc, fresh);
    } else {
      assert_null(acp_json_doc_root(doc));
    }
    acp_json_doc_free(fresh);
    acp_json_doc_free(doc);
    free(line);
  }
}

/* Lines of shapes that do not repeat are kept less and less often; a
 * stream of two alternating shapes matches from its third pair on, with
 * the same tapes as a fresh parse; four kept shapes at most, the least
 * recently used replaced. */
static void test_json_parse_line_kept_shapes_stream(void **state) {
  acp_json_doc *doc = NULL;
  acp_json_doc *fresh = NULL;
  char line[128];
  size_t at = 0;
  size_t at2 = 0;
  uint64_t hits;
  int kept = 0;

  (void)state;
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  assert_int_equal(acp_json_doc_new(&fresh, NULL), 0);
  /* The first two lines are not kept. */
  assert_int_equal(acp__json_doc_parse_line(doc, "{\"a\":1}\n", 8, &at), 0);
  assert_int_equal(acp__json_doc_parse_line(doc, "{\"a\":1}\n", 8, &at), 0);
  assert_null(doc->shapes[0]);
  /* 200 shapes, each new (a key of its own): none matches, and after
   * the first kept ones go unused, lines are kept 63 apart at most. */
  for (int i = 0; i < 200; i++) {
    int n = snprintf(line, sizeof(line), "{\"k%d\":%d}\n", i, i);
    assert_int_equal(acp__json_doc_parse_line(doc, line, (size_t)n, &at), 0);
  }
  assert_int_equal(doc->shape_hits, 0);
  for (int i = 0; i < ACP__JSHAPES; i++)
    kept += doc->shapes[i] != NULL;
  assert_int_equal(kept, ACP__JSHAPES);
  assert_true(doc->shape_streak == 6);
  /* Two shapes in turn: each kept once more, then matched. */
  hits = doc->shape_hits;
  for (int i = 0; i < 200; i++) {
    int n = i % 2
                ? snprintf(line, sizeof(line),
                           "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{}}\n", i)
                : snprintf(line, sizeof(line),
                           "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":"
                           "{\"text\":\"%*s\"}}\n",
                           i % 37, "");
    assert_int_equal(acp__json_doc_parse_line(doc, line, (size_t)n, &at), 0);
    assert_int_equal(acp__json_doc_parse_line(fresh, line, (size_t)n, &at2), 0);
    assert_int_equal(at, at2);
    assert_same_tape(doc, fresh);
  }
  /* Kept within the first 64 lines (the skip left by the 200 before),
   * then every line matched. */
  assert_true(doc->shape_hits - hits >= 200 - 64 - 2);
  assert_int_equal(doc->shape_streak, 0);
  acp_json_doc_free(fresh);
  acp_json_doc_free(doc);
}

static void test_json_key_compare_every_length(void **state) {
  acp_json_doc *doc = NULL;
  size_t n;
  size_t j;

  (void)state;
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  for (n = 0; n <= 40; n++) {
    char *key = malloc(n ? n : 1);
    char *in = malloc(n + 6);
    const acp_json_val *root;
    const acp_json_val *v;

    assert_non_null(key);
    assert_non_null(in);
    for (j = 0; j < n; j++)
      key[j] = (char)('a' + (j * 7) % 26);
    in[0] = '{';
    in[1] = '"';
    memcpy(in + 2, key, n);
    memcpy(in + 2 + n, "\":1}", 4);
    assert_int_equal(acp_json_doc_parse(doc, in, n + 6, NULL), 0);
    root = acp_json_doc_root(doc);
    v = acp_json_obj_get(root, key, n);
    assert_non_null(v);
    assert_int_equal(acp_json_type_of(v), ACP_JSON_NUMBER);
    assert_true(acp_json_str_eq(acp_json_child(root), key, n));
    if (n > 0) {
      assert_null(acp_json_obj_get(root, key, n - 1));
      assert_false(acp_json_str_eq(acp_json_child(root), key, n - 1));
    }
    for (j = 0; j < n; j++) {
      char c = key[j];
      key[j] = (char)(c ^ 0x01);
      assert_null(acp_json_obj_get(root, key, n));
      assert_false(acp_json_str_eq(acp_json_child(root), key, n));
      key[j] = (char)(c ^ (char)0x80);
      assert_null(acp_json_obj_get(root, key, n));
      key[j] = c;
    }
    assert_non_null(acp_json_obj_get(root, key, n));
    free(key);
    free(in);
  }
  acp_json_doc_free(doc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_writer_random_strings_round_trip),
      cmocka_unit_test(test_json_accessors_and_types),
      cmocka_unit_test(test_json_iteration_skips_subtrees),
      cmocka_unit_test(test_json_obj_get_escaped_keys),
      cmocka_unit_test(test_json_obj_get_plain_then_escaped_keys),
      cmocka_unit_test(test_json_inline_lookups_match_general),
      cmocka_unit_test(test_json_str_eq_and_unescape),
      cmocka_unit_test(test_json_doc_str_many_escaped_strings_stay_valid),
      cmocka_unit_test(test_json_raw_spans_are_byte_exact),
      cmocka_unit_test(test_json_integer_edges),
      cmocka_unit_test(test_json_integers_every_digit_count),
      cmocka_unit_test(test_json_double_long_forms),
      cmocka_unit_test(test_json_rejects_bad_input),
      cmocka_unit_test(test_json_long_strings_swar_boundaries),
      cmocka_unit_test(test_json_depth_limit),
      cmocka_unit_test(test_json_doc_reuse_across_parses),
      cmocka_unit_test(test_json_size_cap),
      cmocka_unit_test(test_json_writer_builds_and_parses_back),
      cmocka_unit_test(test_json_writer_double_round_trips),
      cmocka_unit_test(test_json_writer_splices_parsed_values),
      cmocka_unit_test(test_json_str_passthrough),
      cmocka_unit_test(test_json_wide_steps_stop_at_every_offset),
      cmocka_unit_test(test_json_wide_steps_past_the_avx512_switch),
      cmocka_unit_test(test_json_plain_wide_every_byte),
      cmocka_unit_test(test_json_writer_short_strings_every_length_and_offset),
      cmocka_unit_test(test_json_utf8_wide_steps_match_byte_steps),
      cmocka_unit_test(test_utf8_valid_len_matches_the_table),
      cmocka_unit_test(test_utf8_and_eol_wide_steps_past_the_switch),
      cmocka_unit_test(test_eol_find_and_blank_match_a_byte_loop),
      cmocka_unit_test(test_json_writer_structural_misuse),
      cmocka_unit_test(test_json_writer_cap),
      cmocka_unit_test(test_json_allocation_failures),
      cmocka_unit_test(test_json_tape_links_random_documents),
      cmocka_unit_test(test_json_errors_after_whitespace),
      cmocka_unit_test(test_json_key_compare_every_length),
      cmocka_unit_test(test_json_parse_strings_every_length_offset_and_tail),
      cmocka_unit_test(test_json_parse_line_kept_shapes),
      cmocka_unit_test(test_json_parse_line_kept_shapes_stream),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
