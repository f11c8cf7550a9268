// Kernel benchmarks: the linear kernel on every ISA path and weight format for the three shape
// classes (decode M=1, batched decode M=8, prefill M=128), on the synthetic 0.5B MLP shape
// (4864 x 896), single-threaded, and the int8 path (LinearInt8) on the q4/q8 weights; plus
// RMSNorm and the gated activation. Counters: bytes of weights read per second and FLOP/s.
//
//   bench_kernels --benchmark_filter=Linear
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kvlm/backend/cpu/linear_int8.h"
#include "kvlm/base/half.h"
#include "kvlm/quant/affine.h"

namespace kvlm {
namespace {

constexpr int64_t kOut = 4864, kIn = 896;

struct Weights {
  Tensor dense, packed4, scales4, biases4, packed8, scales8, biases8;
  ops::Weight bf16, q4, q8;
};

Tensor random_f32(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.05f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

const Weights& weights() {
  static const Weights w = [] {
    Weights out;
    const Tensor f = random_f32({kOut, kIn}, 1);
    out.dense = Tensor::empty({kOut, kIn}, DType::kBF16);
    for (int64_t i = 0; i < f.numel(); ++i) out.dense.data<uint16_t>()[i] = f32_to_bf16(f.data<float>()[i]);
    const AffineWeight a4 = affine_quantize(f, {4, 64}, DType::kBF16);
    const AffineWeight a8 = affine_quantize(f, {8, 64}, DType::kBF16);
    out.packed4 = a4.packed, out.scales4 = a4.scales, out.biases4 = a4.biases;
    out.packed8 = a8.packed, out.scales8 = a8.scales, out.biases8 = a8.biases;
    out.bf16 = ops::dense_weight(out.dense);
    out.q4 = ops::affine_weight(out.packed4, out.scales4, out.biases4, {4, 64});
    out.q8 = ops::affine_weight(out.packed8, out.scales8, out.biases8, {8, 64});
    return out;
  }();
  return w;
}

double weight_bytes(const ops::Weight& w) {
  double b = double(w.weight.nbytes());
  if (w.quant) b += double(w.scales.nbytes() + w.biases.nbytes());
  return b;
}

// Args: ISA, format (0 bf16, 1 q4, 2 q8), M.
void Linear(benchmark::State& state) {
  const auto isa = cpu::Isa(state.range(0));
  if (!cpu::isa_supported(isa)) return state.SkipWithError("ISA not supported here");
  const Weights& ws = weights();
  const ops::Weight& w = state.range(1) == 0 ? ws.bf16 : state.range(1) == 1 ? ws.q4 : ws.q8;
  const int64_t M = state.range(2);
  const Tensor x = random_f32({M, kIn}, 2);
  std::vector<float> y(size_t(M * kOut));
  const cpu::LinearRowsFn kernel = cpu::linear_rows_kernel(isa);
  for (auto _ : state) {
    kernel({x.data<float>(), M, &w, 0, kOut, y.data(), kOut});
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(cpu::isa_name(isa)) + (state.range(1) == 0 ? " bf16" : state.range(1) == 1 ? " q4" : " q8"));
  state.counters["weight_GB/s"] = benchmark::Counter(weight_bytes(w) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * M * kOut * kIn * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(Linear)->ArgsProduct({{0, 1, 2}, {0, 1, 2}, {1, 8, 128}})->Unit(benchmark::kMillisecond);

// The int8 path against the same q4 and q8 weights, its activation quantization included (as in
// ops::linear, once per call). Args: ISA, format (1 q4, 2 q8), M.
void LinearInt8(benchmark::State& state) {
  const auto isa = cpu::Isa(state.range(0));
  if (!cpu::isa_supported(isa)) return state.SkipWithError("ISA not supported here");
  ops::Weight w = state.range(1) == 1 ? weights().q4 : weights().q8;
  w.matmul = ops::MatmulPath::kInt8;
  const int64_t M = state.range(2);
  const Tensor x = random_f32({M, kIn}, 2);
  std::vector<float> y(size_t(M * kOut));
  for (auto _ : state) {
    const cpu::LinearKernel kernel(isa, w, x.data<float>(), M);
    kernel({x.data<float>(), M, &w, 0, kOut, y.data(), kOut});
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(cpu::isa_name(isa)) + (state.range(1) == 1 ? " q4 int8" : " q8 int8"));
  state.counters["weight_GB/s"] = benchmark::Counter(weight_bytes(w) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GOP/s"] = benchmark::Counter(2.0 * M * kOut * kIn * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(LinearInt8)->ArgsProduct({{0, 1, 2}, {1, 2}, {1, 8, 128}})->Unit(benchmark::kMillisecond);

// ops::linear (all pool threads) against a bf16 weight larger than the caches, the lm_head of the
// 0.5B shape (32000 x 896, 57 MB): decode reads it from memory. Arg: M.
void LinearFromMemory(benchmark::State& state) {
  static const Tensor w = [] {
    Tensor t = Tensor::empty({32000, kIn}, DType::kBF16);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<uint16_t>()[i] = f32_to_bf16(float(i % 97) * 1e-3f);
    return t;
  }();
  const ops::Weight weight = ops::dense_weight(w);
  const Tensor x = random_f32({state.range(0), kIn}, 6);
  for (auto _ : state) benchmark::DoNotOptimize(ops::linear(x, weight));
  state.counters["weight_GB/s"] = benchmark::Counter(double(w.nbytes()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(LinearFromMemory)->Arg(1)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);

// ops::linear (all pool threads) for a 512-token prefill chunk through the MLP's up projection
// (4864 x 896, arg 0) and down projection (896 x 4864, arg 1), bf16.
void LinearPrefill(benchmark::State& state) {
  const Weights& ws = weights();
  static const Tensor down = [] {
    Tensor t = Tensor::empty({kIn, kOut}, DType::kBF16);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<uint16_t>()[i] = f32_to_bf16(float(i % 89) * 1e-3f);
    return t;
  }();
  const ops::Weight w = state.range(0) == 0 ? ws.bf16 : ops::dense_weight(down);
  const Tensor x = random_f32({512, w.in_features}, 7);
  for (auto _ : state) benchmark::DoNotOptimize(ops::linear(x, w));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * 512 * kOut * kIn * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(LinearPrefill)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void RmsNorm(benchmark::State& state) {
  const Tensor x = random_f32({state.range(0), kIn}, 3);
  Tensor wt = Tensor::empty({kIn}, DType::kBF16);
  for (int64_t i = 0; i < kIn; ++i) wt.data<uint16_t>()[i] = f32_to_bf16(1.0f);
  for (auto _ : state) benchmark::DoNotOptimize(ops::rms_norm(x, wt, 1e-5f));
}
BENCHMARK(RmsNorm)->Arg(1)->Arg(128);

void GatedActivation(benchmark::State& state) {
  const Tensor g = random_f32({state.range(0), kOut}, 4), u = random_f32({state.range(0), kOut}, 5);
  for (auto _ : state) benchmark::DoNotOptimize(ops::gated_activation(g, u, ops::GateActivation::kSiLU));
}
BENCHMARK(GatedActivation)->Arg(1)->Arg(128);

}  // namespace
}  // namespace kvlm

BENCHMARK_MAIN();
