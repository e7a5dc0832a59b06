// GenerateChunk: one piece of a request's streamed answer in native form — the tokens generated
// since the previous chunk, their text, logprobs and timestamps, and on the last chunk the finish
// reason and the counts. Front ends convert it to their wire type (v1::GenerateResponse, OpenAI
// JSON) and nothing else.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "baton/kernels/sampling.h"
#include "runtime/batch/sequence.h"

namespace baton::scheduler {

// Server-side timestamps, Unix microseconds from the workers' clocks; 0: not carried by this chunk.
// Each phase's stamps ride on the first chunk written after the scheduler learns them.
struct ServerTiming {
  int64_t arrival_us = 0;
  int64_t prefill_start_us = 0;
  int64_t prefill_end_us = 0;
  int64_t kv_transfer_start_us = 0;
  int64_t kv_transfer_end_us = 0;
  int64_t kv_transfer_bytes = 0;  // what the hand-off moved (native only: not on the wire)
  std::vector<int64_t> token_emit_us;  // [num token_ids] when the worker reported them

  bool empty() const {
    return arrival_us == 0 && prefill_start_us == 0 && prefill_end_us == 0 &&
           kv_transfer_start_us == 0 && kv_transfer_end_us == 0 && kv_transfer_bytes == 0 &&
           token_emit_us.empty();
  }
};

struct GenerateChunk {
  std::string request_id;
  std::string text;                // the text these tokens completed (stop strings never appear)
  std::vector<int32_t> token_ids;  // [num_tokens]
  // [num_tokens] when the request asked for logprobs: the top alternatives of each token.
  std::vector<std::vector<kernels::TokenLogprob>> logprobs;
  // On the first chunk when the request asked for prompt logprobs: [num_prompt_tokens], entry i
  // scores prompt token i (its logprob given the ones before, and the top alternatives), entry 0
  // empty.
  std::vector<std::vector<kernels::TokenLogprob>> prompt_logprobs;
  ServerTiming timing;
  runtime::FinishReason finish_reason = runtime::FinishReason::kNone;  // kNone: more follows
  // Set on the last chunk (finish_reason != kNone) only.
  std::vector<int32_t> prompt_token_ids;
  int num_prompt_tokens = 0;
  int num_generated_tokens = 0;
  int num_cached_tokens = 0;  // prompt tokens whose KV the prefill took from a prefix cache
};

// Writes one chunk to the client; false when the client is gone.
using ChunkSink = std::function<bool(const GenerateChunk&)>;

}  // namespace baton::scheduler
