// f16 (IEEE half) matmul weights through the whole forward pass, on the CPU backend and on
// cuda-emulated (the CUDA backend's own code: weights uploaded to device memory, the GEMMs through
// the GPU runtime's Gemm), over a step of prompts and a step mixing decode, a cached-prefix chunk
// and a new prompt. The checkpoint is stored in f16 and its values are exact in f16: loaded as f16
// the matmul weights stay in the mapping, loaded as f32 they are widened to the same numbers. So the
// two runs differ only where an f16 GEMM differs from an f32 one: each matmul's activations are
// rounded to f16 first (relative error <= 2^-11 = 4.9e-4).
//
// Tolerance: 1.5e-3 of each logit row's largest |logit|, three such roundings. About eleven lie on
// the way to a logit (q/k/v, o, gate/up, down in each of the two layers, the LM head), but they are
// independent and partly cancel: measured 5.3e-4. The same run with bf16 weights (a 2^-8
// rounding) measured 2.9e-3, so the bound also tells f16 rounding from bf16 rounding.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_macros.h"
#include "runtime/backend/device_backend.h"
#include "tests/testing/forward_steps.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/step_builder.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;

// The checkpoint is testing::WriteScaledTinyModel's, stored in f16: unscaled, f16 and f32 logits
// differ by 5e-3 of the row's largest (measured), the conditioning of the weights, not the GEMMs.
constexpr int kBlockSize = 4;
constexpr int kNumBlocks = 16;
constexpr float kTolerance = 1.5e-3f;  // of the row's largest |logit| (see the file comment)

class F16ForwardTest : public ::testing::TestWithParam<DeviceKind> {
 protected:
  void SetUp() override { testing::TinyModelSpec spec = testing::TinyEngineSpec();
    spec.dtype = DType::kF16;
    ASSERT_THAT(testing::WriteScaledTinyModel(dir_.path(), spec), IsOk()); }

  // The logits of two steps (prompts, then a decode step, a cached-prefix chunk and a new prompt)
  // with matmul weights in `dtype`, on a fresh backend of the test's device.
  std::vector<float> RunSteps(DType dtype) {
    return testing::RunForwardSteps(dir_.path(), dtype, GetParam(), &pool_,
                                    testing::TwoMixedSteps(), kBlockSize, kNumBlocks);
  }

  testing::ScopedTempDir dir_;
  ThreadPool pool_{2};
};

TEST_P(F16ForwardTest, LogitsAreCloseToTheF32Weights) {
  const std::vector<float> f32 = RunSteps(DType::kF32);
  const std::vector<float> f16 = RunSteps(DType::kF16);
  const int vocab = testing::TinyEngineSpec().vocab_size;
  ASSERT_EQ(f32.size(), size_t((2 + 3) * vocab));  // one row per sequence of each step
  ASSERT_EQ(f16.size(), f32.size());
  const float max_rel_err = testing::MaxErrorOfRowMax(f32, f16, vocab);
  EXPECT_LE(max_rel_err, kTolerance);
  // Not bit-identical: the activations really were rounded to f16.
  EXPECT_GT(max_rel_err, 0.0f);
  RecordProperty("max_error_of_row_max", std::to_string(max_rel_err));
}

INSTANTIATE_TEST_SUITE_P(Devices, F16ForwardTest,
                         ::testing::Values(DeviceKind::kCpu, DeviceKind::kCudaEmulated),
                         [](const auto& info) {
                           return info.param == DeviceKind::kCpu ? std::string("cpu")
                                                                 : std::string("cuda_emulated");
                         });

}  // namespace
}  // namespace baton::runtime
