#include "baton/kernels/logits_processors.h"

#include <cmath>
#include <unordered_set>

#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

using internal::CheckAtLeast;
using internal::CheckPointer;

absl::Status Validate(const LogitsProcessorsParams& params) {
  constexpr absl::string_view kOp = "LogitsProcessors";
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_seqs", params.num_seqs, 0));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "vocab_size", params.vocab_size, 1));
  const bool empty = params.num_seqs == 0;
  RETURN_IF_ERROR(CheckPointer(kOp, "logits", params.logits, empty));
  // A batch may have no entries at all (penalties without history yet), so entries may be null
  // whenever the offsets say so; the kernel never reads it then.
  RETURN_IF_ERROR(CheckPointer(kOp, "entry_offsets", params.entry_offsets, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "repetition_penalty", params.repetition_penalty, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "frequency_penalty", params.frequency_penalty, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "presence_penalty", params.presence_penalty, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "num_generated", params.num_generated, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "min_tokens", params.min_tokens, empty));
  return absl::OkStatus();
}

absl::Status ValidateLogitsEntries(int seq, const LogitsTokenEntry* entries, int num_entries,
                                   float repetition_penalty, int vocab_size) {
  const auto error = [seq](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("LogitsProcessors: sequence ", seq, ": ", parts...));
  };
  if (!(repetition_penalty > 0) || std::isinf(repetition_penalty)) {
    return error("repetition_penalty ", repetition_penalty, " must be finite and > 0");
  }
  std::unordered_set<int32_t> seen;
  for (int e = 0; e < num_entries; ++e) {
    const LogitsTokenEntry& entry = entries[e];
    if (entry.token_id < 0 || entry.token_id >= vocab_size) {
      return error("token id ", entry.token_id, " is outside [0, ", vocab_size, ")");
    }
    if (!seen.insert(entry.token_id).second) return error("token id ", entry.token_id, " twice");
    if (entry.output_count < 0) return error("token id ", entry.token_id, ": negative count");
    if (!std::isfinite(entry.bias)) return error("token id ", entry.token_id, ": bias not finite");
  }
  return absl::OkStatus();
}

}  // namespace baton::kernels
