// baton_layout_bench: prefill and decode throughput of the CPU engine under several tp x pp layouts
// of one checkpoint, measured interleaved in one run and reported as ratios against the first.
//
//   build/bin/baton_layout_bench --model build/models/small --layouts 1x1x2,2x1x1,1x2x1
//
// A layout is TPxPPxTHREADS[/STEPS] (threads per rank; steps in flight, by default one per
// stage): 1x1x2 is one rank with 2 threads, 2x1x1 two tensor-parallel ranks of one thread each,
// 1x2x1/1 two pipeline stages that run one step at a time (the engine before steps in flight). Each round runs every layout once, in turn, so drift of
// a shared machine hits all of them alike; medians over --rounds rounds are reported. Measured:
//   - prefill of one prompt of --prompt-len tokens (one sequence: one micro-batch, no pipeline
//     overlap), and of --prompts prompts of --prompt-len / --prompts tokens each (pp stages overlap
//     on micro-batches);
//   - decode tokens/s summed over batches of --batches sequences;
//   - for tp > 1: the time of one all-reduce of a decode step's activations [batch, hidden] f32
//     between the tp rank threads (CpuCommGroup), and the share of a decode step the
//     2 x num_layers all-reduces of a step take at that rate: where a TP layout's time goes.
// Prints one JSON object.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "benchmarks/engine/engine_timing.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/engine.h"
#include "runtime/parallel/cpu_communicator.h"

namespace {

using baton::bench::Clock;
using baton::bench::DecodeTokensPerSecond;
using baton::bench::Median;
using baton::bench::PrefillTokensPerSecond;
using baton::bench::Seconds;
using baton::runtime::Engine;

struct Layout {
  int tp = 1;
  int pp = 1;
  int threads = 1;
  int steps_in_flight = 0;  // 0: the engine's default, pp
  std::string name;
};

bool ParseLayout(const std::string& text, Layout* layout) {
  const std::vector<std::string> shape_steps = absl::StrSplit(text, '/');
  const std::vector<std::string> parts = absl::StrSplit(shape_steps[0], 'x');
  if (shape_steps.size() > 2 || parts.size() != 3 || !absl::SimpleAtoi(parts[0], &layout->tp) ||
      !absl::SimpleAtoi(parts[1], &layout->pp) || !absl::SimpleAtoi(parts[2], &layout->threads) ||
      layout->tp < 1 || layout->pp < 1 || layout->threads < 1) {
    return false;
  }
  if (shape_steps.size() == 2 &&
      (!absl::SimpleAtoi(shape_steps[1], &layout->steps_in_flight) || layout->steps_in_flight < 1)) {
    return false;
  }
  layout->name = "tp" + parts[0] + "_pp" + parts[1] + "_t" + parts[2];
  if (shape_steps.size() == 2) layout->name += "_steps" + shape_steps[1];
  return true;
}

// Seconds per AllReduceSum of `count` floats between `num_ranks` threads (median of 200).
double AllReduceSeconds(int num_ranks, size_t count) {
  auto group = *baton::runtime::CpuCommGroup::Create({.num_ranks = num_ranks});
  constexpr int kIters = 200;
  std::vector<double> times(kIters);
  std::vector<std::thread> threads;
  for (int r = 0; r < num_ranks; ++r) {
    threads.emplace_back([&, r] {
      auto comm = *group->Join(r);
      std::vector<float> data(count, 1.0f);
      for (int i = 0; i < kIters; ++i) {
        (void)comm->Barrier();
        const auto start = Clock::now();
        (void)comm->AllReduceSum(data.data(), count);
        if (r == 0) times[i] = Seconds(Clock::now() - start);
      }
    });
  }
  for (auto& t : threads) t.join();
  return Median(times);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Prefill/decode throughput of the CPU engine under tp x pp layouts"};
  std::string model_dir, dtype = "f32";
  std::vector<std::string> layout_texts = {"1x1x2", "2x1x1", "1x2x1"};
  int prompt_len = 512, prompts = 4, context_len = 128, decode_steps = 16, rounds = 3;
  std::vector<int> batches = {1, 8, 32};
  app.add_option("--model", model_dir, "Checkpoint directory")->required();
  app.add_option("--dtype", dtype, "f32, bf16 or f16")->check(CLI::IsMember({"f32", "bf16", "f16"}));
  app.add_option("--layouts", layout_texts,
                 "TPxPPxTHREADS[/STEPS] per layout; the first is the baseline")
      ->delimiter(',');
  app.add_option("--prompt-len", prompt_len, "Prefill tokens per measurement");
  app.add_option("--prompts", prompts, "Prompts the batched prefill splits --prompt-len into");
  app.add_option("--context-len", context_len, "Prompt length before decode");
  app.add_option("--decode-steps", decode_steps, "Decode steps timed per batch");
  app.add_option("--batches", batches, "Decode batch sizes")->delimiter(',');
  app.add_option("--rounds", rounds, "Interleaved rounds (medians reported)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  constexpr int kMaxModelLen = 2048;
  if (prompt_len < 1 || prompt_len + 1 > kMaxModelLen || prompts < 1 || prompts > prompt_len ||
      context_len < 1 || decode_steps < 1 || context_len + decode_steps + 1 > kMaxModelLen) {
    std::fprintf(stderr, "baton_layout_bench: need 1 <= --prompts <= --prompt-len < %d and "
                         "--context-len + --decode-steps + 1 <= %d\n", kMaxModelLen, kMaxModelLen);
    return 2;
  }
  std::vector<Layout> layouts(layout_texts.size());
  std::vector<std::unique_ptr<Engine>> engines;
  for (size_t i = 0; i < layouts.size(); ++i) {
    if (!ParseLayout(layout_texts[i], &layouts[i])) {
      std::fprintf(stderr, "baton_layout_bench: --layouts: '%s' is not TPxPPxTHREADS[/STEPS]\n",
                   layout_texts[i].c_str());
      return 2;
    }
    baton::runtime::EngineConfig config{
        .model_dir = model_dir,
        .weight_dtype = dtype == "bf16"  ? baton::DType::kBF16
                        : dtype == "f16" ? baton::DType::kF16
                                         : baton::DType::kF32,
        .parallel = {.tp_size = layouts[i].tp, .pp_size = layouts[i].pp},
        .num_threads = layouts[i].threads,
        .kv_cache_bytes = size_t{1} << 30,
        .max_num_seqs = 64,
        .max_model_len = kMaxModelLen,
        .max_steps_in_flight = layouts[i].steps_in_flight};
    auto engine = Engine::Create(config);
    if (!engine.ok()) {
      std::fprintf(stderr, "baton_layout_bench: %s: %s\n", layout_texts[i].c_str(),
                   std::string(engine.status().message()).c_str());
      return 1;
    }
    engines.push_back(*std::move(engine));
  }

  std::mt19937 rng(42);
  for (auto& engine : engines) (void)PrefillTokensPerSecond(*engine, 1, 32, rng);  // page in
  // [layout][metric] -> one value per round.
  std::vector<std::map<std::string, std::vector<double>>> samples(layouts.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < layouts.size(); ++i) {
      Engine& engine = *engines[i];
      auto& s = samples[i];
      s["prefill_1_prompt"].push_back(PrefillTokensPerSecond(engine, 1, prompt_len, rng));
      s["prefill_" + std::to_string(prompts) + "_prompts"].push_back(
          PrefillTokensPerSecond(engine, prompts, prompt_len / prompts, rng));
      for (int batch : batches) {
        s["decode_" + std::to_string(batch)].push_back(
            DecodeTokensPerSecond(engine, batch, context_len, decode_steps, rng));
      }
    }
  }

  const auto& model = engines[0]->model_config();
  nlohmann::json result = {{"model", model_dir}, {"dtype", dtype}, {"rounds", rounds},
                           {"baseline", layouts[0].name}};
  for (size_t i = 0; i < layouts.size(); ++i) {
    nlohmann::json& out = result["layouts"][layouts[i].name];
    for (const auto& [metric, values] : samples[i]) {
      const double median = Median(values);
      out[metric + "_tokens_per_s"] = median;
      out[metric + "_vs_baseline"] = median / Median(samples[0].at(metric));
    }
    if (layouts[i].tp > 1) {
      for (int batch : batches) {
        const double seconds = AllReduceSeconds(layouts[i].tp, size_t(batch) * model.hidden_size);
        const double step_seconds = batch / Median(samples[i].at("decode_" + std::to_string(batch)));
        out["allreduce_us"][std::to_string(batch)] = seconds * 1e6;
        out["allreduce_share_of_decode_step"][std::to_string(batch)] =
            2.0 * model.num_layers * seconds / step_seconds;
      }
    }
  }
  std::printf("%s\n", result.dump(1).c_str());
  return 0;
}
