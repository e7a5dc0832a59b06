// Fuzz target: the OpenAI /v1/completions request path, from body bytes to a validated request, as
// the HTTP server runs it (openai_http.cc): json::parse without exceptions (a body that is not JSON
// is a 400), CompletionToRequests, then ValidateRequest on each, the first check RequestDriver::Prepare makes.
// (Prepare's checks against the model, vocabulary and context length, are not reached here.)
//
// Input: the request body. No exception is caught here: the server turns one into a 500 "internal
// error", which for a client's bad body is a bug (it should be a 400 naming the field).
#include <cstdint>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "scheduler/global/generate_request.h"
#include "scheduler/service/openai_completion.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body_bytes(reinterpret_cast<const char*>(data), size);
  const nlohmann::json body = nlohmann::json::parse(body_bytes, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return 0;
  baton::scheduler::AnswerShape streaming;
  absl::StatusOr<std::vector<baton::scheduler::GenerateRequest>> requests =
      baton::scheduler::CompletionToRequests(body, &streaming);
  if (!requests.ok()) return 0;
  for (const baton::scheduler::GenerateRequest& request : *requests) {
    baton::scheduler::ValidateRequest(request).IgnoreError();
  }
  return 0;
}
