// OpenAiHttpServer: the OpenAI-compatible HTTP front end of the scheduler, as vLLM and SGLang serve
// it: POST /v1/completions (streaming with Server-Sent Events, or one JSON body), GET /v1/models,
// GET /health. Only converts and delegates: the JSON body becomes a native GenerateRequest once (no
// proto in between), runs through the same RequestDriver as the gRPC API, and each GenerateChunk
// becomes JSON. Bad requests get HTTP 400 with {"error": {"message", "type", "code"}}; a request
// admission sheds (RESOURCE_EXHAUSTED) gets 429 with type "rate_limit_error"; no live worker gets
// 503. Runs its own listener thread.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "scheduler/global/request_driver.h"
#include "scheduler/service/grpc_worker_client.h"

namespace httplib {
class Server;
}

namespace baton::scheduler {

class OpenAiHttpServer {
 public:
  // Binds host:port (port 0 picks a free one) and starts serving. Unavailable if it cannot bind.
  // driver and stubs must outlive the server.
  static absl::StatusOr<std::unique_ptr<OpenAiHttpServer>> Start(RequestDriver* driver,
                                                                  WorkerStubs* stubs,
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
