/*
 * The plain-run steps of json_avx2.c with AVX-512BW, and the choice
 * between the two. A 1 MiB prompt turn reads its text three times (the
 * client's check of the text it sends, the agent's parse, the client's
 * parse of the echo) and a 64 KiB one too; in a 64-byte register a block
 * takes two compares into a mask, against three compares and two ORs per
 * 32 bytes with AVX2, and the scan of data in L2 runs twice as fast
 * (docs/decisions.md, "Long texts with AVX-512").
 *
 * Only a run longer than ACP__JSON_WIDE_FROM gets here: the first bytes
 * go through AVX2, so strings of a few hundred bytes (most of a
 * protocol's) never use a 64-byte register. Compiled with a function
 * attribute, like the AVX2 steps; the library runs on any x86-64.
 */
#include "json_int.h"

#ifdef ACP__JSON_AVX2
#include <immintrin.h>

#define ACP__AVX512 __attribute__((target("avx512bw")))

int acp__json_no_avx512 = 0;

static int have_avx512(void) {
  return !acp__json_no_avx512 && __builtin_cpu_supports("avx512bw");
}

/* The special bytes of a 64-byte block as a mask: v ^ 2 is below 0x21,
 * compared signed, exactly for the control bytes (0x00-0x1F map onto
 * themselves), the quote (0x22 -> 0x20) and every byte >= 0x80 (negative
 * before and after); the backslash is the second compare. */
static ACP__AVX512 inline __mmask64 special64m(__m512i v) {
  return _mm512_cmplt_epi8_mask(_mm512_xor_si512(v, _mm512_set1_epi8(2)),
                                _mm512_set1_epi8(0x21)) |
         _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('\\'));
}

/* d NULL only scans (inlined twice, so the test of d goes away in each).
 * 256 bytes a step while all are plain (one test of four masks), then the
 * 64-byte step finds the block that stopped it. */
static ACP__AVX512 inline size_t run512(unsigned char *d,
                                        const unsigned char *s, size_t n) {
  size_t i = 0;

  while (n - i >= 256) {
    __m512i a = _mm512_loadu_si512((const void *)(s + i));
    __m512i b = _mm512_loadu_si512((const void *)(s + i + 64));
    __m512i c = _mm512_loadu_si512((const void *)(s + i + 128));
    __m512i e = _mm512_loadu_si512((const void *)(s + i + 192));
    if ((special64m(a) | special64m(b) | special64m(c) | special64m(e)) != 0)
      break;
    if (d != NULL) {
      _mm512_storeu_si512((void *)(d + i), a);
      _mm512_storeu_si512((void *)(d + i + 64), b);
      _mm512_storeu_si512((void *)(d + i + 128), c);
      _mm512_storeu_si512((void *)(d + i + 192), e);
    }
    i += 256;
  }
  while (n - i >= 64) {
    __m512i a = _mm512_loadu_si512((const void *)(s + i));
    if (special64m(a) != 0)
      break;
    if (d != NULL)
      _mm512_storeu_si512((void *)(d + i), a);
    i += 64;
  }
  return i;
}

static ACP__AVX512 size_t plain_avx512(const unsigned char *p, size_t n) {
  return run512(NULL, p, n);
}

static ACP__AVX512 size_t copy_plain_avx512(unsigned char *d,
                                            const unsigned char *s, size_t n) {
  return run512(d, s, n);
}

/* Both entry points: d NULL only scans. AVX2 alone for a short buffer or
 * a CPU without AVX-512BW; else AVX2 over the first ACP__JSON_WIDE_FROM
 * bytes and, if all of them are plain, AVX-512 on. */
static size_t wide(unsigned char *d, const unsigned char *s, size_t n) {
  size_t m = n;
  size_t i;

  if (!acp__json_have_avx2())
    return 0;
  if (n >= ACP__JSON_WIDE_FROM + 256 && have_avx512())
    m = ACP__JSON_WIDE_FROM;
  i = d != NULL ? acp__json_copy_plain_avx2(d, s, m)
                : acp__json_plain_avx2(s, m);
  if (m < n && i == m)
    i += d != NULL ? copy_plain_avx512(d + i, s + i, n - i)
                   : plain_avx512(s + i, n - i);
  return i;
}

size_t acp__json_plain_wide(const unsigned char *p, size_t n) {
  return wide(NULL, p, n);
}

size_t acp__json_copy_plain_wide(unsigned char *d, const unsigned char *s,
                                 size_t n) {
  return wide(d, s, n);
}

#else
/* ISO C wants a translation unit to declare something. */
typedef int acp__json_avx512_unused;
#endif
