/*
 * UTF-8 validation for text that is mostly ASCII (JSON on the wire): the
 * WebSocket codec checks every text message with it (RFC 6455 fails a
 * connection on invalid UTF-8), so a 1 MiB message is one pass that costs
 * little beside the copies around it.
 */
#include <stdint.h>
#include <string.h>

#include "util.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

size_t acp__utf8_valid_len(const void *s, size_t n) {
  if (n == 0)
    return 0; /* s may be NULL: no arithmetic on it */
  const unsigned char *p = s;
  const unsigned char *end = p + n;

  while (p < end) {
#if defined(__SSE2__)
    /* One block first (a text of other scripts pays one test a
     * character); while that is ASCII, four blocks a step, one branch;
     * the block that holds a byte >= 0x80 tells where it is. */
    while (end - p >= 16) {
      int m =
          _mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(const void *)p));
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
        if (_mm_movemask_epi8(
                _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d))) != 0)
          break;
        p += 64;
      }
    }
#else
    while (end - p >= 8) {
      uint64_t w;
      memcpy(&w, p, 8);
      if ((w & 0x8080808080808080ull) != 0)
        break;
      p += 8;
    }
#endif
    if (p == end)
      break;
    if (*p < 0x80) {
      p++;
      continue;
    }
    size_t k = acp__utf8_seq(p, end);
    if (k == 0)
      return (size_t)(p - (const unsigned char *)s);
    p += k;
  }
  return n;
}
