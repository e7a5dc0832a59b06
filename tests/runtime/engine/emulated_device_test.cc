// The engine on the cuda-emulated device (runtime/backend/gpu_backend.h over the emulated GPU
// runtime): the GPU backend's own code — weights uploaded to device memory, the KV pool in device
// memory, index arrays staged, every op launched on device pointers (a host pointer or an
// out-of-bounds extent is an error of the emulated runtime), logits copied back — gives the CPU
// backend's greedy tokens, and logits within 1e-4 of the row's largest (f32 weights; 1e-2 with
// bf16 weights: both devices round the activations to bf16 before each product, and a last-bit
// difference of the attention kernels can move one across a rounding boundary, 2^-8 relative;
// 2.5e-3 with f16 weights, whose step is a quarter of that, 2^-10; measured 0 for both), on
// one rank, on tp 2 and on tp 2 x pp 2 (every collective handed device memory, as NCCL needs), with
// prefill-first and chunked prefill (a cached prefix: KvGather); and with a bf16 KV cache, which
// both devices round alike (to nearest even) and widen exactly, so the f32 tolerance holds.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/backend/emulated_gpu_runtime.h"
#include "runtime/engine/engine.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

struct Case {
  std::string name;
  DType dtype;
  int tp;
  bool chunked;
  float tolerance;  // of the row's largest |logit|
  int pp = 1;
  DType kv_dtype = DType::kF32;
};

struct Generated {
  std::map<SeqId, std::vector<int32_t>> tokens;
  std::map<SeqId, std::vector<std::vector<float>>> logits;
};

class EmulatedDeviceTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    ASSERT_THAT(testing::WriteTinyModel(dir_.path(), testing::TinyEngineSpec()), IsOk());
  }

  Generated Generate(DeviceKind device) {
    const Case& c = GetParam();
    EngineConfig config{.model_dir = dir_.path(),
                        .weight_dtype = c.dtype,
                        .parallel = {.tp_size = c.tp, .pp_size = c.pp},
                        .device = device,
                        .block_size = 4,
                        .kv_cache_dtype = c.kv_dtype,
                        .kv_cache_bytes = 1 << 20,
                        .max_num_seqs = 8,
                        .max_num_batched_tokens = c.chunked ? 6 : 64,
                        .chunked_prefill = c.chunked,
                        .max_model_len = 64};
    Generated run;
    auto engine = Engine::Create(config);
    EXPECT_THAT(engine, IsOk());
    if (!engine.ok()) return run;
    for (int len : {5, 11, 3}) {
      std::vector<int32_t> prompt(len);
      for (int i = 0; i < len; ++i) prompt[i] = (i * 29 + len * 7 + 3) % 96;
      GenerationParams params;
      params.max_tokens = 4;
      params.ignore_eos = true;
      params.return_logits = true;
      EXPECT_THAT((*engine)->AddRequest(prompt, params), IsOk());
    }
    while ((*engine)->HasWork()) {
      auto outputs = (*engine)->Step();
      EXPECT_THAT(outputs, IsOk());
      if (!outputs.ok()) break;
      for (auto& out : *outputs) {
        run.tokens[out.seq_id].push_back(out.token_id);
        run.logits[out.seq_id].push_back(std::move(out.logits));
      }
    }
    EXPECT_EQ((*engine)->allocator().num_blocks_used(), 0);
    return run;
  }

  testing::ScopedTempDir dir_;
};

TEST_P(EmulatedDeviceTest, GivesTheCpuBackendsTokensAndLogits) {
  const Generated cpu = Generate(DeviceKind::kCpu);
  const Generated emulated = Generate(DeviceKind::kCudaEmulated);
  ASSERT_EQ(cpu.tokens.size(), 3u);
  ASSERT_EQ(emulated.tokens, cpu.tokens);
  for (const auto& [seq, rows] : cpu.logits) {
    const auto& other = emulated.logits.at(seq);
    ASSERT_EQ(rows.size(), other.size());
    for (size_t t = 0; t < rows.size(); ++t) {
      ASSERT_EQ(rows[t].size(), other[t].size());
      float scale = 0;
      for (float x : rows[t]) scale = std::max(scale, std::abs(x));
      for (size_t v = 0; v < rows[t].size(); ++v) {
        ASSERT_NEAR(other[t][v], rows[t][v], GetParam().tolerance * scale)
            << "request " << seq << " token " << t << " logit " << v;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Devices, EmulatedDeviceTest,
    ::testing::Values(Case{"f32", DType::kF32, 1, false, 1e-4f},
                      Case{"f32_chunked", DType::kF32, 1, true, 1e-4f},
                      Case{"bf16", DType::kBF16, 1, false, 1e-2f},
                      Case{"f16", DType::kF16, 1, false, 2.5e-3f},
                      Case{"f32_tp2", DType::kF32, 2, false, 1e-4f},
                      // Every collective's buffer is checked to be device memory (NCCL's rule),
                      // the PP send/recv of the residual stream too (checked_communicator.h).
                      Case{"f32_tp2_pp2", DType::kF32, 2, false, 1e-4f, 2},
                      Case{"f32_kv_bf16", DType::kF32, 1, false, 1e-4f, 1, DType::kBF16},
                      Case{"f32_chunked_kv_bf16", DType::kF32, 1, true, 1e-4f, 1, DType::kBF16},
                      Case{"f32_tp2_kv_bf16", DType::kF32, 2, false, 1e-4f, 1, DType::kBF16}),
    [](const auto& info) { return info.param.name; });

// kv_cache_bytes 0: each rank's KV pool is gpu_memory_utilization of its device less what its weights
// hold, as vLLM sizes it; the emulated device reports a stated 4 GiB.
TEST(DeviceShareKvBudgetTest, TakesTheUtilizationShareLessTheWeights) {
  testing::ScopedTempDir dir;
  ASSERT_THAT(testing::WriteTinyModel(dir.path(), testing::TinyEngineSpec()), IsOk());
  constexpr double kUtilization = 0.01;  // ~41 MiB: the pool is host memory here
  const double share = kUtilization * static_cast<double>(EmulatedGpuRuntime::kUncappedTotalBytes);
  for (int tp : {1, 2}) {
    SCOPED_TRACE(tp);
    auto engine = Engine::Create(EngineConfig{.model_dir = dir.path(),
                                              .parallel = {.tp_size = tp},
                                              .device = DeviceKind::kCudaEmulated,
                                              .kv_cache_bytes = 0,
                                              .gpu_memory_utilization = kUtilization,
                                              .max_model_len = 64});
    ASSERT_THAT(engine, IsOk());
    const double pool_bytes =
        static_cast<double>((*engine)->ranks().num_blocks()) * (*engine)->ranks().kv_pool(0).BlockBytes();
    EXPECT_LE(pool_bytes, share);
    EXPECT_GT(pool_bytes, share - (4 << 20)) << "the tiny model's weights are well under 4 MiB";
  }
}

TEST(DeviceShareKvBudgetTest, NoRoomLeftOrNoGpuIsAClearError) {
  testing::ScopedTempDir dir;
  ASSERT_THAT(testing::WriteTinyModel(dir.path(), testing::TinyEngineSpec()), IsOk());
  EXPECT_THAT(Engine::Create(EngineConfig{.model_dir = dir.path(),
                                          .device = DeviceKind::kCudaEmulated,
                                          .kv_cache_bytes = 0,
                                          .gpu_memory_utilization = 1e-9,
                                          .max_model_len = 64}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("leaves no room for the KV cache")));
  EXPECT_THAT(Engine::Create(EngineConfig{.model_dir = dir.path(),
                                          .kv_cache_bytes = 0,
                                          .max_model_len = 64}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs a GPU")));
}

}  // namespace
}  // namespace baton::runtime
