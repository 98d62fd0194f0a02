/*
 * Server-Sent Events parser (see sse.h).
 */
#include "sse.h"

#include <string.h>

void acp__sse_init(acp__sse *p, const acp_mem *mem, size_t max) {
  memset(p, 0, sizeof(*p));
  acp__buf_init(&p->line, mem, max);
  acp__buf_init(&p->data, mem, max);
  acp__buf_init(&p->type, mem, 256);
  acp__buf_init(&p->id, mem, 1024);
  p->retry = -1;
}

void acp__sse_dispose(acp__sse *p) {
  acp__buf_dispose(&p->line);
  acp__buf_dispose(&p->data);
  acp__buf_dispose(&p->type);
  acp__buf_dispose(&p->id);
}

static int dispatch(acp__sse *p, acp__sse_event_cb cb, void *ud) {
  int rv = 0;
  if (p->data_lines > 0) {
    size_t dl = p->data.len;
    const char *type = "message";
    size_t tl = 7;
    if (dl > p->data_off && p->data.data[dl - 1] == '\n')
      dl--;
    dl -= p->data_off;
    if (p->type.len > 0) {
      type = p->type.data;
      tl = p->type.len;
    }
    rv = cb(ud, type, tl, dl ? p->data.data + p->data_off : "", dl,
            p->id.len ? p->id.data : "", p->id.len);
  }
  acp__buf_clear(&p->data);
  p->data_off = 0;
  acp__buf_clear(&p->type);
  p->data_lines = 0;
  return rv;
}

static int field(acp__sse *p, const char *name, size_t nl, const char *v,
                 size_t vl) {
  int rv = 0;
  if (nl == 4 && memcmp(name, "data", 4) == 0) {
    if (p->data.len == 0 && v >= p->line.data &&
        v + vl == p->line.data + p->line.len) {
      /* The event's first data line, assembled in the line buffer: the
       * buffers trade places and the value stays where it is (an offset
       * skips the field name), instead of a copy of what may be a
       * megabyte. */
      acp__buf t = p->data;
      p->data = p->line;
      p->line = t;
      p->data_off = (size_t)(v - p->data.data);
      rv = acp__buf_putc(&p->data, '\n');
      p->data_lines++;
      return rv;
    }
    rv = acp__buf_append(&p->data, v, vl);
    if (rv == 0)
      rv = acp__buf_putc(&p->data, '\n');
    p->data_lines++;
  } else if (nl == 5 && memcmp(name, "event", 5) == 0) {
    acp__buf_clear(&p->type);
    rv = acp__buf_append(&p->type, v, vl);
  } else if (nl == 2 && memcmp(name, "id", 2) == 0) {
    if (memchr(v, '\0', vl) == NULL) {
      acp__buf_clear(&p->id);
      rv = acp__buf_append(&p->id, v, vl);
    }
  } else if (nl == 5 && memcmp(name, "retry", 5) == 0) {
    int64_t n = 0;
    size_t i;
    if (vl == 0)
      return 0;
    for (i = 0; i < vl; i++) {
      if (v[i] < '0' || v[i] > '9')
        return 0;
      if (n > (INT64_MAX - 9) / 10)
        return 0;
      n = n * 10 + (v[i] - '0');
    }
    p->retry = n;
  }
  return rv;
}

static int line(acp__sse *p, acp__sse_event_cb cb, void *ud) {
  const char *l = p->line.data;
  size_t n = p->line.len;
  const char *colon;
  int rv;
  if (n == 0)
    return dispatch(p, cb, ud);
  if (l[0] == ':')
    return 0;
  colon = memchr(l, ':', n);
  if (colon == NULL)
    rv = field(p, l, n, "", 0);
  else {
    size_t nl = (size_t)(colon - l);
    const char *v = colon + 1;
    size_t vl = n - nl - 1;
    if (vl > 0 && v[0] == ' ') {
      v++;
      vl--;
    }
    rv = field(p, l, nl, v, vl);
  }
  return rv;
}

int acp__sse_feed(acp__sse *p, const char *data, size_t len,
                  acp__sse_event_cb cb, void *ud) {
  static const char bom[3] = {'\xEF', '\xBB', '\xBF'};
  size_t i = 0;
  int rv;
  /* Skip a leading UTF-8 BOM, possibly split across feeds. */
  while (!p->bom_done && i < len) {
    if (data[i] == bom[p->bom_seen]) {
      p->bom_seen++;
      i++;
      if (p->bom_seen == 3)
        p->bom_done = true;
    } else {
      /* Not a BOM: replay what was swallowed as ordinary bytes. */
      p->bom_done = true;
      if (p->bom_seen > 0) {
        rv = acp__buf_append(&p->line, bom, p->bom_seen);
        if (rv != 0)
          return rv;
      }
    }
  }
  while (i < len) {
    char c = data[i];
    if (p->cr) {
      p->cr = false;
      if (c == '\n') {
        i++;
        continue;
      }
    }
    if (c == '\r' || c == '\n') {
      p->cr = (c == '\r');
      i++;
      rv = line(p, cb, ud);
      acp__buf_clear(&p->line);
      if (rv != 0)
        return rv;
      continue;
    }
    {
      /* Append the run of ordinary bytes at once, its end found in one
       * pass for CR and LF (a byte loop here was a visible part of a 1
       * MiB event's cost, and a memchr() for each two passes). */
      size_t j = i + acp__eol_find(data + i, len - i);
      rv = acp__buf_append(&p->line, data + i, j - i);
      if (rv != 0)
        return rv;
      i = j;
    }
  }
  return 0;
}
