/*
 * CHECK(cond): a fuzz target's own assertion, kept in every build (assert()
 * goes with NDEBUG): says which check failed and where, then aborts, which
 * libFuzzer and the replay runner both report as a crash.
 */
#ifndef ACP_FUZZ_CHECK_H
#define ACP_FUZZ_CHECK_H

#include <stdbool.h>
#include <stdint.h>
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

/*
 * The steps of an input laid out as pieces split at '\n' (after a first
 * byte of options): *step is a piece's first byte, rest[0..*rn) the others.
 * false at the end.
 */
typedef struct fuzz_pieces {
  const uint8_t *p, *end;
} fuzz_pieces;

static inline bool fuzz_next_piece(fuzz_pieces *it, uint8_t *step,
                                   const uint8_t **rest, size_t *rn) {
  const uint8_t *nl;
  const uint8_t *e;

  if (it->p >= it->end)
    return false;
  nl = memchr(it->p, '\n', (size_t)(it->end - it->p));
  e = nl ? nl : it->end;
  *step = *it->p;
  *rest = it->p + 1;
  *rn = *rest < e ? (size_t)(e - *rest) : 0;
  it->p = nl ? nl + 1 : it->end;
  return true;
}

/*
 * p[0..n) and a line feed, handed to `recv` in pieces of `piece` bytes
 * (0: at once) until it returns non-zero (the connection is over).
 */
static inline void
fuzz_feed_line(const uint8_t *p, size_t n, size_t piece,
               int (*recv)(const char *d, size_t k, void *ud), void *ud) {
  char *line = malloc(n + 1);
  size_t at = 0;

  CHECK(line != NULL);
  memcpy(line, p, n);
  line[n] = '\n';
  if (piece == 0)
    piece = n + 1;
  while (at < n + 1) {
    size_t k = n + 1 - at < piece ? n + 1 - at : piece;
    if (recv(line + at, k, ud) != 0)
      break;
    at += k;
  }
  free(line);
}

#endif
