/*
 * JSON reading: a one-pass strict RFC 8259 parser that builds a tape of
 * records pointing into the caller's bytes, and the on-demand accessors.
 */
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "json_int.h"

/* The public function is defined here (json_int.h maps the name to its
 * inline twin everywhere else in the library). */
#undef acp_json_type_of
#undef acp_json_raw
#undef acp_json_doc_root

#if defined(__GNUC__) || defined(__clang__)
#define ACP__ALWAYS_INLINE inline __attribute__((always_inline))
#define ACP__LIKELY(x) __builtin_expect(!!(x), 1)
#define ACP__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define ACP__ALWAYS_INLINE inline
#define ACP__LIKELY(x) (x)
#define ACP__UNLIKELY(x) (x)
#endif

#if (defined(__GNUC__) || defined(__clang__)) && defined(__BYTE_ORDER__) &&    \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ACP__SWAR_CTZ 1
#endif

#if defined(__SSE2__)
#include <emmintrin.h>
#define ACP__SSE2 1
#endif

#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* Whitespace per RFC 8259: space, tab, line feed, carriage return. */
static const uint8_t ws_table[256] = {
    [' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1};
/* The same inside one NDJSON line (acp__json_doc_parse_line()): a line
 * feed ends the line, so it is not whitespace there. */
static const uint8_t ws_line_table[256] = {[' '] = 1, ['\t'] = 1, ['\r'] = 1};

/* Hex digit value plus one; 0 marks a non-hex byte. */
static const uint8_t hex_table[256] = {
    ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,
    ['6'] = 7,  ['7'] = 8,  ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['b'] = 12,
    ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16, ['A'] = 11, ['B'] = 12,
    ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16};

static inline int is_digit(unsigned char c) {
  return (unsigned)(c - '0') < 10;
}

/* MARK: - Document (Public) */

int acp_json_doc_new(acp_json_doc **out, const acp_mem *mem) {
  acp_json_doc *doc;
  const acp_mem *m = mem ? mem : acp_mem_default();

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  doc = acp__calloc(m, 1, sizeof(*doc));
  if (doc == NULL)
    return ACP_ERR_NOMEM;
  acp__mem_init(&doc->mem, m);
  doc->max_depth = ACP_JSON_DEFAULT_MAX_DEPTH;
  *out = doc;
  return 0;
}

static void arena_reset(acp_json_doc *doc) {
  acp__jblock *b;
  acp__jblock *next;
  acp__jblock *keep = NULL;

  /* Keep the largest block so that steady-state parsing of similar
   * messages does not allocate. */
  for (b = doc->arena; b; b = b->next)
    if (keep == NULL || b->cap > keep->cap)
      keep = b;
  for (b = doc->arena; b; b = next) {
    next = b->next;
    if (b != keep)
      acp__free(&doc->mem, b);
  }
  if (keep) {
    keep->next = NULL;
    keep->used = 0;
  }
  doc->arena = keep;
}

void acp_json_doc_free(acp_json_doc *doc) {
  if (doc == NULL)
    return;
  arena_reset(doc);
  acp__free(&doc->mem, doc->arena);
  acp__free(&doc->mem, doc->tape);
  acp__free(&doc->mem, doc->stack);
  acp__free(&doc->mem, doc->strs);
  for (size_t i = 0; i < ACP__JSHAPES; i++)
    acp__free(&doc->mem, doc->shapes[i]);
  acp__free(&doc->mem, doc);
}

void acp_json_doc_set_max_depth(acp_json_doc *doc, uint32_t max_depth) {
  if (doc == NULL)
    return;
  doc->max_depth = max_depth ? max_depth : ACP_JSON_DEFAULT_MAX_DEPTH;
}

const acp_json_val *acp_json_doc_root(const acp_json_doc *doc) {
  if (doc == NULL || !doc->has_root)
    return NULL;
  return &doc->tape[0];
}

/* MARK: - Parser (Private) */

static int tape_grow(acp_json_doc *doc) {
  uint32_t ncap;
  acp_json_val *t;
  size_t bytes;

  if (doc->tape_cap >= UINT32_MAX / 2)
    return ACP_ERR_LIMIT;
  ncap = doc->tape_cap < 64 ? 64 : doc->tape_cap * 2;
  if (acp__mul_overflow(ncap, sizeof(*t), &bytes) != 0)
    return ACP_ERR_NOMEM;
  t = acp__realloc(&doc->mem, doc->tape, bytes);
  if (t == NULL)
    return ACP_ERR_NOMEM;
  doc->tape = t;
  doc->tape_cap = ncap;
  return 0;
}

/* Grow the container stack of a document (build) or of a validation run. */
static int stack_grow(const acp_mem *m, uint32_t **stack, uint32_t *cap,
                      uint32_t *local, uint32_t max) {
  uint32_t ncap = *cap * 2;
  uint32_t *s;
  size_t bytes;

  if (ncap < 16)
    ncap = 16;
  if (ncap > max)
    ncap = max;
  if (acp__mul_overflow(ncap, sizeof(uint32_t), &bytes) != 0)
    return ACP_ERR_NOMEM;
  if (*stack == local) {
    s = acp__malloc(m, bytes);
    if (s != NULL && *cap > 0)
      memcpy(s, local, *cap * sizeof(uint32_t));
  } else {
    s = acp__realloc(m, *stack, bytes);
  }
  if (s == NULL)
    return ACP_ERR_NOMEM;
  *stack = s;
  *cap = ncap;
  return 0;
}

/* The high bit of each byte of w (8 bytes of a string) that ends its plain
 * run: a quote, a backslash, a control byte or one >= 0x80. */
static inline uint64_t special8(uint64_t w) {
  uint64_t x = w ^ (ONES * '"');
  uint64_t mask = (x - ONES) & ~x;

  x = w ^ (ONES * '\\');
  mask |= (x - ONES) & ~x;
  mask |= (w - ONES * 0x20) & ~w;
  return (mask | w) & HIGHS;
}

/*
 * The rest of a string from p (inside it, after its opening quote at s;
 * the bytes before p are plain): everything but the common case
 * parse_core() tests inline (the first 16, 32 or 48 bytes hold the closing
 * quote and nothing else special). Out of line so
 * that the loop's calls (the AVX2 steps) and its SWAR constants do not
 * make every string spill the parser's registers. Returns the position of
 * the closing quote and ors ACP__JF_ESC/ACP__JF_SURR into *flags; NULL on
 * an error, with the message in *msg and its position in *at.
 * *wide_next is the parser's: where the AVX2 UTF-8 step may run again.
 */
__attribute__((noinline)) static const unsigned char *
string_rest(const acp_json_doc *doc, const unsigned char *p,
            const unsigned char *end, const unsigned char *s, uint8_t *flagsp,
            const unsigned char **wide_nextp, const char **msg,
            const unsigned char **at) {
  (void)doc; /* used only where the AVX2 steps are built */
  uint8_t flags = *flagsp;
  uint64_t w;
  uint64_t mask;
  size_t k;
#ifdef ACP__JSON_AVX2
  const unsigned char *wide_next = *wide_nextp;
#else
  (void)wide_nextp;
#endif

#define STR_FAIL(mm, where)                                                    \
  do {                                                                         \
    *msg = (mm);                                                               \
    *at = (where);                                                             \
    return NULL;                                                               \
  } while (0)
  for (;;) {
#ifdef ACP__SSE2
    /* 64 bytes a step while none is special, then 16 at a time to find
     * which: a signed compare below 0x20 catches control bytes and, being
     * signed, every byte >= 0x80 too. */
    if (end - p >= 16) {
      /* Most strings end in their first block: test it alone first. */
      __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
      int hm = _mm_movemask_epi8(acp__json_special16(v));
      if (hm != 0) {
        p += (unsigned)__builtin_ctz((unsigned)hm);
        goto string_special;
      }
      p += 16;
      if (end - p >= 64 && !acp__json_special64(p)) {
        p += 64;
        /* Bytes the line framer already found plain (its line feed search
         * over a line longer than one read): not scanned twice. Up to the
         * stretch, the scan goes on as below (at most the framer's first
         * window); a special byte before it stops there as always. */
        if (doc != NULL && doc->plain_hi != NULL &&
            (uintptr_t)p < (uintptr_t)doc->plain_hi &&
            (uintptr_t)doc->plain_hi <= (uintptr_t)end) {
          const unsigned char *lo = (const unsigned char *)doc->plain_lo;

          while ((uintptr_t)p < (uintptr_t)lo &&
                 (uintptr_t)lo - (uintptr_t)p >= 64 && !acp__json_special64(p))
            p += 64;
          while ((uintptr_t)p < (uintptr_t)lo && *p >= 0x20 && *p < 0x80 &&
                 *p != '"' && *p != '\\')
            p++;
          if ((uintptr_t)p >= (uintptr_t)lo)
            p = (const unsigned char *)doc->plain_hi;
        }
#ifdef ACP__JSON_AVX2
        /* A long text: the widest steps the CPU has (AVX2, AVX-512);
         * the steps below find the block's special byte. */
        p += acp__json_plain_wide(p, (size_t)(end - p));
#endif
        while (end - p >= 64 && !acp__json_special64(p))
          p += 64;
      }
    }
    while (end - p >= 16) {
      __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
      int hm = _mm_movemask_epi8(acp__json_special16(v));
      if (hm != 0) {
        p += (unsigned)__builtin_ctz((unsigned)hm);
        goto string_special;
      }
      p += 16;
    }
#endif
    while (end - p >= 8) {
      memcpy(&w, p, 8);
      mask = special8(w);
      if (mask) {
#ifdef ACP__SWAR_CTZ
        p += (unsigned)__builtin_ctzll(mask) >> 3;
#endif
        break;
      }
      p += 8;
    }
#ifdef ACP__SSE2
  string_special:
#endif
    if (ACP__UNLIKELY(p == end))
      STR_FAIL("unterminated string", s);
    if (*p == '"')
      break;
    if (*p == '\\') {
      flags |= ACP__JF_ESC;
      p++;
      if (p == end)
        STR_FAIL("unterminated string", s);
      switch (*p) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        p++;
        break;
      case 'u':
        if (end - p < 5 || !hex_table[p[1]] || !hex_table[p[2]] ||
            !hex_table[p[3]] || !hex_table[p[4]])
          STR_FAIL("invalid \\u escape", p - 1);
        /* D800-DFFF: remembered so that a splice of the raw text can
         * tell it would keep a lone surrogate that decoding replaces. */
        if ((p[1] | 0x20) == 'd' && hex_table[p[2]] > 8)
          flags |= ACP__JF_SURR;
        p += 5;
        break;
      default:
        STR_FAIL("invalid escape", p - 1);
      }
    } else if (*p < 0x20) {
      STR_FAIL("unescaped control character in string", p);
    } else if (*p >= 0x80) {
#ifdef ACP__JSON_AVX2
      /* Text that is not ASCII (accents, CJK, emoji): 32 bytes a step
       * where the CPU can, not a character at a time; where that stops,
       * the steps below walk the block that stopped it. */
      if (p >= wide_next && end - p >= 64 && acp__json_have_avx2()) {
        p += acp__json_plain_utf8_avx2(p, (size_t)(end - p));
        wide_next = p + 32;
        continue;
      }
#endif
      do {
        k = acp__utf8_seq(p, end);
        if (k == 0)
          STR_FAIL("invalid UTF-8", p);
        p += k;
      } while (p < end && *p >= 0x80);
    } else {
      p++;
    }
  }
  *flagsp = flags;
#ifdef ACP__JSON_AVX2
  *wide_nextp = wide_next;
#endif
  return p;
#undef STR_FAIL
}

/* The number at p (RFC 8259's grammar): the position after it, its flags
 * (ACP__JF_INT, ACP__JF_NEG) in *flagsp; NULL for none, with the message
 * and the position of what is wrong. */
static ACP__ALWAYS_INLINE const unsigned char *
scan_number(const unsigned char *p, const unsigned char *end, uint8_t *flagsp,
            const char **msg, const unsigned char **at) {
  const unsigned char *s = p;
  uint8_t flags = ACP__JF_INT;

  if (*p == '-') {
    flags |= ACP__JF_NEG;
    p++;
  }
  if (p < end && *p == '0') {
    p++;
  } else if (p < end && is_digit(*p)) {
    p++;
    while (p < end && is_digit(*p))
      p++;
  } else {
    *msg = "invalid number";
    *at = s;
    return NULL;
  }
  if (p < end && *p == '.') {
    flags &= (uint8_t)~ACP__JF_INT;
    p++;
    if (p == end || !is_digit(*p)) {
      *msg = "invalid number: digit expected after '.'";
      *at = p;
      return NULL;
    }
    while (p < end && is_digit(*p))
      p++;
  }
  if (p < end && (*p | 0x20) == 'e') {
    flags &= (uint8_t)~ACP__JF_INT;
    p++;
    if (p < end && (*p == '+' || *p == '-'))
      p++;
    if (p == end || !is_digit(*p)) {
      *msg = "invalid number: digit expected in exponent";
      *at = p;
      return NULL;
    }
    while (p < end && is_digit(*p))
      p++;
  }
  *flagsp = flags;
  return p;
}

/*
 * The parser. `build` is a compile-time constant in each caller: with it the
 * tape is built in doc; without it (acp_json_validate) only syntax, UTF-8
 * and depth are checked and the stack holds container types instead of
 * tape indexes. `line` (also a constant) parses the value at the start of
 * an NDJSON stream: a line feed is not whitespace, and the value must be
 * followed by optional spaces, tabs or CRs and a line feed, whose position
 * goes to *line_end; what follows it is not looked at.
 */
static ACP__ALWAYS_INLINE int
parse_core(acp_json_doc *doc, const acp_mem *m, const char *data, size_t len,
           acp_json_err *err, const int build, uint32_t **stackp,
           uint32_t *stack_capp, uint32_t *local_stack, uint32_t max_depth,
           const int line, size_t *line_end) {
  const unsigned char *p = (const unsigned char *)data;
  const unsigned char *end = p + len;
  const unsigned char *start = p;
  const unsigned char *s;
  uint32_t *stack = *stackp;
  uint32_t stack_cap = *stack_capp;
  uint32_t depth = 0;
  bool in_obj = false;
  bool is_key = false;
  acp_json_val *tape = build ? doc->tape : NULL;
  uint32_t n = 0;
  uint32_t cur = 0;
  uint32_t par = 0; /* build: tape index of the innermost open container */
  uint8_t flags;
  int code = ACP_ERR_PARSE;
  int rv;
  const char *msg = NULL;
  /* string_rest()'s: where the AVX2 UTF-8 step may run again. */
  const unsigned char *wide_next = p;

#define FAIL(c, mm, at)                                                        \
  do {                                                                         \
    code = (c);                                                                \
    msg = (mm);                                                                \
    p = (at);                                                                  \
    goto fail;                                                                 \
  } while (0)
#define SKIP_WS()                                                              \
  while (p < end && (line ? ws_line_table : ws_table)[*p])                     \
  p++
  /* Append a record for the value starting at p and count it in its parent
   * (tape[par]). Its `next` starts at nx: 1 for a key (its value follows),
   * else 0, which the ',' after the value replaces with the distance to the
   * record that comes next (n then), so a value is linked once, when it
   * ends, and neither the parent's last child nor the stack is read here. */
#define NEW_REC(t, nx)                                                         \
  do {                                                                         \
    if (build) {                                                               \
      if (ACP__UNLIKELY(n == doc->tape_cap)) {                                 \
        rv = tape_grow(doc);                                                   \
        if (rv != 0)                                                           \
          FAIL(rv, "out of memory for the tape", p);                           \
        tape = doc->tape;                                                      \
      }                                                                        \
      if (depth > 0)                                                           \
        tape[par].count++;                                                     \
      cur = n++;                                                               \
      tape[cur].raw = (const char *)p;                                         \
      tape[cur].next = (nx);                                                   \
      tape[cur].count = 0;                                                     \
      tape[cur].type = (t);                                                    \
      tape[cur].flags = 0;                                                     \
    }                                                                          \
  } while (0)
#define NEW_VAL(t) NEW_REC(t, 0)

  /* The steps below test for the byte they expect first and skip
   * whitespace only when it is not there: compact JSON (what peers send)
   * then costs one compare a step, not a table lookup as well. */
value:
  if (ACP__UNLIKELY(p == end))
    FAIL(ACP_ERR_PARSE, "unexpected end of input, expected a value", p);
  /* Most values are strings: one compare before the jump table. */
  if (ACP__LIKELY(*p == '"')) {
    NEW_VAL(ACP_JSON_STRING);
    is_key = false;
    goto string;
  }
  switch (*p) {
  case '\n':
    if (line) /* a line feed ends the line: no value on it */
      FAIL(ACP_ERR_PARSE, "unexpected character, expected a value", p);
    /* fall through */
  case ' ':
  case '\t':
  case '\r':
    p++;
    SKIP_WS();
    goto value;
  case '"':
    NEW_VAL(ACP_JSON_STRING);
    is_key = false;
    goto string;
  case '{':
  case '[':
    NEW_VAL(*p == '{' ? ACP_JSON_OBJECT : ACP_JSON_ARRAY);
    if (ACP__UNLIKELY(depth >= max_depth))
      FAIL(ACP_ERR_LIMIT, "nesting too deep", p);
    if (ACP__UNLIKELY(depth == stack_cap)) {
      rv = stack_grow(m, &stack, &stack_cap, local_stack, max_depth);
      if (rv != 0)
        FAIL(rv, "out of memory for the stack", p);
    }
    in_obj = *p == '{';
    stack[depth++] = build ? cur : (uint32_t)in_obj;
    par = cur;
    p++;
    SKIP_WS();
    if (p < end && *p == (in_obj ? '}' : ']'))
      goto close;
    if (in_obj)
      goto key;
    goto value;
  case 't':
    NEW_VAL(ACP_JSON_BOOL);
    if (end - p < 4 || memcmp(p, "true", 4) != 0)
      FAIL(ACP_ERR_PARSE, "invalid literal", p);
    if (build) {
      tape[cur].flags = ACP__JF_TRUE;
      tape[cur].len = 4;
    }
    p += 4;
    goto after_value;
  case 'f':
    NEW_VAL(ACP_JSON_BOOL);
    if (end - p < 5 || memcmp(p, "false", 5) != 0)
      FAIL(ACP_ERR_PARSE, "invalid literal", p);
    if (build)
      tape[cur].len = 5;
    p += 5;
    goto after_value;
  case 'n':
    NEW_VAL(ACP_JSON_NULL);
    if (end - p < 4 || memcmp(p, "null", 4) != 0)
      FAIL(ACP_ERR_PARSE, "invalid literal", p);
    if (build)
      tape[cur].len = 4;
    p += 4;
    goto after_value;
  case '-':
  case '0':
  case '1':
  case '2':
  case '3':
  case '4':
  case '5':
  case '6':
  case '7':
  case '8':
  case '9':
    NEW_VAL(ACP_JSON_NUMBER);
    goto number;
  default:
    FAIL(ACP_ERR_PARSE, "unexpected character, expected a value", p);
  }

key:
  if (ACP__UNLIKELY(p == end || *p != '"')) {
    SKIP_WS();
    if (p == end || *p != '"')
      FAIL(ACP_ERR_PARSE, "expected a string key", p);
  }
  /* NEW_REC for a key: always inside an object (depth > 0), its next is
   * its value (1); len and flags are written when the string ends. */
  if (build) {
    if (ACP__UNLIKELY(n == doc->tape_cap)) {
      rv = tape_grow(doc);
      if (rv != 0)
        FAIL(rv, "out of memory for the tape", p);
      tape = doc->tape;
    }
    tape[par].count++;
    cur = n++;
    tape[cur].raw = (const char *)p;
    tape[cur].next = 1;
    tape[cur].count = 0;
    tape[cur].type = ACP_JSON_STRING;
  }
  is_key = true;
  goto string;

string:
  s = p++;
  flags = 0;
#ifdef ACP__SSE2
  /* Most strings end in their first 48 bytes with nothing else special:
   * that test alone, inline (16 bytes, then 16 more while the ones before
   * were plain); anything else (escapes, UTF-8, control bytes, longer strings,
   * the last bytes of the input) is string_rest(), from the first byte not
   * yet found plain. */
  if (ACP__LIKELY(end - p >= 16)) {
    int hm = _mm_movemask_epi8(
        acp__json_special16(_mm_loadu_si128((const __m128i *)(const void *)p)));
    if (hm == 0) {
      p += 16;
      if (end - p >= 16) {
        hm = _mm_movemask_epi8(acp__json_special16(
            _mm_loadu_si128((const __m128i *)(const void *)p)));
        /* A third block: session ids ("sess_" and 32 hex digits) and
         * UUIDs are 36-40 bytes, in every prompt turn. */
        if (hm == 0) {
          p += 16;
          if (end - p >= 16)
            hm = _mm_movemask_epi8(acp__json_special16(
                _mm_loadu_si128((const __m128i *)(const void *)p)));
        }
      }
    }
    if (hm != 0 && p[(unsigned)__builtin_ctz((unsigned)hm)] == '"') {
      p += (unsigned)__builtin_ctz((unsigned)hm);
      goto string_end;
    }
  }
#endif
  {
    const unsigned char *at = NULL;
    const unsigned char *q =
        string_rest(doc, p, end, s, &flags, &wide_next, &msg, &at);
    if (ACP__UNLIKELY(q == NULL))
      FAIL(ACP_ERR_PARSE, msg, at);
    p = q;
  }
#ifdef ACP__SSE2
string_end:
#endif
  p++;
  if (build) {
    tape[cur].len = (uint32_t)(p - s);
    tape[cur].flags = flags;
  }
  if (is_key)
    goto colon;
  goto after_value;

colon:
  if (ACP__UNLIKELY(p == end || *p != ':')) {
    SKIP_WS();
    if (p == end || *p != ':')
      FAIL(ACP_ERR_PARSE, "expected ':' after key", p);
  }
  p++;
  goto value;

number:
  s = p;
  {
    const unsigned char *at = NULL;
    const unsigned char *q = scan_number(p, end, &flags, &msg, &at);
    if (ACP__UNLIKELY(q == NULL))
      FAIL(ACP_ERR_PARSE, msg, at);
    p = q;
  }
  if (build) {
    tape[cur].len = (uint32_t)(p - s);
    tape[cur].flags = flags;
  }
  goto after_value;

after_value:
  if (depth == 0)
    goto done;
after_value_ws:
  if (ACP__UNLIKELY(p == end))
    FAIL(ACP_ERR_PARSE, "unexpected end of input in container", p);
  if (*p == ',') {
    p++;
    /* The value that just ended (cur: a scalar, or a container that just
     * closed) is followed by its next sibling, the next record. */
    if (build)
      tape[cur].next = n - cur;
    if (in_obj)
      goto key;
    goto value;
  }
  if (*p == (in_obj ? '}' : ']'))
    goto close;
  if ((line ? ws_line_table : ws_table)[*p]) {
    p++;
    SKIP_WS();
    goto after_value_ws;
  }
  FAIL(ACP_ERR_PARSE,
       in_obj ? "expected ',' or '}' in object"
              : "expected ',' or ']' in array",
       p);

close:
  /* p is at the closing bracket of the innermost container. */
  p++;
  depth--;
  if (build) {
    acp_json_val *c;
    cur = stack[depth];
    c = &tape[cur];
    c->len = (uint32_t)((const char *)p - c->raw);
    if (in_obj)
      c->count /= 2;
    par = depth > 0 ? stack[depth - 1] : 0;
    in_obj = depth > 0 && tape[par].type == ACP_JSON_OBJECT;
  } else {
    in_obj = depth > 0 && stack[depth - 1] != 0;
  }
  goto after_value;

done:
  SKIP_WS();
  if (line) {
    if (p == end || *p != '\n')
      FAIL(ACP_ERR_PARSE, "no line feed after the JSON value", p);
    *line_end = (size_t)(p - start);
  } else if (p != end) {
    FAIL(ACP_ERR_PARSE, "unexpected data after the JSON value", p);
  }
  if (build)
    doc->tape_n = n;
  *stackp = stack;
  *stack_capp = stack_cap;
  if (err) {
    err->code = 0;
    err->msg = NULL;
    err->pos = 0;
  }
  return 0;

fail:
  *stackp = stack;
  *stack_capp = stack_cap;
  if (err) {
    err->code = code;
    err->msg = msg;
    err->pos = (size_t)(p - start);
  }
  return code;
#undef FAIL
#undef SKIP_WS
#undef NEW_VAL
#undef NEW_REC
}

static int check_size(size_t len, acp_json_err *err) {
  if ((uint64_t)len > UINT32_MAX) {
    if (err) {
      err->code = ACP_ERR_LIMIT;
      err->msg = "input of 4 GiB or more";
      err->pos = 0;
    }
    return ACP_ERR_LIMIT;
  }
  return 0;
}

int acp_json_doc_parse(acp_json_doc *doc, const char *data, size_t len,
                       acp_json_err *err) {
  int rv;
  static const char empty[1] = {0};

  if (doc == NULL || (data == NULL && len > 0)) {
    if (err) {
      err->code = ACP_ERR_INVALID_ARGUMENT;
      err->msg = "invalid argument";
      err->pos = 0;
    }
    return ACP_ERR_INVALID_ARGUMENT;
  }
  doc->has_root = false;
  doc->tape_n = 0;
  doc->strs_n = 0;
  arena_reset(doc);
  rv = check_size(len, err);
  if (rv != 0) {
    doc->plain_lo = doc->plain_hi = NULL;
    return rv;
  }
  if (data == NULL)
    data = empty;
  rv = parse_core(doc, &doc->mem, data, len, err, 1, &doc->stack,
                  &doc->stack_cap, NULL, doc->max_depth, 0, NULL);
  doc->plain_lo = doc->plain_hi = NULL;
  if (rv != 0) {
    doc->tape_n = 0;
    return rv;
  }
  doc->has_root = true;
  return 0;
}

/* MARK: - Shapes (Private) */

/*
 * A kept line: its bytes, its tape, and its holes, the strings and numbers
 * that are values (not keys). The next line matches it when it is the same
 * bytes but for the holes, each of which holds a string or a number again
 * (any one: it is scanned by the parser's own steps): the same tokens in
 * the same order, so the same tape, but for the holes' records and where
 * every record starts (and a container ends) after a hole that changed
 * length. A line that does not match is parsed; a match is never a guess.
 *
 * Only short lines are kept (their copy is cheap; a long line's cost is
 * its scan, which a match repeats), from the third line of a document on
 * (a session's first two are its initialize and session/new), and less
 * often while kept lines go unused: a stream without repeating shapes
 * pays for a few failed compares a line, which stop at the first byte
 * that differs, and for a kept line now and then.
 */
#define SHAPE_MAX_RECS 64
#define SHAPE_MAX_BYTES 2048
#define SHAPE_MAX_HOLES 32
#define SHAPE_MAX_DEPTH 16

/* A hole and the bytes before it, back to the hole before: the literal,
 * which takes in a string's opening quote. */
typedef struct shape_hole {
  uint32_t lit;  /* where the literal starts in the kept line */
  uint32_t nlit; /* its length */
  uint32_t len;  /* the hole's length in the kept line, quotes included */
  uint32_t rec;  /* its record */
  bool str;      /* a string, else a number */
} shape_hole;

/* A container with holes inside: its length changes with theirs. */
typedef struct shape_box {
  uint32_t rec;
  uint16_t hb; /* holes before it */
  uint16_t he; /* holes before its end */
} shape_box;

struct acp__jshape {
  size_t cap; /* bytes after the header */
  uint32_t n;
  uint32_t nholes;
  uint32_t nboxes;
  uint32_t len;       /* the kept line's bytes, its line feed included */
  uint32_t tail;      /* where the bytes after the last hole start */
  uint32_t depth;     /* its deepest nesting */
  uint32_t used;      /* the clock when it was kept or last matched */
  bool matched;       /* since it was kept */
  acp_json_val *tape; /* raw: the offset in the kept line */
  shape_hole *holes;
  shape_box *boxes;
  unsigned char *bytes;
};

/* a[0..n) == b[0..n) without a call: 16 bytes a step (two loads a side),
 * the last step overlapping the one before; never outside either. */
static ACP__ALWAYS_INLINE int lit_eq(const unsigned char *a,
                                     const unsigned char *b, size_t n) {
  size_t i;

  if (n <= 16)
    return acp__json_key_eq16((const char *)a, (const char *)b, n);
  for (i = 0; i + 16 < n; i += 16)
    if (!acp__json_key_eq16((const char *)a + i, (const char *)b + i, 16))
      return 0;
  return acp__json_key_eq16((const char *)a + n - 16, (const char *)b + n - 16,
                            16);
}

/* Whether data[0..end) is sh's line but for its holes; then doc's tape is
 * the line's and *line_end the offset of its line feed. */
static int shape_match(acp_json_doc *doc, const acp__jshape *sh,
                       const unsigned char *data, const unsigned char *end,
                       size_t *line_end) {
  const unsigned char *p = data;
  const unsigned char *wide_next = data;
  const char *msg = NULL;
  const unsigned char *at = NULL;
  const shape_hole *h;
  acp_json_val *t;
  uint32_t k;
  uint32_t i;
  /* d[k]: how much longer the line is than the kept one before hole k;
   * hlen, hflags: the holes' lengths and flags in the line. */
  int64_t d[SHAPE_MAX_HOLES + 1];
  uint32_t hlen[SHAPE_MAX_HOLES];
  uint8_t hflags[SHAPE_MAX_HOLES];

  if (sh->depth > doc->max_depth)
    return 0;
  d[0] = 0;
  for (k = 0, h = sh->holes; k < sh->nholes; k++, h++) {
    const unsigned char *q;
    uint8_t flags = 0;

    /* At least one byte after the literal: the hole's first. */
    if ((size_t)(end - p) <= h->nlit || !lit_eq(p, sh->bytes + h->lit, h->nlit))
      return 0;
    p += h->nlit;
    if (h->str) {
      /* p is past the quote. The parser's first steps, inline: most
       * strings end within 64 bytes; the last ones of a line a byte at a
       * time; anything else (escapes, UTF-8) is the parser's. */
      q = p;
#ifdef ACP__SSE2
      while (end - q >= 16 && q - p < 64) {
        int hm = _mm_movemask_epi8(acp__json_special16(
            _mm_loadu_si128((const __m128i *)(const void *)q)));
        if (hm != 0) {
          q += (unsigned)__builtin_ctz((unsigned)hm);
          goto special;
        }
        q += 16;
      }
      if (end - q < 16)
#endif
      {
        uint64_t w;
        uint64_t mask;
        /* string_rest()'s 8-byte step, inline: the last string of a
         * line. */
        if (end - q >= 8) {
          memcpy(&w, q, 8);
          mask = special8(w);
#ifdef ACP__SWAR_CTZ
          if (mask != 0) {
            q += (unsigned)__builtin_ctzll(mask) >> 3;
            goto special;
          }
#endif
          if (mask == 0)
            q += 8;
        }
        while (q < end && *q != '"' && *q != '\\' && *q >= 0x20 && *q < 0x80)
          q++;
      }
#if defined(ACP__SSE2) || defined(ACP__SWAR_CTZ)
    special:
#endif
      if (q == end || *q != '"') {
        q = string_rest(doc, q, end, p - 1, &flags, &wide_next, &msg, &at);
        if (q == NULL)
          return 0;
      }
      q++;
      hlen[k] = (uint32_t)(q - p) + 1; /* and the quote before p */
    } else {
      q = scan_number(p, end, &flags, &msg, &at);
      if (q == NULL)
        return 0;
      hlen[k] = (uint32_t)(q - p);
    }
    hflags[k] = flags;
    d[k + 1] = d[k] + (int64_t)hlen[k] - (int64_t)h->len;
    p = q;
  }
  /* The rest, its line feed included. */
  if ((size_t)(end - p) < sh->len - sh->tail ||
      !lit_eq(p, sh->bytes + sh->tail, sh->len - sh->tail))
    return 0;
  p += sh->len - sh->tail;
  while (doc->tape_cap < sh->n)
    if (tape_grow(doc) != 0)
      return 0;
  /* The kept tape, each record moved to the line: those up to hole k's
   * (its own too) by d[k], the rest by d[nholes]. */
  t = doc->tape;
  memcpy(t, sh->tape, sh->n * sizeof(*t));
  {
    uintptr_t by = (uintptr_t)data;
    uint32_t next = sh->nholes > 0 ? sh->holes[0].rec : sh->n;

    for (i = 0, k = 0; i < sh->n; i++) {
      t[i].raw = (const char *)((uintptr_t)t[i].raw + by);
      if (i == next) {
        t[i].len = hlen[k];
        t[i].flags = hflags[k];
        k++;
        by = (uintptr_t)data + (uintptr_t)d[k];
        next = k < sh->nholes ? sh->holes[k].rec : sh->n;
      }
    }
  }
  for (k = 0; k < sh->nboxes; k++) {
    const shape_box *b = &sh->boxes[k];
    t[b->rec].len = (uint32_t)((int64_t)t[b->rec].len + d[b->he] - d[b->hb]);
  }
  doc->tape_n = sh->n;
  *line_end = (size_t)(p - data) - 1;
  return 1;
}

/* Keep the line just parsed into doc (its line feed at data[at]) in the
 * least recently used slot, if it is short and not too deep. */
static void shape_keep(acp_json_doc *doc, const unsigned char *data,
                       size_t at) {
  struct {
    const unsigned char *end;
    uint32_t rec;
    uint32_t nth;
    bool obj;
  } st[SHAPE_MAX_DEPTH];
  bool hole[SHAPE_MAX_RECS];
  uint32_t hb[SHAPE_MAX_RECS]; /* holes before each record */
  uint32_t he[SHAPE_MAX_RECS]; /* a container: holes before its end */
  uint32_t n = doc->tape_n;
  const acp_json_val *t = doc->tape;
  uint32_t depth = 0;
  uint32_t maxd = 0;
  uint32_t nholes = 0;
  uint32_t nboxes = 0;
  uint32_t from = 0;
  uint32_t i;
  uint32_t slot = 0;
  size_t need;
  acp__jshape *sh;

  if (n == 0 || n > SHAPE_MAX_RECS || at + 1 > SHAPE_MAX_BYTES)
    return;
  /* Which records are holes: not an object's keys (its children in
   * even places), nor true, false or null. */
  for (i = 0; i < n; i++) {
    const unsigned char *r = (const unsigned char *)t[i].raw;
    bool key = false;

    /* A container ends before the first record past its closing
     * bracket: its holes are those before that record. */
    while (depth > 0 && r >= st[depth - 1].end) {
      depth--;
      he[st[depth].rec] = nholes;
      nboxes += he[st[depth].rec] != hb[st[depth].rec];
    }
    if (depth > 0 && st[depth - 1].obj)
      key = (st[depth - 1].nth++ & 1) == 0;
    hb[i] = nholes;
    hole[i] = false;
    if (t[i].type == ACP_JSON_OBJECT || t[i].type == ACP_JSON_ARRAY) {
      if (depth == SHAPE_MAX_DEPTH)
        return;
      st[depth].end = r + t[i].len;
      st[depth].rec = i;
      st[depth].nth = 0;
      st[depth].obj = t[i].type == ACP_JSON_OBJECT;
      depth++;
      if (depth > maxd)
        maxd = depth;
    } else if (!key &&
               (t[i].type == ACP_JSON_STRING || t[i].type == ACP_JSON_NUMBER)) {
      hole[i] = true;
      nholes++;
    }
  }
  while (depth > 0) { /* open to the end: every hole after it is inside */
    depth--;
    he[st[depth].rec] = nholes;
    nboxes += he[st[depth].rec] != hb[st[depth].rec];
  }
  if (nholes > SHAPE_MAX_HOLES)
    return;

  for (i = 0; i < ACP__JSHAPES; i++) {
    if (doc->shapes[i] == NULL) {
      slot = i;
      break;
    }
    if (doc->shapes[i]->used < doc->shapes[slot]->used)
      slot = i;
  }
  sh = doc->shapes[slot];
  if (sh != NULL && !sh->matched) {
    /* Kept for nothing: keep less often (1, 3, 7 ... 63 misses apart). */
    if (doc->shape_streak < 6)
      doc->shape_streak++;
    doc->shape_skip = (uint8_t)((1u << doc->shape_streak) - 1);
  }
  /* The header, then the arrays in falling alignment. */
  need = n * sizeof(acp_json_val) + nholes * sizeof(shape_hole) +
         nboxes * sizeof(shape_box) + at + 1;
  if (sh == NULL || sh->cap < need) {
    acp__jshape *nsh = acp__realloc(&doc->mem, sh, sizeof(*sh) + need);
    if (nsh == NULL)
      return; /* not kept: nothing is lost */
    sh = nsh;
    sh->cap = need;
    doc->shapes[slot] = sh;
  }
  sh->tape = (acp_json_val *)(void *)(sh + 1);
  sh->holes = (shape_hole *)(void *)(sh->tape + n);
  sh->boxes = (shape_box *)(void *)(sh->holes + nholes);
  sh->bytes = (unsigned char *)(sh->boxes + nboxes);
  sh->n = n;
  sh->nholes = nholes;
  sh->nboxes = nboxes;
  sh->len = (uint32_t)(at + 1);
  sh->depth = maxd;
  sh->used = ++doc->shape_clock;
  sh->matched = false;
  memcpy(sh->bytes, data, at + 1);
  memcpy(sh->tape, t, n * sizeof(acp_json_val));
  nboxes = 0;
  for (i = 0; i < n; i++) {
    uint32_t off = (uint32_t)((const unsigned char *)t[i].raw - data);

    sh->tape[i].raw = (const char *)(uintptr_t)off;
    if (hole[i]) {
      shape_hole *hl = &sh->holes[hb[i]];
      bool str = t[i].type == ACP_JSON_STRING;
      hl->lit = from;
      hl->nlit = off - from + (str ? 1u : 0u);
      hl->len = t[i].len;
      hl->rec = i;
      hl->str = str;
      from = off + t[i].len;
      sh->tape[i].count = 0;
    } else if ((t[i].type == ACP_JSON_OBJECT || t[i].type == ACP_JSON_ARRAY) &&
               he[i] != hb[i]) {
      shape_box *b = &sh->boxes[nboxes++];
      b->rec = i;
      b->hb = (uint16_t)hb[i];
      b->he = (uint16_t)he[i];
    }
  }
  sh->tail = from;
}

int acp__json_doc_parse_line(acp_json_doc *doc, const char *data, size_t len,
                             size_t *line_len) {
  size_t at = 0;
  int rv;
  uint32_t i;

  *line_len = 0;
  doc->has_root = false;
  doc->tape_n = 0;
  doc->strs_n = 0;
  arena_reset(doc);
  if ((uint64_t)len > UINT32_MAX)
    len = UINT32_MAX; /* a line must end before that anyway */
  for (i = 0; i < ACP__JSHAPES; i++) {
    acp__jshape *sh = doc->shapes[i];
    if (sh != NULL && shape_match(doc, sh, (const unsigned char *)data,
                                  (const unsigned char *)data + len, &at)) {
      sh->used = ++doc->shape_clock;
      sh->matched = true;
      doc->shape_streak = 0;
      doc->shape_skip = 0;
      doc->shape_hits++;
      goto done;
    }
  }
  rv = parse_core(doc, &doc->mem, data, len, NULL, 1, &doc->stack,
                  &doc->stack_cap, NULL, doc->max_depth, 1, &at);
  if (rv != 0) {
    doc->plain_lo = doc->plain_hi = NULL;
    doc->tape_n = 0;
    return rv;
  }
  if (doc->shape_lines < 2)
    doc->shape_lines++;
  else if (doc->shape_skip > 0)
    doc->shape_skip--;
  else
    shape_keep(doc, (const unsigned char *)data, at);
done:
  doc->plain_lo = doc->plain_hi = NULL;
  doc->has_root = true;
  *line_len = at;
  return 0;
}

int acp_json_validate(const char *data, size_t len, acp_json_err *err) {
  uint32_t local[64];
  uint32_t *stack = local;
  uint32_t cap = 64;
  int rv;
  static const char empty[1] = {0};

  if (data == NULL && len > 0) {
    if (err) {
      err->code = ACP_ERR_INVALID_ARGUMENT;
      err->msg = "invalid argument";
      err->pos = 0;
    }
    return ACP_ERR_INVALID_ARGUMENT;
  }
  rv = check_size(len, err);
  if (rv != 0)
    return rv;
  if (data == NULL)
    data = empty;
  rv = parse_core(NULL, acp_mem_default(), data, len, err, 0, &stack, &cap,
                  local, ACP_JSON_DEFAULT_MAX_DEPTH, 0, NULL);
  if (stack != local)
    acp__free(acp_mem_default(), stack);
  return rv;
}

/* MARK: - Strings (Private) */

static unsigned hex4(const char *p) {
  const unsigned char *u = (const unsigned char *)p;
  return ((unsigned)(hex_table[u[0]] - 1) << 12) |
         ((unsigned)(hex_table[u[1]] - 1) << 8) |
         ((unsigned)(hex_table[u[2]] - 1) << 4) |
         (unsigned)(hex_table[u[3]] - 1);
}

/*
 * Decode the escape at *pp (which points at the backslash) into out[0..4)
 * and advance. The input was validated by the parser. Escaped lone UTF-16
 * surrogates (legal JSON syntax, produced for example by JavaScript's
 * JSON.stringify on a string cut in the middle of a pair) decode to U+FFFD
 * so that decoded strings are always valid UTF-8.
 */
static size_t decode_escape(const char **pp, const char *end, char *out) {
  const char *p = *pp + 1;
  unsigned cp;
  unsigned lo;

  switch (*p) {
  case 'b':
    out[0] = '\b';
    break;
  case 'f':
    out[0] = '\f';
    break;
  case 'n':
    out[0] = '\n';
    break;
  case 'r':
    out[0] = '\r';
    break;
  case 't':
    out[0] = '\t';
    break;
  case 'u':
    cp = hex4(p + 1);
    p += 5;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
        lo = hex4(p + 2);
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          p += 6;
        } else {
          cp = 0xFFFD;
        }
      } else {
        cp = 0xFFFD;
      }
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      cp = 0xFFFD;
    }
    *pp = p;
    if (cp < 0x80) {
      out[0] = (char)cp;
      return 1;
    }
    if (cp < 0x800) {
      out[0] = (char)(0xC0 | (cp >> 6));
      out[1] = (char)(0x80 | (cp & 0x3F));
      return 2;
    }
    if (cp < 0x10000) {
      out[0] = (char)(0xE0 | (cp >> 12));
      out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
      out[2] = (char)(0x80 | (cp & 0x3F));
      return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
  default: /* '"', '\\', '/' */
    out[0] = *p;
    break;
  }
  *pp = p + 1;
  return 1;
}

/* Decode a string body into dst, which has room for (end - p) bytes (the
 * decoded form is never longer). Returns the decoded length. */
static size_t decode_all(const char *p, const char *end, char *dst) {
  char *d = dst;
  const char *bs;
  size_t run;

  while (p < end) {
    bs = memchr(p, '\\', (size_t)(end - p));
    run = bs ? (size_t)(bs - p) : (size_t)(end - p);
    memcpy(d, p, run);
    d += run;
    p += run;
    if (bs == NULL)
      break;
    d += decode_escape(&p, end, d);
  }
  return (size_t)(d - dst);
}

/*
 * memcmp(a, b, n) == 0 without a call for the short keys and values of
 * protocol messages ("jsonrpc", "method", "sessionId"): up to 16 bytes are
 * two loads from each side that overlap when n is not a power of two, and
 * never read outside a[0..n) or b[0..n).
 */
/* bytes_eq() for n <= 16: loads only, no call (json_int.h's, which the
 * inline lookups of the library's other files use too). */
static ACP__ALWAYS_INLINE int bytes_eq16(const char *a, const char *b,
                                         size_t n) {
  return acp__json_key_eq16(a, b, n);
}

static ACP__ALWAYS_INLINE int bytes_eq(const char *a, const char *b, size_t n) {
  if (n > 16)
    return memcmp(a, b, n) == 0;
  return bytes_eq16(a, b, n);
}

static int is_string(const acp_json_val *v) {
  return v != NULL && v->type == ACP_JSON_STRING;
}

/* MARK: - Accessors (Public) */

int acp_json_doc_str(acp_json_doc *doc, const acp_json_val *v, const char **s,
                     size_t *len) {
  size_t need;
  acp__jblock *b;
  acp_json_val *own = NULL;

  if (!is_string(v))
    return ACP_ERR_TYPE;
  if (!(v->flags & ACP__JF_ESC)) {
    *s = v->raw + 1;
    *len = v->len - 2;
    return 0;
  }
  if (doc == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  /* A value of this document can remember where it was decoded. */
  if (doc->has_root && v >= doc->tape && v < doc->tape + doc->tape_n) {
    own = &doc->tape[v - doc->tape];
    if (own->count != 0) {
      *s = doc->strs[own->count - 1].s;
      *len = doc->strs[own->count - 1].len;
      return 0;
    }
    if (doc->strs_n == doc->strs_cap) {
      uint32_t ncap = doc->strs_cap ? doc->strs_cap * 2 : 16;
      struct acp__jstr *ns;
      if (ncap > doc->tape_n)
        ncap = doc->tape_n;
      ns = acp__realloc(&doc->mem, doc->strs, ncap * sizeof(*ns));
      if (ns == NULL)
        return ACP_ERR_NOMEM;
      doc->strs = ns;
      doc->strs_cap = ncap;
    }
  }
  need = v->len - 2;
  b = doc->arena;
  if (b == NULL || b->cap - b->used < need) {
    size_t cap = need < 4096 ? 4096 : need;
    b = acp__malloc(&doc->mem, sizeof(*b) + cap);
    if (b == NULL)
      return ACP_ERR_NOMEM;
    b->cap = cap;
    b->used = 0;
    b->next = doc->arena;
    doc->arena = b;
  }
  *s = b->data + b->used;
  *len = decode_all(v->raw + 1, v->raw + v->len - 1, b->data + b->used);
  b->used += *len;
  if (own != NULL) {
    doc->strs[doc->strs_n].s = *s;
    doc->strs[doc->strs_n].len = *len;
    own->count = ++doc->strs_n;
  }
  return 0;
}

acp_json_type acp_json_type_of(const acp_json_val *v) {
  return v ? (acp_json_type)v->type : ACP_JSON_NONE;
}

const char *acp_json_raw(const acp_json_val *v, size_t *len) {
  if (v == NULL) {
    if (len)
      *len = 0;
    return NULL;
  }
  if (len)
    *len = v->len;
  return v->raw;
}

int acp_json_get_bool(const acp_json_val *v, bool *out) {
  if (v == NULL || v->type != ACP_JSON_BOOL)
    return ACP_ERR_TYPE;
  *out = (v->flags & ACP__JF_TRUE) != 0;
  return 0;
}

/* Magnitude of an integer-syntax number; -1 on overflow of uint64_t. */
static int int_magnitude(const acp_json_val *v, uint64_t *out) {
  const char *p = v->raw;
  const char *end = p + v->len;
  uint64_t acc = 0;
  unsigned d;

  if (*p == '-')
    p++;
  /* Up to 19 digits cannot overflow 64 bits (10^19 - 1 < 2^64): no check
   * per digit for the ids and counts that make up nearly every number. */
  if (end - p <= 19) {
    for (; p < end; p++)
      acc = acc * 10 + (unsigned)(*p - '0');
    *out = acc;
    return 0;
  }
  for (; p < end; p++) {
    d = (unsigned)(*p - '0');
    if (acc > (UINT64_MAX - d) / 10)
      return -1;
    acc = acc * 10 + d;
  }
  *out = acc;
  return 0;
}

int acp_json_get_int64(const acp_json_val *v, int64_t *out) {
  uint64_t mag;

  if (v == NULL || v->type != ACP_JSON_NUMBER || !(v->flags & ACP__JF_INT))
    return ACP_ERR_TYPE;
  if (int_magnitude(v, &mag) != 0)
    return ACP_ERR_RANGE;
  if (v->flags & ACP__JF_NEG) {
    if (mag > (uint64_t)INT64_MAX + 1)
      return ACP_ERR_RANGE;
    *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    return 0;
  }
  if (mag > (uint64_t)INT64_MAX)
    return ACP_ERR_RANGE;
  *out = (int64_t)mag;
  return 0;
}

int acp_json_get_uint64(const acp_json_val *v, uint64_t *out) {
  uint64_t mag;

  if (v == NULL || v->type != ACP_JSON_NUMBER || !(v->flags & ACP__JF_INT))
    return ACP_ERR_TYPE;
  if (int_magnitude(v, &mag) != 0)
    return ACP_ERR_RANGE;
  /* "-0" is zero, which is in range; any other negative is not. */
  if ((v->flags & ACP__JF_NEG) && mag != 0)
    return ACP_ERR_RANGE;
  *out = mag;
  return 0;
}

/* Significant digits kept when shortening a long number for strtod. 800 is
 * more than the 767 a double can ever need to round correctly; any nonzero
 * digit dropped past them is kept as a final sticky '1'. */
#define MAX_SIG_DIGITS 800

/*
 * Rewrite a long JSON number as "[-]0.DIGITSe<exp>" with at most
 * MAX_SIG_DIGITS (+1 sticky) digits. Returns the length written to buf.
 */
static size_t shorten_number(const char *p, const char *end, char *buf,
                             size_t cap) {
  size_t k = 0;
  size_t nd = 0;
  int64_t e10 = 0;
  int64_t ev = 0;
  bool seen = false;
  bool sticky = false;
  bool eneg = false;

  if (*p == '-')
    buf[k++] = *p++;
  buf[k++] = '0';
  buf[k++] = '.';
  for (; p < end && is_digit((unsigned char)*p); p++) {
    if (!seen && *p == '0')
      continue;
    seen = true;
    e10++;
    if (nd < MAX_SIG_DIGITS) {
      buf[k++] = *p;
      nd++;
    } else if (*p != '0') {
      sticky = true;
    }
  }
  if (p < end && *p == '.') {
    for (p++; p < end && is_digit((unsigned char)*p); p++) {
      if (!seen && *p == '0') {
        e10--;
        continue;
      }
      seen = true;
      if (nd < MAX_SIG_DIGITS) {
        buf[k++] = *p;
        nd++;
      } else if (*p != '0') {
        sticky = true;
      }
    }
  }
  if (p < end && (*p | 0x20) == 'e') {
    p++;
    if (*p == '+' || *p == '-')
      eneg = *p++ == '-';
    for (; p < end; p++)
      if (ev < INT64_C(1000000000000))
        ev = ev * 10 + (*p - '0');
  }
  if (nd == 0) {
    buf[k++] = '0';
    buf[k] = '\0';
    return k;
  }
  if (sticky)
    buf[k++] = '1';
  e10 += eneg ? -ev : ev;
  k += (size_t)snprintf(buf + k, cap - k, "e%lld", (long long)e10);
  return k;
}

int acp_json_get_double(const acp_json_val *v, double *out) {
  char buf[MAX_SIG_DIGITS + 48];
  size_t n;
  char *endp;
  double d;

  if (v == NULL || v->type != ACP_JSON_NUMBER)
    return ACP_ERR_TYPE;
  if (v->len < 64) {
    memcpy(buf, v->raw, v->len);
    n = v->len;
    buf[n] = '\0';
  } else {
    n = shorten_number(v->raw, v->raw + v->len, buf, sizeof(buf));
  }
  /* strtod honours LC_NUMERIC. JSON syntax is a subset of what strtod reads
   * in the "C" locale; if the program switched to a locale whose decimal
   * point is not '.', strtod stops at the '.', so retry with the locale's
   * (single-byte) decimal point. */
  d = strtod(buf, &endp);
  if (endp != buf + n) {
    char *dot = memchr(buf, '.', n);
    const char *dp = localeconv()->decimal_point;
    if (dot != NULL && dp != NULL && dp[0] != '\0' && dp[1] == '\0') {
      *dot = dp[0];
      d = strtod(buf, &endp);
    }
  }
  if (isinf(d))
    return ACP_ERR_RANGE;
  *out = d;
  return 0;
}

const char *acp_json_str_raw(const acp_json_val *v, size_t *len) {
  if (!is_string(v)) {
    if (len)
      *len = 0;
    return NULL;
  }
  if (len)
    *len = v->len - 2;
  return v->raw + 1;
}

int acp_json_str_has_escapes(const acp_json_val *v) {
  return is_string(v) && (v->flags & ACP__JF_ESC) != 0;
}

int acp_json_str_passthrough(const acp_json_val *v) {
  return is_string(v) && (v->flags & ACP__JF_SURR) == 0;
}

int acp_json_str_eq(const acp_json_val *v, const char *s, size_t len) {
  const char *p;
  const char *end;
  const char *bs;
  size_t run;
  size_t k;
  char tmp[4];

  if (!is_string(v) || (s == NULL && len > 0))
    return 0;
  p = v->raw + 1;
  end = v->raw + v->len - 1;
  if (!(v->flags & ACP__JF_ESC))
    return (size_t)(end - p) == len && bytes_eq(p, s, len);
  while (p < end) {
    bs = memchr(p, '\\', (size_t)(end - p));
    run = bs ? (size_t)(bs - p) : (size_t)(end - p);
    if (run > len || (run > 0 && memcmp(p, s, run) != 0))
      return 0;
    s += run;
    len -= run;
    p += run;
    if (bs == NULL)
      break;
    k = decode_escape(&p, end, tmp);
    if (k > len || memcmp(tmp, s, k) != 0)
      return 0;
    s += k;
    len -= k;
  }
  return len == 0;
}

int acp_json_str_unescape(const acp_json_val *v, char *buf, size_t cap,
                          size_t *len) {
  const char *p;
  const char *end;
  const char *bs;
  size_t run;
  size_t k;
  size_t total = 0;
  char tmp[4];

  if (!is_string(v))
    return ACP_ERR_TYPE;
  p = v->raw + 1;
  end = v->raw + v->len - 1;
  while (p < end) {
    bs = memchr(p, '\\', (size_t)(end - p));
    run = bs ? (size_t)(bs - p) : (size_t)(end - p);
    if (total < cap)
      memcpy(buf + total, p, cap - total < run ? cap - total : run);
    total += run;
    p += run;
    if (bs == NULL)
      break;
    k = decode_escape(&p, end, tmp);
    if (total < cap)
      memcpy(buf + total, tmp, cap - total < k ? cap - total : k);
    total += k;
  }
  if (len)
    *len = total;
  if (total > cap)
    return ACP_ERR_BUFFER;
  if (total < cap)
    buf[total] = '\0';
  return 0;
}

size_t acp_json_len(const acp_json_val *v) {
  if (v == NULL || (v->type != ACP_JSON_ARRAY && v->type != ACP_JSON_OBJECT))
    return 0;
  return v->count;
}

const acp_json_val *acp_json_child(const acp_json_val *v) {
  if (acp_json_len(v) == 0)
    return NULL;
  return v + 1;
}

const acp_json_val *acp_json_next(const acp_json_val *v) {
  if (v == NULL || v->next == 0)
    return NULL;
  return v + v->next;
}

const acp_json_val *acp_json_arr_get(const acp_json_val *arr, size_t i) {
  const acp_json_val *c;

  if (arr == NULL || arr->type != ACP_JSON_ARRAY || i >= arr->count)
    return NULL;
  c = arr + 1;
  while (i-- > 0)
    c += c->next;
  return c;
}

/* acp_json_obj_get() from member i (key k) on, once a key with escapes
 * turned up: compares decoded keys. Out of line and reached by a tail
 * call, so the common walk (keys without escapes) calls nothing and saves
 * no registers. */
__attribute__((noinline)) static const acp_json_val *
obj_get_from(const acp_json_val *obj, const acp_json_val *k, uint32_t i,
             const char *key, size_t len) {
  for (;; i++) {
    const acp_json_val *val = k + 1;
    if (!(k->flags & ACP__JF_ESC)) {
      if (k->len == len + 2 && bytes_eq(k->raw + 1, key, len))
        return val;
    } else if (acp_json_str_eq(k, key, len)) {
      return val;
    }
    if (i + 1 == obj->count)
      return NULL;
    k = val + val->next;
  }
}

const acp_json_val *acp_json_obj_get(const acp_json_val *obj, const char *key,
                                     size_t len) {
  const acp_json_val *k;
  uint32_t i;

  if (obj == NULL || obj->type != ACP_JSON_OBJECT || obj->count == 0)
    return NULL;
  if (key == NULL && len > 0)
    return NULL;
  k = obj + 1;
  if (len > 16)
    return obj_get_from(obj, k, 0, key, len);
  for (i = 0;; i++) {
    const acp_json_val *val = k + 1;
    /* A key without escapes is its raw text between the quotes: the length
     * and the bytes (bytes_eq(), no call for keys up to 16 bytes) decide
     * (a lookup is a handful of keys, each otherwise a call to str_eq). */
    if (ACP__UNLIKELY(k->flags & ACP__JF_ESC))
      return obj_get_from(obj, k, i, key, len);
    if (k->len == len + 2 && bytes_eq16(k->raw + 1, key, len))
      return val;
    if (i + 1 == obj->count)
      return NULL;
    k = val + val->next;
  }
}

const acp_json_val *acp_json_obj_getz(const acp_json_val *obj,
                                      const char *key) {
  if (key == NULL)
    return NULL;
  return acp_json_obj_get(obj, key, strlen(key));
}
