#include "benchmarks/bench/client_grpc.h"

#include "absl/strings/str_cat.h"
#include "baton/v1/inference.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "runtime/rpc/status_conversion.h"

namespace baton::bench {
namespace {

constexpr absl::Duration kModelInfoDeadline = absl::Seconds(10);

std::string FinishReasonName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_CANCELLED:
      return "cancelled";
    default:
      return "";
  }
}

// Non-zero fields of `update` overwrite `timing`; emission times are appended.
void MergeTiming(const v1::ServerTiming& update, ServerTiming& timing) {
  const auto set = [](int64_t value, int64_t& field) {
    if (value != 0) field = value;
  };
  set(update.arrival_us(), timing.arrival_us);
  set(update.prefill_start_us(), timing.prefill_start_us);
  set(update.prefill_end_us(), timing.prefill_end_us);
  set(update.kv_transfer_start_us(), timing.kv_transfer_start_us);
  set(update.kv_transfer_end_us(), timing.kv_transfer_end_us);
  timing.token_emit_us.insert(timing.token_emit_us.end(), update.token_emit_us().begin(),
                              update.token_emit_us().end());
}

}  // namespace

struct GrpcClient::Channel {
  std::unique_ptr<v1::InferenceService::Stub> stub;
};

absl::StatusOr<std::unique_ptr<GrpcClient>> GrpcClient::Create(const std::string& target,
                                                               const GrpcClientOptions& options) {
  if (target.empty()) return absl::InvalidArgumentError("gRPC target: empty (HOST:PORT)");
  if (options.num_channels < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_channels: ", options.num_channels, " < 1"));
  }
  std::vector<std::unique_ptr<Channel>> channels;
  for (int i = 0; i < options.num_channels; ++i) {
    grpc::ChannelArguments args;
    // Without a local pool, channels with equal arguments share one connection.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    auto channel = std::make_unique<Channel>();
    channel->stub = v1::InferenceService::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
    channels.push_back(std::move(channel));
  }
  return std::unique_ptr<GrpcClient>(new GrpcClient(std::move(channels), options.api_key));
}

GrpcClient::GrpcClient(std::vector<std::unique_ptr<Channel>> channels, std::string api_key)
    : channels_(std::move(channels)), api_key_(std::move(api_key)) {}

void GrpcClient::Prepare(grpc::ClientContext& context, absl::Duration timeout) const {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  if (!api_key_.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", api_key_));
}

GrpcClient::~GrpcClient() = default;

GrpcClient::Channel& GrpcClient::NextChannel() {
  return *channels_[next_channel_idx_.fetch_add(1) % channels_.size()];
}

absl::Status GrpcClient::Generate(const GenerationRequest& request, Cancellation* cancel,
                                  GenerationTrace* trace) {
  v1::GenerateRequest proto;
  proto.set_request_id(request.request_id);
  if (!request.prompt_text.empty()) {
    proto.set_text(request.prompt_text);
  } else {
    proto.mutable_token_ids()->mutable_ids()->Assign(request.prompt_ids.begin(),
                                                     request.prompt_ids.end());
  }
  proto.mutable_sampling()->set_temperature(0.0f);  // greedy: the cheapest sampler everywhere
  proto.mutable_stop()->set_max_tokens(request.max_tokens);
  proto.mutable_stop()->set_ignore_eos(request.ignore_eos);

  grpc::ClientContext context;
  Prepare(context, request.timeout);
  if (cancel != nullptr) cancel->SetHook([&context] { context.TryCancel(); });
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      NextChannel().stub->Generate(&context, proto);
  v1::GenerateResponse response;
  int num_tokens = 0;
  while (reader->Read(&response)) {
    const Clock::time_point now = Clock::now();
    for (int i = 0; i < response.token_ids_size(); ++i) trace->token_times.push_back(now);
    trace->output_ids.insert(trace->output_ids.end(), response.token_ids().begin(), response.token_ids().end());
    num_tokens += response.token_ids_size();
    if (response.has_timing()) {
      if (!trace->server) trace->server.emplace();
      MergeTiming(response.timing(), *trace->server);
    }
    if (response.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      trace->finish_reason = FinishReasonName(response.finish_reason());
      if (response.num_prompt_tokens() > 0) trace->num_prompt_tokens = response.num_prompt_tokens();
      if (response.num_generated_tokens() > 0) num_tokens = response.num_generated_tokens();
      trace->num_cached_tokens = response.num_cached_tokens();
    }
  }
  const grpc::Status status = reader->Finish();
  if (cancel != nullptr) cancel->ClearHook();
  trace->num_output_tokens = num_tokens;
  if (cancel != nullptr && cancel->cancelled() && !status.ok()) {
    return absl::CancelledError("cancelled by the client");
  }
  return rpc::FromGrpcStatus(status);
}

absl::StatusOr<ModelInfo> GrpcClient::GetModelInfo() {
  grpc::ClientContext context;
  Prepare(context, kModelInfoDeadline);
  context.set_wait_for_ready(true);
  v1::GetModelInfoResponse response;
  const grpc::Status status =
      NextChannel().stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &response);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("GetModelInfo: ", rpc::FromGrpcStatus(status).ToString()));
  }
  return ModelInfo{.model = response.model(), .max_model_len = response.max_model_len()};
}

}  // namespace baton::bench
