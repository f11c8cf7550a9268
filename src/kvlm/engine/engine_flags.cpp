#include "kvlm/engine/engine_flags.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "kvlm/base/error.h"

namespace kvlm {
namespace {

// Binary multiple of a size suffix ("", "K", "M", "G", "T", optionally followed by "B" or "iB"),
// or 0 when the suffix is not one.
int64_t size_multiplier(std::string suffix) {
  for (char& c : suffix) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.ends_with("IB")) suffix.resize(suffix.size() - 2);
  else if (suffix.ends_with("B")) suffix.resize(suffix.size() - 1);
  if (suffix.empty()) return 1;
  if (suffix.size() != 1) return 0;
  switch (suffix[0]) {
    case 'K': return int64_t(1) << 10;
    case 'M': return int64_t(1) << 20;
    case 'G': return int64_t(1) << 30;
    case 'T': return int64_t(1) << 40;
    default: return 0;
  }
}

// A CLI11 option that parses a byte size into `target`.
void add_size_option(CLI::App& app, const std::string& name, int64_t& target,
                     const std::string& help) {
  app.add_option_function<std::string>(
         name,
         [&target, name](const std::string& text) {
           try {
             target = parse_byte_size(text);
           } catch (const Error& e) {
             throw CLI::ValidationError(name, e.what());
           }
         },
         help)
      ->type_name("SIZE");
}

}  // namespace

int64_t parse_byte_size(std::string_view text) {
  const std::string bad = "'" + std::string(text) +
                          "' is not a size (a byte count, or a number with K, M, G or T)";
  double value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [rest, ec] = std::from_chars(begin, end, value);
  check(ec == std::errc() && rest != begin && std::isfinite(value) && value >= 0, bad);
  const int64_t mult = size_multiplier(std::string(rest, end));
  check(mult != 0, bad);
  const double bytes = value * double(mult);
  check(bytes < 9.0e18, bad);
  return int64_t(bytes);
}

void add_engine_options(CLI::App& app, EngineOptions& engine, ModelLoadOptions& load) {
  app.add_option("--max-batch,--batch,--decode-concurrency", engine.max_batch,
                 "Most sequences running at once")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--prefill-chunk", engine.prefill_chunk,
                 "Most prompt tokens of one sequence per step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--token-budget", engine.token_budget,
                 "Most new tokens per step, decodes and prefill chunks together (>= --max-batch)")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  add_size_option(app, "--kv-budget", load.kv_budget_bytes,
                  "KV cache pool size, e.g. 512M or 2G (default: one full-context sequence)");
  add_size_option(app, "--prompt-cache-bytes", engine.prompt_cache_bytes,
                  "Prefix cache budget, e.g. 256M; 0 = off (default: a quarter of the KV pool)");
  add_kv_quant_options(app, load.kv_quant);
  add_matmul_option(app, load.matmul);
  add_weight_layout_option(app, load.panel_weights);
}

void add_weight_layout_option(CLI::App& app, bool& panel_weights) {
  app.add_option_function<std::string>(
         "--weight-layout",
         [&panel_weights](const std::string& v) {
           if (v != "panels" && v != "rows")
             throw CLI::ValidationError("--weight-layout", "unknown value '" + v + "' (expected panels or rows)");
           panel_weights = v == "panels";
         },
         "Dense weights in memory: panels (copied at load into panels of 32 rows stored input by "
         "input, the order the kernels read) or rows (the checkpoint's order, mapped without a copy; "
         "each call packs the panels it reads; the same results)")
      ->default_str(panel_weights ? "panels" : "rows");
}

std::optional<ops::MatmulPath> parse_matmul_path(const std::string& text) {
  if (text == "exact") return ops::MatmulPath::kExact;
  if (text == "int8") return ops::MatmulPath::kInt8;
  return std::nullopt;
}

const char* matmul_path_name(ops::MatmulPath path) {
  return path == ops::MatmulPath::kInt8 ? "int8" : "exact";
}

CLI::Option* add_matmul_option(CLI::App& app, ops::MatmulPath& matmul, const std::string& flag,
                               const std::string& help) {
  return app
      .add_option_function<std::string>(
          flag,
          [&matmul, flag](const std::string& v) {
            const std::optional<ops::MatmulPath> path = parse_matmul_path(v);
            if (!path) throw CLI::ValidationError(flag, "unknown value '" + v + "' (expected exact or int8)");
            matmul = *path;
          },
          help.empty() ? "Products with quantized operands: int8 (int8 activations against MLX affine "
                         "4/8-bit weights, int8 queries against 4/8-bit compressed keys, fused value sums) "
                         "or exact (dequantized f32)"
                       : help)
      ->default_str(matmul_path_name(matmul));
}

void add_kv_quant_options(CLI::App& app, KVQuantOptions& kv) {
  app.add_option("--kv-quant", kv.quant,
                 "KV cache codec: off (exact f32 cache), f32, f16, bf16, 2|3|4|5|6|8 (MLX affine), "
                 "config (per-layer kv_config.json), turbo[:k<bits>v<bits>][:gaussian] "
                 "(TurboQuant, default k8v3)")
      ->capture_default_str();
  app.add_option("--kv-group-size", kv.group_size,
                 "Values per scale for MLX affine KV: 32, 64 or 128 (default 64); TurboQuant: 32")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-config", kv.config_file,
                 "kv_config.json for --kv-quant config: [{\"layer_idx\", \"bits\", "
                 "\"group_size\"}, ...] (default: the model folder's)");
}

}  // namespace kvlm
