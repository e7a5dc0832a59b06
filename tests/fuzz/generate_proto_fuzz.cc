// Fuzz target: the public gRPC Generate request, from wire bytes to a validated request, as
// InferenceServiceImpl::Generate runs it: the message is parsed (bytes that are not a
// baton.v1.GenerateRequest are refused before the service sees them), converted with FromProto, and
// checked by ValidateRequest, the first check RequestDriver::Prepare makes. (Prepare's checks
// against the model, vocabulary and context length, are not reached here.)
//
// Input: a serialized baton.v1.GenerateRequest.
#include <cstdint>

#include "baton/v1/inference.pb.h"
#include "scheduler/global/generate_request.h"
#include "scheduler/service/generate_proto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  baton::v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<baton::scheduler::GenerateRequest> native = baton::scheduler::FromProto(request);
  if (native.ok()) baton::scheduler::ValidateRequest(*native).IgnoreError();
  return 0;
}
