// `baton worker`: one prefill, decode or colocated instance of a deployment.
#include <algorithm>
#include <csignal>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/signals.h"
#include "kernels/common/status_macros.h"
#include "runtime/process/deployment_secret.h"
#include "runtime/rpc/worker_server.h"
#include "scheduler/config/deployment_config.h"

namespace baton::cli {
namespace {

absl::Status RunWorker(const std::string& config_path, const std::string& secret_file,
                       const std::string& role_name, int instance) {
  ASSIGN_OR_RETURN(scheduler::DeploymentConfig config, scheduler::LoadDeploymentConfig(config_path));
  ASSIGN_OR_RETURN(const runtime::DeploymentSecret secret, runtime::DeploymentSecret::Load(secret_file));
  ASSIGN_OR_RETURN(runtime::WorkerRole role, runtime::ParseWorkerRole(role_name));
  const std::vector<runtime::WorkerRole> roles = scheduler::Roles(config.mode);
  if (std::find(roles.begin(), roles.end(), role) == roles.end()) {
    return absl::InvalidArgumentError(absl::StrCat("--role ", role_name, ": not a role of a ",
                                                   scheduler::DeploymentModeName(config.mode),
                                                   " deployment"));
  }
  const scheduler::PhaseConfig& phase = scheduler::Phase(config, role);
  if (instance < 0 || instance >= phase.num_instances) {
    return absl::InvalidArgumentError(absl::StrCat("--instance ", instance, ": the ", role_name,
                                                   " phase has ", phase.num_instances, " instances"));
  }
  // A CUDA instance's rank r runs on device first + r (serve checks the ids are consecutive).
  const runtime::DeviceKind device = phase.cuda_emulated ? runtime::DeviceKind::kCudaEmulated
                                     : phase.on_cpu()    ? runtime::DeviceKind::kCpu
                                                         : runtime::DeviceKind::kCuda;
  const int first_device =
      device == runtime::DeviceKind::kCuda ? phase.cuda_device_ids[instance].front() : 0;
  runtime::WorkerOptions options{
      .role = role,
      .instance_idx = instance,
      .host = config.host,
      .port = phase.base_port + instance,
      .scheduler_address = absl::StrCat(config.host, ":", config.internal_port),
      .deployment_secret = secret.value(),
      .engine = runtime::EngineConfig{.model_dir = config.model_dir,
                                      .weight_dtype = config.weight_dtype,
                                      .parallel = {.tp_size = phase.tp,
                                                   .pp_size = phase.pp,
                                                   .stage_num_layers = phase.stage_num_layers},
                                      .device = device,
                                      .first_device_index = first_device,
                                      .decode_graphs = !phase.enforce_eager,
                                      .num_threads = phase.num_threads,  // per rank
                                      .block_size = config.block_size,
                                      .kv_cache_bytes = phase.kv_cache_bytes,
                                      .max_num_seqs = phase.max_num_seqs,
                                      .max_num_batched_tokens = phase.max_num_batched_tokens,
                                      .chunked_prefill = phase.chunked_prefill}};
  return rpc::RunWorkerServer(options, StopFlag());
}

}  // namespace

void RegisterWorkerCommand(CLI::App& app, int* exit_code) {
  auto config = std::make_shared<std::string>();
  auto role = std::make_shared<std::string>();
  auto instance = std::make_shared<int>(0);
  CLI::App* cmd = app.add_subcommand("worker", "One prefill, decode or colocated instance");
  auto secret_file = std::make_shared<std::string>();
  cmd->add_option("--config", *config, "Deployment config (YAML or JSON)")->required();
  cmd->add_option("--secret-file", *secret_file,
                  "The deployment secret (a file only its owner can read) shared with the scheduler")
      ->required();
  cmd->add_option("--role", *role, "prefill, decode or colocated")->required();
  cmd->add_option("--instance", *instance, "Instance index within the role")->capture_default_str();
  cmd->callback([=] {
    InstallStopSignalHandlers();
    *exit_code = ReportStatus("baton worker", RunWorker(*config, *secret_file, *role, *instance));
  });
}

}  // namespace baton::cli
