// Fuzz target: a chat template and the messages it renders, as /v1/chat/completions runs a model's
// template (runtime/tokenizer/chat_template.h): ChatTemplate::FromSource parses the template, and
// Render runs it over the messages with tools and a generation prompt. Templates come with the
// checkpoint (or --chat-template), messages from any client; neither may crash the scheduler or
// hang it: every error is a status, every runaway loop or output trips a guard.
//
// Input: the template text, then optionally a NUL byte and the messages as JSON (an array; anything
// else renders a fixed conversation instead).
#include <cstdint>
#include <string_view>

#include "nlohmann/json.hpp"
#include "runtime/tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view source = input.substr(0, split);
  nlohmann::ordered_json messages = nlohmann::ordered_json::parse(
      split == std::string_view::npos ? std::string_view() : input.substr(split + 1), nullptr,
      /*allow_exceptions=*/false);
  if (!messages.is_array()) {
    messages = nlohmann::ordered_json::parse(
        R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "f", "arguments": {"x": 1}}}]},
            {"role": "tool", "content": "42", "tool_call_id": "c1"}])");
  }
  absl::StatusOr<baton::runtime::ChatTemplate> chat_template =
      baton::runtime::ChatTemplate::FromSource(source, "<s>", "</s>");
  if (!chat_template.ok()) return 0;
  baton::runtime::ChatRenderOptions options;
  options.add_generation_prompt = true;
  options.tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
  // Tighter guards than the server's, so that one input stays well under libFuzzer's time limit.
  options.render.limits = {.max_output_bytes = size_t{1} << 20, .max_list_items = size_t{1} << 16,
                           .max_iterations = 100'000, .max_call_depth = 32};
  options.render.now = 0;
  chat_template->Render(messages, options).status().IgnoreError();
  return 0;
}
