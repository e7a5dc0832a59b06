#include "runtime/worker/kv_admission_queue.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"

namespace baton::runtime {

absl::StatusOr<KvAdmission> KvAdmissionTicket::Wait(const WaitParams& params) {
  while (true) {
    // The stop conditions first: a caller past its deadline or cancelled never gets blocks.
    absl::Status stop;
    const absl::Time now = absl::Now();
    if (now >= params.deadline) {
      stop = absl::DeadlineExceededError("no KV room before the deadline");
    } else if (params.is_cancelled && params.is_cancelled()) {
      stop = absl::CancelledError("cancelled while waiting for KV room");
    }
    std::optional<SeqId> raced;
    {
      absl::MutexLock lock(&mu_);
      if (stop.ok()) {
        if (result_) return *std::move(result_);
        auto answered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return result_.has_value(); };
        mu_.AwaitWithDeadline(absl::Condition(&answered),
                              std::min(params.deadline, now + params.poll_interval));
        continue;  // look at the stop conditions again before taking a result
      }
      abandoned_ = true;
      if (result_ && result_->ok()) raced = (*result_)->seq_id;
      result_.reset();
    }
    if (raced && params.free_admitted) params.free_admitted(*raced);
    return stop;
  }
}

KvAdmissionTicket::Outcome KvAdmissionTicket::TryAdmit(KvAdmitter& admitter) {
  absl::MutexLock lock(&mu_);
  if (abandoned_) return Outcome::kDropped;
  if (!admitter.CanAdmit(request_)) return Outcome::kBlocked;
  result_ = admitter.Admit(std::move(request_));
  return Outcome::kAnswered;
}

void KvAdmissionTicket::Reject(absl::Status status) {
  absl::MutexLock lock(&mu_);
  result_ = std::move(status);
}

bool KvAdmissionTicket::abandoned() const {
  absl::MutexLock lock(&mu_);
  return abandoned_;
}

void KvAdmissionQueue::Enqueue(std::shared_ptr<KvAdmissionTicket> ticket,
                               const KvAdmitter& admitter) {
  absl::Status valid;
  {
    absl::MutexLock lock(&ticket->mu_);
    valid = admitter.Validate(ticket->request_);
  }
  if (!valid.ok()) {
    ticket->Reject(std::move(valid));
    return;
  }
  tickets_.push_back(std::move(ticket));
}

void KvAdmissionQueue::AdmitReady(KvAdmitter& admitter) {
  std::erase_if(tickets_, [](const auto& ticket) { return ticket->abandoned(); });
  while (!tickets_.empty()) {
    // A ticket abandoned since the sweep above is dropped here, unadmitted.
    if (tickets_.front()->TryAdmit(admitter) == KvAdmissionTicket::Outcome::kBlocked) return;
    tickets_.pop_front();
  }
}

}  // namespace baton::runtime
