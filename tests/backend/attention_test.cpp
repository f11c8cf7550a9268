// Attention over paged codec rows: the chunked kernel against the plain reference for every
// codec, the AVX2 row operations against the portable ones bit for bit, and the invariances the
// engine relies on (thread count, queries alone or together).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string_view>

#include "int8_test_util.h"
#include "kvlm/backend/cpu/attention_codes.h"
#include "kvlm/backend/cpu/attention_kernels.h"
#include "kvlm/base/cpu_isa.h"
#include "kvlm/backend/ops.h"
#include "kvlm/base/error.h"
#include "kvlm/base/thread_pool.h"

namespace kvlm::ops {
namespace {

std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

std::vector<KVCodecSpec> every_codec() {
  std::vector<KVCodecSpec> specs = {kv_passthrough_spec(DType::kF32),
                                    kv_passthrough_spec(DType::kF16),
                                    kv_passthrough_spec(DType::kBF16)};
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int g : {32, 64}) specs.push_back(kv_affine_spec(bits, g, DType::kBF16));
  specs.push_back(kv_affine_spec(4, 64, DType::kF16));
  specs.push_back(kv_affine_spec(8, 32, DType::kF32));
  for (int k : {2, 4, 5, 8})
    for (int v : {2, 3, 4, 5, 8}) specs.push_back(kv_turbo_spec(k, v));
  specs.push_back(kv_turbo_spec(8, 8, TurboTables::kGaussian));
  return specs;
}

bool is_passthrough(const KVCodecSpec& s) {
  return s.kind == KVCodecKind::kF32 || s.kind == KVCodecKind::kF16 || s.kind == KVCodecKind::kBF16;
}

// A layer's paged storage holding `tokens` random K/V rows, written through the codec in two
// chunks, over a shuffled block table.
struct PagedFixture {
  int64_t block_size, kv_heads, dim;
  KVCodec codec;
  Tensor keys, values_;
  std::vector<int32_t> table;
  std::vector<float> k, v;  // [tokens, kv_heads, dim] as written

  PagedFixture(const KVCodecSpec& spec, int64_t tokens, int64_t dim_ = 64, int64_t kv_heads_ = 2,
               int64_t block_size_ = 16)
      : block_size(block_size_), kv_heads(kv_heads_), dim(dim_), codec(spec, int(dim_)) {
    const int64_t blocks = (tokens + block_size - 1) / block_size + 1;
    keys = Tensor::zeros({kv_heads, blocks, block_size, int64_t(codec.key_row_bytes())}, DType::kU8);
    values_ = Tensor::zeros({kv_heads, blocks, block_size, int64_t(codec.value_row_bytes())}, DType::kU8);
    for (int64_t b = blocks - 1; b >= 1; --b) table.push_back(int32_t(b));  // out of order
    k = random_values(size_t(tokens * kv_heads * dim), 7);
    v = random_values(size_t(tokens * kv_heads * dim), 8);
    const int64_t first = tokens / 3;  // two writes, the split inside a block
    write(0, first);
    write(first, tokens);
  }
  PagedKV view() const { return {keys, values_, &codec, table}; }
  void write(int64_t b, int64_t e) {
    const int64_t row = kv_heads * dim;
    const Tensor kt = Tensor::from_f32({k.begin() + b * row, k.begin() + e * row}, {e - b, kv_heads, dim});
    const Tensor vt = Tensor::from_f32({v.begin() + b * row, v.begin() + e * row}, {e - b, kv_heads, dim});
    kv_write(kt, vt, view(), b);
  }
};

Tensor random_queries(int64_t n, int64_t heads, int64_t dim, unsigned seed) {
  return Tensor::from_f32(random_values(size_t(n * heads * dim), seed), {n, heads, dim});
}

// softmax(q·k * scale) · v in double over keys [first, pos], from the values as written.
std::vector<double> naive_attention(const PagedFixture& f, const std::vector<float>& q, int64_t heads,
                                    int64_t n_past, int64_t n, float scale, int64_t window) {
  const int64_t H = heads, D = f.dim, Hkv = f.kv_heads;
  std::vector<double> out(size_t(n * H * D), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t pos = n_past + i, kvh = h / (H / Hkv);
      const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      std::vector<double> s;
      double m = -1e300, sum = 0;
      for (int64_t j = first; j <= pos; ++j) {
        double d = 0;
        for (int64_t c = 0; c < D; ++c) d += double(q[size_t((i * H + h) * D + c)]) * f.k[size_t((j * Hkv + kvh) * D + c)];
        s.push_back(d * scale);
        m = std::max(m, s.back());
      }
      for (double& x : s) sum += (x = std::exp(x - m));
      for (int64_t j = first; j <= pos; ++j)
        for (int64_t c = 0; c < D; ++c)
          out[size_t((i * H + h) * D + c)] += s[size_t(j - first)] / sum * f.v[size_t((j * Hkv + kvh) * D + c)];
    }
  return out;
}

TEST(Attention, F32MatchesNaiveAttentionOverShuffledBlocks) {
  const PagedFixture f(kv_passthrough_spec(DType::kF32), 10, 8, 2, 4);
  const int64_t n_past = 7, n = 3, heads = 4;
  const Tensor q = random_queries(n, heads, 8, 9);
  for (int64_t window : {0, 4}) {
    const std::vector<float> got = attention(q, f.view(), n_past, {0.35f, window}).to_f32_vector();
    const std::vector<double> want = naive_attention(f, q.to_f32_vector(), heads, n_past, n, 0.35f, window);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << window << " " << i;
  }
}

// The stated exactness of the compressed path: |attention - reference| <= kTolerance * max|v|,
// where the reference decodes every row (values fully mapped back) and runs one softmax. The two
// differ only by f32 rounding: the chunk merge past 256 keys, and TurboQuant's accumulation in
// the rotated domain. Passthrough codecs within one chunk use the same arithmetic: equal bits.
constexpr double kTolerance = 2e-6;

TEST(Attention, EveryCodecEqualsDecodeThenReference) {
  const int64_t heads = 8;  // GQA group of 4
  for (const KVCodecSpec& spec : every_codec()) {
    const PagedFixture f(spec, 600);
    struct Case { int64_t n_past, n, window; };
    // single-token decode, a prefill chunk, several chunks, a window crossing chunk boundaries
    for (const Case c : {Case{0, 1, 0}, Case{16, 1, 0}, Case{100, 17, 0}, Case{590, 10, 0},
                         Case{599, 1, 300}}) {
      const Tensor q = random_queries(c.n, heads, f.dim, unsigned(c.n_past + 11));
      const Tensor got = attention(q, f.view(), c.n_past, {0.125f, c.window});
      const Tensor want = cpu::attention_reference(q, f.view(), c.n_past, {0.125f, c.window});
      const bool one_chunk = c.n_past + c.n <= kAttentionChunk || (c.window > 0 && c.window <= kAttentionChunk);
      if (is_passthrough(spec) && one_chunk) {
        EXPECT_TRUE(same_bits(got, want)) << kv_codec_name(spec) << " n_past " << c.n_past;
        continue;
      }
      const std::vector<float> g = got.to_f32_vector(), w = want.to_f32_vector();
      double max_v = 0, worst = 0;
      for (float x : f.v) max_v = std::max(max_v, double(std::fabs(x)));
      for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(double(g[i]) - w[i]));
      EXPECT_LE(worst, kTolerance * max_v) << kv_codec_name(spec) << " n_past " << c.n_past;
    }
  }
}

// attention_chunk finds a chunk's rows with KVRows::addresses, page by page: every position's
// address must be key(pos) / value(pos), across pages of an odd size and a shuffled table.
TEST(Attention, RowAddressesAreEachPositionsSlot) {
  const PagedFixture f(kv_passthrough_spec(DType::kBF16), 40, 64, 3, 5);
  for (int64_t head = 0; head < 3; ++head) {
    const cpu::KVRows rows = cpu::kv_rows(f.view(), head);
    for (int64_t begin : {0, 3, 5, 9}) {
      const int64_t n = 40 - begin;
      std::vector<const uint8_t*> keys(static_cast<size_t>(n)), values(static_cast<size_t>(n));
      rows.addresses(begin, n, keys.data(), values.data());
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_EQ(keys[size_t(j)], rows.key(begin + j)) << "head " << head << " position " << begin + j;
        EXPECT_EQ(values[size_t(j)], rows.value(begin + j)) << "head " << head << " position " << begin + j;
      }
    }
  }
}

TEST(Attention, AVX2RowOpsEqualPortableBitForBit) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no AVX2";
  for (int64_t dim : {64, 128}) {
    for (const KVCodecSpec& spec : every_codec()) {
      const PagedFixture f(spec, 300, dim);
      const cpu::AttentionRowOps portable = cpu::attention_row_ops_portable(f.codec);
      const cpu::AttentionRowOps avx2 = cpu::attention_row_ops_avx2(f.codec);
      const Tensor q = random_queries(1, 8, dim, 5);
      const int group = 4;
      std::vector<float> scratch;
      std::vector<float> a(size_t(group * (dim + 2))), b(a.size());
      const cpu::KVRows rows = cpu::kv_rows(f.view(), 1);
      for (auto [ops, out] : {std::pair{portable, a.data()}, std::pair{avx2, b.data()}})
        cpu::attention_chunk(ops, f.codec, rows, q.data<float>() + 4 * dim, group, 0.125f, 3, 259,
                             {out + 2 * group, out, out + group}, scratch);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
          << kv_codec_name(spec) << " dim " << dim;
    }
  }
}

TEST(Attention, ResultDoesNotDependOnThreadsOrOnQueriesRunningTogether) {
  const int64_t heads = 8, n_past = 500, n = 20;
  for (const KVCodecSpec& spec : {kv_passthrough_spec(DType::kF32), kv_affine_spec(4, 64, DType::kBF16),
                                  kv_turbo_spec(8, 3), kv_turbo_spec(4, 2)}) {
    const PagedFixture f(spec, n_past + n);
    const Tensor q = random_queries(n, heads, f.dim, 3);
    for (const MatmulPath path : {MatmulPath::kExact, MatmulPath::kInt8}) {
      const AttentionParams p = {0.125f, 0, path};
      ThreadPool one(1), three(3);
      set_thread_pool(&one);
      const Tensor together1 = attention(q, f.view(), n_past, p);
      set_thread_pool(&three);
      const Tensor together3 = attention(q, f.view(), n_past, p);
      EXPECT_TRUE(same_bits(together1, together3)) << kv_codec_name(spec);
      for (int64_t i : {0, 11, 19}) {  // 511 keys: two chunks; 512 and more: three
        const Tensor alone = attention(q.slice(0, i, i + 1), f.view(), n_past + i, p);
        EXPECT_EQ(std::memcmp(alone.raw(), together3.slice(0, i, i + 1).raw(), alone.nbytes()), 0)
            << kv_codec_name(spec) << " " << i;
      }
      set_thread_pool(nullptr);
    }
  }
}

TEST(Attention, ErrorsNameTheProblem) {
  const PagedFixture f(kv_turbo_spec(8, 3), 10, 64, 2, 4);
  const Tensor q = Tensor::zeros({3, 4, 64}, DType::kF32);
  try {
    attention(q, f.view(), 10, {1.0f, 0});  // 13 tokens > 3 blocks of 4
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "attention: block table of 3 blocks cannot hold 13 tokens");
  }
  PagedKV wrong = f.view();
  const KVCodec other(kv_turbo_spec(4, 3), 64);
  wrong.codec = &other;
  try {
    attention(q, wrong, 0, {1.0f, 0});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "attention: key and value caches must be u8 [kv_heads, blocks, block_size, row bytes] "
              "tensors with the row sizes of codec turbo:k4v3, got u8[2, 4, 4, 72] cpu and u8[2, 4, 4, 28] cpu");
  }
}

}  // namespace
}  // namespace kvlm::ops

namespace kvlm::ops {
namespace {

// Every operation set this CPU can run, portable first.
std::vector<std::pair<const char*, cpu::AttentionRowOps>> runnable_row_ops(const KVCodec& codec) {
  std::vector<std::pair<const char*, cpu::AttentionRowOps>> ops = {
      {"portable", cpu::attention_row_ops_portable(codec)}};
  if (cpu::isa_supported(cpu::Isa::kAvx2)) ops.push_back({"avx2", cpu::attention_row_ops_avx2(codec)});
  if (cpu::isa_supported(cpu::Isa::kAvx512)) ops.push_back({"avx512", cpu::attention_row_ops_avx512(codec)});
  return ops;
}

// The block kernels (scores of 16 keys folded together, value accumulators held across a block)
// against the portable ones, for chunk lengths that end mid-block, GQA groups 1, 4 and 7 and
// head dims 64 and 128: every ISA gives the portable bits.
TEST(Attention, BlockKernelsOfEveryIsaEqualPortableBitForBit) {
  for (int64_t dim : {64, 128})
    for (const KVCodecSpec& spec : every_codec()) {
      const PagedFixture f(spec, 300, dim);
      const cpu::KVRows rows = cpu::kv_rows(f.view(), 1);
      for (int group : {1, 4, 7})
        for (int64_t n : {1, 15, 17, 100, 256}) {
          const Tensor q = random_queries(1, group, dim, unsigned(n + group));
          std::vector<float> scratch, want;
          for (const auto& [name, ops] : runnable_row_ops(f.codec)) {
            std::vector<float> got(size_t(group) * size_t(dim + 2));
            float* out = got.data();
            cpu::attention_chunk(ops, f.codec, rows, q.data<float>(), group, 0.125f, 3, 3 + n,
                                 {out + 2 * group, out, out + group}, scratch);
            if (want.empty()) want = got;
            EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
                << name << " " << kv_codec_name(spec) << " dim " << dim << " group " << group << " n " << n;
          }
        }
    }
}

// A tile of queries sharing a chunk gives each query exactly its result alone, for queries that
// end at different keys (the shorter ones stop mid-block).
// The int8 path (cpu/attention_codes.h) on every ISA's row operations equals the portable ones
// bit for bit: the fused value accumulation, and the int8 key scores (the portable scoring kernel
// with the portable operations, the ISA's kernel with the others).
TEST(Attention, CodePathOfEveryIsaEqualsPortableBitForBit) {
  for (int64_t dim : {64, 128})
    for (const KVCodecSpec& spec : every_codec()) {
      const PagedFixture f(spec, 300, dim);
      const auto path = cpu::code_path(f.codec);
      if (!path) continue;
      const cpu::KVRows rows = cpu::kv_rows(f.view(), 1);
      for (int group : {1, 7})
        for (int64_t n : {1, 17, 256}) {
          const Tensor q = random_queries(1, group, dim, unsigned(n + group));
          cpu::QueryCodes codes;
          if (path->key) codes = cpu::quantize_query_codes(*path->key, q.data<float>(), group);
          std::vector<float> scratch, want;
          for (const auto& [name, ops] : runnable_row_ops(f.codec)) {
            cpu::CodePath isa_path = *path;
            const std::string_view label = name;
            const cpu::Isa isa = label == "portable" ? cpu::Isa::kPortable
                                 : label == "avx2"   ? cpu::Isa::kAvx2
                                                     : cpu::Isa::kAvx512;
            if (path->key) isa_path.kernels = cpu::key_code_kernels(isa);
            std::vector<float> got(size_t(group) * size_t(dim + 2));
            float* out = got.data();
            const cpu::ChunkQuery one = {q.data<float>(), 3 + n, {out + 2 * group, out, out + group}, &codes, 0};
            cpu::attention_chunk(ops, f.codec, rows, group, 0.125f, 3, {&one, 1}, scratch, &isa_path);
            if (want.empty()) want = got;
            EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
                << name << " " << kv_codec_name(spec) << " dim " << dim << " group " << group << " n " << n;
          }
        }
    }
}

// The int8 path's stated tolerances against decode-then-reference: fused values differ by f32
// rounding only (the decode path's kTolerance * max|v|); int8 key scores move the softmax weights
// by at most exp(2 delta) for a score error delta (the bound in attention_codes.h), measured at
// 4e-4 to 5e-4 * max|v| on these N(0,1) rows and held to kInt8KeyTolerance * max|v|.
constexpr double kCodeValueTolerance = kTolerance, kInt8KeyTolerance = 2e-3;

TEST(Attention, CodePathStaysWithinItsToleranceOfTheReference) {
  const int64_t heads = 8;
  for (const KVCodecSpec& spec : every_codec()) {
    const PagedFixture f(spec, 600);
    const auto path = cpu::code_path(f.codec);
    if (!path) continue;
    double max_v = 0;
    for (float x : f.v) max_v = std::max(max_v, double(std::fabs(x)));
    for (const int64_t n_past : {int64_t(16), int64_t(590)}) {
      const Tensor q = random_queries(4, heads, f.dim, unsigned(n_past + 3));
      const AttentionParams p = {0.125f, 0, MatmulPath::kInt8};
      const std::vector<float> g = attention(q, f.view(), n_past, p).to_f32_vector();
      const std::vector<float> w = cpu::attention_reference(q, f.view(), n_past, p).to_f32_vector();
      double worst = 0;
      for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(double(g[i]) - w[i]));
      EXPECT_LE(worst, (path->key ? kInt8KeyTolerance : kCodeValueTolerance) * max_v)
          << kv_codec_name(spec) << " n_past " << n_past;
    }
  }
}

TEST(Attention, TiledChunkEqualsEachQueryAlone) {
  const PagedFixture f(kv_affine_spec(4, 64, DType::kBF16), 300);
  const cpu::KVRows rows = cpu::kv_rows(f.view(), 0);
  const int group = 7, d = int(f.dim);
  const std::vector<int64_t> ends = {21, 40, 41, 250};
  const Tensor q = random_queries(int64_t(ends.size()), group, d, 4);
  const size_t per = size_t(group) * size_t(d + 2);
  std::vector<float> tiled(ends.size() * per), alone(ends.size() * per), scratch;
  std::vector<cpu::ChunkQuery> queries;
  for (size_t t = 0; t < ends.size(); ++t) {
    float* out = tiled.data() + t * per;
    queries.push_back({q.data<float>() + t * size_t(group * d), ends[t], {out + 2 * group, out, out + group}});
  }
  const cpu::AttentionRowOps ops = cpu::attention_row_ops(f.codec);
  cpu::attention_chunk(ops, f.codec, rows, group, 0.125f, 5, queries, scratch);
  for (size_t t = 0; t < ends.size(); ++t) {
    float* out = alone.data() + t * per;
    cpu::attention_chunk(ops, f.codec, rows, q.data<float>() + t * size_t(group * d), group, 0.125f, 5,
                         ends[t], {out + 2 * group, out, out + group}, scratch);
  }
  EXPECT_EQ(std::memcmp(tiled.data(), alone.data(), tiled.size() * sizeof(float)), 0);
}

// Prefill runs query tiles; each token's row must equal decoding that token alone, with and
// without a sliding window, over several chunks, for GQA groups 1, 4 and 7 and head dims 64/128.
TEST(Attention, TiledPrefillEqualsTokenByTokenDecode) {
  struct Case { KVCodecSpec spec; int64_t dim, group, window; };
  const std::vector<Case> cases = {{kv_passthrough_spec(DType::kF32), 64, 4, 0},
                                   {kv_passthrough_spec(DType::kBF16), 128, 1, 0},
                                   {kv_affine_spec(4, 64, DType::kBF16), 64, 7, 0},
                                   {kv_affine_spec(8, 32, DType::kBF16), 64, 7, 300},
                                   {kv_turbo_spec(8, 3), 128, 4, 0},
                                   {kv_turbo_spec(4, 2), 64, 7, 100}};
  for (const auto& [c, path] : {std::pair{cases[0], MatmulPath::kExact}, {cases[1], MatmulPath::kExact},
                                {cases[2], MatmulPath::kExact}, {cases[2], MatmulPath::kInt8},
                                {cases[3], MatmulPath::kInt8}, {cases[4], MatmulPath::kExact},
                                {cases[4], MatmulPath::kInt8}, {cases[5], MatmulPath::kInt8}}) {
    const int64_t tokens = 560;
    const PagedFixture f(c.spec, tokens, c.dim);
    const int64_t heads = c.group * f.kv_heads;
    const Tensor q = random_queries(tokens, heads, c.dim, 12);
    const AttentionParams p = {0.125f, c.window, path};
    const Tensor all = attention(q, f.view(), 0, p);
    const Tensor part = attention(q.slice(0, 250, 530), f.view(), 250, p);  // a prefill chunk
    for (int64_t i = 0; i < tokens; ++i) {
      const Tensor one = attention(q.slice(0, i, i + 1), f.view(), i, p);
      ASSERT_EQ(std::memcmp(one.raw(), all.slice(0, i, i + 1).raw(), one.nbytes()), 0)
          << kv_codec_name(c.spec) << " window " << c.window << " token " << i;
      if (i >= 250 && i < 530) {
        ASSERT_EQ(std::memcmp(one.raw(), part.slice(0, i - 250, i - 249).raw(), one.nbytes()), 0)
            << kv_codec_name(c.spec) << " window " << c.window << " chunked token " << i;
      }
    }
  }
}

// One attention_batch call over sequences of different lengths, positions and codecs equals
// the per-sequence calls row for row, whatever the thread count.
TEST(Attention, BatchEqualsPerSequenceCalls) {
  const PagedFixture a(kv_turbo_spec(8, 3), 700), b(kv_passthrough_spec(DType::kBF16), 40),
      c(kv_affine_spec(4, 64, DType::kBF16), 300);
  struct Part { const PagedFixture* f; int64_t n_past, n; };
  const std::vector<Part> parts = {{&a, 699, 1}, {&b, 0, 40}, {&c, 250, 50}, {&a, 500, 3}};
  const int64_t heads = 8;
  std::vector<AttentionSequence> seqs;
  for (size_t i = 0; i < parts.size(); ++i)
    seqs.push_back({random_queries(parts[i].n, heads, 64, unsigned(20 + i)), parts[i].f->view(), parts[i].n_past});
  ThreadPool one(1), three(3);
  for (ThreadPool* pool : {&one, &three}) {
    set_thread_pool(pool);
    for (const auto& [window, path] : {std::pair{int64_t(0), MatmulPath::kExact}, {int64_t(100), MatmulPath::kExact},
                                       {int64_t(0), MatmulPath::kInt8}, {int64_t(100), MatmulPath::kInt8}}) {
      const AttentionParams p = {0.125f, window, path};
      const Tensor batch = attention_batch(seqs, p);
      int64_t row = 0;
      for (const AttentionSequence& s : seqs) {
        const Tensor alone = attention(s.q, s.kv, s.n_past, p);
        EXPECT_EQ(std::memcmp(alone.raw(), batch.slice(0, row, row + s.q.dim(0)).raw(), alone.nbytes()), 0)
            << "row " << row << " window " << window;
        row += s.q.dim(0);
      }
      EXPECT_EQ(row, batch.dim(0));
    }
  }
  set_thread_pool(nullptr);
}

// attention_batch quantizes its rows for an int8 output projection in the round that finishes
// them: the task round in decode of short contexts, the merge round for rows of several chunks or
// of a codec that rotates values. Query heads of a kv head that split a group get none.
TEST(Attention, BatchQuantizesItsRowsForTheOutputProjection) {
  const PagedFixture exact(kv_passthrough_spec(DType::kBF16), 700), rotating(kv_turbo_spec(8, 3), 40);
  const int64_t heads = 8, D = 64;
  const cpu::QuantWeight o = cpu::quantized(24, heads * D, 4, 64, DType::kBF16, 51);
  struct Case { const PagedFixture* f; int64_t n_past, n; const char* what; };
  for (const Case& c : {Case{&exact, 100, 3, "one chunk"}, Case{&exact, 600, 5, "several chunks"},
                        Case{&rotating, 30, 2, "rotated values"}})
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      set_thread_pool(&pool);
      const AttentionSequence seqs[] = {{random_queries(c.n, heads, D, 52), c.f->view(), c.n_past},
                                        {random_queries(1, heads, D, 53), c.f->view(), c.n_past / 2}};
      QuantizedInput acts;
      const Tensor out = attention_batch(seqs, {0.125f, 0}, &o.w, &acts);
      const Tensor plain = attention_batch(seqs, {0.125f, 0});
      EXPECT_TRUE(same_bits(out, plain)) << c.what;
      cpu::expect_quantized_for(out, acts, o.w, std::string(c.what) + " threads " + std::to_string(threads));
      set_thread_pool(nullptr);
    }
  const cpu::QuantWeight g128 = cpu::quantized(24, heads * D, 4, 128, DType::kBF16, 54);
  const PagedFixture eight_heads(kv_passthrough_spec(DType::kBF16), 40, D, 8);  // 64 columns each
  const AttentionSequence seq[] = {{random_queries(1, heads, D, 55), eight_heads.view(), 20}};
  QuantizedInput acts;
  attention_batch(seq, {0.125f, 0}, &g128.w, &acts);
  EXPECT_FALSE(acts);
}

TEST(Attention, BatchRefusesSequencesOfDifferentShapes) {
  const PagedFixture a(kv_passthrough_spec(DType::kBF16), 20), b(kv_passthrough_spec(DType::kBF16), 20);
  const std::vector<AttentionSequence> seqs = {{random_queries(2, 8, 64, 1), a.view(), 10},
                                               {random_queries(2, 4, 64, 2), b.view(), 10}};
  try {
    attention_batch(seqs, {0.125f, 0});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "attention: the batch's sequences differ in heads or head_dim: f32[2, 4, 64] cpu and f32[2, 8, 64] cpu");
  }
}

}  // namespace
}  // namespace kvlm::ops
