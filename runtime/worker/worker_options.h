// WorkerOptions: what one `baton worker` process is and where it listens.
#pragma once

#include <string>

#include "runtime/engine/engine.h"
#include "runtime/worker/worker_role.h"

namespace baton::runtime {

struct WorkerOptions {
  WorkerRole role = WorkerRole::kColocated;
  int instance_idx = 0;
  std::string host = "127.0.0.1";   // address the worker's services bind to
  int port = 0;                      // WorkerService gRPC port; 0 picks a free one
  int kv_port = 0;                   // prefill role: the TCP KV server's port; 0 picks a free one
  std::string scheduler_address;     // host:port of the scheduler's registry; "" = standalone
  EngineConfig engine;
};

}  // namespace baton::runtime
