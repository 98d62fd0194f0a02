/*
 * The helpers of util.h: allocator copies and the growable byte buffer.
 * Compiled into every library (hidden in each), so none exports them and
 * the runtime libraries do not depend on libacp's private symbols.
 */
#include "util.h"

void acp__mem_init(acp_mem *dst, const acp_mem *mem) {
  *dst = mem ? *mem : *acp_mem_default();
}

char *acp__strndup(const acp_mem *m, const char *s, size_t n) {
  char *p = acp__malloc(m, n + 1);

  if (p == NULL)
    return NULL;
  if (n)
    memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *acp__strdup(const acp_mem *m, const char *s) {
  return acp__strndup(m, s, strlen(s));
}

void acp__buf_init(acp__buf *b, const acp_mem *mem, size_t max) {
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  b->max = max ? max : SIZE_MAX;
  b->mem = mem;
}

void acp__buf_dispose(acp__buf *b) {
  acp__free(b->mem, b->data);
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
}

int acp__buf_grow(acp__buf *b, size_t extra) {
  size_t need;
  size_t ncap;
  char *p;

  if (acp__add_overflow(b->len, extra, &need) != 0 || need > b->max)
    return ACP_ERR_LIMIT;
  if (need <= b->cap)
    return 0;
  /* Grow geometrically so appends stay amortized O(1): by half again while
   * small, by a quarter past 1 MiB, where ACP's large messages (1 MiB
   * prompts, file contents) would otherwise leave up to half a buffer of
   * slack in every copy a message passes through. */
  if (b->cap < 256)
    ncap = 256;
  else if (b->cap < ((size_t)1 << 20))
    ncap = b->cap + b->cap / 2;
  else
    ncap = b->cap + b->cap / 4;
  if (ncap < need || ncap < b->cap)
    ncap = need;
  if (ncap > b->max)
    ncap = b->max;
  p = acp__realloc(b->mem, b->data, ncap);
  if (p == NULL)
    return ACP_ERR_NOMEM;
  b->data = p;
  b->cap = ncap;
  return 0;
}

void acp__buf_consume(acp__buf *b, size_t n) {
  if (n >= b->len) {
    b->len = 0;
    return;
  }
  memmove(b->data, b->data + n, b->len - n);
  b->len -= n;
}
