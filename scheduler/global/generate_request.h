// GenerateRequest: a public Generate request in native form, whatever front end it came from. The
// gRPC service (scheduler/service/generate_proto.h) and the OpenAI HTTP server (openai_http.cc) each
// convert their wire type to it once; everything below them sees only this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/batch/sequence.h"
#include "scheduler/global/chat_prompt.h"

namespace baton::scheduler {

struct GenerateRequest {
  // The client's id for its request (at most kMaxClientRequestIdBytes), echoed in every chunk;
  // never the id the deployment runs it under, so that two clients may use the same one. Prepare
  // moves it to client_request_id and sets request_id to a fresh internal one ("req-<arrival us>-<n>").
  std::string request_id;
  std::string client_request_id;
  std::string model;       // empty: whatever model is served
  // Exactly one of the three prompts is set (ValidateRequest); a chat becomes prompt_text (without
  // special tokens added) in Prepare, through the served model's chat template.
  std::optional<std::string> prompt_text;
  std::optional<std::vector<int32_t>> prompt_ids;
  std::optional<ChatPrompt> chat;
  // Sampling, seed, stop token ids, ignore_eos, num_logprobs, and max_tokens when max_tokens_given.
  // A front end maps its wire defaults here (top_p unset -> 1).
  runtime::GenerationParams params;
  bool max_tokens_given = false;  // false: generate up to the context length
  // Whether tokenizing prompt_text adds the tokenizer's special tokens (BOS); false for a chat
  // template's rendering, which writes them itself.
  bool add_special_tokens = true;
  bool seed_given = false;        // false: the scheduler seeds from the arrival time
  // false: Prepare takes the model's default (generation_config.json, else vLLM's: temperature 1,
  // top_k off, top_p 1). A front end clears them for fields its client left out; a request built
  // in code is explicit.
  bool temperature_given = true;
  bool top_k_given = true;
  bool top_p_given = true;
  std::vector<std::string> stop_strings;
  bool include_stop_str_in_output = false;  // the stop string that ends the text is returned too
  // false: special tokens are part of the text (vLLM's skip_special_tokens; a tool-call parser's
  // markers), except the one that stops the generation.
  bool skip_special_tokens = true;
};

// Checks what the request alone can tell, in a fixed order (prompt, sampling, logprobs, max_tokens,
// stop strings): InvalidArgument naming the field as the public API spells it ("sampling.top_p 2
// must be in (0, 1]"). Checks that need the model (vocabulary, context length) are Prepare's.
absl::Status ValidateRequest(const GenerateRequest& request);

inline constexpr size_t kMaxClientRequestIdBytes = 256;

// The id a client sees in its answer: its own, or the internal one when it gave none.
inline const std::string& EchoedRequestId(const GenerateRequest& request) {
  return request.client_request_id.empty() ? request.request_id : request.client_request_id;
}

// A validated, tokenized, admitted request, ready to run.
struct PreparedRequest {
  GenerateRequest request;      // request_id internal and unique, max_tokens and seed resolved
  std::vector<int32_t> prompt;  // [num_prompt_tokens]
  int64_t arrival_us = 0;       // Unix microseconds
};

}  // namespace baton::scheduler
