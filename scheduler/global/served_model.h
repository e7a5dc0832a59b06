// ServedModel: what the scheduler serves — the model's name, config, context length and tokenizer.
// Loaded once by the scheduler process (scheduler_server.cc); read-only afterwards, shared by every
// request and front end.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "baton/kernels/sampling.h"
#include "runtime/model/model_config.h"
#include "runtime/structured_output/constraint_compiler.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/tokenizer.h"

namespace baton::scheduler {

struct ServedModel {
  std::string name;  // as clients pass it in `model`: --served-model-name, else the directory's name
  std::vector<std::string> aliases;  // more names a request may pass (--served-model-name A B ...)
  runtime::ModelConfig config;
  int max_model_len = 0;  // tokens, prompt + generated
  std::string dtype;      // the workers' weight dtype, for GetModelInfo
  std::unique_ptr<runtime::Tokenizer> tokenizer;
  // What a request that leaves temperature, top_k or top_p out gets (RequestDriver::Prepare): the
  // model's generation_config.json values, checked once at load, else vLLM's (1, off, 1).
  kernels::SamplingOptions default_sampling{.temperature = 1.0f};
  // tokenizer_config.json's chat template, for /v1/chat/completions; or why there is none (the
  // file has no chat_template, or the template does not parse), which a chat request is told.
  absl::StatusOr<runtime::ChatTemplate> chat_template =
      absl::NotFoundError("the served model has no chat template");
  // Structured outputs: checks a request's constraint before it is routed (a constraint that does
  // not compile is the client's error, answered at once); or why there is none.
  absl::StatusOr<std::unique_ptr<runtime::ConstraintCompiler>> constraint_compiler =
      absl::FailedPreconditionError("structured outputs are not set up for the served model");

  // Whether a request's `model` names this model (answers carry `name` whichever it used).
  bool IsNamed(std::string_view requested) const {
    return requested == name || std::find(aliases.begin(), aliases.end(), requested) != aliases.end();
  }
};

}  // namespace baton::scheduler
