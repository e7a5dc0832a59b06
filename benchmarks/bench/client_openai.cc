#include "benchmarks/bench/client_openai.h"

#include <atomic>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "benchmarks/bench/openai_protocol.h"
#include "benchmarks/bench/sse_parser.h"
#include "httplib.h"

namespace baton::bench {
namespace {

constexpr size_t kMaxErrorBodyBytes = 2048;

absl::Status FromHttpError(httplib::Error error, const std::string& where) {
  const std::string message = absl::StrCat(where, ": ", httplib::to_string(error));
  switch (error) {
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout:
    case httplib::Error::SSLConnection:
    case httplib::Error::Read:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

void SetTimeouts(httplib::Client& client, absl::Duration connect, absl::Duration read) {
  client.set_connection_timeout(std::chrono::microseconds(absl::ToInt64Microseconds(connect)));
  client.set_read_timeout(std::chrono::microseconds(absl::ToInt64Microseconds(read)));
  client.set_write_timeout(std::chrono::microseconds(absl::ToInt64Microseconds(connect)));
}

// "Authorization: Bearer KEY", as OpenAI's own clients send the key; nothing without one.
httplib::Headers AuthHeaders(const std::string& api_key) {
  if (api_key.empty()) return {};
  return {{"Authorization", absl::StrCat("Bearer ", api_key)}};
}

}  // namespace

absl::StatusOr<OpenAiEndpoint> ParseOpenAiUrl(const std::string& url) {
  absl::string_view rest = url;
  std::string scheme;
  if (absl::ConsumePrefix(&rest, "http://")) {
    scheme = "http://";
  } else if (absl::ConsumePrefix(&rest, "https://")) {
    scheme = "https://";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("OpenAI URL '", url, "': expected http://HOST[:PORT][/v1]"));
  }
  const size_t slash = rest.find('/');
  const absl::string_view host_port = rest.substr(0, slash);
  std::string path(slash == absl::string_view::npos ? "" : rest.substr(slash));
  if (host_port.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("OpenAI URL '", url, "': no host"));
  }
  while (absl::EndsWith(path, "/")) path.pop_back();
  absl::string_view prefix = path;
  const bool chat = absl::ConsumeSuffix(&prefix, "/v1/chat/completions");
  if (!chat && !absl::ConsumeSuffix(&prefix, "/v1/completions")) absl::ConsumeSuffix(&prefix, "/v1");
  return OpenAiEndpoint{
      .scheme_host_port = absl::StrCat(scheme, host_port),
      .completions_path = absl::StrCat(prefix, chat ? "/v1/chat/completions" : "/v1/completions"),
      .models_path = absl::StrCat(prefix, "/v1/models"),
      .chat = chat};
}

absl::StatusOr<std::unique_ptr<OpenAiClient>> OpenAiClient::Create(
    const std::string& url, const OpenAiClientOptions& options) {
  absl::StatusOr<OpenAiEndpoint> endpoint = ParseOpenAiUrl(url);
  if (!endpoint.ok()) return endpoint.status();
  return std::unique_ptr<OpenAiClient>(new OpenAiClient(*std::move(endpoint), options));
}

absl::StatusOr<ModelInfo> OpenAiClient::GetModelInfo() {
  httplib::Client client(endpoint_.scheme_host_port);
  SetTimeouts(client, options_.connect_timeout, absl::Seconds(30));
  httplib::Result result = client.Get(endpoint_.models_path, AuthHeaders(options_.api_key));
  if (!result) return FromHttpError(result.error(), absl::StrCat("GET ", endpoint_.models_path));
  if (result->status != 200) {
    return absl::UnavailableError(absl::StrCat("GET ", endpoint_.models_path, ": HTTP ",
                                               result->status, " ",
                                               result->body.substr(0, kMaxErrorBodyBytes)));
  }
  absl::StatusOr<ModelInfo> info = ParseModelList(result->body);
  if (info.ok() && options_.model.empty()) options_.model = info->model;
  return info;
}

absl::Status OpenAiClient::Generate(const GenerationRequest& request, Cancellation* cancel,
                                    GenerationTrace* trace) {
  httplib::Client client(endpoint_.scheme_host_port);
  SetTimeouts(client, options_.connect_timeout, request.timeout);
  const absl::Time deadline = absl::Now() + request.timeout;

  httplib::Request http;
  http.method = "POST";
  http.path = endpoint_.completions_path;
  http.headers = AuthHeaders(options_.api_key);
  http.headers.emplace("Content-Type", "application/json");
  http.headers.emplace("Accept", "text/event-stream");
  if (endpoint_.chat && request.prompt_text.empty()) {
    return absl::InvalidArgumentError(
        "the chat endpoint takes text prompts, not token ids (--prompt-format text)");
  }
  http.body = endpoint_.chat ? ChatCompletionRequestBody(request, options_.model)
                             : CompletionRequestBody(request, options_.model);

  int http_status = 0;
  std::string error_body;
  absl::Status stream_status;
  bool done = false;
  std::optional<int> completion_tokens;
  int num_events = 0;
  SseParser parser;
  std::atomic<bool> timed_out = false;
  http.response_handler = [&](const httplib::Response& response) {
    http_status = response.status;
    return true;
  };
  http.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (http_status != 200) {
      error_body.append(data, std::min(size, kMaxErrorBodyBytes -
                                                 std::min(kMaxErrorBodyBytes, error_body.size())));
      return true;
    }
    const Clock::time_point now = Clock::now();
    for (const std::string& event : parser.Feed(std::string_view(data, size))) {
      absl::StatusOr<CompletionChunk> chunk = ParseCompletionChunk(event);
      if (!chunk.ok()) {
        stream_status = chunk.status();
        return false;
      }
      if (chunk->done) {
        done = true;
        continue;
      }
      trace->output_text += chunk->text;
      if (chunk->has_output) {
        trace->token_times.push_back(now);
        ++num_events;
      }
      if (!chunk->finish_reason.empty()) trace->finish_reason = chunk->finish_reason;
      if (chunk->prompt_tokens) trace->num_prompt_tokens = *chunk->prompt_tokens;
      if (chunk->cached_tokens) trace->num_cached_tokens = *chunk->cached_tokens;
      if (chunk->completion_tokens) completion_tokens = chunk->completion_tokens;
    }
    if (absl::Now() > deadline) {
      timed_out = true;
      return false;
    }
    return true;
  };
  if (cancel != nullptr) cancel->SetHook([&client] { client.stop(); });
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(http, response, error);
  if (cancel != nullptr) cancel->ClearHook();
  trace->num_output_tokens = completion_tokens.value_or(num_events);

  if (cancel != nullptr && cancel->cancelled())
    return absl::CancelledError("cancelled by the client");
  if (timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat("no end of stream within ", absl::FormatDuration(request.timeout)));
  }
  if (!stream_status.ok()) return stream_status;
  if (!sent) return FromHttpError(error, absl::StrCat("POST ", http.path));
  if (http_status != 200) {
    const std::string message =
        absl::StrCat("POST ", http.path, ": HTTP ", http_status, " ", error_body);
    return http_status == 400 || http_status == 422 ? absl::InvalidArgumentError(message)
                                                    : absl::UnavailableError(message);
  }
  if (!done) return absl::UnavailableError("stream ended without data: [DONE]");
  return absl::OkStatus();
}

}  // namespace baton::bench
