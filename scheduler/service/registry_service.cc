#include "scheduler/service/registry_service.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/common/log.h"
#include "runtime/rpc/internal_auth.h"
#include "runtime/rpc/kv_handoff_conversion.h"
#include "runtime/rpc/proto_conversion.h"
#include "scheduler/service/generate_proto.h"

namespace baton::scheduler {
namespace {

WorkerLoad FromProto(const v1::WorkerStats& stats) {
  return WorkerLoad{.num_kv_blocks_total = stats.num_kv_blocks_total(),
                    .num_kv_blocks_used = stats.num_kv_blocks_used(),
                    .num_requests_waiting = stats.num_requests_waiting(),
                    .num_requests_running = stats.num_requests_running(),
                    .num_requests_holding_kv = stats.num_requests_holding_kv(),
                    .num_requests_swapped = stats.num_requests_swapped(),
                    .prefix_cache_queries = stats.prefix_cache_queries(),
                    .prefix_cache_hits = stats.prefix_cache_hits()};
}

}  // namespace

grpc::Status RegistryServiceImpl::Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                                           v1::RegisterResponse*) {
  if (grpc::Status denied = rpc::CheckDeploymentSecret(context, secret_); !denied.ok()) return denied;
  const std::optional<WorkerRole> role = rpc::FromProto(request->role());
  if (!role) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "register: role is unset");
  if (request->incarnation_id().empty() || request->address().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "register: incarnation_id and address are required");
  }
  // A worker that sends no layout runs one rank holding the whole model.
  const runtime::ParallelLayout layout =
      request->has_layout() ? rpc::FromProto(request->layout()) : runtime::ParallelLayout{};
  if (layout.tp_size < 1 || layout.pp_size < 1) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("register: layout ", runtime::LayoutString(layout),
                                     " has a size below 1"));
  }
  WorkerEntry entry{.role = *role,
                    .instance_idx = request->instance_idx(),
                    .incarnation_id = request->incarnation_id(),
                    .address = request->address(),
                    .pid = request->pid(),
                    .block_size = request->block_size() > 0 ? request->block_size() : 16,
                    .prefix_cache_salt = request->prefix_cache_salt(),
                    .layout = layout};
  entry.reported.num_kv_blocks_total = request->num_kv_blocks();
  registry_->Register(std::move(entry), absl::Now());
  LogInfo(absl::StrCat(WorkerName(*role, request->instance_idx()), " registered at ", request->address(),
                       " (pid ", request->pid(), ", ", runtime::LayoutString(layout), ")"));
  return grpc::Status::OK;
}

grpc::Status RegistryServiceImpl::Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                                            v1::HeartbeatResponse* response) {
  if (grpc::Status denied = rpc::CheckDeploymentSecret(context, secret_); !denied.ok()) return denied;
  const bool known = registry_->Heartbeat(request->incarnation_id(), FromProto(request->stats()), absl::Now());
  response->set_known(known);
  if (!known || !request->has_kv_cache_events()) return grpc::Status::OK;
  absl::StatusOr<runtime::BlockAllocator::CacheEvents> events = rpc::FromProto(request->kv_cache_events());
  if (!events.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(events.status().message()));
  registry_->ApplyCacheEvents(request->incarnation_id(), *events);
  return grpc::Status::OK;
}

grpc::Status RegistryServiceImpl::Health(grpc::ServerContext* context, const v1::HealthRequest*,
                                         v1::HealthResponse* response) {
  if (grpc::Status denied = rpc::CheckDeploymentSecret(context, secret_); !denied.ok()) return denied;
  ToProto(registry_->CheckHealth(), response);
  return grpc::Status::OK;
}

grpc::Status RegistryServiceImpl::ListWorkers(grpc::ServerContext* context, const v1::ListWorkersRequest*,
                                              v1::ListWorkersResponse* response) {
  if (grpc::Status denied = rpc::CheckDeploymentSecret(context, secret_); !denied.ok()) return denied;
  for (const WorkerEntry& entry : registry_->Snapshot()) {
    v1::ListWorkersResponse::Worker* worker = response->add_workers();
    worker->set_role(rpc::ToProto(entry.role));
    worker->set_instance_idx(entry.instance_idx);
    worker->set_pid(entry.pid);
    worker->set_alive(entry.alive);
    worker->set_death(entry.death);
  }
  return grpc::Status::OK;
}

grpc::Status RegistryServiceImpl::ReportExit(grpc::ServerContext* context, const v1::ReportExitRequest* request,
                                             v1::ReportExitResponse* response) {
  if (grpc::Status denied = rpc::CheckDeploymentSecret(context, secret_); !denied.ok()) return denied;
  const std::optional<WorkerRole> role = rpc::FromProto(request->role());
  if (!role) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "report exit: role is unset");
  const std::string why = absl::StrCat("exited (", request->reason(), ")");
  response->set_known(registry_->MarkExited(*role, request->instance_idx(), request->pid(), why));
  if (response->known()) {
    LogWarning(absl::StrCat(WorkerName(*role, request->instance_idx()), " (pid ", request->pid(), "): ", why,
                            ", said the launcher"));
  }
  return grpc::Status::OK;
}

}  // namespace baton::scheduler
