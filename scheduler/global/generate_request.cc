#include "scheduler/global/generate_request.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace baton::scheduler {

absl::Status ValidateRequest(const GenerateRequest& request) {
  const int num_prompts = int{request.prompt_text.has_value()} + int{request.prompt_ids.has_value()} +
                          int{request.chat.has_value()};
  if (request.request_id.size() > kMaxClientRequestIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("request_id is ", request.request_id.size(),
                                                   " bytes; at most ", kMaxClientRequestIdBytes));
  }
  if (num_prompts != 1) return absl::InvalidArgumentError("prompt: set exactly one of text, token_ids and chat");
  if (request.prompt_text.has_value()) {
    if (request.prompt_text->empty()) return absl::InvalidArgumentError("prompt: text is empty");
  } else if (request.prompt_ids.has_value()) {
    if (request.prompt_ids->empty()) return absl::InvalidArgumentError("prompt: token_ids is empty");
  } else if (absl::Status valid = ValidateChatPrompt(*request.chat); !valid.ok()) {
    return valid;
  }
  const runtime::GenerationParams& params = request.params;
  const float temperature = params.sampling.temperature;
  if (!std::isfinite(temperature) || temperature < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling.temperature ", temperature, " must be >= 0"));
  }
  if (params.sampling.top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling.top_k ", params.sampling.top_k, " must be >= 0"));
  }
  const float top_p = params.sampling.top_p;
  if (!(top_p > 0 && top_p <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("sampling.top_p ", top_p, " must be in (0, 1]"));
  }
  if (params.num_logprobs && (*params.num_logprobs < 0 || *params.num_logprobs > 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("logprobs ", *params.num_logprobs, " must be in [0, 20]"));
  }
  if (params.num_prompt_logprobs &&
      (*params.num_prompt_logprobs < 0 || *params.num_prompt_logprobs > 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sampling.prompt_logprobs ", *params.num_prompt_logprobs, " must be in [0, 20]"));
  }
  if (request.max_tokens_given && params.max_tokens <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("stop.max_tokens ", params.max_tokens, " must be >= 1"));
  }
  // The vocabulary is checked with the prompt's ids, once the model is known (RequestDriver).
  if (absl::Status s = runtime::ValidateLogitsProcessorOptions(
          params.logits_processors, params.sampling,
          request.max_tokens_given ? params.max_tokens : 0, /*vocab_size=*/0);
      !s.ok()) {
    return s;
  }
  for (const std::string& stop : request.stop_strings) {
    if (stop.empty()) return absl::InvalidArgumentError("stop: empty stop string");
  }
  return absl::OkStatus();
}

}  // namespace baton::scheduler
