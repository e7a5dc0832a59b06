// DeploymentConfig: the typed description of one Baton deployment — which model, which processes
// (the scheduler and every prefill / decode / colocated worker instance), their parallelism, devices,
// memory budgets, ports and the SLOs the scheduler admits requests against.
//
// Lifecycle: `baton serve` builds one (from a file, or DefaultDeployment), validates it, writes the
// effective config with ToYaml to a file and hands that file to every child (`--config FILE`), which
// reads it back with LoadDeploymentConfig. ParseDeploymentConfig(ToYaml(c)) == c for every valid c.
//
// File format (YAML; JSON is accepted too, being YAML's flow style). Every key is optional except
// `model`; absent keys take the defaults below (those of DefaultDeployment):
//
//   model: /models/llama-3.2-1b     # Hugging Face directory; relative paths are relative to the file
//   served_model_name: llama-1b     # the name clients pass as `model` and /v1/models lists
//                                   # (vLLM's --served-model-name), or a list of names, any of which
//                                   # a request may pass, the first in answers; absent: the model
//                                   # directory's name
//   max_model_len: 4096             # context length (prompt + output tokens), >= 1 and at most the
//                                   # model's max_position_embeddings (checked by `baton serve`,
//                                   # which reads config.json); absent: max_position_embeddings
//   weight_dtype: f32               # f32 | bf16 | f16 | i8 (matmul weights; see LlamaModel::Load;
//                                   # i8: int8 quantized at load, a scale per row)
//   kv_cache_dtype: f32             # f32 | bf16 | auto: KV cache elements, one for the whole
//                                   # deployment so both ends of a KV hand-off agree (vLLM's
//                                   # --kv-cache-dtype); bf16 halves the bytes per token; auto is
//                                   # bf16 for bf16 weights, else f32 (resolved when parsed)
//   enable_prefix_caching: true     # every instance keeps full KV blocks for later prompts with
//                                   # the same prefix (runtime/kv_cache/block_allocator.h; vLLM's
//                                   # --enable-prefix-caching, on by default there too)
//   max_local_prefill_tokens: 0     # disaggregated: a request whose decode instance's prefix cache
//                                   # leaves at most this many tokens to compute is prefilled
//                                   # there, with no hand-off (conditional disaggregation,
//                                   # scheduler/global/request_flow.h); 0: never
//   routing_policy: kv_aware        # kv_aware: instances' cached prefixes weigh against their load
//                                   # (scheduler/global/routing.h); least_loaded: load alone
//   host: 127.0.0.1                 # address every process binds to (and the launcher polls)
//   scheduler_port: 50051           # public gRPC API
//   http_port: 8000                 # OpenAI-compatible HTTP; 0 disables it
//   internal_port: 50054            # the scheduler's worker registry (workers only, authenticated
//                                   # with the deployment secret); default: the port after the
//                                   # highest worker port (the next one if that is http_port)
//   tls_cert: /etc/baton/cert.pem   # PEM certificate chain: the public gRPC and HTTP APIs serve TLS;
//   tls_key: /etc/baton/key.pem     # its PEM private key (both or neither; relative to the file)
//   http_max_body_bytes: 4MiB       # a larger HTTP request body, however framed, is refused (413)
//   liveness_timeout_ms: 1000       # a worker silent this long (5 heartbeats) is probed directly,
//                                   # and cut off only if the probe goes unanswered as long too
//   chat_template: chat.jinja       # Jinja2 chat template file for /v1/chat/completions, replacing
//                                   # the model's tokenizer_config.json one (relative to the file)
//   tool_call_parser: hermes        # how the model writes tool calls: hermes | llama3_json |
//                                   # mistral (vLLM's --tool-call-parser); absent: none
//   enable_auto_tool_choice: false  # tool_choice "auto" (the default with tools) parses the reply
//                                   # with tool_call_parser (vLLM's --enable-auto-tool-choice)
//   reasoning_parser: deepseek_r1   # reasoning_content from <think>...</think>: deepseek_r1 | qwen3
//   mode: disaggregated             # disaggregated (sections prefill, decode) | colocated (colocated)
//   block_size: 16                  # tokens per KV block, a power of two in [1, 1024]
//   slo:                            # latency objectives; ttft_ms and tpot_ms are unset by default
//     ttft_ms: 1000                 # time to first token, > 0
//     tpot_ms: 100                  # time per output token after the first, > 0
//     attainment: 0.9               # share of requests meant to meet both, in (0, 1]
//     admission: true               # shed load at the door; default: ttft_ms or tpot_ms is set
//   prefill:                        # same keys for decode and colocated
//     instances: 1
//     tp: 1                         # tensor-parallel ranks per instance (must fit the model's heads)
//     pp: 1                         # pipeline stages per instance (at most num_layers)
//     pipeline_stage_layers: [4, 2] # optional: layers per stage, pp entries summing to num_layers;
//                                   # absent: balanced (runtime/model/model_shard.h, StageLayerRange)
//     devices: cpu                  # or CUDA ids, one list of tp*pp per instance: [[0, 1], [2, 3]],
//                                   # or cuda-emulated (the GPU backend on the CPU, any phase)
//     threads: 1                    # CPU compute threads per rank: an instance uses tp*pp*threads
//     kv_cache_bytes: 256MiB        # integer bytes or a size: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB;
//                                   # or auto (GPU devices; their default): each rank takes
//                                   # gpu_memory_utilization of its device less its weights
//     gpu_memory_utilization: 0.9   # (0, 1], with kv_cache_bytes auto (vLLM's flag)
//     swap_space: 4GiB              # host memory per instance for the KV of sequences preempted
//                                   # on a full cache: swapped out and back rather than computed
//                                   # again (vLLM v0's --swap-space; DistServe); 0 (default): none
//     max_num_seqs: 64
//     max_num_batched_tokens: 2048
//     base_port: 50052              # instance i serves the worker API on base_port + i
//     kv_base_port: 0               # prefill section only: rank r of instance i serves its KV
//                                   # blocks on kv_base_port + i * tp * pp + r; 0 (default): free
//                                   # ports, as the OS picks them
//     kv_link_pool_size: 8          # decode section only (GPUs): NCCL KV links kept warm, over
//                                   # all prefill ranks; the least recently used beyond are closed
//     chunked_prefill: false        # colocated section only
//     enforce_eager: false          # GPU devices: every step op by op, no decode graphs (vLLM's
//                                   # --enforce-eager; runtime/model/decode_graphs.h)
//
// Default base ports pack the workers right after the scheduler: prefill (or colocated) starts at
// scheduler_port + 1, decode right after the last prefill instance.
//
// Admission (scheduler/global/admission.h): with `slo.admission` on, the scheduler answers a new
// request RESOURCE_EXHAUSTED (HTTP 429) when its predicted TTFT exceeds ttft_ms, or when its
// predicted TPOT exceeds tpot_ms on every decode-capable instance; an unset SLO's check is off.
// `admission: true` needs at least one of the two.
//
// Parallelism: every instance of a phase runs tp x pp ranks (runtime/engine/model_ranks.h), on the
// CPU one thread pool of `threads` threads per rank. Whether tp, pp and pipeline_stage_layers fit the
// model is not checked here (that needs its config.json): `baton serve` checks it before starting any
// process (cli/parallel_layout.h), and the worker's engine checks it again at load.
//
// Errors: every parse and validation failure is kInvalidArgument and its message starts with the key
// path ("prefill.tp: must be >= 1", "unknown key 'decoder' at top level", "decode.devices[1][0]: ...").
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/common/dtype.h"
#include "runtime/worker/worker_role.h"

namespace baton::scheduler {

using runtime::WorkerRole;

enum class DeploymentMode : uint8_t { kDisaggregated, kColocated };

absl::string_view DeploymentModeName(DeploymentMode mode);  // "disaggregated" | "colocated"

// How the scheduler picks an instance for a request (routing_policy).
enum class RoutingPolicy : uint8_t { kKvAware, kLeastLoaded };

absl::string_view RoutingPolicyName(RoutingPolicy policy);  // "kv_aware" | "least_loaded"
std::optional<RoutingPolicy> RoutingPolicyFromName(std::string_view name);

// One phase's instances: all instances of a phase are identical.
struct PhaseConfig {
  int num_instances = 1;  // yaml: instances
  int tp = 1;
  int pp = 1;
  // yaml: pipeline_stage_layers. Empty: the layers are split over the pp stages as evenly as
  // possible. Else [pp] layers per stage, each >= 1 (their sum is checked against the model by the
  // launcher and the engine, not here).
  std::vector<int> stage_num_layers;
  // Empty: every instance runs on the CPU backend. Otherwise [num_instances][tp * pp] CUDA device
  // ids, rank order within an instance (stage-major: stage s, tp rank r at s * tp + r); no device
  // appears twice in a deployment.
  std::vector<std::vector<int>> cuda_device_ids;  // yaml: devices
  // yaml: devices: cuda-emulated. The GPU backend's code run on the CPU (runtime/backend/
  // backend_registry.h), for tests and CI; excludes cuda_device_ids.
  bool cuda_emulated = false;
  int num_threads = 1;                   // yaml: threads; CPU compute threads per rank
  // KV pool budget per instance; 0 (yaml: auto, CUDA devices' default): gpu_memory_utilization of
  // each rank's device less its weights (runtime/engine/model_ranks.h).
  uint64_t kv_cache_bytes = 256ull << 20;
  double gpu_memory_utilization = 0.9;
  // yaml: swap_space. Host memory per instance for preempted sequences' KV (runtime/kv_cache/
  // kv_swap.h); 0: a preempted sequence is computed again.
  uint64_t swap_space_bytes = 0;
  int max_num_seqs = 64;                 // sequences in one continuous batch
  int max_num_batched_tokens = 2048;     // tokens in one forward pass
  bool chunked_prefill = false;          // colocated only: split long prompts across steps
  bool enforce_eager = false;            // no decode graphs on GPU devices
  int base_port = 0;                     // instance i listens on base_port + i
  // Prefill only: rank r of instance i serves its KV blocks (TCP) on kv_base_port + i * tp * pp +
  // r, a fixed range for firewalls and container ports; 0 (default): each rank picks a free port.
  int kv_base_port = 0;
  // Decode only, on GPUs: KV links (NCCL communicators, ~100 MB each) kept warm between pulls over
  // all prefill ranks; the least recently used beyond are closed, so P x D pairs need not each
  // hold one forever.
  int kv_link_pool_size = 8;

  // kv_base_port's port for rank `rank` of instance `instance`; 0 when the rank picks one.
  int KvPort(int instance, int rank) const {
    return kv_base_port == 0 ? 0 : kv_base_port + instance * tp * pp + rank;
  }

  bool on_cpu() const { return cuda_device_ids.empty() && !cuda_emulated; }
  // "cpu", "cuda" or "cuda-emulated".
  absl::string_view device_name() const {
    return cuda_emulated ? "cuda-emulated" : on_cpu() ? "cpu" : "cuda";
  }
  bool operator==(const PhaseConfig&) const = default;
};

// Latency objectives, and whether the scheduler sheds the requests predicted to miss them.
struct SloConfig {
  std::optional<double> ttft_ms;  // time to first token, > 0; unset: no TTFT objective
  std::optional<double> tpot_ms;  // time per output token after the first, > 0; unset: none
  double attainment = 0.9;        // target share of requests meeting both, in (0, 1]
  // Unset: on when ttft_ms or tpot_ms is set (AdmissionEnabled). true needs one of them.
  std::optional<bool> admission;

  bool operator==(const SloConfig&) const = default;
};

// slo.admission, or its default: whether ttft_ms or tpot_ms is set.
bool AdmissionEnabled(const SloConfig& slo);

struct DeploymentConfig {
  std::filesystem::path model_dir;  // yaml: model; required
  // The model's public names (`model` in requests, /v1/models), the first in answers; empty:
  // model_dir's last component.
  std::vector<std::string> served_model_names;
  // Context length in tokens for the scheduler and every worker; 0: the model's
  // max_position_embeddings. Not checked against the model here (that needs its config.json).
  int max_model_len = 0;
  DType weight_dtype = DType::kF32;  // kF32, kBF16 or kF16
  DType kv_cache_dtype = DType::kF32;  // kF32 or kBF16, every instance's KV pools
  bool enable_prefix_caching = true;
  int max_local_prefill_tokens = 0;  // >= 0; disaggregated only
  RoutingPolicy routing_policy = RoutingPolicy::kKvAware;
  std::string host = "127.0.0.1";
  int scheduler_port = 50051;  // gRPC InferenceService
  int http_port = 8000;        // OpenAI-compatible HTTP; 0: disabled
  int internal_port = 50054;   // the worker registry, off the public port
  // Both set: the public APIs (gRPC and HTTP) serve TLS with this PEM chain and key; both empty:
  // plain text. The internal port is authenticated by the deployment secret instead.
  std::filesystem::path tls_cert;
  std::filesystem::path tls_key;
  uint64_t http_max_body_bytes = 4ull << 20;
  int liveness_timeout_ms = 1000;  // in [200, 600000]
  // Empty: the model's own chat template (tokenizer_config.json), if any.
  std::filesystem::path chat_template;
  // Tool calling and reasoning on the chat API (scheduler/service/openai_tools.h); the names are
  // checked by `baton serve`, which knows the parsers. Empty: none.
  std::string tool_call_parser;
  bool enable_auto_tool_choice = false;
  std::string reasoning_parser;
  DeploymentMode mode = DeploymentMode::kDisaggregated;
  int block_size = 16;  // tokens per KV block
  SloConfig slo;
  // Only the phases of `mode` are meaningful (Roles(mode)); the others keep their defaults and are
  // neither validated nor written by ToYaml.
  PhaseConfig prefill{.base_port = 50052};
  PhaseConfig decode{.base_port = 50053};
  PhaseConfig colocated{.base_port = 50052};

  bool operator==(const DeploymentConfig&) const = default;
};

// One worker process of a deployment.
struct WorkerInstance {
  WorkerRole role;
  int instance_idx;  // 0 .. num_instances - 1 within its role
  int port;          // base_port + instance_idx

  bool operator==(const WorkerInstance&) const = default;
};

// The embedded default: 1 prefill + 1 decode instance on the CPU, one thread each, localhost only.
DeploymentConfig DefaultDeployment(const std::filesystem::path& model_dir);

// Parses a YAML or JSON document and validates it (ValidateDeploymentConfig). A relative model path
// is kept as written.
absl::StatusOr<DeploymentConfig> ParseDeploymentConfig(absl::string_view text);

// Reads and parses a file; a relative `model` is resolved against the file's directory. NotFound when
// the file cannot be read; parse errors are InvalidArgument prefixed with the file's path.
absl::StatusOr<DeploymentConfig> LoadDeploymentConfig(const std::filesystem::path& path);

// Checks every field of the phases in use (see the file comment for the ranges), that
// pipeline_stage_layers has pp entries when given, that the CUDA device lists match instances and
// tp * pp, that no CUDA device and no port (scheduler, http, workers) is
// used twice, and that chunked_prefill is set only in colocated mode.
absl::Status ValidateDeploymentConfig(const DeploymentConfig& config);

// The effective config as YAML, every key explicit, readable by ParseDeploymentConfig.
// Pre-condition: ValidateDeploymentConfig(config) is OK.
std::string ToYaml(const DeploymentConfig& config);

// The internal port a config without one gets: the port after the highest worker port, or after
// the scheduler's with no workers, unless that is http_port (then the one after it).
int DefaultInternalPort(const DeploymentConfig& config);

// Moves the scheduler to `port` and every worker port and the internal port by the same offset, so
// that a whole deployment's gRPC ports move together (`baton serve --grpc-port`). The http port is
// left alone.
// InvalidArgument when a port would leave [1, 65535].
absl::Status SetSchedulerPort(DeploymentConfig& config, int port);

// The phases in use: {kPrefill, kDecode} or {kColocated}.
std::vector<WorkerRole> Roles(DeploymentMode mode);
const PhaseConfig& Phase(const DeploymentConfig& config, WorkerRole role);
PhaseConfig& MutablePhase(DeploymentConfig& config, WorkerRole role);
// Every worker instance, in Roles() order then by instance index.
std::vector<WorkerInstance> WorkerInstances(const DeploymentConfig& config);

// "512MiB", "2GiB", "1.5 GiB", "4096", "64KB": a byte count with an optional binary (KiB..TiB) or
// decimal (KB..TB) unit; the result must be a whole number of bytes below 2^62. InvalidArgument
// naming the text otherwise.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);
// The largest binary unit that divides `num_bytes` exactly ("512MiB"), else the plain number.
std::string FormatByteSize(uint64_t num_bytes);

}  // namespace baton::scheduler
