#pragma once
// `kvlm bench`: whole-model throughput measured beside the machine limits that bound it.
//   decode (one sequence)  is bound by read bandwidth: limit = bandwidth / bytes read per token
//   prefill, batched decode are bound by arithmetic:   limit = fp32 FMA peak
// each limit probed right before and right after the phase it bounds. With several rounds the
// phases interleave (prefill, each concurrency, then again) and each is reported from its median
// round: a shared machine's bandwidth can swing within a minute, and one round per phase is a
// coin toss.
// Models are either a checkpoint folder or a synthetic shape written to a temporary folder with
// random weights (the shapes the performance targets are stated for).
#include <cstdint>
#include <string>
#include <vector>

#include "kvlm/base/json.h"
#include "kvlm/kv/kv_quant.h"
#include "kvlm/model/model.h"

namespace kvlm {

struct SyntheticShape {
  const char* name;
  int hidden, layers, heads, kv_heads, intermediate, vocab;
};
// "0.5b" (hidden 896, 24 layers, 14/2 heads, MLP 4864) and "1b" (2048, 16, 32/8, 8192); vocab 32000.
const SyntheticShape& synthetic_shape(const std::string& name);

// Writes a tied-embedding LlamaForCausalLM with random bf16 weights to `dir`; with bits 4 or 8 the
// result is then converted to MLX affine (group 64) in `dir`/q<bits>. Returns the model folder.
std::string write_synthetic_model(const SyntheticShape& shape, const std::string& dir, int bits);

struct BenchOptions {
  std::string model_dir;
  int prompt_tokens = 512;      // prefill measurement
  int decode_context = 128;     // tokens in the KV cache before decode steps are timed
  int decode_tokens = 32;       // timed decode steps per concurrency level
  std::vector<int> concurrency = {1, 8, 16};
  int prefill_chunk = 512;
  bool probes = true;
  bool profile = false;         // time per op kind per step (ops::ProfileScope)
  int repeat = 1;               // rounds of every phase, interleaved; the median round is reported
  KVQuantOptions kv_quant;  // --kv-quant etc.
  ops::MatmulPath matmul = ModelLoadOptions().matmul;  // --matmul
  bool panel_weights = ModelLoadOptions().panel_weights;  // --weight-layout
};

// Throws an Error naming the flag of the first option out of range (counts below 1, a negative
// context, no concurrency level).
void check_bench_options(const BenchOptions& opts);

// Runs the measurements (after check_bench_options); returns them as JSON and prints a table to
// stdout as it goes: with repeat > 1 every round's lines, then each phase's median round.
Json run_bench(const BenchOptions& opts);

}  // namespace kvlm
