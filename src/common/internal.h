/*
 * Internal helpers shared by every module of the core: allocator wrappers,
 * overflow-checked size arithmetic and a growable byte buffer with a cap.
 * Not installed.
 */
#ifndef ACP_INTERNAL_H
#define ACP_INTERNAL_H

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

/* Copy `mem` (or the default allocator) into `dst`. */
void acp__mem_init(acp_mem *dst, const acp_mem *mem);

/* NUL-terminated heap copy of s[0..n) (s may be NULL when n is 0); NULL when
 * out of memory. Free with acp__free(m, ...). */
char *acp__strndup(const acp_mem *m, const char *s, size_t n);
/* acp__strndup(m, s, strlen(s)). */
char *acp__strdup(const acp_mem *m, const char *s);

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
/* Make room for `extra` more bytes. 0, ACP_ERR_LIMIT or ACP_ERR_NOMEM. */
int acp__buf_reserve(acp__buf *b, size_t extra);
int acp__buf_append(acp__buf *b, const void *p, size_t n);
int acp__buf_putc(acp__buf *b, char c);
/* Remove the first n bytes (n <= len). */
void acp__buf_consume(acp__buf *b, size_t n);

static inline void acp__buf_clear(acp__buf *b) {
  b->len = 0;
}

/* Append `s` as one JSON string (quotes, escapes) to `b` (src/json).
 * 0, ACP_ERR_INVALID_ARGUMENT (not UTF-8), ACP_ERR_LIMIT or ACP_ERR_NOMEM;
 * on error `b` may hold a partial string: callers roll back. */
int acp__json_escape_append(acp__buf *b, const char *s, size_t len);

/* Write the object key `k` (a string value of a parsed document) exactly as
 * it was in its input, escapes included: the byte-exact counterpart of
 * acp_json_write_key(). Same errors as the writer's functions. */
struct acp_json_writer;
struct acp_json_val;
int acp__json_write_key_val(struct acp_json_writer *w,
                            const struct acp_json_val *k);

#endif /* ACP_INTERNAL_H */
