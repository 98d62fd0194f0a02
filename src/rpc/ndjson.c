/*
 * The NDJSON line framer (include/acp/ndjson.h): the one place that cuts
 * a byte stream into lines.
 */
#include "acp/ndjson.h"

#include "internal.h"
#include "json/json_int.h"

/* MARK: - Framer (Public) */

void acp_ndjson_init(acp_ndjson *f, size_t max_line, const acp_mem *mem) {
  f->buf = NULL;
  f->len = 0;
  f->cap = 0;
  f->max_line = max_line ? max_line : ACP_NDJSON_DEFAULT_MAX_LINE;
  f->skipping = 0;
  f->plain_lo = f->plain_hi = 0;
  acp__mem_init(&f->mem, mem);
}

void acp_ndjson_dispose(acp_ndjson *f) {
  if (f == NULL)
    return;
  acp__free(&f->mem, f->buf);
  f->buf = NULL;
  f->len = 0;
  f->cap = 0;
  /* f->skipping stays: the rest of an over-long line is still dropped. */
}

/* A partial line may hold one byte more than the cap: a '\r' that the
 * newline will turn into part of the line ending. */
static size_t carry_limit(const acp_ndjson *f) {
  return f->max_line == SIZE_MAX ? SIZE_MAX : f->max_line + 1;
}

/* Whether p points into the carry buffer (compared as integers: ordering
 * pointers into different objects is undefined). */
static bool in_carry(const acp_ndjson *f, const char *p) {
  uintptr_t b = (uintptr_t)f->buf;
  uintptr_t q = (uintptr_t)p;

  return f->buf != NULL && q >= b && q < b + f->cap;
}

static int carry_append(acp_ndjson *f, const char *p, size_t n) {
  if (in_carry(f, p)) {
    /* Read in place (acp_ndjson_read_buf()): right after the partial line
     * the bytes are there already; further on (the tail of a read behind a
     * line handed out, so the carry is empty) they move to the front, and
     * fit, being inside the buffer already. */
    if (p != f->buf + f->len)
      memmove(f->buf + f->len, p, n);
    f->len += n;
    return 0;
  }
  if (n > f->cap - f->len) {
    size_t limit = carry_limit(f);
    size_t need = f->len + n; /* <= limit: checked by the caller */
    size_t ncap = f->cap < 256 ? 256 : f->cap + f->cap / 2;
    char *b;

    if (ncap < need || ncap < f->cap)
      ncap = need;
    if (ncap > limit)
      ncap = limit;
    b = acp__realloc(&f->mem, f->buf, ncap);
    if (b == NULL)
      return ACP_ERR_NOMEM;
    f->buf = b;
    f->cap = ncap;
  }
  memcpy(f->buf + f->len, p, n);
  f->len += n;
  return 0;
}

/* The least room worth lending for a read: below it the caller's own
 * buffer serves better. */
#define READ_MIN ((size_t)4096)
/* The room a lent buffer is grown to at least, and the step by which a
 * long line's buffer grows: the size of a pipe read. */
#define READ_STEP ((size_t)64 * 1024)

char *acp_ndjson_read_buf(acp_ndjson *f, size_t *room) {
  size_t limit;
  size_t want;
  size_t ncap;
  char *b;

  if (room != NULL)
    *room = 0;
  if (f == NULL || room == NULL || f->skipping)
    return NULL;
  limit = carry_limit(f);
  /* A partial line may reach the cap; the room after it is for the rest
   * of the read (the next lines), so the buffer may exceed the cap by one
   * step. */
  if (f->cap - f->len < READ_STEP && f->len < limit) {
    want = f->len + (f->len > READ_STEP ? f->len : READ_STEP);
    if (want < f->len || want > limit)
      want = limit;
    ncap = want > SIZE_MAX - READ_STEP ? SIZE_MAX : want + READ_STEP;
    if (ncap > f->cap) {
      b = acp__realloc(&f->mem, f->buf, ncap);
      if (b != NULL) {
        f->buf = b;
        f->cap = ncap;
      }
    }
  }
  if (f->cap - f->len < READ_MIN)
    return NULL;
  *room = f->cap - f->len;
  return f->buf + f->len;
}

/* From this many bytes on, the line feed search looks for plain runs (below);
 * shorter input is one memchr as before. */
#define PLAIN_MIN ((size_t)16 * 1024)
/* The stretch searched with memchr between two plain runs. */
#define NL_WINDOW ((size_t)4096)

/* The leading 64-byte blocks of p[0..n) that hold no JSON-special byte
 * (quote, backslash, control byte, byte >= 0x80), as the parser's string
 * scan tests them: a multiple of 64. */
static size_t plain_run(const unsigned char *p, size_t n) {
  size_t i = 0;

#ifdef ACP__JSON_AVX2
  if (acp__json_have_avx2())
    return acp__json_plain_wide(p, n);
#endif
#if defined(__SSE2__)
  while (n - i >= 64 && !acp__json_special64(p + i))
    i += 64;
#else
  (void)p;
  (void)n;
#endif
  return i;
}

/*
 * The first line feed in start[0..avail), which lies at offset `base` of
 * the line being framed. Over a long stretch the search alternates a
 * memchr of one window with a run of plain blocks (which hold no line feed,
 * being free of control bytes), and keeps the longest run in
 * f->plain_lo/hi: a 1 MiB text split across reads is then searched and
 * checked for the parser in one pass instead of a memchr and then the
 * parse's own scan (docs/decisions.md). Text with special bytes everywhere
 * costs one failed block test per window more than a plain memchr.
 */
static const char *find_nl(acp_ndjson *f, const char *start, size_t avail,
                           size_t base) {
  size_t i = 0;

  /* The line's run reaches the end of what earlier reads brought (up to
   * the last part-block, checked here byte by byte): it goes on into this
   * read while the bytes stay plain, so that a text split across many
   * reads (a conductor's hop gets 1 MiB in several) is one run, which the
   * parse jumps over whole, not only its longest piece. The carry holds
   * the line's bytes before `base`. */
  if (base > 0 && f->plain_hi > f->plain_lo && f->plain_hi <= base &&
      base - f->plain_hi < 64 && avail >= 64) {
    const unsigned char *g = (const unsigned char *)f->buf + f->plain_hi;
    const unsigned char *ge = (const unsigned char *)f->buf + base;

    while (g < ge && *g >= 0x20 && *g < 0x80 && *g != '"' && *g != '\\')
      g++;
    if (g == ge) {
      size_t k = plain_run((const unsigned char *)start, avail);

      if (k > 0) {
        f->plain_hi = base + k;
        i = k;
      }
    }
  }

  while (avail - i >= PLAIN_MIN) {
    const char *nl = memchr(start + i, '\n', NL_WINDOW);
    size_t k;

    if (nl != NULL)
      return nl;
    i += NL_WINDOW;
    k = plain_run((const unsigned char *)start + i, avail - i);
    if (k >= NL_WINDOW && k > f->plain_hi - f->plain_lo) {
      f->plain_lo = base + i;
      f->plain_hi = base + i + k;
    }
    i += k;
  }
  return memchr(start + i, '\n', avail - i);
}

int acp_ndjson_next(acp_ndjson *f, const char *data, size_t len, size_t *used,
                    const char **line, size_t *line_len) {
  size_t limit;
  size_t pos = 0;

  if (used != NULL)
    *used = 0;
  if (line != NULL)
    *line = NULL;
  if (line_len != NULL)
    *line_len = 0;
  if (f == NULL || used == NULL || line == NULL || line_len == NULL ||
      (data == NULL && len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  limit = carry_limit(f);
  while (pos < len) {
    const char *start = data + pos;
    size_t avail = len - pos;
    const char *nl;
    size_t chunk;

    if (f->len == 0) /* a new line: nothing known about it yet */
      f->plain_lo = f->plain_hi = 0;
    nl = f->skipping ? memchr(start, '\n', avail)
                     : find_nl(f, start, avail, f->len);
    chunk = nl ? (size_t)(nl - start) : avail;
    const char *p;
    size_t n;

    if (f->skipping) {
      pos += nl ? chunk + 1 : chunk;
      if (nl)
        f->skipping = 0;
      continue;
    }
    if (nl == NULL) {
      *used = len;
      if (chunk > limit - f->len) {
        f->len = 0;
        f->skipping = 1;
        return ACP_NDJSON_OVERLONG;
      }
      if (carry_append(f, start, chunk) != 0) {
        f->len = 0;
        f->skipping = 1;
        return ACP_ERR_NOMEM;
      }
      return ACP_NDJSON_NEED_MORE;
    }
    pos += chunk + 1;
    if (f->len > 0) {
      if (chunk > limit - f->len) {
        f->len = 0;
        *used = pos;
        return ACP_NDJSON_OVERLONG;
      }
      if (carry_append(f, start, chunk) != 0) {
        f->len = 0;
        *used = pos;
        return ACP_ERR_NOMEM;
      }
      p = f->buf;
      n = f->len;
      f->len = 0; /* the bytes stay valid until the next call */
    } else {
      p = start;
      n = chunk;
    }
    if (n > 0 && p[n - 1] == '\r')
      n--;
    if (n > f->max_line) {
      *used = pos;
      return ACP_NDJSON_OVERLONG;
    }
    if (n == 0)
      continue;
    *line = p;
    *line_len = n;
    *used = pos;
    return ACP_NDJSON_LINE;
  }
  *used = len;
  return ACP_NDJSON_NEED_MORE;
}

int acp_ndjson_finish(acp_ndjson *f, const char **line, size_t *line_len) {
  size_t n;

  if (line != NULL)
    *line = NULL;
  if (line_len != NULL)
    *line_len = 0;
  if (f == NULL || line == NULL || line_len == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  n = f->len;
  f->len = 0;
  if (f->skipping) {
    f->skipping = 0;
    return ACP_NDJSON_NEED_MORE;
  }
  if (n > 0 && f->buf[n - 1] == '\r')
    n--;
  if (n == 0)
    return ACP_NDJSON_NEED_MORE;
  if (n > f->max_line)
    return ACP_NDJSON_OVERLONG;
  *line = f->buf;
  *line_len = n;
  return ACP_NDJSON_LINE;
}

size_t acp_ndjson_pending(const acp_ndjson *f) {
  return f ? f->len : 0;
}

size_t acp_ndjson_max_line(const acp_ndjson *f) {
  return f ? f->max_line : 0;
}

/* MARK: - The answer to an over-long line (Public) */

/* Append s[0..n) to out[*at..cap); false when it does not fit. */
static bool put(char *out, size_t cap, size_t *at, const char *s, size_t n) {
  if (n >= cap - *at)
    return false;
  memcpy(out + *at, s, n);
  *at += n;
  return true;
}

static size_t put_message(char *out, size_t cap, size_t at, size_t max_line) {
  static const char pre[] = "Message exceeds ";
  static const char post[] = " bytes";
  char digits[24];
  size_t i = sizeof(digits);

  do {
    digits[--i] = (char)('0' + max_line % 10);
    max_line /= 10;
  } while (max_line != 0);
  if (!put(out, cap, &at, pre, sizeof(pre) - 1) ||
      !put(out, cap, &at, digits + i, sizeof(digits) - i) ||
      !put(out, cap, &at, post, sizeof(post) - 1))
    return 0;
  return at;
}

size_t acp_ndjson_overlong_message(char *out, size_t cap, size_t max_line) {
  size_t n;

  if (out == NULL || cap == 0)
    return 0;
  n = put_message(out, cap, 0, max_line);
  out[n] = '\0';
  return n;
}

size_t acp_ndjson_overlong_reply(char *out, size_t cap, size_t max_line) {
  static const char pre[] =
      "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
      "\"message\":\"";
  static const char post[] = "\"}}";
  size_t at = 0;

  if (out == NULL || cap == 0)
    return 0;
  if (!put(out, cap, &at, pre, sizeof(pre) - 1))
    at = 0;
  if (at != 0)
    at = put_message(out, cap, at, max_line);
  if (at != 0 && !put(out, cap, &at, post, sizeof(post) - 1))
    at = 0;
  out[at] = '\0';
  return at;
}
