// kvlm convert SRC DST: writes an MLX-format affine-quantized copy of a float checkpoint.
#include <chrono>
#include <cstdio>

#include "kvlm/base/thread_pool.h"
#include "kvlm/cli/command.h"
#include "kvlm/cli/model_args.h"
#include "kvlm/io/convert.h"

namespace kvlm::cli {
namespace {

constexpr const char* kHelp =
    "Quantize a float safetensors checkpoint (Hugging Face or MLX layout) into an MLX-format "
    "checkpoint that mlx-lm and kvlm load, as `mlx_lm.convert -q` does.\n\n"
    "Every 2-D weight of a Linear or Embedding module (attention and MLP projections, lm_head, "
    "embed_tokens) becomes <module>.weight (packed uint32, [out, in*bits/32]), <module>.scales and "
    "<module>.biases ([out, in/group_size], in the model dtype), using MLX's affine rule. Norms, "
    "biases and other tensors stay float, cast to the model dtype. A module whose input dimension "
    "is not a multiple of --q-group-size stays float and is marked false in the quantization map. "
    "config.json gains \"quantization\" and \"quantization_config\" blocks; tokenizer files, "
    "generation_config.json and chat templates are copied. DST must not exist or be empty; an "
    "already-quantized SRC is refused.";

struct Options {
  std::string src, dst, dtype;
  int bits = 4, group_size = 64;
  ThreadOptions threads;
  double shard_gb = 5.0;
};

int run(const Options& o) {
  ThreadPool::configure_global(o.threads);
  ConvertOptions opt;
  opt.src_dir = o.src;
  opt.dst_dir = o.dst;
  opt.spec = {o.bits, o.group_size};
  if (!o.dtype.empty()) {
    DType d;
    dtype_from_name(o.dtype, &d);  // CLI11 has already limited the spelling
    opt.dtype = d;
  }
  opt.max_shard_bytes = size_t(o.shard_gb * double(1u << 30));
  const auto t0 = std::chrono::steady_clock::now();
  const ConvertReport r =
      convert_checkpoint(opt, [](const std::string& line) { std::printf("%s\n", line.c_str()); });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "quantized %d modules to %d-bit (group %d), kept %d tensors in %s (%d left float because "
      "their input dim does not divide by the group)\n",
      r.quantized, o.bits, o.group_size, r.kept_float, dtype_name(r.dtype), r.skipped);
  std::printf("%.1f MB -> %.1f MB in %d file(s), %.1f s: %s\n", double(r.bytes_in) / 1e6,
              double(r.bytes_out) / 1e6, r.shards, secs, o.dst.c_str());
  return 0;
}

Runner setup(CLI::App& sub) {
  auto o = std::make_shared<Options>();
  sub.description(kHelp);
  sub.add_option("src", o->src, "Float checkpoint folder (config.json + safetensors)")->required();
  sub.add_option("dst", o->dst, "Output folder (created; must not exist or be empty)")->required();
  sub.add_option("--q-bits", o->bits, "Bits per weight")
      ->check(CLI::IsMember({2, 3, 4, 5, 6, 8}))
      ->capture_default_str();
  sub.add_option("--q-group-size", o->group_size, "Weights per scale/bias group")
      ->check(CLI::IsMember({32, 64, 128}))
      ->capture_default_str();
  sub.add_option("--dtype", o->dtype,
                 "Model dtype for float tensors, scales and biases (default: config torch_dtype)")
      ->check(CLI::IsMember({"bf16", "f16", "f32"}));
  sub.add_option("--max-shard-gb", o->shard_gb, "Largest output file, in GiB")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_threads_option(sub, o->threads);
  return [o] { return run(*o); };
}

const Registration reg{"convert", "Quantize a checkpoint to MLX affine format (mlx-lm compatible)",
                       setup};

}  // namespace
}  // namespace kvlm::cli
