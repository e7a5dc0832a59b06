#include "scheduler/service/chat_reply/chat_reply_parser.h"

#include <random>
#include <utility>

namespace baton::scheduler {
namespace {

// What `now` has beyond its first `*emitted` bytes (nothing if it is not longer); advances *emitted.
std::string Grown(std::string_view now, size_t* emitted) {
  if (now.size() <= *emitted) return "";
  std::string more(now.substr(*emitted));
  *emitted = now.size();
  return more;
}

}  // namespace

std::string NewToolCallId(int length) {
  static constexpr std::string_view kAlphabet =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id = length == 24 ? "call_" : "";
  for (int i = 0; i < length; ++i) id.push_back(kAlphabet[pick(rng)]);
  return id;
}

ChatReplyParser::ChatReplyParser(std::optional<ReasoningFormat> reasoning,
                                 std::optional<ToolCallFormat> tool_calls)
    : reasoning_(std::move(reasoning)), tool_calls_(std::move(tool_calls)) {}

ChatReplyDelta ChatReplyParser::Feed(std::string_view text) {
  text_ += text;
  return Next(/*finished=*/false);
}

ChatReplyDelta ChatReplyParser::Finish() { return Next(/*finished=*/true); }

ChatReplyDelta ChatReplyParser::Next(bool finished) {
  ChatReplyDelta delta;
  std::string_view content = text_;
  if (reasoning_) {
    const ReasoningSplit split = reasoning_->split(text_, finished);
    delta.reasoning = Grown(split.reasoning, &emitted_reasoning_);
    content = split.content;
  }
  if (!tool_calls_) {
    delta.content = Grown(content, &emitted_content_);
    return delta;
  }
  const ParsedReply reply = tool_calls_->parse(content, finished);
  delta.content = Grown(reply.content, &emitted_content_);
  for (size_t i = 0; i < reply.calls.size(); ++i) {
    const ParsedCall& call = reply.calls[i];
    if (i == emitted_arguments_.size()) {
      // The name goes out alone, its arguments from the next delta on (unless the reply is over).
      emitted_arguments_.push_back(0);
      delta.tool_calls.push_back({.index = static_cast<int>(i),
                                  .first = true,
                                  .id = NewToolCallId(tool_calls_->call_id_length),
                                  .name = call.name,
                                  .arguments = finished ? Grown(call.arguments, &emitted_arguments_[i]) : ""});
      continue;
    }
    std::string more = Grown(call.arguments, &emitted_arguments_[i]);
    if (!more.empty()) delta.tool_calls.push_back({.index = static_cast<int>(i), .arguments = std::move(more)});
  }
  return delta;
}

}  // namespace baton::scheduler
