#include "scheduler/service/openai_completion.h"

#include <algorithm>

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace baton::scheduler {
namespace {

using nlohmann::json;

// Whether an integer JSON value fits T (nlohmann's get<T> would wrap or truncate it silently).
template <typename T>
bool FitsInteger(const json& value) {
  if (value.is_number_unsigned()) {
    return value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  }
  const int64_t v = value.get<int64_t>();
  if constexpr (std::is_unsigned_v<T>) {
    return v >= 0 && static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else {
    return v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
           v <= static_cast<int64_t>(std::numeric_limits<T>::max());
  }
}

// Reads a number field of the expected kind and range; InvalidArgument naming the field otherwise.
template <typename T>
absl::Status ReadNumber(const json& body, const char* field, T* out) {
  if (!body.contains(field) || body[field].is_null()) return absl::OkStatus();
  const json& value = body[field];
  if (!value.is_number() || (std::is_integral_v<T> && !value.is_number_integer())) {
    return absl::InvalidArgumentError(absl::StrCat("'", field, "' must be ",
                                                   std::is_integral_v<T> ? "an integer" : "a number"));
  }
  if constexpr (std::is_integral_v<T>) {
    if (!FitsInteger<T>(value)) {
      return absl::InvalidArgumentError(absl::StrCat("'", field, "' is out of range: ", value.dump(),
                                                     " (the largest accepted is ",
                                                     std::numeric_limits<T>::max(), ")"));
    }
  } else {
    const double v = value.get<double>();
    if (!std::isfinite(v) || std::abs(v) > std::numeric_limits<T>::max()) {
      return absl::InvalidArgumentError(absl::StrCat("'", field, "' is out of range: ", value.dump()));
    }
  }
  *out = value.get<T>();
  return absl::OkStatus();
}

// Reads a boolean field (absent or null: *out unchanged); InvalidArgument naming the field otherwise.
absl::Status ReadBool(const json& object, const char* field, bool* out) {
  if (!object.contains(field) || object[field].is_null()) return absl::OkStatus();
  if (!object[field].is_boolean()) {
    return absl::InvalidArgumentError(absl::StrCat("'", field, "' must be true or false"));
  }
  *out = object[field].get<bool>();
  return absl::OkStatus();
}

}  // namespace

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

absl::StatusOr<GenerateRequest> CompletionToRequest(const json& body, CompletionStreaming* streaming) {
  if (!body.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  GenerateRequest request;
  if (body.contains("model") && body["model"].is_string()) request.model = body["model"];
  if (!body.contains("prompt")) return absl::InvalidArgumentError("'prompt' is required");
  const json& prompt = body["prompt"];
  if (prompt.is_string()) {
    request.prompt_text = prompt.get<std::string>();
  } else if (prompt.is_array() && !prompt.empty() && prompt[0].is_number_integer()) {
    request.prompt_ids.emplace();
    for (const json& id : prompt) {
      if (!id.is_number_integer()) return absl::InvalidArgumentError("'prompt': mixed token id array");
      if (!FitsInteger<int32_t>(id)) {
        return absl::InvalidArgumentError(absl::StrCat("'prompt': token id ", id.dump(), " is out of range"));
      }
      request.prompt_ids->push_back(id.get<int32_t>());
    }
  } else if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) {
    request.prompt_text = prompt[0].get<std::string>();
  } else {
    return absl::InvalidArgumentError("'prompt' must be a string or an array of token ids (one prompt per request)");
  }
  int n = 1;
  if (absl::Status s = ReadNumber(body, "n", &n); !s.ok()) return s;
  if (n != 1) return absl::InvalidArgumentError("'n' other than 1 is not supported");
  bool echo = false;
  if (absl::Status s = ReadBool(body, "echo", &echo); !s.ok()) return s;
  if (echo) return absl::InvalidArgumentError("'echo' is not supported");
  int max_tokens = 16;
  float temperature = 1.0f, top_p = 1.0f;
  int top_k = 0, logprobs = 0;
  if (absl::Status s = ReadNumber(body, "max_tokens", &max_tokens); !s.ok()) return s;
  if (absl::Status s = ReadNumber(body, "temperature", &temperature); !s.ok()) return s;
  if (absl::Status s = ReadNumber(body, "top_p", &top_p); !s.ok()) return s;
  if (absl::Status s = ReadNumber(body, "top_k", &top_k); !s.ok()) return s;
  if (absl::Status s = ReadNumber(body, "logprobs", &logprobs); !s.ok()) return s;
  if (top_k < 0) top_k = 0;  // vLLM's -1 means off
  runtime::GenerationParams& params = request.params;
  params.max_tokens = max_tokens;
  // Absent: OpenAI's 16. An explicit null: up to the context length, as vLLM reads it.
  request.max_tokens_given = !(body.contains("max_tokens") && body["max_tokens"].is_null());
  // top_p 0 is "unset" in the gRPC API; it has meant 1 here too since this front end went through it.
  params.sampling = kernels::SamplingOptions{
      .temperature = temperature, .top_k = top_k, .top_p = top_p == 0 ? 1.0f : top_p};
  params.num_logprobs = logprobs;
  if (body.contains("seed") && !body["seed"].is_null()) {
    RETURN_IF_ERROR(ReadNumber(body, "seed", &params.seed));
    request.seed_given = true;
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& stop = body["stop"];
    if (stop.is_string()) {
      request.stop_strings.push_back(stop.get<std::string>());
    } else if (stop.is_array()) {
      for (const json& s : stop) {
        if (!s.is_string()) return absl::InvalidArgumentError("'stop' must hold strings");
        request.stop_strings.push_back(s.get<std::string>());
      }
    } else {
      return absl::InvalidArgumentError("'stop' must be a string or an array of strings");
    }
  }
  if (absl::Status s = ReadBool(body, "ignore_eos", &params.ignore_eos); !s.ok()) return s;
  *streaming = CompletionStreaming{};
  if (absl::Status s = ReadBool(body, "stream", &streaming->stream); !s.ok()) return s;
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const json& options = body["stream_options"];
    if (!options.is_object()) return absl::InvalidArgumentError("'stream_options' must be an object");
    if (absl::Status s = ReadBool(options, "include_usage", &streaming->include_usage); !s.ok()) {
      return s;
    }
  }
  return request;
}

json CompletionLogprobs::Next(const GenerateChunk& chunk) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (size_t i = 0; i < chunk.logprobs.size(); ++i) {
    const int32_t id = chunk.token_ids[i];
    const std::string text = tokenizer_.Decode({&id, 1}, false);
    tokens.push_back(text);
    offsets.push_back(text_offset_);
    // Code points, as Python's len() counts the text the client sees.
    text_offset_ += std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; });
    json chosen = nullptr;
    json alternatives = json::object();
    for (const kernels::TokenLogprob& lp : chunk.logprobs[i]) {
      const int32_t alt = lp.token_id;
      alternatives[tokenizer_.Decode({&alt, 1}, false)] = lp.logprob;
      if (lp.token_id == id) chosen = lp.logprob;
    }
    token_logprobs.push_back(chosen);
    top.push_back(std::move(alternatives));
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top},
          {"text_offset", offsets}};
}

}  // namespace baton::scheduler
