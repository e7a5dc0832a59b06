// The forward pass through the DeviceBackend interface: on a backend whose memory is not the
// host's, the model must stage its inputs and logits through the backend's copies and still
// produce the CPU backend's logits bit for bit, on a step that mixes decode, a fresh prompt and a
// prompt chunk with a cached prefix (the KV gather).
#include "runtime/model/llama_model.h"

#include <array>
#include <cstring>
#include <memory>
#include <vector>
#include <initializer_list>
#include <span>

#include "gmock/gmock.h"
#include "baton/kernels/sampling.h"
#include "gtest/gtest.h"
#include "runtime/backend/cpu_backend.h"
#include "runtime/parallel/cpu_communicator.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/step_builder.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

// The CPU backend posing as a device with its own memory: IsHostMemory() is false, so the model
// takes its device path (copies in and out); every call is forwarded, and the copies are counted.
class StagedCpuBackend final : public DeviceBackend {
 public:
  explicit StagedCpuBackend(ThreadPool* pool) : cpu_(pool) {}
  int num_copies_to_device = 0;
  int num_copies_to_host = 0;
  int num_gathers = 0;

  DeviceKind device() const override { return DeviceKind::kCpu; }
  bool IsHostMemory() const override { return false; }
  absl::StatusOr<void*> Allocate(size_t bytes) override { return cpu_.Allocate(bytes); }
  void Free(void* device) override { cpu_.Free(device); }
  absl::Status CopyToDevice(void* device, const void* host, size_t bytes) override {
    ++num_copies_to_device;
    return cpu_.CopyToDevice(device, host, bytes);
  }
  absl::Status CopyToHost(void* host, const void* device, size_t bytes) override {
    ++num_copies_to_host;
    return cpu_.CopyToHost(host, device, bytes);
  }
  absl::Status CopyOnDevice(void* dst, const void* src, size_t bytes) override {
    return cpu_.CopyOnDevice(dst, src, bytes);
  }
  absl::Status CopyOnDevice2D(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                              size_t width, size_t rows) override {
    return cpu_.CopyOnDevice2D(dst, dst_pitch, src, src_pitch, width, rows);
  }
  absl::Status Embedding(const kernels::EmbeddingParams& p) override { return cpu_.Embedding(p); }
  absl::Status RmsNorm(const kernels::RmsNormParams& p) override { return cpu_.RmsNorm(p); }
  absl::Status Matmul(const kernels::MatmulParams& p) override { return cpu_.Matmul(p); }
  absl::Status MatmulGroup(absl::Span<const kernels::MatmulParams> g) override {
    return cpu_.MatmulGroup(g);
  }
  absl::Status Rope(const kernels::RopeParams& p) override { return cpu_.Rope(p); }
  absl::Status KvWrite(const kernels::KvWriteParams& p) override { return cpu_.KvWrite(p); }
  absl::Status KvGather(const kernels::KvGatherParams& p) override {
    ++num_gathers;
    return cpu_.KvGather(p);
  }
  absl::Status PagedAttentionDecode(const kernels::PagedAttentionParams& p) override {
    return cpu_.PagedAttentionDecode(p);
  }
  absl::Status PrefillAttention(const kernels::PrefillAttentionParams& p) override {
    return cpu_.PrefillAttention(p);
  }
  absl::Status Swiglu(const kernels::SwigluParams& p) override { return cpu_.Swiglu(p); }
  absl::Status Add(const kernels::AddParams& p) override { return cpu_.Add(p); }
  absl::Status Sample(const kernels::SampleParams& p) override { return cpu_.Sample(p); }
  absl::Status LogitsProcessors(const kernels::LogitsProcessorsParams& p) override {
    return cpu_.LogitsProcessors(p);
  }
  absl::Status TokenBitmask(const kernels::TokenBitmaskParams& p) override { return cpu_.TokenBitmask(p); }

 private:
  CpuBackend cpu_;
};

constexpr int kBlockSize = 4;

using Step = testing::StepBuilder;  // block_size 4 (kBlockSize), 4 blocks per sequence

class LlamaModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_THAT(testing::WriteTinyModel(dir_.path(), testing::TinyEngineSpec()), IsOk());
  }

  // Runs the same two steps on `backend` and returns the logits of both; with `sampling`, the
  // second step draws its three tokens with it and returns no logits, and `tokens` gets them.
  std::vector<float> RunSteps(DeviceBackend* backend,
                              std::span<const TokenSampling> sampling = {},
                              std::vector<int32_t>* tokens = nullptr) {
    auto model = LlamaModel::Load(dir_.path(), DType::kF32, backend, &pool_);
    EXPECT_THAT(model, IsOk());
    if (!model.ok()) return {};
    auto kv_pool = KvPool::Create((*model)->KvShape(kBlockSize), 16);
    EXPECT_THAT(kv_pool, IsOk());
    const std::array<Step, 2> steps = testing::TwoMixedSteps();
    const Step& first = steps[0];
    const Step& second = steps[1];
    std::vector<float> all;
    StepOutput out;
    for (const Step* step : {&first, &second}) {
      StepBatch batch = step->Batch();
      if (step == &second && !sampling.empty()) {
        batch.sampling = sampling;
        batch.return_logits = false;
      }
      EXPECT_THAT((*model)->Forward(batch, **kv_pool, &out), IsOk());
      EXPECT_EQ(out.token_ids.size(), static_cast<size_t>(batch.num_seqs()));
      all.insert(all.end(), out.logits.begin(), out.logits.end());
      if (tokens != nullptr) *tokens = out.token_ids;
    }
    return all;
  }

  testing::ScopedTempDir dir_;
  ThreadPool pool_{2};
};

TEST_F(LlamaModelTest, DevicePathMatchesHostPathBitForBit) {
  CpuBackend cpu(&pool_);
  StagedCpuBackend staged(&pool_);
  const std::vector<float> expected = RunSteps(&cpu);
  const std::vector<float> actual = RunSteps(&staged);
  ASSERT_EQ(expected.size(), size_t{(2 + 3) * 96});
  ASSERT_EQ(actual.size(), expected.size());
  EXPECT_EQ(std::memcmp(actual.data(), expected.data(), sizeof(float) * actual.size()), 0);
  EXPECT_EQ(staged.num_copies_to_host, 4);  // the tokens and the logits of each step
  EXPECT_GT(staged.num_copies_to_device, 0);
  EXPECT_EQ(staged.num_gathers, 2);  // step 2 only, once per layer
}

// The tokens are drawn where the logits are, and are the host sampler's tokens for those logits;
// only the token ids come back when no logits are asked for.
TEST_F(LlamaModelTest, TokensAreTheHostSamplersDrawsFromTheLogits) {
  CpuBackend cpu(&pool_);
  StagedCpuBackend staged(&pool_);
  const std::vector<float> logits = RunSteps(&cpu);
  ASSERT_EQ(logits.size(), size_t{(2 + 3) * 96});
  const std::vector<TokenSampling> sampling = {
      {.options = {}},  // greedy
      {.options = {.temperature = 0.8f, .top_k = 20}, .seed = 7, .draw_idx = 0},
      {.options = {.temperature = 1.3f, .top_p = 0.9f}, .seed = 3, .draw_idx = 5}};
  std::vector<int32_t> expected;
  for (size_t s = 0; s < sampling.size(); ++s) {
    const std::span<const float> row(logits.data() + (2 + s) * 96, 96);
    kernels::SamplerRng rng(sampling[s].seed, sampling[s].draw_idx);
    auto token = kernels::SampleToken(row, sampling[s].options, rng);
    ASSERT_THAT(token, IsOk());
    expected.push_back(*token);
  }
  for (DeviceBackend* backend : std::initializer_list<DeviceBackend*>{&cpu, &staged}) {
    std::vector<int32_t> tokens;
    const std::vector<float> first_logits = RunSteps(backend, sampling, &tokens);
    EXPECT_EQ(first_logits.size(), size_t{2 * 96});  // the second step returned none
    EXPECT_EQ(tokens, expected);
  }
  EXPECT_EQ(staged.num_copies_to_host, 3);  // tokens and logits, then the tokens alone
}

TEST_F(LlamaModelTest, ShardsNeedFittingSizesAndTheirCommunicators) {
  CpuBackend cpu(&pool_);
  // tp 2 without a TP communicator.
  EXPECT_THAT(LlamaModel::Load(dir_.path(), DType::kF32, &cpu, &pool_, ShardSpec{.tp_size = 2}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tp communicator")));
  // pp 2 with a communicator of the wrong size.
  auto group = CpuCommGroup::Create({.num_ranks = 3});
  ASSERT_THAT(group, IsOk());
  auto comm = (*group)->Join(0);
  ASSERT_THAT(comm, IsOk());
  EXPECT_THAT(LlamaModel::Load(dir_.path(), DType::kF32, &cpu, &pool_, ShardSpec{.pp_size = 2},
                               ModelComms{.pp = comm->get()}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 0 of 3")));
  // 4 heads do not split over 3 ranks.
  EXPECT_THAT(LlamaModel::Load(dir_.path(), DType::kF32, &cpu, &pool_, ShardSpec{.tp_size = 3}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace baton::runtime
