// GrpcClient against an in-process InferenceService that streams the way Baton's scheduler does:
// timing fields ride on the response after the event, tokens may come several per response.
#include "benchmarks/bench/client_grpc.h"

#include <chrono>
#include <memory>
#include <thread>

#include "baton/v1/inference.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::bench {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class FakeInferenceService final : public v1::InferenceService::Service {
 public:
  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    last_request_ = *request;
    if (request->stop().max_tokens() == 7) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "prompt length 9 + max_tokens 7");
    }
    if (request->stop().max_tokens() >= 100) {  // slow: one token, then wait for cancellation
      v1::GenerateResponse first;
      first.add_token_ids(5);
      writer->Write(first);
      for (int i = 0; i < 500 && !context->IsCancelled(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled");
    }
    v1::GenerateResponse first;  // the first token, with arrival and prefill times
    first.add_token_ids(5);
    first.mutable_timing()->set_arrival_us(1000);
    first.mutable_timing()->set_prefill_start_us(1100);
    first.mutable_timing()->set_prefill_end_us(1500);
    first.mutable_timing()->add_token_emit_us(1500);
    writer->Write(first);
    v1::GenerateResponse second;  // two tokens, and the KV transfer that happened before them
    second.add_token_ids(6);
    second.add_token_ids(7);
    second.mutable_timing()->set_kv_transfer_start_us(1600);
    second.mutable_timing()->set_kv_transfer_end_us(1700);
    second.mutable_timing()->add_token_emit_us(1800);
    second.mutable_timing()->add_token_emit_us(1850);
    writer->Write(second);
    v1::GenerateResponse last;
    last.add_token_ids(8);
    last.mutable_timing()->add_token_emit_us(1900);
    last.set_finish_reason(v1::FINISH_REASON_LENGTH);
    last.set_num_prompt_tokens(3);
    last.set_num_generated_tokens(4);
    writer->Write(last);
    return grpc::Status::OK;
  }

  grpc::Status GetModelInfo(grpc::ServerContext*, const v1::GetModelInfoRequest*,
                            v1::GetModelInfoResponse* response) override {
    response->set_model("fake");
    response->set_max_model_len(512);
    return grpc::Status::OK;
  }

  const v1::GenerateRequest& last_request() const { return last_request_; }

 private:
  v1::GenerateRequest last_request_;
};

class GrpcClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    absl::StatusOr<std::unique_ptr<GrpcClient>> client =
        GrpcClient::Create("127.0.0.1:" + std::to_string(port_), {.num_channels = 2});
    ASSERT_THAT(client, IsOk());
    client_ = *std::move(client);
  }
  void TearDown() override { server_->Shutdown(); }

  FakeInferenceService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<GrpcClient> client_;
};

TEST_F(GrpcClientTest, TimestampsEveryTokenAndMergesServerTiming) {
  GenerationTrace trace;
  Cancellation cancel;
  ASSERT_THAT(client_->Generate({.request_id = "r1", .prompt_ids = {1, 2, 3}, .max_tokens = 4},
                                &cancel, &trace),
              IsOk());
  const v1::GenerateRequest& sent = service_.last_request();
  EXPECT_EQ(sent.request_id(), "r1");
  EXPECT_THAT(sent.token_ids().ids(), ElementsAre(1, 2, 3));
  EXPECT_EQ(sent.stop().max_tokens(), 4);
  EXPECT_TRUE(sent.stop().ignore_eos());
  ASSERT_EQ(trace.token_times.size(), 4u);
  EXPECT_EQ(trace.token_times[1], trace.token_times[2]);  // one response, one time
  EXPECT_EQ(trace.num_output_tokens, 4);
  EXPECT_EQ(trace.num_prompt_tokens, 3);
  EXPECT_EQ(trace.finish_reason, "length");
  ASSERT_TRUE(trace.server.has_value());
  EXPECT_EQ(trace.server->arrival_us, 1000);
  EXPECT_EQ(trace.server->prefill_start_us, 1100);
  EXPECT_EQ(trace.server->prefill_end_us, 1500);
  EXPECT_EQ(trace.server->kv_transfer_start_us, 1600);
  EXPECT_EQ(trace.server->kv_transfer_end_us, 1700);
  EXPECT_THAT(trace.server->token_emit_us, ElementsAre(1500, 1800, 1850, 1900));
}

TEST_F(GrpcClientTest, TextPromptsAndModelInfo) {
  GenerationTrace trace;
  ASSERT_THAT(client_->Generate({.prompt_text = "Hello", .max_tokens = 4}, nullptr, &trace),
              IsOk());
  EXPECT_EQ(service_.last_request().text(), "Hello");
  absl::StatusOr<ModelInfo> info = client_->GetModelInfo();
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->model, "fake");
  EXPECT_EQ(info->max_model_len, 512);
}

TEST_F(GrpcClientTest, ServerErrorsKeepTheirCode) {
  GenerationTrace trace;
  EXPECT_THAT(client_->Generate({.prompt_ids = {1}, .max_tokens = 7}, nullptr, &trace),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_tokens 7")));
}

TEST_F(GrpcClientTest, CancelEndsTheCall) {
  Cancellation cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel.Cancel();
  });
  GenerationTrace trace;
  const Clock::time_point start = Clock::now();
  const absl::Status status =
      client_->Generate({.prompt_ids = {1}, .max_tokens = 100}, &cancel, &trace);
  canceller.join();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(trace.token_times.size(), 1u);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

TEST(GrpcClientCreateTest, RejectsBadArguments) {
  EXPECT_THAT(GrpcClient::Create(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(GrpcClient::Create("h:1", {.num_channels = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(CancellationTest, CancelBeforeTheHookRunsItOnRegistration) {
  Cancellation cancel;
  cancel.Cancel();
  bool ran = false;
  cancel.SetHook([&] { ran = true; });
  EXPECT_TRUE(ran);
  EXPECT_TRUE(cancel.cancelled());
}

}  // namespace
}  // namespace baton::bench
