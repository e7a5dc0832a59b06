// WorkerOptions: what one `baton worker` process is and where it listens.
#pragma once

#include <filesystem>
#include <string>

#include "runtime/engine/engine.h"
#include "runtime/worker/worker_role.h"

namespace baton::runtime {

struct WorkerOptions {
  WorkerRole role = WorkerRole::kColocated;
  int instance_idx = 0;
  std::string host = "127.0.0.1";   // address the worker's services bind to
  // The host the scheduler and other workers dial to reach those services (registered with the
  // scheduler, written into KV sources); empty: `host`, or this machine's name when `host` is a
  // wildcard (ReachableHost). Behind NAT, or bound to 0.0.0.0 in a pod: the address peers see.
  std::string advertise_host;
  int port = 0;                      // WorkerService gRPC port; 0 picks a free one
  int kv_port = 0;                   // prefill role: the TCP KV server's port; 0 picks a free one
  // Decode role, device pools: KV links (NCCL communicators) kept warm between pulls, over all
  // prefill ranks; the least recently used beyond are closed (NcclKvTransportOptions).
  int kv_link_pool_size = 8;
  std::string scheduler_address;     // host:port of the scheduler's registry; "" = standalone
  // What every caller of this worker's API and KV server must present, and what it presents to the
  // scheduler's registry and to other workers' KV servers (runtime/process/deployment_secret.h);
  // empty: no authentication (tests of one process).
  std::string deployment_secret;
  EngineConfig engine;
  // Non-empty: every step the engine runs is appended to this file (engine/step_trace.h).
  std::filesystem::path step_trace_path;
};

}  // namespace baton::runtime
