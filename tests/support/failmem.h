/*
 * A counting allocator for allocation-failure tests (STYLE.md §12): run a
 * scenario once to count allocations, then again with allocation i failing
 * for every i. `live` counts blocks not yet freed, so a test can assert
 * nothing leaked after each run.
 */
#ifndef ACP_TEST_FAILMEM_H
#define ACP_TEST_FAILMEM_H

#include "acp/common.h"

typedef struct failmem {
  long count;   /* allocations attempted so far */
  long fail_at; /* index of the allocation that fails; -1: none */
  long live;    /* blocks allocated and not yet freed */
} failmem;

/* The acp_mem functions; user_data is the failmem. */
void *fm_malloc(size_t n, void *ud);
void fm_free(void *p, void *ud);
void *fm_calloc(size_t nmemb, size_t n, void *ud);
void *fm_realloc(void *p, size_t n, void *ud);

/* An allocator over `f` that fails allocation number `fail_at`. */
acp_mem failmem_start(failmem *f, long fail_at);

#endif
