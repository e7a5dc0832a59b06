// GrpcWorkerClient: WorkerClient over the workers' gRPC API (baton.v1.WorkerService). Converts the
// native calls to proto and back (runtime/rpc/proto_conversion.h, kv_handoff_conversion.h) and the
// statuses through runtime/rpc/status_conversion.h; every call carries its deadline.
//
// Cancellation: with a parent server context (the public Generate call being served), Prefill and
// Decode contexts are its children: a client that cancels or disconnects cancels them at once, which
// frees the request's KV and queue slots on every worker, and the client's own deadline bounds them.
// Release never has a parent: it must reach the worker after the client left.
//
// Abandoning: a Prefill or Decode call whose CallOptions::abandon turns true (the callee is known
// dead) is cancelled by the CallWatchdog and ends UNAVAILABLE "stopped answering".
//
// WorkerStubs caches one stub (and channel) per worker address, replaced when a new incarnation
// registers there: a channel that saw the old process die is in gRPC's reconnect back-off (up to
// seconds) and would fail the restarted worker's first calls with "failed to connect". It holds the
// deployment secret every call carries (runtime/rpc/internal_auth.h) and the watchdog; a
// GrpcWorkerClient is cheap, one per request. Both are thread-safe.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "baton/v1/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "scheduler/global/worker_client.h"
#include "scheduler/service/call_watchdog.h"

namespace baton::scheduler {

class WorkerStubs {
 public:
  // `deployment_secret`: what every call presents to the workers; empty: nothing.
  explicit WorkerStubs(std::string deployment_secret = "") : secret_(std::move(deployment_secret)) {}

  // The stub for `worker`'s incarnation; callers hold it for the call (a newer incarnation's
  // registration may replace it in the cache meanwhile).
  std::shared_ptr<v1::WorkerService::Stub> For(const WorkerRef& worker);
  const std::string& secret() const { return secret_; }
  CallWatchdog& watchdog() { return watchdog_; }

 private:
  const std::string secret_;
  CallWatchdog watchdog_;
  absl::Mutex mu_;
  struct CachedStub {
    std::string incarnation_id;
    std::shared_ptr<v1::WorkerService::Stub> stub;
  };
  absl::flat_hash_map<std::string, CachedStub> stubs_ ABSL_GUARDED_BY(mu_);  // by address
};

class GrpcWorkerClient final : public WorkerClient {
 public:
  // parent: nullptr, or the server call the worker calls belong to (it must outlive them).
  explicit GrpcWorkerClient(WorkerStubs* stubs, const grpc::ServerContext* parent = nullptr)
      : stubs_(stubs), parent_(parent) {}

  absl::StatusOr<PrefillResult> Prefill(const WorkerRef& worker, const PrefillCall& call,
                                        const CallOptions& options) override;
  absl::Status Release(const WorkerRef& worker, const std::string& request_id,
                       const CallOptions& options) override;
  absl::Status Decode(const WorkerRef& worker, const DecodeCall& call, const CallOptions& options,
                      const DecodeEventHandler& on_event) override;

 private:
  // A context for a Prefill or Decode call: the parent's child when there is one.
  std::unique_ptr<grpc::ClientContext> NewCallContext(const CallOptions& options) const;
  // The status a watched call ended with: UNAVAILABLE when the watchdog abandoned it.
  static absl::Status CallStatus(const grpc::Status& status, const CallWatchdog::Watch& watch);

  WorkerStubs* stubs_;
  const grpc::ServerContext* parent_;
};

}  // namespace baton::scheduler
