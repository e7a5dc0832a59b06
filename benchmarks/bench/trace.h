// Request traces to replay: JSONL, one request per line, in any order:
//   {"arrival_s": 0.25, "input_len": 512, "output_len": 128}
//   {"arrival_s": 0.40, "prompt": "Summarize ...", "output_len": 64}
// arrival_s: seconds from the start of the trace (>= 0); exactly one of input_len (>= 1; the prompt
// is cut from the corpus) and prompt (text, encoded with the tokenizer's special prefix);
// output_len >= 1 (tokens generated, forced). Unknown keys are ignored, so a trace may carry ids
// or notes of its own. Blank lines are skipped.
#pragma once

#include <filesystem>
#include <vector>

#include "absl/status/statusor.h"
#include "benchmarks/bench/workload.h"
#include "runtime/tokenizer/tokenizer.h"

namespace baton::bench {

struct TraceEntry {
  double arrival_s = 0;
  WorkloadItem item;  // prompt_ids set when the line had a prompt
};

// The entries sorted by arrival (stable), shifted so that the first arrives at 0. NotFound for a
// missing file; InvalidArgument naming the line for a malformed one or an empty trace;
// FailedPrecondition if a line has a prompt and `tokenizer` is null.
absl::StatusOr<std::vector<TraceEntry>> LoadTrace(const std::filesystem::path& path,
                                                  const runtime::Tokenizer* tokenizer);

}  // namespace baton::bench
