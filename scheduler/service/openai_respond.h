// Answers an OpenAI request of one or more choices: n choices per prompt, several prompts (a list
// in /v1/completions), best_of candidates of which the n most likely are returned. Each choice is
// one native request run by RequestDriver::Execute, all at once (so that the workers batch them);
// the answer is one JSON body, or Server-Sent Events of every choice interleaved (each event names
// its choice's index) ending with [DONE]. Errors are OpenAI's JSON error bodies (SendError).
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/global/request_driver.h"
#include "scheduler/service/grpc_worker_client.h"
#include "scheduler/service/http_server.h"
#include "scheduler/service/openai_answer.h"

namespace baton::scheduler {

// {"error": {"message", "type", "param", "code"}} with HTTP status `http` (vLLM's shape).
void SendHttpError(HttpResponse& res, int http, std::string_view message);
// The same for a status (HttpStatusOf).
void SendError(HttpResponse& res, const absl::Status& status);

struct AnswerNames {
  const char* id_prefix;     // "cmpl-", "chatcmpl-"
  const char* object;        // of the one body
  const char* chunk_object;  // of each streamed event
  // Where vLLM's prompt_logprobs go (AnswerShape::prompt_logprobs): in each choice (completions)
  // or once, beside the choices (chat).
  bool prompt_logprobs_per_choice = true;
};

struct AnswerPlan {
  // Prompt-major: prompt p's candidates are requests [p * best_of, (p + 1) * best_of).
  std::vector<PreparedRequest> requests;
  int best_of = 1;  // candidates per prompt
  int n = 1;        // choices per prompt returned: the n candidates with the highest cumulative
                    // logprob when best_of > n (their tokens' logprobs must be asked for)
  // The answer's shape of request r (its choice index is set here).
  std::function<std::unique_ptr<AnswerChoices>(size_t request_idx)> make_choices;
};

// Pre: requests is not empty, its size a multiple of best_of, n <= best_of, and best_of == n when
// streaming. A failing choice cancels the others; the answer is then its error.
void Respond(RequestDriver* driver, WorkerStubs* stubs, const HttpRequest& req, HttpResponse& res,
             AnswerPlan plan, const AnswerShape& shape, AnswerNames names);

}  // namespace baton::scheduler
