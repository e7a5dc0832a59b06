#include "runtime/rpc/worker_server.h"

#include <unistd.h>

#include <cstdio>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "baton/v1/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "kernels/common/log.h"
#include "kernels/common/status_macros.h"
#include "runtime/rpc/grpc_listener.h"
#include "runtime/rpc/internal_auth.h"
#include "runtime/rpc/kv_handoff_conversion.h"
#include "runtime/rpc/proto_conversion.h"
#include "runtime/rpc/status_conversion.h"
#include "runtime/rpc/worker_service.h"
#include "runtime/transfer/socket_io.h"
#include "runtime/worker/worker.h"

namespace baton::rpc {
namespace {

std::string NewIncarnationId() {
  std::random_device device;
  return absl::StrFormat("%016x%08x", (uint64_t{device()} << 32) | device(), getpid());
}

absl::Status Register(v1::WorkerRegistryService::Stub& registry, const v1::RegisterRequest& request,
                      const std::string& secret) {
  grpc::ClientContext context;
  AttachDeploymentSecret(context, secret);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::RegisterResponse response;
  return FromGrpcStatus(registry.Register(&context, request, &response));
}

}  // namespace

absl::Status RunWorkerServer(const runtime::WorkerOptions& options, const std::atomic<bool>* stop,
                             absl::Duration heartbeat_interval) {
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Worker> worker, runtime::Worker::Create(options));
  WorkerServiceImpl service(worker.get(), options.deployment_secret);
  // No server reflection: this is an internal API.
  ASSIGN_OR_RETURN(GrpcListener listener,
                   ListenExclusive("worker", options.host, options.port, {&service}));
  const int port = listener.port;
  // What the scheduler dials: the advertised host (a wildcard bind is not an address to dial).
  const std::string address = runtime::FormatHostPort(
      options.advertise_host.empty() ? runtime::ReachableHost(options.host) : options.advertise_host,
      port);
  LogInfo(absl::StrCat(runtime::WorkerRoleName(options.role), " ", options.instance_idx, " serving on ",
                       runtime::FormatHostPort(options.host, port), " (pid ", getpid(), ")"));
  if (address != runtime::FormatHostPort(options.host, port)) {
    LogInfo(absl::StrCat("advertised to the scheduler as ", address));
  }

  std::unique_ptr<v1::WorkerRegistryService::Stub> registry;
  v1::RegisterRequest registration;
  if (!options.scheduler_address.empty()) {
    registry = v1::WorkerRegistryService::NewStub(
        grpc::CreateChannel(options.scheduler_address, grpc::InsecureChannelCredentials()));
    registration.set_role(ToProto(options.role));
    registration.set_instance_idx(options.instance_idx);
    registration.set_incarnation_id(NewIncarnationId());
    registration.set_address(address);
    registration.set_pid(getpid());
    registration.set_num_kv_blocks(worker->num_kv_blocks());
    registration.set_block_size(options.engine.block_size);
    registration.set_prefix_cache_salt(worker->prefix_cache_salt());
    ToProto(worker->layout(), registration.mutable_layout());
  }
  bool registered = false;
  absl::StatusCode last_refusal = absl::StatusCode::kOk;
  while (!stop->load()) {
    if (registry != nullptr) {
      if (!registered) {
        const absl::Status status = Register(*registry, registration, options.deployment_secret);
        registered = status.ok();
        // The scheduler's view of this prefix cache starts empty: send all of it.
        if (registered) worker->RequestCacheSnapshot();
        // A refusal (a wrong secret, a bad registration) is said once; an absent scheduler is not.
        if (!status.ok() && !absl::IsUnavailable(status) && !absl::IsDeadlineExceeded(status) &&
            status.code() != last_refusal) {
          LogError(absl::StrCat("the scheduler at ", options.scheduler_address,
                                " refused the registration: ", status.ToString()));
        }
        last_refusal = status.code();
      } else {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
        AttachDeploymentSecret(context, options.deployment_secret);
        v1::HeartbeatRequest heartbeat;
        heartbeat.set_incarnation_id(registration.incarnation_id());
        ToProto(worker->Stats(), heartbeat.mutable_stats());
        ToProto(worker->TakeCacheEvents(), heartbeat.mutable_kv_cache_events());
        v1::HeartbeatResponse response;
        const grpc::Status sent = registry->Heartbeat(&context, heartbeat, &response);
        if (!sent.ok()) worker->RequestCacheSnapshot();  // those events may be lost
        if (sent.ok() && !response.known()) registered = false;
      }
    }
    absl::SleepFor(heartbeat_interval);
  }
  worker->Drain();
  listener.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return absl::OkStatus();
}

}  // namespace baton::rpc
