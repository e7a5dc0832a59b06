#include "scheduler/global/admission.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::scheduler {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::DoubleNear;
using ::testing::Optional;

// Known estimates:
//   prefill worker 0: 1000 tokens/s;  prefill worker 1: never observed;
//   decode worker 0: step 10 ms + 5 ms per request;  decode worker 1: 50 ms at any batch;
//   decode worker 2: never observed.
void TeachKnownEstimates(LatencyModel& model) {
  model.ObservePrefill("prefill worker 0", 1000, 1'000'000, 2'000'000);
  for (int batch : {1, 3}) {
    model.ObserveDecodeStep("decode worker 0", batch, (10 + 5 * batch) * 1000);
  }
  model.ObserveDecodeStep("decode worker 1", 2, 50'000);
}

InstanceLoad Prefill(int idx, int64_t outstanding_tokens) {
  return {.name = "prefill worker " + std::to_string(idx),
          .outstanding_prefill_tokens = outstanding_tokens};
}
InstanceLoad Decode(int idx, int num_active) {
  return {.name = "decode worker " + std::to_string(idx), .num_active_requests = num_active};
}

struct Case {
  std::string name;
  AdmissionPolicy policy;
  AdmissionRequest request;
  std::string rejection;  // empty: admitted
  std::optional<double> predicted_ttft_ms;
  std::optional<double> predicted_tpot_ms;
};

TEST(AdmissionTest, DecisionTable) {
  LatencyModel model;
  TeachKnownEstimates(model);
  // 500 queued + 100 prompt tokens at 1000 tokens/s: 600 ms. Decode worker 0 with 3 active requests
  // takes a 4th at 10 + 5 * 4 = 30 ms; decode worker 1 at 50 ms.
  const AdmissionRequest typical{.num_prompt_tokens = 100,
                                 .prefill_instance = Prefill(0, 500),
                                 .decode_instances = {Decode(0, 3), Decode(1, 0)}};
  const std::string ttft_message =
      "predicted TTFT 600 ms exceeds the 500 ms SLO (prefill worker 0: prefill queue 500 + 100 "
      "prompt tokens at 1000 tokens/s)";
  const std::string tpot_message =
      "predicted TPOT 30.0 ms exceeds the 20.0 ms SLO on every decode instance (lowest: decode "
      "worker 0 at batch 4, step 10.0 ms + 5.00 ms per request)";
  const std::vector<Case> cases = {
      {"no SLO: admit, still predict", {}, typical, "", 600, 30},
      {"TTFT within", {.ttft_ms = 600}, typical, "", 600, 30},
      {"TTFT over", {.ttft_ms = 500}, typical, ttft_message + "; retry later", 600, 30},
      {"TTFT of an unobserved pick: admit",
       {.ttft_ms = 1},
       {.num_prompt_tokens = 100, .prefill_instance = Prefill(1, 0), .decode_instances = {}},
       "", std::nullopt, std::nullopt},
      {"no live prefill instance: admit",
       {.ttft_ms = 1},
       {.num_prompt_tokens = 100, .prefill_instance = std::nullopt, .decode_instances = {}},
       "", std::nullopt, std::nullopt},
      {"TPOT within on one instance", {.tpot_ms = 30}, typical, "", 600, 30},
      {"TPOT over on every instance",
       {.tpot_ms = 20},
       typical,
       tpot_message + "; retry later", 600, 30},
      {"TPOT over, but an unobserved instance can take it",
       {.tpot_ms = 20},
       {.num_prompt_tokens = 100,
        .prefill_instance = Prefill(0, 500),
        .decode_instances = {Decode(0, 3), Decode(1, 0), Decode(2, 7)}},
       "", 600, 30},
      {"no live decode instance: admit",
       {.tpot_ms = 1},
       {.num_prompt_tokens = 100, .prefill_instance = Prefill(0, 0), .decode_instances = {}},
       "", 100, std::nullopt},
      {"both over: both reasons",
       {.ttft_ms = 500, .tpot_ms = 20},
       typical,
       ttft_message + "; " + tpot_message + "; retry later", 600, 30},
      {"TTFT off, TPOT over",
       {.tpot_ms = 20},
       {.num_prompt_tokens = 100000,
        .prefill_instance = Prefill(0, 0),
        .decode_instances = {Decode(0, 3)}},
       tpot_message + "; retry later", 100000, 30},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const AdmissionDecision decision = DecideAdmission(c.policy, model, c.request);
    if (c.rejection.empty()) {
      EXPECT_THAT(decision.status, IsOk());
    } else {
      EXPECT_THAT(decision.status, StatusIs(absl::StatusCode::kResourceExhausted, c.rejection));
    }
    if (c.predicted_ttft_ms) {
      EXPECT_THAT(decision.predicted_ttft_ms, Optional(DoubleNear(*c.predicted_ttft_ms, 1e-6)));
    } else {
      EXPECT_EQ(decision.predicted_ttft_ms, std::nullopt);
    }
    if (c.predicted_tpot_ms) {
      EXPECT_THAT(decision.predicted_tpot_ms, Optional(DoubleNear(*c.predicted_tpot_ms, 1e-6)));
      EXPECT_EQ(decision.predicted_tpot_instance, "decode worker 0");
    } else {
      EXPECT_EQ(decision.predicted_tpot_ms, std::nullopt);
    }
  }
}

TEST(AdmissionTest, PolicyIsEnabledByEitherSlo) {
  EXPECT_FALSE(AdmissionPolicy{}.enabled());
  EXPECT_TRUE((AdmissionPolicy{.ttft_ms = 1}).enabled());
  EXPECT_TRUE((AdmissionPolicy{.tpot_ms = 1}).enabled());
}

TEST(AdmissionTest, FormatMsKeepsTheDigitsThatMatter) {
  EXPECT_EQ(FormatMs(2310.4), "2310");
  EXPECT_EQ(FormatMs(100), "100");
  EXPECT_EQ(FormatMs(12.54), "12.5");
  EXPECT_EQ(FormatMs(1), "1.00");
  EXPECT_EQ(FormatMs(0.4234), "0.423");
  EXPECT_EQ(FormatMs(0), "0");
}

}  // namespace
}  // namespace baton::scheduler
