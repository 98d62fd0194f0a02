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
