// ResponseStream: turns a request's generated token ids, as the workers report them, into the
// GenerateChunks its client receives: text through a TextStream (incremental detokenization, stop
// strings; special tokens skipped unless asked for), the token, logprob and emission-time fields, the finish reason, and on the last chunk
// the prompt and the counts.
//
// Lifecycle: one per request; Write per batch of tokens until finished(). Not thread-safe; the
// Tokenizer and the sink must outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "baton/kernels/sampling.h"
#include "runtime/batch/sequence.h"
#include "runtime/tokenizer/text_stream.h"
#include "scheduler/global/generate_chunk.h"

namespace baton::scheduler {

class ResponseStream {
 public:
  ResponseStream(const runtime::Tokenizer& tokenizer, std::string request_id,
                 std::vector<int32_t> prompt_ids, std::vector<std::string> stop_strings,
                 int min_tokens, bool include_stop, const ChunkSink* write,
                 bool skip_special_tokens = true, std::vector<int32_t> stop_token_ids = {});

  // Adds the tokens (with their logprobs and emission times, where given) to `chunk`, which may
  // carry timing already, and writes it. Tokens after a completed stop string are dropped, and the
  // finish reason becomes kStop. worker_finish: what the worker reported with the last token.
  // Returns false if the client is gone.
  bool Write(GenerateChunk chunk, std::span<const int32_t> token_ids,
             std::span<const std::vector<kernels::TokenLogprob>> logprobs,
             std::span<const int64_t> emit_us, runtime::FinishReason worker_finish);

  // The last chunk was written: the request is over for its client.
  bool finished() const { return finished_; }
  // The prompt tokens a prefix cache held, for the last chunk's counts.
  void set_num_cached_tokens(int n) { num_cached_tokens_ = n; }

 private:
  runtime::TextStream text_;
  const runtime::Tokenizer& tokenizer_;
  // With special tokens kept in the text, the token that stopped the generation (a special token
  // such as EOS, or one of these) is still not part of it, as in vLLM.
  const bool skip_special_tokens_;
  const std::vector<int32_t> stop_token_ids_;
  const std::string request_id_;
  const std::vector<int32_t> prompt_ids_;
  const ChunkSink* write_;
  int num_generated_ = 0;
  int num_cached_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace baton::scheduler
