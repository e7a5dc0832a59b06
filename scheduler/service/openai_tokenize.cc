#include "scheduler/service/openai_tokenize.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "scheduler/global/chat_prompt.h"
#include "scheduler/service/json_fields.h"
#include "scheduler/service/openai_chat.h"

namespace baton::scheduler {

using nlohmann::json;

namespace {

absl::Status CheckModel(const json& body, const ServedModel& model) {
  if (!body.contains("model") || body["model"].is_null()) return absl::OkStatus();
  if (!body["model"].is_string()) return absl::InvalidArgumentError("'model' must be a string");
  const std::string name = body["model"].get<std::string>();
  if (!model.IsNamed(name)) {
    return absl::NotFoundError(absl::StrCat("The model `", name, "` does not exist."));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<json> Tokenize(const json& body, const nlohmann::ordered_json& ordered_body,
                              const ServedModel& model) {
  if (!body.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  RETURN_IF_ERROR(CheckModel(body, model));
  const bool has_prompt = body.contains("prompt"), has_messages = body.contains("messages");
  if (has_prompt == has_messages) {
    return absl::InvalidArgumentError("give exactly one of 'prompt' and 'messages'");
  }
  std::string text;
  // A chat's rendering writes its special tokens itself; a plain prompt gets the tokenizer's.
  bool add_special_tokens = !has_messages;
  RETURN_IF_ERROR(ReadBool(body, "add_special_tokens", &add_special_tokens));
  if (has_prompt) {
    if (!body["prompt"].is_string()) return absl::InvalidArgumentError("'prompt' must be a string");
    text = body["prompt"].get<std::string>();
  } else {
    ASSIGN_OR_RETURN(const ChatPrompt chat, ChatPromptFromJson(body, ordered_body));
    ASSIGN_OR_RETURN(text, RenderChatPrompt(model.chat_template, chat));
  }
  bool return_token_strs = false;
  RETURN_IF_ERROR(ReadBool(body, "return_token_strs", &return_token_strs));
  const std::vector<int32_t> ids = model.tokenizer->Encode(text, add_special_tokens);
  json token_strs = nullptr;
  if (return_token_strs) {
    token_strs = json::array();
    for (int32_t id : ids) token_strs.push_back(std::string(model.tokenizer->IdToToken(id).value_or("")));
  }
  return json{{"count", ids.size()}, {"max_model_len", model.max_model_len}, {"tokens", ids},
              {"token_strs", std::move(token_strs)}};
}

absl::StatusOr<json> Detokenize(const json& body, const ServedModel& model) {
  if (!body.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  RETURN_IF_ERROR(CheckModel(body, model));
  if (!body.contains("tokens") || !body["tokens"].is_array()) {
    return absl::InvalidArgumentError("'tokens' must be an array of token ids");
  }
  std::vector<int32_t> ids;
  for (const json& id : body["tokens"]) {
    if (!id.is_number_integer() || !FitsInteger<int32_t>(id) || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= model.config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("'tokens': ", id.dump(),
                                                     " is not a token id of the vocabulary [0, ",
                                                     model.config.vocab_size, ")"));
    }
    ids.push_back(id.get<int32_t>());
  }
  return json{{"prompt", model.tokenizer->Decode(ids, /*skip_special_tokens=*/false)}};
}

}  // namespace baton::scheduler
