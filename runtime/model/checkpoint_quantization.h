// How a pre-quantized checkpoint stores its matmul weights, from config.json's
// "quantization_config" (transformers' and vLLM's detection: the config says, not a flag).
//
// Read today: compressed-tensors (llm-compressor's format, vLLM's `compressed-tensors`) with int8
// weights, symmetric, one scale per output channel (W8A16 and the weights of W8A8 schemes), in
// either of its layouts:
//   - "int-quantized" / "naive-quantized": `<module>.weight` I8 [out, in];
//   - "pack-quantized" (num_bits 8): `<module>.weight_packed` I32 [out, ceil(in / 4)], weight i of a
//     row in bits 8 * (i % 4) of word i / 4, stored as q + 128 (unsigned); `<module>.weight_shape`.
// and `<module>.weight_scale` [out, 1] in any float dtype; w = q * scale. Activation quantization
// (input_activations, as W8A8 schemes set) is not applied: the products take bf16 activations.
// Modules the config's `ignore` names (exact names or "re:" regular expressions, matched against
// the module's name, e.g. "lm_head") are stored unquantized and load as such.
//
// Anything else (AWQ, GPTQ, fp8, int4, group or asymmetric int8, ...) is kUnimplemented naming the
// method, format or field, so that a checkpoint is never read as something it is not.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace baton::runtime {

struct CheckpointQuantization {
  enum class Layout { kInt8, kPacked8 };
  Layout layout = Layout::kInt8;
  std::string format;               // as the config says: "int-quantized", "pack-quantized", ...
  std::vector<std::string> ignore;  // module names or "re:<regex>"

  // Whether the module (e.g. "model.layers.0.self_attn.q_proj", "lm_head") is stored quantized.
  bool Quantizes(std::string_view module) const;
};

// nullopt when `config` (config.json's object) has no quantization_config. `path` names the file in
// errors.
absl::StatusOr<std::optional<CheckpointQuantization>> ReadCheckpointQuantization(
    const nlohmann::json& config, const std::filesystem::path& path);

}  // namespace baton::runtime
