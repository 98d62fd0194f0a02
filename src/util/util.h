/*
 * Helpers shared by the libraries (libacp, libacp-uv, libacp-http):
 * allocator wrappers, overflow-checked size arithmetic and a growable byte
 * buffer with a cap. Built as the internal object library acp_util and
 * compiled, hidden, into each library that uses it: nothing here is
 * exported and no library reaches into another's private headers for it.
 * Not installed.
 */
#ifndef ACP_UTIL_H
#define ACP_UTIL_H

#include <string.h>

#include "acp/common.h"

#define ACP_UNUSED(x) ((void)(x))

static inline void *acp__malloc(const acp_mem *m, size_t n) {
  return m->malloc(n ? n : 1, m->user_data);
}
static inline void *acp__calloc(const acp_mem *m, size_t nmemb, size_t n) {
  return m->calloc(nmemb ? nmemb : 1, n ? n : 1, m->user_data);
}
static inline void *acp__realloc(const acp_mem *m, void *p, size_t n) {
  return m->realloc(p, n ? n : 1, m->user_data);
}
static inline void acp__free(const acp_mem *m, void *p) {
  if (p)
    m->free(p, m->user_data);
}

/* acp_json_obj_getz() with a string literal key: its length is known at
 * compile time, so the hot paths (every message's envelope and params) do
 * not pay a strlen() and a call per lookup. `"" lit ""` rejects anything
 * but a literal. */
#define ACP__OBJ_GETL(obj, lit)                                                \
  acp_json_obj_get((obj), "" lit "", sizeof(lit) - 1)

/* acp_json_write_keyz() with a string literal key (no strlen per key). */
#define ACP__W_KEYL(w, lit) acp_json_write_key((w), "" lit "", sizeof(lit) - 1)

/* UTF-8 as JSON and WebSocket text want it: no overlong forms, no UTF-16
 * surrogates, nothing above U+10FFFF. The length of the valid sequence at
 * p (lead byte >= 0x80, p < end), or 0. */
static inline size_t acp__utf8_seq(const unsigned char *p,
                                   const unsigned char *end) {
  unsigned c = p[0];
  size_t avail = (size_t)(end - p);
  unsigned lo = 0x80;
  unsigned hi = 0xBF;

  if (c < 0xC2)
    return 0; /* stray continuation byte or overlong C0/C1 lead */
  if (c < 0xE0) {
    if (avail < 2 || (p[1] & 0xC0) != 0x80)
      return 0;
    return 2;
  }
  if (c < 0xF0) {
    if (c == 0xE0)
      lo = 0xA0; /* overlong */
    else if (c == 0xED)
      hi = 0x9F; /* UTF-16 surrogates encoded in UTF-8 */
    if (avail < 3 || p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80)
      return 0;
    return 3;
  }
  if (c < 0xF5) {
    if (c == 0xF0)
      lo = 0x90; /* overlong */
    else if (c == 0xF4)
      hi = 0x8F; /* above U+10FFFF */
    if (avail < 4 || p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80 ||
        (p[3] & 0xC0) != 0x80)
      return 0;
    return 4;
  }
  return 0;
}

/* The length of the longest prefix of s[0..n) that is whole, valid UTF-8
 * (by acp__utf8_seq()'s rules): n when all of it is, else the offset of the
 * sequence that is not (or is cut short by the end). ASCII runs are taken
 * 64 bytes a step where SSE2 is there, 8 otherwise. */
size_t acp__utf8_valid_len(const void *s, size_t n);
/* The same, and every CR and LF of that prefix made a space on the way
 * (a WebSocket text message becomes one NDJSON line: outside strings they
 * are whitespace, which a space is too; a raw one inside a string, which
 * JSON allows only escaped, becomes a space instead of cutting the line
 * in two). Bytes past the returned length are left as they were. */
size_t acp__utf8_line(void *s, size_t n);
/* The offset of the first CR or LF in s[0..n), or n: one pass where
 * memchr() for each is two. */
size_t acp__eol_find(const void *s, size_t n);
/* Every CR and LF in s[0..n) made a space (line mode without the UTF-8
 * check: the body's reader parses it anyway). */
void acp__eol_blank(void *s, size_t n);
/* Nonzero turns off the 64-byte steps the four functions above take over
 * long runs on CPUs with AVX-512BW (x86-64 builds; tests compare both
 * paths). */
extern int acp__utf8_no_wide;

/* Copy `mem` (or the default allocator) into `dst`. */
void acp__mem_init(acp_mem *dst, const acp_mem *mem);

/* NUL-terminated heap copy of s[0..n) (s may be NULL when n is 0); NULL when
 * out of memory. Free with acp__free(m, ...). */
char *acp__strndup(const acp_mem *m, const char *s, size_t n);
/* acp__strndup(m, s, strlen(s)). */
char *acp__strdup(const acp_mem *m, const char *s);

/* FNV-1a (64 bits) of p[0..n), going on from h (ACP__FNV_SEED to start):
 * the spread for hash tables of short keys a peer chooses (request ids,
 * names). Not a defence against chosen collisions by itself: tables that
 * a peer fills start from a seed of their own. */
#define ACP__FNV_SEED UINT64_C(1469598103934665603)
static inline uint64_t acp__fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  while (n-- > 0)
    h = (h ^ *b++) * UINT64_C(1099511628211);
  return h;
}

/* Overflow-checked arithmetic: return 0 on success, -1 on overflow. */
static inline int acp__add_overflow(size_t a, size_t b, size_t *out) {
  if (a > SIZE_MAX - b)
    return -1;
  *out = a + b;
  return 0;
}
static inline int acp__mul_overflow(size_t a, size_t b, size_t *out) {
  if (b != 0 && a > SIZE_MAX / b)
    return -1;
  *out = a * b;
  return 0;
}

/* The value of one hexadecimal digit, or -1 (percent-decoding in URLs and
 * forms, chunk sizes of HTTP bodies). */
static inline int acp__hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/*
 * A growable byte buffer. `max` caps len (0 = SIZE_MAX); growth past it
 * fails with ACP_ERR_LIMIT. The buffer is not NUL-terminated.
 */
typedef struct acp__buf {
  char *data;
  size_t len;
  size_t cap;
  size_t max;
  const acp_mem *mem;
} acp__buf;

void acp__buf_init(acp__buf *b, const acp_mem *mem, size_t max);
void acp__buf_dispose(acp__buf *b);
/* acp__buf_reserve() past the room already there: checks the cap and
 * grows. 0, ACP_ERR_LIMIT or ACP_ERR_NOMEM. */
int acp__buf_grow(acp__buf *b, size_t extra);

/* Whether `extra` more bytes fit without growing and without passing max.
 * cap <= max almost always holds (growth stops at max); a caller that
 * lowered max below cap (the router, around a batch's closing bytes) takes
 * the full check in acp__buf_grow(). */
static inline int acp__buf_fits(const acp__buf *b, size_t extra) {
  return extra <= b->cap - b->len && b->cap <= b->max;
}

/*
 * Make room for `extra` more bytes. 0, ACP_ERR_LIMIT or ACP_ERR_NOMEM.
 * The append helpers are inline: every small message makes a dozen of
 * these calls, and when the room is there (nearly always) each is two
 * compares, not a call into buf.c (issue 11).
 */
static inline int acp__buf_reserve(acp__buf *b, size_t extra) {
  if (acp__buf_fits(b, extra))
    return 0;
  return acp__buf_grow(b, extra);
}

static inline int acp__buf_append(acp__buf *b, const void *p, size_t n) {
  if (n == 0)
    return 0;
  if (!acp__buf_fits(b, n)) {
    int rv = acp__buf_grow(b, n);
    if (rv != 0)
      return rv;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

static inline int acp__buf_putc(acp__buf *b, char c) {
  if (!acp__buf_fits(b, 1)) {
    int rv = acp__buf_grow(b, 1);
    if (rv != 0)
      return rv;
  }
  b->data[b->len++] = c;
  return 0;
}
/* Remove the first n bytes (n <= len). */
void acp__buf_consume(acp__buf *b, size_t n);

static inline void acp__buf_clear(acp__buf *b) {
  b->len = 0;
}

/* SHA-256 (FIPS 180-4), incremental. */
typedef struct acp__sha256 {
  uint32_t h[8];
  uint64_t len;
  uint8_t buf[64];
  size_t n;
} acp__sha256;
void acp__sha256_init(acp__sha256 *s);
void acp__sha256_update(acp__sha256 *s, const void *data, size_t len);
void acp__sha256_final(acp__sha256 *s, uint8_t out[32]);
/* HMAC-SHA256 (RFC 2104) of msg under key, into out. */
void acp__hmac_sha256(const void *key, size_t key_len, const void *msg,
                      size_t msg_len, uint8_t out[32]);

/* Base64 (RFC 4648). ACP__B64_STD: standard alphabet, '=' padded;
 * ACP__B64_URL: URL-safe alphabet (section 5), unpadded. */
#define ACP__B64_STD 0
#define ACP__B64_URL 1
/* Characters acp__b64_encode() writes for n bytes. */
size_t acp__b64_encoded_len(size_t n, int form);
/* Encode in[0..n) into out (room for acp__b64_encoded_len(n, form); no NUL
 * written); returns the characters written. */
size_t acp__b64_encode(char *out, const void *in, size_t n, int form);
/* Encode in[0..n) onto the end of b. 0, ACP_ERR_LIMIT or ACP_ERR_NOMEM. */
int acp__b64_append(acp__buf *b, const void *in, size_t n, int form);
/* Decode p[0..n) onto the end of b. Strict: STD needs whole padded quanta,
 * URL takes no padding; any other character is ACP_ERR_INVALID_ARGUMENT.
 * ACP_ERR_NOMEM / ACP_ERR_LIMIT from b (b may then hold part of the
 * output). */
int acp__b64_decode(acp__buf *b, const char *p, size_t n, int form);

#endif /* ACP_UTIL_H */
