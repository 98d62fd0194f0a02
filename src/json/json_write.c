/*
 * JSON writing: compact output into a capped growable buffer, with sticky
 * errors and automatic commas and colons.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "json_int.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define WRITER_MAX_DEPTH 1024

/* What the writer expects next at one nesting level. */
enum {
  ST_TOP_EMPTY = 0, /* top level, nothing written */
  ST_TOP_DONE,      /* top level, the one value is complete */
  ST_ARR_FIRST,     /* in an array, before the first element */
  ST_ARR_NEXT,      /* in an array, after an element */
  ST_OBJ_KEY_FIRST, /* in an object, before the first key */
  ST_OBJ_KEY_NEXT,  /* in an object, after a member */
  ST_OBJ_VALUE      /* in an object, after a key and its colon */
};

struct acp_json_writer {
  acp_mem mem;
  acp__buf buf;
  int err;
  uint32_t depth;
  uint8_t state[WRITER_MAX_DEPTH + 1];
};

/* MARK: - Writer (Public) */

int acp_json_writer_new(acp_json_writer **out, size_t max_size,
                        const acp_mem *mem) {
  acp_json_writer *w;
  const acp_mem *m = mem ? mem : acp_mem_default();

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  w = acp__calloc(m, 1, sizeof(*w));
  if (w == NULL)
    return ACP_ERR_NOMEM;
  acp__mem_init(&w->mem, m);
  acp__buf_init(&w->buf, &w->mem, max_size);
  *out = w;
  return 0;
}

void acp_json_writer_free(acp_json_writer *w) {
  if (w == NULL)
    return;
  acp__buf_dispose(&w->buf);
  acp__free(&w->mem, w);
}

void acp_json_writer_reset(acp_json_writer *w) {
  if (w == NULL)
    return;
  acp__buf_clear(&w->buf);
  w->err = 0;
  w->depth = 0;
  w->state[0] = ST_TOP_EMPTY;
}

const char *acp_json_writer_data(const acp_json_writer *w, size_t *len) {
  if (w == NULL) {
    if (len)
      *len = 0;
    return NULL;
  }
  if (len)
    *len = w->buf.len;
  return w->buf.data;
}

int acp_json_writer_error(const acp_json_writer *w) {
  if (w == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return w->err;
}

/* MARK: - Helpers (Private) */

static int fail(acp_json_writer *w, int rv) {
  w->err = rv;
  return rv;
}

/* Appends with an inline fast path; cap never exceeds the writer's max, so
 * fitting in the capacity means fitting under the cap. */
static inline int put(acp_json_writer *w, const char *s, size_t n) {
  if (w->buf.cap - w->buf.len >= n) {
    memcpy(w->buf.data + w->buf.len, s, n);
    w->buf.len += n;
    return 0;
  }
  return acp__buf_append(&w->buf, s, n);
}

static inline int putc1(acp_json_writer *w, char c) {
  if (w->buf.len < w->buf.cap) {
    w->buf.data[w->buf.len++] = c;
    return 0;
  }
  return acp__buf_putc(&w->buf, c);
}

/* Account for a value about to be written: emits the comma if needed. */
static int before_value(acp_json_writer *w) {
  uint8_t *st = &w->state[w->depth];

  switch (*st) {
  case ST_TOP_EMPTY:
    *st = ST_TOP_DONE;
    return 0;
  case ST_ARR_FIRST:
    *st = ST_ARR_NEXT;
    return 0;
  case ST_ARR_NEXT:
    return putc1(w, ',');
  case ST_OBJ_VALUE:
    *st = ST_OBJ_KEY_NEXT;
    return 0;
  default:
    return ACP_ERR_INVALID_STATE;
  }
}

#if defined(__SSE2__)
/* Sixteen bytes a step from i; the last 1-15 bytes are the last sixteen
 * again, overlapping (len >= 16; the bytes before i were checked plain, so
 * the first special byte found is at or after i). */
static inline __attribute__((always_inline)) size_t
copy_plain16(acp_json_writer *w, unsigned char *d, const unsigned char *s,
             size_t len, size_t i) {
  while (i < len) {
    size_t at = len - i >= 16 ? i : len - 16;
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + at));
    int mk = _mm_movemask_epi8(acp__json_special16(b));

    _mm_storeu_si128((__m128i *)(void *)(d + at), b);
    if (mk != 0) {
      i = at + (unsigned)__builtin_ctz((unsigned)mk);
      break;
    }
    i = at + 16;
  }
  w->buf.len += i;
  return i;
}

/* copy_plain() of a long string (80 bytes or more): 64 bytes a step
 * (tested, then copied) while none is special, with AVX2 where the CPU has
 * it, then sixteen. Out of line and reached by a tail call, so that short
 * strings (keys, names, ids) run a leaf function that saves no registers
 * for the calls made here. */
__attribute__((noinline)) static size_t
copy_plain_long(acp_json_writer *w, const unsigned char *s, size_t len) {
  unsigned char *d = (unsigned char *)w->buf.data + w->buf.len;
  size_t i = 0;
  __m128i b = _mm_loadu_si128((const __m128i *)(const void *)s);

  if (_mm_movemask_epi8(acp__json_special16(b)) != 0)
    return copy_plain16(w, d, s, len, 0);
  _mm_storeu_si128((__m128i *)(void *)d, b);
  i = 16;
#ifdef ACP__JSON_AVX2
  /* A long text (a prompt, a file): the widest steps the CPU has, once 64
   * more plain bytes show it is long. */
  if (len - i >= 128 && !acp__json_special64(s + i)) {
    memcpy(d + i, s + i, 64);
    i += 64;
    i += acp__json_copy_plain_wide(d + i, s + i, len - i);
  }
#endif
  while (len - i >= 64 && !acp__json_special64(s + i)) {
    memcpy(d + i, s + i, 64);
    i += 64;
  }
  return copy_plain16(w, d, s, len, i);
}
#endif

/* Copy the prefix of s[0..len) that needs no escaping and no UTF-8 check
 * (printable ASCII other than '"' and '\\') to the end of the buffer, in
 * one pass, and return its length. The caller has reserved room for `len`
 * more bytes: whole blocks are stored even when only their start is plain,
 * and the rest is overwritten by what follows. The last 1-15 bytes (1-7
 * below 16) are the last block again, overlapping, not a byte loop: the
 * bytes before them were checked plain, so the first special byte found
 * is at or after i. */
static size_t copy_plain(acp_json_writer *w, const unsigned char *s,
                         size_t len) {
  const uint64_t ones = UINT64_C(0x0101010101010101);
  const uint64_t highs = UINT64_C(0x8080808080808080);
  unsigned char *d = (unsigned char *)w->buf.data + w->buf.len;
  size_t i = 0;
  size_t at;
  uint64_t v;
  uint64_t x;
  uint64_t m;

#if defined(__SSE2__)
  /* Quote, backslash, and a signed compare below 0x20 for control bytes
   * and bytes >= 0x80, as in the reader. */
  if (len >= 80)
    return copy_plain_long(w, s, len);
  if (len >= 16)
    return copy_plain16(w, d, s, len, 0);
#endif
  /* Eight bytes a step, the same way. The lowest flagged byte is exact:
   * the subtractions borrow only upwards from a byte that matched. */
  if (len >= 8) {
    while (i < len) {
      at = len - i >= 8 ? i : len - 8;
      memcpy(&v, s + at, 8);
      x = v ^ (ones * '"');
      m = (x - ones) & ~x;
      x = v ^ (ones * '\\');
      m |= (x - ones) & ~x;
      m |= (v - ones * 0x20) & ~v;
      m = (m | v) & highs;
      memcpy(d + at, &v, 8);
      if (m != 0) {
        i = at + (unsigned)__builtin_ctzll(m) / 8;
        break;
      }
      i = at + 8;
    }
    w->buf.len += i;
    return i;
  }
  /* 4-7 bytes ("name", "text", "type"): the first four and the last four,
   * overlapping, the same way. */
  if (len >= 4) {
    uint32_t a[2];
    uint32_t ma[2];
    int k;

    memcpy(&a[0], s, 4);
    memcpy(&a[1], s + len - 4, 4);
    for (k = 0; k < 2; k++) {
      const uint32_t o = UINT32_C(0x01010101);
      uint32_t y = a[k] ^ (o * '"');
      uint32_t mm = (y - o) & ~y;
      y = a[k] ^ (o * '\\');
      mm |= (y - o) & ~y;
      mm |= (a[k] - o * 0x20) & ~a[k];
      ma[k] = (mm | a[k]) & UINT32_C(0x80808080);
    }
    memcpy(d, &a[0], 4);
    memcpy(d + len - 4, &a[1], 4);
    if (ma[0] != 0)
      i = (unsigned)__builtin_ctz(ma[0]) / 8;
    else if (ma[1] != 0)
      i = len - 4 + (unsigned)__builtin_ctz(ma[1]) / 8;
    else
      i = len;
    w->buf.len += i;
    return i;
  }
  while (i < len && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' &&
         s[i] != '\\') {
    d[i] = s[i];
    i++;
  }
  w->buf.len += i;
  return i;
}

/* `plain` leading bytes are known to need no escaping (acp__json_plain_len()
 * said so): they are copied without a second look. */
static int put_string_from(acp_json_writer *w, const char *str, size_t len,
                           size_t plain) {
  static const char hexd[] = "0123456789abcdef";
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  size_t k;
  int rv;
  char esc[6];
  size_t en;
#ifdef ACP__JSON_AVX2
  size_t wide_next = 0;
#endif

  if (str == NULL && len > 0)
    return ACP_ERR_INVALID_ARGUMENT;
  rv = putc1(w, '"');
  if (rv == 0 && plain > 0) {
    rv = put(w, str, plain);
    i = plain;
  }
  while (rv == 0 && i < len) {
    /* Room for the rest copied as is; escapes grow the buffer further. */
    rv = acp__buf_reserve(&w->buf, len - i + 1);
    if (rv != 0)
      break;
    i += copy_plain(w, s + i, len - i);
    /* Valid multi-byte UTF-8 is copied as is. */
    while (i < len && s[i] >= 0x80) {
#ifdef ACP__JSON_AVX2
      /* Text that is not ASCII: 32 bytes a step where the CPU can (as the
       * reader does); where that stops, a character at a time. */
      if (i >= wide_next && len - i >= 64 && acp__json_have_avx2()) {
        k = acp__json_copy_utf8_avx2((unsigned char *)w->buf.data + w->buf.len,
                                     s + i, len - i);
        w->buf.len += k;
        i += k;
        wide_next = i + 32;
        if (k > 0) {
          i += copy_plain(w, s + i, len - i);
          continue;
        }
      }
#endif
      k = acp__utf8_seq(s + i, s + len);
      if (k == 0)
        return ACP_ERR_INVALID_ARGUMENT;
      memcpy(w->buf.data + w->buf.len, s + i, k);
      w->buf.len += k;
      i += k;
      i += copy_plain(w, s + i, len - i);
    }
    if (i == len)
      break;
    en = 2;
    esc[0] = '\\';
    switch (s[i]) {
    case '"':
      esc[1] = '"';
      break;
    case '\\':
      esc[1] = '\\';
      break;
    case '\n':
      esc[1] = 'n';
      break;
    case '\r':
      esc[1] = 'r';
      break;
    case '\t':
      esc[1] = 't';
      break;
    case '\b':
      esc[1] = 'b';
      break;
    case '\f':
      esc[1] = 'f';
      break;
    default:
      esc[1] = 'u';
      esc[2] = '0';
      esc[3] = '0';
      esc[4] = hexd[s[i] >> 4];
      esc[5] = hexd[s[i] & 15];
      en = 6;
      break;
    }
    rv = put(w, esc, en);
    i++;
  }
  if (rv == 0)
    rv = putc1(w, '"');
  return rv;
}

static int put_string(acp_json_writer *w, const char *str, size_t len) {
  return put_string_from(w, str, len, 0);
}

/* The plain ASCII prefix of s[0..len) (no quote, backslash, control byte or
 * byte >= 0x80), read only: the test of copy_plain() without its stores. */
static size_t plain_ascii(const unsigned char *s, size_t len) {
  const uint64_t ones = UINT64_C(0x0101010101010101);
  const uint64_t highs = UINT64_C(0x8080808080808080);
  size_t i = 0;
  uint64_t v;
  uint64_t x;
  uint64_t m;

#if defined(__SSE2__)
  if (len >= 80) {
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)s);
    if (_mm_movemask_epi8(acp__json_special16(b)) == 0) {
      i = 16;
#ifdef ACP__JSON_AVX2
      i += acp__json_plain_wide(s + i, len - i);
#endif
      while (len - i >= 64 && !acp__json_special64(s + i))
        i += 64;
    }
  }
  while (len - i >= 16) {
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
    int mk = _mm_movemask_epi8(acp__json_special16(b));
    if (mk != 0)
      return i + (unsigned)__builtin_ctz((unsigned)mk);
    i += 16;
  }
#endif
  while (len - i >= 8) {
    memcpy(&v, s + i, 8);
    x = v ^ (ones * '"');
    m = (x - ones) & ~x;
    x = v ^ (ones * '\\');
    m |= (x - ones) & ~x;
    m |= (v - ones * 0x20) & ~v;
    if (((m | v) & highs) != 0)
      break;
    i += 8;
  }
  while (i < len && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' && s[i] != '\\')
    i++;
  return i;
}

size_t acp__json_plain_len(const char *str, size_t len) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  size_t k;
#ifdef ACP__JSON_AVX2
  size_t wide_next = 0;
#endif

  if (str == NULL)
    return 0;
  for (;;) {
    i += plain_ascii(s + i, len - i);
    if (i == len || s[i] < 0x80)
      return i;
#ifdef ACP__JSON_AVX2
    /* As put_string_from(): 32 bytes a step where the CPU can, and not
     * again within the block that stopped it. */
    if (i >= wide_next && len - i >= 64 && acp__json_have_avx2()) {
      k = acp__json_plain_utf8_avx2(s + i, len - i);
      i += k;
      wide_next = i + 32;
      if (k > 0)
        continue;
    }
#endif
    k = acp__utf8_seq(s + i, s + len);
    if (k == 0)
      return i;
    i += k;
  }
}

int acp__json_escape_append_from(acp__buf *b, const char *str, size_t len,
                                 size_t plain) {
  acp_json_writer w;
  int rv;

  if (plain > len)
    return ACP_ERR_INVALID_ARGUMENT;
  w.buf = *b;
  rv = put_string_from(&w, str, len, plain);
  *b = w.buf;
  return rv;
}

/* MARK: - Writes (Public) */

#define CHECK(w)                                                               \
  do {                                                                         \
    if ((w) == NULL)                                                           \
      return ACP_ERR_INVALID_ARGUMENT;                                         \
    if ((w)->err != 0)                                                         \
      return (w)->err;                                                         \
  } while (0)

static int begin(acp_json_writer *w, char c, uint8_t st) {
  int rv;

  CHECK(w);
  if (w->depth >= WRITER_MAX_DEPTH)
    return fail(w, ACP_ERR_LIMIT);
  rv = before_value(w);
  if (rv == 0)
    rv = putc1(w, c);
  if (rv != 0)
    return fail(w, rv);
  w->state[++w->depth] = st;
  return 0;
}

static int end(acp_json_writer *w, char c, uint8_t a, uint8_t b) {
  int rv;
  uint8_t st;

  CHECK(w);
  st = w->state[w->depth];
  if (w->depth == 0 || (st != a && st != b))
    return fail(w, ACP_ERR_INVALID_STATE);
  rv = putc1(w, c);
  if (rv != 0)
    return fail(w, rv);
  w->depth--;
  return 0;
}

int acp_json_write_obj_begin(acp_json_writer *w) {
  return begin(w, '{', ST_OBJ_KEY_FIRST);
}

int acp_json_write_obj_end(acp_json_writer *w) {
  return end(w, '}', ST_OBJ_KEY_FIRST, ST_OBJ_KEY_NEXT);
}

int acp_json_write_arr_begin(acp_json_writer *w) {
  return begin(w, '[', ST_ARR_FIRST);
}

int acp_json_write_arr_end(acp_json_writer *w) {
  return end(w, ']', ST_ARR_FIRST, ST_ARR_NEXT);
}

int acp_json_write_key(acp_json_writer *w, const char *k, size_t len) {
  uint8_t *st;
  int rv = 0;

  CHECK(w);
  st = &w->state[w->depth];
  if (*st == ST_OBJ_KEY_NEXT)
    rv = putc1(w, ',');
  else if (*st != ST_OBJ_KEY_FIRST)
    return fail(w, ACP_ERR_INVALID_STATE);
  if (rv == 0)
    rv = put_string(w, k, len);
  if (rv == 0)
    rv = putc1(w, ':');
  if (rv != 0)
    return fail(w, rv);
  *st = ST_OBJ_VALUE;
  return 0;
}

int acp_json_write_keyz(acp_json_writer *w, const char *k) {
  CHECK(w);
  if (k == NULL)
    return fail(w, ACP_ERR_INVALID_ARGUMENT);
  return acp_json_write_key(w, k, strlen(k));
}

/* Write one scalar: the separator, then the bytes produced by emit. */
static int scalar(acp_json_writer *w, const char *s, size_t n) {
  int rv;

  CHECK(w);
  rv = before_value(w);
  if (rv == 0)
    rv = put(w, s, n);
  if (rv != 0)
    return fail(w, rv);
  return 0;
}

int acp_json_write_str(acp_json_writer *w, const char *s, size_t len) {
  int rv;

  CHECK(w);
  if (s == NULL && len > 0)
    return fail(w, ACP_ERR_INVALID_ARGUMENT);
  rv = before_value(w);
  if (rv == 0)
    rv = put_string(w, s, len);
  if (rv != 0)
    return fail(w, rv);
  return 0;
}

int acp_json_write_strz(acp_json_writer *w, const char *s) {
  CHECK(w);
  if (s == NULL)
    return fail(w, ACP_ERR_INVALID_ARGUMENT);
  return acp_json_write_str(w, s, strlen(s));
}

/* Decimal digits of v, right-aligned ending at end; returns the start. */
static char *utoa_rev(uint64_t v, char *end) {
  char *p = end;

  do {
    *--p = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  return p;
}

int acp_json_write_int(acp_json_writer *w, int64_t v) {
  char buf[24];
  char *end = buf + sizeof(buf);
  char *p;
  uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

  p = utoa_rev(mag, end);
  if (v < 0)
    *--p = '-';
  return scalar(w, p, (size_t)(end - p));
}

int acp_json_write_uint(acp_json_writer *w, uint64_t v) {
  char buf[24];
  char *end = buf + sizeof(buf);
  char *p = utoa_rev(v, end);

  return scalar(w, p, (size_t)(end - p));
}

int acp_json_write_double(acp_json_writer *w, double v) {
  char buf[40];
  int n = 0;
  int prec;
  int i;

  CHECK(w);
  if (!isfinite(v))
    return fail(w, ACP_ERR_INVALID_ARGUMENT);
  for (prec = 15; prec <= 17; prec++) {
    n = snprintf(buf, sizeof(buf), "%.*g", prec, v);
    if (n <= 0 || (size_t)n >= sizeof(buf))
      return fail(w, ACP_ERR_INTERNAL);
    if (prec == 17 || strtod(buf, NULL) == v)
      break;
  }
  /* snprintf and strtod follow LC_NUMERIC; under a locale whose decimal
   * point is not '.', the only byte outside [0-9+-e] is that point, which
   * JSON requires to be '.'. (Multi-byte decimal points are not handled.) */
  for (i = 0; i < n; i++) {
    char c = buf[i];
    if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == 'e'))
      buf[i] = '.';
  }
  return scalar(w, buf, (size_t)n);
}

int acp_json_write_bool(acp_json_writer *w, bool v) {
  return v ? scalar(w, "true", 4) : scalar(w, "false", 5);
}

int acp_json_write_null(acp_json_writer *w) {
  return scalar(w, "null", 4);
}

int acp_json_write_raw(acp_json_writer *w, const char *json, size_t len) {
  CHECK(w);
  if (json == NULL || len == 0)
    return fail(w, ACP_ERR_INVALID_ARGUMENT);
  return scalar(w, json, len);
}

int acp_json_write_val(acp_json_writer *w, const acp_json_val *v) {
  CHECK(w);
  if (v == NULL)
    return fail(w, ACP_ERR_INVALID_ARGUMENT);
  return scalar(w, v->raw, v->len);
}

int acp_json_write_str_val(acp_json_writer *w, acp_json_doc *doc,
                           const acp_json_val *v) {
  const char *s;
  size_t n;
  int rv;

  CHECK(w);
  if (v == NULL)
    return fail(w, ACP_ERR_INVALID_ARGUMENT);
  if (v->type != ACP_JSON_STRING)
    return fail(w, ACP_ERR_TYPE);
  /* The parser validated the raw text: no re-scan, no re-escape. */
  if (acp_json_str_passthrough(v))
    return scalar(w, v->raw, v->len);
  if (doc == NULL)
    return fail(w, ACP_ERR_INVALID_ARGUMENT);
  rv = acp_json_doc_str(doc, v, &s, &n);
  if (rv != 0)
    return fail(w, rv);
  return acp_json_write_str(w, s, n);
}

/* MARK: - Internal */

int acp__json_escape_append(acp__buf *b, const char *str, size_t len) {
  /* The string writer works on a writer's buffer; lend it ours. Only the
   * buffer is used, so the rest of the stack writer stays unset. */
  acp_json_writer w;
  int rv;

  w.buf = *b;
  rv = put_string(&w, str, len);
  *b = w.buf;
  return rv;
}

int acp__json_write_key_val(acp_json_writer *w, const acp_json_val *k) {
  uint8_t *st;
  int rv = 0;

  CHECK(w);
  if (k == NULL || k->type != ACP_JSON_STRING)
    return fail(w, ACP_ERR_INVALID_ARGUMENT);
  st = &w->state[w->depth];
  if (*st == ST_OBJ_KEY_NEXT)
    rv = putc1(w, ',');
  else if (*st != ST_OBJ_KEY_FIRST)
    return fail(w, ACP_ERR_INVALID_STATE);
  if (rv == 0)
    rv = put(w, k->raw, k->len);
  if (rv == 0)
    rv = putc1(w, ':');
  if (rv != 0)
    return fail(w, rv);
  *st = ST_OBJ_VALUE;
  return 0;
}
