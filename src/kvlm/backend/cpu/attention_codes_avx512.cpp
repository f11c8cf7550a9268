// The AVX-512 kernels of the int8 key path (attention_codes.h). A block's parameters are widened 16
// keys at a time. Scoring (VNNI): for one query head and a block
// of 16 keys, each key's code pieces meet the query's with vpdpbusd into 16 int32 lanes per key;
// the 16 keys' lanes are then summed per group by a transpose-and-add tree, which leaves the 16
// keys' P_g in one register, and the float steps run on those 16 scores at once. Integer sums
// are exact in any order and the float steps are the portable kernel's, so the bits are equal.
// GCC 12 reports false "uninitialized __Y" warnings inside its own AVX-512 intrinsic headers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "kvlm/backend/cpu/attention_codes.h"

#define KVLM_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define KVLM_UNROLL _Pragma("GCC unroll 16")

namespace kvlm::cpu {
namespace {

// b[p] holds key 2p's eight partial lanes in its low half and key 2p+1's in its high half; the
// result holds every key's sum of its eight lanes, in key order.
KVLM_TARGET inline __m512i sum_pairs(const __m512i (&b)[8]) {
  __m512i c[4], d[2];
  KVLM_UNROLL for (int q = 0; q < 4; ++q)
    c[q] = _mm512_add_epi32(_mm512_shuffle_i32x4(b[2 * q], b[2 * q + 1], 0x88),
                            _mm512_shuffle_i32x4(b[2 * q], b[2 * q + 1], 0xDD));
  KVLM_UNROLL for (int s = 0; s < 2; ++s) {
    const __m512 x = _mm512_castsi512_ps(c[2 * s]), y = _mm512_castsi512_ps(c[2 * s + 1]);
    d[s] = _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(x, y, _MM_SHUFFLE(1, 0, 1, 0))),
                            _mm512_castps_si512(_mm512_shuffle_ps(x, y, _MM_SHUFFLE(3, 2, 3, 2))));
  }
  const __m512 x = _mm512_castsi512_ps(d[0]), y = _mm512_castsi512_ps(d[1]);
  const __m512i e = _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(x, y, _MM_SHUFFLE(2, 0, 2, 0))),
                                     _mm512_castps_si512(_mm512_shuffle_ps(x, y, _MM_SHUFFLE(3, 1, 3, 1))));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(order, e);
}

// Every key's sum of its 16 lanes.
KVLM_TARGET inline __m512i sum_keys(const __m512i (&acc)[16]) {
  __m512i b[8];
  KVLM_UNROLL for (int p = 0; p < 8; ++p)
    b[p] = _mm512_add_epi32(_mm512_shuffle_i32x4(acc[2 * p], acc[2 * p + 1], 0x44),
                            _mm512_shuffle_i32x4(acc[2 * p], acc[2 * p + 1], 0xEE));
  return sum_pairs(b);
}

// Every key's sums of lanes 0..7 (lo) and of lanes 8..15 (hi): the two groups of 32 in a piece.
KVLM_TARGET inline void sum_key_halves(const __m512i (&acc)[16], __m512i& lo, __m512i& hi) {
  __m512i b[8];
  KVLM_UNROLL for (int p = 0; p < 8; ++p) b[p] = _mm512_shuffle_i32x4(acc[2 * p], acc[2 * p + 1], 0x44);
  lo = sum_pairs(b);
  KVLM_UNROLL for (int p = 0; p < 8; ++p) b[p] = _mm512_shuffle_i32x4(acc[2 * p], acc[2 * p + 1], 0xEE);
  hi = sum_pairs(b);
}

// acc + t_g for the 16 keys, P their integer sums without the centring term.
KVLM_TARGET inline __m512 add_group(__m512 acc, __m512i p, const KeyCodeBlock& keys, int g,
                                    const QueryCodes::Head& q) {
  const __m512 x = _mm512_mul_ps(_mm512_set1_ps(q.d[g]), _mm512_cvtepi32_ps(_mm512_add_epi32(p, _mm512_set1_epi32(q.base[g]))));
  const __m512 t = _mm512_add_ps(_mm512_mul_ps(_mm512_load_ps(keys.a[g]), x),
                                 _mm512_mul_ps(_mm512_load_ps(keys.b[g]), _mm512_set1_ps(q.sq[g])));
  return _mm512_add_ps(acc, t);
}

KVLM_TARGET inline __m512i load(const void* p) { return _mm512_loadu_si512(p); }

// The parameter at byte `at` of the 16 rows, widened to f32 (exact, as load_kv_scalar).
KVLM_TARGET inline __m512 param16(const uint8_t* const* row, size_t at, DType dt) {
  if (dt == DType::kF32) {
    alignas(64) float v[kKeyBlock];
    for (int r = 0; r < kKeyBlock; ++r) std::memcpy(&v[r], row[r] + at, 4);
    return _mm512_load_ps(v);
  }
  alignas(32) uint16_t h[kKeyBlock];
  for (int r = 0; r < kKeyBlock; ++r) std::memcpy(&h[r], row[r] + at, 2);
  const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(h));
  if (dt == DType::kF16) return _mm512_cvtph_ps(raw);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
}

}  // namespace

KVLM_TARGET void prepare_key_codes_avx512(const KeyCodeForm& f, const uint8_t* const* rows, int count,
                                          KeyCodeBlock& out) {
  const uint8_t* row[kKeyBlock];
  for (int r = 0; r < kKeyBlock; ++r) row[r] = rows[r < count ? r : 0];
  if (f.turbo || f.bits == 4) {
    out.bytes.resize(size_t(kKeyBlock) * size_t(f.head_dim));
    const __m512i top = _mm512_set1_epi8(char(0x80));
    for (int r = 0; r < kKeyBlock; ++r) {
      uint8_t* dst = out.bytes.data() + size_t(r) * size_t(f.head_dim);
      if (f.bits == 4) rewrite_key_codes(f, row[r], dst);
      else
        for (int i = 0; i < f.head_dim; i += kCodePiece) _mm512_storeu_si512(dst + i, _mm512_xor_si512(load(row[r] + i), top));
      out.codes[r] = dst;
    }
  } else {
    for (int r = 0; r < kKeyBlock; ++r) out.codes[r] = row[r];
  }
  const size_t codes = f.code_bytes(), psize = dtype_size(f.params);
  const int groups = f.groups();
  const __m512 m = _mm512_set1_ps(float(1 << (f.bits - 1)));
  for (int g = 0; g < groups; ++g) {
    const __m512 s = param16(row, codes + size_t(g) * psize, f.params);
    const __m512 second = param16(row, codes + size_t(groups + g) * psize, f.params);
    _mm512_store_ps(out.a[g], s);
    const __m512 b = !f.turbo ? _mm512_add_ps(second, _mm512_mul_ps(s, m))
                     : f.bits == 8 ? _mm512_mul_ps(s, second)
                                   : _mm512_mul_ps(s, _mm512_add_ps(second, m));
    _mm512_store_ps(out.b[g], b);
  }
}

KVLM_TARGET void score_codes_avx512(const KeyCodeForm& f, const KeyCodeBlock& keys, const QueryCodes& q,
                                    int64_t first, int heads, float scale, float* s, size_t stride) {
  const int G = f.group;
  for (int h = 0; h < heads; ++h) {
    const QueryCodes::Head qh = q.head(first + h);
    __m512 acc = _mm512_setzero_ps();
    __m512i p[kKeyBlock];
    if (G == 32) {
      for (int c = 0; c < f.pieces(); ++c) {
        const __m512i qv = load(qh.q + c * kCodePiece);
        KVLM_UNROLL for (int r = 0; r < kKeyBlock; ++r)
          p[r] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), load(keys.codes[r] + c * kCodePiece), qv);
        __m512i lo, hi;
        sum_key_halves(p, lo, hi);
        acc = add_group(acc, lo, keys, 2 * c, qh);
        acc = add_group(acc, hi, keys, 2 * c + 1, qh);
      }
    } else {
      for (int g = 0; g < f.groups(); ++g) {
        KVLM_UNROLL for (int r = 0; r < kKeyBlock; ++r) p[r] = _mm512_setzero_si512();
        for (int i = g * G; i < (g + 1) * G; i += kCodePiece) {
          const __m512i qv = load(qh.q + i);
          KVLM_UNROLL for (int r = 0; r < kKeyBlock; ++r) p[r] = _mm512_dpbusd_epi32(p[r], load(keys.codes[r] + i), qv);
        }
        acc = add_group(acc, sum_keys(p), keys, g, qh);
      }
    }
    _mm512_storeu_ps(s + size_t(h) * stride, _mm512_mul_ps(acc, _mm512_set1_ps(scale)));
  }
}

}  // namespace kvlm::cpu
