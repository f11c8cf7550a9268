#pragma once
// JSON from untrusted files. base's parse_json turns nlohmann's parse errors into kvlm::Error, but
// a number too large for a double ("1e999") arrives as nlohmann's out_of_range instead (found by
// fuzz_safetensors). io routes every file it reads through here so any nlohmann exception becomes
// one kvlm::Error naming the file.
#include <string>

#include "kvlm/base/file.h"
#include "kvlm/base/json.h"

namespace kvlm {

inline Json parse_json_input(const std::string& text, const std::string& origin) {
  try {
    return parse_json(text, origin);
  } catch (const nlohmann::json::exception& e) {
    const std::string what = e.what();  // "[json.exception.out_of_range.406] number overflow ..."
    const size_t cut = what.find("] ");
    throw Error(origin + ": invalid JSON: " + (cut == std::string::npos ? what : what.substr(cut + 2)));
  }
}

inline Json read_json_input(const std::string& path) { return parse_json_input(read_file(path), path); }

}  // namespace kvlm
