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
#include "scheduler/service/openai_respond.h"
#include "scheduler/service/openai_tokenize.h"

namespace baton::scheduler {
namespace {

using nlohmann::json;

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

// One entry of /v1/models: the model under one of its names.
json ModelCard(const ServedModel& model, const std::string& name) {
  return {{"id", name},
          {"object", "model"},
          {"created", UnixSeconds()},
          {"owned_by", "baton"},
          {"root", model.name},
          {"max_model_len", model.max_model_len}};
}

std::string Dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

// Prepares `request` as `count` candidates (n, best_of): each with a seed of its own (the client's
// seed + i, or the arrival time's + i), so that the choices differ and a seeded request repeats; with
// `rank_by_logprob`, each asks for its sampled tokens' logprobs, by which the best are chosen.
absl::Status PrepareCandidates(RequestDriver* driver, const GenerateRequest& request, int count,
                               bool rank_by_logprob, std::vector<PreparedRequest>* out) {
  const uint64_t base_seed =
      request.seed_given ? request.params.seed : static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));
  for (int i = 0; i < count; ++i) {
    GenerateRequest candidate = request;
    if (count > 1) {
      candidate.params.seed = base_seed + static_cast<uint64_t>(i);
      candidate.seed_given = true;
    }
    if (rank_by_logprob && !candidate.params.num_logprobs) candidate.params.num_logprobs = 0;
    absl::StatusOr<PreparedRequest> prepared = driver->Prepare(std::move(candidate));
    if (!prepared.ok()) return prepared.status();
    out->push_back(*std::move(prepared));
  }
  return absl::OkStatus();
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
    json cards = json::array();
    cards.push_back(ModelCard(model, model.name));
    for (const std::string& alias : model.aliases) cards.push_back(ModelCard(model, alias));
    res.set_content(json{{"object", "list"}, {"data", std::move(cards)}}
                        .dump(-1, ' ', false, json::error_handler_t::replace),
                    "application/json");
  });
  http.Get(R"(/v1/models/(.+))", [driver](const httplib::Request& req, httplib::Response& res) {
    const ServedModel& model = driver->model();
    const std::string id = req.matches[1];
    if (!model.IsNamed(id)) {
      return SendError(res, absl::NotFoundError(absl::StrCat("The model `", id, "` does not exist.")));
    }
    res.set_content(ModelCard(model, id).dump(-1, ' ', false, json::error_handler_t::replace),
                    "application/json");
  });
  http.Post("/v1/completions", [driver, stubs](const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) return SendError(res, absl::InvalidArgumentError("the body is not valid JSON"));
    AnswerShape shape;
    absl::StatusOr<std::vector<GenerateRequest>> requests = CompletionToRequests(body, &shape);
    if (!requests.ok()) return SendError(res, requests.status());
    const bool want_logprobs = requests->front().params.num_logprobs.has_value();
    AnswerPlan plan{.best_of = shape.best_of, .n = shape.n};
    std::vector<CompletionEcho> echoes;  // per prompt
    for (const GenerateRequest& request : *requests) {
      const size_t first = plan.requests.size();
      if (absl::Status s = PrepareCandidates(driver, request, shape.best_of, shape.best_of > shape.n,
                                             &plan.requests);
          !s.ok()) {
        return SendError(res, s);
      }
      if (shape.echo) {
        const std::vector<int32_t>& prompt = plan.requests[first].prompt;
        echoes.push_back(CompletionEcho{
            .text = request.prompt_text ? *request.prompt_text
                                        : driver->model().tokenizer->Decode(prompt, false),
            .prompt_ids = prompt,
            .only = shape.echo_only});
      }
    }
    const runtime::Tokenizer* tokenizer = driver->model().tokenizer.get();
    plan.make_choices = [tokenizer, want_logprobs, echoes = std::move(echoes), best_of = shape.best_of](size_t r) {
      return MakeCompletionAnswer(*tokenizer, want_logprobs,
                                  echoes.empty() ? std::nullopt : std::optional<CompletionEcho>(echoes[r / best_of]));
    };
    Respond(driver, stubs, req, res, std::move(plan), shape,
            {.id_prefix = "cmpl-", .object = "text_completion", .chunk_object = "text_completion"});
  });
  http.Post("/v1/chat/completions", [driver, stubs](const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) return SendError(res, absl::InvalidArgumentError("the body is not valid JSON"));
    // Parsed again keeping key order: the chat template prints the client's tools as they came.
    const nlohmann::ordered_json ordered_body = nlohmann::ordered_json::parse(req.body, nullptr, false);
    AnswerShape shape;
    absl::StatusOr<GenerateRequest> request = ChatToRequest(body, ordered_body, &shape);
    if (!request.ok()) return SendError(res, request.status());
    AnswerPlan plan{.best_of = shape.n, .n = shape.n};
    if (absl::Status s = PrepareCandidates(driver, *request, shape.n, false, &plan.requests); !s.ok()) {
      return SendError(res, s);
    }
    const runtime::Tokenizer* tokenizer = driver->model().tokenizer.get();
    plan.make_choices = [tokenizer, num_top_logprobs = request->params.num_logprobs](size_t) {
      return MakeChatAnswer(*tokenizer, num_top_logprobs);
    };
    Respond(driver, stubs, req, res, std::move(plan), shape,
            {.id_prefix = "chatcmpl-",
             .object = "chat.completion",
             .chunk_object = "chat.completion.chunk",
             .prompt_logprobs_per_choice = false});
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
