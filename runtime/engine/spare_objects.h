// Objects kept after use for the capacity of their buffers, so a step in flight does not allocate
// its arrays anew each time (engine.h, model_runner.h, model_ranks.h).
#pragma once

#include <memory>
#include <vector>

namespace baton::runtime {

// A spare object, or a new one when there is none.
template <typename T>
std::unique_ptr<T> TakeSpare(std::vector<std::unique_ptr<T>>& spares) {
  if (spares.empty()) return std::make_unique<T>();
  std::unique_ptr<T> object = std::move(spares.back());
  spares.pop_back();
  return object;
}

}  // namespace baton::runtime
