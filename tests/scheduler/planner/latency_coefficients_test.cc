#include "scheduler/planner/latency_coefficients.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::scheduler::planner {
namespace {

TEST(LatencyCoefficientsTest, JsonRoundTrips) {
  LatencyCoefficients c{.model = "m", .device = "cpu", .source = "test"};
  c.by_tp[1] = {.prefill = {1, 0.5, 1e-6}, .decode = {2, 1e-4, 0.1}};
  c.by_tp[4] = {.prefill = {3, 0.1, 2e-7}, .decode = {4, 2e-5, 0.02}, .decode_large = DecodeCoefficients{5, 1e-5, 0.3},
                .decode_large_batch_threshold = 95};
  absl::StatusOr<LatencyCoefficients> parsed = ParseLatencyCoefficients(LatencyCoefficientsToJson(c));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, c);
  c.serving_slowdown = {.prefill_alone = 1.05, .prefill_shared = 1.3, .decode_alone = 1.1, .decode_shared = 1.2};
  parsed = ParseLatencyCoefficients(LatencyCoefficientsToJson(c));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, c);
  EXPECT_DOUBLE_EQ(c.serving_slowdown.Factor(/*prefill=*/true, /*shared=*/true), 1.3);
  EXPECT_DOUBLE_EQ(c.serving_slowdown.Factor(/*prefill=*/false, /*shared=*/false), 1.1);
}

TEST(LatencyCoefficientsTest, DecodeSwitchesToTheLargeBatchFitAtItsThreshold) {
  const TpCoefficients c{.prefill = {10, 1, 0.01}, .decode = {1, 0.001, 0.5},
                         .decode_large = DecodeCoefficients{2, 0.002, 0.25}, .decode_large_batch_threshold = 8};
  EXPECT_DOUBLE_EQ(c.DecodeMs(7, 1000), 1 + 1 + 3.5);
  EXPECT_DOUBLE_EQ(c.DecodeMs(8, 1000), 2 + 2 + 2);
  EXPECT_DOUBLE_EQ(c.PrefillMs(100, 10000), 10 + 100 + 100);
  const TpCoefficients negative{.decode = {-50, 0, 0}};
  EXPECT_EQ(negative.DecodeMs(1, 0), 0);  // a fit's negative value is no time at all
}

TEST(LatencyCoefficientsTest, ShippedDistServeFitsLoad) {
  const std::string source_dir = BATON_SOURCE_DIR;  // a compile definition (tests/.../CMakeLists.txt)
  for (const char* model : {"opt-13b", "opt-66b", "opt-175b"}) {
    absl::StatusOr<LatencyCoefficients> c = LoadLatencyCoefficients(
        source_dir + "/scheduler/planner/data/" + model + ".a100.distserve.json");
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->model, model);
    EXPECT_FALSE(c->by_tp.empty());
  }
  // OPT-13B on one A100: a 512-token prefill in ~66 ms (DistServe §3.1 puts it near compute-bound).
  absl::StatusOr<LatencyCoefficients> opt13 = LoadLatencyCoefficients(
      std::string(source_dir) + "/scheduler/planner/data/opt-13b.a100.distserve.json");
  ASSERT_TRUE(opt13.ok());
  EXPECT_NEAR(opt13->ForTp(1)->PrefillMs(512, 512.0 * 512), 65.6, 0.5);
}

TEST(LatencyCoefficientsTest, MalformedFilesNameTheKey) {
  auto message = [](const std::string& json) {
    return std::string(ParseLatencyCoefficients(json).status().message());
  };
  EXPECT_THAT(message("{"), ::testing::HasSubstr("not valid JSON"));
  EXPECT_THAT(message(R"({"tp": {}})"), ::testing::HasSubstr("tp:"));
  EXPECT_THAT(message(R"({"tp": {"0": {"prefill": [1,2,3], "decode": [1,2,3]}}})"),
              ::testing::HasSubstr("tp.0"));
  EXPECT_THAT(message(R"({"tp": {"1": {"prefill": [1,2], "decode": [1,2,3]}}})"),
              ::testing::HasSubstr("tp.1.prefill"));
  EXPECT_THAT(message(R"({"tp": {"1": {"prefill": [1,2,3], "decode": [1,2,3], "decode_large": [1,2,3]}}})"),
              ::testing::HasSubstr("go together"));
  EXPECT_THAT(message(R"({"tpp": 1})"), ::testing::HasSubstr("unknown key 'tpp'"));
  const std::string tp1 = R"("tp": {"1": {"prefill": [1,2,3], "decode": [1,2,3]}})";
  EXPECT_THAT(message("{" + tp1 + R"(, "serving_slowdown": {"prefill_alone": 0.1}})"),
              ::testing::HasSubstr("serving_slowdown.prefill_alone"));
  EXPECT_THAT(message("{" + tp1 + R"(, "serving_slowdown": {"prefil_alone": 1}})"),
              ::testing::HasSubstr("unknown key 'prefil_alone' in serving_slowdown"));
  EXPECT_THAT(message("{" + tp1 + R"(, "serving_slowdown": [1]})"), ::testing::HasSubstr("serving_slowdown:"));
  EXPECT_EQ(LoadLatencyCoefficients("/nonexistent/file.json").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace baton::scheduler::planner
