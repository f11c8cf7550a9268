#pragma once
// Choosing the KV codec of every layer from the command line (--kv-quant, --kv-group-size,
// --kv-config), as mlx-bun spells it; docs/kv-codecs.md §1 lists the spellings.
#include <string>
#include <vector>

#include "kvlm/base/json.h"
#include "kvlm/quant/kv_codec.h"

namespace kvlm {

struct KVQuantOptions {
  std::string quant = "off";  // --kv-quant: a parse_kv_quant spelling, or "config"
  int group_size = 0;         // --kv-group-size; 0 = the codec's default (affine 64, TurboQuant 32)
  std::string config_file;    // --kv-config (only with "config"); default <model_dir>/kv_config.json
};

// One codec spec per layer. "config" reads the kv_config.json (parse_kv_config); any other
// spelling gives every layer the same codec. Errors name the flag or the file, entry and field.
std::vector<KVCodecSpec> resolve_kv_codecs(const KVQuantOptions& o, int n_layers,
                                           DType model_dtype, const std::string& model_dir);

// A kv_config.json document: a JSON array of {"layer_idx": L, "bits": B, "group_size": G}
// entries (group_size optional: `group_size`, else 64). Listed layers get MLX affine codecs with
// scales in the model dtype; the others keep the exact f32 cache ("off"). Errors read
// "<file>: entry <i>: field '<name>' ...".
std::vector<KVCodecSpec> parse_kv_config(const Json& doc, const std::string& file, int n_layers,
                                         int group_size, DType model_dtype);

}  // namespace kvlm
