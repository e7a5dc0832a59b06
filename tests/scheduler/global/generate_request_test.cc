// ValidateRequest: what a Generate request alone can get wrong, with the messages both front ends
// return (tests/python/test_serving.py checks some of them end to end).
#include "scheduler/global/generate_request.h"

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::scheduler {
namespace {

using absl_testing::IsOk;
using absl_testing::StatusIs;
using ::testing::HasSubstr;

GenerateRequest Valid() {
  GenerateRequest request;
  request.prompt_text = "hello";
  return request;
}

TEST(ValidateRequestTest, Table) {
  struct Case {
    std::string name;
    std::function<void(GenerateRequest&)> change;
    std::string want_message;  // empty: valid
  };
  const std::vector<Case> cases = {
      {"valid text", [](GenerateRequest&) {}, ""},
      {"valid ids", [](GenerateRequest& r) { r.prompt_text.reset(); r.prompt_ids = {{1, 2}}; }, ""},
      {"no prompt", [](GenerateRequest& r) { r.prompt_text.reset(); }, "prompt: set exactly one of text, token_ids and chat"},
      {"request_id of 256 bytes", [](GenerateRequest& r) { r.request_id = std::string(256, 'a'); }, ""},
      // Issue 37, defect 8: a 1 MB id was taken, and logged whole.
      {"request_id of 1 MB", [](GenerateRequest& r) { r.request_id = std::string(1 << 20, 'a'); },
       "request_id is 1048576 bytes; at most 256"},
      {"empty text", [](GenerateRequest& r) { r.prompt_text = ""; }, "prompt: text is empty"},
      {"empty ids", [](GenerateRequest& r) { r.prompt_text.reset(); r.prompt_ids.emplace(); },
       "prompt: token_ids is empty"},
      {"negative temperature", [](GenerateRequest& r) { r.params.sampling.temperature = -1; },
       "sampling.temperature -1 must be >= 0"},
      {"nan temperature",
       [](GenerateRequest& r) { r.params.sampling.temperature = std::numeric_limits<float>::quiet_NaN(); },
       "must be >= 0"},
      {"negative top_k", [](GenerateRequest& r) { r.params.sampling.top_k = -2; },
       "sampling.top_k -2 must be >= 0"},
      {"top_p above 1", [](GenerateRequest& r) { r.params.sampling.top_p = 1.5f; },
       "sampling.top_p 1.5 must be in (0, 1]"},
      {"top_p 0 (front ends map unset to 1)", [](GenerateRequest& r) { r.params.sampling.top_p = 0; },
       "sampling.top_p 0 must be in (0, 1]"},
      {"logprobs above 20", [](GenerateRequest& r) { r.params.num_logprobs = 21; },
       "logprobs 21 must be in [0, 20]"},
      {"max_tokens 0 given",
       [](GenerateRequest& r) { r.max_tokens_given = true; r.params.max_tokens = 0; },
       "stop.max_tokens 0 must be >= 1"},
      {"max_tokens 0 not given: up to the context",
       [](GenerateRequest& r) { r.params.max_tokens = 0; }, ""},
      {"empty stop string", [](GenerateRequest& r) { r.stop_strings = {"x", ""}; },
       "stop: empty stop string"},
      {"presence_penalty above 2",
       [](GenerateRequest& r) { r.params.logits_processors.presence_penalty = 2.5f; },
       "sampling.presence_penalty 2.5 must be in [-2, 2]"},
      {"frequency_penalty below -2",
       [](GenerateRequest& r) { r.params.logits_processors.frequency_penalty = -3; },
       "sampling.frequency_penalty -3 must be in [-2, 2]"},
      {"repetition_penalty 0", [](GenerateRequest& r) { r.params.logits_processors.repetition_penalty = 0; },
       "sampling.repetition_penalty 0 must be finite and > 0"},
      {"min_p above 1", [](GenerateRequest& r) { r.params.sampling.min_p = 1.5f; },
       "sampling.min_p 1.5 must be in [0, 1]"},
      {"logit_bias above 100",
       [](GenerateRequest& r) { r.params.logits_processors.logit_bias = {{3, 101.0f}}; },
       "sampling.logit_bias: bias 101 of token id 3 must be in [-100, 100]"},
      {"logit_bias negative id",
       [](GenerateRequest& r) { r.params.logits_processors.logit_bias = {{-1, 1.0f}}; },
       "sampling.logit_bias: token id -1 is outside the vocabulary"},
      {"negative min_tokens", [](GenerateRequest& r) { r.params.logits_processors.min_tokens = -1; },
       "stop.min_tokens -1 must be >= 0"},
      {"min_tokens above max_tokens",
       [](GenerateRequest& r) {
         r.max_tokens_given = true;
         r.params.max_tokens = 4;
         r.params.logits_processors.min_tokens = 5;
       },
       "stop.min_tokens 5 must be <= max_tokens 4"},
      {"every processor at a valid value",
       [](GenerateRequest& r) {
         auto& p = r.params.logits_processors;
         p.presence_penalty = -2;
         p.frequency_penalty = 2;
         p.repetition_penalty = 1.2f;
         p.logit_bias = {{0, -100.0f}, {7, 100.0f}};
         p.min_tokens = 3;
         r.params.sampling.min_p = 1;
       },
       ""},
      {"prompt checked first",
       [](GenerateRequest& r) { r.prompt_text = ""; r.params.sampling.top_k = -1; },
       "prompt: text is empty"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    GenerateRequest request = Valid();
    c.change(request);
    if (c.want_message.empty()) {
      EXPECT_THAT(ValidateRequest(request), IsOk());
    } else {
      EXPECT_THAT(ValidateRequest(request),
                  StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.want_message)));
    }
  }
}

}  // namespace
}  // namespace baton::scheduler
