// The choices of an OpenAI answer, one shape per endpoint: /v1/completions' {"text", "logprobs"}
// and /v1/chat/completions' assistant message (deltas when streamed). A request's GenerateChunks go
// in one at a time; each streamed event's choice, or the whole answer's once every chunk went in,
// comes out. One object per request, used on one thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/batch/sequence.h"
#include "runtime/tokenizer/tokenizer.h"
#include "scheduler/global/generate_chunk.h"
#include "scheduler/service/openai_completion.h"
#include "scheduler/service/openai_tools.h"

namespace baton::scheduler {

class AnswerChoices {
 public:
  virtual ~AnswerChoices() = default;
  // The choice of one streamed event.
  virtual nlohmann::json StreamChoice(const GenerateChunk& chunk) = 0;
  // Accumulates a chunk of a non-streamed answer.
  virtual void Add(const GenerateChunk& chunk) = 0;
  // The choice of the whole non-streamed answer.
  virtual nlohmann::json BodyChoice(runtime::FinishReason finish) = 0;
};

// What a completion choice starts with when the request echoes its prompt.
struct CompletionEcho {
  std::string text;                 // the prompt as the client sent it (or its ids, decoded)
  std::vector<int32_t> prompt_ids;  // listed first in the logprobs, with the first chunk's scores
  bool only = false;                // AnswerShape::echo_only: the generated token is left out
};

// /v1/completions; `want_logprobs`: the legacy logprobs object (CompletionLogprobs); `echo`: the
// prompt that starts the choice, ahead of the first streamed chunk or in the body.
std::unique_ptr<AnswerChoices> MakeCompletionAnswer(const runtime::Tokenizer& tokenizer,
                                                    bool want_logprobs,
                                                    std::optional<CompletionEcho> echo = std::nullopt);

// /v1/chat/completions; `num_top_logprobs` set: the chat logprobs object, {"content": [{"token",
// "logprob", "bytes", "top_logprobs": [that many {"token", "logprob", "bytes"}]}]}. `reply`: how
// the text becomes reasoning_content, content and tool_calls (openai_tools.h); by default all
// content. A reply with calls under an auto or required choice finishes with "tool_calls".
std::unique_ptr<AnswerChoices> MakeChatAnswer(const runtime::Tokenizer& tokenizer,
                                              std::optional<int> num_top_logprobs,
                                              ChatReplyPlan reply = {});

// One token's entries of the chat logprobs "content" list, as OpenAI spells them (exposed for tests).
nlohmann::json ChatLogprobsContent(const runtime::Tokenizer& tokenizer, const GenerateChunk& chunk,
                                   int num_top_logprobs);

}  // namespace baton::scheduler
