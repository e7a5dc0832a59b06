// Tensor and pipeline parallelism in the forward pass: tp x pp ranks run as threads of this
// process (one CpuBackend, ThreadPool(1), KvPool and LlamaModel per rank, CpuCommGroups between
// them) on the same steps as the whole model: a prefill of two prompts, a chunk with a cached
// prefix next to a decode, then greedy decode steps. The last stage's logits must match the whole
// model's up to the order of the TP reductions (max |diff| / max |logit| <= 1e-5 in f32), with the
// same argmax at every step, and every TP rank of the last stage must return the same logits.
// Every TP layout runs with the embedding and lm_head vocab-parallel and replicated
// (ParallelLayout::vocab_parallel), on vocabularies that tp divides and one it does not (97).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/thread_pool.h"
#include "runtime/backend/cpu_backend.h"
#include "runtime/model/llama_model.h"
#include "runtime/parallel/cpu_communicator.h"
#include "tests/testing/checkpoint_layouts.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/step_builder.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;

constexpr int kBlockSize = 4;
constexpr int kMaxBlocksPerSeq = 8;
constexpr int kNumBlocks = 24;
constexpr int kNumDecodeSteps = 5;
constexpr double kMaxRelativeError = 1e-5;

// Steps of this test address up to kMaxBlocksPerSeq blocks per sequence.
struct Step : testing::StepBuilder {
  Step() {
    block_size = kBlockSize;
    max_blocks_per_seq = kMaxBlocksPerSeq;
  }
};

int ArgMax(const float* row, int n) { return static_cast<int>(std::max_element(row, row + n) - row); }

struct ModelVariant {
  std::string name;
  testing::TinyModelSpec spec;
};

struct Layout {
  int tp_size;
  int pp_size;
  bool vocab_parallel = true;

  ParallelLayout parallel() const {
    return {.tp_size = tp_size, .pp_size = pp_size, .vocab_parallel = vocab_parallel};
  }
  std::string Name() const {
    return "tp" + std::to_string(tp_size) + "_pp" + std::to_string(pp_size) +
           (tp_size > 1 && !vocab_parallel ? "_replicated_vocab" : "");
  }
};

// Each layout, and each one with tp > 1 also with a replicated vocabulary.
std::vector<Layout> WithBothVocabModes(std::initializer_list<Layout> layouts) {
  std::vector<Layout> out;
  for (Layout layout : layouts) {
    out.push_back(layout);
    if (layout.tp_size > 1) out.push_back({layout.tp_size, layout.pp_size, false});
  }
  return out;
}

struct Case {
  ModelVariant model;
  Layout layout;
};

// 8 query heads over 2 KV heads (tp 4 replicates each KV head on 2 ranks), 3 layers (pp 3 gives
// each stage one).
testing::TinyModelSpec BaseSpec() {
  testing::TinyModelSpec spec;
  spec.hidden_size = 32;
  spec.num_heads = 8;
  spec.num_kv_heads = 2;
  spec.intermediate_size = 48;
  spec.vocab_size = 96;
  spec.num_layers = 3;
  return spec;
}

std::vector<ModelVariant> Variants() {
  testing::TinyModelSpec llama = BaseSpec();
  testing::TinyModelSpec qwen2 = BaseSpec();
  qwen2.architecture = "Qwen2ForCausalLM";  // q/k/v biases
  qwen2.tie_word_embeddings = true;         // the last stage's lm_head is the table
  testing::TinyModelSpec kv4 = BaseSpec();  // tp 4 divides the KV heads: no replication
  kv4.num_kv_heads = 4;
  kv4.dtype = DType::kBF16;
  testing::TinyModelSpec odd_vocab = qwen2;  // 97 rows: 49 + 48 at tp 2, 25 + 3 x 24 at tp 4
  odd_vocab.vocab_size = 97;
  return {{"llama_8h_2kv", llama},
          {"qwen2_tied_8h_2kv", qwen2},
          {"llama_bf16_8h_4kv", kv4},
          {"qwen2_tied_vocab97", odd_vocab}};
}

// The checkpoint is testing::WriteScaledTinyModel's: unscaled, the f32 noise of merely reordering
// the TP sums reaches 1.2e-5 of the logits (measured); scaled, it is ~4e-7, so the 1e-5 bound tests
// the sharding.

// Runs the whole model and then tp x pp rank threads on model_dir_, and compares.
class ParallelForwardBase : public ::testing::Test {
 protected:
  // Checks every layout claim of the file's top comment; returns the max relative error.
  double ExpectRanksMatchWholeModel(const Layout& layout);

  // Runs the whole model greedily; records the steps and their logits ([num_seqs, vocab] each).
  void RunWholeModel() {
    ThreadPool pool(1);
    CpuBackend cpu(&pool);
    auto model = LlamaModel::Load(model_dir_, DType::kF32, &cpu, &pool);
    ASSERT_THAT(model, IsOk());
    std::printf("[ parallel ] whole model weight bytes: %zu\n",
                (*model)->weights().num_mapped_bytes + (*model)->weights().num_owned_bytes);
    vocab_ = (*model)->config().vocab_size;
    auto kv_pool = KvPool::Create((*model)->KvShape(kBlockSize), kNumBlocks);
    ASSERT_THAT(kv_pool, IsOk());
    std::vector<int32_t> a = {5, 17, 3, 88, 42, 9, 60, 1, 2, 33};
    std::vector<int32_t> b = {7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    const std::vector<int32_t> a_blocks = {3, 7, 1, 4, 12};
    const std::vector<int32_t> b_blocks = {5, 2, 9, 6, 10};
    StepOutput out;
    auto run = [&](const Step& step) {
      ASSERT_THAT((*model)->Forward(step.Batch(), **kv_pool, &out), IsOk());
      steps_.push_back(step);
      whole_logits_.push_back(out.logits);
      // Greedy tokens drawn on the device are the logits' argmax.
      for (size_t s = 0; s < out.token_ids.size(); ++s) {
        EXPECT_EQ(out.token_ids[s], ArgMax(out.logits.data() + s * vocab_, vocab_));
      }
    };
    // Step 0: prompt a, and the first 6 tokens of b.
    Step first;
    first.Add(a, 0, 10, a_blocks);
    first.Add(b, 0, 6, b_blocks);
    run(first);
    a.push_back(ArgMax(out.logits.data(), vocab_));
    // Step 1: a decodes; b's second chunk over its cached prefix of 6.
    Step second;
    second.num_decode_seqs = 1;
    second.Add(a, 10, 11, a_blocks);
    second.Add(b, 6, 10, b_blocks);
    run(second);
    a.push_back(ArgMax(out.logits.data(), vocab_));
    b.push_back(ArgMax(out.logits.data() + vocab_, vocab_));
    // Greedy decode of both.
    for (int i = 0; i < kNumDecodeSteps; ++i) {
      Step decode;
      decode.num_decode_seqs = 2;
      decode.Add(a, static_cast<int>(a.size()) - 1, static_cast<int>(a.size()), a_blocks);
      decode.Add(b, static_cast<int>(b.size()) - 1, static_cast<int>(b.size()), b_blocks);
      run(decode);
      a.push_back(ArgMax(out.logits.data(), vocab_));
      b.push_back(ArgMax(out.logits.data() + vocab_, vocab_));
    }
  }

  // Runs the recorded steps on tp x pp rank threads; returns the logits of every last-stage rank,
  // [tp_size][step][num_seqs * vocab].
  std::vector<std::vector<std::vector<float>>> RunRanks(const Layout& layout) {
    const auto [tp_size, pp_size, vocab_parallel] = layout;
    const int num_ranks = tp_size * pp_size;
    const CpuCommGroupParams tp_params{.num_ranks = tp_size, .timeout = absl::Seconds(30)};
    const CpuCommGroupParams pp_params{.num_ranks = pp_size, .timeout = absl::Seconds(30)};
    std::vector<std::shared_ptr<CpuCommGroup>> tp_groups, pp_groups;  // per stage, per tp_rank
    for (int s = 0; s < pp_size; ++s) tp_groups.push_back(*CpuCommGroup::Create(tp_params));
    for (int t = 0; t < tp_size; ++t) pp_groups.push_back(*CpuCommGroup::Create(pp_params));
    auto abort_all = [&](const std::string& why) {
      for (auto& g : tp_groups) g->Abort(why);
      for (auto& g : pp_groups) g->Abort(why);
    };
    std::vector<absl::Status> statuses(num_ranks);
    std::vector<std::vector<std::vector<float>>> last_logits(tp_size);
    std::vector<KvPoolShape> kv_shapes(num_ranks);
    std::vector<size_t> weight_bytes(num_ranks);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < num_ranks; ++rank) {
      threads.emplace_back([&, rank] {
        absl::Status status = [&]() -> absl::Status {
          ASSIGN_OR_RETURN(ShardSpec spec, ShardSpecOfRank(layout.parallel(), rank));
          ASSIGN_OR_RETURN(std::unique_ptr<Communicator> tp,
                           tp_groups[spec.pp_rank]->Join(spec.tp_rank));
          ASSIGN_OR_RETURN(std::unique_ptr<Communicator> pp,
                           pp_groups[spec.tp_rank]->Join(spec.pp_rank));
          ThreadPool pool(1);
          CpuBackend cpu(&pool);
          ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
                           LlamaModel::Load(model_dir_, DType::kF32, &cpu, &pool, spec,
                                            ModelComms{.tp = tp.get(), .pp = pp.get()}));
          kv_shapes[rank] = model->KvShape(kBlockSize);
          weight_bytes[rank] =
              model->weights().num_mapped_bytes + model->weights().num_owned_bytes;
          ASSIGN_OR_RETURN(std::unique_ptr<KvPool> kv_pool,
                           KvPool::Create(kv_shapes[rank], kNumBlocks));
          StepOutput out;
          for (const Step& step : steps_) {
            RETURN_IF_ERROR(model->Forward(step.Batch(), *kv_pool, &out));
            if (model->IsLastStage()) {
              last_logits[spec.tp_rank].push_back(out.logits);
            } else if (!out.logits.empty() || !out.token_ids.empty()) {
              return absl::InternalError("a stage before the last returned logits");
            }
          }
          return absl::OkStatus();
        }();
        if (!status.ok()) abort_all(std::string(status.message()));
        statuses[rank] = status;
      });
    }
    for (std::thread& t : threads) t.join();
    for (int rank = 0; rank < num_ranks; ++rank) {
      EXPECT_THAT(statuses[rank], IsOk()) << "rank " << rank;
    }
    // For the record: each rank's weight bytes (mapped + owned), in rank order.
    std::printf("[ parallel ] %s weight bytes per rank:", layout.Name().c_str());
    for (size_t bytes : weight_bytes) std::printf(" %zu", bytes);
    std::printf("\n");
    // Each rank's KV pool holds its layers and its KV heads.
    absl::StatusOr<ModelConfig> config = LoadModelConfig(model_dir_);
    EXPECT_THAT(config, IsOk());
    for (int rank = 0; rank < num_ranks && config.ok(); ++rank) {
      absl::StatusOr<ShardSpec> spec = ShardSpecOfRank(layout.parallel(), rank);
      absl::StatusOr<ModelShard> shard = MakeModelShard(*config, *spec);
      EXPECT_THAT(shard, IsOk());
      if (!shard.ok()) break;
      EXPECT_EQ(kv_shapes[rank].num_layers, shard->num_layers());
      EXPECT_EQ(kv_shapes[rank].num_kv_heads,
                std::max(1, config->num_kv_heads / tp_size));
    }
    return last_logits;
  }

  std::filesystem::path model_dir_;
  int vocab_ = 0;
  std::vector<Step> steps_;
  std::vector<std::vector<float>> whole_logits_;  // [step][num_seqs * vocab]
};

double ParallelForwardBase::ExpectRanksMatchWholeModel(const Layout& layout) {
  const int tp_size = layout.tp_size;
  RunWholeModel();
  EXPECT_EQ(steps_.size(), size_t{2 + kNumDecodeSteps});
  const auto last_logits = RunRanks(layout);
  double max_relative_error = 0;
  for (int t = 0; t < tp_size; ++t) {
    SCOPED_TRACE(::testing::Message() << "last-stage tp_rank " << t);
    EXPECT_EQ(last_logits[t].size(), steps_.size());
    if (last_logits[t].size() != steps_.size()) return 1;
    for (size_t i = 0; i < steps_.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "step " << i);
      const std::vector<float>& expected = whole_logits_[i];
      const std::vector<float>& actual = last_logits[t][i];
      EXPECT_EQ(actual.size(), expected.size());
      if (actual.size() != expected.size()) return 1;
      // The TP ranks of the last stage hold the same residual stream: the same logits, bit for bit.
      EXPECT_EQ(std::memcmp(actual.data(), last_logits[0][i].data(), sizeof(float) * actual.size()),
                0);
      double max_abs = 0, max_diff = 0;
      for (size_t j = 0; j < expected.size(); ++j) {
        max_abs = std::max(max_abs, std::abs(static_cast<double>(expected[j])));
        max_diff = std::max(max_diff, std::abs(static_cast<double>(actual[j]) - expected[j]));
      }
      EXPECT_GT(max_abs, 0);
      max_relative_error = std::max(max_relative_error, max_diff / max_abs);
      for (size_t s = 0; s * vocab_ < expected.size(); ++s) {
        EXPECT_EQ(ArgMax(actual.data() + s * vocab_, vocab_),
                  ArgMax(expected.data() + s * vocab_, vocab_))
            << "sequence " << s;
      }
    }
  }
  EXPECT_LE(max_relative_error, kMaxRelativeError);
  if (tp_size == 1) {
    EXPECT_EQ(max_relative_error, 0);  // no reduction reordered: bit-identical
  }
  return max_relative_error;
}

class ParallelForwardTest : public ParallelForwardBase,
                            public ::testing::WithParamInterface<Case> {
 protected:
  void SetUp() override {
    model_dir_ = dir_.path();
    ASSERT_THAT(testing::WriteScaledTinyModel(model_dir_, GetParam().model.spec), IsOk());
  }
  testing::ScopedTempDir dir_;
};

TEST_P(ParallelForwardTest, LastStageLogitsMatchTheWholeModel) {
  const double error = ExpectRanksMatchWholeModel(GetParam().layout);
  // Reported for the record (max |diff| / max |logit| over every step, sequence and rank).
  std::printf("[ parallel ] %s %s: max relative error %.3g\n", GetParam().model.name.c_str(),
              GetParam().layout.Name().c_str(), error);
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const ModelVariant& model : Variants()) {
    for (Layout layout : WithBothVocabModes(
             {Layout{2, 1}, Layout{4, 1}, Layout{1, 2}, Layout{1, 3}, Layout{2, 2}})) {
      cases.push_back({model, layout});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Layouts, ParallelForwardTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) {
                           return info.param.model.name + "_" + info.param.layout.Name();
                         });

struct CheckpointCase {
  std::string model;
  Layout layout;
};

class ParallelForwardCheckpointTest : public ParallelForwardBase,
                                      public ::testing::WithParamInterface<CheckpointCase> {
 protected:
  void SetUp() override {
    std::optional<std::filesystem::path> dir = testing::GeneratedCheckpoint(GetParam().model);
    if (!dir) GTEST_SKIP() << "no generated " << GetParam().model << " (BATON_TEST_MODELS_DIR)";
    model_dir_ = *dir;
  }
};

TEST_P(ParallelForwardCheckpointTest, LastStageLogitsMatchTheWholeModel) {
  const double error = ExpectRanksMatchWholeModel(GetParam().layout);
  std::printf("[ parallel ] %s %s: max relative error %.3g\n", GetParam().model.c_str(),
              GetParam().layout.Name().c_str(), error);
}

// testing::CheckpointLayouts(), each with the vocabulary split and replicated.
std::vector<CheckpointCase> CheckpointCases() {
  std::vector<CheckpointCase> cases;
  for (const testing::CheckpointLayout& c : testing::CheckpointLayouts()) {
    for (Layout layout : WithBothVocabModes({Layout{c.layout.tp_size, c.layout.pp_size}})) {
      cases.push_back({c.model, layout});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, ParallelForwardCheckpointTest,
                         ::testing::ValuesIn(CheckpointCases()), [](const auto& info) {
                           std::string name = info.param.model + "_" + info.param.layout.Name();
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(ParallelForwardErrorTest, TpThatDoesNotFitTheHeadsIsInvalid) {
  testing::ScopedTempDir dir;
  testing::TinyModelSpec spec = BaseSpec();  // 8 heads, 2 KV heads
  ASSERT_THAT(testing::WriteTinyModel(dir.path(), spec), IsOk());
  ThreadPool pool(1);
  CpuBackend cpu(&pool);
  auto group = CpuCommGroup::Create({.num_ranks = 3});
  ASSERT_THAT(group, IsOk());
  auto comm = (*group)->Join(0);
  ASSERT_THAT(comm, IsOk());
  EXPECT_THAT(LlamaModel::Load(dir.path(), DType::kF32, &cpu, &pool, ShardSpec{.tp_size = 3},
                               ModelComms{.tp = comm->get()}),
              absl_testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace baton::runtime
