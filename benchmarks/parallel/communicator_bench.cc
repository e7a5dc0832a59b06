// The in-process CPU communicator's all-reduce (2 and 4 thread ranks) against a memcpy of the same
// bytes, for the activations of the `small` model (hidden 768): a decode step of batch 1, 8 and 32
// tokens and a 512-token prefill. Bytes/s count one rank's buffer (count * 4) per call, as does the
// memcpy, so the time ratio of the two is the cost of the all-reduce in memcpys.
//
//   ./communicator_bench --benchmark_filter=AllReduce/   (--benchmark_min_time=... to steady it)
//
// The rank threads must each have a core for the figure to mean anything: with fewer cores than
// ranks the barriers wait for the scheduler.
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "runtime/parallel/cpu_communicator.h"

namespace baton::runtime {
namespace {

constexpr int kHidden = 768;

// The communicators of a group of `num_ranks`, created before the benchmarks run; benchmark thread
// i is rank i.
std::map<int, std::vector<std::unique_ptr<Communicator>>>& Groups() {
  static auto* groups = new std::map<int, std::vector<std::unique_ptr<Communicator>>>();
  return *groups;
}

bool CreateGroup(int num_ranks) {
  auto group = CpuCommGroup::Create({.num_ranks = num_ranks, .timeout = absl::Seconds(20)});
  if (!group.ok()) return false;
  for (int r = 0; r < num_ranks; ++r) {
    auto comm = (*group)->Join(r);
    if (!comm.ok()) return false;
    Groups()[num_ranks].push_back(std::move(*comm));
  }
  return true;
}

void BM_AllReduce(benchmark::State& state) {
  const size_t count = static_cast<size_t>(state.range(0)) * kHidden;
  Communicator& comm = *Groups().at(state.threads())[state.thread_index()];
  std::vector<float> data(count, 1.0f);
  for (auto _ : state) {
    if (absl::Status status = comm.AllReduceSum(data.data(), count); !status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * count * sizeof(float));
  state.counters["tokens"] =
      benchmark::Counter(static_cast<double>(state.range(0)), benchmark::Counter::kAvgThreads);
}

void BM_Memcpy(benchmark::State& state) {
  const size_t count = static_cast<size_t>(state.range(0)) * kHidden;
  std::vector<float> src(count, 1.0f);
  std::vector<float> dst(count);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), count * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * count * sizeof(float));
  state.counters["tokens"] =
      benchmark::Counter(static_cast<double>(state.range(0)), benchmark::Counter::kAvgThreads);
}

// Tokens per call: decode batches 1, 8, 32 and a 512-token prefill.
BENCHMARK(BM_Memcpy)->Arg(1)->Arg(8)->Arg(32)->Arg(512);
BENCHMARK(BM_AllReduce)->Arg(1)->Arg(8)->Arg(32)->Arg(512)->Threads(2)->UseRealTime();
BENCHMARK(BM_AllReduce)->Arg(1)->Arg(8)->Arg(32)->Arg(512)->Threads(4)->UseRealTime();

}  // namespace
}  // namespace baton::runtime

int main(int argc, char** argv) {
  if (!baton::runtime::CreateGroup(2) || !baton::runtime::CreateGroup(4)) return 1;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
