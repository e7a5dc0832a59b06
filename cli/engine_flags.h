// The flags that choose how an in-process engine computes (`baton generate`, `baton eval`): weight
// and KV dtypes, device, threads, KV budget, graphs. One parser, so both commands say the same.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "runtime/engine/engine.h"

namespace baton::cli {

struct EngineFlags {
  std::string dtype = "f32";
  std::string quantization;  // empty: none; see QuantizationDType
  std::string kv_cache_dtype = "f32";
  std::string device = "cpu";
  bool enforce_eager = false;
  int threads = 0;
  size_t kv_cache_mib = 256;
  int max_model_len = 0;  // 0: the model's max_position_embeddings
};

// Adds --dtype, --quantization, --kv-cache-dtype, --device, --enforce-eager, --threads, --kv-cache-mib and
// --max-model-len.
void AddEngineFlags(CLI::App& cmd, EngineFlags* flags);

// The matmul weight dtype `--quantization name` asks for: "int8" i8, "int4" i4; the names of
// checkpoint formats ("compressed-tensors", "awq", "gptq") nullopt: the checkpoint's config.json
// says (runtime/model/checkpoint_quantization.h). `flag` names the flag in the error for any other.
absl::StatusOr<std::optional<DType>> QuantizationDType(const std::string& name, const char* flag);

// The engine config the flags ask for on model_dir; InvalidArgument naming the flag for a bad value.
absl::StatusOr<runtime::EngineConfig> EngineConfigOf(const EngineFlags& flags,
                                                     const std::filesystem::path& model_dir);

}  // namespace baton::cli
