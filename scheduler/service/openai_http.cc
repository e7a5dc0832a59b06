#include "scheduler/service/openai_http.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "scheduler/service/openai_completion.h"

namespace baton::scheduler {
namespace {

using nlohmann::json;

void SendError(httplib::Response& res, const absl::Status& status) {
  const int http = HttpStatusOf(status.code());
  json body = {{"error",
                {{"message", std::string(status.message())},
                 {"type", http == 400   ? "invalid_request_error"
                          : http == 429 ? "rate_limit_error"
                                        : "server_error"},
                 {"param", nullptr},
                 {"code", http}}}};
  res.status = http;
  res.set_content(body.dump(), "application/json");
}

int64_t UnixSeconds() { return absl::ToUnixSeconds(absl::Now()); }

}  // namespace

OpenAiHttpServer::OpenAiHttpServer(RequestDriver* driver)
    : driver_(driver), server_(std::make_unique<httplib::Server>()) {}

OpenAiHttpServer::~OpenAiHttpServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<std::unique_ptr<OpenAiHttpServer>> OpenAiHttpServer::Start(RequestDriver* driver,
                                                                          WorkerStubs* stubs,
                                                                          const std::string& host,
                                                                          int port) {
  auto server = std::unique_ptr<OpenAiHttpServer>(new OpenAiHttpServer(driver));
  httplib::Server& http = *server->server_;
  // Requests stream for as long as they generate.
  http.new_task_queue = [] { return new httplib::ThreadPool(64); };
  http.set_write_timeout(600, 0);

  http.Get("/health", [driver](const httplib::Request&, httplib::Response& res) {
    const WorkerRegistry::Health health = driver->registry().CheckHealth();
    res.status = health.all_phases_served ? 200 : 503;
    res.set_content(json({{"problems", health.problems}}).dump(), "application/json");
  });
  http.Get("/v1/models", [driver](const httplib::Request&, httplib::Response& res) {
    const ServedModel& model = driver->model();
    json data = {{"object", "list"},
                 {"data",
                  {{{"id", model.name},
                    {"object", "model"},
                    {"created", UnixSeconds()},
                    {"owned_by", "baton"},
                    {"max_model_len", model.max_model_len}}}}};
    res.set_content(data.dump(), "application/json");
  });
  http.Post("/v1/completions", [driver, stubs](const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) return SendError(res, absl::InvalidArgumentError("the body is not valid JSON"));
    CompletionStreaming streaming;
    absl::StatusOr<GenerateRequest> request = CompletionToRequest(body, &streaming);
    if (!request.ok()) return SendError(res, request.status());
    absl::StatusOr<PreparedRequest> prepared = driver->Prepare(*std::move(request));
    if (!prepared.ok()) return SendError(res, prepared.status());
    const std::string id = absl::StrCat("cmpl-", prepared->request.request_id);
    const std::string model = driver->model().name;
    const int64_t created = UnixSeconds();
    const int num_prompt_tokens = static_cast<int>(prepared->prompt.size());
    const bool want_logprobs = prepared->request.params.num_logprobs > 0;
    auto chunk_json = [=](const GenerateChunk& chunk) {
      const char* finish = FinishReasonName(chunk.finish_reason);
      return json{{"id", id},
                  {"object", "text_completion"},
                  {"created", created},
                  {"model", model},
                  {"choices",
                   {{{"index", 0},
                     {"text", chunk.text},
                     {"logprobs", want_logprobs ? LogprobsJson(chunk, *driver->model().tokenizer) : json(nullptr)},
                     {"finish_reason", finish ? json(finish) : json(nullptr)}}}}};
    };
    if (!streaming.stream) {
      std::string text;
      GenerateChunk last;
      int num_generated = 0;
      json logprobs = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}};
      // No parent call to tie the worker calls to: the HTTP client's departure is not observable
      // before the answer is written.
      GrpcWorkerClient workers(stubs);
      const absl::Status status = driver->Execute(
          *std::move(prepared),
          RequestIo{.workers = &workers,
                    .write = [&](const GenerateChunk& chunk) {
                      text += chunk.text;
                      num_generated += static_cast<int>(chunk.token_ids.size());
                      if (want_logprobs) {
                        json part = LogprobsJson(chunk, *driver->model().tokenizer);
                        for (const char* key : {"tokens", "token_logprobs", "top_logprobs"}) {
                          for (auto& v : part[key]) logprobs[key].push_back(v);
                        }
                      }
                      last = chunk;
                      return true;
                    }});
      if (!status.ok()) return SendError(res, status);
      last.text = text;
      json out = chunk_json(last);
      if (want_logprobs) out["choices"][0]["logprobs"] = logprobs;
      out["usage"] = {{"prompt_tokens", num_prompt_tokens},
                      {"completion_tokens", num_generated},
                      {"total_tokens", num_prompt_tokens + num_generated}};
      res.set_content(out.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
      return;
    }

    const bool include_usage = streaming.include_usage;
    auto shared = std::make_shared<PreparedRequest>(*std::move(prepared));
    res.set_chunked_content_provider(
        "text/event-stream",
        [=](size_t, httplib::DataSink& sink) {
          bool client_gone = false;
          int num_generated = 0;
          auto send = [&](const json& event) {
            const std::string line =
                absl::StrCat("data: ", event.dump(-1, ' ', false, json::error_handler_t::replace), "\n\n");
            if (!client_gone && !sink.write(line.data(), line.size())) client_gone = true;
            return !client_gone;
          };
          GrpcWorkerClient workers(stubs);
          const absl::Status status = driver->Execute(
              std::move(*shared),
              RequestIo{.workers = &workers,
                        .write = [&](const GenerateChunk& chunk) {
                          num_generated += static_cast<int>(chunk.token_ids.size());
                          return send(chunk_json(chunk));
                        },
                        .is_cancelled = [&] { return client_gone; }});
          if (!status.ok() && !client_gone) {
            send(json{{"error", {{"message", std::string(status.message())}, {"code", HttpStatusOf(status.code())}}}});
          }
          if (include_usage && !client_gone) {
            send(json{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
                      {"choices", json::array()},
                      {"usage", {{"prompt_tokens", num_prompt_tokens},
                                 {"completion_tokens", num_generated},
                                 {"total_tokens", num_prompt_tokens + num_generated}}}});
          }
          if (!client_gone) {
            static constexpr char kDone[] = "data: [DONE]\n\n";
            sink.write(kDone, sizeof(kDone) - 1);
          }
          sink.done();
          return true;
        });
  });

  server->port_ = port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, port) ? port : -1);
  if (server->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("OpenAI HTTP: cannot listen on ", host, ":", port));
  }
  server->thread_ = std::thread([&http] { http.listen_after_bind(); });
  return server;
}

}  // namespace baton::scheduler
