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

/*
 * The output a target's peer produced, d[0..n): whole lines, each one valid
 * JSON text, parsed in `doc`; `each` (if not NULL) gets every line's root
 * while it is valid.
 */
#include <string.h>

#include "acp/json.h"

static inline void
fuzz_check_lines(const char *d, size_t n, acp_json_doc *doc,
                 void (*each)(const acp_json_val *root, void *ud), void *ud) {
  size_t pos = 0;

  while (pos < n) {
    const char *nl = memchr(d + pos, '\n', n - pos);

    CHECK(nl != NULL); /* a message ends with its line feed */
    CHECK(acp_json_doc_parse(doc, d + pos, (size_t)(nl - (d + pos)), NULL) ==
          0);
    if (each != NULL)
      each(acp_json_doc_root(doc), ud);
    pos = (size_t)(nl - d) + 1;
  }
}

#endif
