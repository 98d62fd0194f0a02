#include <stdbool.h>
#include <stddef.h>

#include "wrapmem.h"

long wrapmem_fail_at = -1;
long wrapmem_count;

void wrapmem_arm(long i) {
  wrapmem_count = 0;
  wrapmem_fail_at = i;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t n);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t n);
void *__wrap_realloc(void *p, size_t n);

/* Counts only while armed, so setup code before a sweep does not shift it. */
static bool refuse(void) {
  return wrapmem_fail_at >= 0 && wrapmem_count++ == wrapmem_fail_at;
}

void *__wrap_malloc(size_t n) {
  return refuse() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t a, size_t n) {
  return refuse() ? NULL : __real_calloc(a, n);
}

void *__wrap_realloc(void *p, size_t n) {
  return refuse() ? NULL : __real_realloc(p, n);
}
