#include "scheduler/planner/engine_profiler.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "kernels/common/status_macros.h"
#include "runtime/engine/engine.h"
#include "runtime/model/model_config.h"

namespace baton::scheduler::planner {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kBlockSize = 16;

// "AMD EPYC 7B13" from /proc/cpuinfo's first "model name"; "unknown CPU" where there is none
// (some ARM kernels name no model).
std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "model name")) continue;
    const size_t colon = rest.find(':');
    if (colon == absl::string_view::npos) continue;
    return std::string(absl::StripAsciiWhitespace(rest.substr(colon + 1)));
  }
  return "unknown CPU";
}

std::string ModelName(const std::filesystem::path& model_dir) {
  std::filesystem::path dir = model_dir.lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "models/tiny/"
  return dir.filename().string();
}

absl::Status CheckPositive(const std::vector<int>& values, absl::string_view what) {
  if (values.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("profile: ", what, " is empty"));
  }
  for (int v : values) {
    if (v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile: ", what, " has ", v, ", must be >= 1"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(const ProfileOptions& options) {
  RETURN_IF_ERROR(CheckPositive(options.tps, "tps"));
  RETURN_IF_ERROR(CheckPositive(options.prefill_prompt_lens, "prefill prompt lengths"));
  RETURN_IF_ERROR(CheckPositive(options.prefill_batch_sizes, "prefill batch sizes"));
  RETURN_IF_ERROR(CheckPositive(options.decode_batch_sizes, "decode batch sizes"));
  RETURN_IF_ERROR(CheckPositive(options.decode_context_lens, "decode context lengths"));
  if (options.repeats < 1) return absl::InvalidArgumentError("profile: repeats must be >= 1");
  if (options.num_threads_per_rank < 1) {
    return absl::InvalidArgumentError("profile: threads per rank must be >= 1");
  }
  return absl::OkStatus();
}

int Max(const std::vector<int>& values) { return *std::max_element(values.begin(), values.end()); }

int CeilDiv(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

// The engine's limits, sized so that each grid point runs as planned.
struct GridNeeds {
  int max_model_len = 0;  // the longest sequence any grid point makes
  int max_num_seqs = 0;
  int max_batch_tokens = 0;  // the largest prefill step
  int num_blocks = 0;        // the most KV blocks any grid point holds at once
};

// A decode sequence at context C: C - 1 prompt tokens, 1 admitted token, then an untimed and a
// timed decode step; a fourth token is allowed so that none finishes inside the timed step.
constexpr int kDecodeMaxTokens = 4;

GridNeeds NeedsOf(const ProfileOptions& o) {
  GridNeeds needs;
  const int max_len = Max(o.prefill_prompt_lens), max_batch = Max(o.prefill_batch_sizes);
  const int max_context = Max(o.decode_context_lens), max_decode_batch = Max(o.decode_batch_sizes);
  needs.max_model_len = std::max(max_len + 1, max_context - 1 + kDecodeMaxTokens);
  needs.max_num_seqs = std::max(max_batch, max_decode_batch);
  needs.max_batch_tokens = max_len * max_batch;
  const int prefill_blocks = max_batch * CeilDiv(max_len + 1, kBlockSize);
  const int decode_blocks =
      max_decode_batch * CeilDiv(max_context - 1 + kDecodeMaxTokens, kBlockSize);
  needs.num_blocks =
      std::max({prefill_blocks, decode_blocks, CeilDiv(needs.max_model_len, kBlockSize)});
  return needs;
}

// Token ids in [0, vocab): a fixed pattern per (salt, position), so repeats see different prompts.
std::vector<int32_t> Prompt(int len, int salt, int vocab_size) {
  std::vector<int32_t> ids(len);
  for (int i = 0; i < len; ++i) {
    ids[i] = static_cast<int32_t>((int64_t{i} * 37 + int64_t{salt} * 101 + 5) % vocab_size);
  }
  return ids;
}

runtime::GenerationParams Params(int max_tokens) {
  runtime::GenerationParams params;
  params.max_tokens = max_tokens;
  params.ignore_eos = true;  // nothing stops early
  return params;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// One prefill step of `batch` prompts of `len` tokens; max_tokens 1, so every sequence finishes in
// that step and the engine is empty again.
absl::StatusOr<double> TimePrefillStep(runtime::Engine& engine, int batch, int len, int* salt) {
  const int vocab_size = engine.model_config().vocab_size;
  for (int i = 0; i < batch; ++i) {
    RETURN_IF_ERROR(engine.AddRequest(Prompt(len, (*salt)++, vocab_size), Params(1)).status());
  }
  const Clock::time_point start = Clock::now();
  ASSIGN_OR_RETURN(const std::vector<runtime::TokenOutput> outputs, engine.Step());
  const double ms = Ms(Clock::now() - start);
  if (static_cast<int>(outputs.size()) != batch || engine.HasWork()) {
    return absl::InternalError(absl::StrCat("profile: a prefill of ", batch, " x ", len,
                                            " tokens did not run as one step (", outputs.size(),
                                            " tokens out)"));
  }
  return ms;
}

// Puts `batch` sequences of context `context` into the running batch as a decode instance does:
// their blocks are allocated by AdmitPrefilled and written here as the KV transfer would write
// them. The write matters for timing: untouched blocks are the kernel's shared zero page, which
// stays in cache and would hide the cost of reading the context.
absl::StatusOr<std::vector<runtime::SeqId>> AdmitDecodeBatch(runtime::Engine& engine, int batch,
                                                             int context, int* salt) {
  const int vocab_size = engine.model_config().vocab_size;
  std::vector<runtime::SeqId> ids;
  for (int i = 0; i < batch; ++i) {
    std::vector<int32_t> tokens = Prompt(context, (*salt)++, vocab_size);
    const int32_t first_token = tokens.back();
    tokens.pop_back();
    ASSIGN_OR_RETURN(
        const runtime::SeqId id,
        engine.AdmitPrefilled(std::move(tokens), {first_token}, Params(kDecodeMaxTokens)));
    ASSIGN_OR_RETURN(const std::vector<runtime::BlockId> blocks, engine.BlocksOf(id));
    for (int r = 0; r < engine.ranks().num_ranks(); ++r) {
      const runtime::KvPool& pool = engine.ranks().kv_pool(r);
      for (runtime::BlockId block : blocks) {
        std::memset(pool.BlockData(block), 0, pool.BlockBytes());
      }
    }
    RETURN_IF_ERROR(engine.StartDecoding(id));
    ids.push_back(id);
  }
  return ids;
}

// One decode step of `batch` sequences at context + 1 (the batch's second step; its first, at
// `context`, runs untimed). The sequences are cancelled after.
absl::StatusOr<double> TimeDecodeStep(runtime::Engine& engine, int batch, int context, int* salt) {
  ASSIGN_OR_RETURN(const std::vector<runtime::SeqId> ids,
                   AdmitDecodeBatch(engine, batch, context, salt));
  double ms = 0;
  for (int k = 0; k < 2; ++k) {
    const Clock::time_point start = Clock::now();
    ASSIGN_OR_RETURN(const std::vector<runtime::TokenOutput> outputs, engine.Step());
    ms = Ms(Clock::now() - start);
    if (static_cast<int>(outputs.size()) != batch) {
      return absl::InternalError(absl::StrCat("profile: a decode step of ", batch, " x ", context,
                                              " context ran ", outputs.size(), " sequences"));
    }
  }
  for (runtime::SeqId id : ids) RETURN_IF_ERROR(engine.Cancel(id));
  return ms;
}

absl::StatusOr<std::unique_ptr<runtime::Engine>> CreateEngine(const ProfileOptions& options,
                                                              const runtime::ModelConfig& model,
                                                              const GridNeeds& needs, int tp) {
  // The KV budget, for any split of heads over ranks: each rank's share holds the blocks for the
  // whole model's heads. The pool is anonymous memory, so what the grid never touches costs
  // nothing.
  const size_t full_block_bytes = size_t{2} * model.num_layers * model.num_kv_heads *
                                  model.head_dim * kBlockSize * DTypeBytes(options.kv_cache_dtype);
  const size_t kv_cache_bytes = static_cast<size_t>(tp) * (needs.num_blocks + 1) * full_block_bytes;
  return runtime::Engine::Create(
      runtime::EngineConfig{.model_dir = options.model_dir,
                            .weight_dtype = options.weight_dtype,
                            .parallel = {.tp_size = tp, .pp_size = 1},
                            .device = runtime::DeviceKind::kCpu,
                            .num_threads = options.num_threads_per_rank,
                            .block_size = kBlockSize,
                            .kv_cache_dtype = options.kv_cache_dtype,
                            .kv_cache_bytes = kv_cache_bytes,
                            .max_num_seqs = needs.max_num_seqs,
                            .max_num_batched_tokens = needs.max_batch_tokens,
                            .max_model_len = needs.max_model_len});
}

void Report(const ProfileOptions& options, const std::string& line) {
  if (options.progress) options.progress(line);
}

struct GridPoint {
  int batch;
  int len;  // prompt tokens (prefill) or context (decode) per sequence
};

// Times every point `repeats` times, one pass over the grid after another, and keeps each point's
// median. Passes rather than back-to-back repeats: a burst of load from elsewhere on a shared
// machine then slows one repeat of several points, which the median drops, instead of every
// repeat of one point.
template <typename TimeStep>
absl::StatusOr<std::vector<double>> MedianTimes(const ProfileOptions& options, int tp,
                                                absl::string_view phase,
                                                const std::vector<GridPoint>& grid,
                                                TimeStep time_step) {
  std::vector<std::vector<double>> times(grid.size());
  for (int r = 0; r < options.repeats; ++r) {
    Report(options, absl::StrCat("tp ", tp, ": ", phase, " pass ", r + 1, " of ", options.repeats));
    for (size_t p = 0; p < grid.size(); ++p) {
      ASSIGN_OR_RETURN(const double ms, time_step(grid[p]));
      times[p].push_back(ms);
    }
  }
  std::vector<double> medians;
  for (const std::vector<double>& t : times) medians.push_back(Median(t));
  return medians;
}

absl::StatusOr<TpProfile> ProfileTp(const ProfileOptions& options,
                                    const runtime::ModelConfig& model, const GridNeeds& needs,
                                    int tp, TpCoefficients* coefficients) {
  Report(options, absl::StrCat("tp ", tp, ": loading ", options.model_dir.string()));
  ASSIGN_OR_RETURN(const std::unique_ptr<runtime::Engine> owned,
                   CreateEngine(options, model, needs, tp));
  runtime::Engine& engine = *owned;
  TpProfile profile{.tp = tp};
  int salt = 0;
  RETURN_IF_ERROR(
      TimePrefillStep(engine, Max(options.prefill_batch_sizes), Max(options.prefill_prompt_lens), &salt)
          .status());

  std::vector<GridPoint> prefill_grid;
  for (int len : options.prefill_prompt_lens) {
    for (int batch : options.prefill_batch_sizes) prefill_grid.push_back({batch, len});
  }
  ASSIGN_OR_RETURN(const std::vector<double> prefill_ms,
                   MedianTimes(options, tp, "prefill", prefill_grid, [&](const GridPoint& p) {
                     return TimePrefillStep(engine, p.batch, p.len, &salt);
                   }));
  for (size_t i = 0; i < prefill_grid.size(); ++i) {
    const GridPoint& p = prefill_grid[i];
    const double sum = static_cast<double>(p.batch) * p.len;
    profile.prefill_samples.push_back(
        {.sum_tokens = sum, .sum_tokens_squared = sum * p.len, .ms = prefill_ms[i]});
    Report(options, absl::StrFormat("tp %d: prefill %d x %d tokens: %.2f ms", tp, p.batch, p.len,
                                    prefill_ms[i]));
  }

  std::vector<GridPoint> decode_grid;
  for (int batch : options.decode_batch_sizes) {
    for (int context : options.decode_context_lens) decode_grid.push_back({batch, context});
  }
  ASSIGN_OR_RETURN(const std::vector<double> decode_ms,
                   MedianTimes(options, tp, "decode", decode_grid, [&](const GridPoint& p) {
                     return TimeDecodeStep(engine, p.batch, p.len, &salt);
                   }));
  for (size_t i = 0; i < decode_grid.size(); ++i) {
    const GridPoint& p = decode_grid[i];
    // The timed step attends over context + 1 tokens per sequence.
    profile.decode_samples.push_back(
        {.batch_size = p.batch, .sum_context = p.batch * (p.len + 1.0), .ms = decode_ms[i]});
    Report(options, absl::StrFormat("tp %d: decode %d x %d context: %.2f ms", tp, p.batch, p.len,
                                    decode_ms[i]));
  }

  ASSIGN_OR_RETURN(coefficients->prefill, FitPrefill(profile.prefill_samples));
  ASSIGN_OR_RETURN(coefficients->decode, FitDecode(profile.decode_samples));
  profile.prefill_relative_rms_error =
      RelativeRmsError(coefficients->prefill, profile.prefill_samples);
  profile.decode_relative_rms_error =
      RelativeRmsError(coefficients->decode, profile.decode_samples);
  return profile;
}

// Leaves out the prompt lengths and contexts whose sequences would not fit the model's positions,
// saying so through progress. InvalidArgument when none of a list fits.
absl::StatusOr<ProfileOptions> FitGridToModel(const ProfileOptions& options, int max_positions) {
  ProfileOptions grid = options;
  auto keep = [&](std::vector<int>* lens, int max_len, absl::string_view what) -> absl::Status {
    std::vector<int> kept;
    for (int len : *lens) {
      if (len <= max_len) {
        kept.push_back(len);
      } else {
        Report(options, absl::StrCat("left out ", what, " ", len, ": beyond the model's ",
                                     max_positions, " positions"));
      }
    }
    if (kept.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile: no ", what, " fits the model's ", max_positions, " positions"));
    }
    *lens = std::move(kept);
    return absl::OkStatus();
  };
  // A prefill of L tokens samples one: L + 1 positions. A decode at context C runs to
  // C - 1 + kDecodeMaxTokens positions.
  RETURN_IF_ERROR(keep(&grid.prefill_prompt_lens, max_positions - 1, "prefill prompt length"));
  RETURN_IF_ERROR(keep(&grid.decode_context_lens, max_positions + 1 - kDecodeMaxTokens,
                       "decode context length"));
  return grid;
}

}  // namespace

absl::StatusOr<ProfileResult> ProfileEngine(const ProfileOptions& requested) {
  RETURN_IF_ERROR(ValidateOptions(requested));
  ASSIGN_OR_RETURN(const runtime::ModelConfig model, runtime::LoadModelConfig(requested.model_dir));
  // The engine serves sequences of up to max_model_len tokens (a sliding window may cut it).
  const int max_positions =
      model.max_model_len > 0 ? model.max_model_len : model.max_position_embeddings;
  ASSIGN_OR_RETURN(const ProfileOptions options, FitGridToModel(requested, max_positions));
  const GridNeeds needs = NeedsOf(options);
  const std::string model_name = ModelName(options.model_dir);
  ProfileResult result;
  result.coefficients.model = model_name;
  result.coefficients.device = "cpu";
  const int threads = options.num_threads_per_rank;
  result.coefficients.source = absl::StrCat(
      "baton plan profile: ", model_name, ", ", std::string(DTypeName(options.weight_dtype)),
      options.kv_cache_dtype == DType::kF32 ? "" : ", kv cache bf16", ", ", threads, threads == 1 ? " thread" : " threads", " per rank, ", CpuModelName());
  for (int tp : options.tps) {
    TpCoefficients coefficients;
    ASSIGN_OR_RETURN(TpProfile profile, ProfileTp(options, model, needs, tp, &coefficients));
    result.coefficients.by_tp[tp] = coefficients;
    result.per_tp.push_back(std::move(profile));
  }
  return result;
}

}  // namespace baton::scheduler::planner
