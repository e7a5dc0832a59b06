// How a worker that is shutting down says so: UNAVAILABLE, like a worker that is gone, but marked by
// a status payload, so that the scheduler retries elsewhere without declaring it dead (it is alive
// and finishes what it has). The payload crosses gRPC in the status details (rpc/status_conversion.h);
// nothing reads the message to tell.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/cord.h"

namespace baton::runtime {

inline constexpr char kWorkerDrainingPayloadUrl[] = "type.baton.dev/baton.v1.WorkerDraining";

inline absl::Status WorkerDrainingError() {
  absl::Status status = absl::UnavailableError("worker is draining");
  status.SetPayload(kWorkerDrainingPayloadUrl, absl::Cord("draining"));
  return status;
}

inline bool IsWorkerDraining(const absl::Status& status) {
  return status.GetPayload(kWorkerDrainingPayloadUrl).has_value();
}

}  // namespace baton::runtime
