// `baton generate`: offline generation in one process — prompt in, streamed text out.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "baton/v1/inference.grpc.pb.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/engine_flags.h"
#include "cli/parallel_layout.h"
#include "cli/signals.h"
#include "grpcpp/grpcpp.h"
#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/engine.h"
#include "runtime/rpc/status_conversion.h"
#include "runtime/tokenizer/text_stream.h"
#include "runtime/tokenizer/tokenizer.h"

namespace baton::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct GenerateOptions {
  std::string model_dir;
  std::string server;  // host:port of a scheduler; empty = run the model in this process
  std::string api_key;  // --server's, when it has one
  int timeout_s = 600;
  std::string prompt;
  std::string prompt_ids;
  int max_tokens = 128;
  std::optional<float> temperature;
  std::optional<int> top_k;
  std::optional<float> top_p;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool json = false;
  std::optional<int> logprobs;  // --logprobs K: the top K and the sampled token's
  std::string dump_logits;
  EngineFlags engine;
  ParallelFlags parallel;
};

absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id)) {
      return absl::InvalidArgumentError(absl::StrCat("--prompt-ids: '", part, "' is not an integer"));
    }
    ids.push_back(id);
  }
  return ids;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Prints a generation as it streams, the same way for the in-process engine and a server: text (or
// one JSON object per token with --json), then the timings.
class GenerationPrinter {
 public:
  explicit GenerationPrinter(const GenerateOptions& opts) : opts_(opts), start_(Clock::now()) {}

  void Token(int32_t token_id, const std::string& text,
             const std::vector<kernels::TokenLogprob>& logprobs) {
    if (!first_token_at_) first_token_at_ = Clock::now();
    ++num_tokens_;
    if (opts_.json) {
      nlohmann::json line = {{"token_id", token_id}, {"text", text}};
      if (opts_.logprobs) {
        nlohmann::json top = nlohmann::json::array();
        for (const auto& lp : logprobs) top.push_back({{"token_id", lp.token_id}, {"logprob", lp.logprob}});
        line["logprobs"] = std::move(top);
      }
      std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::cout << text;
    }
    std::cout.flush();
  }

  void Finish(const std::vector<int32_t>& prompt_ids, bool stopped) {
    const Clock::time_point end = Clock::now();
    const double prefill_s = Seconds(first_token_at_.value_or(end) - start_);
    const double decode_s = Seconds(end - first_token_at_.value_or(end));
    const int num_decoded = std::max(0, num_tokens_ - 1);
    const double prefill_tps = prefill_s > 0 ? prompt_ids.size() / prefill_s : 0;
    const double decode_tps = decode_s > 0 ? num_decoded / decode_s : 0;
    const char* reason = stopped ? "stop" : "length";
    if (opts_.json) {
      nlohmann::json last = {{"prompt_token_ids", prompt_ids},
                             {"finish_reason", reason},
                             {"num_generated_tokens", num_tokens_},
                             {"prefill_seconds", prefill_s},
                             {"decode_seconds", decode_s},
                             {"prefill_tokens_per_second", prefill_tps},
                             {"decode_tokens_per_second", decode_tps}};
      std::cout << last.dump() << std::endl;
    } else {
      std::cout << std::endl;
      std::fprintf(stderr, "prefill: %zu tokens, %.1f tokens/s; decode: %d tokens, %.1f tokens/s (%s)\n",
                   prompt_ids.size(), prefill_tps, num_decoded, decode_tps, reason);
    }
  }

 private:
  const GenerateOptions& opts_;
  const Clock::time_point start_;
  std::optional<Clock::time_point> first_token_at_;
  int num_tokens_ = 0;
};

absl::Status RunLocal(const GenerateOptions& opts) {
  ASSIGN_OR_RETURN(const std::filesystem::path model_dir, ResolveModelDir(opts.model_dir));
  ASSIGN_OR_RETURN(auto tokenizer,
                   runtime::Tokenizer::FromFile(model_dir / "tokenizer.json"));

  ASSIGN_OR_RETURN(runtime::EngineConfig config, EngineConfigOf(opts.engine, model_dir));
  config.max_num_seqs = 1;
  ASSIGN_OR_RETURN(config.parallel, ParallelLayoutOf(opts.parallel));
  if (config.parallel.num_ranks() > 1) {
    // Checked against config.json before any weight loads; the engine checks again at load.
    ASSIGN_OR_RETURN(const runtime::ModelConfig model_config, runtime::LoadModelConfig(model_dir));
    RETURN_IF_ERROR(PlanShards(model_config, config.parallel).status());
  }
  ASSIGN_OR_RETURN(auto engine, runtime::Engine::Create(config));
  if (engine->ranks().num_ranks() > 1) {
    std::fprintf(stderr, "baton: %s\n", DescribeRanks(engine->ranks()).c_str());
  }

  std::vector<int32_t> prompt_ids;
  if (!opts.prompt_ids.empty()) {
    ASSIGN_OR_RETURN(prompt_ids, ParseIds(opts.prompt_ids));
  } else {
    prompt_ids = tokenizer->Encode(opts.prompt, /*add_special_tokens=*/true);
  }

  runtime::GenerationParams params;
  // Greedy unless asked otherwise, in-process and through a server alike.
  params.sampling.temperature = opts.temperature.value_or(0.0f);
  params.sampling.top_k = opts.top_k.value_or(0);
  params.sampling.top_p = opts.top_p.value_or(1.0f);
  params.seed = opts.seed;
  params.max_tokens = opts.max_tokens;
  params.stop_token_ids = opts.stop_token_ids;
  params.ignore_eos = opts.ignore_eos;
  params.num_logprobs = opts.logprobs;
  params.return_logits = !opts.dump_logits.empty();
  ASSIGN_OR_RETURN(const runtime::SeqId seq_id, engine->AddRequest(prompt_ids, params));

  std::ofstream logits_file;
  if (!opts.dump_logits.empty()) {
    logits_file.open(opts.dump_logits, std::ios::binary | std::ios::trunc);
    if (!logits_file) return absl::InvalidArgumentError("--dump-logits: cannot write " + opts.dump_logits);
  }

  GenerationPrinter printer(opts);
  runtime::TextStream text_stream(*tokenizer, prompt_ids, opts.stop);
  runtime::FinishReason finish_reason = runtime::FinishReason::kNone;
  while (finish_reason == runtime::FinishReason::kNone && engine->HasWork()) {
    ASSIGN_OR_RETURN(std::vector<runtime::TokenOutput> outputs, engine->Step());
    for (const runtime::TokenOutput& out : outputs) {
      if (out.seq_id != seq_id) continue;
      finish_reason = out.finish_reason;
      if (logits_file.is_open()) {
        logits_file.write(reinterpret_cast<const char*>(out.logits.data()),
                          static_cast<std::streamsize>(out.logits.size() * sizeof(float)));
      }
      std::string text = text_stream.Append(out.token_id);
      if (finish_reason != runtime::FinishReason::kNone) text += text_stream.Finish();
      if (text_stream.stopped()) {
        // The engine still holds a sequence that it did not finish itself.
        if (finish_reason == runtime::FinishReason::kNone) RETURN_IF_ERROR(engine->Cancel(seq_id));
        finish_reason = runtime::FinishReason::kStop;
      }
      printer.Token(out.token_id, text, out.logprobs);
    }
  }
  printer.Finish(prompt_ids, finish_reason == runtime::FinishReason::kStop);
  return absl::OkStatus();
}

// The same request through a scheduler's gRPC API.
absl::Status RunRemote(const GenerateOptions& opts) {
  if (!opts.dump_logits.empty()) return absl::InvalidArgumentError("--dump-logits needs a local model");
  auto stub = v1::InferenceService::NewStub(
      grpc::CreateChannel(opts.server, grpc::InsecureChannelCredentials()));
  v1::GenerateRequest request;
  if (!opts.prompt_ids.empty()) {
    ASSIGN_OR_RETURN(std::vector<int32_t> ids, ParseIds(opts.prompt_ids));
    request.mutable_token_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
  } else {
    request.set_text(opts.prompt);
  }
  // Unset sampling fields take the server's defaults, as the local path takes the model's.
  request.mutable_sampling()->set_temperature(opts.temperature.value_or(0.0f));
  request.mutable_sampling()->set_top_k(opts.top_k.value_or(0));
  request.mutable_sampling()->set_top_p(opts.top_p.value_or(1.0f));
  request.mutable_sampling()->set_seed(opts.seed);
  request.mutable_stop()->set_max_tokens(opts.max_tokens);
  for (const std::string& stop : opts.stop) request.mutable_stop()->add_stop(stop);
  for (int32_t id : opts.stop_token_ids) request.mutable_stop()->add_stop_token_ids(id);
  request.mutable_stop()->set_ignore_eos(opts.ignore_eos);
  if (opts.logprobs) request.set_logprobs(*opts.logprobs);

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(opts.timeout_s));
  if (!opts.api_key.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", opts.api_key));
  GenerationPrinter printer(opts);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader = stub->Generate(&context, request);
  v1::GenerateResponse response;
  std::vector<int32_t> prompt_ids;
  bool stopped = false;
  while (reader->Read(&response)) {
    // Text completed by a response belongs to its last token.
    for (int i = 0; i < response.token_ids_size(); ++i) {
      std::vector<kernels::TokenLogprob> logprobs;
      if (i < response.logprobs_size()) {
        for (const auto& lp : response.logprobs(i).top()) logprobs.push_back({lp.token_id(), lp.logprob()});
      }
      printer.Token(response.token_ids(i), i + 1 == response.token_ids_size() ? response.text() : "",
                    logprobs);
    }
    if (response.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      prompt_ids.assign(response.prompt_token_ids().begin(), response.prompt_token_ids().end());
      stopped = response.finish_reason() == v1::FINISH_REASON_STOP;
    }
  }
  RETURN_IF_ERROR(rpc::FromGrpcStatus(reader->Finish()));
  printer.Finish(prompt_ids, stopped);
  return absl::OkStatus();
}

absl::Status RunGenerate(const GenerateOptions& opts) {
  if (opts.prompt.empty() == opts.prompt_ids.empty()) {
    return absl::InvalidArgumentError("give exactly one of --prompt and --prompt-ids");
  }
  if (!opts.server.empty() && opts.parallel.given()) {
    return absl::InvalidArgumentError(
        "--tensor-parallel-size/--pipeline-parallel-size lay out the model in this process; with "
        "--server the deployment's config decides");
  }
  return opts.server.empty() ? RunLocal(opts) : RunRemote(opts);
}

}  // namespace

void RegisterGenerateCommand(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Offline generation in one process: prompt in, text out");
  cmd->add_option("--model", opts->model_dir,
                  "Hugging Face checkpoint directory (default: the embedded default model)");
  cmd->add_option("--server", opts->server, "host:port of a Baton scheduler (default: run in-process)");
  cmd->add_option("--timeout", opts->timeout_s, "Seconds before a --server request gives up")
      ->capture_default_str();
  cmd->add_option("--api-key", opts->api_key, "The --server's API key, sent as 'Authorization: Bearer KEY'")
      ->envname("BATON_API_KEY");
  cmd->add_option("--prompt", opts->prompt, "Prompt text");
  cmd->add_option("--prompt-ids", opts->prompt_ids, "Prompt as comma-separated token ids");
  cmd->add_option("--max-tokens", opts->max_tokens, "Tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", opts->temperature, "0 = greedy (the default)");
  cmd->add_option("--top-k", opts->top_k, "Keep the k most likely tokens (0 = off)");
  cmd->add_option("--top-p", opts->top_p, "Nucleus sampling mass in (0, 1]");
  cmd->add_option("--seed", opts->seed, "Sampling seed")->capture_default_str();
  cmd->add_option("--stop", opts->stop, "Stop string (repeatable)");
  cmd->add_option("--stop-token-id", opts->stop_token_ids, "Stop token id (repeatable)");
  cmd->add_flag("--ignore-eos", opts->ignore_eos, "Generate max-tokens tokens regardless of EOS");
  cmd->add_flag("--json", opts->json, "One JSON object per token, and a summary line");
  cmd->add_option("--logprobs", opts->logprobs, "Log-probabilities per token (with --json): the top N, then the sampled token's")
      ->check(CLI::Range(0, 20));
  cmd->add_option("--dump-logits", opts->dump_logits,
                  "Write each step's logits as raw float32 [num_tokens, vocab] to this file");
  AddEngineFlags(*cmd, &opts->engine);
  AddParallelFlags(*cmd, &opts->parallel);
  cmd->callback([opts, exit_code] {
    const absl::Status status = RunGenerate(*opts);
    if (!status.ok()) {
      *exit_code = ReportStatus("baton generate", status);
    }
  });
}

}  // namespace baton::cli
