#include "cli/engine_flags.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/backend/backend_registry.h"
#include "runtime/model/model_config.h"

namespace baton::cli {

void AddEngineFlags(CLI::App& cmd, EngineFlags* flags) {
  cmd.add_option("--dtype", flags->dtype, "Weight dtype for matmuls: f32, bf16 or f16")
      ->capture_default_str();
  cmd.add_option("--quantization,-q", flags->quantization,
                 "Quantize the matmul weights at load: int8 (per output row, symmetric), fp8 (E4M3, "
                 "a scale per output row) or int4 (groups of 128 columns, asymmetric); the "
                 "products take bf16 activations. "
                 "Replaces --dtype for those weights");
  cmd.add_option("--device", flags->device,
                 "cpu, cuda, cuda:N (rank r on device N + r) or cuda-emulated (the GPU backend's "
                 "code on the CPU, for tests)")
      ->capture_default_str();
  cmd.add_flag("--enforce-eager", flags->enforce_eager,
               "GPU devices: run every decode step op by op instead of replaying a CUDA graph");
  cmd.add_option("--threads", flags->threads, "CPU compute threads per rank (default 1)");
  cmd.add_option("--kv-cache-mib", flags->kv_cache_mib, "KV cache budget in MiB")->capture_default_str();
  cmd.add_option("--max-model-len", flags->max_model_len,
                 "Context length, prompt plus output tokens (default: the model's max_position_embeddings)");
  cmd.add_option("--kv-cache-dtype", flags->kv_cache_dtype,
                 "KV cache elements: f32, bf16 (half the bytes per token), or auto (bf16 for bf16 "
                 "and quantized weights, else f32)")
      ->capture_default_str();
}

absl::StatusOr<std::optional<DType>> QuantizationDType(const std::string& name, const char* flag) {
  if (name == "int8") return DType::kI8;
  if (name == "int4") return DType::kI4;
  if (name == "fp8") return DType::kF8E4M3;
  if (name == "compressed-tensors" || name == "awq" || name == "gptq") return std::nullopt;
  return absl::InvalidArgumentError(absl::StrCat(
      flag, ": '", name, "' (int8, fp8 or int4; or compressed-tensors, awq, gptq: a checkpoint "
      "quantized so, which is also detected from its config.json)"));
}

absl::StatusOr<runtime::EngineConfig> EngineConfigOf(const EngineFlags& flags,
                                                     const std::filesystem::path& model_dir) {
  runtime::EngineConfig config{.model_dir = model_dir};
  if (flags.dtype == "bf16") {
    config.weight_dtype = DType::kBF16;
  } else if (flags.dtype == "f16") {
    config.weight_dtype = DType::kF16;
  } else if (flags.dtype != "f32") {
    return absl::InvalidArgumentError(absl::StrCat("--dtype: '", flags.dtype, "' (f32, bf16 or f16)"));
  }
  if (!flags.quantization.empty()) {
    ASSIGN_OR_RETURN(const std::optional<DType> quantized,
                     QuantizationDType(flags.quantization, "--quantization"));
    if (quantized) config.weight_dtype = *quantized;
  }
  // A pre-quantized checkpoint says so in config.json (vLLM detects it the same way).
  if (absl::StatusOr<runtime::ModelConfig> model = runtime::LoadModelConfig(model_dir);
      model.ok() && model->quantization.has_value()) {
    config.weight_dtype = model->quantization->weight_dtype;
  }
  const std::optional<DType> kv_dtype = KvDTypeFromName(flags.kv_cache_dtype, config.weight_dtype);
  if (!kv_dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-cache-dtype: '", flags.kv_cache_dtype, "' (f32, bf16 or auto)"));
  }
  config.kv_cache_dtype = *kv_dtype;
  absl::StatusOr<runtime::DeviceSpec> device = runtime::ParseDevice(flags.device);
  if (!device.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--device: ", device.status().message()));
  }
  config.device = device->kind;
  config.first_device_index = device->index;
  config.decode_graphs = !flags.enforce_eager;
  config.num_threads = flags.threads > 0 ? flags.threads : 1;
  config.kv_cache_bytes = flags.kv_cache_mib << 20;
  if (flags.max_model_len < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--max-model-len: must be >= 1, got ", flags.max_model_len));
  }
  if (flags.max_model_len > 0) {  // more than the model was trained for is refused, as vLLM does
    ASSIGN_OR_RETURN(const runtime::ModelConfig model, runtime::LoadModelConfig(model_dir));
    if (flags.max_model_len > model.max_position_embeddings) {
      return absl::InvalidArgumentError(absl::StrCat("--max-model-len ", flags.max_model_len,
                                                     " exceeds the model's max_position_embeddings ",
                                                     model.max_position_embeddings));
    }
  }
  config.max_model_len = flags.max_model_len;
  return config;
}

}  // namespace baton::cli
