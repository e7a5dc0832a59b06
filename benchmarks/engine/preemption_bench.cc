// baton_preemption_bench: what preemption costs the engine, swapping the victims' KV to host memory
// against computing it again.
//
//   build/bin/baton_preemption_bench --model build/models/small --kv-cache-mib 24 --requests 16
//
// --requests greedy requests of --prompt-len + --output-len tokens arrive at once at an engine whose
// KV cache (--kv-cache-mib) holds fewer tokens than they grow to, so decodes preempt. Each round runs
// the same requests on two engines, in turn, so drift of a shared machine hits both alike: one with
// no swap space (victims recomputed, vLLM v1's rule) and one with --swap-space-mib (victims swapped
// out and back, DistServe's and vLLM v0's). Reported per variant, medians over --rounds: the wall
// time, generated tokens/s, the median and p90 over requests of their TPOT (first token to last,
// per token), and the preemptions by kind. The two variants must give the same tokens. Prints one
// JSON object.
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "benchmarks/bench/summary.h"
#include "benchmarks/engine/engine_timing.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/engine.h"

namespace {

using baton::bench::Clock;
using baton::bench::Greedy;
using baton::bench::Median;
using baton::bench::RandomPrompt;
using baton::bench::Seconds;
using baton::runtime::Engine;
using baton::runtime::SeqId;

constexpr int kBlockSize = 16;

struct Run {
  double wall_s = 0;
  double tokens_per_s = 0;
  double tpot_p50_ms = 0;
  double tpot_p90_ms = 0;
  int64_t swap_outs = 0;
  int64_t recomputes = 0;
  std::map<SeqId, std::vector<int32_t>> tokens;
};

Run RunBatch(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int output_len) {
  const int64_t swap_outs_before = engine.num_swap_outs();
  const int64_t recomputes_before = engine.num_recomputes();
  std::map<SeqId, std::vector<Clock::time_point>> times;
  Run run;
  const auto start = Clock::now();
  for (const auto& prompt : prompts) (void)*engine.AddRequest(prompt, Greedy(output_len));
  int64_t num_tokens = 0;
  while (engine.HasWork()) {
    const auto outputs = *engine.Step();
    const auto now = Clock::now();
    for (const auto& out : outputs) {
      times[out.seq_id].push_back(now);
      run.tokens[out.seq_id].push_back(out.token_id);
    }
    num_tokens += static_cast<int64_t>(outputs.size());
  }
  run.wall_s = Seconds(Clock::now() - start);
  run.tokens_per_s = num_tokens / run.wall_s;
  std::vector<double> tpot_ms;
  for (const auto& [id, t] : times) {
    if (t.size() > 1) tpot_ms.push_back(1e3 * Seconds(t.back() - t.front()) / (t.size() - 1));
  }
  std::sort(tpot_ms.begin(), tpot_ms.end());
  run.tpot_p50_ms = baton::bench::Percentile(tpot_ms, 50);
  run.tpot_p90_ms = baton::bench::Percentile(tpot_ms, 90);
  run.swap_outs = engine.num_swap_outs() - swap_outs_before;
  run.recomputes = engine.num_recomputes() - recomputes_before;
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Preemption cost of the engine: swap against recompute"};
  std::string model;
  std::string dtype = "f32";
  int threads = 1, requests = 16, prompt_len = 256, output_len = 128, rounds = 3;
  size_t kv_cache_mib = 24, swap_space_mib = 256;
  app.add_option("--model", model, "Checkpoint directory")->required();
  app.add_option("--dtype", dtype, "Weight dtype: f32, bf16 or f16")->check(CLI::IsMember({"f32", "bf16", "f16"}));
  app.add_option("--threads", threads, "Threads")->check(CLI::PositiveNumber);
  app.add_option("--requests", requests, "Requests, all arriving at once")->check(CLI::PositiveNumber);
  app.add_option("--prompt-len", prompt_len, "Prompt tokens per request")->check(CLI::PositiveNumber);
  app.add_option("--output-len", output_len, "Generated tokens per request")->check(CLI::PositiveNumber);
  app.add_option("--kv-cache-mib", kv_cache_mib, "KV cache of both engines, MiB")->check(CLI::PositiveNumber);
  app.add_option("--swap-space-mib", swap_space_mib, "Swap space of the swapping engine, MiB")
      ->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "Rounds; medians reported")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  auto make = [&](size_t swap_bytes) {
    return Engine::Create(baton::runtime::EngineConfig{
        .model_dir = model,
        .weight_dtype = *baton::DTypeFromName(dtype),
        .num_threads = threads,
        .block_size = kBlockSize,
        .kv_cache_bytes = kv_cache_mib << 20,
        .max_num_seqs = requests,
        .max_model_len = prompt_len + output_len,
        .swap_space_bytes = swap_bytes});
  };
  auto recompute = make(0);
  auto swap = make(swap_space_mib << 20);
  for (auto* engine : {&recompute, &swap}) {
    if (!engine->ok()) {
      std::fprintf(stderr, "baton_preemption_bench: %s\n", std::string(engine->status().message()).c_str());
      return 1;
    }
  }
  std::mt19937 rng(0);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < requests; ++i) {
    prompts.push_back(RandomPrompt(prompt_len, (*recompute)->model_config().vocab_size, rng));
  }
  std::map<std::string, std::vector<Run>> runs;
  for (int r = 0; r < rounds; ++r) {
    runs["recompute"].push_back(RunBatch(**recompute, prompts, output_len));
    runs["swap"].push_back(RunBatch(**swap, prompts, output_len));
    std::fprintf(stderr, "round %d: recompute %.2f s, swap %.2f s\n", r + 1,
                 runs["recompute"].back().wall_s, runs["swap"].back().wall_s);
  }
  // Sequence ids count on across rounds: compare the tokens in request order.
  auto in_order = [](const Run& run) {
    std::vector<std::vector<int32_t>> out;
    for (const auto& [id, tokens] : run.tokens) out.push_back(tokens);
    return out;
  };
  const bool same_tokens = in_order(runs["recompute"][0]) == in_order(runs["swap"][0]);
  nlohmann::json doc{{"model", model}, {"dtype", dtype}, {"threads", threads},
                     {"requests", requests}, {"prompt_len", prompt_len}, {"output_len", output_len},
                     {"kv_cache_tokens", (*recompute)->allocator().num_blocks() * kBlockSize},
                     {"swap_space_tokens", (*swap)->swap_allocator().num_blocks() * kBlockSize},
                     {"rounds", rounds}, {"same_tokens", same_tokens}};
  for (const auto& [name, named_list] : runs) {
    const auto& list = named_list;  // clang < 16 cannot capture a structured binding
    auto median = [&](auto field) {
      std::vector<double> v;
      for (const Run& run : list) v.push_back(static_cast<double>(run.*field));
      return Median(v);
    };
    doc[name] = {{"wall_s", median(&Run::wall_s)},
                 {"tokens_per_s", median(&Run::tokens_per_s)},
                 {"tpot_p50_ms", median(&Run::tpot_p50_ms)},
                 {"tpot_p90_ms", median(&Run::tpot_p90_ms)},
                 {"swap_outs", median(&Run::swap_outs)},
                 {"recomputes", median(&Run::recomputes)}};
  }
  doc["swap_over_recompute_tokens_per_s"] =
      doc["swap"]["tokens_per_s"].get<double>() / doc["recompute"]["tokens_per_s"].get<double>();
  std::printf("%s\n", doc.dump(2).c_str());
  return same_tokens ? 0 : 2;
}
