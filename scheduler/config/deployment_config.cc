#include "scheduler/config/deployment_config.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <optional>
#include <map>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/check.h"
#include "kernels/common/dtype.h"
#include "kernels/common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace baton::scheduler {
namespace {

constexpr int kMaxPort = 65535;
constexpr int kMaxBlockSize = 1024;

// ---------------------------------------------------------------------------------------------
// Reading YAML nodes into typed fields. Each reader gets the node and its key path for messages.

using FieldReader = std::function<absl::Status(const YAML::Node& value, const std::string& path)>;

struct Field {
  absl::string_view key;
  FieldReader read;
};

std::string JoinPath(absl::string_view parent, absl::string_view key) {
  return parent.empty() ? std::string(key) : absl::StrCat(parent, ".", key);
}

// yaml-cpp tags quoted scalars "!" and plain ones "?": a quoted "2" is a string, not a number.
bool IsQuoted(const YAML::Node& node) { return node.Tag() == "!"; }

std::string DescribeNode(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Scalar:
      return IsQuoted(node) ? absl::StrCat("the string \"", node.Scalar(), "\"")
                            : absl::StrCat("'", node.Scalar(), "'");
    case YAML::NodeType::Undefined: break;
  }
  return "nothing";
}

absl::Status TypeError(absl::string_view path, absl::string_view expected, const YAML::Node& node) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": expected ", expected, ", got ", DescribeNode(node)));
}

absl::Status ReadInt(const YAML::Node& node, const std::string& path, int* out) {
  if (!node.IsScalar() || IsQuoted(node) || !absl::SimpleAtoi(node.Scalar(), out)) {
    return TypeError(path, "an integer", node);
  }
  return absl::OkStatus();
}

absl::Status ReadDouble(const YAML::Node& node, const std::string& path, double* out) {
  if (!node.IsScalar() || IsQuoted(node) || !absl::SimpleAtod(node.Scalar(), out)) {
    return TypeError(path, "a number", node);
  }
  return absl::OkStatus();
}

absl::Status ReadBool(const YAML::Node& node, const std::string& path, bool* out) {
  if (!node.IsScalar() || IsQuoted(node) || !YAML::convert<bool>::decode(node, *out)) {
    return TypeError(path, "true or false", node);
  }
  return absl::OkStatus();
}

// Strict UTF-8: no overlong forms, surrogates or code points above U+10FFFF.
bool IsValidUtf8(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    int num_continuation = 0;
    unsigned char min_second = 0x80, max_second = 0xBF;  // the second byte's range (Unicode Table 3-7)
    if (byte < 0x80) {
      ++i;
      continue;
    } else if (byte >= 0xC2 && byte <= 0xDF) {
      num_continuation = 1;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      num_continuation = 2;
      if (byte == 0xE0) min_second = 0xA0;
      if (byte == 0xED) max_second = 0x9F;
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      num_continuation = 3;
      if (byte == 0xF0) min_second = 0x90;
      if (byte == 0xF4) max_second = 0x8F;
    } else {
      return false;
    }
    if (text.size() - i <= static_cast<size_t>(num_continuation)) return false;
    for (int k = 1; k <= num_continuation; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if (next < (k == 1 ? min_second : 0x80) || next > (k == 1 ? max_second : 0xBF)) return false;
    }
    i += num_continuation + 1;
  }
  return true;
}

// A string must be valid UTF-8, as a YAML document must: yaml-cpp keeps invalid bytes of a plain
// scalar as they are but turns those of a quoted one into U+FFFD, so such a string would not survive
// ToYaml, which quotes it (the children of `baton serve` would read another model path).
absl::Status ReadString(const YAML::Node& node, const std::string& path, std::string* out) {
  if (!node.IsScalar()) return TypeError(path, "a string", node);
  if (!IsValidUtf8(node.Scalar())) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is not valid UTF-8"));
  }
  *out = node.Scalar();
  return absl::OkStatus();
}

// One of `allowed`, by its name (DTypeName: f32, bf16, f16).
absl::Status ReadDType(const YAML::Node& node, const std::string& path,
                       std::initializer_list<DType> allowed, DType* out) {
  std::string name;
  RETURN_IF_ERROR(ReadString(node, path, &name));
  const std::optional<DType> dtype = DTypeFromName(name);
  if (dtype && std::find(allowed.begin(), allowed.end(), *dtype) != allowed.end()) {
    *out = *dtype;
    return absl::OkStatus();
  }
  std::vector<std::string> names;
  for (DType d : allowed) names.emplace_back(DTypeName(d));
  const std::string last = names.back();
  names.pop_back();
  return absl::InvalidArgumentError(absl::StrCat(path, ": '", name, "' is not supported (expected ",
                                                 absl::StrJoin(names, ", "), " or ", last, ")"));
}

Field IntField(absl::string_view key, int* out) {
  return {key, [out](const YAML::Node& v, const std::string& path) { return ReadInt(v, path, out); }};
}
Field PathField(absl::string_view key, std::filesystem::path* out) {
  return {key, [out](const YAML::Node& v, const std::string& path) -> absl::Status {
            std::string text;
            RETURN_IF_ERROR(ReadString(v, path, &text));
            *out = text;
            return absl::OkStatus();
          }};
}
Field DoubleField(absl::string_view key, double* out) {
  return {key,
          [out](const YAML::Node& v, const std::string& path) { return ReadDouble(v, path, out); }};
}
Field BoolField(absl::string_view key, bool* out) {
  return {key, [out](const YAML::Node& v, const std::string& path) { return ReadBool(v, path, out); }};
}
// A key whose absence means "unset" rather than a default value.
template <typename T>
Field OptionalField(absl::string_view key, std::optional<T>* out,
                    absl::Status (*read)(const YAML::Node&, const std::string&, T*)) {
  return {key, [out, read](const YAML::Node& v, const std::string& path) -> absl::Status {
            T value;
            RETURN_IF_ERROR(read(v, path, &value));
            *out = value;
            return absl::OkStatus();
          }};
}

// Reads a mapping: every key must be one of `fields`, at most once. A null node (an empty section,
// "prefill:") keeps every default.
absl::Status ReadMap(const YAML::Node& node, absl::string_view path, const std::vector<Field>& fields) {
  if (node.IsNull()) return absl::OkStatus();
  if (!node.IsMap()) return TypeError(path.empty() ? "top level" : path, "a mapping", node);
  absl::flat_hash_set<std::string> seen;
  for (const auto& entry : node) {
    const YAML::Node& key_node = entry.first;
    if (!key_node.IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path.empty() ? "top level" : path, ": keys must be strings, got ",
                       DescribeNode(key_node)));
    }
    const std::string& key = key_node.Scalar();
    auto field = std::find_if(fields.begin(), fields.end(),
                              [&](const Field& f) { return f.key == key; });
    if (field == fields.end()) {
      std::vector<absl::string_view> keys;
      for (const Field& f : fields) keys.push_back(f.key);
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown key '", key, "' ", path.empty() ? "at top level" : absl::StrCat("in ", path),
          " (expected one of: ", absl::StrJoin(keys, ", "), ")"));
    }
    const std::string key_path = JoinPath(path, key);
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(absl::StrCat(key_path, ": duplicate key"));
    }
    RETURN_IF_ERROR(field->read(entry.second, key_path));
  }
  return absl::OkStatus();
}

// A non-empty list of integers: [3, 2].
absl::Status ReadIntList(const YAML::Node& node, const std::string& path, std::vector<int>* out) {
  if (!node.IsSequence() || node.size() == 0) return TypeError(path, "a list of integers", node);
  std::vector<int> values(node.size());
  for (size_t i = 0; i < node.size(); ++i) {
    RETURN_IF_ERROR(ReadInt(node[i], absl::StrCat(path, "[", i, "]"), &values[i]));
  }
  *out = std::move(values);
  return absl::OkStatus();
}

// devices: "cpu", "cuda-emulated", or one list of CUDA device ids per instance.
absl::Status ReadDevices(const YAML::Node& node, const std::string& path,
                         std::vector<std::vector<int>>* out, bool* cuda_emulated) {
  constexpr absl::string_view kExpected =
      "'cpu', 'cuda-emulated' or a list of CUDA device-id lists";
  if (node.IsScalar()) {
    if (node.Scalar() != "cpu" && node.Scalar() != "cuda-emulated") {
      return TypeError(path, kExpected, node);
    }
    out->clear();
    *cuda_emulated = node.Scalar() == "cuda-emulated";
    return absl::OkStatus();
  }
  *cuda_emulated = false;
  if (!node.IsSequence() || node.size() == 0) return TypeError(path, kExpected, node);
  std::vector<std::vector<int>> devices;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node& instance = node[i];
    const std::string instance_path = absl::StrCat(path, "[", i, "]");
    if (!instance.IsSequence()) return TypeError(instance_path, "a list of CUDA device ids", instance);
    std::vector<int>& ids = devices.emplace_back();
    for (size_t j = 0; j < instance.size(); ++j) {
      RETURN_IF_ERROR(ReadInt(instance[j], absl::StrCat(instance_path, "[", j, "]"),
                              &ids.emplace_back()));
    }
  }
  *out = std::move(devices);
  return absl::OkStatus();
}

absl::Status ReadPhase(const YAML::Node& node, const std::string& path, PhaseConfig* phase,
                       bool* base_port_set) {
  bool kv_given = false;
  const std::vector<Field> fields = {
      IntField("instances", &phase->num_instances),
      IntField("tp", &phase->tp),
      IntField("pp", &phase->pp),
      {"pipeline_stage_layers",
       [phase](const YAML::Node& v, const std::string& p) {
         return ReadIntList(v, p, &phase->stage_num_layers);
       }},
      {"devices",
       [phase](const YAML::Node& v, const std::string& p) {
         return ReadDevices(v, p, &phase->cuda_device_ids, &phase->cuda_emulated);
       }},
      IntField("threads", &phase->num_threads),
      {"kv_cache_bytes",
       [phase, &kv_given](const YAML::Node& v, const std::string& p) -> absl::Status {
         if (!v.IsScalar()) return TypeError(p, "a byte size such as 512MiB, or auto", v);
         kv_given = true;
         if (v.Scalar() == "auto") {
           phase->kv_cache_bytes = 0;
           return absl::OkStatus();
         }
         absl::StatusOr<uint64_t> bytes = ParseByteSize(v.Scalar());
         if (!bytes.ok()) return absl::InvalidArgumentError(absl::StrCat(p, ": ", bytes.status().message()));
         if (*bytes == 0) return absl::InvalidArgumentError(absl::StrCat(p, ": must be > 0 (or auto)"));
         phase->kv_cache_bytes = *bytes;
         return absl::OkStatus();
       }},
      {"swap_space",
       [phase](const YAML::Node& v, const std::string& p) -> absl::Status {
         if (!v.IsScalar()) return TypeError(p, "a byte size such as 4GiB, or 0", v);
         absl::StatusOr<uint64_t> bytes = ParseByteSize(v.Scalar());
         if (!bytes.ok()) return absl::InvalidArgumentError(absl::StrCat(p, ": ", bytes.status().message()));
         phase->swap_space_bytes = *bytes;
         return absl::OkStatus();
       }},
      IntField("max_num_seqs", &phase->max_num_seqs),
      IntField("kv_base_port", &phase->kv_base_port),
      IntField("kv_link_pool_size", &phase->kv_link_pool_size),
      IntField("max_num_batched_tokens", &phase->max_num_batched_tokens),
      BoolField("chunked_prefill", &phase->chunked_prefill),
      BoolField("enforce_eager", &phase->enforce_eager),
      {"base_port",
       [phase, base_port_set](const YAML::Node& v, const std::string& p) {
         *base_port_set = true;
         return ReadInt(v, p, &phase->base_port);
       }},
      DoubleField("gpu_memory_utilization", &phase->gpu_memory_utilization),
  };
  RETURN_IF_ERROR(ReadMap(node, path, fields));
  // A GPU's KV budget defaults to a share of the device, as vLLM's: a fixed 256 MiB would leave
  // an 80 GB device nearly idle. (cuda-emulated keeps the fixed default: its pool is host memory.)
  if (!kv_given && !phase->cuda_device_ids.empty()) phase->kv_cache_bytes = 0;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Validation.

absl::Status Invalid(absl::string_view path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

absl::Status CheckAtLeast(absl::string_view path, int64_t value, int64_t min) {
  if (value < min) return Invalid(path, absl::StrCat("must be >= ", min, ", got ", value));
  return absl::OkStatus();
}

absl::Status CheckPort(absl::string_view path, int port) {
  if (port < 1 || port > kMaxPort) {
    return Invalid(path, absl::StrCat("must be in [1, ", kMaxPort, "], got ", port));
  }
  return absl::OkStatus();
}

absl::Status CheckPositiveFinite(absl::string_view path, double value) {
  if (!std::isfinite(value) || value <= 0) {
    return Invalid(path, absl::StrCat("must be a finite number > 0, got ", value));
  }
  return absl::OkStatus();
}

absl::Status ValidatePhase(WorkerRole role, const PhaseConfig& phase) {
  const std::string name(runtime::WorkerRoleName(role));
  RETURN_IF_ERROR(CheckAtLeast(JoinPath(name, "instances"), phase.num_instances, 1));
  RETURN_IF_ERROR(CheckAtLeast(JoinPath(name, "tp"), phase.tp, 1));
  RETURN_IF_ERROR(CheckAtLeast(JoinPath(name, "pp"), phase.pp, 1));
  if (!phase.stage_num_layers.empty()) {
    const std::string path = JoinPath(name, "pipeline_stage_layers");
    if (static_cast<int64_t>(phase.stage_num_layers.size()) != phase.pp) {
      return Invalid(path, absl::StrCat(phase.stage_num_layers.size(), " entries for pp = ",
                                        phase.pp, " stages (give one layer count per stage)"));
    }
    for (size_t s = 0; s < phase.stage_num_layers.size(); ++s) {
      RETURN_IF_ERROR(CheckAtLeast(absl::StrCat(path, "[", s, "]"), phase.stage_num_layers[s], 1));
    }
  }
  RETURN_IF_ERROR(CheckAtLeast(JoinPath(name, "threads"), phase.num_threads, 1));
  if (phase.kv_cache_bytes == 0 && phase.on_cpu()) {
    return Invalid(JoinPath(name, "kv_cache_bytes"), "auto (a share of the device) needs GPU devices");
  }
  if (!(phase.gpu_memory_utilization > 0 && phase.gpu_memory_utilization <= 1)) {
    return Invalid(JoinPath(name, "gpu_memory_utilization"),
                   absl::StrCat("must be in (0, 1], got ", phase.gpu_memory_utilization));
  }
  RETURN_IF_ERROR(CheckAtLeast(JoinPath(name, "max_num_seqs"), phase.max_num_seqs, 1));
  RETURN_IF_ERROR(
      CheckAtLeast(JoinPath(name, "max_num_batched_tokens"), phase.max_num_batched_tokens, 1));
  if (phase.chunked_prefill && role != WorkerRole::kColocated) {
    return Invalid(JoinPath(name, "chunked_prefill"), "only valid for colocated instances");
  }
  const std::string base_port_path = JoinPath(name, "base_port");
  RETURN_IF_ERROR(CheckPort(base_port_path, phase.base_port));
  const int64_t last_port = int64_t{phase.base_port} + phase.num_instances - 1;
  if (last_port > kMaxPort) {
    return Invalid(base_port_path, absl::StrCat(phase.num_instances, " instances from port ",
                                                phase.base_port, " reach port ", last_port,
                                                " (> ", kMaxPort, ")"));
  }
  const std::string pool_path = JoinPath(name, "kv_link_pool_size");
  RETURN_IF_ERROR(CheckAtLeast(pool_path, phase.kv_link_pool_size, 1));
  if (role != WorkerRole::kDecode && phase.kv_link_pool_size != PhaseConfig{}.kv_link_pool_size) {
    return Invalid(pool_path, "only the decode phase pulls KV blocks");
  }
  if (phase.kv_base_port != 0) {
    const std::string kv_path = JoinPath(name, "kv_base_port");
    if (role != WorkerRole::kPrefill) {
      return Invalid(kv_path, "only the prefill phase serves KV blocks");
    }
    RETURN_IF_ERROR(CheckPort(kv_path, phase.kv_base_port));
    const int64_t last_kv_port =
        int64_t{phase.kv_base_port} + int64_t{phase.num_instances} * phase.tp * phase.pp - 1;
    if (last_kv_port > kMaxPort) {
      return Invalid(kv_path, absl::StrCat(phase.num_instances, " instances of ",
                                           phase.tp * phase.pp, " ranks from port ",
                                           phase.kv_base_port, " reach port ", last_kv_port,
                                           " (> ", kMaxPort, ")"));
    }
  }
  if (phase.cuda_device_ids.empty()) return absl::OkStatus();
  const std::string devices_path = JoinPath(name, "devices");
  if (static_cast<int64_t>(phase.cuda_device_ids.size()) != phase.num_instances) {
    return Invalid(devices_path, absl::StrCat(phase.cuda_device_ids.size(), " device lists for ",
                                              phase.num_instances,
                                              " instances (give one list per instance, or cpu)"));
  }
  const int64_t num_ranks = int64_t{phase.tp} * phase.pp;
  for (size_t i = 0; i < phase.cuda_device_ids.size(); ++i) {
    const std::vector<int>& ids = phase.cuda_device_ids[i];
    const std::string instance_path = absl::StrCat(devices_path, "[", i, "]");
    if (static_cast<int64_t>(ids.size()) != num_ranks) {
      return Invalid(instance_path, absl::StrCat(ids.size(), " device ids for tp * pp = ",
                                                 num_ranks, " ranks"));
    }
    for (size_t j = 0; j < ids.size(); ++j) {
      RETURN_IF_ERROR(CheckAtLeast(absl::StrCat(instance_path, "[", j, "]"), ids[j], 0));
    }
  }
  return absl::OkStatus();
}

// No CUDA device serves two ranks, no port two listeners.
absl::Status CheckNoSharing(const DeploymentConfig& config) {
  std::map<int, std::string> device_owner;
  for (WorkerRole role : Roles(config.mode)) {
    const PhaseConfig& phase = Phase(config, role);
    for (size_t i = 0; i < phase.cuda_device_ids.size(); ++i) {
      for (size_t j = 0; j < phase.cuda_device_ids[i].size(); ++j) {
        const std::string path = absl::StrCat(runtime::WorkerRoleName(role), ".devices[", i, "][", j, "]");
        const int id = phase.cuda_device_ids[i][j];
        auto [it, inserted] = device_owner.emplace(id, path);
        if (!inserted) {
          return Invalid(path, absl::StrCat("CUDA device ", id, " is already used by ", it->second));
        }
      }
    }
  }
  std::map<int, std::string> port_owner = {{config.scheduler_port, "scheduler_port"}};
  if (config.http_port != 0) {
    auto [it, inserted] = port_owner.emplace(config.http_port, "http_port");
    if (!inserted) {
      return Invalid("http_port", absl::StrCat("port ", config.http_port, " is already taken by ",
                                               it->second));
    }
  }
  if (auto [it, inserted] = port_owner.emplace(config.internal_port, "internal_port"); !inserted) {
    return Invalid("internal_port", absl::StrCat("port ", config.internal_port, " is already taken by ",
                                                 it->second));
  }
  for (const WorkerInstance& worker : WorkerInstances(config)) {
    const std::string owner = WorkerName(worker.role, worker.instance_idx);
    auto [it, inserted] = port_owner.emplace(worker.port, owner);
    if (!inserted) {
      return Invalid(JoinPath(runtime::WorkerRoleName(worker.role), "base_port"),
                     absl::StrCat("port ", worker.port, " of ", owner, " is already taken by ",
                                  it->second));
    }
  }
  for (const WorkerInstance& worker : WorkerInstances(config)) {
    const PhaseConfig& phase = Phase(config, worker.role);
    for (int r = 0; phase.kv_base_port != 0 && r < phase.tp * phase.pp; ++r) {
      const int port = phase.KvPort(worker.instance_idx, r);
      const std::string owner =
          absl::StrCat("the KV server of rank ", r, " of ", WorkerName(worker.role, worker.instance_idx));
      if (auto [it, inserted] = port_owner.emplace(port, owner); !inserted) {
        return Invalid(JoinPath(runtime::WorkerRoleName(worker.role), "kv_base_port"),
                       absl::StrCat("port ", port, " of ", owner, " is already taken by ",
                                    it->second));
      }
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Writing.

// Shortest text that reads back as the same double.
std::string FormatDouble(double value) {
  std::array<char, 64> buffer;
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  BATON_CHECK(ec == std::errc());
  return std::string(buffer.data(), end);
}

// A free-form string (a path, the host). yaml-cpp writes one holding a carriage return as a plain
// scalar, which reads back as a line break; with any control character it is written double-quoted,
// escaped, so that ToYaml round-trips.
void EmitString(YAML::Emitter& out, const std::string& text) {
  if (std::any_of(text.begin(), text.end(),
                  [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
    out << YAML::DoubleQuoted;
  }
  out << text;
}

void EmitPhase(YAML::Emitter& out, WorkerRole role, const PhaseConfig& phase) {
  out << YAML::Key << std::string(runtime::WorkerRoleName(role)) << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "instances" << YAML::Value << phase.num_instances;
  out << YAML::Key << "tp" << YAML::Value << phase.tp;
  out << YAML::Key << "pp" << YAML::Value << phase.pp;
  if (!phase.stage_num_layers.empty()) {
    out << YAML::Key << "pipeline_stage_layers" << YAML::Value << YAML::Flow << phase.stage_num_layers;
  }
  out << YAML::Key << "devices" << YAML::Value;
  if (phase.on_cpu() || phase.cuda_emulated) {
    out << std::string(phase.device_name());
  } else {
    out << YAML::Flow << YAML::BeginSeq;
    for (const std::vector<int>& ids : phase.cuda_device_ids) {
      out << YAML::Flow << YAML::BeginSeq;
      for (int id : ids) out << id;
      out << YAML::EndSeq;
    }
    out << YAML::EndSeq;
  }
  out << YAML::Key << "threads" << YAML::Value << phase.num_threads;
  out << YAML::Key << "kv_cache_bytes" << YAML::Value
      << (phase.kv_cache_bytes == 0 ? std::string("auto") : FormatByteSize(phase.kv_cache_bytes));
  if (!phase.on_cpu()) {
    out << YAML::Key << "gpu_memory_utilization" << YAML::Value << phase.gpu_memory_utilization;
  }
  if (phase.swap_space_bytes > 0) {
    out << YAML::Key << "swap_space" << YAML::Value << FormatByteSize(phase.swap_space_bytes);
  }
  out << YAML::Key << "max_num_seqs" << YAML::Value << phase.max_num_seqs;
  out << YAML::Key << "max_num_batched_tokens" << YAML::Value << phase.max_num_batched_tokens;
  if (role == WorkerRole::kColocated) {
    out << YAML::Key << "chunked_prefill" << YAML::Value << phase.chunked_prefill;
  }
  out << YAML::Key << "enforce_eager" << YAML::Value << phase.enforce_eager;
  out << YAML::Key << "base_port" << YAML::Value << phase.base_port;
  if (phase.kv_base_port != 0) out << YAML::Key << "kv_base_port" << YAML::Value << phase.kv_base_port;
  if (role == WorkerRole::kDecode) {
    out << YAML::Key << "kv_link_pool_size" << YAML::Value << phase.kv_link_pool_size;
  }
  out << YAML::EndMap;
}

// After reading: a section of a phase the mode does not use is an error; absent base ports follow
// the scheduler port, phase after phase, and an absent internal port follows the last worker's.
absl::Status ApplySectionRules(const std::array<bool, 3>& section_present,
                               const std::array<bool, 3>& base_port_set, bool internal_port_set,
                               DeploymentConfig& config) {
  const std::vector<WorkerRole> used = Roles(config.mode);
  for (WorkerRole role : {WorkerRole::kPrefill, WorkerRole::kDecode, WorkerRole::kColocated}) {
    if (section_present[static_cast<size_t>(role)] &&
        std::find(used.begin(), used.end(), role) == used.end()) {
      return Invalid(runtime::WorkerRoleName(role),
                     absl::StrCat("section not used in ", DeploymentModeName(config.mode),
                                  " mode (set mode, or remove the section)"));
    }
  }
  int next_port = config.scheduler_port + 1;
  for (WorkerRole role : used) {
    PhaseConfig& phase = MutablePhase(config, role);
    if (!base_port_set[static_cast<size_t>(role)]) phase.base_port = next_port;
    next_port = phase.base_port + phase.num_instances;
  }
  if (!internal_port_set) config.internal_port = DefaultInternalPort(config);
  return absl::OkStatus();
}

absl::StatusOr<DeploymentConfig> ParseRoot(const YAML::Node& root) {
  DeploymentConfig config;
  std::array<bool, 3> section_present = {};
  std::array<bool, 3> base_port_set = {};
  bool internal_port_set = false;
  std::string kv_cache_dtype_name;  // as written; empty: the default
  auto section = [&](WorkerRole role) {
    const auto idx = static_cast<size_t>(role);
    return Field{runtime::WorkerRoleName(role), [&, role, idx](const YAML::Node& v, const std::string& p) {
                   section_present[idx] = true;
                   return ReadPhase(v, p, &MutablePhase(config, role), &base_port_set[idx]);
                 }};
  };
  const std::vector<Field> fields = {
      PathField("model", &config.model_dir),
      {"served_model_name",
       [&](const YAML::Node& v, const std::string& p) -> absl::Status {
         config.served_model_names.clear();
         if (!v.IsSequence()) return ReadString(v, p, &config.served_model_names.emplace_back());
         if (v.size() == 0) return Invalid(p, "must name the model at least once");
         for (size_t i = 0; i < v.size(); ++i) {
           RETURN_IF_ERROR(ReadString(v[i], absl::StrCat(p, "[", i, "]"),
                                      &config.served_model_names.emplace_back()));
         }
         return absl::OkStatus();
       }},
      {"max_model_len",
       [&](const YAML::Node& v, const std::string& p) -> absl::Status {
         RETURN_IF_ERROR(ReadInt(v, p, &config.max_model_len));
         return CheckAtLeast(p, config.max_model_len, 1);
       }},
      {"weight_dtype",
       [&](const YAML::Node& v, const std::string& p) {
         return ReadDType(v, p,
                          {DType::kF32, DType::kBF16, DType::kF16, DType::kI8, DType::kI4,
                           DType::kF8E4M3},
                          &config.weight_dtype);
       }},
      {"kv_cache_dtype",
       [&](const YAML::Node& v, const std::string& p) {
         // Resolved once every key is read: "auto" follows weight_dtype, in any key order.
         RETURN_IF_ERROR(ReadString(v, p, &kv_cache_dtype_name));
         if (!KvDTypeFromName(kv_cache_dtype_name, DType::kF32)) {
           return Invalid(p, absl::StrCat("'", kv_cache_dtype_name,
                                          "' is not supported (expected f32, bf16 or auto)"));
         }
         return absl::OkStatus();
       }},
      BoolField("enable_prefix_caching", &config.enable_prefix_caching),
      {"max_local_prefill_tokens",
       [&](const YAML::Node& v, const std::string& p) -> absl::Status {
         RETURN_IF_ERROR(ReadInt(v, p, &config.max_local_prefill_tokens));
         return CheckAtLeast(p, config.max_local_prefill_tokens, 0);
       }},
      {"routing_policy",
       [&](const YAML::Node& v, const std::string& p) -> absl::Status {
         std::string name;
         RETURN_IF_ERROR(ReadString(v, p, &name));
         std::optional<RoutingPolicy> policy = RoutingPolicyFromName(name);
         if (!policy) {
           return Invalid(p, absl::StrCat("'", name, "' is not a policy (expected kv_aware or least_loaded)"));
         }
         config.routing_policy = *policy;
         return absl::OkStatus();
       }},
      {"host", [&](const YAML::Node& v, const std::string& p) { return ReadString(v, p, &config.host); }},
      IntField("scheduler_port", &config.scheduler_port),
      IntField("http_port", &config.http_port),
      {"internal_port",
       [&](const YAML::Node& v, const std::string& p) {
         internal_port_set = true;
         return ReadInt(v, p, &config.internal_port);
       }},
      PathField("tls_cert", &config.tls_cert),
      PathField("tls_key", &config.tls_key),
      PathField("chat_template", &config.chat_template),
      {"tool_call_parser",
       [&](const YAML::Node& v, const std::string& p) { return ReadString(v, p, &config.tool_call_parser); }},
      BoolField("enable_auto_tool_choice", &config.enable_auto_tool_choice),
      {"reasoning_parser",
       [&](const YAML::Node& v, const std::string& p) { return ReadString(v, p, &config.reasoning_parser); }},
      IntField("liveness_timeout_ms", &config.liveness_timeout_ms),
      {"http_max_body_bytes",
       [&](const YAML::Node& v, const std::string& p) -> absl::Status {
         if (!v.IsScalar()) return TypeError(p, "a byte size such as 4MiB", v);
         absl::StatusOr<uint64_t> bytes = ParseByteSize(v.Scalar());
         if (!bytes.ok()) return absl::InvalidArgumentError(absl::StrCat(p, ": ", bytes.status().message()));
         config.http_max_body_bytes = *bytes;
         return absl::OkStatus();
       }},
      {"mode",
       [&](const YAML::Node& v, const std::string& p) -> absl::Status {
         std::string name;
         RETURN_IF_ERROR(ReadString(v, p, &name));
         if (name == "disaggregated") {
           config.mode = DeploymentMode::kDisaggregated;
         } else if (name == "colocated") {
           config.mode = DeploymentMode::kColocated;
         } else {
           return Invalid(p, absl::StrCat("'", name, "' (expected disaggregated or colocated)"));
         }
         return absl::OkStatus();
       }},
      IntField("block_size", &config.block_size),
      {"slo",
       [&](const YAML::Node& v, const std::string& p) {
         return ReadMap(v, p,
                        {OptionalField("ttft_ms", &config.slo.ttft_ms, ReadDouble),
                         OptionalField("tpot_ms", &config.slo.tpot_ms, ReadDouble),
                         DoubleField("attainment", &config.slo.attainment),
                         OptionalField("admission", &config.slo.admission, ReadBool)});
       }},
      section(WorkerRole::kPrefill),
      section(WorkerRole::kDecode),
      section(WorkerRole::kColocated),
  };
  RETURN_IF_ERROR(ReadMap(root, "", fields));
  if (!kv_cache_dtype_name.empty()) {
    config.kv_cache_dtype = *KvDTypeFromName(kv_cache_dtype_name, config.weight_dtype);
  }
  RETURN_IF_ERROR(ApplySectionRules(section_present, base_port_set, internal_port_set, config));
  RETURN_IF_ERROR(ValidateDeploymentConfig(config));
  return config;
}

}  // namespace

absl::string_view DeploymentModeName(DeploymentMode mode) {
  switch (mode) {
    case DeploymentMode::kDisaggregated: return "disaggregated";
    case DeploymentMode::kColocated: return "colocated";
  }
  return "?";
}

absl::string_view RoutingPolicyName(RoutingPolicy policy) {
  switch (policy) {
    case RoutingPolicy::kKvAware: return "kv_aware";
    case RoutingPolicy::kLeastLoaded: return "least_loaded";
  }
  return "?";
}

std::optional<RoutingPolicy> RoutingPolicyFromName(std::string_view name) {
  if (name == "kv_aware") return RoutingPolicy::kKvAware;
  if (name == "least_loaded") return RoutingPolicy::kLeastLoaded;
  return std::nullopt;
}

bool AdmissionEnabled(const SloConfig& slo) {
  return slo.admission.value_or(slo.ttft_ms.has_value() || slo.tpot_ms.has_value());
}

DeploymentConfig DefaultDeployment(const std::filesystem::path& model_dir) {
  DeploymentConfig config;
  config.model_dir = model_dir;
  return config;
}

absl::StatusOr<DeploymentConfig> ParseDeploymentConfig(absl::string_view text) {
  // yaml-cpp reports malformed documents (and nothing else we call) by throwing; the exception
  // stops here.
  try {
    return ParseRoot(YAML::Load(std::string(text)));
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return absl::InvalidArgumentError(absl::StrCat("malformed YAML: ", e.msg));
    return absl::InvalidArgumentError(absl::StrCat("malformed YAML at line ", e.mark.line + 1,
                                                   ", column ", e.mark.column + 1, ": ", e.msg));
  }
}

absl::StatusOr<DeploymentConfig> LoadDeploymentConfig(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat("deployment config ", path.string(), ": no such file"));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    return absl::NotFoundError(absl::StrCat("deployment config ", path.string(), ": cannot read"));
  }
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(text.str());
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat(path.string(), ": ", config.status().message()));
  }
  for (std::filesystem::path* file : {&config->model_dir, &config->tls_cert, &config->tls_key,
                                         &config->chat_template}) {
    if (!file->empty() && file->is_relative() && path.has_parent_path()) {
      *file = (path.parent_path() / *file).lexically_normal();
    }
  }
  return config;
}

absl::Status ValidateDeploymentConfig(const DeploymentConfig& config) {
  if (config.model_dir.empty()) return Invalid("model", "required (a Hugging Face model directory)");
  if (config.weight_dtype != DType::kF32 && config.weight_dtype != DType::kBF16 &&
      config.weight_dtype != DType::kF16 && config.weight_dtype != DType::kI8 &&
      config.weight_dtype != DType::kI4 && config.weight_dtype != DType::kF8E4M3) {
    return Invalid("weight_dtype",
                   absl::StrCat(std::string(DTypeName(config.weight_dtype)),
                                " is not supported (expected f32, bf16, f16, i8, i4 or fp8)"));
  }
  if (!IsKvDType(config.kv_cache_dtype)) {
    return Invalid("kv_cache_dtype", absl::StrCat(std::string(DTypeName(config.kv_cache_dtype)),
                                                  " is not supported (expected f32 or bf16)"));
  }
  if (config.max_model_len < 0) {
    return Invalid("max_model_len", absl::StrCat("must be >= 1, got ", config.max_model_len));
  }
  for (const std::string& name : config.served_model_names) {
    if (name.empty()) return Invalid("served_model_name", "must not be empty");
    if (std::any_of(name.begin(), name.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
      return Invalid("served_model_name", "contains a control character");
    }
    if (!IsValidUtf8(name)) return Invalid("served_model_name", "is not valid UTF-8");
  }
  if (config.host.empty()) return Invalid("host", "must not be empty");
  if (std::any_of(config.host.begin(), config.host.end(),
                  [](char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); })) {
    return Invalid("host", absl::StrCat("'", config.host, "' contains whitespace"));
  }
  RETURN_IF_ERROR(CheckPort("scheduler_port", config.scheduler_port));
  if (config.http_port != 0) {
    if (config.http_port < 0 || config.http_port > kMaxPort) {
      return Invalid("http_port", absl::StrCat("must be in [0, ", kMaxPort,
                                               "] (0 disables HTTP), got ", config.http_port));
    }
  }
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    return Invalid(config.tls_cert.empty() ? "tls_cert" : "tls_key",
                   "tls_cert and tls_key go together (a certificate chain and its private key)");
  }
  if (config.http_max_body_bytes == 0) return Invalid("http_max_body_bytes", "must be > 0");
  // Below a heartbeat interval or so every worker would be suspected all the time.
  if (config.liveness_timeout_ms < 200 || config.liveness_timeout_ms > 600000) {
    return Invalid("liveness_timeout_ms", absl::StrCat("must be in [200, 600000], got ", config.liveness_timeout_ms));
  }
  if (config.block_size < 1 || config.block_size > kMaxBlockSize ||
      (config.block_size & (config.block_size - 1)) != 0) {
    return Invalid("block_size", absl::StrCat("must be a power of two in [1, ", kMaxBlockSize,
                                              "], got ", config.block_size));
  }
  if (config.slo.ttft_ms) RETURN_IF_ERROR(CheckPositiveFinite("slo.ttft_ms", *config.slo.ttft_ms));
  if (config.slo.tpot_ms) RETURN_IF_ERROR(CheckPositiveFinite("slo.tpot_ms", *config.slo.tpot_ms));
  if (!(config.slo.attainment > 0 && config.slo.attainment <= 1)) {
    return Invalid("slo.attainment", absl::StrCat("must be in (0, 1], got ", config.slo.attainment));
  }
  if (config.slo.admission.value_or(false) && !config.slo.ttft_ms && !config.slo.tpot_ms) {
    return Invalid("slo.admission",
                   "true needs slo.ttft_ms or slo.tpot_ms (nothing to admit against)");
  }
  for (WorkerRole role : Roles(config.mode)) {
    RETURN_IF_ERROR(ValidatePhase(role, Phase(config, role)));
  }
  // After the phases: a default internal port follows the workers', so a bad base_port is named first.
  RETURN_IF_ERROR(CheckPort("internal_port", config.internal_port));
  return CheckNoSharing(config);
}

std::string ToYaml(const DeploymentConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "model" << YAML::Value;
  EmitString(out, config.model_dir.string());
  if (!config.served_model_names.empty()) {
    // Quoted: a name such as "null" or "true" must read back as that string.
    out << YAML::Key << "served_model_name" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& name : config.served_model_names) out << YAML::DoubleQuoted << name;
    out << YAML::EndSeq;
  }
  if (config.max_model_len > 0) out << YAML::Key << "max_model_len" << YAML::Value << config.max_model_len;
  out << YAML::Key << "weight_dtype" << YAML::Value << std::string(DTypeName(config.weight_dtype));
  out << YAML::Key << "kv_cache_dtype" << YAML::Value
      << std::string(DTypeName(config.kv_cache_dtype));
  out << YAML::Key << "enable_prefix_caching" << YAML::Value << config.enable_prefix_caching;
  out << YAML::Key << "max_local_prefill_tokens" << YAML::Value << config.max_local_prefill_tokens;
  out << YAML::Key << "routing_policy" << YAML::Value
      << std::string(RoutingPolicyName(config.routing_policy));
  out << YAML::Key << "host" << YAML::Value;
  EmitString(out, config.host);
  out << YAML::Key << "scheduler_port" << YAML::Value << config.scheduler_port;
  out << YAML::Key << "http_port" << YAML::Value << config.http_port;
  out << YAML::Key << "internal_port" << YAML::Value << config.internal_port;
  if (!config.tls_cert.empty()) {
    out << YAML::Key << "tls_cert" << YAML::Value;
    EmitString(out, config.tls_cert.string());
    out << YAML::Key << "tls_key" << YAML::Value;
    EmitString(out, config.tls_key.string());
  }
  out << YAML::Key << "http_max_body_bytes" << YAML::Value << FormatByteSize(config.http_max_body_bytes);
  out << YAML::Key << "liveness_timeout_ms" << YAML::Value << config.liveness_timeout_ms;
  if (!config.chat_template.empty()) {
    out << YAML::Key << "chat_template" << YAML::Value;
    EmitString(out, config.chat_template.string());
  }
  if (!config.tool_call_parser.empty()) {
    out << YAML::Key << "tool_call_parser" << YAML::Value;
    EmitString(out, config.tool_call_parser);
  }
  out << YAML::Key << "enable_auto_tool_choice" << YAML::Value << config.enable_auto_tool_choice;
  if (!config.reasoning_parser.empty()) {
    out << YAML::Key << "reasoning_parser" << YAML::Value;
    EmitString(out, config.reasoning_parser);
  }
  out << YAML::Key << "mode" << YAML::Value << std::string(DeploymentModeName(config.mode));
  out << YAML::Key << "block_size" << YAML::Value << config.block_size;
  out << YAML::Key << "slo" << YAML::Value << YAML::BeginMap;
  // Unset SLOs stay unset (absent keys), so that admission keeps its default when read back.
  if (config.slo.ttft_ms) {
    out << YAML::Key << "ttft_ms" << YAML::Value << FormatDouble(*config.slo.ttft_ms);
  }
  if (config.slo.tpot_ms) {
    out << YAML::Key << "tpot_ms" << YAML::Value << FormatDouble(*config.slo.tpot_ms);
  }
  out << YAML::Key << "attainment" << YAML::Value << FormatDouble(config.slo.attainment);
  if (config.slo.admission) out << YAML::Key << "admission" << YAML::Value << *config.slo.admission;
  out << YAML::EndMap;
  for (WorkerRole role : Roles(config.mode)) EmitPhase(out, role, Phase(config, role));
  out << YAML::EndMap;
  BATON_CHECK(out.good());
  return absl::StrCat(out.c_str(), "\n");
}

int DefaultInternalPort(const DeploymentConfig& config) {
  int port = 0;
  for (const WorkerInstance& worker : WorkerInstances(config)) port = std::max(port, worker.port + 1);
  if (port == 0) port = config.scheduler_port + 1;
  return port == config.http_port ? port + 1 : port;
}

absl::Status SetSchedulerPort(DeploymentConfig& config, int port) {
  RETURN_IF_ERROR(CheckPort("scheduler_port", port));
  const int offset = port - config.scheduler_port;
  for (WorkerRole role : Roles(config.mode)) {
    const PhaseConfig& phase = Phase(config, role);
    const int64_t first = int64_t{phase.base_port} + offset;
    const int64_t last = first + phase.num_instances - 1;
    if (first < 1 || last > kMaxPort) {
      return Invalid(JoinPath(runtime::WorkerRoleName(role), "base_port"),
                     absl::StrCat("moving the scheduler to port ", port, " would move ",
                                  runtime::WorkerRoleName(role), " instances to ports ", first, "..",
                                  last, ", outside [1, ", kMaxPort, "]"));
    }
  }
  const int64_t internal = int64_t{config.internal_port} + offset;
  if (internal < 1 || internal > kMaxPort) {
    return Invalid("internal_port", absl::StrCat("moving the scheduler to port ", port,
                                                 " would move the internal port to ", internal));
  }
  config.scheduler_port = port;
  config.internal_port = static_cast<int>(internal);
  for (WorkerRole role : Roles(config.mode)) MutablePhase(config, role).base_port += offset;
  return absl::OkStatus();
}

std::vector<WorkerRole> Roles(DeploymentMode mode) {
  if (mode == DeploymentMode::kColocated) return {WorkerRole::kColocated};
  return {WorkerRole::kPrefill, WorkerRole::kDecode};
}

const PhaseConfig& Phase(const DeploymentConfig& config, WorkerRole role) {
  switch (role) {
    case WorkerRole::kPrefill: return config.prefill;
    case WorkerRole::kDecode: return config.decode;
    case WorkerRole::kColocated: break;
  }
  return config.colocated;
}

PhaseConfig& MutablePhase(DeploymentConfig& config, WorkerRole role) {
  switch (role) {
    case WorkerRole::kPrefill: return config.prefill;
    case WorkerRole::kDecode: return config.decode;
    case WorkerRole::kColocated: break;
  }
  return config.colocated;
}

std::vector<WorkerInstance> WorkerInstances(const DeploymentConfig& config) {
  std::vector<WorkerInstance> workers;
  for (WorkerRole role : Roles(config.mode)) {
    const PhaseConfig& phase = Phase(config, role);
    for (int i = 0; i < phase.num_instances; ++i) {
      workers.push_back({.role = role, .instance_idx = i, .port = phase.base_port + i});
    }
  }
  return workers;
}

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  size_t number_len = 0;
  while (number_len < trimmed.size() &&
         (absl::ascii_isdigit(static_cast<unsigned char>(trimmed[number_len])) ||
          trimmed[number_len] == '.')) {
    ++number_len;
  }
  const absl::string_view number = trimmed.substr(0, number_len);
  const std::string unit =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(trimmed.substr(number_len)));
  static constexpr std::pair<absl::string_view, uint64_t> kUnits[] = {
      {"", 1},
      {"b", 1},
      {"kib", 1ull << 10},
      {"mib", 1ull << 20},
      {"gib", 1ull << 30},
      {"tib", 1ull << 40},
      {"kb", 1000ull},
      {"mb", 1000ull * 1000},
      {"gb", 1000ull * 1000 * 1000},
      {"tb", 1000ull * 1000 * 1000 * 1000},
  };
  const auto* unit_it = std::find_if(std::begin(kUnits), std::end(kUnits),
                                     [&](const auto& u) { return u.first == unit; });
  if (number.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a byte size (e.g. 512MiB)"));
  }
  if (unit_it == std::end(kUnits)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "': unknown unit (expected B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)"));
  }
  const uint64_t multiplier = unit_it->second;
  constexpr uint64_t kMaxBytes = uint64_t{1} << 62;
  if (absl::StrContains(number, '.')) {
    double value;
    if (!absl::SimpleAtod(number, &value)) {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a byte size (e.g. 512MiB)"));
    }
    const double bytes = value * static_cast<double>(multiplier);
    if (!(bytes < static_cast<double>(kMaxBytes)) || bytes != std::floor(bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "' is not a whole number of bytes below 2^62"));
    }
    return static_cast<uint64_t>(bytes);
  }
  uint64_t value;
  if (!absl::SimpleAtoi(number, &value) || value > kMaxBytes / multiplier) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a byte size below 2^62"));
  }
  return value * multiplier;
}

std::string FormatByteSize(uint64_t num_bytes) {
  static constexpr std::pair<absl::string_view, int> kUnits[] = {
      {"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}};
  if (num_bytes != 0) {
    for (const auto& [name, shift] : kUnits) {
      const uint64_t unit = uint64_t{1} << shift;
      if (num_bytes % unit == 0) return absl::StrCat(num_bytes >> shift, name);
    }
  }
  return absl::StrCat(num_bytes);
}

}  // namespace baton::scheduler
