// The engine with swap space (engine.h, kv_swap.h): when the KV cache is full, preempted sequences
// are swapped to host memory and back, and every request gets the tokens it gets with a cache
// that never fills: on one rank, on pipeline stages with steps in flight, on tensor-parallel ranks,
// with chunked prefill, with a bf16 cache and on the emulated GPU. A swapped sequence cancelled
// frees its swap blocks; a swap space too small for a block is refused.
#include <map>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/engine.h"
#include "tests/testing/engine_requests.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;
using testing::Greedy;
using testing::Prompt;

using Tokens = std::map<SeqId, std::vector<int32_t>>;

// 2 layers x 2 (K, V) x 4 slots x 2 heads x 8 dims x 4 bytes = 1 KiB a block of f32 on one rank.
constexpr size_t kBlockBytes = 1 << 10;

struct EngineSetup {
  ParallelLayout parallel;
  DeviceKind device = DeviceKind::kCpu;
  DType kv_cache_dtype = DType::kF32;
  bool chunked = false;
  size_t kv_cache_bytes = 1 << 20;
  size_t swap_space_bytes = 0;
};

class KvSwapEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_THAT(testing::WriteTinyModel(dir_.path(), testing::TinyEngineSpec()), IsOk());
  }

  absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineSetup& setup) {
    return Engine::Create(EngineConfig{.model_dir = dir_.path(),
                                       .parallel = setup.parallel,
                                       .device = setup.device,
                                       .block_size = 4,
                                       .kv_cache_dtype = setup.kv_cache_dtype,
                                       .kv_cache_bytes = setup.kv_cache_bytes,
                                       .max_num_seqs = 16,
                                       .max_num_batched_tokens = setup.chunked ? 7 : 64,
                                       .chunked_prefill = setup.chunked,
                                       .max_model_len = 64,
                                       .swap_space_bytes = setup.swap_space_bytes});
  }

  // testing::RunSixStaggeredRequests; *max_swapped: the most sequences swapped out at once.
  static Tokens Run(Engine& engine, int* max_swapped) {
    *max_swapped = 0;
    const Tokens tokens = testing::RunSixStaggeredRequests(
        engine, [&](Engine& e) { *max_swapped = std::max(*max_swapped, e.num_swapped()); });
    EXPECT_EQ(engine.swap_allocator().num_blocks_used(), 0);
    return tokens;
  }

  testing::ScopedTempDir dir_;
};

TEST_F(KvSwapEngineTest, SwappedSequencesGetTheTokensOfACacheThatNeverFills) {
  const std::vector<EngineSetup> setups = {
      {},
      {.chunked = true},
      {.parallel = {.pp_size = 2}},
      {.parallel = {.pp_size = 2}, .chunked = true},
      {.parallel = {.tp_size = 2}},
      {.kv_cache_dtype = DType::kBF16},
      {.device = DeviceKind::kCudaEmulated},
  };
  for (const EngineSetup& roomy : setups) {
    SCOPED_TRACE(::testing::Message()
                 << LayoutString(roomy.parallel) << " " << DeviceKindName(roomy.device) << " "
                 << DTypeName(roomy.kv_cache_dtype) << (roomy.chunked ? " chunked" : ""));
    auto unlimited = Create(roomy);
    ASSERT_THAT(unlimited, IsOk());
    int max_swapped = 0;
    const Tokens expected = Run(**unlimited, &max_swapped);
    ASSERT_EQ(expected.size(), 6u);
    EXPECT_EQ(max_swapped, 0);
    // 20 blocks of 4 tokens (of whatever bytes a block has) cannot hold six sequences of 17 to 37
    // tokens; 64 blocks of swap space hold any victim.
    const size_t block_bytes = kBlockBytes / (roomy.kv_cache_dtype == DType::kBF16 ? 2 : 1);
    EngineSetup tight = roomy;
    tight.kv_cache_bytes = 20 * block_bytes;
    tight.swap_space_bytes = 64 * block_bytes;
    auto swapping = Create(tight);
    ASSERT_THAT(swapping, IsOk());
    EXPECT_EQ((*swapping)->swap_allocator().num_blocks(), 64);
    EXPECT_EQ(Run(**swapping, &max_swapped), expected);
    EXPECT_GT(max_swapped, 0) << "the cache must fill for this test to mean anything";
  }
}

TEST_F(KvSwapEngineTest, VictimsTheSwapSpaceCannotHoldAreRecomputed) {
  auto unlimited = Create({});
  ASSERT_THAT(unlimited, IsOk());
  int max_swapped = 0;
  const Tokens expected = Run(**unlimited, &max_swapped);
  // 6 blocks of swap space: some victims fit, the longer ones are recomputed.
  auto mixed = Create({.kv_cache_bytes = 20 * kBlockBytes, .swap_space_bytes = 6 * kBlockBytes});
  ASSERT_THAT(mixed, IsOk());
  EXPECT_EQ(Run(**mixed, &max_swapped), expected);
  EXPECT_GT((*mixed)->num_swap_outs(), 0);
  EXPECT_GT((*mixed)->num_recomputes(), 0);
}

TEST_F(KvSwapEngineTest, CancellingASwappedSequenceFreesItsSwapBlocks) {
  auto engine = Create({.kv_cache_bytes = 20 * kBlockBytes, .swap_space_bytes = 64 * kBlockBytes});
  ASSERT_THAT(engine, IsOk());
  std::vector<SeqId> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(*(*engine)->AddRequest(Prompt(20, i), Greedy(40)));
  while ((*engine)->num_swapped() == 0 && (*engine)->HasWork()) ASSERT_THAT((*engine)->Step(), IsOk());
  ASSERT_GT((*engine)->num_swapped(), 0);
  EXPECT_GT((*engine)->swap_allocator().num_blocks_used(), 0);
  for (SeqId id : ids) (void)(*engine)->Cancel(id);  // some are in no step: gone at once
  while ((*engine)->HasWork()) ASSERT_THAT((*engine)->Step(), IsOk());
  EXPECT_EQ((*engine)->num_swapped(), 0);
  EXPECT_EQ((*engine)->swap_allocator().num_blocks_used(), 0);
  EXPECT_EQ((*engine)->allocator().num_blocks_used(), 0);
  EXPECT_EQ((*engine)->num_sequences(), 0);
}

TEST_F(KvSwapEngineTest, ASwapSpaceThatHoldsNoBlockIsRefused) {
  EXPECT_THAT(Create({.swap_space_bytes = kBlockBytes - 1}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("swap space")));
}

}  // namespace
}  // namespace baton::runtime
