#pragma once
// Minimal leveled logging to stderr. KVLM_LOG=debug|info|warn|error sets the threshold.
#include <string>

namespace kvlm {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

void log(LogLevel level, const std::string& message);
inline void log_debug(const std::string& m) { log(LogLevel::kDebug, m); }
inline void log_info(const std::string& m) { log(LogLevel::kInfo, m); }
inline void log_warn(const std::string& m) { log(LogLevel::kWarn, m); }
inline void log_error(const std::string& m) { log(LogLevel::kError, m); }

}  // namespace kvlm
