// `baton scheduler`: the global scheduler of a deployment.
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/log_level.h"
#include "cli/signals.h"
#include "kernels/common/status_macros.h"
#include "runtime/process/deployment_secret.h"
#include "scheduler/config/deployment_config.h"
#include "scheduler/service/scheduler_server.h"

namespace baton::cli {
namespace {

absl::Status RunScheduler(const std::string& config_path, const std::string& secret_file,
                          const std::string& api_key, double drain_timeout_s,
                          const std::string& host) {
  ASSIGN_OR_RETURN(scheduler::DeploymentConfig config, scheduler::LoadDeploymentConfig(config_path));
  ASSIGN_OR_RETURN(const runtime::DeploymentSecret secret, runtime::DeploymentSecret::Load(secret_file));
  scheduler::SchedulerOptions options{
      .model_dir = config.model_dir,
      .served_model_names = config.served_model_names,
      .weight_dtype = config.weight_dtype,
      .host = host.empty() ? config.host : host,
      .port = config.scheduler_port,
      .http_port = config.http_port,
      .internal_port = config.internal_port,
      .deployment_secret = secret.value(),
      .api_key = api_key,
      .tls_cert = config.tls_cert,
      .tls_key = config.tls_key,
      .http_max_body_bytes = config.http_max_body_bytes,
      .chat_template = config.chat_template,
      .drain_timeout = absl::Seconds(drain_timeout_s),
      .disaggregated = config.mode == scheduler::DeploymentMode::kDisaggregated,
      .max_model_len = config.max_model_len,
      .liveness_timeout = absl::Milliseconds(config.liveness_timeout_ms),
      .max_local_prefill_tokens = config.max_local_prefill_tokens,
      .kv_aware_routing = config.routing_policy == scheduler::RoutingPolicy::kKvAware,
      .chat_reply = {.enable_auto_tool_choice = config.enable_auto_tool_choice,
                     .tool_call_parser = config.tool_call_parser,
                     .reasoning_parser = config.reasoning_parser}};
  if (scheduler::AdmissionEnabled(config.slo)) {
    options.admission = {.ttft_ms = config.slo.ttft_ms, .tpot_ms = config.slo.tpot_ms};
  }
  for (runtime::WorkerRole role : scheduler::Roles(config.mode)) {
    options.expected_workers.emplace_back(role,
                                          scheduler::Phase(config, role).num_instances);
  }
  return scheduler::RunSchedulerServer(options, StopFlag());
}

}  // namespace

void RegisterSchedulerCommand(CLI::App& app, int* exit_code) {
  auto config = std::make_shared<std::string>();
  auto secret_file = std::make_shared<std::string>();
  auto api_key = std::make_shared<std::string>();
  auto drain_timeout_s = std::make_shared<double>(30);
  auto host = std::make_shared<std::string>();
  auto log_level = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("scheduler", "The global scheduler: public API and routing");
  cmd->add_option("--config", *config, "Deployment config (YAML or JSON)")->required();
  cmd->add_option("--secret-file", *secret_file,
                  "The deployment secret (a file only its owner can read) that workers present")
      ->required();
  cmd->add_option("--api-key", *api_key,
                  "Key every public call but Health must present as 'Authorization: Bearer KEY'")
      ->envname("BATON_API_KEY");
  cmd->add_option("--drain-timeout", *drain_timeout_s,
                  "On SIGTERM: seconds to let executing requests finish while new ones are refused")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--host", *host,
                  "Address the public and internal ports bind to (default: the config's host)");
  AddLogLevelFlag(*cmd, log_level.get());
  cmd->callback([=] {
    StartLogging("baton scheduler", *log_level);
    InstallStopSignalHandlers();
    *exit_code = ReportStatus("baton scheduler",
                              RunScheduler(*config, *secret_file, *api_key, *drain_timeout_s, *host));
  });
}

}  // namespace baton::cli
