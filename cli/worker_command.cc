// `baton worker`: one prefill, decode or colocated instance of a deployment. `baton serve` starts
// one per instance on its own host; on another host one joins the deployment by hand:
//   baton worker --config deployment.yaml --secret-file secret --role decode --instance 1
//       --host 10.0.0.7 --scheduler 10.0.0.2:50054   (one command line)
#include <algorithm>
#include <csignal>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/log_level.h"
#include "cli/signals.h"
#include "kernels/common/status_macros.h"
#include "runtime/process/deployment_secret.h"
#include "runtime/rpc/worker_server.h"
#include "runtime/transfer/socket_io.h"
#include "scheduler/config/deployment_config.h"

namespace baton::cli {
namespace {

struct WorkerFlags {
  std::string config_path;
  std::string secret_file;
  std::string role;
  int instance = 0;
  std::string host;       // empty: the config's
  std::string advertise;  // empty: --host (a wildcard: this machine's name)
  std::string scheduler;  // empty: the config's host and internal_port
  std::string log_level;
  std::string step_trace;  // empty: none
};

absl::Status RunWorker(const WorkerFlags& flags) {
  ASSIGN_OR_RETURN(scheduler::DeploymentConfig config, scheduler::LoadDeploymentConfig(flags.config_path));
  ASSIGN_OR_RETURN(const runtime::DeploymentSecret secret,
                   runtime::DeploymentSecret::Load(flags.secret_file));
  const std::string& role_name = flags.role;
  const int instance = flags.instance;
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
      .host = flags.host.empty() ? config.host : flags.host,
      .advertise_host = flags.advertise,
      .port = phase.base_port + instance,
      .kv_port = phase.KvPort(instance, 0),
      .kv_link_pool_size = phase.kv_link_pool_size,
      .scheduler_address = flags.scheduler.empty()
                               ? runtime::FormatHostPort(config.host, config.internal_port)
                               : flags.scheduler,
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
                                      .kv_cache_dtype = config.kv_cache_dtype,
                                      .kv_cache_bytes = phase.kv_cache_bytes,
                                      .gpu_memory_utilization = phase.gpu_memory_utilization,
                                      .max_num_seqs = phase.max_num_seqs,
                                      .max_num_batched_tokens = phase.max_num_batched_tokens,
                                      .chunked_prefill = phase.chunked_prefill,
                                      .max_model_len = config.max_model_len,
                                      .swap_space_bytes = phase.swap_space_bytes,
                                      .enable_prefix_caching = config.enable_prefix_caching},
      .step_trace_path = flags.step_trace};
  return rpc::RunWorkerServer(options, StopFlag());
}

}  // namespace

void RegisterWorkerCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<WorkerFlags>();
  CLI::App* cmd = app.add_subcommand("worker", "One prefill, decode or colocated instance");
  cmd->add_option("--config", flags->config_path, "Deployment config (YAML or JSON)")->required();
  cmd->add_option("--secret-file", flags->secret_file,
                  "The deployment secret (a file only its owner can read) shared with the scheduler")
      ->required();
  cmd->add_option("--role", flags->role, "prefill, decode or colocated")->required();
  cmd->add_option("--instance", flags->instance, "Instance index within the role")
      ->capture_default_str();
  cmd->add_option("--host", flags->host,
                  "Address the worker API and KV server bind to (default: the config's host)");
  cmd->add_option("--advertise", flags->advertise,
                  "Address the scheduler and other workers dial to reach this worker (default: "
                  "--host; this machine's name when --host is 0.0.0.0)");
  cmd->add_option("--scheduler", flags->scheduler,
                  "HOST:PORT of the scheduler's internal port, where workers register (default: the "
                  "config's host and internal_port)");
  cmd->add_option("--step-trace", flags->step_trace,
                  "Append every engine step (its shape and times, JSON lines) to this file, for "
                  "`baton plan calibrate --step-traces`");
  AddLogLevelFlag(*cmd, &flags->log_level);
  cmd->callback([=] {
    StartLogging("baton worker", flags->log_level);
    InstallStopSignalHandlers();
    *exit_code = ReportStatus("baton worker", RunWorker(*flags));
  });
}

}  // namespace baton::cli
