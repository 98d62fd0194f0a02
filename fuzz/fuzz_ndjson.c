/*
 * Fuzz target: the NDJSON line framer (src/rpc/ndjson.c).
 *
 * Byte 0 selects the piece size the rest is fed in (1..128) and bit 7 a
 * 16-byte cap. Every line must be non-empty, within the cap, free of '\n'
 * and not end in '\r'; feeding the input at once and in pieces must give the
 * same lines and the same over-long reports.
 */
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
  if (n == 0 || n > cap || memchr(line, '\n', n) != NULL || line[n - 1] == '\r')
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz a = {0, 0, 0}, b = {0, 0, 0};
  size_t step, cap;
  if (size < 1)
    return 0;
  step = (size_t)(data[0] & 0x7f) + 1;
  cap = (data[0] & 0x80) ? 16 : 0;
  run(data + 1, size - 1, step, cap, &a);
  run(data + 1, size - 1, size, cap, &b);
  if (a.hash != b.hash || a.lines != b.lines || a.overlong != b.overlong)
    abort();
  return 0;
}
