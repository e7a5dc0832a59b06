#include "scheduler/service/openai_respond.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"

namespace baton::scheduler {

using nlohmann::json;

void SendHttpError(HttpResponse& res, int http, std::string_view message) {
  json body = {{"error",
                {{"message", message},
                 {"type", http == 401   ? "authentication_error"
                          : http < 500 && http != 429 ? "invalid_request_error"
                          : http == 429 ? "rate_limit_error"
                                        : "server_error"},
                 {"param", nullptr},
                 {"code", http}}}};
  res.status = http;
  res.SetContent(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void SendError(HttpResponse& res, const absl::Status& status) {
  SendHttpError(res, HttpStatusOf(status.code()), std::string(status.message()));
}

namespace {

std::string Dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

// What one choice's run left behind.
struct ChoiceRun {
  std::unique_ptr<AnswerChoices> choices;
  runtime::FinishReason finish = runtime::FinishReason::kNone;
  int num_generated = 0;
  int num_cached_tokens = 0;      // of its prompt, from the last chunk
  double cumulative_logprob = 0;  // of the sampled tokens, when they carry logprobs
  std::vector<std::vector<kernels::TokenLogprob>> prompt_logprobs;  // when the first chunk has them
  absl::Status status;
};

// The sampled token's logprob of each token of `chunk` (listed by TopLogprobs whenever logprobs
// were asked for), summed.
double SampledLogprobSum(const GenerateChunk& chunk) {
  double sum = 0;
  for (size_t i = 0; i < chunk.logprobs.size() && i < chunk.token_ids.size(); ++i) {
    for (const kernels::TokenLogprob& lp : chunk.logprobs[i]) {
      if (lp.token_id == chunk.token_ids[i]) {
        sum += lp.logprob;
        break;
      }
    }
  }
  return sum;
}

// Runs every request on a thread of its own but the first, which runs on the caller's; `run(r)`
// runs request r to its end.
void RunAll(size_t num_requests, const std::function<void(size_t)>& run) {
  std::vector<std::thread> threads;
  threads.reserve(num_requests > 0 ? num_requests - 1 : 0);
  for (size_t r = 1; r < num_requests; ++r) threads.emplace_back(run, r);
  if (num_requests > 0) run(0);
  for (std::thread& t : threads) t.join();
}

}  // namespace

void Respond(RequestDriver* driver, WorkerStubs* stubs, const HttpRequest& req, HttpResponse& res,
             AnswerPlan plan, const AnswerShape& shape, AnswerNames names) {
  const size_t num_requests = plan.requests.size();
  const size_t num_prompts = num_requests / plan.best_of;
  const std::string& request_id = EchoedRequestId(plan.requests.front().request);
  const std::string id = absl::StrCat(names.id_prefix, request_id);
  res.headers.emplace_back("X-Request-Id", request_id);
  const std::string model = driver->model().name;
  const int64_t created = absl::ToUnixSeconds(absl::Now());
  // Each prompt counts once, however many choices it has (vLLM's usage).
  int num_prompt_tokens = 0;
  for (size_t p = 0; p < num_prompts; ++p) {
    num_prompt_tokens += static_cast<int>(plan.requests[p * plan.best_of].prompt.size());
  }
  // OpenAI's usage, with prompt_tokens_details.cached_tokens: the prompt tokens a prefix cache
  // held (each prompt's first choice's; the others share its prompt).
  auto usage = [num_prompt_tokens, num_prompts, best_of = plan.best_of](int num_generated,
                                                                        const std::vector<ChoiceRun>& runs) {
    int num_cached = 0;
    for (size_t p = 0; p < num_prompts; ++p) num_cached += runs[p * best_of].num_cached_tokens;
    return json{{"prompt_tokens", num_prompt_tokens},
                {"completion_tokens", num_generated},
                {"total_tokens", num_prompt_tokens + num_generated},
                {"prompt_tokens_details", {{"cached_tokens", num_cached}}}};
  };
  auto envelope = [=](const char* object, json choices_array) {
    return json{{"id", id}, {"object", object}, {"created", created}, {"model", model},
                {"choices", std::move(choices_array)}};
  };
  auto runs = std::make_shared<std::vector<ChoiceRun>>(num_requests);
  for (size_t r = 0; r < num_requests; ++r) (*runs)[r].choices = plan.make_choices(r);
  auto requests = std::make_shared<std::vector<PreparedRequest>>(std::move(plan.requests));

  if (!shape.stream) {
    // A client that leaves cancels every choice at its next chunk (or phase), as a streaming one
    // does when a write fails; so does a choice that fails.
    std::atomic<bool> failed = false;
    RunAll(num_requests, [&](size_t r) {
      ChoiceRun& run = (*runs)[r];
      GrpcWorkerClient workers(stubs);
      auto cancelled = [&] { return failed.load() || req.ClientGone(); };
      run.status = driver->Execute(std::move((*requests)[r]),
                                   RequestIo{.workers = &workers,
                                             .write = [&](const GenerateChunk& chunk) {
                                               run.num_generated += static_cast<int>(chunk.token_ids.size());
                                               if (chunk.finish_reason != runtime::FinishReason::kNone) {
                                                 run.num_cached_tokens = chunk.num_cached_tokens;
                                               }
                                               run.cumulative_logprob += SampledLogprobSum(chunk);
                                               if (!chunk.prompt_logprobs.empty()) {
                                                 run.prompt_logprobs = chunk.prompt_logprobs;
                                               }
                                               run.choices->Add(chunk);
                                               run.finish = chunk.finish_reason;
                                               return !cancelled();
                                             },
                                             .is_cancelled = cancelled});
      if (!run.status.ok()) failed = true;
    });
    // The first failure that is not a consequence of another's cancelling.
    const ChoiceRun* failure = nullptr;
    for (const ChoiceRun& run : *runs) {
      if (!run.status.ok() && (failure == nullptr || absl::IsCancelled(failure->status))) failure = &run;
    }
    if (failure != nullptr) return SendError(res, failure->status);
    json choices = json::array();
    int num_generated = 0;
    for (size_t p = 0; p < num_prompts; ++p) {
      std::vector<size_t> order(plan.best_of);
      std::iota(order.begin(), order.end(), p * plan.best_of);
      if (plan.best_of > plan.n) {
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
          return (*runs)[a].cumulative_logprob > (*runs)[b].cumulative_logprob;
        });
      }
      for (int j = 0; j < plan.n; ++j) {
        ChoiceRun& run = (*runs)[order[j]];
        json choice = run.choices->BodyChoice(run.finish);
        choice["index"] = p * plan.n + j;
        if (shape.prompt_logprobs && names.prompt_logprobs_per_choice) {
          choice["prompt_logprobs"] = VllmPromptLogprobs(*driver->model().tokenizer, run.prompt_logprobs);
        }
        choices.push_back(std::move(choice));
        num_generated += run.num_generated;
      }
    }
    json out = envelope(names.object, std::move(choices));
    if (shape.prompt_logprobs && !names.prompt_logprobs_per_choice) {  // the one prompt's
      out["prompt_logprobs"] = VllmPromptLogprobs(*driver->model().tokenizer, runs->front().prompt_logprobs);
    }
    out["usage"] = usage(num_generated, *runs);
    res.SetContent(Dump(out), "application/json");
    return;
  }

  const bool include_usage = shape.include_usage;
  res.content_type = "text/event-stream";
  res.stream = [=](HttpStream& sink) {
    std::mutex mu;  // one writer of the sink at a time
    bool client_gone = false;
    std::atomic<bool> stop = false;  // the client left, or a choice failed
    absl::Status first_error;
    auto send = [&](const json& event) {
      const std::string line = absl::StrCat("data: ", Dump(event), "\n\n");
      std::lock_guard<std::mutex> lock(mu);
      if (!client_gone && !sink.Write(line)) client_gone = true;
      if (client_gone) stop = true;
      return !client_gone;
    };
    RunAll(num_requests, [&](size_t r) {
      ChoiceRun& run = (*runs)[r];
      GrpcWorkerClient workers(stubs);
      run.status = driver->Execute(
          std::move((*requests)[r]),
          RequestIo{.workers = &workers,
                    .write = [&](const GenerateChunk& chunk) {
                      run.num_generated += static_cast<int>(chunk.token_ids.size());
                      if (chunk.finish_reason != runtime::FinishReason::kNone) {
                        run.num_cached_tokens = chunk.num_cached_tokens;
                      }
                      json choice = run.choices->StreamChoice(chunk);
                      choice["index"] = r;
                      json event = envelope(names.chunk_object, json::array({std::move(choice)}));
                      // OpenAI: with include_usage, every chunk but the last carries "usage": null.
                      if (include_usage) event["usage"] = nullptr;
                      return send(event) && !stop;
                    },
                    .is_cancelled = [&] { return stop.load(); }});
      if (!run.status.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok() || absl::IsCancelled(first_error)) first_error = run.status;
        stop = true;
      }
    });
    if (!first_error.ok() && !client_gone) {
      send(json{{"error", {{"message", std::string(first_error.message())},
                           {"code", HttpStatusOf(first_error.code())}}}});
    }
    if (include_usage && !client_gone) {
      int num_generated = 0;
      for (const ChoiceRun& run : *runs) num_generated += run.num_generated;
      json event = envelope(names.chunk_object, json::array());
      event["usage"] = usage(num_generated, *runs);
      send(event);
    }
    if (!client_gone) sink.Write("data: [DONE]\n\n");
  };
}

}  // namespace baton::scheduler
