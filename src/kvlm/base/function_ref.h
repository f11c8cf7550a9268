#pragma once
// A non-owning reference to a callable, for functions that call it before they return (the thread
// pool's jobs). std::function copies a lambda that captures more than two pointers to the heap:
// every parallel op paid an allocation and a free per call (thousands per decode step). A
// FunctionRef is two pointers and never allocates; the callable must outlive the call it is
// passed to, which a lambda written at the call site does.
#include <memory>
#include <type_traits>
#include <utility>

namespace kvlm {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>)
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): passed where std::function was
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace kvlm
