// fake_baton: the real `serve` subcommand next to stand-in `scheduler` and `worker` subcommands that
// follow the launcher's contract (flags, config file, Health, SIGTERM) without a model, so that
// serve_command_test can run the launcher end to end.
//
//   fake_baton scheduler --config FILE --secret-file S --drain-timeout T --log-level L
//                                        serves WorkerRegistryService.Health on the config's host
//                                        and internal port, to callers with the secret; SERVING
//                                        unless FAKE_BATON_HEALTH=never; on SIGTERM takes
//                                        FAKE_BATON_DRAIN_S seconds to drain, if set
//   fake_baton worker --config FILE --secret-file S --role R --instance N --log-level L
//                                        checks role and instance against the config; exits 3 at
//                                        once when FAKE_BATON_FAIL_WORKER is "R-N"
// Both run until SIGTERM (exit 0). A bad flag, config or secret file (as the real ones load it:
// runtime/process/deployment_secret.h) exits 2.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "baton/v1/worker.grpc.pb.h"
#include "cli/commands.h"
#include "grpcpp/grpcpp.h"
#include "runtime/process/deployment_secret.h"
#include "runtime/process/signals.h"
#include "runtime/rpc/internal_auth.h"
#include "scheduler/config/deployment_config.h"

namespace {

using baton::scheduler::DeploymentConfig;

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

void WaitForSigterm() {
  const sigset_t signals = baton::runtime::MakeSignalSet({SIGTERM});
  while (baton::runtime::WaitForSignal(signals, absl::Seconds(60)) == 0) {
  }
}

class FakeRegistryService final : public baton::v1::WorkerRegistryService::Service {
 public:
  FakeRegistryService(bool serving, std::string secret) : serving_(serving), secret_(std::move(secret)) {}
  grpc::Status Health(grpc::ServerContext* context, const baton::v1::HealthRequest*,
                      baton::v1::HealthResponse* response) override {
    if (grpc::Status denied = baton::rpc::CheckDeploymentSecret(context, secret_); !denied.ok()) {
      return denied;
    }
    if (serving_) {
      response->set_status(baton::v1::HealthResponse::STATUS_SERVING);
    } else {
      response->set_status(baton::v1::HealthResponse::STATUS_NOT_SERVING);
      response->add_problems("fake: never serving");
    }
    return grpc::Status::OK;
  }

 private:
  const bool serving_;
  const std::string secret_;
};

bool SecretLoads(const std::string& path) {
  absl::Status loaded = baton::runtime::DeploymentSecret::Load(path).status();
  if (!loaded.ok()) std::fprintf(stderr, "fake: %s\n", loaded.ToString().c_str());
  return loaded.ok();
}

int RunScheduler(const std::string& config_path, const std::string& secret_path) {
  absl::StatusOr<DeploymentConfig> config = baton::scheduler::LoadDeploymentConfig(config_path);
  if (!SecretLoads(secret_path)) return 2;
  if (!config.ok()) {
    std::fprintf(stderr, "fake scheduler: %s\n", config.status().ToString().c_str());
    return 2;
  }
  // SIGTERM is blocked before gRPC starts its threads, then awaited synchronously.
  baton::runtime::BlockSignals(baton::runtime::MakeSignalSet({SIGTERM}));
  FakeRegistryService service(Env("FAKE_BATON_HEALTH") != "never",
                              baton::runtime::DeploymentSecret::Load(secret_path)->value());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat(config->host, ":", config->internal_port),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    std::fprintf(stderr, "fake scheduler: cannot listen on port %d\n", config->internal_port);
    return 1;
  }
  WaitForSigterm();
  // A drain that takes this long (a second SIGTERM does not cut it short: only SIGKILL does).
  if (const std::string drain = Env("FAKE_BATON_DRAIN_S"); !drain.empty()) sleep(std::stoi(drain));
  server->Shutdown();
  return 0;
}

int RunWorker(const std::string& config_path, const std::string& secret_path, const std::string& role_name,
              int instance) {
  absl::StatusOr<DeploymentConfig> config = baton::scheduler::LoadDeploymentConfig(config_path);
  if (!SecretLoads(secret_path)) return 2;
  absl::StatusOr<baton::runtime::WorkerRole> role =
      baton::runtime::ParseWorkerRole(role_name);
  if (!config.ok() || !role.ok() || instance < 0 ||
      instance >= baton::scheduler::Phase(*config, *role).num_instances) {
    std::fprintf(stderr, "fake worker: bad config, role or instance\n");
    return 2;
  }
  baton::runtime::BlockSignals(baton::runtime::MakeSignalSet({SIGTERM}));
  if (Env("FAKE_BATON_FAIL_WORKER") == absl::StrCat(role_name, "-", instance)) return 3;
  WaitForSigterm();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fake baton for the launcher's tests"};
  app.require_subcommand(1);
  int exit_code = 0;
  baton::cli::RegisterServeCommand(app, &exit_code);

  std::string config_path, secret_path, role;
  int instance = -1;
  CLI::App* scheduler = app.add_subcommand("scheduler");
  scheduler->add_option("--config", config_path)->required();
  scheduler->add_option("--secret-file", secret_path)->required();
  double drain_timeout_s = 0;
  scheduler->add_option("--drain-timeout", drain_timeout_s)->required();
  std::string log_level;  // the launcher hands its --log-level to every child
  scheduler->add_option("--log-level", log_level)->required();
  scheduler->callback([&] { exit_code = RunScheduler(config_path, secret_path); });
  CLI::App* worker = app.add_subcommand("worker");
  worker->add_option("--config", config_path)->required();
  worker->add_option("--secret-file", secret_path)->required();
  worker->add_option("--role", role)->required();
  worker->add_option("--instance", instance)->required();
  worker->add_option("--log-level", log_level)->required();
  worker->callback([&] { exit_code = RunWorker(config_path, secret_path, role, instance); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
