/*
 * Private layout of the JSON tape and document, shared by json_read.c and
 * json_write.c. Not installed.
 */
#ifndef ACP_JSON_INT_H
#define ACP_JSON_INT_H

#include "acp/json.h"
#include "internal.h"

/* Inside the library a value's type is read inline: the handlers test
 * types a dozen times a message, each a call of a few instructions.
 * json_read.c, which defines the public function, undefines the macro. */
static inline acp_json_type acp__json_type_of(const acp_json_val *v);
#define acp_json_type_of(v) acp__json_type_of(v)
/* The same for a value's raw text and a document's root. */
static inline const char *acp__json_raw(const acp_json_val *v, size_t *len);
#define acp_json_raw(v, len) acp__json_raw((v), (len))
static inline const acp_json_val *acp__json_doc_root(const acp_json_doc *doc);
#define acp_json_doc_root(doc) acp__json_doc_root(doc)

/* Flags of a tape record. */
#define ACP__JF_ESC 0x01u  /* string: contains at least one backslash */
#define ACP__JF_INT 0x02u  /* number: no fraction and no exponent */
#define ACP__JF_NEG 0x04u  /* number: leading minus sign */
#define ACP__JF_TRUE 0x08u /* bool: true */
#define ACP__JF_SURR 0x10u /* string: a \u escape of a UTF-16 surrogate */

/*
 * One record per value, in document order (a container is followed by its
 * whole subtree). `next` is the distance in records to the next sibling, 0
 * for the last child of a container and for the root (the parser sets it
 * at the ',' that ends a value). `count` is the number of elements (arrays) or
 * members (objects). Inputs are below 4 GiB, so 32-bit lengths and indexes
 * suffice.
 */
struct acp_json_val {
  const char *raw;
  uint32_t len;
  uint32_t next;
  uint32_t count;
  uint8_t type;
  uint8_t flags;
};

/* A block of the per-document arena holding unescaped strings. Blocks never
 * move, so pointers handed out stay valid until the next parse. */
typedef struct acp__jblock {
  struct acp__jblock *next;
  size_t cap;
  size_t used;
  char data[];
} acp__jblock;

/* A line acp__json_doc_parse_line() kept to match the next ones against
 * (json_read.c, "Shapes"). */
typedef struct acp__jshape acp__jshape;
#define ACP__JSHAPES 4

struct acp_json_doc {
  acp_mem mem;
  acp_json_val *tape;
  uint32_t tape_n;
  uint32_t tape_cap;
  uint32_t *stack;
  uint32_t stack_cap;
  uint32_t max_depth;
  acp__jblock *arena;
  /* Decoded strings already handed out by acp_json_doc_str(); a string's
   * record keeps its slot + 1 in `count`, which strings do not otherwise
   * use. Emptied at each parse. */
  struct acp__jstr {
    const char *s;
    size_t len;
  } * strs;
  uint32_t strs_n;
  uint32_t strs_cap;
  bool has_root;
  /* A stretch of the next parse's input already known to hold no special
   * string byte (acp__json_doc_set_plain()), or NULL. */
  const char *plain_lo;
  const char *plain_hi;
  /* Lines kept by acp__json_doc_parse_line(), each a slot or NULL; the
   * lines it parsed (up to 2: the first two are not kept), the misses to
   * let pass before the next line is kept, the kept lines replaced unused
   * in a row, a clock for the least recently used slot, and the lines
   * that matched one (for the tests). */
  acp__jshape *shapes[ACP__JSHAPES];
  uint8_t shape_lines;
  uint8_t shape_skip;
  uint8_t shape_streak;
  uint32_t shape_clock;
  uint64_t shape_hits;
};

#if defined(__SSE2__)
#include <emmintrin.h>
/* The bytes of a 16-byte block that end a plain run of string text: quote,
 * backslash, and (one signed compare) control bytes and bytes >= 0x80. */
static inline __m128i acp__json_special16(__m128i v) {
  return _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                   _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                      _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
}

/* Nonzero if any of the 64 bytes at p is special (above): a long run of
 * plain text costs one test per 64 bytes, not one per 16. */
static inline int acp__json_special64(const unsigned char *p) {
  __m128i a = _mm_loadu_si128((const __m128i *)(const void *)p);
  __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
  __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
  __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
  return _mm_movemask_epi8(_mm_or_si128(
      _mm_or_si128(acp__json_special16(a), acp__json_special16(b)),
      _mm_or_si128(acp__json_special16(c), acp__json_special16(d))));
}
#endif

/*
 * AVX2 steps for long strings (json_avx2.c): x86-64 with GCC or Clang, used
 * when the CPU has AVX2 (checked at run time, so the library still runs on
 * any x86-64). Define ACP_NO_AVX2 to build without them. Each returns how
 * many leading bytes lie in 64-byte blocks free of special bytes (quote,
 * backslash, control bytes, bytes >= 0x80), i.e. a multiple of 64 that
 * stops before the first block holding one or with fewer than 64 bytes
 * left; the copy also stores those bytes at d.
 */
#if defined(__SSE2__) && defined(__x86_64__) && defined(__GNUC__) &&           \
    !defined(ACP_NO_AVX2)
#define ACP__JSON_AVX2 1
size_t acp__json_plain_avx2(const unsigned char *p, size_t n);
size_t acp__json_copy_plain_avx2(unsigned char *d, const unsigned char *s,
                                 size_t n);
/*
 * The same for text that is not all ASCII: the length of the leading run
 * of s[0..n) that holds no quote, backslash or control byte and is valid
 * UTF-8 (the reader's and writer's rules: no overlongs, no surrogates,
 * nothing above U+10FFFF), taken 32 bytes a step and ending on a
 * character boundary, so the caller's byte-at-a-time code resumes on a
 * whole character (it finds the reason the run stopped, if any). s must
 * start on a character boundary. The copy also stores the run at d, and
 * may store up to 32 bytes past it (never past d + n).
 */
size_t acp__json_plain_utf8_avx2(const unsigned char *s, size_t n);
size_t acp__json_copy_utf8_avx2(unsigned char *d, const unsigned char *s,
                                size_t n);
/* Nonzero turns the AVX2 steps off, and the AVX-512 ones with them
 * (tests compare the paths). */
extern int acp__json_no_avx2;
static inline int acp__json_have_avx2(void) {
  return !acp__json_no_avx2 && __builtin_cpu_supports("avx2");
}

/*
 * The plain run of p[0..n) and its copy as above, with the widest steps
 * the CPU has (json_avx512.c): AVX2 over the first ACP__JSON_WIDE_FROM
 * bytes, then, where the run goes on and the CPU has AVX-512BW, 256 bytes
 * a step in 64-byte registers; AVX2 alone without it; 0 without AVX2 (the
 * caller's SSE2 steps take the run). The result is the same on every path
 * (a multiple of 64); only the speed differs.
 */
size_t acp__json_plain_wide(const unsigned char *p, size_t n);
size_t acp__json_copy_plain_wide(unsigned char *d, const unsigned char *s,
                                 size_t n);
/* Bytes taken with AVX2 before AVX-512: a text shorter than this never
 * touches a 64-byte register (where a CPU lowers its clock for them, only
 * a long run pays it, and gains more). A multiple of 64. */
#define ACP__JSON_WIDE_FROM ((size_t)1024)
/* Nonzero turns the AVX-512 steps off, leaving AVX2 (tests compare). */
extern int acp__json_no_avx512;
#endif

/*
 * Parse the JSON value at the start of data[0..len), an NDJSON stream,
 * into doc, as acp_json_doc_parse() would parse its first line: the value
 * must be followed by optional spaces, tabs or CRs and then a line feed; a
 * line feed anywhere before that is an error (it would end the line). On
 * success *line_len is the offset of that line feed. Any failure (invalid
 * or incomplete JSON, no line feed, something else after the value) leaves
 * doc without a value; the caller frames and parses the line as usual,
 * which reports it. Lets the JSON-RPC session find a line's end in the
 * same pass that parses it, instead of a memchr over it first.
 *
 * A stream's lines mostly repeat a few shapes (a prompt turn's request,
 * its updates, its answer): doc keeps a few short lines it parsed and
 * takes the next line that differs from one of them only in the strings
 * and numbers of its values without running the parser over it, with
 * the same result (json_read.c, "Shapes").
 */
int acp__json_doc_parse_line(acp_json_doc *doc, const char *data, size_t len,
                             size_t *line_len);

/*
 * Tell the next parse of doc that the input bytes [lo, hi) hold no quote,
 * backslash, control byte or byte >= 0x80 (the NDJSON framer found that
 * while it looked for the line feed, acp_ndjson.plain_lo): a long string
 * that runs into that stretch jumps over it instead of scanning it again.
 * The caller guarantees the claim (it is not checked) and that the bytes
 * do not change before the parse; (NULL, NULL) clears it. Every parse
 * clears it when it ends.
 */
static inline void acp__json_doc_set_plain(acp_json_doc *doc, const char *lo,
                                           const char *hi) {
  doc->plain_lo = lo;
  doc->plain_hi = hi;
}

static inline acp_json_type acp__json_type_of(const acp_json_val *v) {
  return v ? (acp_json_type)v->type : ACP_JSON_NONE;
}

static inline const char *acp__json_raw(const acp_json_val *v, size_t *len) {
  if (v == NULL) {
    if (len)
      *len = 0;
    return NULL;
  }
  if (len)
    *len = v->len;
  return v->raw;
}

static inline const acp_json_val *acp__json_doc_root(const acp_json_doc *doc) {
  if (doc == NULL || !doc->has_root)
    return NULL;
  return &doc->tape[0];
}

/*
 * acp_json_obj_get() with a literal key, inline at the call site (hot
 * handlers only: a message's envelope and params). The key's length is a
 * constant there, so the compare of each key is a length test and one or
 * two loads a side, and the call, its checks and the register saves of the
 * general function go away. The answer is the general one's: the first
 * member of that name; a key with escapes anywhere before the match, or a
 * name over 16 bytes, hands the whole lookup to acp_json_obj_get().
 */
#if defined(__GNUC__)
#define ACP__JSON_INLINE static inline __attribute__((always_inline))
#else
#define ACP__JSON_INLINE static inline
#endif

ACP__JSON_INLINE int acp__json_key_eq16(const char *a, const char *b,
                                        size_t n) {
  uint64_t x0, y0, x1, y1;
  uint32_t u0, v0, u1, v1;

  /* Two overlapping loads a side, never outside a[0..n) or b[0..n). */
  if (n >= 8) {
    memcpy(&x0, a, 8);
    memcpy(&y0, b, 8);
    memcpy(&x1, a + n - 8, 8);
    memcpy(&y1, b + n - 8, 8);
    return ((x0 ^ y0) | (x1 ^ y1)) == 0;
  }
  if (n >= 4) {
    memcpy(&u0, a, 4);
    memcpy(&v0, b, 4);
    memcpy(&u1, a + n - 4, 4);
    memcpy(&v1, b + n - 4, 4);
    return ((u0 ^ v0) | (u1 ^ v1)) == 0;
  }
  if (n == 0)
    return 1;
  return a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1];
}

ACP__JSON_INLINE const acp_json_val *
acp__json_obj_get_inl(const acp_json_val *obj, const char *key, size_t len) {
  const acp_json_val *k;
  uint32_t i;

  if (len > 16)
    return acp_json_obj_get(obj, key, len);
  if (obj == NULL || obj->type != ACP_JSON_OBJECT || obj->count == 0)
    return NULL;
  k = obj + 1;
  for (i = 0;; i++) {
    const acp_json_val *val = k + 1;
    if (k->flags & ACP__JF_ESC)
      return acp_json_obj_get(obj, key, len);
    if (k->len == len + 2 && acp__json_key_eq16(k->raw + 1, key, len))
      return val;
    if (i + 1 == obj->count)
      return NULL;
    k = val + val->next;
  }
}
#define ACP__OBJ_GETI(obj, lit)                                                \
  acp__json_obj_get_inl((obj), "" lit "", sizeof(lit) - 1)

/* acp_json_str_eq() with a literal of up to 16 bytes, inline; a string
 * with escapes is compared decoded by the general function. */
ACP__JSON_INLINE int acp__json_str_eq_inl(const acp_json_val *v, const char *s,
                                          size_t len) {
  if (len > 16 || v == NULL || (v->flags & ACP__JF_ESC))
    return acp_json_str_eq(v, s, len);
  return v->type == ACP_JSON_STRING && v->len == len + 2 &&
         acp__json_key_eq16(v->raw + 1, s, len);
}
#define ACP__STR_EQI(v, lit)                                                   \
  acp__json_str_eq_inl((v), "" lit "", sizeof(lit) - 1)

/* acp_json_doc_str() inline for a string without escapes (its raw text
 * between the quotes); anything else is the general call. */
ACP__JSON_INLINE int acp__json_doc_str_inl(acp_json_doc *doc,
                                           const acp_json_val *v,
                                           const char **s, size_t *len) {
  if (v != NULL && v->type == ACP_JSON_STRING && !(v->flags & ACP__JF_ESC)) {
    *s = v->raw + 1;
    *len = v->len - 2;
    return 0;
  }
  return acp_json_doc_str(doc, v, s, len);
}

#endif /* ACP_JSON_INT_H */
