/*
 * Differential fuzz target for the lines a document keeps
 * (acp__json_doc_parse_line(), "Shapes" in json_read.c).
 *
 * The input is a stream of lines. One document parses them in order, the
 * way the JSON-RPC session does (from a line's start to the end of the
 * input): it keeps short lines and takes a later line that matches one
 * without running the parser. Each line is parsed again by a fresh
 * document, which never matches (a document keeps lines from its third
 * on). Both must give the same verdict, the same line length and the same
 * tape, record for record.
 *
 * The first byte picks the documents' nesting limit (so that a kept line
 * deeper than the limit must not match), and after the fourth line the
 * limit changes; the shared document parses two lines of its own first,
 * so that the input's first line is already kept. A seed corpus of lines
 * that repeat one shape with other strings and numbers lets the fuzzer
 * mutate near a match.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "acp/json.h"
#include "json/json_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t depth_of(uint8_t b) {
  return b < 0x80 ? (uint32_t)(b % 8) + 1 : 0; /* 0: the default */
}

/* The same tape: every record's fields, raw included (both parsed the
 * same bytes). */
static void same_tape(const acp_json_doc *a, const acp_json_doc *b) {
  CHECK(a->tape_n == b->tape_n);
  for (uint32_t i = 0; i < a->tape_n; i++) {
    const acp_json_val *x = &a->tape[i];
    const acp_json_val *y = &b->tape[i];
    CHECK(x->raw == y->raw);
    CHECK(x->len == y->len);
    CHECK(x->next == y->next);
    CHECK(x->count == y->count);
    CHECK(x->type == y->type);
    CHECK(x->flags == y->flags);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  acp_json_doc *kept = NULL;
  acp_json_doc *fresh = NULL;
  const char *p;
  const char *end;
  size_t line_len = 0;
  uint32_t depth;
  int k = 0;

  if (size < 1)
    return 0;
  depth = depth_of(data[0]);
  /* A copy of exactly the input's bytes: reads past a line show up under
   * the sanitizers. */
  char *buf = malloc(size > 1 ? size - 1 : 1);
  CHECK(buf != NULL);
  memcpy(buf, data + 1, size - 1);
  p = buf;
  end = buf + size - 1;

  CHECK(acp_json_doc_new(&kept, NULL) == 0);
  acp_json_doc_set_max_depth(kept, depth);
  CHECK(acp__json_doc_parse_line(kept, "{}\n", 3, &line_len) == 0);
  CHECK(acp__json_doc_parse_line(kept, "[]\n", 3, &line_len) == 0);
  while (p < end) {
    size_t n = (size_t)(end - p);
    size_t at_kept = 0;
    size_t at_fresh = 0;
    int rk;
    int rf;

    if (k == 4) {
      depth = depth_of((uint8_t)(data[0] ^ 0x85));
      acp_json_doc_set_max_depth(kept, depth);
    }
    CHECK(acp_json_doc_new(&fresh, NULL) == 0);
    acp_json_doc_set_max_depth(fresh, depth);
    rk = acp__json_doc_parse_line(kept, p, n, &at_kept);
    rf = acp__json_doc_parse_line(fresh, p, n, &at_fresh);
    CHECK((rk == 0) == (rf == 0));
    if (rk == 0) {
      CHECK(at_kept == at_fresh);
      CHECK(at_kept < n && p[at_kept] == '\n');
      CHECK(acp_json_doc_root(kept) != NULL);
      same_tape(kept, fresh);
      /* The kept document's values read as the fresh one's. */
      const acp_json_val *rv = acp_json_doc_root(kept);
      const acp_json_val *fv = acp_json_doc_root(fresh);
      for (uint32_t i = 0; i < kept->tape_n; i++, rv++, fv++) {
        if (rv->type == ACP_JSON_STRING) {
          const char *s1;
          const char *s2;
          size_t l1;
          size_t l2;
          CHECK(acp_json_doc_str(kept, rv, &s1, &l1) == 0);
          CHECK(acp_json_doc_str(fresh, fv, &s2, &l2) == 0);
          CHECK(l1 == l2 && memcmp(s1, s2, l1) == 0);
        }
      }
      p += at_kept + 1;
    } else {
      CHECK(acp_json_doc_root(kept) == NULL);
      const char *nl = memchr(p, '\n', n);
      p = nl ? nl + 1 : end;
    }
    acp_json_doc_free(fresh);
    fresh = NULL;
    k++;
  }
  acp_json_doc_free(kept);
  free(buf);
  return 0;
}
