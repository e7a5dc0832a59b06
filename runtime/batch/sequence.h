// Sequence: the engine-side state of one request. A plain struct; derived values are methods.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "baton/kernels/sampling.h"
#include "runtime/batch/logits_processing.h"
#include "runtime/kv_cache/block_table.h"
#include "runtime/structured_output/output_constraint.h"

namespace baton::runtime {

using SeqId = int64_t;

// kWaiting: queued for prefill. kRunning: in the continuous batch. kHoldingKv: a prefill-role
// sequence that produced its first token and keeps its KV blocks for a decode worker to pull.
// kAwaitingKv: a decode-role sequence whose blocks are allocated and being filled by a transfer.
// kSwapped: preempted with its KV copied to the instance's swap pool (runtime/kv_cache/kv_swap.h);
// its block table names swap-pool blocks until it is swapped back in.
// kPaused: out of the batch, its KV kept, because its consumer is not taking its tokens
// (Engine::Pause).
enum class SeqStatus { kWaiting, kRunning, kHoldingKv, kAwaitingKv, kSwapped, kPaused };

enum class FinishReason { kNone, kLength, kStop, kCancelled };

// What a caller asks the engine to generate.
struct GenerationParams {
  kernels::SamplingOptions sampling;
  LogitsProcessorOptions logits_processors;  // penalties, logit_bias, min_tokens
  uint64_t seed = 0;                    // generated token n takes draw n of its stream (sampling.h)
  int max_tokens = 16;                  // >= 1
  std::vector<int32_t> stop_token_ids;  // the model's EOS ids are added unless ignore_eos
  bool ignore_eos = false;
  // Log-probabilities per token: nullopt none; k the k most likely (0..20), then the sampled
  // token's when it is not among them (k = 0: the sampled token's alone).
  std::optional<int> num_logprobs;
  // vLLM's prompt_logprobs: every prompt token after the first scored by the model given the
  // tokens before it, with the k most likely tokens there (0..20); reported with the first token.
  std::optional<int> num_prompt_logprobs;
  bool return_logits = false;           // full logits per token (tests, parity checks)
  bool hold_kv_after_prefill = false;   // prefill role: stop after the first token, keep the KV
  // Structured outputs: what the generated text must match (the sampler masks every token the
  // constraint's grammar does not allow next; the output ends once it is complete).
  OutputConstraint constraint;
};

struct Sequence {
  Sequence(SeqId id, std::vector<int32_t> prompt, GenerationParams params, int block_size)
      : id(id), token_ids(std::move(prompt)), num_prompt_tokens(static_cast<int>(token_ids.size())),
        params(std::move(params)), block_table(block_size) {}

  SeqId id;
  std::vector<int32_t> token_ids;  // prompt, then generated tokens
  int num_prompt_tokens;
  GenerationParams params;
  BlockTable block_table;
  // The prefix cache's hashes of token_ids' full blocks (block_hash.h), extended as they fill;
  // they survive preemption, since the tokens do.
  std::vector<BlockHash> block_hashes;
  int num_computed_tokens = 0;  // tokens whose K/V is in the cache
  SeqStatus status = SeqStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;  // kCancelled: cancelled while in a step
  // In a step the ranks are still running (StepScheduler::Schedule to StepDone): not scheduled
  // again, not preempted, and its blocks stay allocated, since the step still writes them.
  bool in_step = false;
  bool pause_requested = false;  // Engine::Pause came while it was not running, or in a step
  int64_t first_scheduled_us = 0;  // when its prefill first entered a step (Unix micros)
  int num_cached_tokens = 0;  // of its last admission from the queue: tokens the prefix cache held
  // Its next sampled token ends a prefill this engine ran (its first token, or a resumed request's
  // next one): that output reports when the prefill started. False once reported, and from the
  // start for a sequence whose KV was computed elsewhere (Engine::AdmitPrefilled).
  bool ends_prefill = true;
  TokenHistory history;  // token counts for the logits processors, updated when they need them
  // When num_prompt_logprobs: [i] scores prompt token i (empty for token 0), filled as the prefill's
  // chunks go through the model and handed out with the first token.
  std::vector<std::vector<kernels::TokenLogprob>> prompt_logprobs;

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_generated_tokens() const { return num_tokens() - num_prompt_tokens; }
  // Tokens still to be fed through the model before the next token can be sampled.
  int num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }
  int32_t last_token() const { return token_ids.back(); }
  // This sequence's prompt is to be scored: asked, and the prefill samples the first token (a
  // resumed request's prompt was scored by the run it resumes).
  bool ScoresPrompt() const {
    return params.num_prompt_logprobs.has_value() && num_generated_tokens() == 0;
  }
};

// The tokens whose KV a decode worker receives for a request prefilled elsewhere: all but the last
// sampled one, which the first decode step feeds through the model.
inline int NumPrefilledKvTokens(const std::vector<int32_t>& prompt_token_ids,
                                const std::vector<int32_t>& generated_token_ids) {
  return static_cast<int>(prompt_token_ids.size() + generated_token_ids.size()) - 1;
}

}  // namespace baton::runtime
