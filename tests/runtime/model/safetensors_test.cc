#include "runtime/model/safetensors.h"

#include <cmath>
#include <cstring>
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
using ::baton::testing::WriteTextFile;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A file from a header text and a data section, bypassing the writer's bookkeeping.
std::string RawFile(const std::string& header, const std::string& data, uint64_t header_bytes) {
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header_bytes >> (8 * i)) & 0xff);
  return file + header + data;
}
std::string RawFile(const std::string& header, const std::string& data) {
  return RawFile(header, data, header.size());
}

float ElementAsF32(const TensorInfo& info, int64_t i) {
  if (info.dtype == DType::kF32) {
    float value;
    std::memcpy(&value, info.data + 4 * i, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, info.data + 2 * i, 2);
  return info.dtype == DType::kF16 ? F16ToF32(bits) : Bf16ToF32(bits);
}

class SafetensorsRoundTripTest : public ::testing::TestWithParam<DType> {};

TEST_P(SafetensorsRoundTripTest, ValuesShapesAndOffsetsSurvive) {
  const DType dtype = GetParam();
  ScopedTempDir dir;
  // Values exact in every dtype: multiples of 1/8 in a small range, plus signed zero and a power.
  const std::vector<float> a = {0.0f, -0.0f, 1.5f, -2.25f, 1024.0f, 0.125f};
  const std::vector<float> b = {-7.0f, 3.0f, 0.5f};
  const std::vector<float> scalar = {42.0f};
  SafetensorsWriter writer;
  writer.Add("a", dtype, {2, 3}, a).Add("b", dtype, {3}, b).Add("s", dtype, {}, scalar);
  writer.AddRaw("empty", baton::testing::SafetensorsDTypeName(dtype), {0, 4}, "");
  writer.SetMetadata("format", "pt");
  ASSERT_THAT(writer.Write(dir.path() / "t.safetensors"), IsOk());

  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir.path() / "t.safetensors");
  ASSERT_THAT(file, IsOk());
  EXPECT_THAT(file->metadata(),
              ElementsAre(std::pair<const std::string, std::string>("format", "pt")));
  ASSERT_EQ(file->tensors().size(), 4u);

  const TensorInfo* info_a = file->Find("a");
  ASSERT_NE(info_a, nullptr);
  EXPECT_EQ(info_a->name, "a");
  EXPECT_EQ(info_a->dtype, dtype);
  EXPECT_THAT(info_a->shape, ElementsAre(2, 3));
  EXPECT_EQ(info_a->num_bytes, 6 * DTypeBytes(dtype));
  EXPECT_TRUE(file->Contains(info_a->data, info_a->num_bytes));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(ElementAsF32(*info_a, i), a[i]) << "element " << i;
  EXPECT_TRUE(std::signbit(ElementAsF32(*info_a, 1)));

  const TensorInfo* info_b = file->Find("b");
  ASSERT_NE(info_b, nullptr);
  EXPECT_EQ(info_b->data, info_a->data + info_a->num_bytes);  // laid out back to back
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(ElementAsF32(*info_b, i), b[i]);

  absl::StatusOr<const TensorInfo*> info_s = file->Get("s");
  ASSERT_THAT(info_s, IsOk());
  EXPECT_TRUE((*info_s)->shape.empty());
  EXPECT_EQ(NumElements((*info_s)->shape), 1);
  EXPECT_EQ(ElementAsF32(**info_s, 0), 42.0f);

  const TensorInfo* info_empty = file->Find("empty");
  ASSERT_NE(info_empty, nullptr);
  EXPECT_EQ(info_empty->num_bytes, 0u);
  EXPECT_THAT(info_empty->shape, ElementsAre(0, 4));
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, SafetensorsRoundTripTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

TEST(SafetensorsTest, MoveKeepsTensorPointersValid) {
  ScopedTempDir dir;
  const std::vector<float> values = {1, 2, 3, 4};
  ASSERT_THAT(
      SafetensorsWriter().Add("w", DType::kF32, {4}, values).Write(dir.path() / "m.safetensors"),
      IsOk());
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir.path() / "m.safetensors");
  ASSERT_THAT(file, IsOk());
  const TensorInfo* before = file->Find("w");
  SafetensorsFile moved = std::move(*file);
  // The moved-from file no longer owns the mapping (its destructor must not unmap it).
  EXPECT_EQ(file->mapped_data(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(moved.Find("w"), before);
  EXPECT_TRUE(moved.Contains(before->data, before->num_bytes));
  EXPECT_EQ(ElementAsF32(*before, 3), 4.0f);
}

TEST(SafetensorsTest, UnsupportedDTypeFailsOnlyWhenRequested) {
  ScopedTempDir dir;
  const std::vector<float> values = {1, 2};
  SafetensorsWriter writer;
  writer.Add("w", DType::kF32, {2}, values)
      .AddRaw("position_ids", "I64", {2}, std::string(16, '\0'));
  ASSERT_THAT(writer.Write(dir.path() / "m.safetensors"), IsOk());
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir.path() / "m.safetensors");
  ASSERT_THAT(file, IsOk());
  EXPECT_NE(file->Find("w"), nullptr);
  EXPECT_EQ(file->Find("position_ids"), nullptr);
  EXPECT_EQ(file->unsupported_tensors().at("position_ids"), "I64");
  EXPECT_THAT(
      file->Get("position_ids"),
      StatusIs(absl::StatusCode::kUnimplemented,
               AllOf(HasSubstr("'position_ids'"), HasSubstr("I64"), HasSubstr("m.safetensors"))));
  EXPECT_THAT(file->Get("nope"), StatusIs(absl::StatusCode::kNotFound,
                                          AllOf(HasSubstr("'nope'"), HasSubstr("m.safetensors"))));
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  ScopedTempDir dir;
  EXPECT_THAT(SafetensorsFile::Open(dir.path() / "absent.safetensors"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("absent.safetensors")));
}

TEST(SafetensorsTest, FileShorterThanLengthPrefixIsTruncated) {
  ScopedTempDir dir;
  ASSERT_THAT(WriteTextFile(dir.path() / "m.safetensors", "abc"), IsOk());
  EXPECT_THAT(SafetensorsFile::Open(dir.path() / "m.safetensors"),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("m.safetensors"), HasSubstr("truncated"))));
}

TEST(SafetensorsTest, HeaderLengthBeyondEndOfFileIsTruncated) {
  ScopedTempDir dir;
  ASSERT_THAT(WriteTextFile(dir.path() / "m.safetensors", RawFile("{}", "", 4096)), IsOk());
  EXPECT_THAT(SafetensorsFile::Open(dir.path() / "m.safetensors"),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("m.safetensors"), HasSubstr("truncated"),
                             HasSubstr("header length 4096"))));
}

TEST(SafetensorsTest, DataBeyondEndOfFileIsTruncated) {
  ScopedTempDir dir;
  const std::vector<float> values(64, 1.0f);
  std::string bytes = SafetensorsWriter()
                          .Add("first", DType::kF32, {64}, values)
                          .Add("last", DType::kF32, {64}, values)
                          .Serialize();
  bytes.resize(bytes.size() - 10);  // an interrupted download
  ASSERT_THAT(WriteTextFile(dir.path() / "m.safetensors", bytes), IsOk());
  EXPECT_THAT(
      SafetensorsFile::Open(dir.path() / "m.safetensors"),
      StatusIs(absl::StatusCode::kDataLoss,
               AllOf(HasSubstr("m.safetensors"), HasSubstr("truncated"), HasSubstr("'last'"))));
}

// Malformed headers: each case is a header text, a data section, and what the error must say.
struct BadHeaderCase {
  std::string label;
  std::string header;
  std::string data;
  std::string message;
};

class SafetensorsBadHeaderTest : public ::testing::TestWithParam<BadHeaderCase> {};

TEST_P(SafetensorsBadHeaderTest, IsInvalidArgumentNamingFileAndField) {
  const BadHeaderCase& c = GetParam();
  ScopedTempDir dir;
  ASSERT_THAT(WriteTextFile(dir.path() / "bad.safetensors", RawFile(c.header, c.data)), IsOk());
  EXPECT_THAT(SafetensorsFile::Open(dir.path() / "bad.safetensors"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("bad.safetensors"), HasSubstr(c.message))));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SafetensorsBadHeaderTest,
    ::testing::Values(
        BadHeaderCase{"Garbage", "\x01\x02not json at all", "", "not valid JSON"},
        BadHeaderCase{"UnclosedObject", R"({"w": {"dtype": "F32")", "", "not valid JSON"},
        BadHeaderCase{"NotAnObject", "[1, 2]", "", "not a JSON object"},
        BadHeaderCase{"EntryNotObject", R"({"w": 3})", "", "tensor 'w': not a JSON object"},
        BadHeaderCase{"MissingDtype", R"({"w": {"shape": [1], "data_offsets": [0, 4]}})",
                      std::string(4, '\0'), "tensor 'w': missing or non-string field 'dtype'"},
        BadHeaderCase{"UnknownDtype",
                      R"({"w": {"dtype": "Q4_K", "shape": [1], "data_offsets": [0, 4]}})",
                      std::string(4, '\0'), "unknown dtype 'Q4_K'"},
        BadHeaderCase{"ShapeNotArray",
                      R"({"w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}})",
                      std::string(16, '\0'), "missing or non-array field 'shape'"},
        BadHeaderCase{"NegativeDim",
                      R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
                      std::string(4, '\0'), "'shape' entries must be non-negative integers"},
        BadHeaderCase{"OffsetsNotPair",
                      R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})",
                      std::string(4, '\0'), "'data_offsets' must be [begin, end]"},
        BadHeaderCase{"BeginAfterEnd",
                      R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}})",
                      std::string(4, '\0'), "has begin after end"},
        BadHeaderCase{
            "SizeMismatch", R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})",
            std::string(20, '\0'), "span 20 bytes but shape [2,3] of F32 needs 6 x 32 bits"},
        BadHeaderCase{"Overlap",
                      R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                      std::string(12, '\0'), "tensors 'a' and 'b' overlap"},
        BadHeaderCase{"MetadataNotString", R"({"__metadata__": {"format": 1}})", "",
                      "'__metadata__' entry 'format' is not a string"}),
    [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace baton::runtime
