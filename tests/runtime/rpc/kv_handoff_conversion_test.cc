// KvHandoff and ParallelLayout through their wire forms (v1::KvSource, v1::ParallelLayout) and back,
// including through serialized bytes, as the scheduler carries them between workers.
#include "runtime/rpc/kv_handoff_conversion.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::rpc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

runtime::KvHandoff TwoByTwoHandoff() {
  runtime::KvHandoff handoff{
      .model_shape = {.num_layers = 4, .num_kv_heads = 2, .head_dim = 8, .block_size = 16},
      .layout = {.tp_size = 2, .pp_size = 2, .stage_num_layers = {3, 1}},
      .blocks = {9, 3, 4, 0},
      .num_tokens = 50};
  for (int r = 0; r < 4; ++r) {
    handoff.rank_sources.push_back(runtime::KvSource{
        .hostname = "node-a",
        .boot_id = "boot-1",
        .shm_name = "/baton-kv-77-" + std::to_string(r),
        .tcp_address = "node-a:" + std::to_string(7000 + r)});
  }
  return handoff;
}

TEST(KvHandoffConversionTest, RoundTripsThroughTheWire) {
  const runtime::KvHandoff handoff = TwoByTwoHandoff();
  v1::KvSource message;
  ToProto(handoff, &message);
  EXPECT_EQ(message.num_layers(), 4);
  EXPECT_EQ(message.layout().tp_size(), 2);
  EXPECT_THAT(message.layout().stage_num_layers(), ElementsAre(3, 1));
  ASSERT_EQ(message.ranks_size(), 4);
  EXPECT_EQ(message.ranks(2).shm_name(), "/baton-kv-77-2");
  EXPECT_EQ(message.ranks(3).tcp_address(), "node-a:7003");
  EXPECT_THAT(message.block_ids(), ElementsAre(9, 3, 4, 0));

  v1::KvSource parsed;
  ASSERT_TRUE(parsed.ParseFromString(message.SerializeAsString()));
  EXPECT_EQ(FromProto(parsed), handoff);
}

TEST(KvHandoffConversionTest, AOneRankHandoffWithNoSharedMemoryRoundTrips) {
  runtime::KvHandoff handoff{
      .model_shape = {.num_layers = 2, .num_kv_heads = 1, .head_dim = 4, .block_size = 4},
      .layout = {},
      .rank_sources = {runtime::KvSource{.hostname = "b", .tcp_address = "b:1"}},
      .blocks = {1},
      .num_tokens = 3};
  v1::KvSource message;
  ToProto(handoff, &message);
  EXPECT_TRUE(message.layout().stage_num_layers().empty());
  EXPECT_EQ(FromProto(message), handoff);
}

TEST(KvHandoffConversionTest, TheKvElementTypeRoundTrips) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    runtime::KvHandoff handoff = TwoByTwoHandoff();
    handoff.model_shape.dtype = dtype;
    v1::KvSource message;
    ToProto(handoff, &message);
    EXPECT_EQ(message.kv_dtype(), DTypeName(dtype));
    v1::KvSource parsed;
    ASSERT_TRUE(parsed.ParseFromString(message.SerializeAsString()));
    EXPECT_EQ(FromProto(parsed), handoff) << DTypeName(dtype);
    EXPECT_EQ(FromProto(parsed).model_shape.dtype, dtype);
  }
}

TEST(KvHandoffConversionTest, ASenderWithoutTheFieldMeansF32) {
  v1::KvSource message;
  ToProto(TwoByTwoHandoff(), &message);
  message.clear_kv_dtype();
  const runtime::KvHandoff handoff = FromProto(message);
  EXPECT_EQ(handoff.model_shape.dtype, DType::kF32);
  EXPECT_TRUE(handoff.unknown_kv_dtype.empty());
  EXPECT_EQ(handoff, TwoByTwoHandoff());
}

// A type this build does not know converts without failing, is carried on unchanged (the scheduler
// converts a hand-off in and out), and the decode worker's first check refuses it by name.
TEST(KvHandoffConversionTest, AnUnknownKvElementTypeIsCarriedAndThenRefused) {
  for (const std::string name : {"fp8", "f16", "BF16", "f32 "}) {
    SCOPED_TRACE(name);
    v1::KvSource message;
    ToProto(TwoByTwoHandoff(), &message);
    message.set_kv_dtype(name);
    const runtime::KvHandoff handoff = FromProto(message);
    EXPECT_EQ(handoff.unknown_kv_dtype, name);
    v1::KvSource forwarded;
    ToProto(handoff, &forwarded);
    EXPECT_EQ(forwarded.kv_dtype(), name);
    const absl::Status status = runtime::ValidateKvHandoff(handoff);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("\"" + name + "\" is unknown"));
    EXPECT_EQ(runtime::PlanKvPulls(handoff, handoff.model_shape, handoff.layout).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(ParallelLayoutConversionTest, RoundTrips) {
  for (const runtime::ParallelLayout& layout :
       {runtime::ParallelLayout{}, runtime::ParallelLayout{.tp_size = 4, .pp_size = 1},
        runtime::ParallelLayout{.tp_size = 1, .pp_size = 3, .stage_num_layers = {2, 5, 1}}}) {
    v1::ParallelLayout message;
    ToProto(layout, &message);
    EXPECT_EQ(FromProto(message), layout) << runtime::LayoutString(layout);
  }
}

}  // namespace
}  // namespace baton::rpc
