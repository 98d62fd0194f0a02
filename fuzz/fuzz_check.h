/*
 * CHECK(cond): a fuzz target's own assertion, kept in every build (assert()
 * goes with NDEBUG): says which check failed and where, then aborts, which
 * libFuzzer and the replay runner both report as a crash.
 */
#ifndef ACP_FUZZ_CHECK_H
#define ACP_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                 \
    }                                                                          \
  } while (0)

#endif
