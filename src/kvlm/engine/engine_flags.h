#pragma once
// The engine's command-line flags, shared by `kvlm serve` and `kvlm bench` so both spell them the
// same way: --max-batch (aliases --batch, --decode-concurrency), --prefill-chunk, --token-budget,
// --kv-budget (bytes, or sizes like 512M / 2G), --prompt-cache-bytes (the same size syntax) and
// the KV codec flags of add_kv_quant_options and --matmul.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "kvlm/engine/engine.h"
#include "kvlm/model/model.h"

namespace kvlm {

void add_engine_options(CLI::App& app, EngineOptions& engine, ModelLoadOptions& load);

// --kv-quant off|f32|f16|bf16|2|3|4|5|6|8|config|turbo[:k<bits>v<bits>][:gaussian],
// --kv-group-size and --kv-config: the one definition every verb that loads a model uses
// (serve and bench through add_engine_options or directly, generate, perplexity, kv-eval).
// Values are checked when the model loads (the codec needs the model's dtype and head_dim).
void add_kv_quant_options(CLI::App& app, KVQuantOptions& kv);

// --matmul exact|int8: ModelLoadOptions::matmul, for every verb that loads a model (serve and
// bench through add_engine_options or directly, generate, perplexity, kv-eval); `flag` and `help`
// name another option of the same values (kv-eval's --baseline-matmul).
CLI::Option* add_matmul_option(CLI::App& app, ops::MatmulPath& matmul,
                               const std::string& flag = "--matmul", const std::string& help = "");
// "exact" or "int8"; nullopt otherwise (the option's error names --matmul and the value).
std::optional<ops::MatmulPath> parse_matmul_path(const std::string& text);
const char* matmul_path_name(ops::MatmulPath path);

// --weight-layout panels|rows: ModelLoadOptions::panel_weights, for the same verbs as --matmul.
void add_weight_layout_option(CLI::App& app, bool& panel_weights);

// Parses "123", "512K", "512M", "2G", "1.5G" (binary multiples; a trailing "B"/"iB" is accepted).
// Error naming the text when it is not a non-negative size.
int64_t parse_byte_size(std::string_view text);

}  // namespace kvlm
