// `baton serve`: the launcher. It builds the effective deployment config (a file, or the embedded
// default), writes it into the deployment's run directory (run_directory.h), generates the
// deployment secret there (or reads --secret-file), starts `baton scheduler` and one `baton
// worker` per instance as supervised children of this same binary, each handed both files, waits
// until the scheduler's Health says SERVING, then waits for SIGINT/SIGTERM, drains the scheduler
// (--drain-timeout) and stops everything.
//
// Flags follow `vllm serve` where the concept is the same: a positional MODEL directory (= --model),
// --port the OpenAI HTTP port, --grpc-port the public gRPC port (the workers' and the internal port
// move along), --served-model-name, --max-model-len, --dtype, --tensor-parallel-size. --http-port is
// --port's old name, deprecated (one line on stderr). A flag overrides the config's key.
//
// Exit codes: 0 after SIGINT/SIGTERM (also during start-up); 1 when a child dies during start-up, the
// scheduler dies later, or start-up times out; 2 for a bad config or flag. A worker that dies after
// start-up is logged to stderr and started again with backoff (worker_restarter.h) unless
// --no-worker-restart; meanwhile the scheduler's Health says DEGRADED.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "baton/v1/worker.grpc.pb.h"
#include "cli/commands.h"
#include "cli/log_level.h"
#include "cli/default_model.h"
#include "cli/engine_flags.h"
#include "cli/parallel_layout.h"
#include "cli/worker_restarter.h"
#include "grpcpp/grpcpp.h"
#include "kernels/common/dtype.h"
#include "kernels/common/status_macros.h"
#include "runtime/process/await_ready.h"
#include "runtime/process/deployment_secret.h"
#include "runtime/process/process_supervisor.h"
#include "runtime/process/run_directory.h"
#include "runtime/process/signals.h"
#include "runtime/rpc/internal_auth.h"
#include "runtime/rpc/proto_conversion.h"
#include "runtime/rpc/status_conversion.h"
#include "runtime/transfer/kv_segment_names.h"
#include "runtime/transfer/socket_io.h"
#include "scheduler/config/deployment_config.h"
#include "scheduler/service/openai_tools.h"

namespace baton::cli {
namespace {

using runtime::ChildExit;
using runtime::ProcessSupervisor;
using scheduler::DeploymentConfig;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr absl::Duration kHealthRpcDeadline = absl::Seconds(1);
constexpr absl::Duration kPollInterval = absl::Milliseconds(100);
// How often the launcher asks the scheduler's registry which workers serve (a death after that
// restarts at once) and which it cut off (to kill and restart them).
constexpr absl::Duration kRegistryPollInterval = absl::Seconds(1);
constexpr char kSchedulerName[] = "scheduler";

struct ServeOptions {
  std::string model_dir;    // --model; empty: the config's, or the embedded default model
  std::string model_arg;    // the positional MODEL (vLLM's `vllm serve MODEL`), same meaning
  std::string config_path;  // empty: DefaultDeployment
  int grpc_port = 0;        // --grpc-port; 0: the config's scheduler port
  std::optional<int> port;  // --port: the OpenAI HTTP port (vLLM's meaning), 0 disables HTTP
  std::optional<int> deprecated_http_port;  // --http-port: --port's old name, for one release
  std::vector<std::string> served_model_names;
  std::optional<int> max_model_len;
  std::optional<double> gpu_memory_utilization;
  std::optional<double> swap_space_gib;  // per rank, as vLLM's per-GPU --swap-space
  // vLLM's scheduler flags, for every phase (chunked prefill: the colocated one).
  std::optional<int> max_num_seqs;
  std::optional<int> max_num_batched_tokens;
  bool enable_chunked_prefill = false;
  bool enforce_eager = false;
  std::optional<int> block_size;
  std::vector<std::string> unknown_args;  // what CLI11 did not recognise (VllmOnlyFlag names them)
  std::string dtype;        // empty: auto, or with --config its weight_dtype; else DtypeOf's names
  std::string kv_cache_dtype;  // empty: the config's (f32 by default); else f32 or bf16
  std::string quantization;    // empty: none; see QuantizationDType (cli/engine_flags.h)
  // Neither: the config's enable_prefix_caching (on by default).
  bool enable_prefix_caching = false;
  bool no_enable_prefix_caching = false;
  double startup_timeout_s = 300;
  double stop_grace_s = 10;
  double drain_timeout_s = 30;
  ParallelFlags parallel;   // with --model only: every phase's tp and pp
  std::string secret_file;  // empty: generate the deployment secret
  std::string host;         // empty: the config's
  std::string api_key;      // empty: the public APIs are open
  std::string tls_cert;     // with tls_key: the public APIs serve TLS
  std::string tls_key;
  std::string chat_template;  // empty: the config's, or the model's own
  std::string tool_call_parser;   // empty: the config's
  bool enable_auto_tool_choice = false;
  std::string reasoning_parser;   // empty: the config's
  bool no_worker_restart = false;
  std::string log_level;    // handed to every process it starts
  std::string step_trace_dir;  // empty: no step traces; else one file per worker in it
};

// The effective deployment, and what each rank of a multi-rank phase holds (for the start-up log).
struct ServePlan {
  DeploymentConfig config;
  std::vector<std::string> rank_lines;  // "prefill instance, tp 2 x pp 1: rank 0 layers 0-5, ..."
};

runtime::ParallelLayout PhaseLayout(const scheduler::PhaseConfig& phase) {
  return {.tp_size = phase.tp, .pp_size = phase.pp, .stage_num_layers = phase.stage_num_layers};
}

// Checks every multi-rank phase's layout against the model's config.json, so that a tp that does
// not fit the heads is one line from the launcher rather than every worker dying at load. A phase
// of one rank always fits and needs no config.json.
// Devices the workers can serve: every phase of a disaggregated deployment on the same kind of
// device (KV moves between host pools over shm/TCP, between device pools over NCCL links, never
// across), and each CUDA instance on consecutive device ids.
absl::Status CheckDevicesServable(const DeploymentConfig& config) {
  if (config.mode == scheduler::DeploymentMode::kDisaggregated &&
      config.prefill.device_name() != config.decode.device_name()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "devices: prefill runs on ", config.prefill.device_name(), " and decode on ",
        config.decode.device_name(), "; both phases must use the same kind of device (the KV "
        "moves between host pools over shm/TCP and between device pools over NCCL)"));
  }
  // A CUDA instance's rank r runs on device first + r (EngineConfig::first_device_index).
  for (runtime::WorkerRole role : scheduler::Roles(config.mode)) {
    const scheduler::PhaseConfig& phase = scheduler::Phase(config, role);
    for (size_t i = 0; i < phase.cuda_device_ids.size(); ++i) {
      const std::vector<int>& ids = phase.cuda_device_ids[i];
      for (size_t r = 1; r < ids.size(); ++r) {
        if (ids[r] != ids[0] + static_cast<int>(r)) {
          return absl::InvalidArgumentError(absl::StrCat(
              runtime::WorkerRoleName(role), ".devices: instance ", i, "'s devices must be "
              "consecutive ids (rank r on device first + r), not [", absl::StrJoin(ids, ", "),
              "]"));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> CheckLayouts(const DeploymentConfig& config) {
  std::vector<std::string> lines;
  std::optional<runtime::ModelConfig> model_config;
  for (runtime::WorkerRole role : scheduler::Roles(config.mode)) {
    const runtime::ParallelLayout layout = PhaseLayout(scheduler::Phase(config, role));
    if (layout.num_ranks() == 1 && layout.stage_num_layers.empty()) continue;
    if (!model_config) {
      ASSIGN_OR_RETURN(model_config, runtime::LoadModelConfig(config.model_dir));
    }
    const std::string name(runtime::WorkerRoleName(role));
    absl::StatusOr<std::vector<runtime::ModelShard>> shards = PlanShards(*model_config, layout);
    if (!shards.ok()) {
      return absl::Status(shards.status().code(),
                          absl::StrCat(name, ": ", shards.status().message()));
    }
    std::vector<std::string> ranks;
    for (size_t r = 0; r < shards->size(); ++r) {
      ranks.push_back(absl::StrCat("rank ", r, " ", DescribeShard((*shards)[r])));
    }
    lines.push_back(absl::StrCat(name, " instance, ", runtime::LayoutString(layout), ": ",
                                 absl::StrJoin(ranks, "; ")));
  }
  return lines;
}

// vLLM's --dtype names (and Baton's own) as a weight dtype; nullopt for "auto", which is the
// checkpoint's torch_dtype (config.json), known only once the model is found.
constexpr char kDtypeChoices[] = "auto, float32, float, bfloat16, float16, half, f32, bf16 or f16";
absl::StatusOr<std::optional<DType>> DtypeOf(const std::string& name) {
  if (name == "auto") return std::nullopt;
  if (name == "float32" || name == "float" || name == "f32") return DType::kF32;
  if (name == "bfloat16" || name == "bf16") return DType::kBF16;
  if (name == "float16" || name == "half" || name == "f16") return DType::kF16;
  return absl::InvalidArgumentError(
      absl::StrCat("--dtype '", name, "': expected one of ", kDtypeChoices));
}

std::filesystem::path NormalModelDir(const std::string& dir) {
  std::filesystem::path path = std::filesystem::absolute(dir).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();
  return path;
}

// The model directory given on the command line: MODEL or --model (both: the same directory).
absl::StatusOr<std::string> ModelArgument(const ServeOptions& opts) {
  if (opts.model_arg.empty()) return opts.model_dir;
  if (!opts.model_dir.empty() && NormalModelDir(opts.model_arg) != NormalModelDir(opts.model_dir)) {
    return absl::InvalidArgumentError(absl::StrCat("MODEL '", opts.model_arg, "' and --model '",
                                                   opts.model_dir,
                                                   "' name different models; give one of them"));
  }
  return opts.model_arg;
}

// An argument `baton serve` does not take: for a flag of `vllm serve`, what does its job here (a
// config key) or that nothing does; for anything else, where the flags are listed.
absl::Status UnknownArgument(const std::string& arg) {
  const std::string flag = arg.substr(0, arg.find('='));
  static const std::pair<const char*, const char*> kVllmFlags[] = {
      {"--seed", "is vLLM's server-wide seed; here each request's `seed` seeds it (unseeded requests "
                 "draw from their arrival time)"},
      {"--disable-log-requests", "is vLLM's; Baton logs no request's prompt or output"},
      {"--disable-log-stats", "is vLLM's; not supported yet"},
      {"--max-logprobs", "is vLLM's; here at most 20 logprobs per token, fixed"},
      {"--generation-config", "is vLLM's; here the model directory's generation_config.json is read"},
      {"--tokenizer", "is vLLM's; here the model directory's tokenizer.json is the tokenizer"},
      {"--allowed-origins", "is vLLM's CORS setting; not supported"},
      {"--trust-remote-code", "is vLLM's; Baton runs no model code from a checkpoint"},
      {"--data-parallel-size", "is vLLM's; here a phase's `instances` in a config"},
      {"--uvicorn-log-level", "is vLLM's; use --log-level"},
  };
  for (const auto& [name, why] : kVllmFlags) {
    if (flag == name) return absl::InvalidArgumentError(absl::StrCat(flag, " ", why));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown argument '", arg, "' (`baton serve --help` lists the flags)"));
}

absl::StatusOr<ServePlan> BuildConfig(const ServeOptions& opts) {
  DeploymentConfig config;
  ASSIGN_OR_RETURN(const std::string model_arg, ModelArgument(opts));
  std::optional<DType> dtype;
  // vLLM's default is auto; a config file's weight_dtype says what it wants instead.
  bool dtype_auto = opts.dtype.empty() && opts.config_path.empty();
  if (!opts.dtype.empty()) {
    ASSIGN_OR_RETURN(dtype, DtypeOf(opts.dtype));
    dtype_auto = !dtype.has_value();
  }
  if (opts.port && opts.deprecated_http_port && *opts.port != *opts.deprecated_http_port) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--port ", *opts.port, " and --http-port ", *opts.deprecated_http_port,
        " both set the OpenAI HTTP port; give --port only"));
  }
  if (opts.gpu_memory_utilization &&
      !(*opts.gpu_memory_utilization > 0 && *opts.gpu_memory_utilization <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--gpu-memory-utilization: must be in (0, 1], got ",
                                                   *opts.gpu_memory_utilization));
  }
  if (opts.swap_space_gib && !(*opts.swap_space_gib >= 0 && *opts.swap_space_gib <= 1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--swap-space: must be in [0, 1048576] GiB, got ", *opts.swap_space_gib));
  }
  for (const std::string& arg : opts.unknown_args) RETURN_IF_ERROR(UnknownArgument(arg));
  for (const auto& [flag, value] : {std::pair{"--max-num-seqs", opts.max_num_seqs},
                                    std::pair{"--max-num-batched-tokens", opts.max_num_batched_tokens},
                                    std::pair{"--block-size", opts.block_size}}) {
    if (value && *value < 1) return absl::InvalidArgumentError(absl::StrCat(flag, ": must be >= 1, got ", *value));
  }
  if (opts.max_model_len && *opts.max_model_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-model-len: must be >= 1, got ", *opts.max_model_len));
  }
  for (const std::string& name : opts.served_model_names) {
    if (name.empty()) return absl::InvalidArgumentError("--served-model-name: must not be empty");
  }
  if (!opts.config_path.empty()) {
    if (opts.parallel.given()) {
      return absl::InvalidArgumentError(
          "--tensor-parallel-size/--pipeline-parallel-size lay out the default deployment of "
          "--model; with --config, set tp and pp in each phase's section");
    }
    ASSIGN_OR_RETURN(config, scheduler::LoadDeploymentConfig(opts.config_path));
    if (!model_arg.empty()) config.model_dir = model_arg;
  } else {
    ASSIGN_OR_RETURN(const runtime::ParallelLayout layout, ParallelLayoutOf(opts.parallel));
    ASSIGN_OR_RETURN(const std::filesystem::path model_dir, ResolveModelDir(model_arg));
    config = scheduler::DefaultDeployment(model_dir);
    for (runtime::WorkerRole role : scheduler::Roles(config.mode)) {
      scheduler::MutablePhase(config, role).tp = layout.tp_size;
      scheduler::MutablePhase(config, role).pp = layout.pp_size;
    }
  }
  if (opts.grpc_port != 0) RETURN_IF_ERROR(scheduler::SetSchedulerPort(config, opts.grpc_port));
  if (const std::optional<int> http = opts.port ? opts.port : opts.deprecated_http_port) {
    config.http_port = *http;
  }
  if (!opts.served_model_names.empty()) config.served_model_names = opts.served_model_names;
  if (opts.max_model_len) config.max_model_len = *opts.max_model_len;
  if (opts.gpu_memory_utilization) {
    for (runtime::WorkerRole role : scheduler::Roles(config.mode)) {
      scheduler::MutablePhase(config, role).gpu_memory_utilization = *opts.gpu_memory_utilization;
    }
  }
  if (opts.enable_chunked_prefill && config.mode != scheduler::DeploymentMode::kColocated) {
    return absl::InvalidArgumentError(
        "--enable-chunked-prefill: only colocated instances chunk prompts (a disaggregated prefill "
        "instance runs whole prompts); serve a config with mode: colocated");
  }
  for (runtime::WorkerRole role : scheduler::Roles(config.mode)) {
    scheduler::PhaseConfig& phase = scheduler::MutablePhase(config, role);
    if (opts.max_num_seqs) phase.max_num_seqs = *opts.max_num_seqs;
    if (opts.max_num_batched_tokens) phase.max_num_batched_tokens = *opts.max_num_batched_tokens;
    if (opts.enable_chunked_prefill) phase.chunked_prefill = true;
    if (opts.enforce_eager) phase.enforce_eager = true;
  }
  if (opts.block_size) config.block_size = *opts.block_size;
  if (opts.swap_space_gib) {
    for (runtime::WorkerRole role : scheduler::Roles(config.mode)) {
      scheduler::PhaseConfig& phase = scheduler::MutablePhase(config, role);
      phase.swap_space_bytes =
          static_cast<uint64_t>(*opts.swap_space_gib * (1ull << 30)) * phase.tp * phase.pp;
    }
  }
  if (dtype) config.weight_dtype = *dtype;
  if (!opts.quantization.empty()) {
    ASSIGN_OR_RETURN(const std::optional<DType> quantized,
                     QuantizationDType(opts.quantization, "--quantization"));
    if (quantized) {
      config.weight_dtype = *quantized;
      dtype_auto = false;
    }
  }
  if (!opts.kv_cache_dtype.empty()) {
    const std::optional<DType> kv_dtype =
        KvDTypeFromName(opts.kv_cache_dtype, config.weight_dtype);
    if (!kv_dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--kv-cache-dtype '", opts.kv_cache_dtype, "': expected f32, bf16 or auto"));
    }
    config.kv_cache_dtype = *kv_dtype;
  }
  if (opts.enable_prefix_caching) config.enable_prefix_caching = true;
  if (opts.no_enable_prefix_caching) config.enable_prefix_caching = false;
  if (!opts.host.empty()) config.host = opts.host;
  if (!opts.tls_cert.empty() || !opts.tls_key.empty()) {
    if (opts.tls_cert.empty() || opts.tls_key.empty()) {
      return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
    }
    config.tls_cert = std::filesystem::absolute(opts.tls_cert);
    config.tls_key = std::filesystem::absolute(opts.tls_key);
  }
  if (!opts.chat_template.empty()) config.chat_template = std::filesystem::absolute(opts.chat_template);
  if (!config.chat_template.empty() && !std::filesystem::is_regular_file(config.chat_template)) {
    return absl::NotFoundError(
        absl::StrCat("chat_template: ", config.chat_template.string(), " is not a file"));
  }
  if (!opts.tool_call_parser.empty()) config.tool_call_parser = opts.tool_call_parser;
  if (opts.enable_auto_tool_choice) config.enable_auto_tool_choice = true;
  if (!opts.reasoning_parser.empty()) config.reasoning_parser = opts.reasoning_parser;
  RETURN_IF_ERROR(scheduler::ValidateChatReplyOptions({.enable_auto_tool_choice = config.enable_auto_tool_choice,
                                                       .tool_call_parser = config.tool_call_parser,
                                                       .reasoning_parser = config.reasoning_parser}));
  config.model_dir = std::filesystem::absolute(config.model_dir).lexically_normal();
  if (!config.model_dir.has_filename()) config.model_dir = config.model_dir.parent_path();
  RETURN_IF_ERROR(scheduler::ValidateDeploymentConfig(config));
  if (!std::filesystem::is_directory(config.model_dir)) {
    return absl::NotFoundError(
        absl::StrCat("model: ", config.model_dir.string(), " is not a directory"));
  }
  // What needs the model's config.json: --dtype auto, a pre-quantized checkpoint (its matmul
  // weights are as it stores them whatever the dtype says), and max_model_len against its context.
  ASSIGN_OR_RETURN(const runtime::ModelConfig model_config, runtime::LoadModelConfig(config.model_dir));
  if (dtype_auto) config.weight_dtype = model_config.torch_dtype;
  if (model_config.quantization.has_value()) {
    config.weight_dtype = model_config.quantization->weight_dtype;
  }
  if (config.max_model_len > model_config.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_model_len ", config.max_model_len, " exceeds the model's max_position_embeddings ",
        model_config.max_position_embeddings, " (", (config.model_dir / "config.json").string(),
        ")"));
  }
  // What the config can say but the workers cannot do yet: refuse it here, in one line.
  RETURN_IF_ERROR(CheckDevicesServable(config));
  ASSIGN_OR_RETURN(std::vector<std::string> rank_lines, CheckLayouts(config));
  return ServePlan{.config = std::move(config), .rank_lines = std::move(rank_lines)};
}

// Writes `text` to `path`, readable by this user only (the config may name key files).
absl::Status WritePrivateFile(const std::filesystem::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path.string()));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int error = errno;
  ::close(fd);
  if (!written) return absl::ErrnoToStatus(error, absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

// Where the launcher reaches the scheduler's internal port (a wildcard bind address is reached
// over loopback): it asks for Health there, with the deployment secret, so that neither the public
// API's key nor its TLS certificate is needed.
std::string HealthTarget(const DeploymentConfig& config) {
  std::string host = config.host;
  if (host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::" || host == "[::]") host = "::1";
  if (absl::StrContains(host, ':') && !absl::StartsWith(host, "[")) host = absl::StrCat("[", host, "]");
  return absl::StrCat(host, ":", config.internal_port);
}

// The launcher's calls to the scheduler's internal registry service: Health during start-up, then
// which workers it cut off.
class SchedulerProbe {
 public:
  SchedulerProbe(const std::string& target, std::string secret) : target_(target), secret_(std::move(secret)) {
    grpc::ChannelArguments args;
    // Reconnect promptly while the scheduler comes up, instead of gRPC's default back-off (1 s
    // growing to 2 min). GRPC_ARG_MIN_RECONNECT_BACKOFF_MS is left alone: it is also the connect
    // timeout, and a short one aborts handshakes with a busy scheduler.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
    stub_ = v1::WorkerRegistryService::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  }

  absl::Status Check() {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kHealthRpcDeadline));
    // Wait for the connection rather than fail fast: a waiting call is what drives the channel's
    // connection attempt forward (without one, gRPC notices a completed connect only on its 5 s
    // backup poll).
    context.set_wait_for_ready(true);
    rpc::AttachDeploymentSecret(context, secret_);
    v1::HealthResponse response;
    const absl::Status rpc = rpc::FromGrpcStatus(stub_->Health(&context, v1::HealthRequest(), &response));
    if (absl::IsDeadlineExceeded(rpc)) {
      return absl::UnavailableError(absl::StrCat("Health: no answer from ", target_, " within ",
                                                 absl::FormatDuration(kHealthRpcDeadline)));
    }
    if (!rpc.ok()) return absl::UnavailableError(absl::StrCat("Health: ", rpc.ToString()));
    if (response.status() == v1::HealthResponse::STATUS_SERVING) return absl::OkStatus();
    std::string message =
        absl::StrCat("Health: ", v1::HealthResponse::Status_Name(response.status()));
    if (response.problems_size() > 0) {
      absl::StrAppend(&message, " (", absl::StrJoin(response.problems(), "; "), ")");
    }
    return absl::UnavailableError(message);
  }

  // Tells the scheduler that `worker`'s process `exit` ended, so that it cuts it off now rather than
  // when its heartbeats are missed. Best effort: a scheduler that does not answer within the
  // deadline still notices by the heartbeats.
  void ReportExit(const scheduler::WorkerInstance& worker, const ChildExit& exit) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kHealthRpcDeadline));
    rpc::AttachDeploymentSecret(context, secret_);
    v1::ReportExitRequest request;
    request.set_role(rpc::ToProto(worker.role));
    request.set_instance_idx(worker.instance_idx);
    request.set_pid(exit.pid);
    request.set_reason(exit.Cause());
    v1::ReportExitResponse response;
    (void)stub_->ReportExit(&context, request, &response);
  }

  // Every worker the scheduler knows, alive or cut off; none when it does not answer within the
  // deadline (the next poll asks again).
  std::vector<RegisteredWorker> RegisteredWorkers() {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kHealthRpcDeadline));
    rpc::AttachDeploymentSecret(context, secret_);
    v1::ListWorkersResponse response;
    std::vector<RegisteredWorker> workers;
    if (!stub_->ListWorkers(&context, v1::ListWorkersRequest(), &response).ok()) return workers;
    for (const v1::ListWorkersResponse::Worker& worker : response.workers()) {
      const std::optional<runtime::WorkerRole> role = rpc::FromProto(worker.role());
      if (!role) continue;
      workers.push_back({.name = runtime::WorkerName(*role, worker.instance_idx()),
                         .pid = worker.pid(),
                         .alive = worker.alive(),
                         .why = worker.death()});
    }
    return workers;
  }

 private:
  const std::string target_;
  const std::string secret_;
  std::unique_ptr<v1::WorkerRegistryService::Stub> stub_;
};

std::vector<runtime::ChildSpec> ChildSpecs(const DeploymentConfig& config,
                                           const std::filesystem::path& config_path,
                                           const std::filesystem::path& secret_path,
                                           double drain_timeout_s, const std::string& log_level,
                                           const std::string& step_trace_dir) {
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<runtime::ChildSpec> specs;
  specs.push_back({.name = kSchedulerName,
                   .argv = {exe, "scheduler", "--config", config_path.string(), "--secret-file",
                            secret_path.string(), "--drain-timeout", absl::StrCat(drain_timeout_s),
                            "--log-level", log_level},
                   // The launcher's death kills the workers; the scheduler then ends every open
                   // stream with an error event (no live worker) before it exits.
                   .parent_death_signal = SIGTERM});
  for (const scheduler::WorkerInstance& worker : scheduler::WorkerInstances(config)) {
    specs.push_back({.name = runtime::WorkerName(worker.role, worker.instance_idx),
                     .argv = {exe, "worker", "--config", config_path.string(), "--secret-file",
                              secret_path.string(), "--role",
                              std::string(runtime::WorkerRoleName(worker.role)), "--instance",
                              std::to_string(worker.instance_idx), "--log-level", log_level}});
    if (!step_trace_dir.empty()) {
      specs.back().argv.push_back("--step-trace");
      specs.back().argv.push_back(
          (std::filesystem::path(step_trace_dir) /
           absl::StrCat(runtime::WorkerRoleName(worker.role), "-", worker.instance_idx, ".jsonl"))
              .string());
    }
  }
  return specs;
}

// "disaggregated: prefill 2 instances x (tp 2 x pp 1, cpu) + decode 1 instance x (tp 1 x pp 1, cpu);
// OpenAI HTTP on port 8000"
std::string Summary(const DeploymentConfig& config) {
  std::vector<std::string> phases;
  for (runtime::WorkerRole role : scheduler::Roles(config.mode)) {
    const scheduler::PhaseConfig& phase = scheduler::Phase(config, role);
    phases.push_back(absl::StrCat(runtime::WorkerRoleName(role), " ", phase.num_instances,
                                  phase.num_instances == 1 ? " instance" : " instances", " x (",
                                  runtime::LayoutString(PhaseLayout(phase)), ", ",
                                  phase.device_name(), ")"));
  }
  return absl::StrCat(scheduler::DeploymentModeName(config.mode), ": ",
                      absl::StrJoin(phases, " + "), "; ",
                      config.http_port == 0 ? std::string("no HTTP")
                                            : absl::StrCat("OpenAI HTTP on port ", config.http_port));
}

void StopEverything(ProcessSupervisor& supervisor, absl::Duration grace) {
  for (const ChildExit& exit : supervisor.StopAll(grace)) {
    if (exit.signal == SIGKILL) {
      std::fprintf(stderr, "baton: %s did not stop within %s and was killed\n", exit.name.c_str(),
                   absl::FormatDuration(grace).c_str());
    }
  }
  // A worker that was killed could not unlink its shared KV pool: no segment outlives the deployment.
  (void)runtime::RemoveOrphanedKvSegments();
}

// SIGTERM's path: the scheduler first, which refuses new requests and lets executing ones finish
// for up to `drain` (the workers keep serving them meanwhile), then everything. A second SIGINT or
// SIGTERM meanwhile cuts the drain short: everything stops at once (each child gets a second).
void DrainThenStop(ProcessSupervisor& supervisor, pid_t scheduler_pid, absl::Duration drain,
                   absl::Duration grace, const sigset_t& stop_signals) {
  constexpr absl::Duration kSignalCheck = absl::Milliseconds(100);
  supervisor.Terminate(scheduler_pid);
  const absl::Time give_up = absl::Now() + drain + grace;
  while (absl::Now() < give_up) {
    if (const int signal = runtime::WaitForSignal(stop_signals, absl::ZeroDuration()); signal > 0) {
      std::fprintf(stderr, "baton: %s received again; stopping now\n", runtime::SignalName(signal).c_str());
      StopEverything(supervisor, std::min(grace, absl::Seconds(1)));
      return;
    }
    std::optional<ChildExit> exit = supervisor.WaitForExit(std::min(give_up - absl::Now(), kSignalCheck));
    if (!exit) continue;
    if (exit->pid == scheduler_pid) break;
    std::fprintf(stderr, "baton: %s\n", exit->Describe().c_str());
  }
  StopEverything(supervisor, grace);
}

// Runs the deployment; returns the process exit code.
int RunServe(const ServeOptions& opts) {
  // Before any thread exists, so that only the waits below ever see SIGINT/SIGTERM.
  const sigset_t stop_signals = runtime::MakeSignalSet({SIGINT, SIGTERM});
  runtime::BlockSignals(stop_signals);

  (void)runtime::RemoveOrphanedKvSegments();  // left by a deployment that was SIGKILLed
  // One line, before anything else it says (unless the two flags disagree: that error alone).
  if (opts.deprecated_http_port && (!opts.port || *opts.port == *opts.deprecated_http_port)) {
    std::fprintf(stderr, "baton serve: --http-port is deprecated and goes in the next release; use "
                         "--port (the OpenAI HTTP port; --grpc-port is the gRPC one)\n");
  }
  absl::StatusOr<ServePlan> plan = BuildConfig(opts);
  if (!plan.ok()) {
    std::fprintf(stderr, "baton serve: %s\n", std::string(plan.status().message()).c_str());
    const absl::StatusCode code = plan.status().code();
    return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound
               ? kExitUsage
               : kExitFailure;
  }
  const DeploymentConfig& config = plan->config;
  // The deployment's run directory (named by the address it serves) holds the effective config and
  // a generated secret while the launcher runs; a killed launcher's leftovers go at the next start.
  absl::StatusOr<runtime::RunDirectory> run_dir =
      runtime::RunDirectory::Acquire(absl::StrCat("serve-", config.host, "-", config.scheduler_port));
  if (!run_dir.ok()) {
    std::fprintf(stderr, "baton serve: %s%s\n",
                 absl::IsAlreadyExists(run_dir.status())
                     ? absl::StrCat(runtime::FormatHostPort(config.host, config.scheduler_port), " is in use: ").c_str()
                     : "",
                 std::string(run_dir.status().message()).c_str());
    return kExitFailure;
  }
  if (run_dir->num_stale_removed() > 0) {
    std::fprintf(stderr, "baton: removed what a killed launcher left in %s\n", run_dir->path().c_str());
  }
  const std::filesystem::path config_path = run_dir->path() / "config.yaml";
  absl::Status prepared = WritePrivateFile(config_path, scheduler::ToYaml(config));
  absl::StatusOr<std::unique_ptr<ProcessSupervisor>> supervisor = ProcessSupervisor::Create();
  if (prepared.ok()) prepared = supervisor.status();
  // The secret's file: the one given, or a fresh secret (mode 0600) in the run directory.
  std::filesystem::path secret_path = opts.secret_file;
  if (prepared.ok() && secret_path.empty()) {
    secret_path = run_dir->path() / "deployment-secret";
    absl::StatusOr<runtime::DeploymentSecret> generated = runtime::DeploymentSecret::Generate();
    prepared = generated.ok() ? generated->WriteTo(secret_path) : generated.status();
  }
  if (prepared.ok() && !opts.step_trace_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(opts.step_trace_dir, error);
    if (error) {
      prepared = absl::InvalidArgumentError(
          absl::StrCat("--step-trace-dir ", opts.step_trace_dir, ": ", error.message()));
    }
  }
  if (!prepared.ok()) {
    std::fprintf(stderr, "baton serve: %s\n", std::string(prepared.message()).c_str());
    return kExitFailure;
  }
  absl::StatusOr<runtime::DeploymentSecret> secret = runtime::DeploymentSecret::Load(secret_path);
  if (!secret.ok()) {
    std::fprintf(stderr, "baton serve: --secret-file: %s\n", std::string(secret.status().message()).c_str());
    return kExitUsage;
  }
  // The scheduler reads the key from its environment (inherited, readable by this user only),
  // never from a command line every user can read.
  if (!opts.api_key.empty() && setenv("BATON_API_KEY", opts.api_key.c_str(), /*overwrite=*/1) != 0) {
    std::fprintf(stderr, "baton serve: cannot hand the API key to the scheduler: %s\n", strerror(errno));
    return kExitFailure;
  }
  std::fprintf(stderr, "baton: effective config in %s\n", config_path.c_str());
  for (const std::string& line : plan->rank_lines) std::fprintf(stderr, "baton: %s\n", line.c_str());
  const absl::Duration grace = absl::Seconds(opts.stop_grace_s);

  pid_t scheduler_pid = 0;
  std::map<std::string, scheduler::WorkerInstance> workers_by_name;  // by ChildSpec::name
  for (const scheduler::WorkerInstance& worker : scheduler::WorkerInstances(config)) {
    workers_by_name.emplace(runtime::WorkerName(worker.role, worker.instance_idx), worker);
  }
  WorkerRestarter restarter(**supervisor, runtime::RestartOptions());
  for (const runtime::ChildSpec& spec : ChildSpecs(config, config_path, secret_path, opts.drain_timeout_s, opts.log_level,
                                                           opts.step_trace_dir)) {
    absl::StatusOr<pid_t> pid = (*supervisor)->Start(spec);
    if (!pid.ok()) {
      std::fprintf(stderr, "baton serve: %s; stopping every process\n",
                   std::string(pid.status().message()).c_str());
      StopEverything(**supervisor, grace);
      return kExitFailure;
    }
    std::fprintf(stderr, "baton: started %s (pid %d)\n", spec.name.c_str(), *pid);
    if (spec.name == kSchedulerName) {
      scheduler_pid = *pid;
    } else {
      restarter.Started(spec, *pid, absl::Now());
    }
  }

  absl::Status ready;
  {
    // The channel lives only during start-up: an idle connection held open would slow the
    // scheduler's shutdown later.
    SchedulerProbe probe(HealthTarget(config), secret->value());
    ready = runtime::AwaitReady(**supervisor, [&] { return probe.Check(); },
                                {.timeout = absl::Seconds(opts.startup_timeout_s),
                                 .poll_interval = kPollInterval,
                                 .interrupt_signals = &stop_signals});
  }
  if (absl::IsCancelled(ready)) {
    std::fprintf(stderr, "baton: %s during start-up; stopping\n", std::string(ready.message()).c_str());
    StopEverything(**supervisor, grace);
    return 0;
  }
  if (!ready.ok()) {
    std::fprintf(stderr, "baton serve: %s; stopping every process\n",
                 std::string(ready.message()).c_str());
    StopEverything(**supervisor, grace);
    return kExitFailure;
  }
  std::printf("baton: serving %s on %s:%d (%s)\n",
              (config.served_model_names.empty() ? config.model_dir.filename().string()
                                                 : config.served_model_names.front()).c_str(),
              config.host.c_str(), config.scheduler_port, Summary(config).c_str());
  std::fflush(stdout);

  // Restarting a worker includes one the scheduler cut off but whose process lives on (frozen,
  // hung): killed, its exit restarts it. One that registered and serves is not crash-looping.
  auto probe = std::make_unique<SchedulerProbe>(HealthTarget(config), secret->value());
  absl::Time next_registry_poll = absl::Now() + kRegistryPollInterval;
  while (true) {
    if (const int signal = runtime::WaitForSignal(stop_signals, kPollInterval); signal > 0) {
      std::fprintf(stderr, "baton: %s received; draining, then stopping\n",
                   runtime::SignalName(signal).c_str());
      probe.reset();  // an open connection would hold up the scheduler's shutdown
      DrainThenStop(**supervisor, scheduler_pid, absl::Seconds(opts.drain_timeout_s), grace, stop_signals);
      return 0;
    }
    if (!opts.no_worker_restart && absl::Now() >= next_registry_poll) {
      restarter.OnRegistry(probe->RegisteredWorkers());
      next_registry_poll = absl::Now() + kRegistryPollInterval;
    }
    while (std::optional<ChildExit> exit = (*supervisor)->WaitForExit(absl::ZeroDuration())) {
      std::fprintf(stderr, "baton: %s\n", exit->Describe().c_str());
      (void)runtime::RemoveStaleKvSegments(exit->pid);
      if (exit->name == kSchedulerName) {
        std::fprintf(stderr, "baton: the scheduler is gone; stopping every process\n");
        StopEverything(**supervisor, grace);
        return kExitFailure;
      }
      if (auto worker = workers_by_name.find(exit->name); worker != workers_by_name.end()) {
        probe->ReportExit(worker->second, *exit);
      }
      if (!opts.no_worker_restart) restarter.OnExit(*exit, absl::Now());
    }
    restarter.RestartDue(absl::Now());
  }
}

}  // namespace

void RegisterServeCommand(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Start the scheduler and every worker of a deployment, and supervise them");
  cmd->add_option("MODEL", opts->model_arg,
                  "Model directory, as `vllm serve MODEL` (the same as --model)");
  cmd->add_option("--model", opts->model_dir,
                  "Model directory (default: the config's, or the embedded default model)");
  cmd->add_option("--config", opts->config_path,
                  "Deployment config, YAML or JSON (default: 1 prefill + 1 decode worker on the CPU)");
  cmd->add_option("--port", opts->port,
                  "OpenAI-compatible HTTP port, as vLLM's --port; 0 disables HTTP (default: the "
                  "config's, 8000)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--grpc-port", opts->grpc_port,
                  "Public gRPC port (baton.v1); worker and internal ports move along (default: the "
                  "config's, 50051)")
      ->check(CLI::Range(1, 65535));
  cmd->add_option("--http-port", opts->deprecated_http_port,
                  "Deprecated: the old name of --port (goes in the next release)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--served-model-name", opts->served_model_names,
                  "The model's name(s) in requests' `model` and /v1/models; a request may pass "
                  "any, answers carry the first (default: the model directory's name)")
      ->expected(1, -1);
  cmd->add_option("--gpu-memory-utilization", opts->gpu_memory_utilization,
                  "Share of each GPU a worker's weights and KV cache may take, in (0, 1], for the "
                  "phases whose kv_cache_bytes is auto (the GPU default; default 0.9)");
  cmd->add_option("--swap-space", opts->swap_space_gib,
                  "GiB of host memory per rank for the KV of sequences preempted on a full cache, "
                  "swapped out and back instead of computed again (vLLM's per-GPU --swap-space; "
                  "sets every phase's swap_space; default: the config's, 0)");
  cmd->add_option("--max-model-len", opts->max_model_len,
                  "Context length, prompt plus output tokens, at most the model's "
                  "max_position_embeddings (default: that)");
  cmd->add_option("--dtype", opts->dtype,
                  "Weight dtype: auto (the checkpoint's torch_dtype), float32|float, bfloat16, "
                  "float16|half (default: auto; with --config, its weight_dtype)");
  cmd->add_option("--quantization,-q", opts->quantization,
                  "Quantize the matmul weights at load: int8 (per output row, symmetric; "
                  "weight_dtype i8), fp8 (E4M3, a scale per output row; weight_dtype fp8) or int4 "
                  "(groups of 128 columns, asymmetric; weight_dtype i4), whatever --dtype says");
  cmd->add_option("--kv-cache-dtype", opts->kv_cache_dtype,
                  "KV cache elements: f32, bf16 (half the memory per token and half the bytes "
                  "decode attention reads), or auto (bf16 for bf16 weights, else f32) (default: "
                  "f32; with --config, its kv_cache_dtype)");
  CLI::Option* enable_prefix_caching = cmd->add_flag(
      "--enable-prefix-caching", opts->enable_prefix_caching,
      "Keep full KV blocks for later prompts that share their prefix, as vLLM's automatic prefix "
      "caching (default: the config's enable_prefix_caching, on)");
  cmd->add_flag("--no-enable-prefix-caching", opts->no_enable_prefix_caching,
                "Compute every prompt in full (sets the config's enable_prefix_caching to false)")
      ->excludes(enable_prefix_caching);
  cmd->add_option("--startup-timeout", opts->startup_timeout_s,
                  "Seconds to wait for the scheduler to report SERVING")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--stop-grace", opts->stop_grace_s,
                  "Seconds between SIGTERM and SIGKILL when stopping the children")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--drain-timeout", opts->drain_timeout_s,
                  "On SIGINT/SIGTERM: seconds executing requests may take to finish while new ones "
                  "are refused (503 / UNAVAILABLE), before every process stops")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--step-trace-dir", opts->step_trace_dir,
                  "Every worker appends its engine steps to DIR/ROLE-INSTANCE.jsonl (created), for "
                  "`baton plan calibrate --step-traces DIR`");
  cmd->add_option("--secret-file", opts->secret_file,
                  "The deployment secret that authenticates the internal APIs: a file of one line "
                  "(32+ printable characters) only its owner can read (default: a fresh one per start)");
  cmd->add_option("--host", opts->host,
                  "Address every process binds to (default: the config's, 127.0.0.1; 0.0.0.0 "
                  "exposes the deployment to the network)");
  cmd->add_option("--api-key", opts->api_key,
                  "Key every public call but health must present as 'Authorization: Bearer KEY' "
                  "(HTTP header or gRPC metadata)")
      ->envname("BATON_API_KEY");
  cmd->add_option("--tls-cert,--ssl-certfile", opts->tls_cert,
                  "PEM certificate chain: the public gRPC and HTTP APIs serve TLS (with --tls-key)");
  cmd->add_option("--tls-key,--ssl-keyfile", opts->tls_key, "PEM private key of --tls-cert");
  cmd->add_option("--max-num-seqs", opts->max_num_seqs,
                  "Sequences in one continuous batch, every phase (config key max_num_seqs)");
  cmd->add_option("--max-num-batched-tokens", opts->max_num_batched_tokens,
                  "Tokens in one forward pass, every phase (config key max_num_batched_tokens)");
  cmd->add_flag("--enable-chunked-prefill", opts->enable_chunked_prefill,
                "Colocated instances split long prompts across steps, decodes first (config key "
                "chunked_prefill)");
  cmd->add_flag("--enforce-eager", opts->enforce_eager,
                "GPU devices: every step op by op, no CUDA graphs (config key enforce_eager)");
  cmd->add_option("--block-size", opts->block_size, "Tokens per KV block, a power of two (config key block_size)");
  cmd->add_option("--chat-template", opts->chat_template,
                  "Jinja2 chat template file for /v1/chat/completions (default: the model's "
                  "tokenizer_config.json chat_template)");
  cmd->add_option("--tool-call-parser", opts->tool_call_parser,
                  "How the model writes tool calls, read back into tool_calls: hermes, llama3_json or "
                  "mistral (as vLLM's)");
  cmd->add_flag("--enable-auto-tool-choice", opts->enable_auto_tool_choice,
                "tool_choice \"auto\" (the default with tools): the reply is parsed with "
                "--tool-call-parser");
  cmd->add_option("--reasoning-parser", opts->reasoning_parser,
                  "Split a thinking model's <think>...</think> into reasoning_content: deepseek_r1 or qwen3");
  cmd->add_flag("--no-worker-restart", opts->no_worker_restart,
                "Leave a worker that dies down (by default it is started again, after 1 s doubling "
                "to 30 s while it keeps dying)");
  AddParallelFlags(*cmd, &opts->parallel);
  AddLogLevelFlag(*cmd, &opts->log_level);
  cmd->allow_extras();  // vLLM's flags that Baton lacks get a line naming what does their job
  cmd->callback([opts, exit_code, cmd] {
    opts->unknown_args = cmd->remaining();
    StartLogging("baton", opts->log_level);
    *exit_code = RunServe(*opts);
  });
}

}  // namespace baton::cli
