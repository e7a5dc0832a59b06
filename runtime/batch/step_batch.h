// StepBatch: the flattened input of one forward pass over several sequences.
//
// Sequences are laid out one after another in the token arrays. The first num_decode_seqs sequences
// are decode steps: one new token each, attending to their cached context through the block tables.
// The rest are prefill chunks: q_len new tokens each, attending causally to the sequence's whole
// context (cached prefix, if any, plus the chunk). Every new token's K/V is written to slot_mapping.
// Views only: the builder (ModelRunner) owns the arrays and keeps them alive during Forward().
//
// The last pipeline stage ends the step on the device: it computes each sequence's logits and
// draws its next token there (the backend's Sample op, sample.h), so only num_seqs token ids cross
// to the host, not num_seqs x vocab_size floats; the logits follow only when return_logits asks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "baton/kernels/sampling.h"
#include "runtime/batch/logits_processing.h"
#include "runtime/batch/pending_fill.h"

namespace baton::runtime {

// How one sequence's next token is drawn: its options and the draw of its seed's stream
// (philox.h), which is the index of the token being generated.
struct TokenSampling {
  kernels::SamplingOptions options;
  uint64_t seed = 0;
  uint64_t draw_idx = 0;
  // The logits processors' row for this sequence (logits_processing.h), or nullptr when none
  // applies. Owned by the step's builder, alive until the step's Forward returns.
  const LogitsProcessing* processing = nullptr;
  // Structured outputs: the tokens this sequence's grammar allows next, a bitmask of
  // kernels::TokenBitmaskWordsFor(vocab_size) words (token_bitmask.h), or empty when unconstrained.
  // Owned like `processing`.
  std::span<const int32_t> token_bitmask;
  // When set, token_bitmask is still being filled as the step starts: read it only once this is
  // done (it is filled while the forward pass runs). Owned like `processing`.
  const PendingFill* token_bitmask_fill = nullptr;
};

struct StepBatch {
  std::span<const int32_t> token_ids;     // [num_tokens]
  std::span<const int32_t> positions;     // [num_tokens] position of each token in its sequence
  std::span<const int32_t> slot_mapping;  // [num_tokens] block_id * block_size + slot
  std::span<const int32_t> q_start;       // [num_seqs + 1] prefix sums of each sequence's new tokens
  std::span<const int32_t> context_lens;  // [num_seqs] tokens in the cache after this step
  std::span<const int32_t> block_tables;  // [num_seqs, max_blocks_per_seq], padded with 0
  std::span<const TokenSampling> sampling;  // [num_seqs]
  int num_decode_seqs = 0;
  int max_blocks_per_seq = 0;
  bool return_logits = false;  // the last stage also copies the logits to the host
  // Prompt logprobs (GenerationParams::num_prompt_logprobs): [num_tokens] the id of the prompt token
  // each row predicts, which the last stage scores with the top prompt_top_k[s] of the row's
  // sequence, or -1 for a row that scores nothing. Empty when no row scores.
  std::span<const int32_t> prompt_targets;
  std::span<const int32_t> prompt_top_k;  // [num_seqs] when prompt_targets is not empty

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_seqs() const { return static_cast<int>(context_lens.size()); }
};

// One prompt token's score: its logprob given the tokens before it, and the most likely there.
struct PromptTokenLogprobs {
  int seq = 0;          // the sequence's index in the batch
  int token_index = 0;  // the scored token's position in its sequence (>= 1)
  std::vector<kernels::TokenLogprob> logprobs;  // kernels::TopLogprobs(row, k, the token)
};

// What the last stage answers for a StepBatch (the other stages answer nothing).
struct StepOutput {
  std::vector<int32_t> token_ids;  // [num_seqs]; -1 for a sequence whose logits hold a NaN
  std::vector<float> logits;       // [num_seqs, vocab_size] when return_logits, else empty
  std::vector<PromptTokenLogprobs> prompt_logprobs;  // one per prompt_targets >= 0, in row order

  void clear() {
    token_ids.clear();
    logits.clear();
    prompt_logprobs.clear();
  }
};

}  // namespace baton::runtime
