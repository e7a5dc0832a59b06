#include "scheduler/service/openai_http.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "kernels/common/status_macros.h"
#include "runtime/rpc/grpc_listener.h"
#include "scheduler/service/api_key.h"
#include "scheduler/service/openai_answer.h"
#include "scheduler/service/openai_chat.h"
#include "scheduler/service/openai_completion.h"
#include "scheduler/service/openai_respond.h"
#include "scheduler/service/openai_tokenize.h"

namespace baton::scheduler {
namespace {

using nlohmann::json;

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

absl::StatusOr<std::unique_ptr<OpenAiHttpServer>> OpenAiHttpServer::Start(
    RequestDriver* driver, WorkerStubs* stubs, const HttpServerOptions& options) {
  RETURN_IF_ERROR(ValidateChatReplyOptions(options.chat_reply));
  if (!options.tls_cert.empty()) {
    for (const std::filesystem::path& file : {options.tls_cert, options.tls_key}) {
      RETURN_IF_ERROR(rpc::ReadPemFile(file).status());
    }
  }
  HttpRoutes http;
  http.error = [](int status, std::string_view message, HttpResponse& res) { SendHttpError(res, status, message); };
  if (!options.api_key.empty()) {
    http.before_routing = [key = options.api_key](const HttpRequest& req, HttpResponse& res) {
      // Health probes and the version are open, as vLLM leaves them.
      if (req.path == "/health" || req.path == "/ping" || req.path == "/version" ||
          PresentsApiKey(std::string(req.Header("Authorization")), key)) {
        return false;
      }
      res.headers.emplace_back("WWW-Authenticate", "Bearer");
      SendHttpError(res, 401, "missing or wrong API key: send \"Authorization: Bearer <key>\"");
      return true;
    };
  }

  auto health = [driver](const HttpRequest&, HttpResponse& res) {
    const WorkerRegistry::Health health = driver->CheckHealth();
    res.status = health.all_phases_served ? 200 : 503;
    res.SetContent(json({{"problems", health.problems}}).dump(), "application/json");
  };
  http.Add("GET", "/health", health);
  http.Add("GET", "/ping", health);  // vLLM's (SageMaker's) name for the same probe
  http.Add("POST", "/ping", health);
  http.Add("GET", "/version", [](const HttpRequest&, HttpResponse& res) {
    res.SetContent(json({{"version", BATON_VERSION}}).dump(), "application/json");
  });
  if (const ServingMetrics* metrics = options.metrics; metrics != nullptr) {
    http.Add("GET", "/metrics", [metrics](const HttpRequest&, HttpResponse& res) {
      res.SetContent(metrics->Scrape(), kPrometheusContentType);
    });
  }
  http.Add("GET", "/v1/models", [driver](const HttpRequest&, HttpResponse& res) {
    const ServedModel& model = driver->model();
    json cards = json::array();
    cards.push_back(ModelCard(model, model.name));
    for (const std::string& alias : model.aliases) cards.push_back(ModelCard(model, alias));
    res.SetContent(json{{"object", "list"}, {"data", std::move(cards)}}
                       .dump(-1, ' ', false, json::error_handler_t::replace),
                   "application/json");
  });
  http.Add("GET", R"(/v1/models/(.+))", [driver](const HttpRequest& req, HttpResponse& res) {
    const ServedModel& model = driver->model();
    const std::string id = req.matches[1];
    if (!model.IsNamed(id)) {
      return SendError(res, absl::NotFoundError(absl::StrCat("The model `", id, "` does not exist.")));
    }
    res.SetContent(ModelCard(model, id).dump(-1, ' ', false, json::error_handler_t::replace),
                   "application/json");
  });
  http.Add("POST", "/v1/completions", [driver, stubs](const HttpRequest& req, HttpResponse& res) {
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) return SendError(res, absl::InvalidArgumentError("the body is not valid JSON"));
    AnswerShape shape;
    absl::StatusOr<std::vector<GenerateRequest>> requests = CompletionToRequests(body, &shape);
    if (!requests.ok()) return SendError(res, requests.status());
    for (GenerateRequest& request : *requests) {
      if (!req.Header("X-Request-Id").empty()) request.request_id = std::string(req.Header("X-Request-Id"));
    }
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
  http.Add("POST", "/v1/chat/completions", [driver, stubs, reply_options = options.chat_reply](
                                               const HttpRequest& req, HttpResponse& res) {
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) return SendError(res, absl::InvalidArgumentError("the body is not valid JSON"));
    // Parsed again keeping key order: the chat template prints the client's tools as they came.
    const nlohmann::ordered_json ordered_body = nlohmann::ordered_json::parse(req.body, nullptr, false);
    AnswerShape shape;
    ChatReplyPlan reply;
    absl::StatusOr<GenerateRequest> request = ChatToRequest(body, ordered_body, reply_options, &shape, &reply);
    if (!request.ok()) return SendError(res, request.status());
    if (!req.Header("X-Request-Id").empty()) request->request_id = std::string(req.Header("X-Request-Id"));
    AnswerPlan plan{.best_of = shape.n, .n = shape.n};
    if (absl::Status s = PrepareCandidates(driver, *request, shape.n, false, &plan.requests); !s.ok()) {
      return SendError(res, s);
    }
    const runtime::Tokenizer* tokenizer = driver->model().tokenizer.get();
    plan.make_choices = [tokenizer, num_top_logprobs = request->params.num_logprobs, reply](size_t) {
      return MakeChatAnswer(*tokenizer, num_top_logprobs, reply);
    };
    Respond(driver, stubs, req, res, std::move(plan), shape,
            {.id_prefix = "chatcmpl-",
             .object = "chat.completion",
             .chunk_object = "chat.completion.chunk",
             .prompt_logprobs_per_choice = false});
  });

  http.Add("POST", "/tokenize", [driver](const HttpRequest& req, HttpResponse& res) {
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) return SendError(res, absl::InvalidArgumentError("the body is not valid JSON"));
    const nlohmann::ordered_json ordered_body = nlohmann::ordered_json::parse(req.body, nullptr, false);
    absl::StatusOr<json> answer = Tokenize(body, ordered_body, driver->model());
    if (!answer.ok()) return SendError(res, answer.status());
    res.SetContent(Dump(*answer), "application/json");
  });
  http.Add("POST", "/detokenize", [driver](const HttpRequest& req, HttpResponse& res) {
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) return SendError(res, absl::InvalidArgumentError("the body is not valid JSON"));
    absl::StatusOr<json> answer = Detokenize(body, driver->model());
    if (!answer.ok()) return SendError(res, answer.status());
    res.SetContent(Dump(*answer), "application/json");
  });

  ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> server,
                   HttpServer::Start(HttpListen{.host = options.host,
                                                .port = options.port,
                                                .tls_cert = options.tls_cert,
                                                .tls_key = options.tls_key},
                                     options.limits, std::move(http)));
  return std::unique_ptr<OpenAiHttpServer>(new OpenAiHttpServer(std::move(server)));
}

}  // namespace baton::scheduler
