#pragma once
// The engine's command-line flags, shared by `kvlm serve` and `kvlm bench` so both spell them the
// same way: --max-batch (aliases --batch, --decode-concurrency), --prefill-chunk, --token-budget,
// --kv-budget (bytes, or sizes like 512M / 2G) and --prompt-cache-bytes (the same size syntax).
#include <cstdint>
#include <string_view>

#include <CLI/CLI.hpp>

#include "kvlm/engine/engine.h"
#include "kvlm/model/model.h"

namespace kvlm {

void add_engine_options(CLI::App& app, EngineOptions& engine, ModelLoadOptions& load);

// Parses "123", "512K", "512M", "2G", "1.5G" (binary multiples; a trailing "B"/"iB" is accepted).
// Error naming the text when it is not a non-negative size.
int64_t parse_byte_size(std::string_view text);

}  // namespace kvlm
