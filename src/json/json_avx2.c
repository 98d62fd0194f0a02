/*
 * The long-string steps of the reader's string scan and the writer's
 * plain-run copy, 64 bytes a step with AVX2 (two 32-byte blocks) instead of
 * four SSE2 blocks: half the instructions over a large text. Compiled for
 * AVX2 with a function attribute, so the library itself still runs on any
 * x86-64; callers check acp__json_have_avx2() (the CPU and the OS support
 * it) before calling, and only once a string has shown 80 plain bytes, so
 * short strings never pay for the call (docs/decisions.md, "Large texts
 * pass through").
 */
#include "json_int.h"

#ifdef ACP__JSON_AVX2
#include <immintrin.h>

#define ACP__AVX2 __attribute__((target("avx2")))

int acp__json_no_avx2 = 0;

/* The special bytes of a 32-byte block, as acp__json_special16(). */
static ACP__AVX2 inline __m256i special32(__m256i v) {
  return _mm256_or_si256(
      _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('"')),
                      _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\\'))),
      _mm256_cmpgt_epi8(_mm256_set1_epi8(0x20), v));
}

ACP__AVX2 size_t acp__json_plain_avx2(const unsigned char *p, size_t n) {
  size_t i = 0;

  while (n - i >= 64) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(p + i));
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 32));
    if (_mm256_movemask_epi8(_mm256_or_si256(special32(a), special32(b))) != 0)
      break;
    i += 64;
  }
  return i;
}

ACP__AVX2 size_t acp__json_copy_plain_avx2(unsigned char *d,
                                           const unsigned char *s, size_t n) {
  size_t i = 0;

  while (n - i >= 64) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 32));
    if (_mm256_movemask_epi8(_mm256_or_si256(special32(a), special32(b))) != 0)
      break;
    _mm256_storeu_si256((__m256i *)(void *)(d + i), a);
    _mm256_storeu_si256((__m256i *)(void *)(d + i + 32), b);
    i += 64;
  }
  return i;
}

#else
/* ISO C wants a translation unit to declare something. */
typedef int acp__json_avx2_unused;
#endif
