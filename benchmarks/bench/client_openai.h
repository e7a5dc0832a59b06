// OpenAiClient: GenerationClient over an OpenAI-compatible completions or chat completions endpoint
// with SSE streaming (openai_protocol.h): Baton's HTTP front end, vLLM, SGLang. Each chunk that
// carries output is a token event; the final usage chunk gives the token counts. Servers report no
// phase timing here. On the chat endpoint the prompt goes as one user message (its text: the
// request's prompt_text), so the server's prompt is the workload's plus its chat template's tokens.
//
// Each call opens its own connection (as vLLM's benchmark_serving does with a fresh session per
// request), so concurrent calls never wait on one another. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "benchmarks/bench/client.h"

namespace baton::bench {

struct OpenAiEndpoint {
  std::string scheme_host_port;  // "http://127.0.0.1:8000"
  std::string completions_path;  // "/v1/completions", or "/v1/chat/completions" when chat
  std::string models_path;       // "/v1/models"
  bool chat = false;             // the chat completions API (messages in, deltas out)
};

// Accepts http(s)://HOST[:PORT][/PREFIX] where PREFIX may end in /v1 or /v1/completions:
// "http://h:8000", "http://h:8000/v1" and "http://h:8000/v1/completions" name the same endpoint;
// one ending in /v1/chat/completions names the chat endpoint (chat = true). InvalidArgument
// otherwise.
absl::StatusOr<OpenAiEndpoint> ParseOpenAiUrl(const std::string& url);

struct OpenAiClientOptions {
  std::string model;  // the request's "model"; empty: the first of GET /v1/models, if any
  absl::Duration connect_timeout = absl::Seconds(10);
  std::string api_key;  // sent as "Authorization: Bearer KEY"; empty: none
};

class OpenAiClient final : public GenerationClient {
 public:
  // InvalidArgument for a malformed URL. Does not connect.
  static absl::StatusOr<std::unique_ptr<OpenAiClient>> Create(const std::string& url,
                                                              const OpenAiClientOptions& options);

  absl::Status Generate(const GenerationRequest& request, Cancellation* cancel,
                        GenerationTrace* trace) override;
  // GET /v1/models; also fills the request's model name when none was given.
  absl::StatusOr<ModelInfo> GetModelInfo() override;

 private:
  OpenAiClient(OpenAiEndpoint endpoint, OpenAiClientOptions options)
      : endpoint_(std::move(endpoint)), options_(std::move(options)) {}

  const OpenAiEndpoint endpoint_;
  OpenAiClientOptions options_;  // model is written only by GetModelInfo, before any Generate
};

}  // namespace baton::bench
