// Fuzz target: the deployment config parser (ParseDeploymentConfig: YAML or JSON, then validation),
// and ParseByteSize on the same text.
//
// Input: a config file's text. A config that parses is checked against the header's promise that
// ParseDeploymentConfig(ToYaml(c)) == c, and moved with SetSchedulerPort as `baton serve
// --grpc-port` does (a valid result must round-trip too); the target aborts when a round trip fails.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/config/deployment_config.h"

namespace {

using baton::scheduler::DeploymentConfig;

void CheckRoundTrip(const DeploymentConfig& config) {
  const std::string yaml = baton::scheduler::ToYaml(config);
  absl::StatusOr<DeploymentConfig> again = baton::scheduler::ParseDeploymentConfig(yaml);
  if (!again.ok() || !(*again == config)) {
    std::fprintf(stderr, "ToYaml does not round-trip: %s\n--- ToYaml:\n%s",
                 again.ok() ? "a different config" : std::string(again.status().message()).c_str(),
                 yaml.c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  baton::scheduler::ParseByteSize(text).status().IgnoreError();
  absl::StatusOr<DeploymentConfig> config = baton::scheduler::ParseDeploymentConfig(text);
  if (!config.ok()) return 0;
  CheckRoundTrip(*config);
  baton::scheduler::WorkerInstances(*config);
  for (int port : {1, 8080, 65535}) {
    DeploymentConfig moved = *config;
    // A move may land a port on http_port: only a valid result has to round-trip.
    if (baton::scheduler::SetSchedulerPort(moved, port).ok() &&
        baton::scheduler::ValidateDeploymentConfig(moved).ok()) {
      CheckRoundTrip(moved);
    }
  }
  return 0;
}
