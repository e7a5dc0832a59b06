// The bench's files: per-request records as JSONL (one object per line, read back by the Python
// analysis in benchmarks/analysis/) and the run summary as JSON.
//
// A record line holds the raw record (request_idx, warmup, input_len, output_len, arrival_s,
// sent_s, end_s, token_s, num_output_tokens, num_prompt_tokens, ok, cancelled, error,
// finish_reason, server: {arrival_us, ..., token_emit_us}) and, for a completed request, the
// derived ttft_s, tpot_s, e2e_s and phases {queue_s, prefill_s, kv_transfer_s, first_decode_s}
// (metrics.h defines them), so that readers need not recompute them. Times are seconds.
#pragma once

#include <filesystem>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchmarks/bench/metrics.h"
#include "benchmarks/bench/summary.h"
#include "nlohmann/json.hpp"

namespace baton::bench {

nlohmann::json RecordToJson(const RequestRecord& record);
// InvalidArgument naming the field for a malformed object. Derived fields are ignored.
absl::StatusOr<RequestRecord> RecordFromJson(const nlohmann::json& json);

nlohmann::json SummaryToJson(const RunSummary& summary);

// Writes (truncates) `path`; the parent directory must exist. InternalError naming the file when
// it cannot be written.
absl::Status WriteRecordsJsonl(const std::filesystem::path& path,
                               const std::vector<RequestRecord>& records);
// NotFound for a missing file; InvalidArgument naming the line for a malformed one.
absl::StatusOr<std::vector<RequestRecord>> ReadRecordsJsonl(const std::filesystem::path& path);

absl::Status WriteJsonFile(const std::filesystem::path& path, const nlohmann::json& json);

}  // namespace baton::bench
