#include "benchmarks/bench/fault_injector.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "baton/v1/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "runtime/rpc/internal_auth.h"
#include "runtime/rpc/proto_conversion.h"

namespace baton::bench {
namespace {

// The value of `flag` in `args` ("--flag VALUE" or "--flag=VALUE").
std::optional<absl::string_view> FlagValue(const std::vector<absl::string_view>& args,
                                          absl::string_view flag) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) return args[i + 1];
    if (args[i].size() > flag.size() && args[i].substr(0, flag.size()) == flag &&
        args[i][flag.size()] == '=') {
      return args[i].substr(flag.size() + 1);
    }
  }
  return std::nullopt;
}

}  // namespace

WorkerLister RegistryWorkerLister(const std::string& target, std::string secret,
                                  absl::Duration deadline) {
  std::shared_ptr<v1::WorkerRegistryService::Stub> stub = v1::WorkerRegistryService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  return [stub, target, secret = std::move(secret),
          deadline]() -> absl::StatusOr<std::vector<RegisteredWorker>> {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    rpc::AttachDeploymentSecret(context, secret);
    v1::ListWorkersResponse response;
    const grpc::Status status = stub->ListWorkers(&context, v1::ListWorkersRequest(), &response);
    if (!status.ok()) {
      return absl::UnavailableError(absl::StrCat("ListWorkers at ", target, ": ",
                                                 status.error_message()));
    }
    std::vector<RegisteredWorker> workers;
    for (const v1::ListWorkersResponse::Worker& worker : response.workers()) {
      const std::optional<runtime::WorkerRole> role = rpc::FromProto(worker.role());
      if (!role) continue;
      workers.push_back({.role = *role,
                         .instance_idx = worker.instance_idx(),
                         .pid = worker.pid(),
                         .alive = worker.alive()});
    }
    return workers;
  };
}

absl::Status SignalLocalWorker(const RegisteredWorker& worker, int signal) {
  const std::string name = runtime::WorkerName(worker.role, worker.instance_idx);
  if (worker.pid <= 1) return absl::FailedPreconditionError(absl::StrCat(name, " registered no pid"));
  std::ifstream in(absl::StrCat("/proc/", worker.pid, "/cmdline"), std::ios::binary);
  if (!in.is_open()) {
    return absl::NotFoundError(absl::StrCat(name, ": no process ", worker.pid, " on this host"));
  }
  const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<absl::string_view> args = absl::StrSplit(cmdline, '\0');
  const bool is_worker = std::find(args.begin(), args.end(), "worker") != args.end();
  const std::optional<absl::string_view> role = FlagValue(args, "--role");
  const std::optional<absl::string_view> instance_text = FlagValue(args, "--instance");
  int instance = 0;  // `baton worker`'s default
  if (instance_text && !absl::SimpleAtoi(*instance_text, &instance)) instance = -1;
  if (!is_worker || role != runtime::WorkerRoleName(worker.role) || instance != worker.instance_idx) {
    return absl::FailedPreconditionError(
        absl::StrCat("process ", worker.pid, " is not ", name,
                     " (the bench must run on the worker's host)"));
  }
  if (kill(worker.pid, signal) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("kill ", worker.pid, " (", name, ")"));
  }
  return absl::OkStatus();
}

FaultInjector::FaultInjector(std::vector<FaultSpec> specs, WorkerLister lister,
                             WorkerSignaller signaller, uint64_t seed)
    : specs_(std::move(specs)),
      lister_(std::move(lister)),
      signaller_(std::move(signaller)),
      rng_(DeriveSeed(seed, /*stream_idx=*/0xfa017)) {}

FaultInjector::~FaultInjector() { Stop(); }

void FaultInjector::Start() {
  if (thread_.joinable() || specs_.empty()) return;
  thread_ = std::thread([this, start = absl::Now()] { Loop(start); });
}

void FaultInjector::Loop(absl::Time start) {
  std::vector<int64_t> num_dealt(specs_.size(), 0);
  for (;;) {
    // The spec due soonest (ties: the first listed).
    size_t next = 0;
    for (size_t i = 1; i < specs_.size(); ++i) {
      if (specs_[i].period * (num_dealt[i] + 1) < specs_[next].period * (num_dealt[next] + 1)) next = i;
    }
    const absl::Time due = start + specs_[next].period * (num_dealt[next] + 1);
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithDeadline(absl::Condition(&stopping_), due)) return;
    }
    ++num_dealt[next];
    FaultEvent event = Deal(specs_[next], absl::ToDoubleSeconds(absl::Now() - start));
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(event));
  }
}

FaultEvent FaultInjector::Deal(const FaultSpec& spec, double time_s) {
  FaultEvent event{.time_s = time_s, .action = spec.action};
  absl::StatusOr<std::vector<RegisteredWorker>> workers = lister_();
  if (!workers.ok()) {
    event.error = std::string(workers.status().message());
    return event;
  }
  std::vector<RegisteredWorker> live;
  for (const RegisteredWorker& worker : *workers) {
    if (worker.alive && worker.role == spec.role) live.push_back(worker);
  }
  if (live.empty()) {
    event.error = absl::StrCat("no live ", runtime::WorkerRoleName(spec.role), " worker");
    return event;
  }
  const RegisteredWorker& victim =
      live[static_cast<size_t>(rng_.UniformInt(0, static_cast<int64_t>(live.size()) - 1))];
  event.worker = runtime::WorkerName(victim.role, victim.instance_idx);
  event.pid = victim.pid;
  const absl::Status signalled =
      signaller_(victim, spec.action == FaultAction::kKill ? SIGKILL : SIGSTOP);
  if (!signalled.ok()) {
    event.error = std::string(signalled.message());
  } else if (spec.action == FaultAction::kFreeze) {
    absl::MutexLock lock(&mu_);
    frozen_.push_back(victim);
  }
  return event;
}

std::vector<FaultEvent> FaultInjector::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  // A frozen worker the deployment already killed is gone (NotFound): nothing to wake.
  for (const RegisteredWorker& worker : frozen_) signaller_(worker, SIGCONT).IgnoreError();
  frozen_.clear();
  return events_;
}

}  // namespace baton::bench
