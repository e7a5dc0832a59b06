#include "benchmarks/bench/openai_protocol.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace baton::bench {

using nlohmann::json;

std::string CompletionRequestBody(const GenerationRequest& request, const std::string& model) {
  json body = {{"max_tokens", request.max_tokens},
               {"temperature", 0.0},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"ignore_eos", request.ignore_eos}};
  if (!model.empty()) body["model"] = model;
  if (!request.prompt_text.empty()) {
    body["prompt"] = request.prompt_text;
  } else {
    body["prompt"] = request.prompt_ids;
  }
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ChatCompletionRequestBody(const GenerationRequest& request, const std::string& model) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", request.prompt_text}}})},
               {"max_completion_tokens", request.max_tokens},
               {"temperature", 0.0},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"ignore_eos", request.ignore_eos}};
  if (!model.empty()) body["model"] = model;
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<CompletionChunk> ParseCompletionChunk(std::string_view data) {
  CompletionChunk chunk;
  if (data == "[DONE]") {
    chunk.done = true;
    return chunk;
  }
  const json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream chunk is not a JSON object: ", std::string(data.substr(0, 200))));
  }
  if (const auto error = j.find("error"); error != j.end() && !error->is_null()) {
    const std::string message =
        error->is_object() && error->contains("message") && (*error)["message"].is_string()
            ? (*error)["message"].get<std::string>()
            : error->dump();
    return absl::InternalError(absl::StrCat("server error: ", message));
  }
  if (const auto choices = j.find("choices"); choices != j.end() && choices->is_array()) {
    chunk.num_choices = static_cast<int>(choices->size());
    if (!choices->empty() && (*choices)[0].is_object()) {
      const json& choice = (*choices)[0];
      if (choice.contains("text") && choice["text"].is_string()) {
        chunk.text = choice["text"];
        chunk.has_output = true;
      } else if (const auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
        if (delta->contains("content") && (*delta)["content"].is_string()) {
          chunk.text = (*delta)["content"];
        }
        chunk.has_output = !chunk.text.empty();
      } else {
        chunk.has_output = true;  // a completion choice without text: still a token's event
      }
      if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
        chunk.finish_reason = choice["finish_reason"];
      }
      // llama-server ends a completion with a chunk of no text that carries only the finish
      // reason: no token's event. (An empty text without one is a token that completed no
      // character yet, and counts.)
      if (chunk.text.empty() && !chunk.finish_reason.empty()) chunk.has_output = false;
    }
  }
  if (const auto usage = j.find("usage"); usage != j.end() && usage->is_object()) {
    if (usage->contains("prompt_tokens") && (*usage)["prompt_tokens"].is_number_integer()) {
      chunk.prompt_tokens = (*usage)["prompt_tokens"].get<int>();
    }
    if (usage->contains("completion_tokens") && (*usage)["completion_tokens"].is_number_integer()) {
      chunk.completion_tokens = (*usage)["completion_tokens"].get<int>();
    }
    if (const auto details = usage->find("prompt_tokens_details");
        details != usage->end() && details->is_object() && details->contains("cached_tokens") &&
        (*details)["cached_tokens"].is_number_integer()) {
      chunk.cached_tokens = (*details)["cached_tokens"].get<int>();
    }
  }
  return chunk;
}

absl::StatusOr<ModelInfo> ParseModelList(std::string_view body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("/v1/models: expected {\"data\": [...]}, got ",
                                                   std::string(body.substr(0, 200))));
  }
  ModelInfo info;
  if (j["data"].empty() || !j["data"][0].is_object()) return info;
  const json& model = j["data"][0];
  if (model.contains("id") && model["id"].is_string()) info.model = model["id"];
  if (model.contains("max_model_len") && model["max_model_len"].is_number_integer()) {
    info.max_model_len = model["max_model_len"].get<int>();
  }
  return info;
}

}  // namespace baton::bench
