#include "runtime/model/checkpoint.h"

#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::baton::testing::SafetensorsWriter;
using ::baton::testing::ScopedTempDir;
using ::baton::testing::TinyModelSpec;
using ::baton::testing::TinyTensorShapes;
using ::baton::testing::WriteTextFile;
using ::baton::testing::WriteTinyWeights;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<float> kValues = {1, 2, 3, 4, 5, 6};

TEST(CheckpointTest, SingleFileFindsEveryTensor) {
  ScopedTempDir dir;
  const TinyModelSpec spec;
  ASSERT_THAT(WriteTinyWeights(dir.path(), spec), IsOk());
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_THAT(checkpoint, IsOk());
  EXPECT_EQ(checkpoint->files().size(), 1u);
  const auto shapes = TinyTensorShapes(spec);
  EXPECT_EQ(checkpoint->num_tensors(), shapes.size());
  for (const auto& [name, shape] : shapes) {
    absl::StatusOr<TensorInfo> info = checkpoint->Get(name, shape);
    ASSERT_THAT(info, IsOk()) << name;
    EXPECT_EQ(info->name, name);
    EXPECT_TRUE(checkpoint->FileOf(name)->Contains(info->data, info->num_bytes));
  }
  EXPECT_EQ(checkpoint->Find("model.layers.7.mlp.up_proj.weight"), nullptr);
  EXPECT_EQ(checkpoint->FileOf("model.layers.7.mlp.up_proj.weight"), nullptr);
}

TEST(CheckpointTest, ShardedWithIndexMapsEachTensorToItsShard) {
  ScopedTempDir dir;
  TinyModelSpec spec;
  spec.num_shards = 3;
  ASSERT_THAT(WriteTinyWeights(dir.path(), spec), IsOk());
  ASSERT_TRUE(std::filesystem::exists(dir.path() / "model-00003-of-00003.safetensors"));
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_THAT(checkpoint, IsOk());
  EXPECT_EQ(checkpoint->files().size(), 3u);
  const auto shapes = TinyTensorShapes(spec);
  EXPECT_EQ(checkpoint->num_tensors(), shapes.size());
  // The writer splits in order: the first tensor in shard 1, the last in shard 3.
  EXPECT_EQ(checkpoint->FileOf(shapes.front().first)->path().filename(),
            "model-00001-of-00003.safetensors");
  EXPECT_EQ(checkpoint->FileOf(shapes.back().first)->path().filename(),
            "model-00003-of-00003.safetensors");
  for (const auto& [name, shape] : shapes) {
    EXPECT_THAT(checkpoint->Get(name, shape), IsOk()) << name;
  }
}

TEST(CheckpointTest, StaysValidAfterMove) {
  ScopedTempDir dir;
  TinyModelSpec spec;
  spec.num_shards = 2;
  ASSERT_THAT(WriteTinyWeights(dir.path(), spec), IsOk());
  absl::StatusOr<Checkpoint> opened = Checkpoint::Open(dir.path());
  ASSERT_THAT(opened, IsOk());
  const TensorInfo* before = opened->Find("model.norm.weight");
  ASSERT_NE(before, nullptr);
  Checkpoint moved = std::move(*opened);
  EXPECT_EQ(moved.Find("model.norm.weight"), before);
  EXPECT_TRUE(moved.FileOf("model.norm.weight")->Contains(before->data, before->num_bytes));
}

TEST(CheckpointTest, WithoutIndexReadsEverySafetensorsFile) {
  ScopedTempDir dir;
  ASSERT_THAT(SafetensorsWriter()
                  .Add("a", DType::kF32, {2}, {kValues.data(), 2})
                  .Write(dir.path() / "part-b.safetensors"),
              IsOk());
  ASSERT_THAT(SafetensorsWriter()
                  .Add("b", DType::kBF16, {2, 3}, kValues)
                  .Write(dir.path() / "part-a.safetensors"),
              IsOk());
  ASSERT_THAT(WriteTextFile(dir.path() / "notes.txt", "not a tensor file"), IsOk());
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_THAT(checkpoint, IsOk());
  ASSERT_EQ(checkpoint->files().size(), 2u);
  EXPECT_EQ(checkpoint->files()[0].path().filename(), "part-a.safetensors");  // sorted
  absl::StatusOr<TensorInfo> b = checkpoint->Get("b", std::vector<int64_t>{2, 3});
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(b->dtype, DType::kBF16);
  EXPECT_THAT(b->shape, ElementsAre(2, 3));
  EXPECT_NE(checkpoint->Find("a"), nullptr);
}

TEST(CheckpointTest, SingleFileWinsOverStrayFiles) {
  ScopedTempDir dir;
  ASSERT_THAT(SafetensorsWriter()
                  .Add("w", DType::kF32, {6}, kValues)
                  .Write(dir.path() / "model.safetensors"),
              IsOk());
  // Mistral repos also ship consolidated.safetensors (original-format weights). It must be ignored
  // when model.safetensors exists: here it repeats a name, which would fail as a duplicate.
  ASSERT_THAT(SafetensorsWriter()
                  .Add("w", DType::kF32, {6}, kValues)
                  .Write(dir.path() / "consolidated.safetensors"),
              IsOk());
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_THAT(checkpoint, IsOk());
  EXPECT_EQ(checkpoint->files().size(), 1u);
}

TEST(CheckpointTest, MissingTensorIsNotFoundNamingTensorAndDir) {
  ScopedTempDir dir;
  ASSERT_THAT(WriteTinyWeights(dir.path(), TinyModelSpec{}), IsOk());
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_THAT(checkpoint, IsOk());
  EXPECT_THAT(
      checkpoint->Get("model.layers.9.mlp.up_proj.weight", std::vector<int64_t>{24, 16}),
      StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("'model.layers.9.mlp.up_proj.weight'"),
                                                  HasSubstr(dir.path().string()))));
}

TEST(CheckpointTest, WrongShapeStatesBothShapesAndFile) {
  ScopedTempDir dir;
  ASSERT_THAT(WriteTinyWeights(dir.path(), TinyModelSpec{}), IsOk());
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_THAT(checkpoint, IsOk());
  EXPECT_THAT(checkpoint->Get("model.layers.0.mlp.up_proj.weight", std::vector<int64_t>{16, 24}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'model.layers.0.mlp.up_proj.weight'"),
                             HasSubstr("has shape [24, 16], expected [16, 24]"),
                             HasSubstr("model.safetensors"))));
  EXPECT_THAT(checkpoint->Get("model.norm.weight", std::vector<int64_t>{1, 16}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected [1, 16]")));
}

TEST(CheckpointTest, UnsupportedDTypeIsUnimplementedOnGet) {
  ScopedTempDir dir;
  ASSERT_THAT(SafetensorsWriter()
                  .AddRaw("rotary_emb.inv_freq", "F64", {2}, std::string(16, '\0'))
                  .Write(dir.path() / "model.safetensors"),
              IsOk());
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_THAT(checkpoint, IsOk());
  EXPECT_EQ(checkpoint->Find("rotary_emb.inv_freq"), nullptr);
  EXPECT_NE(checkpoint->FileOf("rotary_emb.inv_freq"), nullptr);
  EXPECT_THAT(checkpoint->Get("rotary_emb.inv_freq", std::vector<int64_t>{2}),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("F64")));
}

TEST(CheckpointTest, IndexNamingMissingShardIsNotFoundNamingShard) {
  ScopedTempDir dir;
  TinyModelSpec spec;
  spec.num_shards = 3;
  ASSERT_THAT(WriteTinyWeights(dir.path(), spec), IsOk());
  std::filesystem::remove(dir.path() / "model-00002-of-00003.safetensors");
  EXPECT_THAT(Checkpoint::Open(dir.path()),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("model.safetensors.index.json"),
                             HasSubstr("shard 'model-00002-of-00003.safetensors'"),
                             HasSubstr("does not exist"))));
}

TEST(CheckpointTest, IndexPointingAtWrongShardIsInvalid) {
  ScopedTempDir dir;
  ASSERT_THAT(SafetensorsWriter()
                  .Add("a", DType::kF32, {6}, kValues)
                  .Write(dir.path() / "model-00001-of-00002.safetensors"),
              IsOk());
  ASSERT_THAT(SafetensorsWriter()
                  .Add("b", DType::kF32, {6}, kValues)
                  .Write(dir.path() / "model-00002-of-00002.safetensors"),
              IsOk());
  ASSERT_THAT(WriteTextFile(dir.path() / "model.safetensors.index.json",
                            R"({"weight_map": {"a": "model-00002-of-00002.safetensors",
                                               "b": "model-00002-of-00002.safetensors"}})"),
              IsOk());
  EXPECT_THAT(Checkpoint::Open(dir.path()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("tensor 'a' is mapped to shard "
                                       "'model-00002-of-00002.safetensors'"),
                             HasSubstr("does not contain it"))));
}

struct BadIndexCase {
  std::string label;
  std::string index;
  std::string message;
};

class CheckpointBadIndexTest : public ::testing::TestWithParam<BadIndexCase> {};

TEST_P(CheckpointBadIndexTest, IsInvalidArgumentNamingIndexFile) {
  ScopedTempDir dir;
  ASSERT_THAT(WriteTextFile(dir.path() / "model.safetensors.index.json", GetParam().index), IsOk());
  EXPECT_THAT(
      Checkpoint::Open(dir.path()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("model.safetensors.index.json"), HasSubstr(GetParam().message))));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CheckpointBadIndexTest,
    ::testing::Values(
        BadIndexCase{"Malformed", R"({"weight_map": {)", "not a valid JSON object"},
        BadIndexCase{"NoWeightMap", R"({"metadata": {}})", "field 'weight_map'"},
        BadIndexCase{"EmptyWeightMap", R"({"weight_map": {}})", "'weight_map' is empty"},
        BadIndexCase{"ShardNotString", R"({"weight_map": {"w": 1}})",
                     "entry 'w' is not a file name string"},
        BadIndexCase{"ShardOutsideDir", R"({"weight_map": {"w": "../x.safetensors"}})",
                     "not a plain file name"}),
    [](const auto& info) { return info.param.label; });

TEST(CheckpointTest, DuplicateTensorAcrossFilesNamesBothFiles) {
  ScopedTempDir dir;
  ASSERT_THAT(
      SafetensorsWriter().Add("w", DType::kF32, {6}, kValues).Write(dir.path() / "one.safetensors"),
      IsOk());
  ASSERT_THAT(
      SafetensorsWriter().Add("w", DType::kF16, {6}, kValues).Write(dir.path() / "two.safetensors"),
      IsOk());
  EXPECT_THAT(Checkpoint::Open(dir.path()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("tensor 'w' is stored twice"), HasSubstr("one.safetensors"),
                             HasSubstr("two.safetensors"))));
}

TEST(CheckpointTest, DirectoryWithoutSafetensorsIsNotFound) {
  ScopedTempDir dir;
  ASSERT_THAT(WriteTextFile(dir.path() / "pytorch_model.bin", "pickle"), IsOk());
  EXPECT_THAT(Checkpoint::Open(dir.path()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no *.safetensors file")));
  EXPECT_THAT(Checkpoint::Open(dir.path() / "absent"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does not exist")));
}

TEST(CheckpointTest, CorruptShardErrorNamesTheShard) {
  ScopedTempDir dir;
  std::string bytes = SafetensorsWriter().Add("w", DType::kF32, {6}, kValues).Serialize();
  bytes.resize(bytes.size() - 4);
  ASSERT_THAT(WriteTextFile(dir.path() / "model.safetensors", bytes), IsOk());
  EXPECT_THAT(Checkpoint::Open(dir.path()),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("model.safetensors"), HasSubstr("truncated"))));
}

}  // namespace
}  // namespace baton::runtime
