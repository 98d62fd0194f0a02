/*
 * Fuzz target: the NDJSON line framer (src/rpc/ndjson.c).
 *
 * Byte 0 selects the piece size the rest is fed in (1..128) and bit 7 a
 * 16-byte cap. Every line must be non-empty, within the cap and free of
 * '\n'; feeding the input at once and in pieces must give the same lines
 * and the same over-long reports. Without the cap (no line of the input
 * can reach the default one) the lines must also be those of the policy in
 * acp/ndjson.h, computed here the plain way: split at '\n', one '\r' before
 * it dropped (a line may still end in '\r': "a\r\r\n" is "a\r"), the last
 * piece likewise, empty lines skipped.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "acp/ndjson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fz {
  uint64_t hash;
  size_t lines;
  size_t overlong;
} fz;

static void on_result(fz *f, int rv, const char *line, size_t n, size_t cap) {
  size_t i;
  if (rv == ACP_NDJSON_OVERLONG) {
    f->overlong++;
    f->hash = f->hash * 131 + 7;
    return;
  }
  if (rv != ACP_NDJSON_LINE)
    abort();
  if (n == 0 || n > cap || memchr(line, '\n', n) != NULL)
    abort();
  for (i = 0; i < n; i++)
    f->hash = f->hash * 31 + (unsigned char)line[i];
  f->hash = f->hash * 131 + 3;
  f->lines++;
}

static void run(const uint8_t *data, size_t size, size_t step, size_t cap,
                fz *f) {
  acp_ndjson fr;
  const char *line;
  size_t i, n, used;
  int rv;
  acp_ndjson_init(&fr, cap, NULL);
  for (i = 0; i < size; i += step) {
    const char *p = (const char *)data + i;
    size_t len = size - i < step ? size - i : step;
    while ((rv = acp_ndjson_next(&fr, p, len, &used, &line, &n)) !=
           ACP_NDJSON_NEED_MORE) {
      if (used > len)
        abort();
      on_result(f, rv, line, n, acp_ndjson_max_line(&fr));
      p += used;
      len -= used;
    }
  }
  rv = acp_ndjson_finish(&fr, &line, &n);
  if (rv != ACP_NDJSON_NEED_MORE)
    on_result(f, rv, line, n, acp_ndjson_max_line(&fr));
  acp_ndjson_dispose(&fr);
}

/* The policy's lines of data[0..size), without a cap. */
static void reference(const uint8_t *data, size_t size, fz *f) {
  size_t start = 0, i;
  for (i = 0; i <= size; i++) {
    size_t n;
    if (i < size && data[i] != '\n')
      continue;
    n = i - start;
    if (n > 0 && data[start + n - 1] == '\r')
      n--;
    if (n > 0)
      on_result(f, ACP_NDJSON_LINE, (const char *)data + start, n, SIZE_MAX);
    start = i + 1;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz a = {0, 0, 0}, b = {0, 0, 0}, c = {0, 0, 0};
  size_t step, cap;
  if (size < 1)
    return 0;
  step = (size_t)(data[0] & 0x7f) + 1;
  cap = (data[0] & 0x80) ? 16 : 0;
  run(data + 1, size - 1, step, cap, &a);
  run(data + 1, size - 1, size, cap, &b);
  if (a.hash != b.hash || a.lines != b.lines || a.overlong != b.overlong)
    abort();
  if (cap == 0) {
    reference(data + 1, size - 1, &c);
    if (a.hash != c.hash || a.lines != c.lines || a.overlong != 0)
      abort();
  }
  return 0;
}
