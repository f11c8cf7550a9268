#pragma once
// JSON parsing with errors that name the file and the field. nlohmann::json is the document type
// throughout kvlm; these helpers turn its exceptions into kvlm::Error.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kvlm/base/error.h"

namespace kvlm {

using Json = nlohmann::json;

// Parses `text`; `origin` (usually a path) prefixes any error.
Json parse_json(const std::string& text, const std::string& origin);
// Reads and parses a whole file.
Json read_json_file(const std::string& path);

// Returns obj[key] converted to T, or throws "<origin>: field 'key' ...".
template <typename T>
T json_get(const Json& obj, const char* key, const std::string& origin) {
  if (!obj.is_object() || !obj.contains(key) || obj.at(key).is_null())
    throw Error(origin + ": missing required field '" + key + "'");
  try {
    return obj.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(origin + ": field '" + key + "' has the wrong type (" + obj.at(key).dump() + ")");
  }
}

// Like json_get, but returns `fallback` when the key is absent or null.
template <typename T>
T json_get_or(const Json& obj, const char* key, T fallback, const std::string& origin) {
  if (!obj.is_object() || !obj.contains(key) || obj.at(key).is_null()) return fallback;
  return json_get<T>(obj, key, origin);
}

}  // namespace kvlm
