// ProfileEngine: measures the real engine's prefill and decode steps on the CPU and fits the
// planner's latency coefficients to them (`baton plan profile`; DistServe §4 profiles the same
// way).
//
// For each tensor-parallel degree it creates a runtime::Engine on the model, tp x pp=1 ranks on the
// CPU, and times single Step() calls:
//  - prefill: a batch of B prompts of L tokens, added together and run as one prefill step (the
//    prefill-first scheduler admits them all: the token budget and max_num_seqs are set to fit).
//  - decode: B sequences brought to context C the way a decode instance receives them
//    (AdmitPrefilled, the blocks written as a KV transfer would, StartDecoding), so no prefill is
//    computed to set them up; one untimed decode step, then the timed one, whose Σ context is
//    B x (C + 1).
// Each grid point is timed `repeats` times, in passes over the whole grid (so that a burst of load
// from elsewhere slows one repeat of several points, not every repeat of one), and its median
// kept. A warm-up step (the largest prefill batch) runs first, so buffer growth is not timed.
//
// The timings are wall-clock on a shared machine: the relative RMS error of the fit says how well
// the linear model (and the machine's quiet) held. Not thread-safe; runs on the calling thread
// (plus the engine's rank threads when tp > 1).
#pragma once

#include <filesystem>
#include <functional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/common/dtype.h"
#include "scheduler/planner/latency_coefficients.h"
#include "scheduler/planner/latency_fit.h"

namespace baton::scheduler::planner {

struct ProfileOptions {
  std::filesystem::path model_dir;  // a Hugging Face checkpoint directory
  DType weight_dtype = DType::kF32;
  DType kv_cache_dtype = DType::kF32;  // kF32 or kBF16: the decode steps' context term follows it
  // On the CPU one "device" is a core: one compute thread per rank, unless asked otherwise.
  int num_threads_per_rank = 1;
  std::vector<int> tps = {1};  // tensor-parallel degrees to profile, each >= 1
  // The grids. Lengths whose sequences would not fit the model's max_model_len are left out (a
  // progress line says which). The defaults profile the generated `tiny` checkpoint in ~15 s on
  // one core; a 7B model in f32 takes minutes per tp.
  // Prefill grid: every prompt length with every batch size (B prompts of L tokens per step).
  std::vector<int> prefill_prompt_lens = {32, 128, 512, 1024};
  std::vector<int> prefill_batch_sizes = {1, 2, 4};
  // Decode grid: every batch size with every context length (tokens per sequence at the step).
  std::vector<int> decode_batch_sizes = {1, 4, 16, 32};
  std::vector<int> decode_context_lens = {64, 256, 1024};
  int repeats = 5;  // timed steps per grid point (passes over the grid); the median is kept
  // Called with a line per pass ("tp 1: decode pass 2 of 5") and per grid point measured
  // ("tp 1: prefill 2 x 128 tokens: 12.3 ms"); may be empty.
  std::function<void(std::string_view)> progress;
};

// What one tensor-parallel degree measured and how well its coefficients fit.
struct TpProfile {
  int tp = 1;
  std::vector<PrefillSample> prefill_samples;  // one per prefill grid point
  std::vector<DecodeSample> decode_samples;    // one per decode grid point
  double prefill_relative_rms_error = 0;       // of the fitted coefficients on these samples
  double decode_relative_rms_error = 0;
};

struct ProfileResult {
  // model: the checkpoint directory's name; device "cpu"; source names the model, dtype, threads
  // and the CPU model (/proc/cpuinfo).
  LatencyCoefficients coefficients;
  std::vector<TpProfile> per_tp;  // in ProfileOptions::tps order
};

// InvalidArgument for an empty or non-positive grid, tps, repeats or threads, or a grid list none
// of whose lengths fits the model; the model's load errors (NotFound for a missing
// config.json) and the engine's (a tp that does not divide the heads); Internal if a grid point
// did not run as the one step it was meant to; the fit's errors (latency_fit.h).
absl::StatusOr<ProfileResult> ProfileEngine(const ProfileOptions& options);

}  // namespace baton::scheduler::planner
