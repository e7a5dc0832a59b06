// baton_engine_bench: prefill and decode throughput of the CPU engine on one checkpoint, and decode's
// weight traffic against the memory bandwidth measured in the same run.
//
//   build/bin/baton_engine_bench --model build/models/small --dtype bf16 --threads 2
//   (add --kv-cache-dtype bf16 for a bf16 KV cache)
//
// Prints one JSON object: prefill tokens/s (one prompt of --prompt-len tokens), decode tokens/s summed
// over batches of 1, 8 and 32 sequences after a --context-len prompt, the same at batch 1 and 8 after
// a --long-context-len (2000) prompt (what serving sees: decode attention then reads as many bytes
// of KV per sequence as the GEMVs read weights), read bandwidth (GB/s, same thread count), and for
// batch 1 the bytes each decoded token must read (weights + KV) over that bandwidth: the share of the
// roofline. Decode and bandwidth are medians over --rounds rounds, the share is the median of each
// round's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "benchmarks/engine/engine_timing.h"
#include "kernels/common/thread_pool.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/engine.h"
#include "runtime/model/huge_page_arena.h"

namespace {

using baton::bench::Clock;
using baton::bench::DecodeTokensPerSecond;
using baton::bench::Median;
using baton::bench::Seconds;
using baton::runtime::Engine;

// Best of a few passes summing `buffer` (n floats, far more than the caches hold), split over the
// pool's threads.
double ReadBandwidthGBs(baton::ThreadPool& pool, const float* buffer, int64_t n) {
  std::vector<double> sums(pool.num_threads());
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto start = Clock::now();
    pool.ParallelFor(n, [&](int64_t begin, int64_t end, int t) {
      float acc[16] = {};
      for (int64_t i = begin; i + 16 <= end; i += 16) {
        for (int j = 0; j < 16; ++j) acc[j] += buffer[i + j];
      }
      sums[t] = std::accumulate(acc, acc + 16, 0.0);
    });
    best = std::max(best, n * sizeof(float) / Seconds(Clock::now() - start) / 1e9);
  }
  return best;
}

// Tokens/s of one prompt's prefill (best of `repeats`).
double BestPrefillTokensPerSecond(Engine& engine, int prompt_len, int repeats, std::mt19937& rng) {
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    best = std::max(best, baton::bench::PrefillTokensPerSecond(engine, 1, prompt_len, rng));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Prefill/decode throughput of the CPU engine"};
  std::string model_dir, dtype = "f32", kv_cache_dtype = "f32";
  int threads = 1, prompt_len = 512, context_len = 128, decode_steps = 32, rounds = 5;
  int long_context_len = 2000;
  std::vector<int> batches = {1, 8, 32}, long_batches = {1, 8};
  app.add_option("--model", model_dir, "Checkpoint directory")->required();
  app.add_option("--dtype", dtype, "f32, bf16, f16, i8, i4 or fp8 (int8 / int4 / fp8 weights quantized at load)")
      ->check(CLI::IsMember({"f32", "bf16", "f16", "i8", "i4", "fp8"}));
  app.add_option("--kv-cache-dtype", kv_cache_dtype, "KV cache elements: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--threads", threads, "Threads");
  app.add_option("--prompt-len", prompt_len, "Prefill prompt length");
  app.add_option("--context-len", context_len, "Prompt length before decode");
  app.add_option("--decode-steps", decode_steps, "Decode steps timed per batch");
  app.add_option("--batches", batches, "Decode batch sizes");
  app.add_option("--long-context-len", long_context_len,
                 "Prompt length before the long-context decode rows (0: no such rows)");
  app.add_option("--long-batches", long_batches, "Decode batch sizes at --long-context-len");
  app.add_option("--rounds", rounds, "Rounds of decode + bandwidth measurements (medians reported)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  constexpr int kMaxModelLen = 2048;
  if (prompt_len < 1 || prompt_len + 1 > kMaxModelLen || context_len < 1 ||
      context_len + decode_steps + 1 > kMaxModelLen || decode_steps < 1 || long_context_len < 0 ||
      long_context_len + decode_steps + 1 > kMaxModelLen) {
    std::fprintf(stderr,
                 "baton_engine_bench: need 1 <= --prompt-len < %d, --context-len >= 1, "
                 "--decode-steps >= 1, --long-context-len >= 0 and --context-len (and "
                 "--long-context-len) + --decode-steps + 1 <= %d\n",
                 kMaxModelLen, kMaxModelLen);
    return 2;
  }
  if (long_context_len == 0) long_batches.clear();
  for (int batch : batches) {
    if (batch < 1 || batch > 64) {
      std::fprintf(stderr, "baton_engine_bench: --batches values must be in [1, 64], got %d\n", batch);
      return 2;
    }
  }
  // 8 sequences of 2033 tokens hold 400 MB of `small`'s f32 KV: the 1 GiB cache below takes 16.
  for (int batch : long_batches) {
    if (batch < 1 || batch > 16) {
      std::fprintf(stderr, "baton_engine_bench: --long-batches values must be in [1, 16], got %d\n",
                   batch);
      return 2;
    }
  }

  baton::runtime::EngineConfig config{.model_dir = model_dir,
                                      .weight_dtype = *baton::DTypeFromName(dtype),
                                      .num_threads = threads,
                                      .kv_cache_dtype = kv_cache_dtype == "bf16"
                                                            ? baton::DType::kBF16
                                                            : baton::DType::kF32,
                                      .kv_cache_bytes = size_t{1} << 30,
                                      .max_num_seqs = 64,
                                      .max_model_len = kMaxModelLen};
  auto engine = Engine::Create(config);
  if (!engine.ok()) {
    std::fprintf(stderr, "baton_engine_bench: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  const auto& model = (*engine)->model_config();
  std::mt19937 rng(42);
  (void)BestPrefillTokensPerSecond(**engine, 32, 1, rng);  // warm-up: page in the weights

  nlohmann::json result = {{"model", model_dir},
                           {"dtype", dtype},
                           {"kv_cache_dtype", kv_cache_dtype},
                           {"threads", threads}};
  result["prefill_tokens_per_s"] = BestPrefillTokensPerSecond(**engine, prompt_len, 3, rng);
  // Bytes a batch-1 decode step must read: every matmul weight once, the embedding row, and the
  // KV cache of its context.
  // int4 layers read 4 bits plus an f32 scale and zero point per 128 weights; their lm_head is int8.
  const baton::DType weight_dtype = *baton::DTypeFromName(dtype);
  const bool int4 = weight_dtype == baton::DType::kI4;
  const double layer_elem_bytes = int4 ? 4.5 / 8 : baton::DTypeBytes(weight_dtype);
  const double head_elem_bytes = int4 ? 1 : baton::DTypeBytes(weight_dtype);
  const double h = model.hidden_size, kv = model.num_kv_heads * model.head_dim,
               inter = model.intermediate_size;
  const double per_layer = h * (model.num_heads * model.head_dim) * 2 + h * kv * 2 + 3 * h * inter;
  const double matmul_bytes = model.num_layers * per_layer * layer_elem_bytes +
                              model.vocab_size * h * head_elem_bytes;
  const double kv_elem_bytes = kv_cache_dtype == "f32" ? 4 : 2;
  const double kv_bytes =
      2.0 * model.num_layers * kv * (context_len + decode_steps / 2) * kv_elem_bytes;
  const double bytes_per_token = matmul_bytes + kv_bytes;

  // The machine is shared and its bandwidth drifts: each round measures decode and then the
  // bandwidth, the roofline share is taken within a round, and the medians are reported.
  baton::ThreadPool pool(threads);
  // 1 GiB on huge pages, as the engine's weights and KV cache: a plain read of 4 KiB pages is
  // 15-30% slower on Zen 4 and would flatter the share.
  constexpr int64_t kBufferFloats = int64_t{1} << 28;
  baton::runtime::HugePageArena arena;
  auto* buffer = reinterpret_cast<float*>(arena.Allocate(kBufferFloats * sizeof(float)));
  if (buffer == nullptr) {
    std::fprintf(stderr, "baton_engine_bench: cannot map the 1 GiB bandwidth buffer\n");
    return 1;
  }
  std::fill(buffer, buffer + kBufferFloats, 1.0f);
  std::map<int, std::vector<double>> decode, decode_long;
  std::vector<double> bandwidths, shares;
  for (int round = 0; round < rounds; ++round) {
    for (int batch : batches) {
      decode[batch].push_back(DecodeTokensPerSecond(**engine, batch, context_len, decode_steps, rng));
    }
    for (int batch : long_batches) {
      decode_long[batch].push_back(
          DecodeTokensPerSecond(**engine, batch, long_context_len, decode_steps, rng));
    }
    bandwidths.push_back(ReadBandwidthGBs(pool, buffer, kBufferFloats));
    if (decode.contains(1)) shares.push_back(decode[1].back() * bytes_per_token / (bandwidths.back() * 1e9));
  }
  for (const auto& [batch, values] : decode) {
    result["decode_tokens_per_s"][std::to_string(batch)] = Median(values);
  }
  if (!decode_long.empty()) result["long_context_len"] = long_context_len;
  for (const auto& [batch, values] : decode_long) {
    result["decode_long_tokens_per_s"][std::to_string(batch)] = Median(values);
  }
  result["rounds"] = rounds;
  result["read_bandwidth_GBs"] = Median(bandwidths);
  result["decode_bytes_per_token"] = bytes_per_token;
  result["decode1_roofline_tokens_per_s"] = Median(bandwidths) * 1e9 / bytes_per_token;
  if (!shares.empty()) result["decode1_share_of_roofline"] = Median(shares);
  std::printf("%s\n", result.dump().c_str());
  return 0;
}
