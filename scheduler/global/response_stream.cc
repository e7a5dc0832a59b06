#include "scheduler/global/response_stream.h"

#include <algorithm>
#include <utility>

namespace baton::scheduler {

ResponseStream::ResponseStream(const runtime::Tokenizer& tokenizer, std::string request_id,
                               std::vector<int32_t> prompt_ids, std::vector<std::string> stop_strings,
                               int min_tokens, bool include_stop, const ChunkSink* write,
                               bool skip_special_tokens, std::vector<int32_t> stop_token_ids)
    : text_(tokenizer, prompt_ids, std::move(stop_strings), min_tokens, include_stop, skip_special_tokens),
      tokenizer_(tokenizer),
      skip_special_tokens_(skip_special_tokens),
      stop_token_ids_(std::move(stop_token_ids)),
      request_id_(std::move(request_id)),
      prompt_ids_(std::move(prompt_ids)),
      write_(write) {}

bool ResponseStream::Write(GenerateChunk chunk, std::span<const int32_t> token_ids,
                           std::span<const std::vector<kernels::TokenLogprob>> logprobs,
                           std::span<const int64_t> emit_us, runtime::FinishReason worker_finish) {
  for (size_t i = 0; i < token_ids.size() && !text_.stopped(); ++i) {
    const int32_t id = token_ids[i];
    const bool stopping_token = !skip_special_tokens_ && worker_finish == runtime::FinishReason::kStop &&
                                i + 1 == token_ids.size() &&
                                (tokenizer_.IsSpecial(id) ||
                                 std::find(stop_token_ids_.begin(), stop_token_ids_.end(), id) != stop_token_ids_.end());
    if (!stopping_token) chunk.text += text_.Append(id);
    chunk.token_ids.push_back(token_ids[i]);
    ++num_generated_;
    if (i < logprobs.size()) chunk.logprobs.push_back(logprobs[i]);
    if (i < emit_us.size()) chunk.timing.token_emit_us.push_back(emit_us[i]);
  }
  if (!text_.stopped() && worker_finish != runtime::FinishReason::kNone) chunk.text += text_.Finish();
  chunk.finish_reason = text_.stopped() ? runtime::FinishReason::kStop : worker_finish;
  chunk.request_id = request_id_;
  finished_ = chunk.finish_reason != runtime::FinishReason::kNone;
  if (finished_) {
    chunk.prompt_token_ids = prompt_ids_;
    chunk.num_prompt_tokens = static_cast<int>(prompt_ids_.size());
    chunk.num_generated_tokens = num_generated_;
    chunk.num_cached_tokens = num_cached_tokens_;
  }
  return (*write_)(chunk);
}

}  // namespace baton::scheduler
