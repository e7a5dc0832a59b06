// `baton eval`: a model's perplexity on a text, through the engine's own prompt logprobs, on the
// device, weight dtype and KV dtype asked for (runtime/engine/perplexity.h says how it is scored).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/engine_flags.h"
#include "cli/signals.h"
#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/engine.h"
#include "runtime/engine/perplexity.h"
#include "runtime/tokenizer/tokenizer.h"

namespace baton::cli {
namespace {

// What a model directory may hold to be scored on when no --text is given: the held-out text of
// scripts/train_default_model.py.
constexpr char kHeldOutFile[] = "heldout.txt";

struct EvalOptions {
  std::string model_dir;
  std::string text_file;
  int window = 512;
  int64_t max_text_tokens = 0;  // 0: all of them
  int chunk = 0;                // > 0: chunked prefill of this many tokens a step
  bool json = false;
  EngineFlags engine;
};

absl::StatusOr<std::string> ReadText(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

absl::Status RunEval(const EvalOptions& opts) {
  if (opts.window < 2) {
    return absl::InvalidArgumentError(absl::StrCat("--window must be >= 2, got ", opts.window));
  }
  if (opts.max_text_tokens < 0) return absl::InvalidArgumentError("--max-text-tokens must be >= 0");
  if (opts.chunk < 0) return absl::InvalidArgumentError("--chunk must be >= 0");
  ASSIGN_OR_RETURN(const std::filesystem::path model_dir, ResolveModelDir(opts.model_dir));
  std::filesystem::path text_file = opts.text_file;
  if (text_file.empty()) {
    text_file = model_dir / kHeldOutFile;
    if (!std::filesystem::exists(text_file)) {
      return absl::InvalidArgumentError(
          absl::StrCat("no --text given and ", model_dir.string(), " has no ", kHeldOutFile));
    }
  }
  ASSIGN_OR_RETURN(const std::string text, ReadText(text_file));
  ASSIGN_OR_RETURN(auto tokenizer, runtime::Tokenizer::FromFile(model_dir / "tokenizer.json"));
  std::vector<int32_t> ids = tokenizer->Encode(text, /*add_special_tokens=*/false);
  if (opts.max_text_tokens > 0 && static_cast<int64_t>(ids.size()) > opts.max_text_tokens) {
    ids.resize(opts.max_text_tokens);
  }
  const std::span<const int32_t> prefix = tokenizer->prefix_special_ids();
  const runtime::PerplexityOptions options{.window = opts.window,
                                           .prefix = {prefix.begin(), prefix.end()}};

  ASSIGN_OR_RETURN(runtime::EngineConfig config, EngineConfigOf(opts.engine, model_dir));
  if (opts.chunk > 0) {
    // Later chunks attend to the earlier ones through the KV cache, as decode steps do: this is
    // where the KV dtype shows. Whole windows attend to their own fresh K/V and never read it back.
    config.chunked_prefill = true;
    config.max_num_batched_tokens = opts.chunk;
  } else {
    config.max_num_batched_tokens = std::max(config.max_num_batched_tokens,
                                             static_cast<int>(opts.window + prefix.size()));
  }
  ASSIGN_OR_RETURN(auto engine, runtime::Engine::Create(config));
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const runtime::PerplexityResult result,
                   runtime::ScorePerplexity(*engine, ids, options));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const std::string kv_dtype(DTypeName(config.kv_cache_dtype));
  if (opts.json) {
    nlohmann::json line = {{"model", model_dir.string()},
                           {"text", text_file.string()},
                           {"device", opts.engine.device},
                           {"dtype", std::string(DTypeName(config.weight_dtype))},
                           {"kv_cache_dtype", kv_dtype},
                           {"window", opts.window},
                           {"chunk", opts.chunk},
                           {"num_windows", result.num_windows},
                           {"num_scored_tokens", result.num_scored_tokens},
                           {"mean_nll", result.mean_nll()},
                           {"perplexity", result.perplexity()},
                           {"seconds", seconds}};
    std::cout << line.dump() << std::endl;
  } else {
    std::cout << absl::StrFormat(
                     "perplexity %.3f (mean NLL %.4f nats) over %d tokens in %d windows of <= %d%s; "
                     "device %s, dtype %s, KV %s; %.1f s\n",
                     result.perplexity(), result.mean_nll(), result.num_scored_tokens,
                     result.num_windows, opts.window,
                     opts.chunk > 0 ? absl::StrCat(", prefilled in chunks of ", opts.chunk) : "",
                     opts.engine.device, DTypeName(config.weight_dtype), kv_dtype, seconds);
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterEvalCommand(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand("eval", "A model's perplexity on a text, from its prompt logprobs");
  cmd->add_option("--model", opts->model_dir,
                  "Hugging Face checkpoint directory (default: the embedded default model)");
  cmd->add_option("--text", opts->text_file,
                  "UTF-8 text file to score (default: the model directory's heldout.txt)");
  cmd->add_option("--window", opts->window,
                  "Text tokens per scored window; each window starts with the tokenizer's BOS")
      ->capture_default_str();
  cmd->add_option("--max-text-tokens", opts->max_text_tokens,
                  "Score only the text's first N tokens (0 = all)")
      ->capture_default_str();
  cmd->add_option("--chunk", opts->chunk,
                  "Prefill each window in chunks of N tokens (0 = whole): later chunks then read "
                  "the earlier ones' KV from the cache, so the KV dtype counts")
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "One JSON object instead of a line of text");
  AddEngineFlags(*cmd, &opts->engine);
  cmd->callback([opts, exit_code] {
    const absl::Status status = RunEval(*opts);
    if (!status.ok()) *exit_code = ReportStatus("baton eval", status);
  });
}

}  // namespace baton::cli
