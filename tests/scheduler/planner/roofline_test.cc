#include "scheduler/planner/roofline.h"

#include <cmath>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::scheduler::planner {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// device_spec.cc has no test of its own: its numbers are checked here, where they are used.
TEST(DeviceSpecTest, EveryKnownDeviceHasPositiveRatesAndMemory) {
  for (const std::string& name : KnownDeviceNames()) {
    SCOPED_TRACE(name);
    absl::StatusOr<DeviceSpec> device = KnownDevice(name);
    ASSERT_THAT(device, IsOk());
    EXPECT_EQ(device->name, name);
    EXPECT_FALSE(device->source.empty());
    EXPECT_GT(device->peak_flops, 0);
    EXPECT_GT(device->mem_bytes_per_s, 0);
    EXPECT_GT(device->memory_bytes, 0u);
    EXPECT_GT(device->intra_node.bytes_per_s, device->inter_node.bytes_per_s);
    EXPECT_LT(device->intra_node.latency_s, device->inter_node.latency_s);
    EXPECT_GT(device->host_link.bytes_per_s, 0);
  }
}

TEST(DeviceSpecTest, GpuLinksArePerDirectionAndPerGpu) {
  struct Case {
    const char* name;
    double nvlink_bytes_per_s;   // half the data sheet's bidirectional figure
    double network_bytes_per_s;  // one InfiniBand NIC per GPU
    double memory_gib;
  };
  const Case cases[] = {
      {"a100", 300e9, 25e9, 80.0},
      {"h100", 450e9, 50e9, 81559.0 / 1024},
      {"h200", 450e9, 50e9, 143771.0 / 1024},
  };
  for (const Case& c : cases) {
    const DeviceSpec device = *KnownDevice(c.name);
    EXPECT_DOUBLE_EQ(device.intra_node.bytes_per_s, c.nvlink_bytes_per_s) << c.name;
    EXPECT_DOUBLE_EQ(device.inter_node.bytes_per_s, c.network_bytes_per_s) << c.name;
    EXPECT_DOUBLE_EQ(device.memory_bytes / double{1 << 30}, c.memory_gib) << c.name;
  }
}

TEST(DeviceSpecTest, UnknownDeviceIsNotFoundListingTheKnownOnes) {
  EXPECT_THAT(KnownDevice("tpu"),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("tpu"), HasSubstr("a100"),
                                                          HasSubstr("cpu"), HasSubstr("h200"))));
  EXPECT_THAT(KnownDevice("H100"), IsOk());
}

// A100 80GB SXM, by hand: 312 TFLOP/s and 2039 GB/s at the default efficiencies (0.6, 0.8); NVLink
// 300 GB/s per direction and 5 us per message.
constexpr double kA100FlopsPerS = 312e12 * 0.6;
constexpr double kA100BytesPerS = 2039e9 * 0.8;
constexpr double kNvlinkBytesPerS = 300e9;
constexpr double kNvlinkLatencyS = 5e-6;

// llama-2-7b, by hand: 32 layers of hidden 4096, MLP 11008, vocab 32000, bf16.
constexpr double kLlama2SevenBWeightBytes = 6'738'415'616.0 * 2;
constexpr double kLlama2SevenBMatmulFlops =
    2 * (32 * (4.0 * 4096 * 4096 + 3.0 * 4096 * 11008) + 32000.0 * 4096);
constexpr double kLlama2SevenBAttentionPairFlops = 4.0 * 32 * 32 * 128;

class RooflineLlama2SevenBOnA100 : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ModelShape> model = KnownModelShape("llama-2-7b");
    ASSERT_THAT(model, IsOk());
    absl::StatusOr<DeviceSpec> device = KnownDevice("a100");
    ASSERT_THAT(device, IsOk());
    coefficients_ = RooflineCoefficients(*model, *device, {1, 2, 3, 4, 8});
    ASSERT_NE(coefficients_.ForTp(1), nullptr);
    ASSERT_NE(coefficients_.ForTp(2), nullptr);
    tp1_ = *coefficients_.ForTp(1);
    tp2_ = *coefficients_.ForTp(2);
  }

  LatencyCoefficients coefficients_;
  TpCoefficients tp1_;
  TpCoefficients tp2_;
};

TEST_F(RooflineLlama2SevenBOnA100, NamesTheModelDeviceAndRates) {
  EXPECT_EQ(coefficients_.model, "llama-2-7b");
  EXPECT_EQ(coefficients_.device, "a100");
  EXPECT_THAT(coefficients_.source, HasSubstr("roofline: a100 peak 312 TFLOP/s"));
  EXPECT_THAT(coefficients_.source, HasSubstr("efficiencies flops 0.60, memory 0.80"));
}

TEST_F(RooflineLlama2SevenBOnA100, DecodeStepReadsTheWeightsOnceAndEachContextTokensKv) {
  EXPECT_NEAR(tp1_.decode.a_ms, kLlama2SevenBWeightBytes / kA100BytesPerS * 1e3, 1e-9);
  EXPECT_NEAR(tp1_.decode.a_ms, 8.262, 0.001);  // 13.48 GB at 1.63 TB/s
  EXPECT_NEAR(tp1_.decode.b_ms, 524288 / kA100BytesPerS * 1e3, 1e-12);
  EXPECT_NEAR(tp1_.decode.c_ms, kLlama2SevenBMatmulFlops / kA100FlopsPerS * 1e3, 1e-12);
  EXPECT_FALSE(tp1_.decode_large.has_value());
}

TEST_F(RooflineLlama2SevenBOnA100, PrefillOf2048TokensIsItsFlopsAtTheComputeRate) {
  const double num_tokens = 2048;
  // Every matmul once per token; causal attention over half the n² pairs.
  const double flops = num_tokens * kLlama2SevenBMatmulFlops +
                       num_tokens * num_tokens / 2 * kLlama2SevenBAttentionPairFlops;
  const double expected_ms = flops / kA100FlopsPerS * 1e3;
  const double predicted_ms = tp1_.PrefillMs(num_tokens, num_tokens * num_tokens);
  EXPECT_NEAR(predicted_ms / expected_ms, 1.0, 0.10)
      << "predicted " << predicted_ms << " ms, FLOPs / rate " << expected_ms << " ms";
  // The weight read is the floor a short prompt pays.
  EXPECT_NEAR(tp1_.prefill.a_ms, kLlama2SevenBWeightBytes / kA100BytesPerS * 1e3, 1e-9);
}

TEST_F(RooflineLlama2SevenBOnA100, TwoDevicesHalveTheComputeAndAddAnAllReduce) {
  // Two all-reduces per layer of 4096 bf16 values per token; a ring of 2 sends 2 (2-1)/2 of them.
  const double all_reduce_ms_per_token = 2 * 32 * 4096 * 2 * 1.0 / kNvlinkBytesPerS * 1e3;
  const double all_reduce_ms_per_step = 2 * 32 * kNvlinkLatencyS * 1e3;
  EXPECT_GT(all_reduce_ms_per_token, 0);

  EXPECT_NEAR(tp2_.prefill.c_ms, tp1_.prefill.c_ms / 2, 1e-15);
  EXPECT_NEAR(tp2_.prefill.b_ms, tp1_.prefill.b_ms / 2 + all_reduce_ms_per_token, 1e-12);
  EXPECT_NEAR(tp2_.prefill.a_ms, tp1_.prefill.a_ms / 2 + all_reduce_ms_per_step, 1e-9);
  EXPECT_NEAR(tp2_.decode.a_ms, tp1_.decode.a_ms / 2 + all_reduce_ms_per_step, 1e-9);
  EXPECT_NEAR(tp2_.decode.b_ms, tp1_.decode.b_ms / 2, 1e-15);
  EXPECT_NEAR(tp2_.decode.c_ms, tp1_.decode.c_ms / 2 + all_reduce_ms_per_token, 1e-12);
}

TEST_F(RooflineLlama2SevenBOnA100, TpThatDoesNotDivideTheHeadsIsLeftOut) {
  EXPECT_EQ(coefficients_.ForTp(3), nullptr);  // 32 heads
  EXPECT_NE(coefficients_.ForTp(4), nullptr);
  EXPECT_NE(coefficients_.ForTp(8), nullptr);
  EXPECT_EQ(coefficients_.by_tp.size(), 4u);
}

TEST_F(RooflineLlama2SevenBOnA100, DecodeStepAtBatchOneIsShorterThanA512TokenPrefill) {
  const double decode_ms = tp1_.DecodeMs(/*batch_size=*/1, /*sum_context=*/512);
  const double prefill_ms = tp1_.PrefillMs(512, 512.0 * 512);
  EXPECT_LT(decode_ms, prefill_ms);
  EXPECT_GT(decode_ms, 0);
}

TEST(RooflineTest, NonPositiveTpIsLeftOut) {
  const LatencyCoefficients coefficients =
      RooflineCoefficients(*KnownModelShape("llama-2-7b"), *KnownDevice("a100"), {0, -2, 1});
  EXPECT_EQ(coefficients.by_tp.size(), 1u);
  EXPECT_NE(coefficients.ForTp(1), nullptr);
}

TEST(RooflineTest, GqaSplitsKvHeadsOrReplicatesThemWhenTpIsAMultiple) {
  struct Case {
    const char* model;
    int tp;
    bool supported;
    int kv_heads_per_device;  // when supported
  };
  const Case cases[] = {
      {"llama-3-8b", 4, true, 2},  // 8 KV heads split
      {"llama-3-8b", 8, true, 1},
      {"llama-3-8b", 16, true, 1},  // 32 query heads split, each KV head held by two devices
      {"qwen2-7b", 4, true, 1},     // 28 query heads, 4 KV heads
      {"qwen2-7b", 7, false, 0},    // 7 splits the query heads, not the 4 KV heads
      {"qwen2-7b", 8, false, 0},    // 28 query heads
      {"llama-2-70b", 8, true, 1},
  };
  const DeviceSpec device = *KnownDevice("h100");
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.model << " tp " << c.tp);
    const ModelShape model = *KnownModelShape(c.model);
    const LatencyCoefficients coefficients = RooflineCoefficients(model, device, {c.tp});
    const TpCoefficients* tp = coefficients.ForTp(c.tp);
    ASSERT_EQ(tp != nullptr, c.supported);
    if (!c.supported) continue;
    const double kv_bytes =
        2.0 * model.num_layers * c.kv_heads_per_device * model.head_dim * model.bytes_per_param;
    EXPECT_NEAR(tp->decode.b_ms, kv_bytes / (device.mem_bytes_per_s * device.mem_efficiency) * 1e3,
                1e-12);
  }
}

TEST(RooflineTest, ReplicatedKvHeadsReadTheirProjectionsOnEveryDevice) {
  const ModelShape model = *KnownModelShape("llama-3-8b");
  const DeviceSpec device = *KnownDevice("h100");
  const LatencyCoefficients coefficients = RooflineCoefficients(model, device, {8, 16});
  const double bytes_per_s = device.mem_bytes_per_s * device.mem_efficiency;
  const double all_reduce_latency_ms = 2 * 32 * device.intra_node.latency_s * 1e3;
  // tp 8: an eighth of the weights; tp 16: a sixteenth, plus the 8 KV heads' k and v projections
  // (2 * 4096 * 128 per head and layer) held twice.
  const double extra_bytes = 32 * 8 * 2.0 * 4096 * 128 * 2;
  EXPECT_NEAR(coefficients.ForTp(8)->decode.a_ms,
              model.WeightBytes() / 8.0 / bytes_per_s * 1e3 + all_reduce_latency_ms, 1e-9);
  EXPECT_NEAR(
      coefficients.ForTp(16)->decode.a_ms,
      (model.WeightBytes() + extra_bytes) / 16.0 / bytes_per_s * 1e3 + all_reduce_latency_ms, 1e-9);
}

// DistServe's profiled fit of opt-13b on one A100 80GB (LLMServe/DistServe,
// simdistserve/estimators/profile_data/profiler-a100-80g.distserve.json, "facebook/opt-13b", tp
// "1"). The roofline is no fit: it should land within a factor of 2 of the measured rates.
TEST(RooflineTest, Opt13bOnA100IsWithinTwiceOfDistServesProfiledFit) {
  constexpr double kDistServePrefillB = 0.09264750660897617;    // ms per prompt token
  constexpr double kDistServePrefillC = 6.474785740229194e-06;  // ms per squared prompt token
  constexpr double kDistServeDecodeA = 19.934702624895458;      // ms per step (small batches)
  constexpr double kDistServeDecodeB = 0.0006269356524350583;   // ms per context token
  const LatencyCoefficients coefficients =
      RooflineCoefficients(*KnownModelShape("opt-13b"), *KnownDevice("a100"), {1});
  const TpCoefficients& tp1 = *coefficients.ForTp(1);
  std::cout << "opt-13b a100 tp1, roofline vs DistServe's fit:\n"
            << "  prefill b " << tp1.prefill.b_ms << " vs " << kDistServePrefillB << " ms/token\n"
            << "  prefill c " << tp1.prefill.c_ms << " vs " << kDistServePrefillC << " ms/token²\n"
            << "  decode a  " << tp1.decode.a_ms << " vs " << kDistServeDecodeA << " ms/step\n"
            << "  decode b  " << tp1.decode.b_ms << " vs " << kDistServeDecodeB << " ms/token\n";
  for (const auto& [roofline, measured] : {std::pair{tp1.prefill.b_ms, kDistServePrefillB},
                                           std::pair{tp1.decode.a_ms, kDistServeDecodeA},
                                           std::pair{tp1.decode.b_ms, kDistServeDecodeB}}) {
    EXPECT_GT(roofline / measured, 0.5) << roofline << " vs " << measured;
    EXPECT_LT(roofline / measured, 2.0) << roofline << " vs " << measured;
  }
}

TEST(RooflineTest, CpuDeviceGivesFiniteCoefficients) {
  const LatencyCoefficients coefficients =
      RooflineCoefficients(*KnownModelShape("llama-2-7b"), *KnownDevice("cpu"), {1, 2});
  for (const auto& [tp, c] : coefficients.by_tp) {
    SCOPED_TRACE(tp);
    for (double value : {c.prefill.a_ms, c.prefill.b_ms, c.prefill.c_ms, c.decode.a_ms,
                         c.decode.b_ms, c.decode.c_ms}) {
      EXPECT_GT(value, 0);
      EXPECT_TRUE(std::isfinite(value));
    }
  }
}

}  // namespace
}  // namespace baton::scheduler::planner
