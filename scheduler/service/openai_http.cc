#include "scheduler/service/openai_http.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace baton::scheduler {
namespace {

using nlohmann::json;

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument: return 400;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kResourceExhausted: return 429;  // admission shed the request
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    case absl::StatusCode::kCancelled: return 499;
    default: return 500;
  }
}

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

const char* FinishReasonName(runtime::FinishReason reason) {
  switch (reason) {
    case runtime::FinishReason::kLength: return "length";
    case runtime::FinishReason::kStop: return "stop";
    case runtime::FinishReason::kCancelled: return "abort";
    case runtime::FinishReason::kNone: break;
  }
  return nullptr;
}

// Reads a number field of the expected kind; InvalidArgument naming the field otherwise.
template <typename T>
absl::Status ReadNumber(const json& body, const char* field, T* out) {
  if (!body.contains(field) || body[field].is_null()) return absl::OkStatus();
  const json& value = body[field];
  if (!value.is_number() || (std::is_integral_v<T> && !value.is_number_integer())) {
    return absl::InvalidArgumentError(absl::StrCat("'", field, "' must be ",
                                                   std::is_integral_v<T> ? "an integer" : "a number"));
  }
  *out = value.get<T>();
  return absl::OkStatus();
}

// OpenAI /v1/completions JSON -> native request; ValidateRequest (in Prepare) checks the values.
// OpenAI's defaults: max_tokens 16, temperature 1.
absl::StatusOr<GenerateRequest> CompletionToRequest(const json& body, bool* stream) {
  if (!body.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  GenerateRequest request;
  if (body.contains("model") && body["model"].is_string()) request.model = body["model"];
  if (!body.contains("prompt")) return absl::InvalidArgumentError("'prompt' is required");
  const json& prompt = body["prompt"];
  if (prompt.is_string()) {
    request.prompt_text = prompt.get<std::string>();
  } else if (prompt.is_array() && !prompt.empty() && prompt[0].is_number_integer()) {
    request.prompt_ids.emplace();
    for (const json& id : prompt) {
      if (!id.is_number_integer()) return absl::InvalidArgumentError("'prompt': mixed token id array");
      request.prompt_ids->push_back(id.get<int32_t>());
    }
  } else if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) {
    request.prompt_text = prompt[0].get<std::string>();
  } else {
    return absl::InvalidArgumentError("'prompt' must be a string or an array of token ids (one prompt per request)");
  }
  int n = 1;
  if (absl::Status s = ReadNumber(body, "n", &n); !s.ok()) return s;
  if (n != 1) return absl::InvalidArgumentError("'n' other than 1 is not supported");
  if (body.value("echo", false)) return absl::InvalidArgumentError("'echo' is not supported");
  int max_tokens = 16;
  float temperature = 1.0f, top_p = 1.0f;
  int top_k = 0, logprobs = 0;
  if (absl::Status s = ReadNumber(body, "max_tokens", &max_tokens); !s.ok()) return s;
  if (absl::Status s = ReadNumber(body, "temperature", &temperature); !s.ok()) return s;
  if (absl::Status s = ReadNumber(body, "top_p", &top_p); !s.ok()) return s;
  if (absl::Status s = ReadNumber(body, "top_k", &top_k); !s.ok()) return s;
  if (absl::Status s = ReadNumber(body, "logprobs", &logprobs); !s.ok()) return s;
  if (top_k < 0) top_k = 0;  // vLLM's -1 means off
  runtime::GenerationParams& params = request.params;
  params.max_tokens = max_tokens;
  request.max_tokens_given = true;
  // top_p 0 is "unset" in the gRPC API; it has meant 1 here too since this front end went through it.
  params.sampling = kernels::SamplingOptions{
      .temperature = temperature, .top_k = top_k, .top_p = top_p == 0 ? 1.0f : top_p};
  params.num_logprobs = logprobs;
  if (body.contains("seed") && !body["seed"].is_null()) {
    if (!body["seed"].is_number_integer()) return absl::InvalidArgumentError("'seed' must be an integer");
    params.seed = body["seed"].get<uint64_t>();
    request.seed_given = true;
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& stop = body["stop"];
    if (stop.is_string()) {
      request.stop_strings.push_back(stop.get<std::string>());
    } else if (stop.is_array()) {
      for (const json& s : stop) {
        if (!s.is_string()) return absl::InvalidArgumentError("'stop' must hold strings");
        request.stop_strings.push_back(s.get<std::string>());
      }
    } else {
      return absl::InvalidArgumentError("'stop' must be a string or an array of strings");
    }
  }
  params.ignore_eos = body.value("ignore_eos", false);
  *stream = body.value("stream", false);
  return request;
}

json LogprobsJson(const GenerateChunk& chunk, const runtime::Tokenizer& tokenizer) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array();
  for (size_t i = 0; i < chunk.logprobs.size(); ++i) {
    const int32_t id = chunk.token_ids[i];
    tokens.push_back(tokenizer.Decode({&id, 1}, false));
    float chosen = 0;
    json alternatives = json::object();
    for (const kernels::TokenLogprob& lp : chunk.logprobs[i]) {
      const int32_t alt = lp.token_id;
      alternatives[tokenizer.Decode({&alt, 1}, false)] = lp.logprob;
      if (lp.token_id == id) chosen = lp.logprob;
    }
    token_logprobs.push_back(chosen);
    top.push_back(std::move(alternatives));
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}};
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
    bool stream = false;
    absl::StatusOr<GenerateRequest> request = CompletionToRequest(body, &stream);
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
    if (!stream) {
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

    const bool include_usage =
        body.contains("stream_options") && body["stream_options"].value("include_usage", false);
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
