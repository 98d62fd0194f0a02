/*
 * Differential fuzz target for the JSON layer.
 *
 * 1. acp_json_doc_parse() and acp_json_validate() must agree.
 * 2. Our verdict must match json-c's in strict mode (whole input consumed),
 *    except for the known json-c divergences listed below.
 * 3. For accepted input: write_val -> parse gives the same bytes, and a
 *    rebuild through the typed writer API (decoded strings, numbers by value)
 *    parses back to an equal tree.
 *
 * Known json-c 0.16 divergences (checked against JSONTestSuite and by
 * fuzzing; all are json-c being more lenient than RFC 8259 even with
 * JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8):
 *  - it accepts overlong encodings (C0 AF), UTF-8-encoded surrogates
 *    (ED A0 80) and code points above U+10FFFF (F4 90 ..): its UTF-8 check
 *    only looks at the byte pattern;
 *  - it accepts raw control characters (tab, newline, ...) inside strings;
 *  - it accepts single-quoted strings, NaN, Infinity and -Infinity;
 *  - it accepts numbers such as "2.", "-01", "0.e1", "-.123", "2.e+3";
 *  - a bare top-level scalar ("1", "true") at the very end of the input is
 *    reported as json_tokener_continue: we feed it one more space;
 *  - depth: json-c is given a larger limit than our default 512, so inputs
 *    between the two limits are rejected only by us with ACP_ERR_LIMIT.
 * Whenever we reject and json-c accepts, the byte at our error position must
 * be explained by one of these; json-c rejecting what we accept is always a
 * failure.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "acp/json.h"
#include "json/json_int.h" /* acp__json_no_avx2: the wide steps on and off */
#include "util/util.h"     /* acp__utf8_no_wide: the same for the UTF-8 scans */

#ifdef ACP_HAVE_JSONC
#include <json-c/json.h>
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef ACP_HAVE_JSONC
static int jsonc_accepts(const uint8_t *data, size_t size) {
  struct json_tokener *tok;
  json_object *obj;
  enum json_tokener_error e;
  int ok;

  if (size > INT32_MAX - 1)
    return 0;
  tok = json_tokener_new_ex(ACP_JSON_DEFAULT_MAX_DEPTH * 2);
  CHECK(tok != NULL);
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
  obj = json_tokener_parse_ex(tok, (const char *)data, (int)size);
  e = json_tokener_get_error(tok);
  if (obj == NULL && e == json_tokener_continue &&
      json_tokener_get_parse_end(tok) == size) {
    /* A scalar at the end of the input is still open for json-c. */
    obj = json_tokener_parse_ex(tok, " ", 1);
    e = json_tokener_get_error(tok);
    ok = e == json_tokener_success;
  } else {
    /* A JSON null is returned as a NULL object: only the error counts. */
    ok = e == json_tokener_success && json_tokener_get_parse_end(tok) == size;
  }
  json_object_put(obj);
  json_tokener_free(tok);
  return ok;
}

static int is_num_byte(uint8_t c) {
  return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' ||
         c == '+' || c == '-';
}

/* Is our rejection explained by a documented json-c leniency? */
static int known_jsonc_leniency(const uint8_t *data, size_t size,
                                const acp_json_err *err) {
  size_t p = err->pos;

  if (err->code == ACP_ERR_LIMIT)
    return 1;
  if (strcmp(err->msg, "invalid UTF-8") == 0)
    return 1;
  if (strcmp(err->msg, "unescaped control character in string") == 0)
    return 1;
  if (p < size && (data[p] == '\'' || data[p] == 'N' || data[p] == 'I'))
    return 1;
  if (p < size && data[p] == '-' && p + 1 < size &&
      (data[p + 1] == 'I' || data[p + 1] == 'N' || data[p + 1] == '.'))
    return 1;
  if ((p < size && is_num_byte(data[p])) || (p > 0 && is_num_byte(data[p - 1])))
    return 1;
  return 0;
}
#endif

/* Rebuild v through the typed writer API. */
static void rebuild(acp_json_doc *doc, const acp_json_val *v,
                    acp_json_writer *w) {
  const acp_json_val *c;
  const char *s;
  size_t len;
  int64_t i;
  uint64_t u;
  double d;
  bool b;

  switch (acp_json_type_of(v)) {
  case ACP_JSON_NULL:
    acp_json_write_null(w);
    break;
  case ACP_JSON_BOOL:
    CHECK(acp_json_get_bool(v, &b) == 0);
    acp_json_write_bool(w, b);
    break;
  case ACP_JSON_NUMBER:
    if (acp_json_get_int64(v, &i) == 0)
      acp_json_write_int(w, i);
    else if (acp_json_get_uint64(v, &u) == 0)
      acp_json_write_uint(w, u);
    else if (acp_json_get_double(v, &d) == 0)
      acp_json_write_double(w, d);
    else
      acp_json_write_val(w, v); /* out of range for double: keep the text */
    break;
  case ACP_JSON_STRING:
    CHECK(acp_json_doc_str(doc, v, &s, &len) == 0);
    acp_json_write_str(w, s, len);
    break;
  case ACP_JSON_ARRAY:
    acp_json_write_arr_begin(w);
    for (c = acp_json_child(v); c; c = acp_json_next(c))
      rebuild(doc, c, w);
    acp_json_write_arr_end(w);
    break;
  case ACP_JSON_OBJECT:
    acp_json_write_obj_begin(w);
    for (c = acp_json_child(v); c; c = acp_json_next(acp_json_next(c))) {
      CHECK(acp_json_doc_str(doc, c, &s, &len) == 0);
      acp_json_write_key(w, s, len);
      rebuild(doc, acp_json_next(c), w);
    }
    acp_json_write_obj_end(w);
    break;
  default:
    CHECK(0);
  }
}

/* Same tree: types, decoded strings, numbers by value. */
static void same(acp_json_doc *da, const acp_json_val *a, acp_json_doc *db,
                 const acp_json_val *b) {
  const char *sa, *sb;
  size_t la, lb;
  double xa, xb;
  int64_t ia, ib;
  bool ba, bb;

  CHECK(acp_json_type_of(a) == acp_json_type_of(b));
  CHECK(acp_json_len(a) == acp_json_len(b));
  switch (acp_json_type_of(a)) {
  case ACP_JSON_BOOL:
    CHECK(acp_json_get_bool(a, &ba) == 0 && acp_json_get_bool(b, &bb) == 0);
    CHECK(ba == bb);
    break;
  case ACP_JSON_NUMBER:
    if (acp_json_get_int64(a, &ia) == 0) {
      CHECK(acp_json_get_int64(b, &ib) == 0);
      CHECK(ia == ib);
    } else if (acp_json_get_double(a, &xa) == 0) {
      CHECK(acp_json_get_double(b, &xb) == 0);
      CHECK(xa == xb);
    }
    break;
  case ACP_JSON_STRING:
    CHECK(acp_json_doc_str(da, a, &sa, &la) == 0);
    CHECK(acp_json_doc_str(db, b, &sb, &lb) == 0);
    CHECK(la == lb && memcmp(sa, sb, la) == 0);
    CHECK(acp_json_str_eq(b, sa, la));
    {
      char small[8];
      size_t n = 0;
      int rv = acp_json_str_unescape(a, small, sizeof(small), &n);
      CHECK(n == la);
      CHECK(rv == (la > sizeof(small) ? ACP_ERR_BUFFER : 0));
      CHECK(memcmp(small, sa, la < sizeof(small) ? la : sizeof(small)) == 0);
    }
    break;
  case ACP_JSON_ARRAY:
  case ACP_JSON_OBJECT:
    a = acp_json_child(a);
    b = acp_json_child(b);
    while (a && b) {
      same(da, a, db, b);
      a = acp_json_next(a);
      b = acp_json_next(b);
    }
    CHECK(a == NULL && b == NULL);
    break;
  default:
    break;
  }
}

/* The UTF-8 and line-end scans (src/util/utf8.c: the WebSocket codec's
 * check of every text message, the SSE reader's line search) give the
 * same answers and bytes with their 64-byte steps and without. */
static void utf8_scans_agree(const uint8_t *data, size_t size) {
  unsigned char *a = malloc(size ? size : 1);
  unsigned char *b = malloc(size ? size : 1);
  size_t va, ea;

  CHECK(a != NULL && b != NULL);
  memcpy(a, data, size);
  memcpy(b, data, size);
  acp__utf8_no_wide = 0;
  va = acp__utf8_valid_len(data, size);
  ea = acp__eol_find(data, size);
  CHECK(acp__utf8_line(a, size) == va);
  acp__utf8_no_wide = 1;
  CHECK(acp__utf8_valid_len(data, size) == va);
  CHECK(acp__eol_find(data, size) == ea);
  CHECK(acp__utf8_line(b, size) == va);
  CHECK(memcmp(a, b, size) == 0);
  acp__utf8_no_wide = 0;
  free(b);
  free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static acp_json_doc *doc;
  static acp_json_doc *doc2;
  static acp_json_writer *w;
  acp_json_err err;
  const char *out;
  size_t len;
  int rv;

  if (doc == NULL) {
    CHECK(acp_json_doc_new(&doc, NULL) == 0);
    CHECK(acp_json_doc_new(&doc2, NULL) == 0);
    CHECK(acp_json_writer_new(&w, 0, NULL) == 0);
  }
  utf8_scans_agree(data, size);

  rv = acp_json_doc_parse(doc, (const char *)data, size, &err);
  CHECK(rv == 0 || rv == ACP_ERR_PARSE || rv == ACP_ERR_LIMIT);
  CHECK(acp_json_validate((const char *)data, size, NULL) == rv);
  CHECK((rv == 0) == (acp_json_doc_root(doc) != NULL));
  if (rv != 0)
    CHECK(err.code == rv && err.msg != NULL && err.pos <= size);
#ifdef ACP__JSON_AVX2
  /* The wide steps (AVX2 and AVX-512 for long strings, AVX2 for UTF-8)
   * only ever skip what the byte steps would accept: same verdict, same
   * error offset without them. */
  {
    acp_json_err err2;
    int rv2;

    acp__json_no_avx2 = 1;
    rv2 = acp_json_doc_parse(doc2, (const char *)data, size, &err2);
    acp__json_no_avx2 = 0;
    CHECK(rv2 == rv);
    if (rv != 0)
      CHECK(err2.pos == err.pos);
  }
#endif

#ifdef ACP_HAVE_JSONC
  {
    int theirs = jsonc_accepts(data, size);
    if (rv == 0 && !theirs) {
      fprintf(stderr, "json-c rejects what we accept\n");
      abort();
    }
    if (rv != 0 && theirs && !known_jsonc_leniency(data, size, &err)) {
      fprintf(stderr, "json-c accepts what we reject: %s at %zu\n", err.msg,
              err.pos);
      abort();
    }
  }
#endif
  if (rv != 0)
    return 0;

  /* Splice round trip: byte identical. */
  acp_json_writer_reset(w);
  CHECK(acp_json_write_val(w, acp_json_doc_root(doc)) == 0);
  out = acp_json_writer_data(w, &len);
  CHECK(acp_json_doc_parse(doc2, out, len, NULL) == 0);
  {
    size_t rl;
    const char *raw = acp_json_raw(acp_json_doc_root(doc2), &rl);
    size_t ol;
    const char *orig = acp_json_raw(acp_json_doc_root(doc), &ol);
    CHECK(rl == ol && memcmp(raw, orig, rl) == 0);
  }

  /* Typed rebuild: equal tree. */
  acp_json_writer_reset(w);
  rebuild(doc, acp_json_doc_root(doc), w);
  CHECK(acp_json_writer_error(w) == 0);
  out = acp_json_writer_data(w, &len);
  rv = acp_json_doc_parse(doc2, out, len, &err);
  if (rv != 0) {
    fprintf(stderr, "rebuilt output does not parse: %s at %zu: %.*s\n", err.msg,
            err.pos, (int)len, out);
    abort();
  }
  same(doc, acp_json_doc_root(doc), doc2, acp_json_doc_root(doc2));
#ifdef ACP__JSON_AVX2
  /* The writer without the wide steps writes the same bytes. */
  {
    char *copy = malloc(len ? len : 1);
    const char *out2;
    size_t len2;

    CHECK(copy != NULL);
    memcpy(copy, out, len);
    acp__json_no_avx2 = 1;
    acp_json_writer_reset(w);
    rebuild(doc, acp_json_doc_root(doc), w);
    acp__json_no_avx2 = 0;
    CHECK(acp_json_writer_error(w) == 0);
    out2 = acp_json_writer_data(w, &len2);
    CHECK(len2 == len && memcmp(out2, copy, len) == 0);
    free(copy);
  }
#endif
  return 0;
}
