// The logits processors on the CPU: each sequence's entries, one logit each (ProcessLogit).
#include <cmath>

#include "baton/kernels/logits_processors.h"
#include "kernels/common/status_macros.h"

namespace baton::kernels {

absl::Status LogitsProcessorsCpu(const LogitsProcessorsParams& p) {
  RETURN_IF_ERROR(Validate(p));
  for (int s = 0; s < p.num_seqs; ++s) {
    float* row = p.logits + int64_t{s} * p.vocab_size;
    const bool mask_stop = p.num_generated[s] < p.min_tokens[s];
    for (int e = p.entry_offsets[s]; e < p.entry_offsets[s + 1]; ++e) {
      const LogitsTokenEntry& entry = p.entries[e];
      if (entry.token_id < 0 || entry.token_id >= p.vocab_size) continue;  // as the kernel
      row[entry.token_id] =
          ProcessLogit(row[entry.token_id], entry, p.repetition_penalty[s], p.frequency_penalty[s],
                       p.presence_penalty[s], mask_stop);
    }
  }
  return absl::OkStatus();
}

}  // namespace baton::kernels
