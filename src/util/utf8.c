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
/* 64-byte registers for long runs where the CPU has AVX-512BW (checked at
 * run time; compiled with a function attribute, so this runs on any
 * x86-64), as the JSON scan does (json_avx512.c). */
#if defined(__SSE2__) && defined(__x86_64__) && defined(__GNUC__) &&           \
    !defined(ACP_NO_AVX2)
#include <immintrin.h>
#define UTF8_WIDE 1
#define AVX512 __attribute__((target("avx512bw")))
/* Bytes taken 16 at a time before the wide steps: a run shorter than
 * this never touches a 64-byte register (as ACP__JSON_WIDE_FROM). */
#define WIDE_FROM ((size_t)1024)
#endif

int acp__utf8_no_wide = 0;

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

#if defined(__SSE2__)
/* Nonzero if one of the 64 bytes at p stops the run. */
static ALWAYS_INLINE int stops64(const unsigned char *p, int mode) {
  __m128i a = _mm_loadu_si128((const __m128i *)(const void *)p);
  __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
  __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
  __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
  return _mm_movemask_epi8(
      _mm_or_si128(_mm_or_si128(stops16(a, mode), stops16(b, mode)),
                   _mm_or_si128(stops16(c, mode), stops16(d, mode))));
}
#endif

#ifdef UTF8_WIDE
/* The bytes of a 64-byte block that stop a run, as a mask. */
static AVX512 inline __mmask64 stops_mask(__m512i v, int mode) {
  __mmask64 m = 0;

  if (mode & M_UTF8)
    m = _mm512_movepi8_mask(v);
  if (mode & M_EOL)
    m |= _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('\n')) |
         _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('\r'));
  return m;
}

/* The leading whole 64-byte blocks of p[0..n) where nothing stops the
 * run: 256 bytes a step, then 64. */
static AVX512 size_t run512(const unsigned char *p, size_t n, int mode) {
  size_t i = 0;

  while (n - i >= 256) {
    __m512i a = _mm512_loadu_si512((const void *)(p + i));
    __m512i b = _mm512_loadu_si512((const void *)(p + i + 64));
    __m512i c = _mm512_loadu_si512((const void *)(p + i + 128));
    __m512i d = _mm512_loadu_si512((const void *)(p + i + 192));
    if ((stops_mask(a, mode) | stops_mask(b, mode) | stops_mask(c, mode) |
         stops_mask(d, mode)) != 0)
      break;
    i += 256;
  }
  while (n - i >= 64 &&
         stops_mask(_mm512_loadu_si512((const void *)(p + i)), mode) == 0)
    i += 64;
  return i;
}

static int wide_ok(void) {
  return !acp__utf8_no_wide && __builtin_cpu_supports("avx512bw");
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
#ifdef UTF8_WIDE
      /* A long run (a large message): its first kilobyte as below, the
       * rest in 64-byte registers where the CPU has them; where they
       * stop, the steps below find the byte. */
      if ((size_t)(end - p) >= WIDE_FROM + 256 && wide_ok()) {
        const unsigned char *lim = p + WIDE_FROM;

        while (p < lim && !stops64(p, mode))
          p += 64;
        if (p == lim)
          p += run512(p, (size_t)(end - p), mode);
      }
#endif
      while (end - p >= 64 && !stops64(p, mode))
        p += 64;
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
