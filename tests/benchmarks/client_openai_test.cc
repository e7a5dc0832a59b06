// OpenAiClient against a small OpenAI-style server on loopback (cpp-httplib) that streams
// completions as the OpenAI spec describes: one SSE chunk per token, a usage chunk, "[DONE]".
#include "benchmarks/bench/client_openai.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/testing/status_matchers.h"

namespace baton::bench {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

class FakeOpenAiServer {
 public:
  FakeOpenAiServer() {
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"tiny","max_model_len":2048}]})",
                      "application/json");
    });
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      const nlohmann::json body = nlohmann::json::parse(req.body);
      last_body_ = body;
      if (body["max_tokens"].get<int>() > 1000) {
        res.status = 400;
        res.set_content(R"({"error":{"message":"max_tokens too large"}})", "application/json");
        return;
      }
      const int num_tokens = body["max_tokens"];
      const int gap_ms = body["prompt"].is_string() ? 200 : 10;  // text prompts: slow, for cancel
      res.set_chunked_content_provider(
          "text/event-stream", [num_tokens, gap_ms](size_t, httplib::DataSink& sink) {
            for (int i = 0; i < num_tokens; ++i) {
              std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
              const nlohmann::json chunk = {
                  {"choices",
                   {{{"index", 0},
                     {"text", " t" + std::to_string(i)},
                     {"finish_reason",
                      i + 1 == num_tokens ? nlohmann::json("length") : nlohmann::json(nullptr)}}}}};
              const std::string event = "data: " + chunk.dump() + "\n\n";
              if (!sink.write(event.data(), event.size())) return false;
            }
            const std::string tail =
                "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":" +
                std::to_string(num_tokens) + "}}\n\ndata: [DONE]\n\n";
            sink.write(tail.data(), tail.size());
            sink.done();
            return true;
          });
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // The socket is bound already (connections queue); wait for the loop so that stop() finds it.
    for (int i = 0; i < 500 && !server_.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~FakeOpenAiServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const nlohmann::json& last_body() const { return last_body_; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  nlohmann::json last_body_;
};

TEST(OpenAiClientTest, StreamsTokensWithTimestampsAndUsage) {
  FakeOpenAiServer server;
  absl::StatusOr<std::unique_ptr<OpenAiClient>> client =
      OpenAiClient::Create(server.url() + "/v1", {});
  ASSERT_THAT(client, IsOk());
  absl::StatusOr<ModelInfo> info = (*client)->GetModelInfo();
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->model, "tiny");
  EXPECT_EQ(info->max_model_len, 2048);

  GenerationTrace trace;
  const Clock::time_point start = Clock::now();
  Cancellation cancel;
  ASSERT_THAT((*client)->Generate({.prompt_ids = {1, 5, 9}, .max_tokens = 6}, &cancel, &trace),
              IsOk());
  EXPECT_EQ(server.last_body()["model"], "tiny");  // learned from /v1/models
  EXPECT_EQ(server.last_body()["prompt"], nlohmann::json({1, 5, 9}));
  EXPECT_EQ(server.last_body()["ignore_eos"], true);
  ASSERT_EQ(trace.token_times.size(), 6u);
  EXPECT_EQ(trace.num_output_tokens, 6);
  EXPECT_EQ(trace.num_prompt_tokens, 3);
  EXPECT_EQ(trace.finish_reason, "length");
  EXPECT_FALSE(trace.server.has_value());
  EXPECT_GE(trace.token_times.front(), start);
  for (size_t i = 1; i < trace.token_times.size(); ++i) {
    EXPECT_GE(trace.token_times[i], trace.token_times[i - 1]);
  }
  // The server sleeps 10 ms before each token.
  EXPECT_GE(trace.token_times.back() - trace.token_times.front(), std::chrono::milliseconds(40));
}

TEST(OpenAiClientTest, HttpErrorsAndUnreachableServers) {
  FakeOpenAiServer server;
  auto client = *OpenAiClient::Create(server.url(), {.model = "tiny"});
  GenerationTrace trace;
  EXPECT_THAT(client->Generate({.prompt_ids = {1}, .max_tokens = 5000}, nullptr, &trace),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_tokens too large")));

  // A port that was free a moment ago: bound, never listened on, closed.
  int free_port = 0;
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    free_port = ntohs(addr.sin_port);
    ::close(fd);
  }
  auto unreachable = *OpenAiClient::Create("http://127.0.0.1:" + std::to_string(free_port), {});
  EXPECT_THAT(
      unreachable->Generate({.prompt_ids = {1}, .max_tokens = 2, .timeout = absl::Seconds(10)},
                            nullptr, &trace),
      StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(unreachable->GetModelInfo(), StatusIs(absl::StatusCode::kUnavailable));
}

TEST(OpenAiClientTest, CancelEndsAStreamEarly) {
  FakeOpenAiServer server;
  auto client = *OpenAiClient::Create(server.url(), {.model = "tiny"});
  Cancellation cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    cancel.Cancel();
  });
  GenerationTrace trace;
  const Clock::time_point start = Clock::now();
  // A text prompt makes the fake server slow: 200 ms per token, 50 tokens.
  const absl::Status status =
      client->Generate({.prompt_text = "hello", .max_tokens = 50}, &cancel, &trace);
  canceller.join();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  EXPECT_LT(trace.token_times.size(), 10u);
}

}  // namespace
}  // namespace baton::bench
