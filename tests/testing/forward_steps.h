// Runs a checkpoint's forward pass over a list of steps on a fresh backend of one device, for the
// tests that compare the logits of two devices or dtypes. The KV pool lives where ModelRanks puts
// it: in the backend's memory when that is not the host's.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/backend/backend_registry.h"
#include "runtime/backend/device_buffer.h"
#include "runtime/kv_cache/kv_pool.h"
#include "runtime/model/llama_model.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/step_builder.h"

namespace baton::testing {

// The logits of every step, concatenated (one row per sequence of each step); empty after a
// failure, which is reported as a test failure.
template <typename Steps>
std::vector<float> RunForwardSteps(const std::string& dir, DType dtype, runtime::DeviceKind device,
                                   ThreadPool* pool, const Steps& steps, int block_size,
                                   int num_blocks) {
  using absl_testing::IsOk;
  auto backend = runtime::CreateBackend(runtime::BackendOptions{.device = device, .pool = pool});
  EXPECT_THAT(backend, IsOk());
  if (!backend.ok()) return {};
  auto model = runtime::LlamaModel::Load(dir, dtype, backend->get(), pool);
  EXPECT_THAT(model, IsOk());
  if (!model.ok()) return {};
  const runtime::KvPoolShape shape = (*model)->KvShape(block_size);
  runtime::DeviceBuffer kv_storage(backend->get());
  runtime::KvPoolOptions options;
  if (!(*backend)->IsHostMemory()) {
    EXPECT_THAT(kv_storage.Reserve(shape.BlockBytes() * num_blocks), IsOk());
    options.device_storage = kv_storage.data<std::byte>();
  }
  auto kv_pool = runtime::KvPool::Create(shape, num_blocks, options);
  EXPECT_THAT(kv_pool, IsOk());
  if (!kv_pool.ok()) return {};
  std::vector<float> all;
  runtime::StepOutput out;
  for (const StepBuilder& step : steps) {
    EXPECT_THAT((*model)->Forward(step.Batch(), **kv_pool, &out), IsOk());
    all.insert(all.end(), out.logits.begin(), out.logits.end());
  }
  return all;
}

// The largest |actual - expected| of a logit row over that row's largest |expected|, over all
// rows of `vocab` logits: the error measure the model comparisons bound. Infinite where a row of
// zeros is not matched exactly.
inline float MaxErrorOfRowMax(const std::vector<float>& expected, const std::vector<float>& actual,
                              int vocab) {
  float worst = 0;
  for (size_t row = 0; row < expected.size() / vocab; ++row) {
    float scale = 0;
    float diff = 0;
    for (int v = 0; v < vocab; ++v) {
      const size_t i = row * vocab + v;
      scale = std::max(scale, std::abs(expected[i]));
      diff = std::max(diff, std::abs(actual[i] - expected[i]));
    }
    if (diff > 0) worst = std::max(worst, scale > 0 ? diff / scale : INFINITY);
  }
  return worst;
}

}  // namespace baton::testing
