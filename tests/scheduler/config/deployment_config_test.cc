#include "scheduler/config/deployment_config.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_macros.h"
#include "tests/testing/status_matchers.h"

namespace baton::scheduler {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A YAML config that sets every key away from its default.
constexpr char kFullYaml[] = R"(
model: /models/llama
served_model_name: llama-3-8b-instruct
max_model_len: 4096
weight_dtype: bf16
kv_cache_dtype: bf16
routing_policy: least_loaded
host: 10.0.0.7
scheduler_port: 6000
http_port: 6100
mode: disaggregated
block_size: 32
slo:
  ttft_ms: 250.5
  tpot_ms: 40
  attainment: 0.99
  admission: false
prefill:
  instances: 2
  tp: 2
  pp: 1
  devices: [[0, 1], [2, 3]]
  threads: 4
  kv_cache_bytes: 2GiB
  max_num_seqs: 8
  max_num_batched_tokens: 4096
  base_port: 6010
decode:
  instances: 1
  tp: 1
  pp: 2
  pipeline_stage_layers: [5, 3]
  devices: [[4, 5]]
  threads: 2
  kv_cache_bytes: 1536MiB
  swap_space: 4GiB
  max_num_seqs: 128
  max_num_batched_tokens: 512
  base_port: 6020
)";

// The same deployment in JSON (with tabs, which JSON allows).
constexpr char kFullJson[] = R"({
	"model": "/models/llama", "served_model_name": "llama-3-8b-instruct", "max_model_len": 4096,
	"weight_dtype": "bf16", "kv_cache_dtype": "bf16", "routing_policy": "least_loaded", "host": "10.0.0.7",
	"scheduler_port": 6000, "http_port": 6100, "mode": "disaggregated", "block_size": 32,
	"slo": {"ttft_ms": 250.5, "tpot_ms": 40, "attainment": 0.99, "admission": false},
	"prefill": {"instances": 2, "tp": 2, "pp": 1, "devices": [[0, 1], [2, 3]], "threads": 4,
	            "kv_cache_bytes": "2GiB", "max_num_seqs": 8, "max_num_batched_tokens": 4096,
	            "base_port": 6010},
	"decode": {"instances": 1, "tp": 1, "pp": 2, "pipeline_stage_layers": [5, 3],
	           "devices": [[4, 5]], "threads": 2,
	           "kv_cache_bytes": 1610612736, "swap_space": "4 GiB", "max_num_seqs": 128,
	           "max_num_batched_tokens": 512,
	           "base_port": 6020}
})";

// A GPU phase's KV budget defaults to a share of its devices (auto); an explicit size stays.
TEST(DeploymentConfigKvBudgetTest, GpuPhasesDefaultToAutoAndCpuPhasesTo256MiB) {
  absl::StatusOr<DeploymentConfig> c = ParseDeploymentConfig(
      "model: m\nprefill: {devices: [[0]]}\ndecode: {devices: [[1]], kv_cache_bytes: 1GiB, "
      "gpu_memory_utilization: 0.8}\n");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->prefill.kv_cache_bytes, 0u);  // auto
  EXPECT_EQ(c->prefill.gpu_memory_utilization, 0.9);
  EXPECT_EQ(c->decode.kv_cache_bytes, 1ull << 30);
  EXPECT_EQ(c->decode.gpu_memory_utilization, 0.8);
  const std::string yaml = ToYaml(*c);
  EXPECT_THAT(yaml, HasSubstr("kv_cache_bytes: auto"));
  absl::StatusOr<DeploymentConfig> again = ParseDeploymentConfig(yaml);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(*again, *c);
  c = ParseDeploymentConfig("model: m\nprefill: {devices: cuda-emulated}\n");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->prefill.kv_cache_bytes, 256ull << 20) << "the emulated device's pool is host memory";
}

TEST(DeploymentConfigTest, DefaultDeploymentIsOnePrefillOneDecodeOnLocalCpu) {
  const DeploymentConfig config = DefaultDeployment("/models/tiny");
  EXPECT_THAT(ValidateDeploymentConfig(config), IsOk());
  EXPECT_EQ(config.model_dir, "/models/tiny");
  EXPECT_EQ(config.weight_dtype, DType::kF32);
  EXPECT_EQ(config.kv_cache_dtype, DType::kF32);
  EXPECT_EQ(config.host, "127.0.0.1");
  EXPECT_EQ(config.scheduler_port, 50051);
  EXPECT_EQ(config.http_port, 8000);
  EXPECT_EQ(config.mode, DeploymentMode::kDisaggregated);
  EXPECT_EQ(config.block_size, 16);
  // No latency objective, so no admission control.
  EXPECT_EQ(config.slo, (SloConfig{.ttft_ms = std::nullopt, .tpot_ms = std::nullopt,
                                   .attainment = 0.9, .admission = std::nullopt}));
  EXPECT_FALSE(AdmissionEnabled(config.slo));
  for (WorkerRole role : {WorkerRole::kPrefill, WorkerRole::kDecode}) {
    const PhaseConfig& phase = Phase(config, role);
    EXPECT_EQ(phase.num_instances, 1);
    EXPECT_EQ(phase.tp, 1);
    EXPECT_EQ(phase.pp, 1);
    EXPECT_TRUE(phase.on_cpu());
    EXPECT_EQ(phase.num_threads, 1);
    EXPECT_EQ(phase.kv_cache_bytes, 256u << 20);
    EXPECT_FALSE(phase.chunked_prefill);
  }
  EXPECT_THAT(WorkerInstances(config),
              ElementsAre(WorkerInstance{WorkerRole::kPrefill, 0, 50052},
                          WorkerInstance{WorkerRole::kDecode, 0, 50053}));
}

TEST(DeploymentConfigTest, ModelAloneParsesToTheDefaultDeployment) {
  EXPECT_EQ(ParseDeploymentConfig("model: /models/tiny\n").value(), DefaultDeployment("/models/tiny"));
  EXPECT_EQ(ParseDeploymentConfig("model: /models/tiny\nprefill:\ndecode: {}\n").value(),
            DefaultDeployment("/models/tiny"));
}

TEST(DeploymentConfigTest, ParsesEveryKey) {
  absl::StatusOr<DeploymentConfig> parsed = ParseDeploymentConfig(kFullYaml);
  ASSERT_THAT(parsed, IsOk());
  const DeploymentConfig& c = *parsed;
  EXPECT_EQ(c.model_dir, "/models/llama");
  EXPECT_THAT(c.served_model_names, ElementsAre("llama-3-8b-instruct"));
  EXPECT_EQ(c.max_model_len, 4096);
  EXPECT_EQ(c.weight_dtype, DType::kBF16);
  EXPECT_EQ(c.kv_cache_dtype, DType::kBF16);
  EXPECT_EQ(c.routing_policy, RoutingPolicy::kLeastLoaded);
  EXPECT_EQ(DefaultDeployment("m").routing_policy, RoutingPolicy::kKvAware);
  EXPECT_EQ(c.host, "10.0.0.7");
  EXPECT_EQ(c.scheduler_port, 6000);
  EXPECT_EQ(c.http_port, 6100);
  EXPECT_EQ(c.block_size, 32);
  EXPECT_EQ(c.slo, (SloConfig{.ttft_ms = 250.5, .tpot_ms = 40, .attainment = 0.99, .admission = false}));
  EXPECT_FALSE(AdmissionEnabled(c.slo));
  EXPECT_EQ(c.prefill, (PhaseConfig{.num_instances = 2,
                                    .tp = 2,
                                    .pp = 1,
                                    .cuda_device_ids = {{0, 1}, {2, 3}},
                                    .num_threads = 4,
                                    .kv_cache_bytes = 2ull << 30,
                                    .max_num_seqs = 8,
                                    .max_num_batched_tokens = 4096,
                                    .base_port = 6010}));
  EXPECT_EQ(c.decode, (PhaseConfig{.num_instances = 1,
                                   .tp = 1,
                                   .pp = 2,
                                   .stage_num_layers = {5, 3},
                                   .cuda_device_ids = {{4, 5}},
                                   .num_threads = 2,
                                   .kv_cache_bytes = 1536ull << 20,
                                   .swap_space_bytes = 4ull << 30,
                                   .max_num_seqs = 128,
                                   .max_num_batched_tokens = 512,
                                   .base_port = 6020}));
  EXPECT_THAT(WorkerInstances(c),
              ElementsAre(WorkerInstance{WorkerRole::kPrefill, 0, 6010},
                          WorkerInstance{WorkerRole::kPrefill, 1, 6011},
                          WorkerInstance{WorkerRole::kDecode, 0, 6020}));
}

// vLLM's default: the weights' dtype where a KV cache can hold it, whichever key comes first.
TEST(DeploymentConfigTest, KvCacheDtypeAutoFollowsTheWeights) {
  const auto kv_dtype = [](absl::string_view yaml) -> absl::StatusOr<DType> {
    ASSIGN_OR_RETURN(const DeploymentConfig config, ParseDeploymentConfig(yaml));
    return config.kv_cache_dtype;
  };
  EXPECT_THAT(kv_dtype("model: m\nkv_cache_dtype: auto\nweight_dtype: bf16\n"),
              absl_testing::IsOkAndHolds(DType::kBF16));
  EXPECT_THAT(kv_dtype("model: m\nweight_dtype: bf16\nkv_cache_dtype: auto\n"),
              absl_testing::IsOkAndHolds(DType::kBF16));
  EXPECT_THAT(kv_dtype("model: m\nweight_dtype: f16\nkv_cache_dtype: auto\n"),
              absl_testing::IsOkAndHolds(DType::kF32));
  EXPECT_THAT(kv_dtype("model: m\nkv_cache_dtype: auto\n"),
              absl_testing::IsOkAndHolds(DType::kF32));
}

// A fixed range of KV ports for the prefill ranks (firewalls, container ports), checked like the
// worker ports: the prefill phase only, inside [1, 65535], taken by nothing else.
TEST(DeploymentConfigTest, KvBasePortGivesEachPrefillRankItsPort) {
  const absl::StatusOr<DeploymentConfig> parsed =
      ParseDeploymentConfig("model: m\nprefill: {instances: 2, tp: 2, kv_base_port: 7000}\n");
  ASSERT_THAT(parsed, IsOk());
  const DeploymentConfig& config = *parsed;
  EXPECT_EQ(config.prefill.KvPort(0, 0), 7000);
  EXPECT_EQ(config.prefill.KvPort(0, 1), 7001);
  EXPECT_EQ(config.prefill.KvPort(1, 0), 7002);
  EXPECT_EQ(config.decode.KvPort(0, 0), 0);
  EXPECT_THAT(ParseDeploymentConfig(ToYaml(config)), absl_testing::IsOkAndHolds(config));
  EXPECT_THAT(ParseDeploymentConfig("model: m\ndecode: {kv_base_port: 7000}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("decode.kv_base_port: only the prefill phase serves KV blocks")));
  EXPECT_THAT(ParseDeploymentConfig("model: m\nprefill: {instances: 2, kv_base_port: 65535}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reach port 65536")));
  // 50052 is prefill worker 0's own port (the default base ports pack the workers after 50051).
  EXPECT_THAT(ParseDeploymentConfig("model: m\nprefill: {tp: 2, kv_base_port: 50052}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("prefill.kv_base_port: port 50052 of the KV server of rank 0")));
}

TEST(DeploymentConfigTest, KvLinkPoolSizeIsTheDecodePhases) {
  const absl::StatusOr<DeploymentConfig> parsed =
      ParseDeploymentConfig("model: m\ndecode: {kv_link_pool_size: 3}\n");
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->decode.kv_link_pool_size, 3);
  EXPECT_EQ(parsed->prefill.kv_link_pool_size, 8);
  EXPECT_THAT(ParseDeploymentConfig(ToYaml(*parsed)), absl_testing::IsOkAndHolds(*parsed));
  EXPECT_THAT(ParseDeploymentConfig("model: m\ndecode: {kv_link_pool_size: 0}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("decode.kv_link_pool_size: must be >= 1")));
  EXPECT_THAT(ParseDeploymentConfig("model: m\nprefill: {kv_link_pool_size: 3}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("prefill.kv_link_pool_size: only the decode phase pulls KV")));
}

TEST(DeploymentConfigTest, JsonAndYamlGiveTheSameConfig) {
  absl::StatusOr<DeploymentConfig> from_json = ParseDeploymentConfig(kFullJson);
  ASSERT_THAT(from_json, IsOk());
  EXPECT_EQ(*from_json, ParseDeploymentConfig(kFullYaml).value());
}

TEST(DeploymentConfigTest, ColocatedModeReadsTheColocatedSection) {
  absl::StatusOr<DeploymentConfig> c = ParseDeploymentConfig(
      "model: m\nmode: colocated\ncolocated: {instances: 3, chunked_prefill: true}\n");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->mode, DeploymentMode::kColocated);
  EXPECT_EQ(c->colocated.num_instances, 3);
  EXPECT_TRUE(c->colocated.chunked_prefill);
  EXPECT_FALSE(c->colocated.cuda_emulated);
  EXPECT_THAT(WorkerInstances(*c),
              ElementsAre(WorkerInstance{WorkerRole::kColocated, 0, 50052},
                          WorkerInstance{WorkerRole::kColocated, 1, 50053},
                          WorkerInstance{WorkerRole::kColocated, 2, 50054}));
}

TEST(DeploymentConfigTest, DefaultWorkerPortsFollowTheSchedulerPhaseAfterPhase) {
  struct Case {
    std::string yaml;
    int prefill_base_port;
    int decode_base_port;
    int internal_port;  // after the last worker, skipping http_port
  };
  const std::vector<Case> cases = {
      {"model: m\nscheduler_port: 6000\n", 6001, 6002, 6003},
      {"model: m\nscheduler_port: 6000\nprefill: {instances: 3}\n", 6001, 6004, 6005},
      {"model: m\nprefill: {base_port: 7000, instances: 2}\n", 7000, 7002, 7003},
      {"model: m\ndecode: {base_port: 7000}\n", 50052, 7000, 50053},
      {"model: m\nscheduler_port: 6000\nhttp_port: 6003\n", 6001, 6002, 6004},
      {"model: m\ninternal_port: 9000\n", 50052, 50053, 9000},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(c.yaml);
    ASSERT_THAT(config, IsOk());
    EXPECT_EQ(config->prefill.base_port, c.prefill_base_port);
    EXPECT_EQ(config->decode.base_port, c.decode_base_port);
    EXPECT_EQ(config->internal_port, c.internal_port);
  }
  EXPECT_THAT(ParseDeploymentConfig("model: m\ninternal_port: 50052\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("prefill.base_port: port 50052 of prefill worker 0 is already taken by internal_port")));
  EXPECT_THAT(ParseDeploymentConfig("model: m\ninternal_port: 0\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("internal_port:")));
}

TEST(DeploymentConfigTest, EveryInvalidInputNamesItsKey) {
  struct Case {
    std::string yaml;
    std::string message_prefix;
  };
  const std::vector<Case> cases = {
      // Structure and types.
      {"", "model: required"},
      {"{}", "model: required"},
      {"- 1\n- 2\n", "top level: expected a mapping, got a list"},
      {"model: [m\n", "malformed YAML at line 2"},
      {"model: m\ndecoder: {}\n", "unknown key 'decoder' at top level (expected one of: model,"},
      {"model: m\nprefill: {tpp: 2}\n", "unknown key 'tpp' in prefill (expected one of: instances,"},
      {"model: m\nslo: {ttft: 2}\n", "unknown key 'ttft' in slo"},
      {"model: m\nmode: colocated\ncolocated: {x: 1}\n", "unknown key 'x' in colocated"},
      {"model: m\nmodel: n\n", "model: duplicate key"},
      {"model: m\nprefill: {tp: 1, tp: 2}\n", "prefill.tp: duplicate key"},
      {"model: [a, b]\n", "model: expected a string, got a list"},
      {"model: m\nserved_model_name: ''\n", "served_model_name: must not be empty"},
      {"model: m\nserved_model_name: []\n", "served_model_name: must name the model at least once"},
      {"model: m\nserved_model_name: [a, '']\n", "served_model_name: must not be empty"},
      {"model: m\nserved_model_name: [a, [b]]\n", "served_model_name[1]: expected a string, got a list"},
      {"model: m\nmax_model_len: 0\n", "max_model_len: must be >= 1, got 0"},
      {"model: m\nmax_model_len: -5\n", "max_model_len: must be >= 1, got -5"},
      {"model: m\nmax_model_len: '2048'\n", "max_model_len: expected an integer, got the string"},
      {"model: m\ntls_cert: c.pem\n", "tls_key: tls_cert and tls_key go together"},
      {"model: m\ntls_key: k.pem\n", "tls_cert: tls_cert and tls_key go together"},
      {"model: m\nhttp_max_body_bytes: 0\n", "http_max_body_bytes: must be > 0"},
      {"model: m\nliveness_timeout_ms: 100\n", "liveness_timeout_ms: must be in [200, 600000], got 100"},
      {"model: m\nliveness_timeout_ms: 1s\n", "liveness_timeout_ms"},
      {"model: m\nhttp_max_body_bytes: lots\n", "http_max_body_bytes: "},
      {"model: m\nslo: 3\n", "slo: expected a mapping, got '3'"},
      {"model: m\nprefill: [1]\n", "prefill: expected a mapping, got a list"},
      {"model: m\nprefill: {tp: two}\n", "prefill.tp: expected an integer, got 'two'"},
      {"model: m\nprefill: {tp: 1.5}\n", "prefill.tp: expected an integer, got '1.5'"},
      {"model: m\nprefill: {tp: ~}\n", "prefill.tp: expected an integer, got null"},
      {R"({"model": "m", "prefill": {"tp": "2"}})",
       "prefill.tp: expected an integer, got the string \"2\""},
      {"model: m\nslo: {tpot_ms: fast}\n", "slo.tpot_ms: expected a number, got 'fast'"},
      {"model: m\nslo: {ttft_ms: 5, admission: maybe}\n",
       "slo.admission: expected true or false, got 'maybe'"},
      {"model: m\nslo: {ttft_ms: 5, admission: 'true'}\n",
       "slo.admission: expected true or false, got the string \"true\""},
      {"model: m\nmode: colocated\ncolocated: {chunked_prefill: maybe}\n",
       "colocated.chunked_prefill: expected true or false, got 'maybe'"},
      {"model: m\nweight_dtype: fp4\n",
       "weight_dtype: 'fp4' is not supported (expected f32, bf16, f16, i8, i4 or fp8)"},
      {"model: m\nkv_cache_dtype: f16\n",
       "kv_cache_dtype: 'f16' is not supported (expected f32, bf16 or auto)"},
      {"model: m\nmode: hybrid\n", "mode: 'hybrid' (expected disaggregated or colocated)"},
      {"model: m\nrouting_policy: random\n",
       "routing_policy: 'random' is not a policy (expected kv_aware or least_loaded)"},
      {"model: m\ncolocated: {}\n", "colocated: section not used in disaggregated mode"},
      {"model: m\nmode: colocated\ndecode: {}\n", "decode: section not used in colocated mode"},
      // Top-level values.
      {"model: m\nhost: ''\n", "host: must not be empty"},
      {"model: m\nhost: 'a b'\n", "host: 'a b' contains whitespace"},
      {"model: m\nscheduler_port: 0\n", "scheduler_port: must be in [1, 65535], got 0"},
      {"model: m\nscheduler_port: 70000\n", "scheduler_port: must be in [1, 65535], got 70000"},
      {"model: m\nhttp_port: -1\n", "http_port: must be in [0, 65535] (0 disables HTTP), got -1"},
      {"model: m\nblock_size: 12\n", "block_size: must be a power of two in [1, 1024], got 12"},
      {"model: m\nblock_size: 2048\n", "block_size: must be a power of two in [1, 1024], got 2048"},
      {"model: m\nslo: {ttft_ms: 0}\n", "slo.ttft_ms: must be a finite number > 0, got 0"},
      {"model: m\nslo: {tpot_ms: -5}\n", "slo.tpot_ms: must be a finite number > 0, got -5"},
      {"model: m\nslo: {tpot_ms: .inf}\n", "slo.tpot_ms: expected a number, got '.inf'"},
      {"model: m\nslo: {attainment: 1.5}\n", "slo.attainment: must be in (0, 1], got 1.5"},
      {"model: m\nslo: {attainment: 0}\n", "slo.attainment: must be in (0, 1], got 0"},
      {"model: m\nslo: {admission: true}\n", "slo.admission: true needs slo.ttft_ms or slo.tpot_ms"},
      {"model: m\nslo: {attainment: 0.5, admission: true}\n",
       "slo.admission: true needs slo.ttft_ms or slo.tpot_ms"},
      // Phases.
      {"model: m\nprefill: {instances: 0}\n", "prefill.instances: must be >= 1, got 0"},
      {"model: m\nprefill: {tp: 0}\n", "prefill.tp: must be >= 1, got 0"},
      {"model: m\ndecode: {pp: -1}\n", "decode.pp: must be >= 1, got -1"},
      {"model: m\nprefill: {threads: 0}\n", "prefill.threads: must be >= 1, got 0"},
      {"model: m\nprefill: {pp: 2, pipeline_stage_layers: [3]}\n",
       "prefill.pipeline_stage_layers: 1 entries for pp = 2 stages"},
      {"model: m\ndecode: {pp: 2, pipeline_stage_layers: [3, 0]}\n",
       "decode.pipeline_stage_layers[1]: must be >= 1, got 0"},
      {"model: m\nprefill: {pipeline_stage_layers: []}\n",
       "prefill.pipeline_stage_layers: expected a list of integers, got a list"},
      {"model: m\nprefill: {pipeline_stage_layers: 3}\n",
       "prefill.pipeline_stage_layers: expected a list of integers, got '3'"},
      {"model: m\nprefill: {pp: 2, pipeline_stage_layers: [3, x]}\n",
       "prefill.pipeline_stage_layers[1]: expected an integer, got 'x'"},
      {"model: m\nprefill: {kv_cache_bytes: 0}\n", "prefill.kv_cache_bytes: must be > 0 (or auto)"},
      {"model: m\nprefill: {kv_cache_bytes: auto}\n",
       "prefill.kv_cache_bytes: auto (a share of the device) needs GPU devices"},
      {"model: m\nprefill: {devices: [[0]], gpu_memory_utilization: 1.5}\n",
       "prefill.gpu_memory_utilization: must be in (0, 1], got 1.5"},
      {"model: m\nprefill: {kv_cache_bytes: 512XB}\n", "prefill.kv_cache_bytes: '512XB': unknown unit"},
      {"model: m\ndecode: {swap_space: lots}\n", "decode.swap_space: 'lots'"},
      {"model: m\ndecode: {swap_space: {a: 1}}\n",
       "decode.swap_space: expected a byte size such as 4GiB, or 0, got a map"},
      {"model: m\nprefill: {kv_cache_bytes: [1]}\n",
       "prefill.kv_cache_bytes: expected a byte size such as 512MiB, or auto, got a list"},
      {"model: m\ndecode: {max_num_seqs: 0}\n", "decode.max_num_seqs: must be >= 1, got 0"},
      {"model: m\ndecode: {max_num_batched_tokens: 0}\n",
       "decode.max_num_batched_tokens: must be >= 1, got 0"},
      {"model: m\nprefill: {chunked_prefill: true}\n",
       "prefill.chunked_prefill: only valid for colocated instances"},
      {"model: m\nprefill: {base_port: 65535, instances: 2}\n",
       "prefill.base_port: 2 instances from port 65535 reach port 65536 (> 65535)"},
      {"model: m\nprefill: {base_port: 0}\n", "prefill.base_port: must be in [1, 65535], got 0"},
      // Devices.
      {"model: m\nprefill: {devices: gpu}\n",
       "prefill.devices: expected 'cpu', 'cuda-emulated' or a list of CUDA device-id lists, got 'gpu'"},
      {"model: m\nprefill: {devices: []}\n",
       "prefill.devices: expected 'cpu', 'cuda-emulated' or a list of CUDA device-id lists, got a list"},
      {"model: m\nprefill: {devices: [0, 1]}\n",
       "prefill.devices[0]: expected a list of CUDA device ids, got '0'"},
      {"model: m\nprefill: {devices: [[0, x]]}\n", "prefill.devices[0][1]: expected an integer, got 'x'"},
      {"model: m\nprefill: {instances: 2, devices: [[0]]}\n",
       "prefill.devices: 1 device lists for 2 instances"},
      {"model: m\nprefill: {tp: 2, devices: [[0]]}\n",
       "prefill.devices[0]: 1 device ids for tp * pp = 2 ranks"},
      {"model: m\nprefill: {devices: [[-1]]}\n", "prefill.devices[0][0]: must be >= 0, got -1"},
      {"model: m\nprefill: {tp: 2, devices: [[0, 1]]}\ndecode: {devices: [[1]]}\n",
       "decode.devices[0][0]: CUDA device 1 is already used by prefill.devices[0][1]"},
      {"model: m\nprefill: {tp: 2, devices: [[0, 0]]}\n",
       "prefill.devices[0][1]: CUDA device 0 is already used by prefill.devices[0][0]"},
      // Ports shared between listeners.
      {"model: m\nhttp_port: 50051\n", "http_port: port 50051 is already taken by scheduler_port"},
      {"model: m\ndecode: {base_port: 50052}\n",
       "decode.base_port: port 50052 of decode worker 0 is already taken by prefill worker 0"},
      {"model: m\nprefill: {base_port: 7999, instances: 2}\n",
       "prefill.base_port: port 8000 of prefill worker 1 is already taken by http_port"},
      {"model: m\ndecode: {base_port: 50051}\n",
       "decode.base_port: port 50051 of decode worker 0 is already taken by scheduler_port"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    EXPECT_THAT(ParseDeploymentConfig(c.yaml),
                StatusIs(absl::StatusCode::kInvalidArgument, StartsWith(c.message_prefix)));
  }
}

TEST(DeploymentConfigTest, AdmissionDefaultsToOnWhenAnSloIsSet) {
  struct Case {
    std::string slo;
    bool admission;
  };
  const std::vector<Case> cases = {
      {"{}", false},
      {"{attainment: 0.5}", false},
      {"{admission: false}", false},
      {"{ttft_ms: 2000}", true},
      {"{tpot_ms: 50}", true},
      {"{ttft_ms: 2000, tpot_ms: 50}", true},
      {"{ttft_ms: 2000, admission: true}", true},
      {"{ttft_ms: 2000, tpot_ms: 50, admission: false}", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.slo);
    absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig("model: m\nslo: " + c.slo + "\n");
    ASSERT_THAT(config, IsOk());
    EXPECT_EQ(AdmissionEnabled(config->slo), c.admission);
  }
  absl::StatusOr<DeploymentConfig> ttft_only = ParseDeploymentConfig("model: m\nslo: {ttft_ms: 1}\n");
  ASSERT_THAT(ttft_only, IsOk());
  EXPECT_EQ(ttft_only->slo.ttft_ms, 1.0);
  EXPECT_EQ(ttft_only->slo.tpot_ms, std::nullopt) << "an SLO not given stays unset";
  EXPECT_EQ(ttft_only->slo.admission, std::nullopt);
}

TEST(DeploymentConfigTest, ByteSizes) {
  struct Case {
    std::string text;
    uint64_t num_bytes;
  };
  const std::vector<Case> good = {
      {"4096", 4096},          {"512MiB", 512ull << 20}, {"2GiB", 2ull << 30},
      {"2 GiB", 2ull << 30},   {"1.5GiB", 3ull << 29},   {"64KB", 64000},
      {"3mb", 3000000},        {"1TiB", 1ull << 40},     {"10B", 10},
      {" 7KiB ", 7ull << 10},  {"0", 0},
  };
  for (const Case& c : good) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<uint64_t> parsed = ParseByteSize(c.text);
    ASSERT_THAT(parsed, IsOk());
    EXPECT_EQ(*parsed, c.num_bytes);
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "is not a byte size"},        {"GiB", "is not a byte size"},
      {"-1GiB", "is not a byte size"},   {"12XB", "unknown unit"},
      {"0.3B", "not a whole number"},    {"1.2.3MiB", "is not a byte size"},
      {"99999999TiB", "below 2^62"},     {"1e3", "unknown unit"},
  };
  for (const auto& [text, message] : bad) {
    SCOPED_TRACE(text);
    EXPECT_THAT(ParseByteSize(text), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)));
  }
  EXPECT_EQ(FormatByteSize(512ull << 20), "512MiB");
  EXPECT_EQ(FormatByteSize(3ull << 29), "1536MiB");
  EXPECT_EQ(FormatByteSize(2ull << 40), "2TiB");
  EXPECT_EQ(FormatByteSize(1000), "1000");
  EXPECT_EQ(FormatByteSize(0), "0");
}

TEST(DeploymentConfigTest, DevicesCudaEmulatedRunsTheGpuBackendOnTheCpu) {
  absl::StatusOr<DeploymentConfig> c = ParseDeploymentConfig(
      "model: m\nmode: colocated\ncolocated: {devices: cuda-emulated}\n");
  ASSERT_THAT(c, IsOk());
  EXPECT_TRUE(c->colocated.cuda_emulated);
  EXPECT_FALSE(c->colocated.on_cpu());
  EXPECT_EQ(c->colocated.device_name(), "cuda-emulated");
  EXPECT_TRUE(c->colocated.cuda_device_ids.empty());
}

TEST(DeploymentConfigTest, ToYamlRoundTrips) {
  DeploymentConfig colocated = DefaultDeployment("/path with spaces/m: odd");
  colocated.mode = DeploymentMode::kColocated;
  colocated.colocated = {
      .num_instances = 2, .cuda_emulated = true, .chunked_prefill = true, .base_port = 9000};
  colocated.slo = {.ttft_ms = 0.1, .tpot_ms = 1.0 / 3.0, .attainment = 1};
  colocated.http_port = 0;
  colocated.weight_dtype = DType::kF16;
  colocated.kv_cache_dtype = DType::kBF16;
  DeploymentConfig odd_bytes = DefaultDeployment("m");
  odd_bytes.prefill.kv_cache_bytes = 123456789;
  odd_bytes.decode.swap_space_bytes = 987654321;
  odd_bytes.slo = {.tpot_ms = 35, .admission = true};
  DeploymentConfig ttft_only = DefaultDeployment("m");
  ttft_only.slo = {.ttft_ms = 2800, .attainment = 0.5};
  ttft_only.tls_cert = "/etc/baton/cert.pem";
  ttft_only.tls_key = "/etc/baton/key.pem";
  ttft_only.http_max_body_bytes = 65536;
  ttft_only.liveness_timeout_ms = 2500;
  ttft_only.chat_template = "/etc/baton/chat template.jinja";
  ttft_only.tool_call_parser = "hermes";
  ttft_only.enable_auto_tool_choice = true;
  ttft_only.reasoning_parser = "qwen3";
  DeploymentConfig named = DefaultDeployment("m");
  named.max_model_len = 77;
  named.served_model_names = {"null"};  // a YAML keyword, still the string when read back
  DeploymentConfig named_odd = DefaultDeployment("m");
  named_odd.served_model_names = {"org/Model: v2 # \xc3\xa9", "second", "true"};
  const std::vector<DeploymentConfig> configs = {
      DefaultDeployment("/models/tiny"), ParseDeploymentConfig(kFullYaml).value(), colocated,
      odd_bytes, ttft_only, named, named_odd};
  std::vector<DeploymentConfig> all = configs;
  for (const char* name : {" leading space", "trailing space ", "'single'", "\"double\"", "- dash",
                           "a\xe2\x80\xa8" "b", "\xc2\x85" "next", "back\\slash", "{flow}", "~", "&anchor",
                           "*alias", "!tag", "%percent", "@at", "`tick`", "|pipe", ">fold"}) {
    DeploymentConfig config = DefaultDeployment("m");
    config.served_model_names = {name};
    all.push_back(config);
  }
  for (const DeploymentConfig& config : all) {
    const std::string yaml = ToYaml(config);
    SCOPED_TRACE(yaml);
    absl::StatusOr<DeploymentConfig> parsed = ParseDeploymentConfig(yaml);
    ASSERT_THAT(parsed, IsOk());
    EXPECT_EQ(*parsed, config);
  }
}

// Found by tests/fuzz/deployment_config_fuzz: a plain scalar keeps invalid UTF-8 as it is, but ToYaml
// quotes such a string and yaml-cpp reads a quoted one back with U+FFFD in its place.
TEST(DeploymentConfigTest, StringsMustBeValidUtf8) {
  EXPECT_THAT(ParseDeploymentConfig("model: /models/\xff\x01m\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("model: is not valid UTF-8")));
  EXPECT_THAT(ParseDeploymentConfig("model: m\nhost: \xc0\xaf\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("host: is not valid UTF-8")));
  EXPECT_THAT(ParseDeploymentConfig("model: m\nweight_dtype: \xed\xa0\x80\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("weight_dtype: is not valid UTF-8")));
  // Valid UTF-8, control characters included, round-trips (ToYaml escapes what needs it).
  const absl::StatusOr<DeploymentConfig> config =
      ParseDeploymentConfig("model: /models/caf\xc3\xa9-\xf0\x9f\xa6\x99\x01\n");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->model_dir, "/models/caf\xc3\xa9-\xf0\x9f\xa6\x99\x01");
  EXPECT_THAT(ParseDeploymentConfig(ToYaml(*config)), absl_testing::IsOkAndHolds(*config));
}

// Found by tests/fuzz/deployment_config_fuzz: yaml-cpp wrote a path ending in carriage returns as a
// plain scalar, which read back as line breaks.
TEST(DeploymentConfigTest, ToYamlRoundTripsControlCharacters) {
  DeploymentConfig config = DefaultDeployment("/models/m\r\r");
  config.tls_cert = "cert\r.pem";
  config.tls_key = "key\t\x7f.pem";
  const std::string yaml = ToYaml(config);
  SCOPED_TRACE(yaml);
  EXPECT_THAT(ParseDeploymentConfig(yaml), absl_testing::IsOkAndHolds(config));
  // Strings without control characters stay plain.
  EXPECT_THAT(ToYaml(DefaultDeployment("/models/tiny")), HasSubstr("model: /models/tiny\n"));
}

TEST(DeploymentConfigTest, ToYamlWritesOnlyThePhasesInUse) {
  const std::string yaml = ToYaml(DefaultDeployment("/m"));
  EXPECT_THAT(yaml, HasSubstr("prefill:"));
  EXPECT_THAT(yaml, HasSubstr("decode:"));
  EXPECT_THAT(yaml, Not(HasSubstr("colocated:")));
  EXPECT_THAT(yaml, Not(HasSubstr("chunked_prefill")));
  EXPECT_THAT(yaml, HasSubstr("kv_cache_bytes: 256MiB"));
  // Unset SLOs and an unset admission stay unset.
  EXPECT_THAT(yaml, Not(HasSubstr("ttft_ms")));
  EXPECT_THAT(yaml, Not(HasSubstr("tpot_ms")));
  EXPECT_THAT(yaml, Not(HasSubstr("admission")));
  // A balanced pipeline split stays implicit.
  EXPECT_THAT(yaml, Not(HasSubstr("pipeline_stage_layers")));
}

TEST(DeploymentConfigTest, SetSchedulerPortMovesTheWorkersAlong) {
  DeploymentConfig config = DefaultDeployment("/m");
  ASSERT_THAT(SetSchedulerPort(config, 6000), IsOk());
  EXPECT_EQ(config.scheduler_port, 6000);
  EXPECT_EQ(config.prefill.base_port, 6001);
  EXPECT_EQ(config.decode.base_port, 6002);
  EXPECT_EQ(config.internal_port, 6003);
  EXPECT_EQ(config.http_port, 8000);
  EXPECT_THAT(ValidateDeploymentConfig(config), IsOk());

  EXPECT_THAT(SetSchedulerPort(config, 65535),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       StartsWith("prefill.base_port: moving the scheduler to port 65535")));
  EXPECT_THAT(SetSchedulerPort(config, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("scheduler_port:")));
  EXPECT_EQ(config.scheduler_port, 6000) << "a failed move changes nothing";
  EXPECT_EQ(config.decode.base_port, 6002);
}

TEST(DeploymentConfigTest, WorkerRoleNamesRoundTrip) {
  for (WorkerRole role : {WorkerRole::kPrefill, WorkerRole::kDecode, WorkerRole::kColocated}) {
    EXPECT_THAT(runtime::ParseWorkerRole(runtime::WorkerRoleName(role)), absl_testing::IsOkAndHolds(role));
  }
  EXPECT_THAT(runtime::ParseWorkerRole("decoder"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("role 'decoder'")));
  EXPECT_EQ(WorkerName(WorkerRole::kDecode, 1), "decode worker 1");
}

class LoadDeploymentConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("baton_config_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "configs");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path Write(const std::string& name, const std::string& text) {
    const std::filesystem::path path = dir_ / "configs" / name;
    std::ofstream(path) << text;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(LoadDeploymentConfigTest, RelativeModelIsResolvedAgainstTheFile) {
  absl::StatusOr<DeploymentConfig> config =
      LoadDeploymentConfig(Write("a.yaml", "model: ../models/tiny\n"));
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->model_dir, dir_ / "models" / "tiny");

  config = LoadDeploymentConfig(Write("b.json", R"({"model": "/abs/model"})"));
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->model_dir, "/abs/model");
  EXPECT_TRUE(config->tls_cert.empty());

  config = LoadDeploymentConfig(Write("c.yaml", "model: m\ntls_cert: tls/cert.pem\ntls_key: /k.pem\n"));
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->tls_cert, dir_ / "configs" / "tls" / "cert.pem");
  EXPECT_EQ(config->tls_key, "/k.pem");

  config = LoadDeploymentConfig(Write("d.yaml", "model: m\nchat_template: templates/chat.jinja\n"));
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->chat_template, dir_ / "configs" / "templates" / "chat.jinja");
}

TEST_F(LoadDeploymentConfigTest, ErrorsNameTheFile) {
  const std::filesystem::path bad = Write("bad.yaml", "model: m\nprefill: {tp: 0}\n");
  EXPECT_THAT(LoadDeploymentConfig(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       bad.string() + ": prefill.tp: must be >= 1, got 0"));
  EXPECT_THAT(LoadDeploymentConfig(dir_ / "missing.yaml"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing.yaml")));
  EXPECT_THAT(LoadDeploymentConfig(dir_), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(LoadDeploymentConfigTest, WrittenEffectiveConfigLoadsBack) {
  DeploymentConfig config = ParseDeploymentConfig(kFullYaml).value();
  EXPECT_EQ(LoadDeploymentConfig(Write("effective.yaml", ToYaml(config))).value(), config);
}

}  // namespace
}  // namespace baton::scheduler
