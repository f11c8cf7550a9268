// The AVX2 scoring kernel of the int8 key path (attention_codes.h), for CPUs without AVX-512 VNNI:
// codes and query codes widened to 16 bits meet in vpmaddwd (exact int32 pair sums, no saturation),
// eight keys at a time; the eight keys' lanes are summed per group by a horizontal-add tree and the
// float steps run on eight scores at once. Integer sums are exact in any order and the float steps
// are the portable kernel's, so the bits are equal.
#include <immintrin.h>

#include "kvlm/backend/cpu/attention_codes.h"

#define KVLM_TARGET __attribute__((target("avx2,fma")))

namespace kvlm::cpu {
namespace {

constexpr int kKeys = 8;  // keys per pass: eight accumulators and the query's chunks fit 16 ymm

// Each of the eight keys' sum of its eight lanes, in key order.
KVLM_TARGET inline __m256i sum_keys(const __m256i (&a)[kKeys]) {
  const __m256i t0 = _mm256_hadd_epi32(a[0], a[1]), t1 = _mm256_hadd_epi32(a[2], a[3]);
  const __m256i t2 = _mm256_hadd_epi32(a[4], a[5]), t3 = _mm256_hadd_epi32(a[6], a[7]);
  const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
  return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

}  // namespace

KVLM_TARGET void score_codes_avx2(const KeyCodeForm& f, const KeyCodeBlock& keys, const QueryCodes& q,
                                  int64_t first, int heads, float scale, float* s, size_t stride) {
  const int G = f.group;
  for (int h = 0; h < heads; ++h) {
    const QueryCodes::Head qh = q.head(first + h);
    for (int k0 = 0; k0 < kKeyBlock; k0 += kKeys) {
      __m256 acc = _mm256_setzero_ps();
      for (int g = 0; g < f.groups(); ++g) {
        __m256i p[kKeys];
        for (int r = 0; r < kKeys; ++r) p[r] = _mm256_setzero_si256();
        for (int i = g * G; i < (g + 1) * G; i += 16) {
          const __m256i qv = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qh.q + i)));
#pragma GCC unroll 8
          for (int r = 0; r < kKeys; ++r) {
            const __m256i u = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(keys.codes[k0 + r] + i)));
            p[r] = _mm256_add_epi32(p[r], _mm256_madd_epi16(u, qv));
          }
        }
        const __m256i sums = _mm256_add_epi32(sum_keys(p), _mm256_set1_epi32(qh.base[g]));
        const __m256 x = _mm256_mul_ps(_mm256_set1_ps(qh.d[g]), _mm256_cvtepi32_ps(sums));
        const __m256 t = _mm256_add_ps(_mm256_mul_ps(_mm256_load_ps(keys.a[g] + k0), x),
                                       _mm256_mul_ps(_mm256_load_ps(keys.b[g] + k0), _mm256_set1_ps(qh.sq[g])));
        acc = _mm256_add_ps(acc, t);
      }
      _mm256_storeu_ps(s + size_t(h) * stride + size_t(k0), _mm256_mul_ps(acc, _mm256_set1_ps(scale)));
    }
  }
}

}  // namespace kvlm::cpu
