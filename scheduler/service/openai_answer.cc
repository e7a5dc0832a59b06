#include "scheduler/service/openai_answer.h"

#include <utility>

namespace baton::scheduler {
namespace {

using nlohmann::json;

json FinishReasonJson(runtime::FinishReason finish) {
  const char* reason = FinishReasonName(finish);
  return reason ? json(reason) : json(nullptr);
}

// Appends each of `from`'s arrays (OpenAI's completion logprobs: tokens, token_logprobs, ...) to
// the same key's array in `into`.
void AppendLogprobs(json from, json& into) {
  for (auto& [key, values] : from.items()) {
    for (json& v : values) into[key].push_back(std::move(v));
  }
}

class CompletionAnswer : public AnswerChoices {
 public:
  CompletionAnswer(const runtime::Tokenizer& tokenizer, bool want_logprobs,
                   std::optional<CompletionEcho> echo)
      : logprobs_of_(tokenizer), want_logprobs_(want_logprobs), echo_(std::move(echo)) {}
  json StreamChoice(const GenerateChunk& chunk) override {
    auto [text, logprobs] = Part(chunk);
    return Choice(text, want_logprobs_ ? std::move(logprobs) : json(nullptr), chunk.finish_reason);
  }
  void Add(const GenerateChunk& chunk) override {
    auto [text, logprobs] = Part(chunk);
    text_ += text;
    AppendLogprobs(std::move(logprobs), logprobs_);
  }
  json BodyChoice(runtime::FinishReason finish) override {
    if (want_logprobs_) {
      for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
        if (!logprobs_.contains(key)) logprobs_[key] = json::array();
      }
    }
    return Choice(text_, want_logprobs_ ? logprobs_ : json(nullptr), finish);
  }

 private:
  static json Choice(const std::string& text, json logprobs, runtime::FinishReason finish) {
    return {{"index", 0}, {"text", text}, {"logprobs", std::move(logprobs)},
            {"finish_reason", FinishReasonJson(finish)}};
  }
  // The chunk's text and logprobs object (empty unless asked for), after the echoed prompt's when
  // it has not gone out yet.
  std::pair<std::string, json> Part(const GenerateChunk& chunk) {
    std::string text;
    json logprobs = json::object();
    const bool echoing = echo_.has_value() && !echoed_;
    if (echoing) {
      echoed_ = true;
      text = echo_->text;
      if (want_logprobs_) logprobs = logprobs_of_.Prompt(echo_->prompt_ids, chunk.prompt_logprobs);
    }
    if (echo_ && echo_->only) return {std::move(text), std::move(logprobs)};
    text += chunk.text;
    if (want_logprobs_) AppendLogprobs(logprobs_of_.Next(chunk), logprobs);
    return {std::move(text), std::move(logprobs)};
  }

  CompletionLogprobs logprobs_of_;
  const bool want_logprobs_;
  const std::optional<CompletionEcho> echo_;
  bool echoed_ = false;  // the echo went out, with the first chunk
  std::string text_;
  json logprobs_ = json::object();
};

// An assistant message, streamed as deltas (the first names the role).
class ChatAnswer : public AnswerChoices {
 public:
  ChatAnswer(const runtime::Tokenizer& tokenizer, std::optional<int> num_top_logprobs)
      : tokenizer_(tokenizer), num_top_logprobs_(num_top_logprobs) {}
  json StreamChoice(const GenerateChunk& chunk) override {
    json delta = {{"content", chunk.text}};
    if (first_) delta["role"] = "assistant";
    first_ = false;
    return {{"index", 0}, {"delta", std::move(delta)}, {"logprobs", Logprobs(chunk)},
            {"finish_reason", FinishReasonJson(chunk.finish_reason)}};
  }
  void Add(const GenerateChunk& chunk) override {
    text_ += chunk.text;
    if (!num_top_logprobs_) return;
    for (json& entry : ChatLogprobsContent(tokenizer_, chunk, *num_top_logprobs_)) {
      content_.push_back(std::move(entry));
    }
  }
  json BodyChoice(runtime::FinishReason finish) override {
    return {{"index", 0},
            {"message", {{"role", "assistant"}, {"content", text_}}},
            {"logprobs", num_top_logprobs_ ? json{{"content", content_}} : json(nullptr)},
            {"finish_reason", FinishReasonJson(finish)}};
  }

 private:
  json Logprobs(const GenerateChunk& chunk) const {
    if (!num_top_logprobs_) return nullptr;
    return {{"content", ChatLogprobsContent(tokenizer_, chunk, *num_top_logprobs_)}};
  }
  const runtime::Tokenizer& tokenizer_;
  const std::optional<int> num_top_logprobs_;
  bool first_ = true;
  std::string text_;
  json content_ = json::array();
};

// A token as the chat format shows it: its text (invalid UTF-8, a piece of a character, is replaced
// when the JSON is written) and its exact bytes.
json TokenEntry(const runtime::Tokenizer& tokenizer, int32_t id, float logprob) {
  const std::string text = tokenizer.Decode({&id, 1}, false);
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return {{"token", text}, {"logprob", logprob}, {"bytes", std::move(bytes)}};
}

}  // namespace

json ChatLogprobsContent(const runtime::Tokenizer& tokenizer, const GenerateChunk& chunk,
                         int num_top_logprobs) {
  json content = json::array();
  for (size_t i = 0; i < chunk.logprobs.size() && i < chunk.token_ids.size(); ++i) {
    const int32_t id = chunk.token_ids[i];
    // The engine's list is the top k, most likely first, then the sampled token when it is not
    // among them (kernels::TopLogprobs).
    const std::vector<kernels::TokenLogprob>& listed = chunk.logprobs[i];
    json entry = nullptr;
    json top = json::array();
    for (size_t j = 0; j < listed.size(); ++j) {
      if (listed[j].token_id == id && entry.is_null()) {
        entry = TokenEntry(tokenizer, id, listed[j].logprob);
      }
      if (static_cast<int>(j) < num_top_logprobs) {
        top.push_back(TokenEntry(tokenizer, listed[j].token_id, listed[j].logprob));
      }
    }
    if (entry.is_null()) continue;  // never: the sampled token is always listed
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return content;
}

std::unique_ptr<AnswerChoices> MakeCompletionAnswer(const runtime::Tokenizer& tokenizer,
                                                    bool want_logprobs,
                                                    std::optional<CompletionEcho> echo) {
  return std::make_unique<CompletionAnswer>(tokenizer, want_logprobs, std::move(echo));
}

std::unique_ptr<AnswerChoices> MakeChatAnswer(const runtime::Tokenizer& tokenizer,
                                              std::optional<int> num_top_logprobs) {
  return std::make_unique<ChatAnswer>(tokenizer, num_top_logprobs);
}

}  // namespace baton::scheduler
