// Logits processors kernel body: one block per sequence, its threads striding over the sequence's
// entries. Entries name distinct tokens, so no two threads touch the same logit, and each logit is
// ProcessLogit of itself: the CPU twin's value exactly.
#pragma once

#include "baton/kernels/logits_processors.h"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kLogitsProcessorsThreads = 128;

inline simt::LaunchShape LogitsProcessorsLaunchShape(const LogitsProcessorsParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(p.num_seqs);
  shape.block_x = kLogitsProcessorsThreads;
  return shape;
}

BATON_GLOBAL void LogitsProcessorsKernel(LogitsProcessorsParams p) {
  const int64_t seq = blockIdx.x;
  float* row = p.logits + seq * p.vocab_size;
  const bool mask_stop = p.num_generated[seq] < p.min_tokens[seq];
  const float repetition = p.repetition_penalty[seq];
  const float frequency = p.frequency_penalty[seq];
  const float presence = p.presence_penalty[seq];
  const int end = p.entry_offsets[seq + 1];
  for (int e = p.entry_offsets[seq] + static_cast<int>(threadIdx.x); e < end;
       e += static_cast<int>(blockDim.x)) {
    const LogitsTokenEntry entry = p.entries[e];
    if (entry.token_id < 0 || entry.token_id >= p.vocab_size) continue;
    row[entry.token_id] =
        ProcessLogit(row[entry.token_id], entry, repetition, frequency, presence, mask_stop);
  }
}

}  // namespace baton::kernels::cuda_detail
