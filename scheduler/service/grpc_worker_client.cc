#include "scheduler/service/grpc_worker_client.h"

#include <vector>

#include "absl/time/clock.h"
#include "runtime/rpc/internal_auth.h"
#include "runtime/rpc/kv_handoff_conversion.h"
#include "runtime/rpc/proto_conversion.h"
#include "runtime/rpc/status_conversion.h"

namespace baton::scheduler {
namespace {

TokenChunk FromProto(const v1::TokenChunk& chunk) {
  return TokenChunk{.token_ids = {chunk.token_ids().begin(), chunk.token_ids().end()},
                    .logprobs = rpc::FromProto(chunk.logprobs()),
                    .emit_us = {chunk.emit_us().begin(), chunk.emit_us().end()},
                    .finish_reason = rpc::FromProto(chunk.finish_reason()),
                    .prefill_start_us = chunk.prefill_start_us(),
                    .prefill_end_us = chunk.prefill_end_us(),
                    .prompt_logprobs = rpc::FromProto(chunk.prompt_logprobs()),
                    .num_cached_tokens = chunk.num_cached_tokens()};
}

}  // namespace

std::shared_ptr<v1::WorkerService::Stub> WorkerStubs::For(const WorkerRef& worker) {
  absl::MutexLock lock(&mu_);
  CachedStub& cached = stubs_[worker.address];
  if (cached.stub == nullptr || cached.incarnation_id != worker.incarnation_id) {
    cached.incarnation_id = worker.incarnation_id;
    // A small, fixed flow-control window: when a request's client stops reading, its decode stream
    // backs up to the worker within a few hundred tokens, and the worker pauses it (TokenChannel),
    // instead of gRPC buffering thousands while it keeps its batch slot.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 8 << 10);
    cached.stub = v1::WorkerService::NewStub(
        grpc::CreateCustomChannel(worker.address, grpc::InsecureChannelCredentials(), args));
  }
  return cached.stub;
}

std::unique_ptr<grpc::ClientContext> GrpcWorkerClient::NewCallContext(
    const CallOptions& options) const {
  std::unique_ptr<grpc::ClientContext> context =
      parent_ != nullptr ? grpc::ClientContext::FromServerContext(*parent_)
                         : std::make_unique<grpc::ClientContext>();
  // With a parent, the call ends by the earlier of this and the parent's deadline.
  context->set_deadline(absl::ToChronoTime(options.deadline));
  rpc::AttachDeploymentSecret(*context, stubs_->secret());
  return context;
}

absl::Status GrpcWorkerClient::CallStatus(const grpc::Status& status,
                                          const CallWatchdog::Watch& watch) {
  if (!status.ok() && watch.fired()) {
    return absl::UnavailableError("stopped answering (the scheduler no longer hears its heartbeats)");
  }
  return rpc::FromGrpcStatus(status);
}

absl::StatusOr<PrefillResult> GrpcWorkerClient::Prefill(const WorkerRef& worker,
                                                        const PrefillCall& call,
                                                        const CallOptions& options) {
  v1::PrefillRequest request;
  request.set_request_id(call.request_id);
  request.mutable_prompt_token_ids()->Assign(call.prompt_token_ids.begin(),
                                             call.prompt_token_ids.end());
  request.mutable_generated_token_ids()->Assign(call.generated_token_ids.begin(),
                                                call.generated_token_ids.end());
  rpc::ToProto(call.params, request.mutable_sampling(), request.mutable_stop());
  if (call.params.num_logprobs) request.set_logprobs(*call.params.num_logprobs);
  request.set_seed(call.params.seed);
  request.set_kv_lease_ms(absl::ToInt64Milliseconds(call.kv_lease));
  v1::PrefillResponse response;
  const std::unique_ptr<grpc::ClientContext> context = NewCallContext(options);
  const std::unique_ptr<CallWatchdog::Watch> watch =
      stubs_->watchdog().Start(context.get(), options.abandon);
  const grpc::Status status = stubs_->For(worker)->Prefill(context.get(), request, &response);
  if (!status.ok()) return CallStatus(status, *watch);
  PrefillResult result{.first_token_id = response.first_token_id(),
                       .finish_reason = rpc::FromProto(response.finish_reason()),
                       .kv = rpc::FromProto(response.kv()),
                       .prefill_start_us = response.prefill_start_us(),
                       .prefill_end_us = response.prefill_end_us(),
                       .num_cached_tokens = response.num_cached_tokens()};
  if (response.has_first_logprobs()) result.first_logprobs = rpc::FromProto(response.first_logprobs());
  result.prompt_logprobs = rpc::FromProto(response.prompt_logprobs());
  return result;
}

absl::Status GrpcWorkerClient::Release(const WorkerRef& worker, const std::string& request_id,
                                       const CallOptions& options) {
  grpc::ClientContext context;  // never the parent's child: see the header
  context.set_deadline(absl::ToChronoTime(options.deadline));
  rpc::AttachDeploymentSecret(context, stubs_->secret());
  v1::ReleaseRequest request;
  request.set_request_id(request_id);
  v1::ReleaseResponse response;
  return rpc::FromGrpcStatus(stubs_->For(worker)->Release(&context, request, &response));
}

absl::Status GrpcWorkerClient::Decode(const WorkerRef& worker, const DecodeCall& call,
                                      const CallOptions& options,
                                      const DecodeEventHandler& on_event) {
  v1::DecodeRequest request;
  request.set_request_id(call.request_id);
  request.mutable_prompt_token_ids()->Assign(call.prompt_token_ids.begin(),
                                             call.prompt_token_ids.end());
  request.mutable_generated_token_ids()->Assign(call.generated_token_ids.begin(),
                                                call.generated_token_ids.end());
  rpc::ToProto(call.params, request.mutable_sampling(), request.mutable_stop());
  if (call.params.num_logprobs) request.set_logprobs(*call.params.num_logprobs);
  request.set_seed(call.params.seed);
  if (call.kv_source) rpc::ToProto(*call.kv_source, request.mutable_kv_source());

  const std::unique_ptr<grpc::ClientContext> context = NewCallContext(options);
  const std::unique_ptr<CallWatchdog::Watch> watch =
      stubs_->watchdog().Start(context.get(), options.abandon);
  const std::shared_ptr<v1::WorkerService::Stub> stub = stubs_->For(worker);  // outlives the reader
  std::unique_ptr<grpc::ClientReader<v1::DecodeEvent>> reader = stub->Decode(context.get(), request);
  v1::DecodeEvent event;
  while (reader->Read(&event)) {
    const bool more =
        event.has_kv_transferred()
            ? on_event(KvTransferred{.start_us = event.kv_transferred().start_us(),
                                     .end_us = event.kv_transferred().end_us(),
                                     .num_bytes = event.kv_transferred().num_bytes(),
                                     .num_cached_tokens = event.kv_transferred().num_cached_tokens()})
            : on_event(FromProto(event.tokens()));
    if (!more) {
      context->TryCancel();
      break;
    }
  }
  return CallStatus(reader->Finish(), *watch);
}

}  // namespace baton::scheduler
