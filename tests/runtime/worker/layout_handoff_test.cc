// Hand-offs between instances of different tp x pp layouts, end to end: a prefill Worker and a decode
// Worker in one process, each running its ranks on a checkpoint written by the test, the KV moving
// over the real transports (shared memory, or TCP). The tp 1 -> tp 1 hand-off of the same prompts is
// the reference: every other pair of layouts must decode the same greedy tokens, report the bytes
// its decode ranks own, and leave no block held on either worker.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/kv_handoff.h"
#include "runtime/transfer/kv_slab_mapping.h"
#include "runtime/worker/worker.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

// The model: 2 layers, 4 query heads over 2 KV heads (head_dim 8), intermediate 48: tp 2 and pp 2
// both fit (testing::TinyEngineSpec).
constexpr int kVocabSize = 96;
constexpr int kBlockSize = 4;
constexpr int kMaxTokens = 6;
constexpr size_t kKvCacheBytes = 1 << 20;

ParallelLayout Tp(int tp_size) { return ParallelLayout{.tp_size = tp_size, .pp_size = 1}; }
ParallelLayout Pp(int pp_size) { return ParallelLayout{.tp_size = 1, .pp_size = pp_size}; }
ParallelLayout TpPp(int tp_size, int pp_size) {
  return ParallelLayout{.tp_size = tp_size, .pp_size = pp_size};
}

// Prompt lengths that end mid-block and on a block boundary.
std::vector<std::vector<int32_t>> Prompts() {
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& [len, salt] : std::vector<std::pair<int, int>>{{7, 1}, {16, 2}, {23, 3}}) {
    std::vector<int32_t> ids(len);
    for (int i = 0; i < len; ++i) ids[i] = (i * 37 + salt * 11 + 5) % kVocabSize;
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

GenerationParams Greedy() {
  GenerationParams params;
  params.max_tokens = kMaxTokens;
  params.ignore_eos = true;
  return params;
}

enum class Route { kShm, kTcp };

// What one hand-off of one prompt gave.
struct HandoffRun {
  absl::Status status;
  std::vector<int32_t> tokens;  // the prefill's first token, then the decode's
  std::optional<KvTransferReport> report;
};

class LayoutHandoffTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new testing::ScopedTempDir();
    ASSERT_THAT(testing::WriteTinyModel(model_dir_->path(), testing::TinyEngineSpec()), IsOk());
  }
  static void TearDownTestSuite() {
    delete model_dir_;
    model_dir_ = nullptr;
  }

  static std::unique_ptr<Worker> MakeWorker(WorkerRole role, const ParallelLayout& layout,
                                            int block_size = kBlockSize) {
    WorkerOptions options{.role = role,
                          .engine = EngineConfig{.model_dir = model_dir_->path(),
                                                 .parallel = layout,
                                                 .num_threads = 1,
                                                 .block_size = block_size,
                                                 .kv_cache_bytes = kKvCacheBytes,
                                                 .max_model_len = 128}};
    absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(options);
    EXPECT_THAT(worker, IsOk()) << WorkerRoleName(role) << " " << LayoutString(layout);
    return worker.ok() ? *std::move(worker) : nullptr;
  }

  // Prefills `prompt` on `prefill` (the KV held for a minute), optionally edits the hand-off as a
  // peer would see it, then decodes on `decode`.
  static HandoffRun HandOff(Worker& prefill, Worker& decode, const std::string& id,
                            const std::vector<int32_t>& prompt, Route route,
                            const std::function<void(KvHandoff&)>& edit = [](KvHandoff&) {}) {
    HandoffRun run;
    absl::StatusOr<PrefillResult> prefilled = prefill.Prefill(
        PrefillCall{.request_id = id,
                    .prompt_token_ids = prompt,
                    .params = Greedy(),
                    .kv_lease = absl::Minutes(1),
                    .deadline = absl::Now() + absl::Seconds(30)});
    if (!prefilled.ok()) {
      run.status = prefilled.status();
      return run;
    }
    EXPECT_EQ(prefilled->first_token.finish_reason, FinishReason::kNone);
    KvHandoff handoff = prefilled->kv;
    // No shared-memory segment named: the decode worker's transport falls back to each rank's
    // KvServer.
    if (route == Route::kTcp) {
      for (KvSource& source : handoff.rank_sources) source.shm_name.clear();
    }
    edit(handoff);
    run.tokens.push_back(prefilled->first_token.token_id);
    run.status = decode.Decode(DecodeCall{
        .request_id = id,
        .prompt_token_ids = prompt,
        .generated_token_ids = {prefilled->first_token.token_id},
        .params = Greedy(),
        .kv = std::move(handoff),
        .deadline = absl::Now() + absl::Seconds(30),
        .emit = [&](const DecodeEvent& event) {
          if (event.kv_transferred) {
            run.report = *event.kv_transferred;
          } else {
            run.tokens.push_back(event.token->token_id);
          }
          return true;
        }});
    return run;
  }

  // The reference: every prompt handed off from a one-rank instance to a one-rank instance.
  static const std::vector<std::vector<int32_t>>& ReferenceTokens() {
    static const std::vector<std::vector<int32_t>>* tokens = [] {
      auto* out = new std::vector<std::vector<int32_t>>();
      std::unique_ptr<Worker> prefill = MakeWorker(WorkerRole::kPrefill, Tp(1));
      std::unique_ptr<Worker> decode = MakeWorker(WorkerRole::kDecode, Tp(1));
      const std::vector<std::vector<int32_t>> prompts = Prompts();
      for (size_t i = 0; i < prompts.size(); ++i) {
        const std::string id = absl::StrCat("ref", i);
        HandoffRun run = HandOff(*prefill, *decode, id, prompts[i], Route::kShm);
        EXPECT_THAT(run.status, IsOk());
        EXPECT_THAT(prefill->Release(id), IsOk());
        out->push_back(std::move(run.tokens));
      }
      return out;
    }();
    return *tokens;
  }

  // The KV bytes the ranks of an instance of `layout` own for a request of `num_tokens` tokens.
  static int64_t OwnedBytes(const ParallelLayout& layout, int num_tokens) {
    const testing::TinyModelSpec spec = testing::TinyEngineSpec();
    const KvPoolShape model{.num_layers = spec.num_layers, .num_kv_heads = spec.num_kv_heads,
                            .head_dim = testing::TinyHeadDim(spec), .block_size = kBlockSize};
    const int64_t num_blocks = (num_tokens + kBlockSize - 1) / kBlockSize;
    int64_t bytes = 0;
    for (int r = 0; r < layout.num_ranks(); ++r) {
      absl::StatusOr<KvRankShard> rank = MakeKvRankShard(model, layout, r);
      EXPECT_THAT(rank, IsOk());
      bytes += OwnedKvBytes(*rank).per_block_bytes * num_blocks;
    }
    return bytes;
  }

  // Polls until the worker holds no block and no sequence, or 5 s pass.
  static bool Empty(const Worker& worker) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (absl::Now() < deadline) {
      const WorkerStatsSnapshot stats = worker.Stats();
      if (stats.engine.num_blocks_used == 0 && stats.engine.num_sequences == 0 &&
          stats.num_requests_holding_kv == 0 && stats.num_requests_waiting_for_kv == 0) {
        return true;
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    return false;
  }

  // Hands every prompt off from a `prefill_layout` instance to a `decode_layout` one over `route`
  // and checks tokens, reported bytes, the hand-off's form, and that nothing stays held.
  static void ExpectHandoffsMatchTheReference(const ParallelLayout& prefill_layout,
                                              const ParallelLayout& decode_layout, Route route) {
    const std::vector<std::vector<int32_t>>& expected = ReferenceTokens();
    std::unique_ptr<Worker> prefill = MakeWorker(WorkerRole::kPrefill, prefill_layout);
    std::unique_ptr<Worker> decode = MakeWorker(WorkerRole::kDecode, decode_layout);
    ASSERT_NE(prefill, nullptr);
    ASSERT_NE(decode, nullptr);
    ASSERT_EQ(prefill->kv_sources().size(), static_cast<size_t>(prefill_layout.num_ranks()));
    const std::vector<std::vector<int32_t>> prompts = Prompts();
    for (size_t i = 0; i < prompts.size(); ++i) {
      SCOPED_TRACE(absl::StrCat("prompt of ", prompts[i].size(), " tokens"));
      const std::string id = absl::StrCat("r", i);
      const HandoffRun run = HandOff(*prefill, *decode, id, prompts[i], route);
      ASSERT_THAT(run.status, IsOk());
      EXPECT_EQ(run.tokens, expected[i]);
      ASSERT_TRUE(run.report.has_value());
      EXPECT_EQ(run.report->num_bytes,
                OwnedBytes(decode_layout, static_cast<int>(prompts[i].size())));
      EXPECT_LE(run.report->start_us, run.report->end_us);
      ASSERT_THAT(prefill->Release(id), IsOk());
    }
    EXPECT_TRUE(Empty(*prefill));
    EXPECT_TRUE(Empty(*decode));
  }

  static testing::ScopedTempDir* model_dir_;
};

testing::ScopedTempDir* LayoutHandoffTest::model_dir_ = nullptr;

TEST_F(LayoutHandoffTest, Tp2ToTp1) { ExpectHandoffsMatchTheReference(Tp(2), Tp(1), Route::kShm); }
TEST_F(LayoutHandoffTest, Tp1ToTp2) { ExpectHandoffsMatchTheReference(Tp(1), Tp(2), Route::kShm); }
TEST_F(LayoutHandoffTest, Pp2ToTp2) { ExpectHandoffsMatchTheReference(Pp(2), Tp(2), Route::kShm); }
TEST_F(LayoutHandoffTest, Tp2Pp2ToPp2) {
  ExpectHandoffsMatchTheReference(TpPp(2, 2), Pp(2), Route::kShm);
}
TEST_F(LayoutHandoffTest, Tp2ToTp2SameLayout) {
  ExpectHandoffsMatchTheReference(Tp(2), Tp(2), Route::kShm);
}
// Equal layouts pull whole blocks rank to rank; different ones pull re-sliced slabs.
TEST_F(LayoutHandoffTest, Tp2ToTp2SameLayoutOverTcp) {
  ExpectHandoffsMatchTheReference(Tp(2), Tp(2), Route::kTcp);
}
TEST_F(LayoutHandoffTest, Tp2ToTp1OverTcp) {
  ExpectHandoffsMatchTheReference(Tp(2), Tp(1), Route::kTcp);
}
TEST_F(LayoutHandoffTest, Tp1ToTp2OverTcp) {
  ExpectHandoffsMatchTheReference(Tp(1), Tp(2), Route::kTcp);
}
TEST_F(LayoutHandoffTest, Pp2ToTp2OverTcp) {
  ExpectHandoffsMatchTheReference(Pp(2), Tp(2), Route::kTcp);
}
TEST_F(LayoutHandoffTest, Tp2Pp2ToPp2OverTcp) {
  ExpectHandoffsMatchTheReference(TpPp(2, 2), Pp(2), Route::kTcp);
}

// The prefill worker describes every rank: one shm segment and one KV server each, the layout, and
// the model's (not a rank's) KV shape.
TEST_F(LayoutHandoffTest, APrefillHandoffNamesEveryRank) {
  std::unique_ptr<Worker> prefill = MakeWorker(WorkerRole::kPrefill, TpPp(2, 2));
  ASSERT_NE(prefill, nullptr);
  absl::StatusOr<PrefillResult> prefilled =
      prefill->Prefill(PrefillCall{.request_id = "r",
                                   .prompt_token_ids = Prompts()[2],
                                   .params = Greedy(),
                                   .kv_lease = absl::Minutes(1),
                                   .deadline = absl::Now() + absl::Seconds(30)});
  ASSERT_THAT(prefilled, IsOk());
  const KvHandoff& handoff = prefilled->kv;
  EXPECT_EQ(handoff.layout, TpPp(2, 2));
  EXPECT_EQ(handoff.model_shape,
            (KvPoolShape{.num_layers = 2, .num_kv_heads = 2, .head_dim = 8, .block_size = kBlockSize}));
  EXPECT_EQ(handoff.num_tokens, 23);
  EXPECT_EQ(handoff.blocks.size(), 6u);
  ASSERT_EQ(handoff.rank_sources.size(), 4u);
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_FALSE(handoff.rank_sources[r].shm_name.empty());
    EXPECT_FALSE(handoff.rank_sources[r].tcp_address.empty());
    for (size_t q = 0; q < r; ++q) {
      EXPECT_NE(handoff.rank_sources[r].shm_name, handoff.rank_sources[q].shm_name);
      EXPECT_NE(handoff.rank_sources[r].tcp_address, handoff.rank_sources[q].tcp_address);
    }
  }
  EXPECT_THAT(ValidateKvHandoff(handoff), IsOk());
  ASSERT_THAT(prefill->Release("r"), IsOk());
  EXPECT_TRUE(Empty(*prefill));
}

// Stats say what each rank holds: its layers and KV heads, stage-major.
TEST_F(LayoutHandoffTest, StatsListEachRanksHoldings) {
  std::unique_ptr<Worker> worker = MakeWorker(WorkerRole::kDecode, TpPp(2, 2));
  ASSERT_NE(worker, nullptr);
  const std::vector<RankHoldings> ranks = worker->Stats().ranks;
  ASSERT_EQ(ranks.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(r);
    EXPECT_EQ(ranks[r].shard.spec.rank_idx(), r);
    EXPECT_EQ(ranks[r].shard.layer_begin, r / 2);
    EXPECT_EQ(ranks[r].shard.layer_end, r / 2 + 1);
    EXPECT_EQ(ranks[r].shard.kv_head_begin, r % 2);
    EXPECT_EQ(ranks[r].shard.kv_head_end, r % 2 + 1);
    EXPECT_GT(ranks[r].weight_bytes, 0);
    // One layer x one KV head x K and V x block_size x head_dim floats.
    EXPECT_EQ(ranks[r].kv_block_bytes, 1 * 1 * 2 * kBlockSize * 8 * 4);
  }
}

// One decode rank's pull fails (its prefill rank is unreachable): the request fails ABORTED (the
// source failed, not this worker: the scheduler runs the prompt again) naming that rank, and the
// blocks it was given on every rank are freed.
TEST_F(LayoutHandoffTest, AFailedRankPullFailsTheRequestAndFreesItsBlocks) {
  std::unique_ptr<Worker> prefill = MakeWorker(WorkerRole::kPrefill, Tp(2));
  std::unique_ptr<Worker> decode = MakeWorker(WorkerRole::kDecode, Tp(2));
  ASSERT_NE(prefill, nullptr);
  ASSERT_NE(decode, nullptr);
  const HandoffRun run = HandOff(*prefill, *decode, "r", Prompts()[1], Route::kShm,
                                 [](KvHandoff& handoff) {
                                   handoff.rank_sources[1].shm_name = "/baton-kv-gone-1";
                                   handoff.rank_sources[1].tcp_address.clear();
                                 });
  EXPECT_THAT(run.status, StatusIs(absl::StatusCode::kAborted,
                                   HasSubstr("KV pull from the prefill instance failed: decode rank 1: ")));
  EXPECT_FALSE(run.report.has_value());
  EXPECT_TRUE(Empty(*decode));
  ASSERT_THAT(prefill->Release("r"), IsOk());
  EXPECT_TRUE(Empty(*prefill));
}

// Instances whose models' KV do not match (here: block sizes) cannot hand off: the decode worker
// refuses at once, before taking room.
TEST_F(LayoutHandoffTest, AHandoffBetweenMismatchedModelsIsRefused) {
  std::unique_ptr<Worker> prefill = MakeWorker(WorkerRole::kPrefill, Tp(2));
  std::unique_ptr<Worker> decode = MakeWorker(WorkerRole::kDecode, Tp(1), /*block_size=*/8);
  ASSERT_NE(prefill, nullptr);
  ASSERT_NE(decode, nullptr);
  const HandoffRun run = HandOff(*prefill, *decode, "r", Prompts()[0], Route::kShm);
  EXPECT_THAT(run.status, StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr("differs from the decode instance's")));
  EXPECT_TRUE(Empty(*decode));
  ASSERT_THAT(prefill->Release("r"), IsOk());
  EXPECT_TRUE(Empty(*prefill));
}

}  // namespace
}  // namespace baton::runtime
