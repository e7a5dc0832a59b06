#include "runtime/structured_output/sequence_constraints.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace baton::runtime {

// One thread that fills the bitmasks of the jobs it is handed, in order.
class SequenceConstraints::Filler {
 public:
  struct Job {
    std::vector<SeqState*> seqs;
    std::shared_ptr<PendingFill> fill;
  };
  Filler() : thread_([this] { Run(); }) {}
  ~Filler() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  void Post(Job job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
  }

 private:
  void Run() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping, with nothing left to fill
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      for (SeqState* seq : job.seqs) seq->matcher.FillNextTokenBitmask(seq->bitmask);
      job.fill->Done();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is ready
};

SequenceConstraints::SequenceConstraints(std::filesystem::path model_dir, int vocab_size,
                                         std::vector<int32_t> stop_token_ids)
    : model_dir_(std::move(model_dir)), vocab_size_(vocab_size), stop_token_ids_(std::move(stop_token_ids)) {}

SequenceConstraints::~SequenceConstraints() {
  WaitForFills();
  filler_.reset();
}

void SequenceConstraints::WaitForFills() {
  for (const std::shared_ptr<PendingFill>& fill : fills_in_flight_) fill->Wait(absl::InfiniteDuration()).IgnoreError();
  fills_in_flight_.clear();
}

std::shared_ptr<const PendingFill> SequenceConstraints::FillBitmasksAsync(std::span<const int64_t> seq_ids) {
  WaitForFills();
  if (filler_ == nullptr) filler_ = std::make_unique<Filler>();
  Filler::Job job{.fill = std::make_shared<PendingFill>()};
  for (int64_t id : seq_ids) job.seqs.push_back(&seqs_.at(id));
  fills_in_flight_.push_back(job.fill);
  std::shared_ptr<const PendingFill> fill = job.fill;
  filler_->Post(std::move(job));
  return fill;
}

absl::StatusOr<ConstraintCompiler*> SequenceConstraints::Compiler() {
  std::lock_guard<std::mutex> lock(compiler_mu_);
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
  WaitForFills();
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
  WaitForFills();
  SeqState& state = seqs_.at(seq_id);
  state.matcher.FillNextTokenBitmask(state.bitmask);
  return state.bitmask;
}

absl::Status SequenceConstraints::Accept(int64_t seq_id, int32_t token_id) {
  WaitForFills();
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
