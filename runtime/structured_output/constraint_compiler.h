// ConstraintCompiler: turns OutputConstraints into grammars compiled against one tokenizer's
// vocabulary, and ConstraintMatcher: one sequence's walk through such a grammar, which says which
// tokens may come next (a bitmask over the vocabulary) and takes the tokens sampled.
//
// Both wrap xgrammar's C++ core (third_party/CMakeLists.txt), the grammar engine vLLM, SGLang and
// TensorRT-LLM use; its exceptions stop here and come out as absl::Status. Compiled grammars are
// cached by the compiler (xgrammar's cache, keyed by the constraint's text), so a schema that many
// requests share compiles once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/structured_output/output_constraint.h"

namespace baton::runtime {

class Tokenizer;
struct CompiledConstraint;  // an xgrammar::CompiledGrammar; shared by the matchers made from it

// The number of int32 words of a bitmask over `vocab_size` tokens: bit (id % 32) of word id / 32
// is set when token id may come next.
int32_t TokenBitmaskWords(int vocab_size);

class ConstraintMatcher {
 public:
  ConstraintMatcher(ConstraintMatcher&&) noexcept;
  ConstraintMatcher& operator=(ConstraintMatcher&&) noexcept;
  ~ConstraintMatcher();

  // Writes the tokens that may come next into `bitmask` (TokenBitmaskWords(vocab_size) words).
  // Returns false when every token may (nothing to mask). Once the grammar is complete, only the
  // stop tokens may come.
  bool FillNextTokenBitmask(std::span<int32_t> bitmask);
  // Advances past `token_id`; FailedPrecondition when the grammar does not allow it (the bitmask
  // said so; a caller that sampled under the mask never sees this).
  absl::Status AcceptToken(int32_t token_id);
  // The grammar is complete and a stop token was accepted: nothing more may come.
  bool IsTerminated() const;

 private:
  friend class ConstraintCompiler;
  struct Impl;
  explicit ConstraintMatcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class ConstraintCompiler {
 public:
  // The vocabulary of `tokenizer` (its tokens as tokenizer.json writes them), whose encoding
  // (byte-level, byte-fallback or raw) xgrammar reads from `tokenizer_json`, padded to the
  // model's `vocab_size` (ids past the tokenizer's never match). `stop_token_ids` end a complete
  // output (the model's EOS ids).
  static absl::StatusOr<std::unique_ptr<ConstraintCompiler>> Create(
      const Tokenizer& tokenizer, std::string_view tokenizer_json, int vocab_size,
      std::vector<int32_t> stop_token_ids);
  // The same from a model directory's tokenizer.json. FailedPrecondition saying that structured
  // outputs need the tokenizer when it is missing or unreadable.
  static absl::StatusOr<std::unique_ptr<ConstraintCompiler>> FromModelDir(
      const std::filesystem::path& model_dir, int vocab_size, std::vector<int32_t> stop_token_ids);
  ~ConstraintCompiler();

  // The grammar of `constraint`, compiled (or from the cache); safe to call from several threads. InvalidArgument naming what is
  // wrong or unsupported (a schema keyword, a regex construct, a grammar's syntax) for one that
  // does not compile; `constraint` must be active.
  absl::StatusOr<std::shared_ptr<const CompiledConstraint>> Compile(const OutputConstraint& constraint);

  // A matcher at the start of `compiled`.
  ConstraintMatcher NewMatcher(const std::shared_ptr<const CompiledConstraint>& compiled) const;

  int vocab_size() const { return vocab_size_; }

 private:
  struct Impl;
  ConstraintCompiler(std::unique_ptr<Impl> impl, int vocab_size);
  std::unique_ptr<Impl> impl_;
  int vocab_size_;
};

// An EBNF grammar (root rule `root`) whose language is exactly `choices`, each as a string literal.
std::string ChoiceGrammar(const std::vector<std::string>& choices);

}  // namespace baton::runtime
