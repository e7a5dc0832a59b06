// SequenceConstraints: an engine's structured outputs. One matcher per constrained sequence over
// grammars compiled once per constraint (constraint_compiler.h), and the bitmask of each
// sequence's next token, which the sampler applies (TokenSampling::token_bitmask).
//
// A sequence that arrives with tokens already generated (a decode worker taking over a prefill, a
// request replayed after its worker died) has its matcher walked through them: the state is a
// function of the tokens, so nothing needs handing over, as with the logits processors' counts.
//
// A step's bitmasks may be filled on a helper thread while its forward pass runs
// (FillBitmasksAsync); the sampler waits for them where it applies them.
//
// The compiler loads the model's tokenizer.json on first use, so an engine that never sees a
// constrained request never reads it. The engine thread's only (the helper touches only the
// sequences it was handed, and every call here first waits for the fills in flight).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "runtime/batch/pending_fill.h"
#include "runtime/structured_output/constraint_compiler.h"
#include "runtime/structured_output/output_constraint.h"

namespace baton::runtime {

class SequenceConstraints {
 public:
  // `vocab_size`: the model's (its logits' width); `stop_token_ids`: what ends a complete output
  // (the model's EOS ids).
  SequenceConstraints(std::filesystem::path model_dir, int vocab_size, std::vector<int32_t> stop_token_ids);
  ~SequenceConstraints();

  // Whether `constraint` compiles: InvalidArgument naming what is wrong or unsupported, or the
  // tokenizer's error (FailedPrecondition) when the model directory has none this can read.
  absl::Status Check(const OutputConstraint& constraint);
  // Check, callable from any thread: compiles into the compiler's cache, where the engine thread's
  // Check and Add then find the grammar (a new schema's compile, some milliseconds, is not the
  // engine loop's to wait for).
  absl::Status Precompile(const OutputConstraint& constraint) { return Check(constraint); }
  // Starts `seq_id`'s matcher and walks it through `generated` (tokens sampled before). The errors
  // of Check, and InvalidArgument when `generated` does not follow the grammar.
  absl::Status Add(int64_t seq_id, const OutputConstraint& constraint, std::span<const int32_t> generated);
  bool Has(int64_t seq_id) const { return seqs_.contains(seq_id); }
  // The bitmask of the sequence's next token, valid until its next Accept or Erase. Pre-condition: Has.
  std::span<const int32_t> NextTokenBitmask(int64_t seq_id);
  // Starts filling the next-token bitmasks of `seq_ids` on the helper thread; each lands in its
  // BitmaskOf buffer, to be read once the returned fill is done. Pre-condition: Has, for each.
  std::shared_ptr<const PendingFill> FillBitmasksAsync(std::span<const int64_t> seq_ids);
  // The buffer the two above fill. Pre-condition: Has.
  std::span<const int32_t> BitmaskOf(int64_t seq_id) const { return seqs_.at(seq_id).bitmask; }
  // Advances past the token sampled; Internal when the grammar refuses it (a sampler that honoured
  // the bitmask cannot draw such a token). Pre-condition: Has.
  absl::Status Accept(int64_t seq_id, int32_t token_id);
  // The output is complete and its stop token was taken. Pre-condition: Has.
  bool IsTerminated(int64_t seq_id) const;
  // The last NextTokenBitmask allows stop tokens alone: the output is complete and cannot go on.
  // Pre-condition: Has.
  bool OnlyStopTokensAllowed(int64_t seq_id) const;
  void Erase(int64_t seq_id) {
    WaitForFills();
    seqs_.erase(seq_id);
  }
  int num_sequences() const { return static_cast<int>(seqs_.size()); }

 private:
  absl::StatusOr<ConstraintCompiler*> Compiler();
  // Waits until the helper has filled every bitmask handed to it (it finishes every job it takes:
  // pure computation over the matchers, so the wait is as long as the fill).
  void WaitForFills();

  struct SeqState {
    ConstraintMatcher matcher;
    std::vector<int32_t> bitmask;
  };
  class Filler;  // the helper thread
  std::filesystem::path model_dir_;
  int vocab_size_;
  std::vector<int32_t> stop_token_ids_;
  std::mutex compiler_mu_;  // Compiler() runs on any thread (Precompile)
  std::unique_ptr<ConstraintCompiler> compiler_;  // made on first use, under compiler_mu_
  absl::node_hash_map<int64_t, SeqState> seqs_;  // node: the helper holds SeqState pointers
  std::unique_ptr<Filler> filler_;                // started on first use
  std::vector<std::shared_ptr<PendingFill>> fills_in_flight_;
};

}  // namespace baton::runtime
