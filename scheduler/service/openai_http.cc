#include "scheduler/service/openai_http.h"

#include <sys/socket.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "kernels/common/status_macros.h"
#include "runtime/rpc/grpc_listener.h"
#include "scheduler/service/api_key.h"
#include "scheduler/service/http_peer.h"
#include "scheduler/service/http_task_queue.h"
#include "scheduler/service/openai_answer.h"
#include "scheduler/service/openai_chat.h"
#include "scheduler/service/openai_completion.h"
#include "scheduler/service/openai_tokenize.h"

namespace baton::scheduler {
namespace {

using nlohmann::json;

void SendHttpError(httplib::Response& res, int http, std::string_view message) {
  json body = {{"error",
                {{"message", message},
                 {"type", http == 401   ? "authentication_error"
                          : http < 500 && http != 429 ? "invalid_request_error"
                          : http == 429 ? "rate_limit_error"
                                        : "server_error"},
                 {"param", nullptr},
                 {"code", http}}}};
  res.status = http;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void SendError(httplib::Response& res, const absl::Status& status) {
  SendHttpError(res, HttpStatusOf(status.code()), std::string(status.message()));
}

// The body of an error httplib answers on its own (no route, a body over the limit, a bad request
// line), which would otherwise be empty.
std::string DefaultErrorMessage(int http, const httplib::Request& req, uint64_t max_body_bytes) {
  switch (http) {
    case 400: return "the request is not valid HTTP";
    case 404: return absl::StrCat("no route for ", req.method, " ", req.path);
    case 405: return absl::StrCat(req.method, " is not allowed on ", req.path);
    case 413: return absl::StrCat("the request body is larger than the limit of ", max_body_bytes, " bytes");
    case 414: return "the request URI is too long";
    default: return absl::StrCat("HTTP ", http);
  }
}

int64_t UnixSeconds() { return absl::ToUnixSeconds(absl::Now()); }

struct AnswerNames {
  const char* id_prefix;     // "cmpl-", "chatcmpl-"
  const char* object;        // of the one body
  const char* chunk_object;  // of each streamed event
};

std::string Dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

// Runs `prepared` and answers it: one JSON body, or Server-Sent Events ending with [DONE] (and a
// usage event first with include_usage). A client that leaves cancels the request.
void Answer(RequestDriver* driver, WorkerStubs* stubs, const httplib::Request& req, httplib::Response& res,
            PreparedRequest prepared, CompletionStreaming streaming, AnswerNames names,
            std::shared_ptr<AnswerChoices> choices) {
  const std::string id = absl::StrCat(names.id_prefix, prepared.request.request_id);
  const std::string model = driver->model().name;
  const int64_t created = UnixSeconds();
  const int num_prompt_tokens = static_cast<int>(prepared.prompt.size());
  auto usage = [num_prompt_tokens](int num_generated) {
    return json{{"prompt_tokens", num_prompt_tokens},
                {"completion_tokens", num_generated},
                {"total_tokens", num_prompt_tokens + num_generated}};
  };
  auto envelope = [=](const char* object, json choices_array) {
    return json{{"id", id}, {"object", object}, {"created", created}, {"model", model},
                {"choices", std::move(choices_array)}};
  };
  if (!streaming.stream) {
    runtime::FinishReason finish = runtime::FinishReason::kNone;
    int num_generated = 0;
    // A client that leaves cancels the request at its next chunk (or phase), as a streaming one
    // does when a write fails.
    const HttpPeer peer = HttpPeer::Find(req.remote_addr, req.remote_port, req.local_port);
    GrpcWorkerClient workers(stubs);
    const absl::Status status = driver->Execute(
        std::move(prepared), RequestIo{.workers = &workers,
                                       .write = [&](const GenerateChunk& chunk) {
                                         num_generated += static_cast<int>(chunk.token_ids.size());
                                         choices->Add(chunk);
                                         finish = chunk.finish_reason;
                                         return !peer.Gone();
                                       },
                                       .is_cancelled = [&peer] { return peer.Gone(); }});
    if (!status.ok()) return SendError(res, status);
    json out = envelope(names.object, json::array({choices->BodyChoice(finish)}));
    out["usage"] = usage(num_generated);
    res.set_content(Dump(out), "application/json");
    return;
  }
  auto shared = std::make_shared<PreparedRequest>(std::move(prepared));
  const bool include_usage = streaming.include_usage;
  res.set_chunked_content_provider(
      "text/event-stream", [=](size_t, httplib::DataSink& sink) {
        bool client_gone = false;
        int num_generated = 0;
        auto send = [&](const json& event) {
          const std::string line = absl::StrCat("data: ", Dump(event), "\n\n");
          if (!client_gone && !sink.write(line.data(), line.size())) client_gone = true;
          return !client_gone;
        };
        GrpcWorkerClient workers(stubs);
        const absl::Status status = driver->Execute(
            std::move(*shared),
            RequestIo{.workers = &workers,
                      .write = [&](const GenerateChunk& chunk) {
                        num_generated += static_cast<int>(chunk.token_ids.size());
                        json event = envelope(names.chunk_object, json::array({choices->StreamChoice(chunk)}));
                        // OpenAI: with include_usage, every chunk but the last carries "usage": null.
                        if (include_usage) event["usage"] = nullptr;
                        return send(event);
                      },
                      .is_cancelled = [&] { return client_gone; }});
        if (!status.ok() && !client_gone) {
          send(json{{"error", {{"message", std::string(status.message())}, {"code", HttpStatusOf(status.code())}}}});
        }
        if (include_usage && !client_gone) {
          json event = envelope(names.chunk_object, json::array());
          event["usage"] = usage(num_generated);
          send(event);
        }
        if (!client_gone) {
          static constexpr char kDone[] = "data: [DONE]\n\n";
          sink.write(kDone, sizeof(kDone) - 1);
        }
        sink.done();
        return true;
      });
}

}  // namespace

OpenAiHttpServer::OpenAiHttpServer(RequestDriver* driver, std::unique_ptr<httplib::Server> server)
    : driver_(driver), server_(std::move(server)) {}

OpenAiHttpServer::~OpenAiHttpServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<std::unique_ptr<OpenAiHttpServer>> OpenAiHttpServer::Start(
    RequestDriver* driver, WorkerStubs* stubs, const HttpServerOptions& options) {
  std::unique_ptr<httplib::Server> transport;
  if (options.tls_cert.empty()) {
    transport = std::make_unique<httplib::Server>();
  } else {
    for (const std::filesystem::path& file : {options.tls_cert, options.tls_key}) {
      RETURN_IF_ERROR(rpc::ReadPemFile(file).status());
    }
    transport = std::make_unique<httplib::SSLServer>(options.tls_cert.c_str(), options.tls_key.c_str());
    if (!transport->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat("OpenAI HTTP: cannot use the TLS certificate ",
                                                     options.tls_cert.string(), " with the key ",
                                                     options.tls_key.string()));
    }
  }
  auto server = std::unique_ptr<OpenAiHttpServer>(new OpenAiHttpServer(driver, std::move(transport)));
  httplib::Server& http = *server->server_;
  // A thread per connection, for as long as a request streams, and never a fixed few that slow
  // clients can hold.
  const size_t max_threads = options.max_connection_threads;
  http.new_task_queue = [max_threads] { return new ConnectionThreads(max_threads); };
  // httplib sets SO_REUSEPORT by default, which let a second deployment on the same port take
  // half the traffic; SO_REUSEADDR alone still allows a restart while old connections linger.
  http.set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http.set_read_timeout(10, 0);
  http.set_write_timeout(600, 0);
  http.set_payload_max_length(options.max_body_bytes);
  const uint64_t max_body_bytes = options.max_body_bytes;
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [max_body_bytes](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        SendHttpError(res, res.status, DefaultErrorMessage(res.status, req, max_body_bytes));
        return httplib::Server::HandlerResponse::Handled;
      }));
  // No exception text leaves the process: it names internals, not what the client did wrong.
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    SendHttpError(res, 500, "internal error");
  });
  if (!options.api_key.empty()) {
    http.set_pre_routing_handler([key = options.api_key](const httplib::Request& req, httplib::Response& res) {
      if (req.path == "/health" || PresentsApiKey(req.get_header_value("Authorization"), key)) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      res.set_header("WWW-Authenticate", "Bearer");
      SendHttpError(res, 401, "missing or wrong API key: send \"Authorization: Bearer <key>\"");
      return httplib::Server::HandlerResponse::Handled;
    });
  }

  http.Get("/health", [driver](const httplib::Request&, httplib::Response& res) {
    const WorkerRegistry::Health health = driver->CheckHealth();
    res.status = health.all_phases_served ? 200 : 503;
    res.set_content(json({{"problems", health.problems}}).dump(), "application/json");
  });
  if (const ServingMetrics* metrics = options.metrics; metrics != nullptr) {
    http.Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics->Scrape(), kPrometheusContentType);
    });
  }
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
  http.Get(R"(/v1/models/(.+))", [driver](const httplib::Request& req, httplib::Response& res) {
    const ServedModel& model = driver->model();
    const std::string id = req.matches[1];
    if (id != model.name) {
      return SendError(res, absl::NotFoundError(absl::StrCat("The model `", id, "` does not exist.")));
    }
    res.set_content(json{{"id", model.name}, {"object", "model"}, {"created", UnixSeconds()},
                         {"owned_by", "baton"}, {"max_model_len", model.max_model_len}}
                        .dump(-1, ' ', false, json::error_handler_t::replace),
                    "application/json");
  });
  http.Post("/v1/completions", [driver, stubs](const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) return SendError(res, absl::InvalidArgumentError("the body is not valid JSON"));
    CompletionStreaming streaming;
    absl::StatusOr<GenerateRequest> request = CompletionToRequest(body, &streaming);
    if (!request.ok()) return SendError(res, request.status());
    absl::StatusOr<PreparedRequest> prepared = driver->Prepare(*std::move(request));
    if (!prepared.ok()) return SendError(res, prepared.status());
    const bool want_logprobs = prepared->request.params.num_logprobs.has_value();
    Answer(driver, stubs, req, res, *std::move(prepared), streaming,
           {.id_prefix = "cmpl-", .object = "text_completion", .chunk_object = "text_completion"},
           std::shared_ptr<AnswerChoices>(MakeCompletionAnswer(*driver->model().tokenizer, want_logprobs)));
  });
  http.Post("/v1/chat/completions", [driver, stubs](const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) return SendError(res, absl::InvalidArgumentError("the body is not valid JSON"));
    // Parsed again keeping key order: the chat template prints the client's tools as they came.
    const nlohmann::ordered_json ordered_body = nlohmann::ordered_json::parse(req.body, nullptr, false);
    CompletionStreaming streaming;
    absl::StatusOr<GenerateRequest> request =
        ChatToRequest(body, ordered_body, &streaming);
    if (!request.ok()) return SendError(res, request.status());
    absl::StatusOr<PreparedRequest> prepared = driver->Prepare(*std::move(request));
    if (!prepared.ok()) return SendError(res, prepared.status());
    const std::optional<int> num_top_logprobs = prepared->request.params.num_logprobs;
    Answer(driver, stubs, req, res, *std::move(prepared), streaming,
           {.id_prefix = "chatcmpl-", .object = "chat.completion", .chunk_object = "chat.completion.chunk"},
           std::shared_ptr<AnswerChoices>(MakeChatAnswer(*driver->model().tokenizer, num_top_logprobs)));
  });
  http.Post("/tokenize", [driver](const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) return SendError(res, absl::InvalidArgumentError("the body is not valid JSON"));
    const nlohmann::ordered_json ordered_body = nlohmann::ordered_json::parse(req.body, nullptr, false);
    absl::StatusOr<json> answer = Tokenize(body, ordered_body, driver->model());
    if (!answer.ok()) return SendError(res, answer.status());
    res.set_content(Dump(*answer), "application/json");
  });
  http.Post("/detokenize", [driver](const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) return SendError(res, absl::InvalidArgumentError("the body is not valid JSON"));
    absl::StatusOr<json> answer = Detokenize(body, driver->model());
    if (!answer.ok()) return SendError(res, answer.status());
    res.set_content(Dump(*answer), "application/json");
  });

  const std::string& host = options.host;
  const int port = options.port;
  server->port_ = port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, port) ? port : -1);
  if (server->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("OpenAI HTTP: cannot listen on ", host, ":", port, " (is the port in use?)"));
  }
  server->thread_ = std::thread([&http] { http.listen_after_bind(); });
  return server;
}

}  // namespace baton::scheduler
