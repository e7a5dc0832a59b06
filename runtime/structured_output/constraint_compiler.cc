#include "runtime/structured_output/constraint_compiler.h"

#include <dlpack/dlpack.h>
#include <xgrammar/xgrammar.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/tokenizer.h"

namespace baton::runtime {

struct CompiledConstraint {
  xgrammar::CompiledGrammar grammar;
};

int32_t TokenBitmaskWords(int vocab_size) { return xgrammar::GetBitmaskSize(vocab_size); }

namespace {

// JSON may be laid out freely (compact, or indented as a model was trained to write it), but a run
// of whitespace between two tokens is bounded: unbounded, a sampled answer can spend every token
// on newlines and never close (xgrammar's max_whitespace_cnt).
constexpr int kMaxJsonWhitespace = 16;

// A DLTensor view of one bitmask row, as xgrammar's matcher writes it.
DLTensor BitmaskTensor(std::span<int32_t> bitmask, int64_t* shape) {
  *shape = static_cast<int64_t>(bitmask.size());
  DLTensor tensor{};
  tensor.data = bitmask.data();
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = 1;
  tensor.dtype = xgrammar::GetBitmaskDLType();
  tensor.shape = shape;
  tensor.strides = nullptr;
  tensor.byte_offset = 0;
  return tensor;
}

// A string literal of xgrammar's EBNF: quotes and backslashes escaped, control characters as
// fixed-width \u escapes (its \x takes any number of hex digits, so "\x0a" then "b" would merge).
std::string EbnfLiteral(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", byte);
      out += escaped;
    } else {
      out += c;  // UTF-8 passes through: the grammar parser reads code points
    }
  }
  return out + "\"";
}

}  // namespace

std::string ChoiceGrammar(const std::vector<std::string>& choices) {
  std::string grammar = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) grammar += " | ";
    grammar += choices[i].empty() ? "\"\"" : EbnfLiteral(choices[i]);
  }
  return grammar;
}

struct ConstraintMatcher::Impl {
  xgrammar::GrammarMatcher matcher;
};

ConstraintMatcher::ConstraintMatcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConstraintMatcher::ConstraintMatcher(ConstraintMatcher&&) noexcept = default;
ConstraintMatcher& ConstraintMatcher::operator=(ConstraintMatcher&&) noexcept = default;
ConstraintMatcher::~ConstraintMatcher() = default;

bool ConstraintMatcher::FillNextTokenBitmask(std::span<int32_t> bitmask) {
  int64_t shape = 0;
  DLTensor tensor = BitmaskTensor(bitmask, &shape);
  return impl_->matcher.FillNextTokenBitmask(&tensor);
}

absl::Status ConstraintMatcher::AcceptToken(int32_t token_id) {
  try {
    if (impl_->matcher.AcceptToken(token_id)) return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(absl::StrCat("token ", token_id, ": ", e.what()));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("token ", token_id, " does not continue the output's grammar"));
}

bool ConstraintMatcher::IsTerminated() const { return impl_->matcher.IsTerminated(); }

struct ConstraintCompiler::Impl {
  xgrammar::GrammarCompiler compiler;
};

ConstraintCompiler::ConstraintCompiler(std::unique_ptr<Impl> impl, int vocab_size)
    : impl_(std::move(impl)), vocab_size_(vocab_size) {}
ConstraintCompiler::~ConstraintCompiler() = default;

absl::StatusOr<std::unique_ptr<ConstraintCompiler>> ConstraintCompiler::Create(
    const Tokenizer& tokenizer, std::string_view tokenizer_json, int vocab_size,
    std::vector<int32_t> stop_token_ids) {
  if (vocab_size < tokenizer.vocab_size()) {
    return absl::InvalidArgumentError(absl::StrCat("the model's vocab_size ", vocab_size,
                                                   " is below the tokenizer's ", tokenizer.vocab_size()));
  }
  // Special tokens (chat markers and the like) stay out of the text a grammar can match: xgrammar
  // takes an empty token as one that never matches. The stop tokens are listed apart.
  std::vector<std::string> encoded_vocab(tokenizer.vocab_size());
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.IsSpecial(id)) continue;
    if (const std::optional<std::string_view> token = tokenizer.IdToToken(id)) {
      encoded_vocab[id] = std::string(*token);
    }
  }
  try {
    // xgrammar reads the vocabulary's encoding from tokenizer.json (its decoder and normalizer).
    const nlohmann::json metadata =
        nlohmann::json::parse(xgrammar::TokenizerInfo::DetectMetadataFromHF(std::string(tokenizer_json)));
    xgrammar::TokenizerInfo info(encoded_vocab,
                                 static_cast<xgrammar::VocabType>(metadata.at("vocab_type").get<int>()),
                                 vocab_size, stop_token_ids, metadata.at("add_prefix_space").get<bool>());
    // One compile thread: the engine compiles beside its own compute threads.
    auto impl = std::make_unique<Impl>(Impl{xgrammar::GrammarCompiler(info, /*max_threads=*/1)});
    return std::unique_ptr<ConstraintCompiler>(new ConstraintCompiler(std::move(impl), vocab_size));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("structured outputs: the tokenizer: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<ConstraintCompiler>> ConstraintCompiler::FromModelDir(
    const std::filesystem::path& model_dir, int vocab_size, std::vector<int32_t> stop_token_ids) {
  const std::filesystem::path path = model_dir / "tokenizer.json";
  const auto unavailable = [&](const absl::Status& status) {
    return absl::FailedPreconditionError(
        absl::StrCat("structured outputs need the model's tokenizer: ", status.message()));
  };
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromFile(path);
  if (!tokenizer.ok()) return unavailable(tokenizer.status());
  std::ifstream in(path, std::ios::binary);
  std::stringstream json;
  json << in.rdbuf();
  absl::StatusOr<std::unique_ptr<ConstraintCompiler>> compiler =
      Create(**tokenizer, json.str(), vocab_size, std::move(stop_token_ids));
  if (!compiler.ok()) return unavailable(compiler.status());
  return compiler;
}

absl::StatusOr<std::shared_ptr<const CompiledConstraint>> ConstraintCompiler::Compile(
    const OutputConstraint& constraint) {
  using Kind = OutputConstraint::Kind;
  try {
    xgrammar::GrammarCompiler& compiler = impl_->compiler;
    switch (constraint.kind) {
      case Kind::kNone:
        return absl::InvalidArgumentError("no output constraint to compile");
      case Kind::kJsonObject:
        // An object, as OpenAI's json_object promises (xgrammar's builtin JSON grammar takes any
        // value), with whatever properties (strict mode would allow none).
        return std::make_shared<const CompiledConstraint>(CompiledConstraint{compiler.CompileJSONSchema(
            R"({"type": "object"})", constraint.any_whitespace, std::nullopt, std::nullopt, /*strict_mode=*/false,
            kMaxJsonWhitespace)});
      case Kind::kJsonSchema:
        return std::make_shared<const CompiledConstraint>(CompiledConstraint{compiler.CompileJSONSchema(
            constraint.text, constraint.any_whitespace, std::nullopt, std::nullopt, constraint.strict,
            kMaxJsonWhitespace)});
      case Kind::kRegex:
        return std::make_shared<const CompiledConstraint>(CompiledConstraint{compiler.CompileRegex(constraint.text)});
      case Kind::kChoice:
        if (constraint.choices.empty()) return absl::InvalidArgumentError("choice: the list of choices is empty");
        return std::make_shared<const CompiledConstraint>(
            CompiledConstraint{compiler.CompileGrammar(ChoiceGrammar(constraint.choices))});
      case Kind::kGrammar:
        return std::make_shared<const CompiledConstraint>(CompiledConstraint{compiler.CompileGrammar(constraint.text)});
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(OutputConstraintKindName(constraint.kind), ": ", e.what()));
  }
  return absl::InvalidArgumentError("unknown output constraint");
}

ConstraintMatcher ConstraintCompiler::NewMatcher(const std::shared_ptr<const CompiledConstraint>& compiled) const {
  return ConstraintMatcher(std::make_unique<ConstraintMatcher::Impl>(
      ConstraintMatcher::Impl{xgrammar::GrammarMatcher(compiled->grammar)}));
}

}  // namespace baton::runtime
