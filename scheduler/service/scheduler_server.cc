#include "scheduler/service/scheduler_server.h"

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <optional>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "kernels/common/log.h"
#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/rpc/grpc_listener.h"
#include "runtime/rpc/reflection_v1_service.h"
#include "runtime/tokenizer/tokenizer_config.h"
#include "scheduler/global/request_driver.h"
#include "scheduler/service/api_key.h"
#include "scheduler/service/grpc_worker_client.h"
#include "scheduler/service/inference_service.h"
#include "scheduler/service/liveness_prober.h"
#include "scheduler/service/metrics.h"
#include "scheduler/service/openai_http.h"
#include "scheduler/service/registry_service.h"

namespace baton::scheduler {
namespace {

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  return text.str();
}

// The chat template: `template_file` (--chat-template) when given, which sees the model's
// bos_token / eos_token all the same; else the one in the model's tokenizer_config.json. NotFound
// when the model has none and no file is given.
absl::StatusOr<runtime::ChatTemplate> LoadChatTemplate(const std::filesystem::path& model_dir,
                                                       const std::filesystem::path& template_file) {
  const std::filesystem::path config_path = model_dir / "tokenizer_config.json";
  absl::StatusOr<std::string> config_text = ReadFile(config_path);
  if (!template_file.empty()) {
    ASSIGN_OR_RETURN(std::string source, ReadFile(template_file));
    runtime::TokenizerConfig tokens;
    if (config_text.ok()) {
      ASSIGN_OR_RETURN(tokens, runtime::ParseTokenizerConfig(*config_text, config_path.string()));
    }
    absl::StatusOr<runtime::ChatTemplate> parsed =
        runtime::ChatTemplate::FromSource(source, tokens.bos_token, tokens.eos_token);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(template_file.string(), ": ", parsed.status().message()));
    }
    return parsed;
  }
  if (!config_text.ok()) {
    return absl::NotFoundError("the served model has no tokenizer_config.json, so no chat template");
  }
  const nlohmann::json config = nlohmann::json::parse(*config_text, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object() || !config.contains("chat_template") || config["chat_template"].is_null()) {
    return absl::NotFoundError(
        "the served model has no chat template (tokenizer_config.json); give one with --chat-template");
  }
  return runtime::ChatTemplate::FromTokenizerConfigJson(*config_text, config_path.string());
}

// generation_config.json's sampling values as the defaults of every request (vLLM's rule); values
// a request could not use (top_p 0, a negative temperature) are dropped with a warning, once, rather
// than failing every request that leaves them out. top_k < 0 is HF's "off".
kernels::SamplingOptions SamplingDefaults(const runtime::ModelConfig& config) {
  const kernels::SamplingOptions defaults{.temperature = config.default_temperature.value_or(1.0f),
                                          .top_k = std::max(config.default_top_k.value_or(0), 0),
                                          .top_p = config.default_top_p.value_or(1.0f)};
  if (absl::Status valid = kernels::ValidateSamplingOptions(defaults); !valid.ok()) {
    LogWarning(absl::StrCat("generation_config.json's sampling defaults are not used: ", valid.message()));
    return kernels::SamplingOptions{.temperature = 1.0f};
  }
  return defaults;
}

// Every client connection is a descriptor: the HTTP server holds up to HttpLimits::max_connections
// of them, far past the usual soft limit of 1024, so the soft limit goes to the hard one.
void RaiseDescriptorLimit() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur >= files.rlim_max) return;
  files.rlim_cur = files.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &files) != 0) {
    LogWarning(absl::StrCat("cannot raise the open-file limit to ", files.rlim_max));
  }
}

}  // namespace

absl::Status RunSchedulerServer(const SchedulerOptions& options, const std::atomic<bool>* stop) {
  RaiseDescriptorLimit();
  // glibc makes a malloc arena per thread that contends, up to 8 per core, and keeps what is freed
  // in each: a burst of request threads left hundreds of MiB resident. A few arenas, trimmed below.
  mallopt(M_ARENA_MAX, 4);
  ServedModel model;
  ASSIGN_OR_RETURN(model.config, runtime::LoadModelConfig(options.model_dir));
  ASSIGN_OR_RETURN(model.tokenizer, runtime::Tokenizer::FromFile(options.model_dir / "tokenizer.json"));
  model.default_sampling = SamplingDefaults(model.config);
  if (options.served_model_names.empty()) {
    model.name = std::filesystem::weakly_canonical(options.model_dir).filename().string();
  } else {
    model.name = options.served_model_names.front();
    model.aliases.assign(options.served_model_names.begin() + 1, options.served_model_names.end());
  }
  // vLLM's rule: a context longer than the model was trained for is refused, not clamped.
  if (options.max_model_len > model.config.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_model_len ", options.max_model_len, " exceeds the model's max_position_embeddings ",
        model.config.max_position_embeddings));
  }
  model.max_model_len = options.max_model_len > 0 ? options.max_model_len
                                                  : model.config.max_position_embeddings;
  model.dtype = std::string(DTypeName(options.weight_dtype));
  model.chat_template = LoadChatTemplate(options.model_dir, options.chat_template);
  model.constraint_compiler = runtime::ConstraintCompiler::FromModelDir(
      options.model_dir, model.config.vocab_size, model.config.eos_token_ids);
  // A template the operator named must work: refuse to start rather than serve without it.
  if (!options.chat_template.empty() && !model.chat_template.ok()) return model.chat_template.status();
  if (!model.chat_template.ok() && !absl::IsNotFound(model.chat_template.status())) {
    LogWarning(absl::StrCat("/v1/chat/completions is off: ", model.chat_template.status().message()));
  }

  WorkerRegistry registry(options.expected_workers, options.liveness_timeout);
  ServingMetrics metrics(&registry, model.name);
  RequestDriver driver(&model, &registry,
                       RequestDriverOptions{.disaggregated = options.disaggregated,
                                            .kv_lease = options.kv_lease,
                                            .max_local_prefill_tokens = options.max_local_prefill_tokens,
                                            .kv_aware_routing = options.kv_aware_routing,
                                            .admission = options.admission,
                                            .on_request_done = [&metrics](const RequestMetrics& request) {
                                              metrics.Record(request);
                                            }});
  WorkerStubs stubs(options.deployment_secret);
  InferenceServiceImpl inference(&driver, &stubs, options.api_key);
  RegistryServiceImpl registry_service(&registry, options.deployment_secret);
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> public_credentials,
                   rpc::ServerCredentialsFromPem(options.tls_cert, options.tls_key));
  // The internal server is built first: once the default health service is enabled, every server
  // built after it serves grpc.health.v1.
  ASSIGN_OR_RETURN(rpc::GrpcListener internal,
                   rpc::ListenExclusive("scheduler (internal_port)", options.host,
                                        options.internal_port, {&registry_service}));
  grpc::EnableDefaultHealthCheckService(true);
  // Reflection (v1, and v1alpha for older clients) tells only the public services, and only to
  // callers with the API key; health stays open.
  rpc::ReflectionV1Service reflection_v1(
      {v1::InferenceService::service_full_name(), "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
       "grpc.reflection.v1alpha.ServerReflection"},
      [key = options.api_key](const grpc::ServerContext& context) { return CheckGrpcApiKey(context, key); });
  rpc::ReflectionV1AlphaService reflection_v1alpha(&reflection_v1);
  ASSIGN_OR_RETURN(rpc::GrpcListener server,
                   rpc::ListenExclusive("scheduler", options.host, options.port,
                                        {&inference, &reflection_v1, &reflection_v1alpha}, public_credentials));
  const int port = server.port;
  // grpc.health.v1.Health says what baton.v1 Health says: SERVING while every phase has a live
  // worker and the scheduler is not draining.
  grpc::HealthCheckServiceInterface* grpc_health = server.server->GetHealthCheckService();
  std::optional<bool> serving;
  auto update_grpc_health = [&] {
    const bool now = driver.CheckHealth().all_phases_served;
    if (grpc_health == nullptr || serving == now) return;
    serving = now;
    grpc_health->SetServingStatus(now);  // every service it knows
    grpc_health->SetServingStatus("", now);
    grpc_health->SetServingStatus(v1::InferenceService::service_full_name(), now);
  };
  update_grpc_health();
  std::unique_ptr<OpenAiHttpServer> http;
  if (options.http_port > 0) {
    ASSIGN_OR_RETURN(http, OpenAiHttpServer::Start(&driver, &stubs,
                                                   HttpServerOptions{.host = options.host,
                                                                     .port = options.http_port,
                                                                     .api_key = options.api_key,
                                                                     .tls_cert = options.tls_cert,
                                                                     .tls_key = options.tls_key,
                                                                     .limits = {.max_body_bytes = options.http_max_body_bytes},
                                                                     .metrics = &metrics,
                                                                     .chat_reply = options.chat_reply}));
  }
  const char* scheme = options.tls_cert.empty() ? "" : ", TLS";
  LogInfo(absl::StrCat("serving ", model.name, " on ", options.host, ":", port, " (gRPC", scheme, ")",
                       http ? absl::StrCat(" and ", options.host, ":", http->port(), " (OpenAI HTTP", scheme, ")")
                            : std::string(),
                       options.api_key.empty() ? "" : "; an API key is required"));
  constexpr absl::Duration kReportInterval = absl::Seconds(10);
  absl::Time next_report = absl::Now() + kReportInterval;
  std::string last_report = driver.TakeAdmissionReport();
  if (!last_report.empty()) LogInfo(last_report);
  LivenessProber liveness(&registry, &stubs, options.liveness_timeout);
  while (!stop->load()) {
    liveness.Check(absl::Now());
    update_grpc_health();
    if (absl::Now() >= next_report) {
      next_report += kReportInterval;
      malloc_trim(0);  // what a burst freed goes back to the system
      std::string report = driver.TakeAdmissionReport();
      if (!report.empty() && report != last_report) {
        LogInfo(report);
        last_report = std::move(report);
      }
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  driver.StartDraining();
  update_grpc_health();
  const absl::Time drain_deadline = absl::Now() + options.drain_timeout;
  if (driver.num_executing() > 0) {
    LogInfo(absl::StrCat("draining ", driver.num_executing(), " requests (up to ",
                         absl::FormatDuration(options.drain_timeout), ")"));
  }
  while (driver.num_executing() > 0 && absl::Now() < drain_deadline) {
    liveness.Check(absl::Now());
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (const int left = driver.num_executing(); left > 0) {
    LogWarning(absl::StrCat("drain timeout: ", left, " requests cut"));
  }
  if (grpc_health != nullptr) grpc_health->Shutdown();  // NOT_SERVING, and Watch streams end
  server.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  internal.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return absl::OkStatus();
}

}  // namespace baton::scheduler
