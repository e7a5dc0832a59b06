// OpenAiHttpServer: the OpenAI-compatible HTTP front end of the scheduler, as vLLM and SGLang serve
// it: POST /v1/completions and POST /v1/chat/completions (streaming with Server-Sent Events, or one
// JSON body; chat through the model's chat template, openai_chat.h), GET /v1/models[/{id}],
// vLLM's POST /tokenize and /detokenize (openai_tokenize.h), GET /health (and /ping), GET /version,
// GET /metrics (Prometheus text, metrics.h). Only converts and delegates: the JSON body becomes a native GenerateRequest once (no
// proto in between), runs through the same RequestDriver as the gRPC API, and each GenerateChunk
// becomes JSON. Bad requests get HTTP 400 with {"error": {"message", "type", "code"}}; a request
// admission sheds (RESOURCE_EXHAUSTED) gets 429 with type "rate_limit_error"; no live worker gets
// 503. A client's X-Request-Id is its request's id (echoed as that header and in
// the answer's id), as vLLM takes it. Served by HttpServer (http_server.h: event-driven, each limit a client cannot pass).
//
// Hardening: with an API key every path but /health, /ping and /version needs "Authorization: Bearer KEY" (401 with a
// JSON error otherwise); every error the server raises itself (a body over the limit, a request
// that trickles in, no route), a handler's exception included, is a JSON body that carries no
// exception text.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "scheduler/global/request_driver.h"
#include "scheduler/service/grpc_worker_client.h"
#include "scheduler/service/http_server.h"
#include "scheduler/service/metrics.h"
#include "scheduler/service/openai_tools.h"

namespace baton::scheduler {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 picks a free port
  std::string api_key;  // empty: open to every caller
  // Both set: HTTPS with this PEM certificate chain and private key.
  std::filesystem::path tls_cert;
  std::filesystem::path tls_key;
  HttpLimits limits;
  // Served at GET /metrics (behind the API key like every path but /health); null: no /metrics.
  // Must outlive the server.
  const ServingMetrics* metrics = nullptr;
  // Tool calling and reasoning on /v1/chat/completions (openai_tools.h).
  ChatReplyOptions chat_reply;
};

class OpenAiHttpServer {
 public:
  // Binds host:port and starts serving. Unavailable if it cannot bind, InvalidArgument if the TLS
  // certificate or key cannot be loaded. driver and stubs must outlive the server.
  static absl::StatusOr<std::unique_ptr<OpenAiHttpServer>> Start(RequestDriver* driver,
                                                                  WorkerStubs* stubs,
                                                                  const HttpServerOptions& options);

  int port() const { return server_->port(); }

 private:
  explicit OpenAiHttpServer(std::unique_ptr<HttpServer> server) : server_(std::move(server)) {}

  std::unique_ptr<HttpServer> server_;
};

}  // namespace baton::scheduler
