// What the logits processors (kernels/include/baton/kernels/logits_processors.h) need of a
// sequence for its next token, and the checks of the request fields that drive them.
//
// The counts come from the sequence's own tokens (prompt, then generated), counted incrementally
// by TokenHistory, so a sequence rebuilt from its tokens elsewhere (a decode worker taking over a
// prefill, a request replayed after a dead decode worker: generated_token_ids) gets the same
// counts, hence the same logits and the same tokens, with no state to hand over.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "baton/kernels/logits_processors.h"
#include "baton/kernels/sampling.h"

namespace baton::runtime {

// The request fields of the logits processors, with vLLM's meanings (neutral by default).
struct LogitsProcessorOptions {
  float presence_penalty = 0;    // in [-2, 2]: minus this once a token was generated
  float frequency_penalty = 0;   // in [-2, 2]: minus this times the token's generated count
  float repetition_penalty = 1;  // > 0: on prompt and generated tokens; 1 => off
  std::map<int32_t, float> logit_bias;  // token id -> bias in [-100, 100], added to the logit
  int min_tokens = 0;  // >= 0: stop tokens cannot end generation (are masked) before this many

  bool penalties() const {
    return presence_penalty != 0 || frequency_penalty != 0 || repetition_penalty != 1;
  }
};

// InvalidArgument naming the field ("sampling.presence_penalty ...", "sampling.logit_bias: token
// id ...", "stop.min_tokens ..."), for values outside the ranges above, min_p outside [0, 1], a
// logit_bias key outside [0, vocab_size) (when vocab_size > 0), or min_tokens > max_tokens (when
// max_tokens > 0).
absl::Status ValidateLogitsProcessorOptions(const LogitsProcessorOptions& options,
                                            const kernels::SamplingOptions& sampling,
                                            int max_tokens, int vocab_size);

// One sequence's row of the op.
struct LogitsProcessing {
  std::vector<kernels::LogitsTokenEntry> entries;  // distinct token ids
  float repetition_penalty = 1;
  float frequency_penalty = 0;
  float presence_penalty = 0;
  int32_t num_generated = 0;
  int32_t min_tokens = 0;
};

// The token counts of one sequence, brought up to date from its tokens on demand.
class TokenHistory {
 public:
  // Counts token_ids[num_counted, size): the first num_prompt_tokens are the prompt. Tokens are
  // only ever appended; a shorter list than already counted starts over.
  void Update(const std::vector<int32_t>& token_ids, int num_prompt_tokens);

  // The row for the next token of a sequence with `options` and `stop_token_ids` (EOS included)
  // that generated `num_generated` tokens: an entry for every token a processor touches. Only the
  // tokens that matter are listed: the history when a penalty is on, the stop tokens while
  // num_generated < min_tokens, the bias keys.
  void Fill(const LogitsProcessorOptions& options, const std::vector<int32_t>& stop_token_ids,
            int num_generated, LogitsProcessing* out) const;

 private:
  struct Counts {
    int32_t output = 0;
    bool in_prompt = false;
  };
  absl::flat_hash_map<int32_t, Counts> counts_;
  size_t num_counted_ = 0;
};

// Whether anything would touch the logits of a sequence with these options at this point.
bool NeedsLogitsProcessing(const LogitsProcessorOptions& options, int num_generated);

}  // namespace baton::runtime
