// OpenAiHttpServer: the OpenAI-compatible HTTP front end of the scheduler, as vLLM and SGLang serve
// it: POST /v1/completions (streaming with Server-Sent Events, or one JSON body), GET /v1/models,
// GET /health. Converts JSON to a Generate request and runs it through the same RequestDriver as
// the gRPC API. Bad requests get HTTP 400 with {"error": {"message", "type", "code"}}; a request
// admission sheds (RESOURCE_EXHAUSTED) gets 429 with type "rate_limit_error"; no live worker gets
// 503. Runs its own listener thread.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "scheduler/service/request_driver.h"

namespace httplib {
class Server;
}

namespace baton::scheduler {

class OpenAiHttpServer {
 public:
  // Binds host:port (port 0 picks a free one) and starts serving. Unavailable if it cannot bind.
  static absl::StatusOr<std::unique_ptr<OpenAiHttpServer>> Start(RequestDriver* driver,
                                                                  const std::string& host, int port);
  ~OpenAiHttpServer();  // stops and joins

  int port() const { return port_; }

 private:
  OpenAiHttpServer(RequestDriver* driver);

  RequestDriver* driver_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace baton::scheduler
