#include "benchmarks/bench/fault.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace baton::bench {
namespace {

constexpr absl::Duration kMinPeriod = absl::Seconds(1);

absl::Status Invalid(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--fault ", text, ": ", why,
                                                 " (expected ROLE:ACTION:PERIOD, e.g. decode:kill:10s)"));
}

}  // namespace

const char* FaultActionName(FaultAction action) {
  switch (action) {
    case FaultAction::kKill: return "kill";
    case FaultAction::kFreeze: return "freeze";
  }
  return "?";
}

absl::StatusOr<FaultSpec> ParseFaultSpec(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() != 3) return Invalid(text, "three parts separated by ':'");
  FaultSpec spec;
  absl::StatusOr<runtime::WorkerRole> role = runtime::ParseWorkerRole(parts[0]);
  if (!role.ok()) return Invalid(text, role.status().message());
  spec.role = *role;
  if (parts[1] == "kill") {
    spec.action = FaultAction::kKill;
  } else if (parts[1] == "freeze") {
    spec.action = FaultAction::kFreeze;
  } else {
    return Invalid(text, absl::StrCat("unknown action \"", parts[1], "\" (kill, freeze)"));
  }
  double seconds = 0;
  if (absl::SimpleAtod(parts[2], &seconds)) {
    if (!(seconds >= 0) || seconds > 1e6) return Invalid(text, "the period is out of range");
    spec.period = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(parts[2], &spec.period)) {
    return Invalid(text, absl::StrCat("\"", parts[2], "\" is not a duration (10s, 1m30s, 45)"));
  }
  if (spec.period < kMinPeriod) {
    return Invalid(text, absl::StrCat("the period must be at least ", absl::FormatDuration(kMinPeriod)));
  }
  return spec;
}

std::string FaultSpecString(const FaultSpec& spec) {
  return absl::StrCat(runtime::WorkerRoleName(spec.role), ":", FaultActionName(spec.action), ":",
                      absl::FormatDuration(spec.period));
}

}  // namespace baton::bench
