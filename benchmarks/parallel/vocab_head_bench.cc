// The embedding and lm_head of tp 2 CPU ranks (threads, one core each, CpuCommGroup), replicated
// against vocab-parallel (runtime/model/vocab_head.h), on a `small`-shaped checkpoint
// (scripts/make_checkpoint.py --shape small: hidden 768, vocab 32000, f32). Each rank loads its
// shard with LoadLlamaWeights and runs VocabHead, the code the forward pass runs:
//   - BM_EmbedAndLogits/<vocab_parallel>/<num_tokens>/<num_seqs>: one step's Embed of num_tokens
//     ids and Logits of num_seqs rows, with their collectives (vocab-parallel: an all-reduce of
//     [num_tokens, hidden] f32 and an all-gather of the logits). Decode: num_tokens == num_seqs in
//     {1, 8, 32}; prefill: 512 tokens of one sequence.
//   - BM_Embed and BM_Logits: the two halves alone.
// (One all-reduce of a decode step's activations against a memcpy: communicator_bench.)
// Run with random interleaving so that the replicated and vocab-parallel runs alternate:
//
//   ./vocab_head_bench --model_dir=build/models/small --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
//
// The rank threads must each have a core for the figures to mean anything.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "kernels/common/thread_pool.h"
#include "runtime/backend/cpu_backend.h"
#include "runtime/model/llama_weights.h"
#include "runtime/model/model_config.h"
#include "runtime/model/model_shard.h"
#include "runtime/model/vocab_head.h"
#include "runtime/parallel/cpu_communicator.h"

namespace baton::runtime {
namespace {

constexpr int kTpSize = 2;

// One rank of one mode: its backend, weights, communicator and VocabHead, created before the
// benchmarks run.
struct Rank {
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<CpuBackend> backend;
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<LlamaWeights> weights;
  std::unique_ptr<VocabHead> head;
};

struct Setup {
  ModelConfig config;
  std::vector<Rank> ranks[2];  // [vocab_parallel][tp_rank]
};

Setup& TheSetup() {
  static auto* setup = new Setup();
  return *setup;
}

bool CreateRanks(const std::filesystem::path& model_dir) {
  Setup& setup = TheSetup();
  absl::StatusOr<ModelConfig> config = LoadModelConfig(model_dir);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return false;
  }
  setup.config = *config;
  for (int vocab_parallel = 0; vocab_parallel < 2; ++vocab_parallel) {
    auto group = CpuCommGroup::Create({.num_ranks = kTpSize, .timeout = absl::Seconds(60)});
    if (!group.ok()) return false;
    for (int t = 0; t < kTpSize; ++t) {
      Rank rank;
      rank.pool = std::make_unique<ThreadPool>(1);
      rank.backend = std::make_unique<CpuBackend>(rank.pool.get());
      auto comm = (*group)->Join(t);
      auto shard = MakeModelShard(*config, ShardSpec{.tp_rank = t,
                                                     .tp_size = kTpSize,
                                                     .vocab_parallel = vocab_parallel == 1});
      if (!comm.ok() || !shard.ok()) return false;
      rank.tp = std::move(*comm);
      auto weights = LoadLlamaWeights(model_dir, *config, DType::kF32, rank.pool.get(), &*shard);
      if (!weights.ok()) {
        std::fprintf(stderr, "%s\n", weights.status().ToString().c_str());
        return false;
      }
      rank.weights = std::move(*weights);
      rank.head = std::make_unique<VocabHead>(*config, *shard, *rank.weights, rank.backend.get(),
                                              rank.tp.get());
      setup.ranks[vocab_parallel].push_back(std::move(rank));
    }
  }
  return true;
}

std::vector<int32_t> RandomIds(int n, int vocab) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = dist(rng);
  return ids;
}

std::vector<float> RandomRows(int n, int hidden) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> rows(static_cast<size_t>(n) * hidden);
  for (float& v : rows) v = dist(rng);
  return rows;
}

// Args: vocab_parallel (0/1), num_tokens, num_seqs; `embed` / `logits` pick the halves timed.
void RunHead(benchmark::State& state, bool embed, bool logits) {
  const Setup& setup = TheSetup();
  const int hidden = setup.config.hidden_size;
  const int num_tokens = static_cast<int>(state.range(1));
  const int num_seqs = static_cast<int>(state.range(2));
  VocabHead& head = *setup.ranks[state.range(0)][state.thread_index()].head;
  const std::vector<int32_t> ids = RandomIds(num_tokens, setup.config.vocab_size);
  std::vector<float> x(static_cast<size_t>(num_tokens) * hidden);
  const std::vector<float> h = RandomRows(num_seqs, hidden);
  StepOutput out;
  for (auto _ : state) {
    absl::Status status;
    if (embed) {
      status.Update(head.StageTokens(ids));
      status.Update(head.Embed(num_tokens, x.data()));
    }
    // The logits and a greedy token per sequence, the logits brought to the host as before.
    if (logits) {
      status.Update(head.StageSampling({}, num_seqs));
      status.Update(head.Head(h.data(), num_seqs));
      status.Update(head.Collect(num_seqs, true, &out));
    }
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(x.data());
    benchmark::DoNotOptimize(out.logits.data());
    benchmark::ClobberMemory();
  }
  state.counters["vocab_parallel"] =
      benchmark::Counter(static_cast<double>(state.range(0)), benchmark::Counter::kAvgThreads);
}

void BM_EmbedAndLogits(benchmark::State& state) { RunHead(state, true, true); }
void BM_Embed(benchmark::State& state) { RunHead(state, true, false); }
void BM_Logits(benchmark::State& state) { RunHead(state, false, true); }

// Decode steps of 1, 8 and 32 sequences, and a 512-token prefill of one sequence; replicated (0)
// and vocab-parallel (1) next to each other.
void StepArgs(benchmark::internal::Benchmark* b) {
  for (auto [num_tokens, num_seqs] : {std::pair{1, 1}, {8, 8}, {32, 32}, {512, 1}}) {
    for (int vocab_parallel : {0, 1}) b->Args({vocab_parallel, num_tokens, num_seqs});
  }
  b->ArgNames({"vocab_parallel", "tokens", "seqs"})->Threads(kTpSize)->UseRealTime();
}
BENCHMARK(BM_EmbedAndLogits)->Apply(StepArgs);
BENCHMARK(BM_Embed)->Apply(StepArgs);
BENCHMARK(BM_Logits)->Apply(StepArgs);

}  // namespace
}  // namespace baton::runtime

int main(int argc, char** argv) {
  // --model_dir=DIR (a `small`-shaped checkpoint), taken out before Google Benchmark's flags.
  std::filesystem::path model_dir = "models/small";
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--model_dir=", 0) == 0) {
      model_dir = arg.substr(std::strlen("--model_dir="));
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  if (!baton::runtime::CreateRanks(model_dir)) return 1;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
