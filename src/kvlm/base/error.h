#pragma once
// kvlm reports bad input and failed operations by throwing kvlm::Error. Its message is meant for
// the user: it names the file, field or value at fault. The CLI and the server catch it at their
// boundary; nothing below them prints.
#include <stdexcept>
#include <string>
#include <type_traits>

namespace kvlm {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws Error(message) unless cond holds. For checks on untrusted input, not for invariants.
inline void check(bool cond, const std::string& message) {
  if (!cond) throw Error(message);
}

// The same for a message that costs something to build (shapes, numbers): `message` is called
// only when cond fails, so the kernels' per-call checks pay for the test alone.
template <class Message>
  requires std::is_invocable_r_v<std::string, Message>
inline void check(bool cond, Message&& message) {
  if (!cond) throw Error(message());
}

}  // namespace kvlm
