// KV codecs: the traits table, --kv-quant spellings and errors, row sizes, byte layouts
// (hand-computed for affine, the passthrough dtypes and TurboQuant), derived round-trip bounds,
// token locality, and an attention loop that reads every codec through the same interface.
#include "kvlm/quant/kv_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kvlm/base/error.h"
#include "kvlm/base/half.h"
#include "kvlm/quant/affine.h"
#include "kvlm/quant/turboquant.h"

namespace kvlm {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<float> gaussian_row(std::mt19937& rng, int d, float sigma = 1.0f) {
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(d));
  for (float& v : x) v = nd(rng);
  return x;
}

float round_to(float v, DType dt) {
  return dt == DType::kF32   ? v
         : dt == DType::kF16 ? f16_to_f32(f32_to_f16(v))
                             : bf16_to_f32(f32_to_bf16(v));
}

// A representative spec of every kind, and the head dims each accepts.
std::vector<KVCodecSpec> all_specs() {
  std::vector<KVCodecSpec> specs = {kv_passthrough_spec(DType::kF32),
                                    kv_passthrough_spec(DType::kF16),
                                    kv_passthrough_spec(DType::kBF16)};
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int g : {32, 64, 128})
      for (DType p : {DType::kF32, DType::kF16, DType::kBF16})
        specs.push_back(kv_affine_spec(bits, g, p));
  for (int k : {2, 4, 5, 8})
    for (int v : {2, 3, 4, 5, 8})
      for (TurboTables t : {TurboTables::kSeed, TurboTables::kGaussian})
        specs.push_back(kv_turbo_spec(k, v, t));
  return specs;
}

TEST(KVCodecTraits, TableCoversEveryKind) {
  const char* names[] = {"f32", "f16", "bf16", "affine", "turbo"};
  for (int k = 0; k < int(KVCodecKind::kCount); ++k) {
    const KVCodecTraits& t = kv_codec_traits(KVCodecKind(k));
    EXPECT_STREQ(t.name, names[k]);
    EXPECT_TRUE(t.validate && t.key_row_bytes && t.value_row_bytes && t.encode_key &&
                t.decode_key && t.encode_value && t.decode_value_rotated);
    EXPECT_EQ(t.rotates_values, KVCodecKind(k) == KVCodecKind::kTurbo);
    EXPECT_EQ(t.inverse_value_transform != nullptr, t.rotates_values);
  }
  EXPECT_THROW(kv_codec_traits(KVCodecKind::kCount), Error);
}

TEST(KVCodecParse, MlxBunSpellings) {
  // off is the exact f32 cache whatever the model dtype; the passthrough dtypes are spelt out.
  EXPECT_EQ(parse_kv_quant("off", 0, DType::kBF16), kv_passthrough_spec(DType::kF32));
  EXPECT_EQ(parse_kv_quant("f32", 0, DType::kBF16), kv_passthrough_spec(DType::kF32));
  EXPECT_EQ(parse_kv_quant("f16", 0, DType::kBF16), kv_passthrough_spec(DType::kF16));
  EXPECT_EQ(parse_kv_quant("bf16", 0, DType::kF32), kv_passthrough_spec(DType::kBF16));
  EXPECT_EQ(parse_kv_quant("4", 0, DType::kBF16), kv_affine_spec(4, 64, DType::kBF16));
  EXPECT_EQ(parse_kv_quant("8", 32, DType::kF16), kv_affine_spec(8, 32, DType::kF16));
  EXPECT_EQ(parse_kv_quant("3", 128, DType::kBF16), kv_affine_spec(3, 128, DType::kBF16));
  EXPECT_EQ(parse_kv_quant("turbo", 0, DType::kBF16), kv_turbo_spec(8, 3));
  EXPECT_EQ(parse_kv_quant("turbo", 32, DType::kBF16), kv_turbo_spec(8, 3));
  EXPECT_EQ(parse_kv_quant("turbo:k4v2", 0, DType::kBF16), kv_turbo_spec(4, 2));
  EXPECT_EQ(parse_kv_quant("turbo:k5v8", 0, DType::kF16), kv_turbo_spec(5, 8));
  EXPECT_EQ(parse_kv_quant("turbo:k8v8:gaussian", 0, DType::kBF16),
            kv_turbo_spec(8, 8, TurboTables::kGaussian));
  EXPECT_EQ(parse_kv_quant("turbo:gaussian", 0, DType::kBF16),
            kv_turbo_spec(8, 3, TurboTables::kGaussian));
  // Names of TurboQuant specs parse back to the spec.
  for (const KVCodecSpec& s : all_specs()) {
    if (s.kind != KVCodecKind::kTurbo) continue;
    EXPECT_EQ(parse_kv_quant(kv_codec_name(s), 0, DType::kBF16), s) << kv_codec_name(s);
  }
  EXPECT_EQ(kv_codec_name(kv_affine_spec(4, 64, DType::kBF16)), "affine4g64");
  EXPECT_EQ(kv_codec_name(kv_passthrough_spec(DType::kF16)), "f16");
}

TEST(KVCodecParse, ErrorsNameTheValue) {
  const std::string spellings =
      " (expected off, f32, f16, bf16, 2, 3, 4, 5, 6, 8, turbo or turbo:k<bits>v<bits>, "
      "optionally followed by :gaussian for turbo)";
  for (const char* bad : {"", "on", "config", "4bit", "turbo:", "turbo:k8", "turbo:kv",
                          "turbo:x8v3", "turbo:k8v3:exact", "turbok8v3", "-4"})
    EXPECT_EQ(error_of([&] { parse_kv_quant(bad, 0, DType::kBF16); }),
              "--kv-quant: unknown value '" + std::string(bad) + "'" + spellings)
        << bad;
  EXPECT_EQ(error_of([] { parse_kv_quant("7", 0, DType::kBF16); }),
            "--kv-quant 7 --kv-group-size 64: MLX affine KV takes bits 2, 3, 4, 5, 6 or 8 and "
            "group size 32, 64 or 128");
  EXPECT_EQ(error_of([] { parse_kv_quant("4", 48, DType::kBF16); }),
            "--kv-quant 4 --kv-group-size 48: MLX affine KV takes bits 2, 3, 4, 5, 6 or 8 and "
            "group size 32, 64 or 128");
  EXPECT_EQ(error_of([] { parse_kv_quant("turbo:k3v3", 0, DType::kBF16); }),
            "--kv-quant turbo:k3v3: TurboQuant takes key bits 2, 4, 5 or 8 and value bits 2, 3, "
            "4, 5 or 8");
  EXPECT_EQ(error_of([] { parse_kv_quant("turbo:k8v6", 0, DType::kBF16); }),
            "--kv-quant turbo:k8v6: TurboQuant takes key bits 2, 4, 5 or 8 and value bits 2, 3, "
            "4, 5 or 8");
  EXPECT_EQ(error_of([] { parse_kv_quant("turbo", 64, DType::kBF16); }),
            "--kv-group-size 64: TurboQuant groups are fixed at 32 elements");
  EXPECT_EQ(error_of([] { parse_kv_quant("8", 0, DType::kU8); }),
            "KV cache dtype must be f32, f16 or bf16, not u8");
}

TEST(KVCodec, UnsupportedSpecsAndHeadDims) {
  EXPECT_EQ(error_of([] { KVCodec(kv_turbo_spec(8, 3), 96); }),
            "KV codec turbo:k8v3: TurboQuant does not support head_dim=96 (supported: 64, 128, "
            "256, 512)");
  EXPECT_EQ(error_of([] { KVCodec(kv_turbo_spec(4, 2, TurboTables::kGaussian), 80); }),
            "KV codec turbo:k4v2:gaussian: TurboQuant does not support head_dim=80 (supported: "
            "64, 128, 256, 512)");
  EXPECT_EQ(error_of([] { KVCodec(kv_turbo_spec(3, 3), 128); }),
            "KV codec turbo:k3v3: unsupported key bits 3 (TurboQuant keys take 2, 4, 5 or 8 "
            "bits)");
  EXPECT_EQ(error_of([] { KVCodec(kv_turbo_spec(8, 6), 128); }),
            "KV codec turbo:k8v6: unsupported value bits 6 (TurboQuant values take 2, 3, 4, 5 "
            "or 8 bits)");
  EXPECT_EQ(error_of([] { KVCodec(kv_affine_spec(4, 64, DType::kBF16), 96); }),
            "KV codec affine4g64: head_dim=96 is not a multiple of group_size 64");
  EXPECT_EQ(error_of([] { KVCodec(kv_affine_spec(7, 64, DType::kBF16), 128); }),
            "KV codec affine7g64: unsupported bits=7 group_size=64 (bits must be 2, 3, 4, 5, 6 "
            "or 8; group_size 32, 64 or 128)");
  EXPECT_EQ(error_of([] { KVCodec(kv_affine_spec(4, 64, DType::kI32), 128); }),
            "KV codec affine4g64: scale dtype must be f32, f16 or bf16, not i32");
  EXPECT_EQ(error_of([] { KVCodec(kv_passthrough_spec(DType::kBF16), 0); }),
            "KV codec bf16: head_dim=0 is outside 1..1024");
  // Affine and passthrough take any head_dim their groups divide (96 = 3 x 32, MLA's 576).
  EXPECT_EQ(KVCodec(kv_affine_spec(4, 32, DType::kBF16), 96).key_row_bytes(), 48u + 12u);
  EXPECT_EQ(KVCodec(kv_affine_spec(8, 64, DType::kBF16), 576).key_row_bytes(), 576u + 36u);
  EXPECT_EQ(KVCodec(kv_passthrough_spec(DType::kF16), 80).key_row_bytes(), 160u);
}

TEST(KVCodec, RowBytes) {
  const struct {
    KVCodecSpec spec;
    int d;
    size_t key, value;
  } cases[] = {
      {kv_passthrough_spec(DType::kBF16), 128, 256, 256},
      {kv_passthrough_spec(DType::kF32), 64, 256, 256},
      // MLX affine g64 with 16-bit scale and bias: 4-bit 72 B, 8-bit 136 B (turboquant.md §A.9).
      {kv_affine_spec(4, 64, DType::kBF16), 128, 72, 72},
      {kv_affine_spec(8, 64, DType::kF16), 128, 136, 136},
      {kv_affine_spec(3, 32, DType::kF32), 128, 48 + 32, 48 + 32},
      // vllm-metal at d=128: k8v3 144 + 56 = 200 B, k4v3 136 B, k2v3 104 B (turboquant.md §A.9).
      {kv_turbo_spec(8, 3), 128, 144, 56},
      {kv_turbo_spec(4, 3), 128, 80, 56},
      {kv_turbo_spec(2, 3), 128, 48, 56},
      {kv_turbo_spec(5, 8), 64, 40 + 8, 64 + 4},
      {kv_turbo_spec(8, 2), 512, 512 + 64, 128 + 32},
  };
  for (const auto& c : cases) {
    const KVCodec codec(c.spec, c.d);
    EXPECT_EQ(codec.key_row_bytes(), c.key) << codec.name();
    EXPECT_EQ(codec.value_row_bytes(), c.value) << codec.name();
    EXPECT_EQ(codec.token_head_bytes(), c.key + c.value) << codec.name();
  }
}

TEST(KVCodecPassthrough, BytesAreTheDtypeLittleEndian) {
  const std::vector<float> x = {1.0f, -2.5f, 1.0f / 3.0f, 65519.0f, 1e-8f, -0.0f, 3.0e38f, 7.0f};
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    const KVCodec codec(kv_passthrough_spec(dt), 8);
    std::vector<uint8_t> row(codec.key_row_bytes());
    codec.encode_key_row(x.data(), row.data());
    for (size_t i = 0; i < x.size(); ++i) {
      if (dt == DType::kF32) {
        EXPECT_EQ(std::memcmp(row.data() + 4 * i, &x[i], 4), 0);
      } else {
        const uint16_t want = dt == DType::kF16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
        EXPECT_EQ(row[2 * i] | row[2 * i + 1] << 8, want) << dtype_name(dt) << " " << i;
      }
    }
    std::vector<float> y(x.size());
    codec.decode_key_row(row.data(), y.data());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], round_to(x[i], dt)) << i;
  }
  // Hand-computed: 1/3 in f16 is 0x3555, in bf16 0x3eab; -2.5 is 0xc100 / 0xc020.
  const KVCodec f16(kv_passthrough_spec(DType::kF16), 8),
      bf16(kv_passthrough_spec(DType::kBF16), 8);
  std::vector<uint8_t> a(16), b(16);
  f16.encode_value_row(x.data(), a.data());
  bf16.encode_value_row(x.data(), b.data());
  EXPECT_EQ(a[2] | a[3] << 8, 0xc100);
  EXPECT_EQ(a[4] | a[5] << 8, 0x3555);
  EXPECT_EQ(b[2] | b[3] << 8, 0xc020);
  EXPECT_EQ(b[4] | b[5] << 8, 0x3eab);
}

TEST(KVCodecAffine, HandComputedRowBytes) {
  // x_j = j, 4 bits, group 32, f32 scales (MLX's GPU rule, affine.cpp): w_min = 0, w_max = 31,
  // |w_min| <= |w_max| so edge = 31 and scale = -31/15; q0 = round(31 / scale) = -15, so
  // scale = 31/-15 = -2.0666666 and bias = 31; code_j = round((j - 31)/scale) = 15,15,14,14,...
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[size_t(j)] = float(j);
  const KVCodec codec(kv_affine_spec(4, 32, DType::kF32), 32);
  std::vector<uint8_t> row(codec.key_row_bytes());
  ASSERT_EQ(row.size(), 16u + 4u + 4u);
  codec.encode_key_row(x.data(), row.data());
  const std::vector<uint8_t> want = {0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99,
                                     0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22,
                                     0x11, 0x00, 0x44, 0x44, 0x04, 0xc0,  // -2.0666666f
                                     0x00, 0x00, 0xf8, 0x41};             // 31.0f
  EXPECT_EQ(row, want);
  std::vector<float> y(32);
  codec.decode_key_row(row.data(), y.data());
  EXPECT_EQ(y[0], -2.0666666f * 15.0f + 31.0f);
  EXPECT_EQ(y[31], 31.0f);  // the larger-magnitude extreme is exact
}

TEST(KVCodecAffine, RowIsAffineQuantizeRowOutput) {
  // The codec stores exactly what affine.h computes: packed words, then scales, then biases, in
  // the parameter dtype. 16-bit parameters are stored as their bit patterns.
  std::mt19937 rng(11);
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int g : {32, 64, 128})
      for (DType p : {DType::kF32, DType::kF16, DType::kBF16}) {
        const int d = 128;
        std::vector<float> x = gaussian_row(rng, d, 3.0f);
        for (float& v : x) v = round_to(v, p);
        const KVCodec codec(kv_affine_spec(bits, g, p), d);
        std::vector<uint8_t> row(codec.key_row_bytes());
        codec.encode_key_row(x.data(), row.data());
        std::vector<uint32_t> packed(size_t(affine_packed_words(d, bits)));
        std::vector<float> scales(size_t(d / g)), biases(size_t(d / g));
        affine_quantize_row(x.data(), d, {bits, g}, p, packed.data(), scales.data(), biases.data());
        ASSERT_EQ(std::memcmp(row.data(), packed.data(), packed.size() * 4), 0);
        const size_t at = packed.size() * 4, ps = dtype_size(p);
        for (int k = 0; k < d / g; ++k) {
          float s, b;
          if (p == DType::kF32) {
            std::memcpy(&s, row.data() + at + size_t(k) * ps, 4);
            std::memcpy(&b, row.data() + at + size_t(d / g + k) * ps, 4);
          } else {
            uint16_t hs, hb;
            std::memcpy(&hs, row.data() + at + size_t(k) * ps, 2);
            std::memcpy(&hb, row.data() + at + size_t(d / g + k) * ps, 2);
            s = p == DType::kF16 ? f16_to_f32(hs) : bf16_to_f32(hs);
            b = p == DType::kF16 ? f16_to_f32(hb) : bf16_to_f32(hb);
          }
          EXPECT_EQ(s, scales[size_t(k)]);
          EXPECT_EQ(b, biases[size_t(k)]);
        }
      }
}

TEST(KVCodecAffine, RoundTripWithinDerivedBound) {
  // MLX's rule rounds to the nearest step (error <= step/2) except a clamped top code (<= one
  // step), with step = |scale| computed in f32. Storing scale and bias in the parameter dtype
  // adds |Δscale| * code + |Δbias| <= u * (|scale| * (2^bits - 1) + |bias|), u the dtype's unit
  // roundoff (2^-8 bf16, 2^-11 f16, 0 f32), relative to the stored values up to (1 + u).
  std::mt19937 rng(12);
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int g : {32, 64, 128})
      for (DType p : {DType::kF32, DType::kF16, DType::kBF16}) {
        const int d = 256;
        const float u = p == DType::kF32 ? 0.0f : p == DType::kF16 ? 0x1p-11f : 0x1p-8f;
        const KVCodec codec(kv_affine_spec(bits, g, p), d);
        std::vector<uint8_t> row(codec.key_row_bytes());
        std::vector<float> y(static_cast<size_t>(d));
        for (int trial = 0; trial < 4; ++trial) {
          std::vector<float> x = gaussian_row(rng, d, std::pow(10.0f, float(trial) - 1.0f));
          for (float& v : x) v = round_to(v, p);
          codec.encode_value_row(x.data(), row.data());
          codec.decode_value_row(row.data(), y.data());
          for (int k = 0; k < d / g; ++k) {
            float lo = 0, hi = 0;  // MLX's running max starts at 0; the range includes 0
            for (int j = k * g; j < (k + 1) * g; ++j)
              lo = std::min(lo, x[size_t(j)]), hi = std::max(hi, x[size_t(j)]);
            const float step = (hi - lo) / float((1 << bits) - 1);
            const float top = std::max(std::fabs(lo), std::fabs(hi));
            // |scale| <= step * (1 + 1/(2^bits - 1)) after snapping; |bias| <= top.
            const float scale = step * (1.0f + 1.0f / float((1 << bits) - 1));
            const float bound = scale * (1 + 1e-5f) +
                                u * (1 + u) * (scale * float((1 << bits) - 1) + top) + 1e-6f * top;
            for (int j = k * g; j < (k + 1) * g; ++j)
              ASSERT_LE(std::fabs(y[size_t(j)] - x[size_t(j)]), bound)
                  << codec.name() << " " << dtype_name(p) << " j " << j;
          }
        }
      }
}

TEST(KVCodecTurbo, RowsAreTurboQuantRows) {
  std::mt19937 rng(13);
  for (int d : kTurboHeadDims)
    for (TurboTables set : {TurboTables::kSeed, TurboTables::kGaussian}) {
      const KVCodec codec(kv_turbo_spec(4, 5, set), d);
      const std::vector<float> x = gaussian_row(rng, d);
      std::vector<uint8_t> k(codec.key_row_bytes()), v(codec.value_row_bytes());
      std::vector<uint8_t> k2(k.size()), v2(v.size());
      codec.encode_key_row(x.data(), k.data());
      codec.encode_value_row(x.data(), v.data());
      turbo_encode_key_row(x.data(), d, 4, k2.data());
      turbo_encode_value_row(x.data(), turbo_sign_vector(d), turbo_lloyd_max_table(set, 5),
                             v2.data());
      EXPECT_EQ(k, k2);
      EXPECT_EQ(v, v2);
      std::vector<float> a(static_cast<size_t>(d)), b(static_cast<size_t>(d));
      codec.decode_value_row(v.data(), a.data());
      turbo_decode_value_row_rotated(v.data(), d, turbo_lloyd_max_table(set, 5), b.data());
      turbo_unrotate(b.data(), turbo_sign_vector(d));
      EXPECT_EQ(a, b);
    }
  // The gaussian 8-bit table codes differently from the seed's.
  const std::vector<float> x = gaussian_row(rng, 128);
  const KVCodec seed(kv_turbo_spec(8, 8), 128),
      gauss(kv_turbo_spec(8, 8, TurboTables::kGaussian), 128);
  std::vector<uint8_t> a(seed.value_row_bytes()), b(gauss.value_row_bytes());
  seed.encode_value_row(x.data(), a.data());
  gauss.encode_value_row(x.data(), b.data());
  EXPECT_NE(a, b);
}

TEST(KVCodec, EncodingIsTokenLocalAndStaysInsideItsRow) {
  // Every byte of a row is a function of that row's values alone: encoding into buffers that
  // held anything else gives identical bytes, so blocks can be recycled without clearing. A row
  // never writes outside its bytes and may sit at any address (here odd, between guard bytes).
  std::mt19937 rng(14);
  for (const KVCodecSpec& spec : all_specs()) {
    const int d = spec.kind == KVCodecKind::kAffine ? 128 * 3 : 128;
    const KVCodec codec(spec, d);
    const std::vector<float> x = gaussian_row(rng, d);
    for (bool key : {true, false}) {
      const size_t n = key ? codec.key_row_bytes() : codec.value_row_bytes();
      std::vector<uint8_t> zeros(n + 2, 0x00), ones(n + 2, 0xff);
      const auto encode = key ? &KVCodec::encode_key_row : &KVCodec::encode_value_row;
      (codec.*encode)(x.data(), zeros.data() + 1);
      (codec.*encode)(x.data(), ones.data() + 1);
      EXPECT_TRUE(std::equal(zeros.begin() + 1, zeros.end() - 1, ones.begin() + 1))
          << codec.name() << (key ? " key" : " value");
      EXPECT_EQ(zeros.front(), 0x00);
      EXPECT_EQ(zeros.back(), 0x00);
      EXPECT_EQ(ones.front(), 0xff);
      EXPECT_EQ(ones.back(), 0xff);
      // Decoding the odd-address row equals decoding an aligned copy.
      std::vector<uint8_t> aligned(zeros.begin() + 1, zeros.end() - 1);
      std::vector<float> a(static_cast<size_t>(d)), b(static_cast<size_t>(d));
      if (key) {
        codec.decode_key_row(zeros.data() + 1, a.data());
        codec.decode_key_row(aligned.data(), b.data());
      } else {
        codec.decode_value_row(zeros.data() + 1, a.data());
        codec.decode_value_row(aligned.data(), b.data());
      }
      EXPECT_EQ(a, b) << codec.name();
    }
  }
}

// One query against n tokens: softmax(q.k_i * scale) weighted sum of v_i, read through a codec
// the way an attention kernel does (key rows decoded one at a time, values accumulated in the
// codec's value domain, one inverse transform at the end).
std::vector<float> attend_through_codec(const KVCodec& c, const std::vector<float>& q,
                                        const std::vector<uint8_t>& keys,
                                        const std::vector<uint8_t>& values, int n) {
  const int d = c.head_dim();
  std::vector<float> k(static_cast<size_t>(d)), v(static_cast<size_t>(d)), out(size_t(d), 0.0f),
      w(static_cast<size_t>(n));
  float mx = -INFINITY, sum = 0;
  for (int i = 0; i < n; ++i) {
    c.decode_key_row(keys.data() + size_t(i) * c.key_row_bytes(), k.data());
    float s = 0;
    for (int j = 0; j < d; ++j) s += q[size_t(j)] * k[size_t(j)];
    w[size_t(i)] = s / std::sqrt(float(d));
    mx = std::max(mx, w[size_t(i)]);
  }
  for (int i = 0; i < n; ++i) {
    w[size_t(i)] = std::exp(w[size_t(i)] - mx);
    sum += w[size_t(i)];
    c.decode_value_row_rotated(values.data() + size_t(i) * c.value_row_bytes(), v.data());
    for (int j = 0; j < d; ++j) out[size_t(j)] += w[size_t(i)] * v[size_t(j)];
  }
  c.inverse_value_transform(out.data());
  for (float& o : out) o /= sum;
  return out;
}

TEST(KVCodec, AttentionInTheValueDomainEqualsDequantizedAttention) {
  std::mt19937 rng(15);
  const int n = 29;
  for (const KVCodecSpec& spec : all_specs()) {
    const int d = 128;
    const KVCodec c(spec, d);
    std::vector<uint8_t> keys(size_t(n) * c.key_row_bytes()),
        values(size_t(n) * c.value_row_bytes());
    const std::vector<float> zero_row(static_cast<size_t>(d), 0.0f);
    std::vector<std::vector<float>> kd(static_cast<size_t>(n), zero_row);
    std::vector<std::vector<float>> vd = kd;
    for (int i = 0; i < n; ++i) {
      const std::vector<float> k = gaussian_row(rng, d), v = gaussian_row(rng, d);
      c.encode_key_row(k.data(), keys.data() + size_t(i) * c.key_row_bytes());
      c.encode_value_row(v.data(), values.data() + size_t(i) * c.value_row_bytes());
      c.decode_key_row(keys.data() + size_t(i) * c.key_row_bytes(), kd[size_t(i)].data());
      c.decode_value_row(values.data() + size_t(i) * c.value_row_bytes(), vd[size_t(i)].data());
    }
    const std::vector<float> q = gaussian_row(rng, d);
    // Reference: attention over the fully dequantized rows.
    std::vector<float> w(static_cast<size_t>(n)), ref(size_t(d), 0.0f);
    float mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; ++i) {
      float s = 0;
      for (int j = 0; j < d; ++j) s += q[size_t(j)] * kd[size_t(i)][size_t(j)];
      w[size_t(i)] = s / std::sqrt(float(d));
      mx = std::max(mx, w[size_t(i)]);
    }
    for (int i = 0; i < n; ++i) {
      w[size_t(i)] = std::exp(w[size_t(i)] - mx);
      sum += w[size_t(i)];
      for (int j = 0; j < d; ++j) ref[size_t(j)] += w[size_t(i)] * vd[size_t(i)][size_t(j)];
    }
    const std::vector<float> got = attend_through_codec(c, q, keys, values, n);
    for (int j = 0; j < d; ++j)
      ASSERT_NEAR(got[size_t(j)], ref[size_t(j)] / sum, 2e-5f) << c.name() << " j " << j;
  }
}

}  // namespace
}  // namespace kvlm
