#include "scheduler/service/liveness_prober.h"

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/log.h"
#include "runtime/rpc/internal_auth.h"

namespace baton::scheduler {
namespace {

bool IsLoopback(const std::string& address) {
  return absl::StartsWith(address, "127.") || absl::StartsWith(address, "localhost:") ||
         absl::StartsWith(address, "[::1]:");
}

// The state letter of /proc/<pid>/stat ("R", "S", "T", ...); nullopt when there is no such process.
std::optional<char> ProcessState(int pid) {
  std::ifstream file(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (pid <= 0 || !std::getline(file, line)) return std::nullopt;
  // "pid (comm) S ...": comm may hold spaces and parentheses, so read after the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return std::nullopt;
  return line[close + 2];
}

}  // namespace

LivenessProber::~LivenessProber() {
  for (auto& probe : probes_) probe->thread.join();
}

void LivenessProber::Check(absl::Time now) {
  for (auto it = probes_.begin(); it != probes_.end();) {
    if ((*it)->done.load()) {
      (*it)->thread.join();
      it = probes_.erase(it);
    } else {
      ++it;
    }
  }
  for (WorkerRegistry::Suspect& suspect : registry_->Suspects(now)) {
    auto probe = std::make_unique<Probe>();
    Probe* raw = probe.get();
    probe->thread = std::thread([this, raw, suspect = std::move(suspect)] {
      Run(suspect);
      raw->done = true;
    });
    probes_.push_back(std::move(probe));
  }
}

void LivenessProber::Run(const WorkerRegistry::Suspect& suspect) {
  const std::string silence = absl::StrCat("no heartbeat for ", absl::FormatDuration(suspect.silence));
  absl::Duration patience = probe_timeout_;
  if (IsLoopback(suspect.worker.address)) {
    const std::optional<char> state = ProcessState(suspect.pid);
    if (!state.has_value() || *state == 'T' || *state == 't' || *state == 'Z' || *state == 'X') {
      const std::string why = absl::StrCat(
          silence, "; its process is ",
          !state.has_value() ? "gone" : (*state == 'Z' || *state == 'X') ? "dead" : "stopped (frozen)");
      registry_->MarkDead(suspect.worker.incarnation_id, why);
      LogWarning(absl::StrCat(suspect.name, ": ", why));
      return;
    }
    patience = std::max(patience, kRunningPatience);
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + patience));
  rpc::AttachDeploymentSecret(context, stubs_->secret());
  v1::WorkerStats stats;
  const grpc::Status answered = stubs_->For(suspect.worker)->GetStats(&context, v1::GetStatsRequest(), &stats);
  if (answered.ok()) {
    registry_->Vouch(suspect.worker.incarnation_id, absl::Now());
    LogInfo(absl::StrCat(suspect.name, ": ", silence, ", but it answered a direct probe: kept (a busy host?)"));
    return;
  }
  const std::string why = absl::StrCat(silence, " and no answer to a probe within ", absl::FormatDuration(patience),
                                       " (", answered.error_message(), ")");
  registry_->MarkDead(suspect.worker.incarnation_id, why);
  LogWarning(absl::StrCat(suspect.name, ": ", why));
}

}  // namespace baton::scheduler
