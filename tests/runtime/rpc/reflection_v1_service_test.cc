#include "runtime/rpc/reflection_v1_service.h"

#include <set>
#include <string>
#include <vector>

#include "baton/v1/inference.pb.h"
#include "baton/v1/worker.pb.h"
#include "google/protobuf/descriptor.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::rpc {
namespace {

namespace v1 = grpc::reflection::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> FileNames(const v1::ServerReflectionResponse& response) {
  std::vector<std::string> names;
  for (const std::string& bytes : response.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    EXPECT_TRUE(file.ParseFromString(bytes));
    names.push_back(file.name());
  }
  return names;
}

TEST(ReflectionV1ServiceTest, ListsTheServicesItWasGiven) {
  ReflectionV1Service service({"baton.v1.InferenceService", "grpc.health.v1.Health"});
  v1::ServerReflectionRequest request;
  request.set_host("h");
  request.set_list_services("");
  const v1::ServerReflectionResponse response = service.Answer(request);
  EXPECT_EQ(response.valid_host(), "h");
  EXPECT_TRUE(response.original_request().has_list_services());
  ASSERT_EQ(response.list_services_response().service_size(), 2);
  EXPECT_EQ(response.list_services_response().service(0).name(), "baton.v1.InferenceService");
  EXPECT_EQ(response.list_services_response().service(1).name(), "grpc.health.v1.Health");
}

TEST(ReflectionV1ServiceTest, SendsTheFileOfASymbolAndWhatItImportsOnce) {
  baton::v1::GenerateRequest linked;  // the generated pool holds what the binary links
  ReflectionV1Service service({"baton.v1.InferenceService", "grpc.reflection.v1.ServerReflection"});
  v1::ServerReflectionRequest request;
  request.set_file_containing_symbol("baton.v1.InferenceService");
  const std::vector<std::string> names = FileNames(service.Answer(request));
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "baton/v1/inference.proto");
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());

  request.set_file_by_filename("grpc/reflection/v1/reflection.proto");
  EXPECT_THAT(FileNames(service.Answer(request)), ElementsAre("grpc/reflection/v1/reflection.proto"));
}

// Issue 37, defect 7: the public port told every internal method of worker.proto to anyone.
TEST(ReflectionV1ServiceTest, WhatTheServerDoesNotServeIsNotFound) {
  baton::v1::RegisterRequest linked;  // worker.proto is in the binary's pool
  ReflectionV1Service service({"baton.v1.InferenceService"});
  v1::ServerReflectionRequest request;
  for (const char* symbol : {"baton.v1.WorkerService", "baton.v1.WorkerRegistryService",
                             "baton.v1.RegisterRequest"}) {
    request.set_file_containing_symbol(symbol);
    EXPECT_EQ(service.Answer(request).error_response().error_code(), grpc::StatusCode::NOT_FOUND) << symbol;
  }
  request.set_file_by_filename("baton/v1/worker.proto");
  EXPECT_EQ(service.Answer(request).error_response().error_code(), grpc::StatusCode::NOT_FOUND);
  request.set_file_containing_symbol("baton.v1.GenerateRequest");  // a public file is still served
  EXPECT_THAT(FileNames(service.Answer(request)), testing::Contains("baton/v1/inference.proto"));
}

TEST(ReflectionV1ServiceTest, UnknownNamesAreNotFoundAndAnEmptyRequestInvalid) {
  ReflectionV1Service service({});
  v1::ServerReflectionRequest request;
  request.set_file_containing_symbol("no.such.Symbol");
  v1::ServerReflectionResponse response = service.Answer(request);
  EXPECT_EQ(response.error_response().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(response.error_response().error_message(), HasSubstr("no.such.Symbol"));
  request.set_all_extension_numbers_of_type("no.such.Type");
  EXPECT_EQ(service.Answer(request).error_response().error_code(), grpc::StatusCode::NOT_FOUND);
  request.mutable_file_containing_extension()->set_containing_type("baton.v1.GenerateRequest");
  request.mutable_file_containing_extension()->set_extension_number(1000);
  EXPECT_EQ(service.Answer(request).error_response().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(service.Answer(v1::ServerReflectionRequest()).error_response().error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(ReflectionV1ServiceTest, ExtensionNumbersOfAMessageWithoutExtensions) {
  ReflectionV1Service service({});
  v1::ServerReflectionRequest request;
  request.set_all_extension_numbers_of_type("baton.v1.GenerateRequest");
  const v1::ServerReflectionResponse response = service.Answer(request);
  EXPECT_EQ(response.all_extension_numbers_response().base_type_name(), "baton.v1.GenerateRequest");
  EXPECT_EQ(response.all_extension_numbers_response().extension_number_size(), 0);
}

}  // namespace
}  // namespace baton::rpc
