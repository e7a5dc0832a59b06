#include "scheduler/service/openai_answer.h"

#include <utility>

#include "scheduler/service/chat_reply/chat_reply_parser.h"

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

// An assistant message, streamed as deltas (the first names the role). With a reply plan, its
// text goes through a ChatReplyParser: reasoning_content, content and tool_calls.
class ChatAnswer : public AnswerChoices {
 public:
  ChatAnswer(const runtime::Tokenizer& tokenizer, std::optional<int> num_top_logprobs, ChatReplyPlan plan)
      : tokenizer_(tokenizer), num_top_logprobs_(num_top_logprobs), plan_(std::move(plan)) {
    if (plan_.reasoning || plan_.tool_calls) parser_.emplace(plan_.reasoning, plan_.tool_calls);
  }
  json StreamChoice(const GenerateChunk& chunk) override {
    json delta = json::object();
    if (first_) delta["role"] = "assistant";
    first_ = false;
    if (!parser_) {
      delta["content"] = chunk.text;
    } else {
      ChatReplyDelta parsed = parser_->Feed(chunk.text);
      if (chunk.finish_reason != runtime::FinishReason::kNone) Append(parser_->Finish(), parsed);
      if (!parsed.reasoning.empty()) delta["reasoning_content"] = parsed.reasoning;
      if (!parsed.content.empty() || (parsed.reasoning.empty() && parsed.tool_calls.empty())) {
        delta["content"] = parsed.content;
      }
      if (!parsed.tool_calls.empty()) delta["tool_calls"] = StreamedCalls(parsed.tool_calls);
    }
    return {{"index", 0}, {"delta", std::move(delta)}, {"logprobs", Logprobs(chunk)},
            {"finish_reason", Finish(chunk.finish_reason)}};
  }
  void Add(const GenerateChunk& chunk) override {
    text_ += chunk.text;
    if (!num_top_logprobs_) return;
    for (json& entry : ChatLogprobsContent(tokenizer_, chunk, *num_top_logprobs_)) {
      content_.push_back(std::move(entry));
    }
  }
  json BodyChoice(runtime::FinishReason finish) override {
    json message = {{"role", "assistant"}, {"content", text_}};
    if (parser_) {
      ChatReplyDelta reply = parser_->Feed(text_);
      Append(parser_->Finish(), reply);
      json calls = WholeCalls(reply.tool_calls);
      message["content"] = reply.content.empty() && !calls.empty() ? json(nullptr) : json(reply.content);
      if (!calls.empty()) message["tool_calls"] = std::move(calls);
      if (plan_.reasoning) {
        message["reasoning_content"] = reply.reasoning.empty() ? json(nullptr) : json(reply.reasoning);
      }
    }
    return {{"index", 0},
            {"message", std::move(message)},
            {"logprobs", num_top_logprobs_ ? json{{"content", content_}} : json(nullptr)},
            {"finish_reason", Finish(finish)}};
  }

 private:
  // `more` after `into`.
  static void Append(ChatReplyDelta more, ChatReplyDelta& into) {
    into.reasoning += more.reasoning;
    into.content += more.content;
    for (ToolCallDelta& call : more.tool_calls) into.tool_calls.push_back(std::move(call));
  }
  static json StreamedCalls(const std::vector<ToolCallDelta>& calls) {
    json out = json::array();
    for (const ToolCallDelta& call : calls) {
      json entry = {{"index", call.index}, {"function", {{"arguments", call.arguments}}}};
      if (call.first) {
        entry["id"] = call.id;
        entry["type"] = "function";
        entry["function"]["name"] = call.name;
      }
      out.push_back(std::move(entry));
    }
    return out;
  }
  // The calls of a whole reply, each from its deltas.
  static json WholeCalls(const std::vector<ToolCallDelta>& deltas) {
    json out = json::array();
    for (const ToolCallDelta& call : deltas) {
      if (call.first) {
        out.push_back({{"id", call.id}, {"type", "function"},
                       {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      } else if (call.index < static_cast<int>(out.size())) {
        out[call.index]["function"]["arguments"] =
            out[call.index]["function"]["arguments"].get<std::string>() + call.arguments;
      }
    }
    return out;
  }
  json Finish(runtime::FinishReason finish) const {
    if (finish == runtime::FinishReason::kStop && plan_.finish_with_tool_calls && parser_ &&
        parser_->num_calls() > 0) {
      return "tool_calls";
    }
    return FinishReasonJson(finish);
  }
  json Logprobs(const GenerateChunk& chunk) const {
    if (!num_top_logprobs_) return nullptr;
    return {{"content", ChatLogprobsContent(tokenizer_, chunk, *num_top_logprobs_)}};
  }
  const runtime::Tokenizer& tokenizer_;
  const std::optional<int> num_top_logprobs_;
  const ChatReplyPlan plan_;
  std::optional<ChatReplyParser> parser_;
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
                                              std::optional<int> num_top_logprobs, ChatReplyPlan plan) {
  return std::make_unique<ChatAnswer>(tokenizer, num_top_logprobs, std::move(plan));
}

}  // namespace baton::scheduler
