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

  /* 128 bytes a step while all are plain (one test for four blocks: the
   * loop's own instructions are a fifth of a 64-byte step's), then the
   * 64-byte step finds which half stopped it. */
  while (n - i >= 128) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(p + i));
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 32));
    __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 64));
    __m256i d = _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 96));
    __m256i m = _mm256_or_si256(_mm256_or_si256(special32(a), special32(b)),
                                _mm256_or_si256(special32(c), special32(d)));
    if (!_mm256_testz_si256(m, m))
      break;
    i += 128;
  }
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

  while (n - i >= 128) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 32));
    __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 64));
    __m256i e = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 96));
    __m256i m = _mm256_or_si256(_mm256_or_si256(special32(a), special32(b)),
                                _mm256_or_si256(special32(c), special32(e)));
    if (!_mm256_testz_si256(m, m))
      break;
    _mm256_storeu_si256((__m256i *)(void *)(d + i), a);
    _mm256_storeu_si256((__m256i *)(void *)(d + i + 32), b);
    _mm256_storeu_si256((__m256i *)(void *)(d + i + 64), c);
    _mm256_storeu_si256((__m256i *)(void *)(d + i + 96), e);
    i += 128;
  }
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

/*
 * UTF-8 by table lookups (the approach of Keiser and Lemire, "Validating
 * UTF-8 In Less Than One Instruction Per Byte", 2021): every error a pair
 * of adjacent bytes can show is a class, and each class is an AND of a
 * condition on the first byte's high nibble, on its low nibble and on the
 * second byte's high nibble, so three 16-entry tables of class bits, looked
 * up with a byte shuffle and ANDed, flag every bad pair at once. Bit 7 is
 * not an error but "two continuation bytes in a row", right exactly where
 * a byte is the third of a three- or four-byte character or the fourth of
 * a four-byte one, which the two bytes before tell. The tables were
 * derived by a script that checked all 65,536 pairs against the rules of
 * acp__utf8_seq(); tests compare every path on every short sequence.
 *
 *   bit 0  lead byte not followed by a continuation
 *   bit 1  ASCII followed by a continuation
 *   bit 2  E0 80..9F (overlong three-byte)
 *   bit 3  F4 90..BF, F5..FF 90..BF (above U+10FFFF)
 *   bit 4  ED A0..BF (surrogate)
 *   bit 5  C0/C1 continuation (overlong two-byte)
 *   bit 6  F0 80..8F (overlong four-byte), F5..FF 80..8F
 *   bit 7  continuation followed by continuation
 */
#define ACP__TABLE(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p)             \
  _mm256_setr_epi8(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, a, b, c, d, \
                   e, f, g, h, i, j, k, l, m, n, o, p)

/* The bytes of `cur` moved up by N, the last N of `prev` filling in. */
#define ACP__PREV(cur, prev, N)                                                \
  _mm256_alignr_epi8((cur), _mm256_permute2x128_si256((prev), (cur), 0x21),    \
                     16 - (N))

/* Nonzero bytes where the block, after `prev`, breaks the rules above or
 * holds a quote, backslash or control byte. */
static ACP__AVX2 inline __m256i utf8_bad32(__m256i v, __m256i prev) {
  const __m256i nib = _mm256_set1_epi8(0x0F);
  const __m256i first_hi =
      ACP__TABLE(0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, (char)0x80,
                 (char)0x80, (char)0x80, (char)0x80, 0x21, 0x01, 0x15, 0x49);
  const __m256i first_lo = ACP__TABLE(
      (char)0xE7, (char)0xA3, (char)0x83, (char)0x83, (char)0x8B, (char)0xCB,
      (char)0xCB, (char)0xCB, (char)0xCB, (char)0xCB, (char)0xCB, (char)0xCB,
      (char)0xCB, (char)0xDB, (char)0xCB, (char)0xCB);
  const __m256i second_hi =
      ACP__TABLE(0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, (char)0xE6,
                 (char)0xAE, (char)0xBA, (char)0xBA, 0x01, 0x01, 0x01, 0x01);
  __m256i p1 = ACP__PREV(v, prev, 1);
  __m256i cls = _mm256_and_si256(
      _mm256_and_si256(
          _mm256_shuffle_epi8(first_hi,
                              _mm256_and_si256(_mm256_srli_epi16(p1, 4), nib)),
          _mm256_shuffle_epi8(first_lo, _mm256_and_si256(p1, nib))),
      _mm256_shuffle_epi8(second_hi,
                          _mm256_and_si256(_mm256_srli_epi16(v, 4), nib)));
  /* 0x80 and up where the byte two back is E0..FF or three back F0..FF. */
  __m256i third =
      _mm256_subs_epu8(ACP__PREV(v, prev, 2), _mm256_set1_epi8(0x60));
  __m256i fourth =
      _mm256_subs_epu8(ACP__PREV(v, prev, 3), _mm256_set1_epi8(0x70));
  __m256i must = _mm256_and_si256(_mm256_or_si256(third, fourth),
                                  _mm256_set1_epi8((char)0x80));
  __m256i json = _mm256_or_si256(
      _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('"')),
                      _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\\'))),
      _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1F)), v));
  return _mm256_or_si256(_mm256_xor_si256(cls, must), json);
}

/* i, less the start of a character cut by the end of s[0..i): the blocks
 * before i are valid but for such a tail, whose lead is one of the last
 * three bytes. */
static inline size_t utf8_whole(const unsigned char *s, size_t i) {
  if (i >= 1 && s[i - 1] >= 0xC0)
    return i - 1;
  if (i >= 2 && s[i - 2] >= 0xE0)
    return i - 2;
  if (i >= 3 && s[i - 3] >= 0xF0)
    return i - 3;
  return i;
}

/* The run of both entry points below; d NULL only scans (inlined twice,
 * so the test of d goes away in each). */
static ACP__AVX2 inline size_t utf8_run(unsigned char *d,
                                        const unsigned char *s, size_t n) {
  __m256i prev = _mm256_setzero_si256();
  size_t i = 0;

  while (n - i >= 32) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
    __m256i bad = utf8_bad32(v, prev);
    if (!_mm256_testz_si256(bad, bad))
      break;
    if (d != NULL)
      _mm256_storeu_si256((__m256i *)(void *)(d + i), v);
    prev = v;
    i += 32;
  }
  return utf8_whole(s, i);
}

ACP__AVX2 size_t acp__json_plain_utf8_avx2(const unsigned char *s, size_t n) {
  return utf8_run(NULL, s, n);
}

ACP__AVX2 size_t acp__json_copy_utf8_avx2(unsigned char *d,
                                          const unsigned char *s, size_t n) {
  return utf8_run(d, s, n);
}

#else
/* ISO C wants a translation unit to declare something. */
typedef int acp__json_avx2_unused;
#endif
