// Workloads: what each request of a run asks for — a prompt of input_len tokens and exactly
// output_len generated tokens (sent with ignore_eos and max_tokens = output_len).
//
// A workload is defined by a YAML file in benchmarks/workloads/ (README.md there cites the source
// of every number) in one of three forms:
//   lengths_csv:  {file, input_column, output_column}   an empirical pool of (input, output)
//   lengths;
//                                                        prompts are cut from a text corpus
//   texts_jsonl:  {file, prompt_field, output_field}     real prompts; the output length is the
//   token
//                                                        count of the reference output
//   input_len / output_len: {min, max}                   independent uniform lengths (min == max:
//                                                        fixed); prompts cut from a text corpus
// and optional length rules, applied in this order:
//   filter: {drop_if_both_below: N, drop_if_total_at_least: M}   pool entries dropped at load
//   max_total_len: T      parametric forms: input_len clipped to T - output_len
// Paths in the file are relative to the file. The `random` workload is the parametric form built
// from flags (MakeRandomWorkload).
//
// FitToContext then makes every request fit the served model's context: pool entries with
// input_len + output_len > max_model_len are dropped (the pool is sampled afterwards, so the length
// distribution is the dataset's conditioned on fitting); parametric inputs are clipped to
// max_model_len - output_len. The report says how many were dropped or may be clipped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "benchmarks/bench/rng.h"
#include "runtime/tokenizer/tokenizer.h"

namespace baton::bench {

// Uniform integer lengths in [min_len, max_len]; min_len == max_len is a fixed length.
struct LengthRange {
  int min_len = 1;
  int max_len = 1;
};

// "128" (fixed) or "64:256" (uniform, inclusive). InvalidArgument unless 1 <= min <= max.
absl::StatusOr<LengthRange> ParseLengthRange(absl::string_view text);

// One request's shape. prompt_ids empty: cut input_len tokens from the corpus when planning.
struct WorkloadItem {
  int input_len = 0;                // prompt tokens, >= 1
  int output_len = 0;               // generated tokens, >= 1
  std::vector<int32_t> prompt_ids;  // [input_len] or empty
};

struct WorkloadDefinition {
  std::string name;
  std::string description;
  // Pool form (lengths_csv or texts_jsonl): requests are drawn uniformly, with replacement.
  std::vector<WorkloadItem> pool;
  // Parametric form (used when pool is empty).
  LengthRange input_len;
  LengthRange output_len;
  int max_total_len = 0;  // parametric: input_len <= max_total_len - output_len; 0: no limit
  int num_filtered = 0;   // pool entries the file's filter dropped at load
  int num_pool_rows = 0;  // pool entries before the filter

  bool is_pool() const { return !pool.empty(); }
};

// Reads a workload YAML. `tokenizer` counts the tokens of texts_jsonl prompts and outputs (prompts
// with the tokenizer's special prefix, as a server would encode them); it may be null for the
// other forms. NotFound for a missing file; InvalidArgument naming the file and key for malformed
// content, an unknown key, or a pool that the filter leaves empty.
absl::StatusOr<WorkloadDefinition> LoadWorkloadDefinition(const std::filesystem::path& path,
                                                          const runtime::Tokenizer* tokenizer);

// The file of a named workload ("chatbot" -> workload_dir/chatbot.yaml). InvalidArgument naming the
// accepted forms when there is no such file.
absl::StatusOr<std::filesystem::path> NamedWorkloadFile(absl::string_view name,
                                                        const std::filesystem::path& workload_dir);

// The `random` workload: uniform (or fixed) input and output lengths.
WorkloadDefinition MakeRandomWorkload(LengthRange input_len, LengthRange output_len);

struct ContextFitReport {
  int max_model_len = 0;
  int num_pool_dropped = 0;  // pool entries that did not fit
  int num_pool_kept = 0;
  bool inputs_clipped = false;  // parametric: max_total_len lowered to max_model_len
  std::string ToString() const;
};

// Makes every request fit max_model_len (see the file comment). InvalidArgument if nothing fits
// (an empty pool, or output_len.max_len >= max_model_len for the parametric form).
absl::StatusOr<ContextFitReport> FitToContext(WorkloadDefinition& workload, int max_model_len);

// `num_requests` items drawn from the workload. Parametric inputs are clipped to max_total_len.
std::vector<WorkloadItem> SampleWorkload(const WorkloadDefinition& workload, int num_requests,
                                         Rng& rng);

}  // namespace baton::bench
