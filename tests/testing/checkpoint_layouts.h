// The Python-generated checkpoints the parallel tests compare layouts on (scripts/make_checkpoint.py
// --all DIR: tiny, small, qwen2-tiny, with trained-like weight scales), found through
// BATON_TEST_MODELS_DIR=DIR, and the tp x pp layouts each is run with. ctest does not generate them,
// so the tests skip without the variable; tests/python/test_parallel_checkpoints.py runs them with it.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "runtime/model/model_shard.h"

namespace baton::testing {

struct CheckpointLayout {
  std::string model;  // directory name under BATON_TEST_MODELS_DIR
  runtime::ParallelLayout layout;

  // "qwen2_tiny_tp2_pp1": a gtest parameter name.
  std::string Name() const {
    std::string name = model + "_tp" + std::to_string(layout.tp_size) + "_pp" +
                       std::to_string(layout.pp_size);
    for (char& c : name) {
      if (c == '-') c = '_';
    }
    return name;
  }
};

// tp 2, a wider tp, pp 2, pp 3, tp 2 x pp 2 on each model. tiny has 6 heads: tp 3 instead of 4;
// qwen2-tiny has 2 KV heads: tp 4 replicates them.
inline std::vector<CheckpointLayout> CheckpointLayouts() {
  std::vector<CheckpointLayout> cases;
  for (const char* model : {"tiny", "small", "qwen2-tiny"}) {
    const int wide_tp = std::string(model) == "tiny" ? 3 : 4;
    for (auto [tp, pp] : {std::pair{2, 1}, {wide_tp, 1}, {1, 2}, {1, 3}, {2, 2}}) {
      cases.push_back({model, runtime::ParallelLayout{.tp_size = tp, .pp_size = pp}});
    }
  }
  return cases;
}

// BATON_TEST_MODELS_DIR/model when it holds a checkpoint; nullopt (the test skips) otherwise.
inline std::optional<std::filesystem::path> GeneratedCheckpoint(const std::string& model) {
  const char* models = std::getenv("BATON_TEST_MODELS_DIR");
  if (models == nullptr) return std::nullopt;
  std::filesystem::path dir = std::filesystem::path(models) / model;
  if (!std::filesystem::exists(dir / "config.json")) return std::nullopt;
  return dir;
}

}  // namespace baton::testing
