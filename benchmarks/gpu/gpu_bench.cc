// baton_gpu_bench: a Llama-shaped model with generated bf16 weights through the real engine on a GPU,
// as shares of the roofline measured on the same card in the same run.
//
//   baton_gpu_bench                          # Llama-3-8B shape on cuda:0 (writes a 16 GB checkpoint)
//   baton_gpu_bench --layers 4               # the same widths, 4 layers
//   baton_gpu_bench --device cuda-emulated --hidden 64 --layers 1 --heads 4 --kv-heads 2
//       --intermediate 128 --vocab 256 --prefill-lens 16 --batches 1,2 --context-len 8
//       --decode-steps 4 --copy-mib 8 --gemm-size 128      # the smoke run CI does (seconds)
//   baton_gpu_bench --probe                  # one line: the device, or why there is none
//   baton_gpu_bench --predict --peak-GBps 3350 --peak-TFLOPs 989   # datasheet upper bounds only
//
// Measures (benchmarks/README.md, "GPU"):
//   roofline  a device-to-device copy (GB/s, read + written) and a bf16 GEMM (TFLOP/s): roofline.h;
//   prefill   tokens/s of one prompt of each --prefill-lens length (best of --repeats), and its
//             FLOPs (model_cost.h) over the time as a share of the GEMM rate;
//   decode    tokens/s summed over each --batches batch, every sequence with a --context-len
//             prompt, over --decode-steps steps (after --warmup-steps untimed ones), and the bytes a
//             step reads (weights + KV, model_cost.h) over the step time as a share of the copy rate.
// Prints one JSON object (also to --out); progress goes to stderr. The keys are those of
// transformers_baseline.py, so the two files compare line by line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "benchmarks/gpu/generated_checkpoint.h"
#include "benchmarks/gpu/model_cost.h"
#include "benchmarks/gpu/roofline.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/thread_pool.h"
#include "nlohmann/json.hpp"
#include "runtime/backend/backend_registry.h"
#include "runtime/engine/engine.h"

namespace baton::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using runtime::Engine;

constexpr double kDecodeTarget = 0.8;   // decode at batch 1: share of the copy bandwidth
constexpr double kPrefillTarget = 0.5;  // prefill: share of the GEMM rate
constexpr double kBaselineKvBytes = 2;  // transformers' KV cache is bf16

struct Flags {
  std::string device = "cuda";
  LlamaShape shape;
  std::vector<int> prefill_lens = {512, 2048};
  std::vector<int> batches = {1, 32, 128};
  int context_len = 512, decode_steps = 32, warmup_steps = 2, repeats = 3;
  int copy_mib = 4096, gemm_size = 8192;
  std::string work_dir, out;
  std::string kv_cache_dtype = "bf16";  // the engine's KV cache: bf16, as the baseline's, or f32
  int threads = 0;
  bool predict = false, probe = false;
  double peak_GBps = 3350, peak_TFLOPs = 989;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::vector<int32_t> RandomPrompt(int len, int vocab, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> ids(len);
  for (int32_t& id : ids) id = dist(rng);
  return ids;
}

runtime::GenerationParams Greedy(int max_tokens) {
  runtime::GenerationParams params;
  params.max_tokens = max_tokens;
  params.ignore_eos = true;
  return params;
}

// Seconds from adding one prompt to its first token (its whole prefill).
absl::StatusOr<double> PrefillSeconds(Engine& engine, int prompt_len, std::mt19937& rng) {
  RETURN_IF_ERROR(
      engine.AddRequest(RandomPrompt(prompt_len, engine.model_config().vocab_size, rng), Greedy(1))
          .status());
  const auto start = Clock::now();
  while (engine.HasWork()) RETURN_IF_ERROR(engine.Step().status());
  return Seconds(Clock::now() - start);
}

// Decode tokens/s summed over `batch` sequences: all prompts prefilled, `warmup` untimed decode
// steps, then `steps` timed ones.
absl::StatusOr<double> DecodeTokensPerSecond(Engine& engine, int batch, int context_len, int warmup,
                                             int steps, std::mt19937& rng) {
  for (int i = 0; i < batch; ++i) {
    RETURN_IF_ERROR(engine
                        .AddRequest(RandomPrompt(context_len, engine.model_config().vocab_size, rng),
                                    Greedy(1 + warmup + steps))
                        .status());
  }
  int num_started = 0;
  while (num_started < batch) {
    ASSIGN_OR_RETURN(std::vector<runtime::TokenOutput> out, engine.Step());
    num_started += static_cast<int>(out.size());
  }
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(engine.Step().status());
  int64_t num_tokens = 0;
  const auto start = Clock::now();
  while (engine.HasWork()) {
    ASSIGN_OR_RETURN(std::vector<runtime::TokenOutput> out, engine.Step());
    num_tokens += static_cast<int64_t>(out.size());
  }
  if (num_tokens != int64_t{batch} * steps) {
    return absl::InternalError(absl::StrCat("decode of batch ", batch, ": ", num_tokens,
                                            " tokens timed, expected ", batch * steps));
  }
  return num_tokens / Seconds(Clock::now() - start);
}

json ShapeJson(const LlamaShape& s) {
  return {{"hidden_size", s.hidden_size}, {"num_layers", s.num_layers},
          {"num_heads", s.num_heads},     {"num_kv_heads", s.num_kv_heads},
          {"head_dim", s.head_dim()},     {"intermediate_size", s.intermediate_size},
          {"vocab_size", s.vocab_size},   {"decode_matmul_params", DecodeMatmulParams(s)}};
}

double MeanContext(const Flags& f) { return MeanDecodeContext(f.context_len + f.warmup_steps, f.decode_steps); }

// --predict: upper bounds from datasheet peaks, for Baton's f32 KV and transformers' bf16 KV. A
// step takes at least the longer of its bytes over the bandwidth and its FLOPs over the peak rate.
json Predict(const Flags& f) {
  const LlamaShape& s = f.shape;
  const double bw = f.peak_GBps * 1e9, rate = f.peak_TFLOPs * 1e12;
  json result = {{"runner", "prediction"},
                 {"predicted_not_measured", true},
                 {"shape", ShapeJson(s)},
                 {"assumed_peaks", {{"memory_GBps", f.peak_GBps}, {"bf16_dense_TFLOPs", f.peak_TFLOPs}}}};
  for (int len : f.prefill_lens) {
    const double seconds = std::max(PrefillFlops(s, len) / rate, DecodeMatmulParams(s) * 2 / bw);
    result["prefill"][std::to_string(len)] = {{"flops", PrefillFlops(s, len)},
                                              {"tokens_per_s_upper_bound", len / seconds}};
  }
  const double ctx = MeanContext(f);
  for (int batch : f.batches) {
    json entry = {{"mean_context_len", ctx}, {"flops_per_step", DecodeFlopsPerStep(s, batch, ctx)}};
    for (auto [key, kv_bytes] : {std::pair{"kv_f32", 4.0}, std::pair{"kv_bf16", kBaselineKvBytes}}) {
      const double bytes = DecodeBytesPerStep(s, batch, ctx, 2, kv_bytes);
      const double seconds = std::max(bytes / bw, DecodeFlopsPerStep(s, batch, ctx) / rate);
      entry[key] = {{"bytes_per_step", bytes}, {"tokens_per_s_upper_bound", batch / seconds}};
    }
    result["decode"][std::to_string(batch)] = entry;
  }
  return result;
}

absl::StatusOr<Roofline> MeasureRoofline(const runtime::DeviceSpec& device, const Flags& f) {
  const RooflineOptions options{.copy_bytes = size_t(f.copy_mib) << 20,
                                .gemm_m = f.gemm_size,
                                .gemm_n = f.gemm_size,
                                .gemm_k = f.gemm_size};
  if (device.kind == runtime::DeviceKind::kCuda) return MeasureCudaRoofline(device.index, options);
  if (device.kind == runtime::DeviceKind::kCudaEmulated) return MeasureEmulatedRoofline(options);
  return absl::InvalidArgumentError("--device must be cuda, cuda:N or cuda-emulated");
}

std::filesystem::path DefaultWorkDir() {
  const char* tmp = std::getenv("TMPDIR");
  return std::filesystem::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") / "baton_gpu_bench";
}

absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(const runtime::DeviceSpec& device,
                                                     const Flags& f) {
  const LlamaShape& s = f.shape;
  const int max_prefill = *std::max_element(f.prefill_lens.begin(), f.prefill_lens.end());
  const int max_batch = *std::max_element(f.batches.begin(), f.batches.end());
  const int decode_len = f.context_len + f.warmup_steps + f.decode_steps + 1;
  const int max_model_len = std::max(max_prefill + 1, decode_len);  // + the sampled token
  const int max_positions = std::max(8192, max_model_len);

  ThreadPool pool(f.threads > 0 ? f.threads : std::max(1u, std::thread::hardware_concurrency()));
  const std::filesystem::path dir =
      (f.work_dir.empty() ? DefaultWorkDir() : std::filesystem::path(f.work_dir)) /
      absl::StrCat("llama_h", s.hidden_size, "_l", s.num_layers, "_a", s.num_heads, "_kv",
                   s.num_kv_heads, "_i", s.intermediate_size, "_v", s.vocab_size);
  std::fprintf(stderr, "baton_gpu_bench: model %s (%.2f GB of bf16 weights)\n", dir.c_str(),
               (DecodeMatmulParams(s) + double(s.vocab_size) * s.hidden_size) * 2 / 1e9);
  const auto start = Clock::now();
  ASSIGN_OR_RETURN(bool written, EnsureGeneratedCheckpoint(dir, s, max_positions, pool));
  if (written) std::fprintf(stderr, "baton_gpu_bench: generated in %.1f s\n", Seconds(Clock::now() - start));

  // Room for every decode sequence's blocks (or the longest prompt), plus slack for rounding.
  constexpr int kBlockSize = 16;
  const DType kv_dtype = *KvDTypeFromName(f.kv_cache_dtype);  // checked by the parser
  const size_t block_bytes = size_t(KvElemsPerToken(s)) * kBlockSize * DTypeBytes(kv_dtype);
  const int64_t blocks = std::max<int64_t>(int64_t{max_batch} * ((decode_len + kBlockSize - 1) / kBlockSize),
                                           (max_prefill + kBlockSize) / kBlockSize) + 8;
  const runtime::EngineConfig config{.model_dir = dir,
                                     .weight_dtype = DType::kBF16,
                                     .device = device.kind,
                                     .first_device_index = device.index,
                                     .block_size = kBlockSize,
                                     .kv_cache_dtype = kv_dtype,
                                     .kv_cache_bytes = size_t(blocks) * block_bytes,
                                     .max_num_seqs = max_batch,
                                     .max_num_batched_tokens = max_model_len,
                                     .max_model_len = max_model_len};
  return Engine::Create(config);
}

absl::StatusOr<json> Measure(const Flags& f) {
  ASSIGN_OR_RETURN(runtime::DeviceSpec device, runtime::ParseDevice(f.device));
  ASSIGN_OR_RETURN(Roofline roofline, MeasureRoofline(device, f));
  std::fprintf(stderr, "baton_gpu_bench: %s: copy %.1f GB/s, bf16 GEMM %.2f TFLOP/s\n",
               roofline.device_name.c_str(), roofline.copy_GBps, roofline.gemm_TFLOPs);
  const LlamaShape& s = f.shape;
  json result = {{"runner", "baton"},
                 {"device", f.device},
                 {"device_name", roofline.device_name},
                 {"shape", ShapeJson(s)},
                 {"weight_dtype", "bf16"},
                 {"kv_dtype", f.kv_cache_dtype},
                 {"roofline", {{"copy_bytes", size_t(f.copy_mib) << 20},
                               {"copy_GBps", roofline.copy_GBps},
                               {"gemm_mnk", {f.gemm_size, f.gemm_size, f.gemm_size}},
                               {"gemm_TFLOPs", roofline.gemm_TFLOPs}}}};

  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, CreateEngine(device, f));
  std::mt19937 rng(42);
  json prefill_shares = json::object();
  for (int len : f.prefill_lens) {
    double best = 0;
    for (int r = 0; r <= f.repeats; ++r) {  // run 0 warms up (cuBLAS heuristics, allocator)
      ASSIGN_OR_RETURN(double seconds, PrefillSeconds(*engine, len, rng));
      if (r == 1 || (r > 1 && seconds < best)) best = seconds;
    }
    const double tflops = PrefillFlops(s, len) / best / 1e12;
    const double share = tflops / roofline.gemm_TFLOPs;
    result["prefill"][std::to_string(len)] = {{"tokens_per_s", len / best}, {"seconds", best},
                                              {"flops", PrefillFlops(s, len)},
                                              {"achieved_TFLOPs", tflops}, {"share_of_gemm", share}};
    prefill_shares[std::to_string(len)] = share;
    std::fprintf(stderr, "baton_gpu_bench: prefill %d: %.0f tok/s, %.1f%% of the GEMM rate\n", len,
                 len / best, 100 * share);
  }
  const double ctx = MeanContext(f);
  for (int batch : f.batches) {
    ASSIGN_OR_RETURN(double tokens_per_s, DecodeTokensPerSecond(*engine, batch, f.context_len,
                                                                f.warmup_steps, f.decode_steps, rng));
    const double bytes =
        DecodeBytesPerStep(s, batch, ctx, 2, f.kv_cache_dtype == "f32" ? 4.0 : 2.0);
    const double gbps = bytes * (tokens_per_s / batch) / 1e9;
    result["decode"][std::to_string(batch)] = {
        {"tokens_per_s", tokens_per_s}, {"context_len", f.context_len},
        {"mean_context_len", ctx},      {"steps", f.decode_steps},
        {"bytes_per_step", bytes},      {"achieved_GBps", gbps},
        {"share_of_copy", gbps / roofline.copy_GBps}};
    std::fprintf(stderr, "baton_gpu_bench: decode batch %d: %.1f tok/s, %.1f%% of the copy rate\n",
                 batch, tokens_per_s, 100 * gbps / roofline.copy_GBps);
  }
  bool prefill_met = true;
  for (const auto& [len, share] : prefill_shares.items()) prefill_met = prefill_met && share >= kPrefillTarget;
  result["targets"]["prefill_share_of_gemm"] = {{"min", kPrefillTarget}, {"values", prefill_shares},
                                                {"met", prefill_met}};
  if (result["decode"].contains("1")) {
    const double share = result["decode"]["1"]["share_of_copy"];
    result["targets"]["decode_batch1_share_of_copy"] = {
        {"min", kDecodeTarget}, {"value", share}, {"met", share >= kDecodeTarget}};
  }
  return result;
}

int Main(int argc, char** argv) {
  CLI::App app{"A Llama-shaped model through the engine on a GPU, against the measured roofline"};
  Flags f;
  app.add_option("--device", f.device, "cuda, cuda:N or cuda-emulated");
  app.add_option("--hidden", f.shape.hidden_size, "hidden_size")->check(CLI::PositiveNumber);
  app.add_option("--layers", f.shape.num_layers, "num_hidden_layers")->check(CLI::PositiveNumber);
  app.add_option("--heads", f.shape.num_heads, "num_attention_heads")->check(CLI::PositiveNumber);
  app.add_option("--kv-heads", f.shape.num_kv_heads, "num_key_value_heads")->check(CLI::PositiveNumber);
  app.add_option("--intermediate", f.shape.intermediate_size, "intermediate_size")->check(CLI::PositiveNumber);
  app.add_option("--vocab", f.shape.vocab_size, "vocab_size")->check(CLI::PositiveNumber);
  app.add_option("--prefill-lens", f.prefill_lens, "Prompt lengths timed for prefill")->delimiter(',');
  app.add_option("--batches", f.batches, "Decode batch sizes")->delimiter(',');
  app.add_option("--context-len", f.context_len, "Prompt length of each decode sequence")->check(CLI::PositiveNumber);
  app.add_option("--decode-steps", f.decode_steps, "Timed decode steps per batch")->check(CLI::PositiveNumber);
  app.add_option("--warmup-steps", f.warmup_steps, "Untimed decode steps before them")->check(CLI::NonNegativeNumber);
  app.add_option("--repeats", f.repeats, "Timed prefills per length (best kept)")->check(CLI::PositiveNumber);
  app.add_option("--copy-mib", f.copy_mib, "Roofline copy size, MiB")->check(CLI::PositiveNumber);
  app.add_option("--gemm-size", f.gemm_size, "Roofline GEMM m = n = k")->check(CLI::PositiveNumber);
  app.add_option("--work-dir", f.work_dir, "Where the generated checkpoint is kept (default $TMPDIR/baton_gpu_bench)");
  app.add_option("--threads", f.threads, "Threads generating the weights (default: all)");
  app.add_option("--kv-cache-dtype", f.kv_cache_dtype, "The engine's KV cache: bf16 or f32")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  app.add_option("--out", f.out, "Also write the JSON here");
  app.add_flag("--probe", f.probe, "Print one line naming the CUDA device of --device; measure nothing");
  app.add_flag("--predict", f.predict, "Print datasheet upper bounds for the shape; measure nothing");
  app.add_option("--peak-GBps", f.peak_GBps, "--predict: memory bandwidth, GB/s");
  app.add_option("--peak-TFLOPs", f.peak_TFLOPs, "--predict: dense bf16 rate, TFLOP/s");
  CLI11_PARSE(app, argc, argv);
  const LlamaShape& s = f.shape;
  if (s.hidden_size % s.num_heads != 0 || s.num_heads % s.num_kv_heads != 0 || s.head_dim() % 2 != 0 ||
      f.prefill_lens.empty() || f.batches.empty() ||
      *std::min_element(f.prefill_lens.begin(), f.prefill_lens.end()) < 1 ||
      *std::min_element(f.batches.begin(), f.batches.end()) < 1) {
    std::fprintf(stderr, "baton_gpu_bench: need heads | hidden, kv-heads | heads, an even head_dim, "
                         "and positive --prefill-lens and --batches\n");
    return 2;
  }
  if (f.probe) {
    absl::StatusOr<runtime::DeviceSpec> device = runtime::ParseDevice(f.device);
    absl::StatusOr<std::string> line =
        !device.ok() ? absl::StatusOr<std::string>(device.status())
        : device->kind == runtime::DeviceKind::kCuda
            ? DescribeCudaDevice(device->index)
            : absl::StatusOr<std::string>(absl::InvalidArgumentError("--probe needs --device cuda[:N]"));
    std::printf("%s\n", line.ok() ? line->c_str() : std::string(line.status().message()).c_str());
    return line.ok() ? 0 : 1;
  }
  absl::StatusOr<json> result = f.predict ? absl::StatusOr<json>(Predict(f)) : Measure(f);
  if (!result.ok()) {
    std::fprintf(stderr, "baton_gpu_bench: %s\n", result.status().ToString().c_str());
    return 1;
  }
  const std::string text = result->dump(2);
  std::printf("%s\n", text.c_str());
  if (!f.out.empty()) {
    std::ofstream(f.out) << text << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace baton::bench

int main(int argc, char** argv) { return baton::bench::Main(argc, argv); }
