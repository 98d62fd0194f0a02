/*
 * Fuzz target: the SSE parser (src/http/sse.c, in libacp-http).
 *
 * Byte 0 selects the piece size the rest is fed in (1..256) and bit 7 a
 * 64-byte cap. Every dispatched event must have a type, and data and id of
 * sane lengths, with the LF that ended its data still after it, and an
 * LF inside its data exactly when it came from several data fields
 * (acp__sse_one_line()); feeding the same input at once and in pieces
 * must produce the same events.
 */
#include <stdlib.h>
#include <string.h>

#include "http/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fz {
  uint64_t hash;
  size_t events;
  const acp__sse *p;
} fz;

static int on_ev(void *ud, const char *type, size_t tl, const char *d,
                 size_t dl, const char *id, size_t il) {
  fz *f = ud;
  size_t i;
  if (tl == 0 || type == NULL || d == NULL || id == NULL)
    abort();
  /* The LF that ended the event stays readable after its data. */
  if (dl > 0 && d[dl] != '\n')
    abort();
  if (acp__sse_one_line(f->p) != (memchr(d, '\n', dl) == NULL))
    abort();
  for (i = 0; i < dl; i++)
    f->hash = f->hash * 31 + (unsigned char)d[i];
  for (i = 0; i < il; i++)
    f->hash = f->hash * 17 + (unsigned char)id[i];
  f->events++;
  return 0;
}

static int run(const uint8_t *data, size_t size, size_t step, size_t cap,
               fz *f) {
  acp__sse p;
  size_t i;
  int rv = 0;
  acp__sse_init(&p, acp_mem_default(), cap);
  f->p = &p;
  for (i = 0; i < size && rv == 0; i += step)
    rv = acp__sse_feed(&p, (const char *)data + i,
                       size - i < step ? size - i : step, on_ev, f);
  acp__sse_dispose(&p);
  return rv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz a = {0, 0, NULL}, b = {0, 0, NULL};
  size_t step, cap;
  int ra, rb;
  if (size < 1)
    return 0;
  step = (size_t)(data[0] & 0x7f) + 1;
  cap = (data[0] & 0x80) ? 64 : 0;
  ra = run(data + 1, size - 1, step, cap, &a);
  rb = run(data + 1, size - 1, size, cap, &b);
  if (ra == 0 && rb == 0 && (a.hash != b.hash || a.events != b.events))
    abort();
  return 0;
}
