#include "scheduler/service/openai_completion.h"

#include <algorithm>

#include <cmath>
#include <limits>
#include <map>
#include <type_traits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "scheduler/service/json_fields.h"
#include "scheduler/service/openai_structured_outputs.h"

namespace baton::scheduler {

using nlohmann::json;

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument: return 400;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kResourceExhausted: return 429;  // admission shed the request
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    case absl::StatusCode::kCancelled: return 499;
    default: return 500;
  }
}

const char* FinishReasonName(runtime::FinishReason reason) {
  switch (reason) {
    case runtime::FinishReason::kLength: return "length";
    case runtime::FinishReason::kStop: return "stop";
    case runtime::FinishReason::kCancelled: return "abort";
    case runtime::FinishReason::kNone: break;
  }
  return nullptr;
}

// vLLM fields this server does not honour yet: a request that sets one to anything but its neutral
// value is refused, naming it, rather than answered as if it had not asked.
absl::Status RefuseUnsupported(const json& body) {
  const std::pair<const char*, json> neutral[] = {
      {"suffix", ""},
      {"use_beam_search", false},
      {"length_penalty", 1.0},
      {"allowed_token_ids", json::array()},
      {"bad_words", json::array()},
      {"spaces_between_special_tokens", true},
      {"return_tokens_as_token_ids", false},
      {"detokenize", true},
      {"truncate_prompt_tokens", nullptr},
      {"priority", 0}};
  for (const auto& [field, value] : neutral) {
    if (!body.contains(field) || body[field].is_null() || body[field] == value) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("'", field, "' is not supported yet (only ", value.dump(), ")"));
  }
  return absl::OkStatus();
}

// OpenAI's logit_bias: an object from token ids, spelled as strings in JSON ("50256"), to biases.
// The ranges are ValidateRequest's and the vocabulary the driver's to check.
absl::Status ReadLogitBias(const json& body, std::map<int32_t, float>* out) {
  if (!body.contains("logit_bias") || body["logit_bias"].is_null()) return absl::OkStatus();
  const json& bias = body["logit_bias"];
  if (!bias.is_object()) {
    return absl::InvalidArgumentError("'logit_bias' must be an object from token ids to numbers");
  }
  for (const auto& [key, value] : bias.items()) {
    int32_t token_id = 0;
    if (!absl::SimpleAtoi(absl::string_view(key), &token_id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'logit_bias': key '", key, "' is not a token id"));
    }
    if (!value.is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'logit_bias': the bias of token ", key, " must be a number"));
    }
    (*out)[token_id] = value.get<float>();
  }
  return absl::OkStatus();
}

// The logits processors' fields (penalties, min_p, min_tokens, logit_bias).
absl::Status ReadLogitsProcessorFields(const json& body, runtime::GenerationParams* params) {
  runtime::LogitsProcessorOptions& processors = params->logits_processors;
  RETURN_IF_ERROR(ReadNumber(body, "presence_penalty", &processors.presence_penalty));
  RETURN_IF_ERROR(ReadNumber(body, "frequency_penalty", &processors.frequency_penalty));
  RETURN_IF_ERROR(ReadNumber(body, "repetition_penalty", &processors.repetition_penalty));
  RETURN_IF_ERROR(ReadNumber(body, "min_p", &params->sampling.min_p));
  RETURN_IF_ERROR(ReadNumber(body, "min_tokens", &processors.min_tokens));
  return ReadLogitBias(body, &processors.logit_bias);
}

absl::Status ReadSamplingFields(const json& body, std::optional<int> default_max_tokens,
                                GenerateRequest* request, AnswerShape* shape) {
  int n = 1;
  RETURN_IF_ERROR(ReadNumber(body, "n", &n));
  if (n < 1 || n > kMaxChoices) {
    return absl::InvalidArgumentError(absl::StrCat("'n' must be in [1, ", kMaxChoices, "], got ", n));
  }
  // "max_completion_tokens" is OpenAI's newer name for the chat endpoint's "max_tokens".
  const char* max_tokens_field =
      body.contains("max_completion_tokens") && !body["max_completion_tokens"].is_null()
          ? "max_completion_tokens"
          : "max_tokens";
  int max_tokens = default_max_tokens.value_or(0);
  float temperature = 1.0f, top_p = 1.0f;
  int top_k = 0;
  if (absl::Status s = ReadNumber(body, max_tokens_field, &max_tokens); !s.ok()) return s;
  if (absl::Status s = ReadNumber(body, "temperature", &temperature); !s.ok()) return s;
  if (absl::Status s = ReadNumber(body, "top_p", &top_p); !s.ok()) return s;
  if (absl::Status s = ReadNumber(body, "top_k", &top_k); !s.ok()) return s;
  if (top_k < 0) top_k = 0;  // vLLM's -1 means off
  runtime::GenerationParams& params = request->params;
  RETURN_IF_ERROR(ReadStructuredOutputs(body, &params.constraint));
  params.max_tokens = max_tokens;
  // Absent: the endpoint's default; an explicit null: up to the context length, as vLLM reads it.
  const bool given = body.contains(max_tokens_field) && !body[max_tokens_field].is_null();
  request->max_tokens_given = given || (default_max_tokens.has_value() && !body.contains(max_tokens_field));
  // top_p 0 is "unset" in the gRPC API; it has meant 1 here too since this front end went through it.
  params.sampling = kernels::SamplingOptions{
      .temperature = temperature, .top_k = top_k, .top_p = top_p == 0 ? 1.0f : top_p};
  // Absent: the model's generation_config.json value (RequestDriver::Prepare).
  auto present = [&body](const char* field) { return body.contains(field) && !body[field].is_null(); };
  request->temperature_given = present("temperature");
  request->top_k_given = present("top_k");
  request->top_p_given = present("top_p");
  if (body.contains("seed") && !body["seed"].is_null()) {
    RETURN_IF_ERROR(ReadNumber(body, "seed", &params.seed));
    request->seed_given = true;
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& stop = body["stop"];
    if (stop.is_string()) {
      request->stop_strings.push_back(stop.get<std::string>());
    } else if (stop.is_array()) {
      for (const json& s : stop) {
        if (!s.is_string()) return absl::InvalidArgumentError("'stop' must hold strings");
        request->stop_strings.push_back(s.get<std::string>());
      }
    } else {
      return absl::InvalidArgumentError("'stop' must be a string or an array of strings");
    }
  }
  if (absl::Status s = ReadBool(body, "ignore_eos", &params.ignore_eos); !s.ok()) return s;
  RETURN_IF_ERROR(ReadBool(body, "include_stop_str_in_output", &request->include_stop_str_in_output));
  RETURN_IF_ERROR(ReadBool(body, "skip_special_tokens", &request->skip_special_tokens));
  if (body.contains("stop_token_ids") && !body["stop_token_ids"].is_null()) {
    const json& ids = body["stop_token_ids"];
    if (!ids.is_array()) return absl::InvalidArgumentError("'stop_token_ids' must be an array of token ids");
    for (const json& id : ids) {
      if (!id.is_number_integer() || !FitsInteger<int32_t>(id)) {
        return absl::InvalidArgumentError(absl::StrCat("'stop_token_ids': ", id.dump(), " is not a token id"));
      }
      params.stop_token_ids.push_back(id.get<int32_t>());
    }
  }
  RETURN_IF_ERROR(ReadLogitsProcessorFields(body, &params));
  RETURN_IF_ERROR(RefuseUnsupported(body));
  *shape = AnswerShape{.n = n, .best_of = n};
  if (absl::Status s = ReadBool(body, "stream", &shape->stream); !s.ok()) return s;
  if (body.contains("prompt_logprobs") && !body["prompt_logprobs"].is_null()) {
    int prompt_logprobs = 0;
    RETURN_IF_ERROR(ReadNumber(body, "prompt_logprobs", &prompt_logprobs));
    if (prompt_logprobs < 0 || prompt_logprobs > 20) {
      return absl::InvalidArgumentError(
          absl::StrCat("'prompt_logprobs' must be in [0, 20], got ", prompt_logprobs));
    }
    if (shape->stream) {
      return absl::InvalidArgumentError("'prompt_logprobs' are not available when streaming");
    }
    params.num_prompt_logprobs = prompt_logprobs;
    shape->prompt_logprobs = true;
  }
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const json& options = body["stream_options"];
    if (!options.is_object()) return absl::InvalidArgumentError("'stream_options' must be an object");
    // vLLM refuses stream options on an answer that is not streamed.
    if (!shape->stream) return absl::InvalidArgumentError("'stream_options' needs 'stream': true");
    if (absl::Status s = ReadBool(options, "include_usage", &shape->include_usage); !s.ok()) {
      return s;
    }
    bool continuous = false;
    RETURN_IF_ERROR(ReadBool(options, "continuous_usage_stats", &continuous));
    if (continuous) return absl::InvalidArgumentError("'stream_options.continuous_usage_stats' is not supported yet");
  }
  // The body's request_id (vLLM's field); an X-Request-Id header, read by the server, wins.
  if (body.contains("request_id") && !body["request_id"].is_null()) {
    if (!body["request_id"].is_string()) return absl::InvalidArgumentError("'request_id' must be a string");
    request->request_id = body["request_id"].get<std::string>();
  }
  return absl::OkStatus();
}

namespace {

// A token id prompt: every element an int32 integer.
absl::StatusOr<std::vector<int32_t>> TokenIdPrompt(const json& ids) {
  std::vector<int32_t> out;
  for (const json& id : ids) {
    if (!id.is_number_integer()) return absl::InvalidArgumentError("'prompt': mixed token id array");
    if (!FitsInteger<int32_t>(id)) {
      return absl::InvalidArgumentError(absl::StrCat("'prompt': token id ", id.dump(), " is out of range"));
    }
    out.push_back(id.get<int32_t>());
  }
  return out;
}

// The prompts of "prompt", each a text or token ids, in order.
absl::Status ReadPrompts(const json& prompt, std::vector<GenerateRequest>* requests) {
  auto add_text = [&](const std::string& text) { requests->emplace_back().prompt_text = text; };
  if (prompt.is_string()) {
    add_text(prompt.get<std::string>());
  } else if (prompt.is_array() && !prompt.empty() && prompt[0].is_number_integer()) {
    ASSIGN_OR_RETURN(requests->emplace_back().prompt_ids, TokenIdPrompt(prompt));
  } else if (prompt.is_array() && !prompt.empty() && prompt.size() <= kMaxChoices) {
    for (const json& one : prompt) {
      if (one.is_string()) {
        add_text(one.get<std::string>());
      } else if (one.is_array()) {
        ASSIGN_OR_RETURN(requests->emplace_back().prompt_ids, TokenIdPrompt(one));
      } else {
        return absl::InvalidArgumentError("'prompt': a list must hold strings or token id arrays");
      }
    }
  } else if (prompt.is_array() && prompt.size() > kMaxChoices) {
    return absl::InvalidArgumentError(absl::StrCat("'prompt': at most ", kMaxChoices, " prompts"));
  } else {
    return absl::InvalidArgumentError(
        "'prompt' must be a string, an array of token ids, or a non-empty list of either");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<GenerateRequest>> CompletionToRequests(const json& body, AnswerShape* shape) {
  if (!body.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  if (!body.contains("prompt")) return absl::InvalidArgumentError("'prompt' is required");
  std::vector<GenerateRequest> requests;
  RETURN_IF_ERROR(ReadPrompts(body["prompt"], &requests));
  // The fields every prompt shares, read once and copied into each.
  GenerateRequest shared;
  if (body.contains("model") && body["model"].is_string()) shared.model = body["model"];
  // vLLM: null or absent, none; 0, the sampled token's alone; k, the top k and the sampled token's.
  if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    int logprobs = 0;
    RETURN_IF_ERROR(ReadNumber(body, "logprobs", &logprobs));
    shared.params.num_logprobs = logprobs;
  }
  RETURN_IF_ERROR(ReadSamplingFields(body, /*default_max_tokens=*/16, &shared, shape));
  if (body.contains("add_special_tokens") && body["add_special_tokens"] == false) {
    return absl::InvalidArgumentError("'add_special_tokens' is not supported yet on completions (only true)");
  }
  RETURN_IF_ERROR(ReadBool(body, "echo", &shape->echo));
  // The prompt's logprobs come with the echoed prompt, as many alternatives as the output's.
  if (shape->echo && shared.params.num_logprobs && !shared.params.num_prompt_logprobs) {
    shared.params.num_prompt_logprobs = shared.params.num_logprobs;
  }
  if (shape->echo && shared.max_tokens_given && shared.params.max_tokens == 0) {
    shape->echo_only = true;
    shared.params.max_tokens = 1;
  }
  RETURN_IF_ERROR(ReadNumber(body, "best_of", &shape->best_of));
  if (shape->best_of < shape->n) {
    return absl::InvalidArgumentError(
        absl::StrCat("'best_of' must be >= 'n' (", shape->n, "), got ", shape->best_of));
  }
  if (shape->best_of > shape->n && shape->stream) {
    return absl::InvalidArgumentError("'best_of' greater than 'n' cannot be streamed");
  }
  if (static_cast<int64_t>(requests.size()) * shape->best_of > kMaxChoices) {
    return absl::InvalidArgumentError(absl::StrCat("prompts x best_of (or n) must be at most ",
                                                   kMaxChoices, ", got ", requests.size(), " x ",
                                                   shape->best_of));
  }
  for (GenerateRequest& request : requests) {
    std::optional<std::string> text = std::move(request.prompt_text);
    std::optional<std::vector<int32_t>> ids = std::move(request.prompt_ids);
    request = shared;
    request.prompt_text = std::move(text);
    request.prompt_ids = std::move(ids);
  }
  return requests;
}

std::string CompletionLogprobs::TokenText(int32_t id, json* offsets) {
  std::string text = tokenizer_.Decode({&id, 1}, false);
  offsets->push_back(text_offset_);
  text_offset_ += std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; });
  return text;
}

namespace {

// The token's logprob among `listed` (its own entry is always there) and the alternatives by text.
std::pair<json, json> Scored(const runtime::Tokenizer& tokenizer, int32_t id,
                             const std::vector<kernels::TokenLogprob>& listed) {
  json chosen = nullptr;
  json alternatives = json::object();
  for (const kernels::TokenLogprob& lp : listed) {
    const int32_t alt = lp.token_id;
    alternatives[tokenizer.Decode({&alt, 1}, false)] = lp.logprob;
    if (lp.token_id == id) chosen = lp.logprob;
  }
  return {std::move(chosen), std::move(alternatives)};
}

}  // namespace

json CompletionLogprobs::Next(const GenerateChunk& chunk) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (size_t i = 0; i < chunk.logprobs.size(); ++i) {
    const int32_t id = chunk.token_ids[i];
    tokens.push_back(TokenText(id, &offsets));
    auto [chosen, alternatives] = Scored(tokenizer_, id, chunk.logprobs[i]);
    token_logprobs.push_back(std::move(chosen));
    top.push_back(std::move(alternatives));
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top},
          {"text_offset", offsets}};
}

json VllmPromptLogprobs(const runtime::Tokenizer& tokenizer,
                        const std::vector<std::vector<kernels::TokenLogprob>>& scores) {
  json out = json::array();
  for (size_t i = 0; i < scores.size(); ++i) {
    if (i == 0) {
      out.push_back(nullptr);
      continue;
    }
    json entry = json::object();
    for (const kernels::TokenLogprob& lp : scores[i]) {
      const int32_t id = lp.token_id;
      entry[std::to_string(id)] = {{"logprob", lp.logprob},
                                   {"rank", lp.rank},
                                   {"decoded_token", tokenizer.Decode({&id, 1}, false)}};
    }
    out.push_back(std::move(entry));
  }
  return out;
}

json CompletionLogprobs::Prompt(std::span<const int32_t> prompt_ids,
                                const std::vector<std::vector<kernels::TokenLogprob>>& scores) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (size_t i = 0; i < prompt_ids.size(); ++i) {
    tokens.push_back(TokenText(prompt_ids[i], &offsets));
    if (i == 0 || i >= scores.size()) {
      token_logprobs.push_back(nullptr);
      top.push_back(nullptr);
      continue;
    }
    auto [chosen, alternatives] = Scored(tokenizer_, prompt_ids[i], scores[i]);
    token_logprobs.push_back(std::move(chosen));
    top.push_back(std::move(alternatives));
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top},
          {"text_offset", offsets}};
}

}  // namespace baton::scheduler
