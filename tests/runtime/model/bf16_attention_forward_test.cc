// A bf16 model's prefill attention on tensor cores (PrefillAttentionParams::allow_bf16_tensor_cores,
// which LlamaModel sets for bf16 matmul weights) through the whole forward pass on cuda-emulated: the
// CUDA backend runs the tensor-core kernel through the SIMT emulation of mma.sync, the CPU backend
// its f32 attention. head_dim 64, so the kernel applies; steps of prompts (one of 100 tokens: two
// 64-query tiles, four 32-key tiles), then a decode, a cached-prefix chunk (the gathered-context
// path) and a new prompt. The GEMMs round the same way on both backends, so the logits differ only
// by the attention's bf16 rounding of q, k, v and the probabilities.
//
// Tolerance: 1e-2 of each logit row's largest |logit|. Measured 6.4e-3 (RecordProperty below); with
// the f32 attention kernel instead (the flag off) the same comparison measured 1.7e-3, so the
// tensor-core rounding is what the bound allows for.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/backend/device_backend.h"
#include "tests/testing/forward_steps.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/step_builder.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;

constexpr int kBlockSize = 4;
constexpr int kNumBlocks = 48;
constexpr float kTolerance = 1e-2f;  // of the row's largest |logit| (see the file comment)

testing::TinyModelSpec HeadDim64Spec() {
  testing::TinyModelSpec spec = testing::TinyEngineSpec();
  spec.hidden_size = 128;
  spec.num_heads = 2;
  spec.num_kv_heads = 1;
  spec.intermediate_size = 64;
  spec.dtype = DType::kBF16;
  return spec;
}

std::vector<testing::StepBuilder> Steps() {
  const std::array<testing::StepBuilder, 2> mixed = testing::TwoMixedSteps();
  std::vector<testing::StepBuilder> steps(mixed.begin(), mixed.end());
  std::vector<int32_t> long_prompt(100);
  for (int i = 0; i < 100; ++i) long_prompt[i] = (i * 37 + 11) % 96;
  std::vector<int32_t> blocks(25);
  std::iota(blocks.begin(), blocks.end(), 12);  // a, b and c of the mixed steps hold blocks 0..11
  testing::StepBuilder long_step;
  long_step.Add(long_prompt, 0, 100, blocks);
  steps.push_back(long_step);
  return steps;
}

std::vector<float> RunSteps(const std::string& dir, DeviceKind device, ThreadPool* pool) {
  return testing::RunForwardSteps(dir, DType::kBF16, device, pool, Steps(), kBlockSize,
                                  kNumBlocks);
}

TEST(Bf16AttentionForwardTest, TensorCoreAttentionStaysCloseToTheCpu) {
  testing::ScopedTempDir dir;
  ASSERT_THAT(testing::WriteScaledTinyModel(dir.path(), HeadDim64Spec()), IsOk());
  ASSERT_EQ(testing::TinyHeadDim(HeadDim64Spec()), 64);
  ThreadPool pool(2);
  const std::vector<float> cpu = RunSteps(dir.path(), DeviceKind::kCpu, &pool);
  const std::vector<float> gpu = RunSteps(dir.path(), DeviceKind::kCudaEmulated, &pool);
  const int vocab = HeadDim64Spec().vocab_size;
  ASSERT_EQ(cpu.size(), size_t((2 + 3 + 1) * vocab));  // one row per sequence of each step
  ASSERT_EQ(gpu.size(), cpu.size());
  const float max_rel_err = testing::MaxErrorOfRowMax(cpu, gpu, vocab);
  EXPECT_LE(max_rel_err, kTolerance);
  RecordProperty("max_error_of_row_max", std::to_string(max_rel_err));
  std::printf("max error of the row max: %g\n", max_rel_err);
}

}  // namespace
}  // namespace baton::runtime
