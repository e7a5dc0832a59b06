// The logits processors that run on the raw logits before sampling (sample.h), as vLLM applies
// them: OpenAI's logit_bias, the min_tokens mask of the stop tokens, the repetition penalty (vLLM
// and Hugging Face: over the prompt and the generated tokens) and the frequency and presence
// penalties (OpenAI: over the generated tokens). In place, on the device (kernels/cuda/
// logits_processors.cuh) or the CPU (LogitsProcessorsCpu), bit for bit alike: each touched logit is
// one pure function of itself and its entry (ProcessLogit), written with explicit IEEE operations.
//
// A sequence's work is sparse: the entries name the few tokens that anything applies to (those in
// its prompt or output, its bias keys, its stop tokens), one entry per token id, so a step costs
// O(entries), not O(vocab). The caller (the runtime) builds them; this layer knows nothing of
// requests.
#pragma once

#include <math.h>

#include <cstdint>

#include "absl/status/status.h"
#include "baton/kernels/host_device.h"

namespace baton::kernels {

// Bits of LogitsTokenEntry::flags.
inline constexpr uint32_t kLogitsTokenSeen = 1;  // in the prompt or the output: repetition penalty
inline constexpr uint32_t kLogitsTokenStop = 2;  // EOS or a stop token id: masked before min_tokens

// What applies to one token of one sequence.
struct LogitsTokenEntry {
  int32_t token_id;      // in [0, vocab_size); distinct within a sequence's entries
  int32_t output_count;  // times it was generated: frequency and presence penalties
  float bias;            // logit_bias; 0 for none
  uint32_t flags;        // kLogitsToken*
};

struct LogitsProcessorsParams {
  float* logits;                    // [num_seqs, vocab_size], processed in place
  const LogitsTokenEntry* entries;  // [entry_offsets[num_seqs]]; null only when that is 0
  const int32_t* entry_offsets;     // [num_seqs + 1]: sequence s owns [offsets[s], offsets[s + 1])
  const float* repetition_penalty;  // [num_seqs]; > 0, 1 => off
  const float* frequency_penalty;   // [num_seqs]
  const float* presence_penalty;    // [num_seqs]
  const int32_t* num_generated;     // [num_seqs]: tokens generated so far
  const int32_t* min_tokens;        // [num_seqs]: stop tokens are masked while num_generated < it
  int num_seqs;
  int vocab_size;
};

// Checks pointers (null allowed only when num_seqs == 0), num_seqs >= 0, vocab_size >= 1. The
// arrays may be device memory and are not read: the caller checks the entries' token ids and the
// penalties on the host (ValidateLogitsEntries below). A token id outside [0, vocab_size) is skipped
// by the kernel and the twin alike.
absl::Status Validate(const LogitsProcessorsParams& params);

// InvalidArgument naming the sequence for an entry whose token id is outside [0, vocab_size), a
// token id twice, a negative output_count, a bias or penalty that is not finite, or a repetition
// penalty <= 0. `entries` is one sequence's. Host memory.
absl::Status ValidateLogitsEntries(int seq, const LogitsTokenEntry* entries, int num_entries,
                                   float repetition_penalty, int vocab_size);

// Validates, then processes every row on the host (host memory).
absl::Status LogitsProcessorsCpu(const LogitsProcessorsParams& params);

// One logit through the processors, in vLLM's order: the min_tokens mask (-inf), the bias, the
// repetition penalty (a positive logit divided by it, any other multiplied), then minus
// frequency_penalty * output_count and minus presence_penalty when generated at all. Explicit fmaf
// and separate operations: no compiler may contract or reorder them differently on either side.
BATON_HOST_DEVICE inline float ProcessLogit(float logit, const LogitsTokenEntry& entry,
                                            float repetition_penalty, float frequency_penalty,
                                            float presence_penalty, bool mask_stop) {
  if (mask_stop && (entry.flags & kLogitsTokenStop) != 0) return -INFINITY;
  float x = logit + entry.bias;
  if ((entry.flags & kLogitsTokenSeen) != 0 && repetition_penalty != 1.0f) {
    x = x > 0.0f ? x / repetition_penalty : x * repetition_penalty;
  }
  if (entry.output_count > 0) {
    x = fmaf(-frequency_penalty, static_cast<float>(entry.output_count), x);
    x = x - presence_penalty;
  }
  return x;
}

}  // namespace baton::kernels
