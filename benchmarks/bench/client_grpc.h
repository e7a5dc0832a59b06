// GrpcClient: GenerationClient over Baton's public gRPC API (baton.v1.InferenceService.Generate,
// server-streaming). Every response's tokens are timestamped on arrival; the ServerTiming fields,
// which ride on the response that follows each event, are merged into one ServerTiming per call.
//
// Requests go out over a few channels in turn (each with its own connection), so that many
// concurrent streams do not queue behind one HTTP/2 connection's limits. Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "benchmarks/bench/client.h"

namespace grpc {
class ClientContext;
}

namespace baton::v1 {
class InferenceService;
}

namespace baton::bench {

struct GrpcClientOptions {
  int num_channels = 4;  // >= 1
  std::string api_key;   // sent as "authorization: Bearer KEY" metadata; empty: none
};

class GrpcClient final : public GenerationClient {
 public:
  // `target` is HOST:PORT. Connects lazily: an unreachable server shows in the first call.
  // InvalidArgument for an empty target or num_channels < 1.
  static absl::StatusOr<std::unique_ptr<GrpcClient>> Create(const std::string& target,
                                                            const GrpcClientOptions& options = {});
  ~GrpcClient() override;

  absl::Status Generate(const GenerationRequest& request, Cancellation* cancel,
                        GenerationTrace* trace) override;
  absl::StatusOr<ModelInfo> GetModelInfo() override;

 private:
  struct Channel;
  GrpcClient(std::vector<std::unique_ptr<Channel>> channels, std::string api_key);
  // A call's context: the deadline, and the API key when there is one.
  void Prepare(grpc::ClientContext& context, absl::Duration timeout) const;
  Channel& NextChannel();

  std::vector<std::unique_ptr<Channel>> channels_;
  const std::string api_key_;
  std::atomic<uint64_t> next_channel_idx_ = 0;
};

}  // namespace baton::bench
