// The int8 key path (cpu/attention_codes.h): which codecs have it, that a prepared key block
// reproduces the codec's decoded keys, that scores stay within the stated bound of the exact
// q.k, that the AVX-512 kernel equals the portable one bit for bit, and that attention on it
// stays within the bound that bound implies.
#include <gtest/gtest.h>

#include <cmath>

#include "isa_test_util.h"
#include "kvlm/backend/cpu/attention_codes.h"
#include "kvlm/backend/ops.h"

namespace kvlm::cpu {
namespace {

std::vector<KVCodecSpec> coded_specs() {
  std::vector<KVCodecSpec> specs;
  for (int bits : {4, 8})
    for (int g : {32, 64, 128}) specs.push_back(kv_affine_spec(bits, g, DType::kBF16));
  specs.push_back(kv_affine_spec(8, 64, DType::kF16));
  specs.push_back(kv_affine_spec(4, 32, DType::kF32));
  for (int k : {4, 8}) specs.push_back(kv_turbo_spec(k, 3));
  return specs;
}

TEST(AttentionCodes, FormsOfEveryCodec) {
  for (const KVCodecSpec& s : coded_specs()) {
    const auto form = key_code_form(KVCodec(s, 128));
    ASSERT_TRUE(form) << kv_codec_name(s);
    EXPECT_EQ(form->bits, s.kind == KVCodecKind::kTurbo ? s.key_bits : s.bits);
    EXPECT_EQ(form->group, s.kind == KVCodecKind::kTurbo ? 32 : s.group_size);
  }
  for (const KVCodecSpec& s : {kv_passthrough_spec(DType::kBF16), kv_passthrough_spec(DType::kF32),
                               kv_affine_spec(2, 64, DType::kBF16), kv_affine_spec(3, 32, DType::kBF16),
                               kv_affine_spec(5, 64, DType::kBF16), kv_affine_spec(6, 64, DType::kBF16),
                               kv_turbo_spec(2, 3), kv_turbo_spec(5, 3)})
    EXPECT_FALSE(key_code_form(KVCodec(s, 128))) << kv_codec_name(s);
  EXPECT_FALSE(key_code_form(KVCodec(kv_affine_spec(8, 32, DType::kBF16), 96)));  // not a multiple of 64
}

// fn(codec, form) for every spec of coded_specs() at each head dim (groups wider than it skipped).
template <class Fn>
void for_each_form(std::initializer_list<int> dims, Fn fn) {
  for (int d : dims)
    for (const KVCodecSpec& s : coded_specs()) {
      if (s.kind == KVCodecKind::kAffine && s.group_size > d) continue;
      const KVCodec codec(s, d);
      fn(codec, *key_code_form(codec));
    }
}

// Key rows of `codec` encoded from normal data (every 5th row scaled up, one constant row).
std::vector<uint8_t> key_rows(const KVCodec& codec, int rows, uint32_t seed) {
  const int d = codec.head_dim();
  std::vector<float> x = normal(size_t(rows * d), seed);
  for (int r = 0; r < rows; r += 5)
    for (int i = 0; i < d; ++i) x[size_t(r * d + i)] *= 30.0f;
  for (int i = 0; i < d; ++i) x[size_t(d + i)] = 0.75f;
  std::vector<uint8_t> out(size_t(rows) * codec.key_row_bytes());
  for (int r = 0; r < rows; ++r) codec.encode_key_row(x.data() + r * d, out.data() + size_t(r) * codec.key_row_bytes());
  return out;
}

struct Block {
  std::vector<uint8_t> rows;  // MLX affine 8-bit blocks point into them
  KeyCodeBlock keys;
  std::vector<std::vector<float>> decoded;  // the codec's decode of each row
};

Block prepare(const KVCodec& codec, const KeyCodeForm& form, std::vector<uint8_t> rows, int count) {
  Block b;
  b.rows = std::move(rows);
  const uint8_t* ptr[kKeyBlock];
  for (int r = 0; r < count; ++r) {
    ptr[r] = b.rows.data() + size_t(r) * codec.key_row_bytes();
    b.decoded.emplace_back(size_t(codec.head_dim()));
    codec.decode_key_row(ptr[r], b.decoded.back().data());
  }
  prepare_key_codes_portable(form, ptr, count, b.keys);
  return b;
}

// Element i of key r as the block states it: A_g * (u - m) + B_g.
double element(const KeyCodeForm& f, const KeyCodeBlock& k, int r, int i) {
  // piece order: 8-bit as is; 4-bit halves of 32 hold the even elements, then the odd ones
  const int pos = f.bits == 8 ? i : i / 32 * 32 + (i % 32) % 2 * 16 + (i % 32) / 2;
  const int g = i / f.group, m = 1 << (f.bits - 1);
  return double(k.a[g][r]) * (int(k.codes[r][pos]) - m) + double(k.b[g][r]);
}

TEST(AttentionCodes, KeyBlocksReproduceTheDecodedKeys) {
  for_each_form({64, 128}, [&](const KVCodec& codec, const KeyCodeForm& form) {
    const KVCodecSpec& s = codec.spec();
    const int d = codec.head_dim();
    const Block b = prepare(codec, form, key_rows(codec, kKeyBlock, 3), kKeyBlock);
    for (int r = 0; r < kKeyBlock; ++r)
      for (int i = 0; i < d; ++i) {
        // B_g = b + s*m (or s*z) is rounded once: an ulp of |B_g| + |A_g|*m at most
        const double want = b.decoded[size_t(r)][size_t(i)];
        const int g = i / form.group;
        const double tol = 1e-6 * (std::fabs(want) + std::fabs(b.keys.b[g][r]) +
                                   std::fabs(b.keys.a[g][r]) * (1 << (form.bits - 1)));
        ASSERT_NEAR(element(form, b.keys, r, i), want, tol)
            << kv_codec_name(s) << " d " << d << " key " << r << " element " << i;
      }
  });
}

// The scores of `heads` query heads against a block: the kernel's, the exact ones from the decoded
// keys, and the stated bound scale * sum_g d_g/2 * sum_i |k_i - B_g| (= |A_g| * |u_i - m|).
TEST(AttentionCodes, ScoresStayWithinTheQueryRoundingBound) {
  const int heads = 3;
  const float scale = 0.125f;
  for_each_form({64, 128}, [&](const KVCodec& codec, const KeyCodeForm& form) {
    const KVCodecSpec& s = codec.spec();
    const int d = codec.head_dim();
    const Block b = prepare(codec, form, key_rows(codec, 11, 4), 11);  // a partial block
    std::vector<float> q = normal(size_t(heads * d), 5);
    for (int i = 0; i < d; ++i) q[size_t(i)] *= 4.0f;  // uneven magnitudes per head
    for (int i = 0; i < d; ++i) q[size_t(d + i)] = 0.0f;  // an all-zero head: d_g = 0
    const QueryCodes qc = quantize_query_codes(form, q.data(), heads);
    std::vector<float> got(size_t(heads * kKeyBlock));
    score_codes_portable(form, b.keys, qc, 0, heads, scale, got.data(), kKeyBlock);
    for (int h = 0; h < heads; ++h)
      for (int r = 0; r < 11; ++r) {
        double exact = 0, bound = 0, magnitude = 0;
        for (int i = 0; i < d; ++i) {
          const double k = b.decoded[size_t(r)][size_t(i)], x = q[size_t(h * d + i)];
          const int g = i / form.group;
          exact += x * k;
          magnitude += std::fabs(x * k);
          bound += qc.d[size_t(h * kMaxCodeGroups + g)] / 2 * std::fabs(k - b.keys.b[g][r]);
        }
        const double err = std::fabs(double(got[size_t(h * kKeyBlock + r)]) - scale * exact);
        EXPECT_LE(err, scale * (bound + 1e-5 * magnitude) + 1e-30)
            << kv_codec_name(s) << " d " << d << " head " << h << " key " << r;
        if (h == 1) {
          EXPECT_NEAR(got[size_t(h * kKeyBlock + r)], 0.0f, 0.0f);  // zero query
        }
      }
  });
}

TEST(AttentionCodes, Avx512KernelsEqualPortableBitForBit) {
  if (key_code_kernels(Isa::kAvx512).score != score_codes_avx512) GTEST_SKIP() << "no AVX-512 VNNI";
  const int heads = 7;
  for_each_form({64, 128, 256}, [&](const KVCodec& codec, const KeyCodeForm& form) {
    const KVCodecSpec& s = codec.spec();
    const int d = codec.head_dim();
    const Block b = prepare(codec, form, key_rows(codec, 13, 6), 13);
    KeyCodeBlock simd_keys;
    const uint8_t* ptr[13];
    for (int r = 0; r < 13; ++r) ptr[r] = b.rows.data() + size_t(r) * codec.key_row_bytes();
    prepare_key_codes_avx512(form, ptr, 13, simd_keys);
    for (int r = 0; r < kKeyBlock; ++r)
      EXPECT_EQ(std::memcmp(simd_keys.codes[r], b.keys.codes[r], size_t(d)), 0) << kv_codec_name(s) << " key " << r;
    EXPECT_EQ(std::memcmp(simd_keys.a, b.keys.a, sizeof(b.keys.a[0]) * size_t(form.groups())), 0) << kv_codec_name(s);
    EXPECT_EQ(std::memcmp(simd_keys.b, b.keys.b, sizeof(b.keys.b[0]) * size_t(form.groups())), 0) << kv_codec_name(s);
    const std::vector<float> q = normal(size_t(2 * heads * d), 7);
    const QueryCodes qc = quantize_query_codes(form, q.data(), 2 * heads);
    std::vector<float> portable(size_t(heads * 20)), simd(portable.size());
    score_codes_portable(form, b.keys, qc, heads, heads, 0.3f, portable.data(), 20);
    score_codes_avx512(form, simd_keys, qc, heads, heads, 0.3f, simd.data(), 20);
    for (int h = 0; h < heads; ++h)  // the stride's gaps are not written
      EXPECT_EQ(std::memcmp(portable.data() + h * 20, simd.data() + h * 20, kKeyBlock * sizeof(float)), 0)
          << kv_codec_name(s) << " d " << d << " head " << h;
  });
}

TEST(AttentionCodes, Avx2KernelEqualsPortableBitForBit) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  const int heads = 7;
  for_each_form({64, 128}, [&](const KVCodec& codec, const KeyCodeForm& form) {
    const KVCodecSpec& s = codec.spec();
    const int d = codec.head_dim();
    const Block b = prepare(codec, form, key_rows(codec, 9, 8), 9);
    const std::vector<float> q = normal(size_t(heads * d), 9);
    const QueryCodes qc = quantize_query_codes(form, q.data(), heads);
    std::vector<float> portable(size_t(heads * kKeyBlock)), simd(portable.size());
    score_codes_portable(form, b.keys, qc, 0, heads, 0.3f, portable.data(), kKeyBlock);
    score_codes_avx2(form, b.keys, qc, 0, heads, 0.3f, simd.data(), kKeyBlock);
    EXPECT_TRUE(same_bits(portable, simd)) << kv_codec_name(s) << " d " << d;
  });
}

}  // namespace
}  // namespace kvlm::cpu
