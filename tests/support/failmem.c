#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "failmem.h"

/* Every allocation is counted, so a run with fail_at -1 measures. */
static int should_fail(failmem *f) {
  long i = f->count++;

  return f->fail_at >= 0 && i == f->fail_at;
}

void *fm_malloc(size_t n, void *ud) {
  failmem *f = ud;
  void *p;

  if (should_fail(f))
    return NULL;
  p = malloc(n);
  if (p != NULL)
    f->live++;
  return p;
}

void fm_free(void *p, void *ud) {
  failmem *f = ud;

  if (p != NULL)
    f->live--;
  free(p);
}

void *fm_calloc(size_t nmemb, size_t n, void *ud) {
  failmem *f = ud;
  void *p;

  if (should_fail(f))
    return NULL;
  p = calloc(nmemb, n);
  if (p != NULL)
    f->live++;
  return p;
}

void *fm_realloc(void *old, size_t n, void *ud) {
  failmem *f = ud;
  void *p;

  if (should_fail(f))
    return NULL;
  p = realloc(old, n);
  if (p != NULL && old == NULL)
    f->live++;
  return p;
}

acp_mem failmem_start(failmem *f, long fail_at) {
  acp_mem m = {f, fm_malloc, fm_free, fm_calloc, fm_realloc};

  f->count = 0;
  f->fail_at = fail_at;
  f->live = 0;
  return m;
}

long failmem_sweep(int (*scenario)(failmem *f), long min_points) {
  failmem f;
  long total, i;

  memset(&f, 0, sizeof(f));
  f.fail_at = 1L << 40;
  assert_int_equal(scenario(&f), 1);
  assert_int_equal(f.live, 0);
  total = f.count;
  assert_true(total > min_points);
  print_message("failmalloc: %ld allocation points\n", total);
  for (i = 0; i < total; i++) {
    memset(&f, 0, sizeof(f));
    f.fail_at = i;
    (void)scenario(&f);
    assert_int_equal(f.live, 0);
  }
  return total;
}
