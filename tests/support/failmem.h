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

/*
 * The whole sweep, with cmocka assertions: `scenario` runs once with no
 * failure (it must return 1, "completed") and then once with each of its
 * allocations failing in turn; after every run nothing may be left
 * allocated. The scenario starts from the zeroed `f` it is given. Fails
 * the test when a clean run makes `min_points` allocations or fewer.
 * Returns the number of allocation points.
 */
long failmem_sweep(int (*scenario)(failmem *f), long min_points);

#endif
