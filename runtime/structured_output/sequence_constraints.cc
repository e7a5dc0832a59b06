#include "runtime/structured_output/sequence_constraints.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace baton::runtime {

SequenceConstraints::SequenceConstraints(std::filesystem::path model_dir, int vocab_size,
                                         std::vector<int32_t> stop_token_ids)
    : model_dir_(std::move(model_dir)), vocab_size_(vocab_size), stop_token_ids_(std::move(stop_token_ids)) {}

SequenceConstraints::~SequenceConstraints() = default;

absl::StatusOr<ConstraintCompiler*> SequenceConstraints::Compiler() {
  if (compiler_ == nullptr) {
    ASSIGN_OR_RETURN(compiler_, ConstraintCompiler::FromModelDir(model_dir_, vocab_size_, stop_token_ids_));
  }
  return compiler_.get();
}

absl::Status SequenceConstraints::Check(const OutputConstraint& constraint) {
  ASSIGN_OR_RETURN(ConstraintCompiler * compiler, Compiler());
  return compiler->Compile(constraint).status();
}

absl::Status SequenceConstraints::Add(int64_t seq_id, const OutputConstraint& constraint,
                                      std::span<const int32_t> generated) {
  ASSIGN_OR_RETURN(ConstraintCompiler * compiler, Compiler());
  ASSIGN_OR_RETURN(std::shared_ptr<const CompiledConstraint> compiled, compiler->Compile(constraint));
  ConstraintMatcher matcher = compiler->NewMatcher(compiled);
  for (size_t i = 0; i < generated.size(); ++i) {
    if (const absl::Status accepted = matcher.AcceptToken(generated[i]); !accepted.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("generated token ", i, " (id ", generated[i],
                                                     ") does not follow the output's ",
                                                     OutputConstraintKindName(constraint.kind)));
    }
  }
  seqs_.insert_or_assign(seq_id, SeqState{.matcher = std::move(matcher),
                                          .bitmask = std::vector<int32_t>(TokenBitmaskWords(vocab_size_))});
  return absl::OkStatus();
}

std::span<const int32_t> SequenceConstraints::NextTokenBitmask(int64_t seq_id) {
  SeqState& state = seqs_.at(seq_id);
  state.matcher.FillNextTokenBitmask(state.bitmask);
  return state.bitmask;
}

absl::Status SequenceConstraints::Accept(int64_t seq_id, int32_t token_id) {
  const absl::Status accepted = seqs_.at(seq_id).matcher.AcceptToken(token_id);
  if (accepted.ok()) return accepted;
  return absl::InternalError(absl::StrCat("sequence ", seq_id, " sampled a token its grammar refuses: ",
                                          accepted.message()));
}

bool SequenceConstraints::IsTerminated(int64_t seq_id) const { return seqs_.at(seq_id).matcher.IsTerminated(); }

bool SequenceConstraints::OnlyStopTokensAllowed(int64_t seq_id) const {
  std::vector<int32_t> others = seqs_.at(seq_id).bitmask;
  for (int32_t stop : stop_token_ids_) {
    if (stop >= 0 && stop < vocab_size_) others[stop / 32] &= ~static_cast<int32_t>(1u << (stop % 32));
  }
  return std::all_of(others.begin(), others.end(), [](int32_t word) { return word == 0; });
}

}  // namespace baton::runtime
