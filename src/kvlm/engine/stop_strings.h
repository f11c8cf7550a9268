#pragma once
// Stop strings for streamed generation.
#include <string>
#include <string_view>
#include <vector>

namespace kvlm {

// Holds back streamed text that might be the beginning of a stop string, and cuts the text at
// the first stop string that appears (the stop string itself is never emitted).
class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops);  // Error on an empty stop string

  // Appends newly decoded text; returns the text that is now safe to emit.
  std::string push(std::string_view text);
  // The end of the stream: releases any held-back text.
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace kvlm
