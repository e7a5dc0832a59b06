// baton_structured_output_bench: what structured outputs cost the engine, per generated token, at a
// decode batch of 1 and of 32, and what compiling a grammar costs.
//
//   build/bin/baton_structured_output_bench --model build/models/small
//
// Each round runs --batch sizes' requests (sampled, temperature 1, seeded, --output-len tokens at
// most) three times, in turn: unconstrained, then under a JSON schema (an object of a string, an
// enum, an integer and an array of strings, the shape of a tool call's arguments) with the masks
// filled during the forward pass (the engine's default), then the same with the masks filled on the
// engine thread before it (a second engine), so drift of a shared machine hits all alike. Reported
// per batch size, medians over --rounds: the wall time of a decode step that decodes the whole batch
// (a constrained answer may end sooner, and a smaller batch costs more per token), with the masks'
// filling and applying included, and the ratios to unconstrained. Then the compile time of the
// schema against the model's vocabulary (a fresh compiler, so uncached), and of the compiler itself
// (the vocabulary's preprocessing). Prints one JSON object.
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "benchmarks/engine/engine_timing.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/engine.h"
#include "runtime/structured_output/constraint_compiler.h"

namespace {

using baton::bench::Clock;
using baton::bench::Median;
using baton::bench::RandomPrompt;
using baton::bench::Seconds;
using baton::runtime::Engine;
using baton::runtime::GenerationParams;
using baton::runtime::OutputConstraint;

constexpr const char* kSchema = R"({"type": "object", "properties": {
    "query": {"type": "string"},
    "unit": {"enum": ["celsius", "fahrenheit", "kelvin"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 14},
    "tags": {"type": "array", "items": {"type": "string"}}},
  "required": ["query", "unit", "days", "tags"]})";

// Seconds per decode step of `batch` requests run together, over the steps that decode all of them:
// a constrained answer may end sooner (its grammar completes), and a smaller batch costs more per
// token, so only full steps compare like with like.
double SecondsPerFullStep(Engine& engine, int batch, int prompt_len, int output_len, bool constrained, int round) {
  std::mt19937 rng(1000 + round);
  for (int i = 0; i < batch; ++i) {
    GenerationParams params;
    params.sampling.temperature = 1.0f;
    params.seed = static_cast<uint64_t>(round * 1000 + i);
    params.max_tokens = output_len;
    params.ignore_eos = !constrained;  // a constrained answer ends when its grammar completes
    if (constrained) params.constraint = {.kind = OutputConstraint::Kind::kJsonSchema, .text = kSchema};
    (void)*engine.AddRequest(RandomPrompt(prompt_len, engine.model_config().vocab_size, rng), params);
  }
  double full_s = 0;
  int num_full = 0;
  bool prefilled = false;  // the first step with outputs is the prefill, the same either way
  while (engine.HasWork()) {
    const auto start = Clock::now();
    const auto outputs = *engine.Step();
    const double step_s = Seconds(Clock::now() - start);
    if (!prefilled) {
      prefilled = !outputs.empty();
      continue;
    }
    if (static_cast<int>(outputs.size()) == batch) {
      full_s += step_s;
      ++num_full;
    }
  }
  return num_full > 0 ? full_s / num_full : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Structured outputs' cost per token and a grammar's compile time"};
  std::string model;
  int threads = 2, rounds = 5, prompt_len = 32, output_len = 64;
  std::vector<int> batches = {1, 32};
  app.add_option("--model", model, "Checkpoint directory")->required();
  app.add_option("--threads", threads, "Compute threads");
  app.add_option("--rounds", rounds, "Interleaved rounds (medians are reported)");
  app.add_option("--prompt-len", prompt_len, "Prompt tokens per request");
  app.add_option("--output-len", output_len, "Most tokens generated per request");
  app.add_option("--batch", batches, "Decode batch sizes");
  CLI11_PARSE(app, argc, argv);

  // Two engines alike but for where the masks are filled: on a helper thread during the forward
  // pass (the default), or on the engine thread before it.
  const baton::runtime::EngineConfig engine_config{.model_dir = model, .num_threads = threads,
                                                   .kv_cache_bytes = 512ull << 20, .max_num_seqs = 64,
                                                   .max_model_len = 512};
  auto engine = Engine::Create(engine_config);
  baton::runtime::EngineConfig before_config = engine_config;
  before_config.fill_masks_during_forward = false;
  auto engine_before = Engine::Create(before_config);
  if (!engine.ok() || !engine_before.ok()) {
    const absl::Status failed = engine.ok() ? engine_before.status() : engine.status();
    std::fprintf(stderr, "structured_output_bench: %s\n", std::string(failed.message()).c_str());
    return 1;
  }
  nlohmann::json result = {{"model", model}, {"threads", threads}, {"rounds", rounds}};
  // One constrained warm-up: the engine's compiler and the schema's grammar are made once.
  (void)SecondsPerFullStep(**engine, 1, prompt_len, 4, true, -1);
  (void)SecondsPerFullStep(**engine_before, 1, prompt_len, 4, true, -1);
  for (int batch : batches) {
    std::vector<double> plain, constrained, before, ratio, ratio_before;
    for (int round = 0; round < rounds; ++round) {
      plain.push_back(SecondsPerFullStep(**engine, batch, prompt_len, output_len, false, round));
      constrained.push_back(SecondsPerFullStep(**engine, batch, prompt_len, output_len, true, round));
      before.push_back(SecondsPerFullStep(**engine_before, batch, prompt_len, output_len, true, round));
      ratio.push_back(constrained.back() / plain.back());
      ratio_before.push_back(before.back() / plain.back());
    }
    result["batches"].push_back({{"batch", batch},
                                 {"unconstrained_ms_per_step", 1e3 * Median(plain)},
                                 {"constrained_ms_per_step", 1e3 * Median(constrained)},
                                 {"constrained_masks_before_forward_ms_per_step", 1e3 * Median(before)},
                                 {"ratio_median", Median(ratio)},
                                 {"ratio_masks_before_forward_median", Median(ratio_before)}});
  }
  const auto config = (*engine)->model_config();
  const auto compiler_start = Clock::now();
  auto compiler = baton::runtime::ConstraintCompiler::FromModelDir(model, config.vocab_size, config.eos_token_ids);
  const double compiler_s = Seconds(Clock::now() - compiler_start);
  if (!compiler.ok()) {
    std::fprintf(stderr, "structured_output_bench: %s\n", std::string(compiler.status().message()).c_str());
    return 1;
  }
  const auto compile_start = Clock::now();
  const bool compiled = (*compiler)->Compile({.kind = OutputConstraint::Kind::kJsonSchema, .text = kSchema}).ok();
  result["compiler_setup_ms"] = 1e3 * compiler_s;
  result["schema_compile_ms"] = 1e3 * Seconds(Clock::now() - compile_start);
  result["schema_compiled"] = compiled;
  std::printf("%s\n", result.dump(2).c_str());
  return 0;
}
