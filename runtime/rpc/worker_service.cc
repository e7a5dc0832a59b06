#include "runtime/rpc/worker_service.h"

#include "absl/time/clock.h"
#include "runtime/rpc/internal_auth.h"
#include "runtime/rpc/kv_handoff_conversion.h"
#include "runtime/rpc/proto_conversion.h"
#include "runtime/rpc/status_conversion.h"

namespace baton::rpc {
namespace {

// A call without a deadline still ends: the server caps it.
constexpr absl::Duration kMaxCallDuration = absl::Hours(1);

absl::Time DeadlineOf(const grpc::ServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::Now() + kMaxCallDuration;
  return std::min(absl::FromChrono(deadline), absl::Now() + kMaxCallDuration);
}

void ToProto(const runtime::TokenOutput& out, v1::TokenChunk* chunk) {
  chunk->add_token_ids(out.token_id);
  if (!out.logprobs.empty()) rpc::ToProto(out.logprobs, chunk->add_logprobs());
  rpc::ToProto(out.prompt_logprobs, chunk->mutable_prompt_logprobs());
  chunk->add_emit_us(NowMicros());
  chunk->set_finish_reason(rpc::ToProto(out.finish_reason));
}

}  // namespace

void ToProto(const runtime::WorkerStatsSnapshot& stats, v1::WorkerStats* out) {
  out->set_num_kv_blocks_total(stats.engine.num_blocks_total);
  out->set_num_kv_blocks_used(stats.engine.num_blocks_used);
  out->set_num_requests_waiting(stats.engine.num_waiting);
  out->set_num_requests_running(stats.engine.num_running);
  out->set_num_requests_swapped(stats.engine.num_swapped);
  out->set_prefix_cache_queries(stats.engine.num_prefix_cache_queries);
  out->set_prefix_cache_hits(stats.engine.num_prefix_cache_hits);
  out->set_num_prefill_tokens_outstanding(stats.num_prefill_tokens_outstanding);
  out->set_num_requests_holding_kv(stats.num_requests_holding_kv);
  for (const runtime::RankHoldings& holdings : stats.ranks) {
    v1::RankHoldings* rank = out->add_ranks();
    rank->set_rank_idx(holdings.shard.spec.rank_idx());
    rank->set_layer_begin(holdings.shard.layer_begin);
    rank->set_layer_end(holdings.shard.layer_end);
    rank->set_kv_head_begin(holdings.shard.kv_head_begin);
    rank->set_kv_head_end(holdings.shard.kv_head_end);
    rank->set_weight_bytes(holdings.weight_bytes);
    rank->set_kv_block_bytes(holdings.kv_block_bytes);
  }
}

grpc::Status WorkerServiceImpl::Prefill(grpc::ServerContext* context,
                                        const v1::PrefillRequest* request,
                                        v1::PrefillResponse* response) {
  if (grpc::Status denied = CheckDeploymentSecret(context, secret_); !denied.ok()) return denied;
  absl::StatusOr<runtime::GenerationParams> params = GenerationParamsFromProto(
      request->sampling(), request->stop(),
      request->has_logprobs() ? std::optional<int32_t>(request->logprobs()) : std::nullopt,
      request->seed());
  if (!params.ok()) return ToGrpcStatus(params.status());
  const int64_t start_us = NowMicros();
  absl::StatusOr<runtime::PrefillResult> result = worker_->Prefill(runtime::PrefillCall{
      .request_id = request->request_id(),
      .prompt_token_ids = std::vector<int32_t>(request->prompt_token_ids().begin(),
                                               request->prompt_token_ids().end()),
      .generated_token_ids = std::vector<int32_t>(request->generated_token_ids().begin(),
                                                  request->generated_token_ids().end()),
      .params = *std::move(params),
      .kv_lease = absl::Milliseconds(request->kv_lease_ms()),
      .deadline = DeadlineOf(*context),
      .is_cancelled = [context] { return context->IsCancelled(); }});
  if (!result.ok()) return ToGrpcStatus(result.status());
  response->set_first_token_id(result->first_token.token_id);
  if (!result->first_token.logprobs.empty()) {
    rpc::ToProto(result->first_token.logprobs, response->mutable_first_logprobs());
  }
  rpc::ToProto(result->first_token.prompt_logprobs, response->mutable_prompt_logprobs());
  response->set_finish_reason(rpc::ToProto(result->first_token.finish_reason));
  if (result->first_token.finish_reason == runtime::FinishReason::kNone) {
    rpc::ToProto(result->kv, response->mutable_kv());
  }
  response->set_prefill_start_us(result->first_token.prefill_start_us != 0
                                     ? result->first_token.prefill_start_us
                                     : start_us);
  response->set_prefill_end_us(result->prefill_end_us);
  response->set_num_cached_tokens(result->first_token.num_cached_tokens);
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Release(grpc::ServerContext* context, const v1::ReleaseRequest* request,
                                        v1::ReleaseResponse*) {
  if (grpc::Status denied = CheckDeploymentSecret(context, secret_); !denied.ok()) return denied;
  return ToGrpcStatus(worker_->Release(request->request_id()));
}

grpc::Status WorkerServiceImpl::Decode(grpc::ServerContext* context, const v1::DecodeRequest* request,
                                       grpc::ServerWriter<v1::DecodeEvent>* writer) {
  if (grpc::Status denied = CheckDeploymentSecret(context, secret_); !denied.ok()) return denied;
  absl::StatusOr<runtime::GenerationParams> params = GenerationParamsFromProto(
      request->sampling(), request->stop(),
      request->has_logprobs() ? std::optional<int32_t>(request->logprobs()) : std::nullopt,
      request->seed());
  if (!params.ok()) return ToGrpcStatus(params.status());
  std::optional<runtime::KvHandoff> kv;
  if (request->has_kv_source()) kv = rpc::FromProto(request->kv_source());
  bool first_chunk = true;
  runtime::DecodeCall call{
      .request_id = request->request_id(),
      .prompt_token_ids = std::vector<int32_t>(request->prompt_token_ids().begin(),
                                               request->prompt_token_ids().end()),
      .generated_token_ids = std::vector<int32_t>(request->generated_token_ids().begin(),
                                                  request->generated_token_ids().end()),
      .params = *std::move(params),
      .kv = std::move(kv),
      .deadline = DeadlineOf(*context),
      .is_cancelled = [context] { return context->IsCancelled(); },
      .emit = [&](const runtime::DecodeEvent& event) {
        v1::DecodeEvent message;
        if (event.kv_transferred) {
          auto* done = message.mutable_kv_transferred();
          done->set_start_us(event.kv_transferred->start_us);
          done->set_end_us(event.kv_transferred->end_us);
          done->set_num_bytes(event.kv_transferred->num_bytes);
          done->set_num_cached_tokens(event.kv_transferred->num_cached_tokens);
        } else {
          ToProto(*event.token, message.mutable_tokens());
          if (first_chunk && event.token->prefill_start_us != 0) {
            message.mutable_tokens()->set_prefill_start_us(event.token->prefill_start_us);
            message.mutable_tokens()->set_prefill_end_us(NowMicros());
            message.mutable_tokens()->set_num_cached_tokens(event.token->num_cached_tokens);
          }
          first_chunk = false;
        }
        return writer->Write(message);
      }};
  return ToGrpcStatus(worker_->Decode(std::move(call)));
}

grpc::Status WorkerServiceImpl::Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                                       v1::CancelResponse* response) {
  if (grpc::Status denied = CheckDeploymentSecret(context, secret_); !denied.ok()) return denied;
  response->set_found(worker_->Cancel(request->request_id()));
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::GetStats(grpc::ServerContext* context, const v1::GetStatsRequest*,
                                         v1::WorkerStats* response) {
  if (grpc::Status denied = CheckDeploymentSecret(context, secret_); !denied.ok()) return denied;
  ToProto(worker_->Stats(), response);
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Drain(grpc::ServerContext* context, const v1::DrainRequest*,
                                      v1::DrainResponse*) {
  if (grpc::Status denied = CheckDeploymentSecret(context, secret_); !denied.ok()) return denied;
  worker_->Drain();
  return grpc::Status::OK;
}

}  // namespace baton::rpc
