/*
 * UTF-8 validation for text that is mostly ASCII (JSON on the wire): the
 * WebSocket codec checks every text message with it (RFC 6455 fails a
 * connection on invalid UTF-8), so a 1 MiB message is one pass that costs
 * little beside the copies around it. The same scan finds or blanks line
 * ends (CR and LF) in one pass where two memchr() calls were two.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "util.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* What a scan does; a constant at each call, so each mode gets its own
 * loop. */
enum {
  M_UTF8 = 1, /* stop at bytes >= 0x80 and check their sequence */
  M_EOL = 2,  /* stop at CR and LF */
  M_FIND = 4  /* (with M_EOL alone) return at the first, not blank it */
};

#if defined(__SSE2__)
/* The bytes of v that stop a run, in their high bits. */
static ALWAYS_INLINE __m128i stops16(__m128i v, int mode) {
  if (!(mode & M_EOL))
    return v; /* the high bit is the test */
  __m128i e = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\n')),
                           _mm_cmpeq_epi8(v, _mm_set1_epi8('\r')));
  return (mode & M_UTF8) ? _mm_or_si128(v, e) : e;
}
#endif

/*
 * The scan behind the entry points. One block first (a text of other
 * scripts pays one test a character); while that is plain, four blocks a
 * step, one branch; the block that holds the byte that stops the run
 * tells where.
 */
static ALWAYS_INLINE size_t scan(unsigned char *s, size_t n, int mode) {
  if (n == 0)
    return 0; /* s may be NULL: no arithmetic on it */
  unsigned char *p = s;
  const unsigned char *end = p + n;

  while (p < end) {
#if defined(__SSE2__)
    while (end - p >= 16) {
      int m = _mm_movemask_epi8(
          stops16(_mm_loadu_si128((const __m128i *)(const void *)p), mode));
      if (m != 0) {
        p += (unsigned)__builtin_ctz((unsigned)m);
        break;
      }
      p += 16;
      while (end - p >= 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
        if (_mm_movemask_epi8(_mm_or_si128(
                _mm_or_si128(stops16(a, mode), stops16(b, mode)),
                _mm_or_si128(stops16(c, mode), stops16(d, mode)))) != 0)
          break;
        p += 64;
      }
    }
#else
    /* Eight bytes a step while none stops the run (CR or LF: a word
     * with a zero byte after XOR with it). */
    const uint64_t ones = 0x0101010101010101ull;
    const uint64_t highs = 0x8080808080808080ull;
    while (end - p >= 8) {
      uint64_t w;
      memcpy(&w, p, 8);
      uint64_t stop = (mode & M_UTF8) ? w & highs : 0;
      if (mode & M_EOL) {
        uint64_t lf = w ^ (ones * '\n'), cr = w ^ (ones * '\r');
        stop |= ((lf - ones) & ~lf & highs) | ((cr - ones) & ~cr & highs);
      }
      if (stop != 0)
        break;
      p += 8;
    }
#endif
    if (p == end)
      break;
    if ((mode & M_EOL) && (*p == '\n' || *p == '\r')) {
      if (mode & M_FIND)
        return (size_t)(p - s);
      *p++ = ' ';
    } else if (*p < 0x80 || !(mode & M_UTF8)) {
      p++;
    } else {
      size_t k = acp__utf8_seq(p, end);
      if (k == 0)
        return (size_t)(p - s);
      p += k;
    }
  }
  return n;
}

size_t acp__utf8_valid_len(const void *s, size_t n) {
  /* Never written through in this mode. */
  return scan((unsigned char *)(uintptr_t)s, n, M_UTF8);
}

size_t acp__utf8_line(void *s, size_t n) {
  return scan(s, n, M_UTF8 | M_EOL);
}

size_t acp__eol_find(const void *s, size_t n) {
  /* Never written through in this mode. */
  return scan((unsigned char *)(uintptr_t)s, n, M_EOL | M_FIND);
}

void acp__eol_blank(void *s, size_t n) {
  (void)scan(s, n, M_EOL);
}
