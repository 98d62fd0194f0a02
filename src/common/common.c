/*
 * Error strings, the default allocator and the shared byte buffer.
 */
#include <stdlib.h>

#include "internal.h"

const char *acp_strerror(int code) {
  switch (code) {
  case 0:
    return "success";
  case ACP_ERR_INVALID_ARGUMENT:
    return "invalid argument";
  case ACP_ERR_INVALID_STATE:
    return "invalid state";
  case ACP_ERR_TYPE:
    return "wrong JSON type";
  case ACP_ERR_RANGE:
    return "number out of range";
  case ACP_ERR_PARSE:
    return "invalid input";
  case ACP_ERR_LIMIT:
    return "limit exceeded";
  case ACP_ERR_NOT_FOUND:
    return "not found";
  case ACP_ERR_BUFFER:
    return "buffer too small";
  case ACP_ERR_PAUSE:
    return "paused by callback";
  case ACP_ERR_AGAIN:
    return "try again";
  case ACP_ERR_CLOSED:
    return "closed";
  case ACP_ERR_SYSTEM:
    return "system call failed";
  case ACP_ERR_PROTOCOL:
    return "protocol error";
  case ACP_ERR_TIMEOUT:
    return "timed out";
  case ACP_ERR_CANCELLED:
    return "cancelled";
  case ACP_ERR_UNSUPPORTED:
    return "not supported";
  case ACP_ERR_NOMEM:
    return "out of memory";
  case ACP_ERR_CALLBACK_FAILURE:
    return "callback failure";
  case ACP_ERR_INTERNAL:
    return "internal error";
  default:
    return "unknown error";
  }
}

int acp_is_fatal(int code) {
  return code < ACP_ERR_FATAL;
}

static void *default_malloc(size_t n, void *ud) {
  ACP_UNUSED(ud);
  return malloc(n);
}
static void default_free(void *p, void *ud) {
  ACP_UNUSED(ud);
  free(p);
}
static void *default_calloc(size_t nmemb, size_t n, void *ud) {
  ACP_UNUSED(ud);
  return calloc(nmemb, n);
}
static void *default_realloc(void *p, size_t n, void *ud) {
  ACP_UNUSED(ud);
  return realloc(p, n);
}

static const acp_mem mem_default = {
    .user_data = NULL,
    .malloc = default_malloc,
    .free = default_free,
    .calloc = default_calloc,
    .realloc = default_realloc,
};

const acp_mem *acp_mem_default(void) {
  return &mem_default;
}

void acp__mem_init(acp_mem *dst, const acp_mem *mem) {
  *dst = mem ? *mem : mem_default;
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

int acp__buf_reserve(acp__buf *b, size_t extra) {
  size_t need;
  size_t ncap;
  char *p;

  if (acp__add_overflow(b->len, extra, &need) != 0 || need > b->max)
    return ACP_ERR_LIMIT;
  if (need <= b->cap)
    return 0;
  /* Grow by half again, which keeps amortized appends O(1) while wasting
   * less than doubling on the 1 MiB-class messages ACP carries. */
  ncap = b->cap < 256 ? 256 : b->cap + b->cap / 2;
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

int acp__buf_append(acp__buf *b, const void *p, size_t n) {
  int rv;

  if (n == 0)
    return 0;
  rv = acp__buf_reserve(b, n);
  if (rv != 0)
    return rv;
  memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

int acp__buf_putc(acp__buf *b, char c) {
  int rv;

  if (b->len == b->cap) {
    rv = acp__buf_reserve(b, 1);
    if (rv != 0)
      return rv;
  }
  b->data[b->len++] = c;
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
