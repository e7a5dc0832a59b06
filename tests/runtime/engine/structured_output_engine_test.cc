// Structured outputs through the engine, on the trained default model (models/kjv-4m): sampled
// answers under a JSON schema, a regex or a choice always match it and end when it is complete;
// the cuda-emulated device and 2 tensor-parallel ranks draw the CPU's tokens; a request resumed or
// handed over with tokens already generated continues the same run (its matcher is replayed from
// them); what does not compile, and tokens that do not follow the grammar, are refused.
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/engine.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/testing/engine_requests.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;
using testing::TransferKv;

using Outcome = testing::RunOutcome;
using testing::RunToCompletion;

std::filesystem::path ModelDir() { return std::filesystem::path(BATON_TEST_SOURCE_DIR) / "models/kjv-4m"; }

const char* kVerseSchema = R"({"type": "object", "properties": {
    "book": {"enum": ["Genesis", "Exodus", "Psalms"]},
    "chapter": {"type": "integer", "minimum": 1, "maximum": 150},
    "words": {"type": "string", "maxLength": 24}},
  "required": ["book", "chapter", "words"], "additionalProperties": false})";

class StructuredOutputEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tokenizer_ = Tokenizer::FromFile(ModelDir() / "tokenizer.json")->release(); }
  static void TearDownTestSuite() { delete tokenizer_; }

  static std::unique_ptr<Engine> MakeEngine(DeviceKind device = DeviceKind::kCpu, int tp = 1) {
    auto engine = Engine::Create(EngineConfig{.model_dir = ModelDir(),
                                              .parallel = {.tp_size = tp, .pp_size = 1},
                                              .device = device,
                                              .kv_cache_bytes = 8 << 20,
                                              .max_num_seqs = 32,
                                              .max_model_len = 512});
    EXPECT_THAT(engine, IsOk());
    return engine.ok() ? std::move(*engine) : nullptr;
  }


  static GenerationParams Sampled(OutputConstraint constraint, uint64_t seed, int max_tokens = 120) {
    GenerationParams params;
    params.sampling.temperature = 1.0f;
    params.seed = seed;
    params.max_tokens = max_tokens;
    params.constraint = std::move(constraint);
    return params;
  }

  static std::vector<int32_t> Prompt(const std::string& text) {
    std::vector<int32_t> ids = {*tokenizer_->bos_id()};
    for (int32_t id : tokenizer_->Encode(text, false)) ids.push_back(id);
    return ids;
  }

  // The text of a run that ended with its stop token (which is left out).
  static std::string TextOf(const Outcome& run) {
    std::vector<int32_t> tokens = run.tokens;
    if (run.finish == FinishReason::kStop && !tokens.empty()) tokens.pop_back();
    return tokenizer_->Decode(tokens, /*skip_special_tokens=*/false);
  }

  static Tokenizer* tokenizer_;
};

Tokenizer* StructuredOutputEngineTest::tokenizer_ = nullptr;

TEST_F(StructuredOutputEngineTest, SampledAnswersFollowTheJsonSchema) {
  auto engine = MakeEngine();
  std::vector<SeqId> ids;
  for (uint64_t seed = 0; seed < 24; ++seed) {
    auto id = engine->AddRequest(Prompt("The book of"),
                                 Sampled({.kind = OutputConstraint::Kind::kJsonSchema, .text = kVerseSchema}, seed));
    ASSERT_THAT(id, IsOk());
    ids.push_back(*id);
  }
  std::map<SeqId, Outcome> runs = RunToCompletion(*engine);
  for (SeqId id : ids) {
    const Outcome& run = runs[id];
    ASSERT_EQ(run.finish, FinishReason::kStop) << TextOf(run);
    const nlohmann::json value = nlohmann::json::parse(TextOf(run), nullptr, false);
    ASSERT_TRUE(value.is_object()) << TextOf(run);
    EXPECT_EQ(value.size(), 3u) << TextOf(run);
    EXPECT_TRUE(value["chapter"].is_number_integer() && value["chapter"] >= 1 && value["chapter"] <= 150)
        << TextOf(run);
    EXPECT_LE(value["words"].get<std::string>().size(), 24u) << TextOf(run);
  }
}

TEST_F(StructuredOutputEngineTest, RegexAndChoiceHold) {
  auto engine = MakeEngine();
  const std::string pattern = "(Genesis|Psalms) [1-9][0-9]?:[1-9][0-9]?";
  const std::vector<std::string> choices = {"the shepherd", "the king", "the LORD"};
  std::map<SeqId, bool> is_regex;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    is_regex[*engine->AddRequest(Prompt("It is written in"),
                                 Sampled({.kind = OutputConstraint::Kind::kRegex, .text = pattern}, seed, 20))] = true;
    is_regex[*engine->AddRequest(Prompt("Who spoke?"),
                                 Sampled({.kind = OutputConstraint::Kind::kChoice, .choices = choices}, seed, 20))] = false;
  }
  for (const auto& [id, run] : RunToCompletion(*engine)) {
    ASSERT_EQ(run.finish, FinishReason::kStop) << TextOf(run);
    if (is_regex[id]) {
      EXPECT_TRUE(std::regex_match(TextOf(run), std::regex(pattern))) << TextOf(run);
    } else {
      EXPECT_THAT(choices, ::testing::Contains(TextOf(run)));
    }
  }
}

TEST_F(StructuredOutputEngineTest, EmulatedDeviceAndTensorParallelDrawTheCpuTokens) {
  const GenerationParams params = Sampled({.kind = OutputConstraint::Kind::kJsonSchema, .text = kVerseSchema}, 5);
  auto cpu = MakeEngine();
  const SeqId id = *cpu->AddRequest(Prompt("The book of"), params);
  const Outcome expected = RunToCompletion(*cpu)[id];
  ASSERT_EQ(expected.finish, FinishReason::kStop);
  for (const auto& [device, tp] : {std::pair{DeviceKind::kCudaEmulated, 1}, std::pair{DeviceKind::kCpu, 2}}) {
    SCOPED_TRACE(absl::StrCat("device ", static_cast<int>(device), " tp ", tp));
    auto engine = MakeEngine(device, tp);
    const SeqId other = *engine->AddRequest(Prompt("The book of"), params);
    EXPECT_EQ(RunToCompletion(*engine)[other].tokens, expected.tokens);
  }
}

TEST_F(StructuredOutputEngineTest, ResumedAndHandedOverRequestsContinueTheSameRun) {
  const std::vector<int32_t> prompt = Prompt("The book of");
  const GenerationParams params = Sampled({.kind = OutputConstraint::Kind::kJsonSchema, .text = kVerseSchema}, 9);
  auto first = MakeEngine();
  const SeqId first_id = *first->AddRequest(prompt, params);
  const std::vector<int32_t> expected = RunToCompletion(*first)[first_id].tokens;
  ASSERT_GE(expected.size(), 8u);
  for (size_t k : {size_t{1}, size_t{5}}) {
    SCOPED_TRACE(absl::StrCat(k, " tokens generated"));
    const std::vector<int32_t> done(expected.begin(), expected.begin() + k);
    auto resumed = MakeEngine();
    const SeqId id = *resumed->AddRequest(prompt, params, done);
    EXPECT_EQ(RunToCompletion(*resumed)[id].tokens, std::vector<int32_t>(expected.begin() + k, expected.end()));

    // Disaggregated: the prefill samples token k under the grammar, the decode engine replays k + 1.
    auto prefill = MakeEngine();
    GenerationParams prefill_params = params;
    prefill_params.hold_kv_after_prefill = true;
    const SeqId p_id = *prefill->AddRequest(prompt, prefill_params, done);
    ASSERT_EQ(RunToCompletion(*prefill)[p_id].tokens, std::vector<int32_t>{expected[k]});
    auto held = prefill->GetHeldKv(p_id);
    ASSERT_THAT(held, IsOk());
    std::vector<int32_t> generated = done;
    generated.push_back(expected[k]);
    auto decode = MakeEngine();
    auto d_id = decode->AdmitPrefilled(prompt, generated, params);
    ASSERT_THAT(d_id, IsOk());
    ASSERT_NO_FATAL_FAILURE(TransferKv(*prefill, *held, *decode, *d_id));
    ASSERT_THAT(decode->StartDecoding(*d_id), IsOk());
    EXPECT_EQ(RunToCompletion(*decode)[*d_id].tokens, std::vector<int32_t>(expected.begin() + k + 1, expected.end()));
  }
}

TEST_F(StructuredOutputEngineTest, RefusesWhatDoesNotCompileOrFollow) {
  auto engine = MakeEngine();
  EXPECT_THAT(engine->AddRequest(Prompt("x"), Sampled({.kind = OutputConstraint::Kind::kRegex, .text = "(a"}, 0)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("regex")));
  EXPECT_THAT(engine->AddRequest(Prompt("x"), Sampled({.kind = OutputConstraint::Kind::kChoice, .choices = {"yes"}}, 0),
                                 tokenizer_->Encode("no", false)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not follow")));
  EXPECT_EQ(engine->num_sequences(), 0);
}

TEST_F(StructuredOutputEngineTest, TheOutputEndsOnceCompleteEvenWithIgnoreEos) {
  auto engine = MakeEngine();
  GenerationParams params = Sampled({.kind = OutputConstraint::Kind::kChoice, .choices = {"Amen"}}, 1, 30);
  params.ignore_eos = true;
  const SeqId id = *engine->AddRequest(Prompt("Say"), params);
  const Outcome run = RunToCompletion(*engine)[id];
  EXPECT_EQ(run.finish, FinishReason::kStop);
  EXPECT_EQ(TextOf(run), "Amen");
}

// min_tokens masks the stop tokens; once the grammar is complete they are all it allows. The
// grammar wins: the output ends there, and nothing else in the engine is disturbed.
TEST_F(StructuredOutputEngineTest, MinTokensCannotOutlastACompleteGrammar) {
  auto engine = MakeEngine();
  GenerationParams params = Sampled({.kind = OutputConstraint::Kind::kChoice, .choices = {"Amen"}}, 1, 30);
  params.logits_processors.min_tokens = 20;
  const SeqId id = *engine->AddRequest(Prompt("Say"), params);
  GenerationParams unconstrained = Sampled({}, 2, 10);
  unconstrained.ignore_eos = true;
  const SeqId other = *engine->AddRequest(Prompt("And the king said"), unconstrained);
  std::map<SeqId, Outcome> runs = RunToCompletion(*engine);
  EXPECT_EQ(runs[id].finish, FinishReason::kStop);
  EXPECT_EQ(TextOf(runs[id]), "Amen");
  EXPECT_EQ(runs[other].tokens.size(), 10u);
}

}  // namespace
}  // namespace baton::runtime
