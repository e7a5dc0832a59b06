// How a pre-quantized checkpoint stores its matmul weights, from config.json's
// "quantization_config" (transformers' and vLLM's detection: the config says, not a flag).
//
// Read today (rows are output features, columns input features; a module's tensors are
// `<module>.<name>`):
//   - compressed-tensors (llm-compressor's format, vLLM's `compressed-tensors`), targets Linear:
//       int8, symmetric, one scale per output channel (W8A16, and the weights of W8A8 schemes):
//         "int-quantized" / "naive-quantized": `weight` I8 [out, in];
//         "pack-quantized" (num_bits 8): `weight_packed` I32 [out, ceil(in / 4)], weight i of a
//           row in bits 8 * (i % 4) of word i / 4, stored as q + 128;
//         `weight_scale` [out, 1] in any float dtype; w = q * scale.
//       int4, symmetric, groups (W4A16, strategy "group"), "pack-quantized" (num_bits 4):
//         `weight_packed` I32 [out, in / 8], weight i in bits 4 * (i % 8) of word i / 8, stored
//         as q + 8; `weight_scale` [out, in / group_size]; w = q * scale.
//       fp8 E4M3 (type "float", num_bits 8), "float-quantized" / "naive-quantized": `weight`
//         F8_E4M3 [out, in]; `weight_scale` of strategy "tensor" (one element), "channel"
//         ([out, 1]) or "block" ([ceil(out / bo), ceil(in / bi)] for block_structure [bo, bi]);
//         w = fp8 * scale.
//     Activation quantization (input_activations, as W8A8 schemes set) is not applied: the
//     products take bf16 activations. Modules the config's `ignore` names (exact names or "re:"
//     regular expressions, matched against the module's name) are stored unquantized.
//   - AWQ (AutoAWQ, `quant_method` "awq", version "gemm", zero_point true, 4 bits): `qweight` I32
//     [in, out / 8], output column 8 * j + kAwqOrder[i] of word j in bits 4 * i; `qzeros` I32
//     [in / group_size, out / 8] packed the same way; `scales` [in / group_size, out];
//     w = (q - zero) * scale. `modules_to_not_convert` names are matched as substrings (vLLM's
//     rule); lm_head is never quantized.
//   - GPTQ (AutoGPTQ, GPTQModel, optimum; `quant_method` "gptq", 4 bits, desc_act false):
//     `qweight` I32 [in / 8, out], input row 8 * i + b of word (i, column) in bits 4 * b;
//     `qzeros` I32 [in / group_size, out / 8], column 8 * j + b of word j in bits 4 * b, stored as
//     zero - 1 unless checkpoint_format is "gptq_v2"; `scales` [in / group_size, out]; `g_idx`
//     I32 [in], which must be c / group_size (act-order checkpoints permute it: refused);
//     group_size -1 is one group per row. w = (q - zero) * scale; lm_head is never quantized.
//   - fp8 (`quant_method` "fp8": transformers' FineGrainedFP8, DeepSeek-V3, Qwen3-FP8, vLLM's own
//     serialization; `fmt` e4m3): `weight` F8_E4M3 [out, in] with, given `weight_block_size`
//     [bo, bi], `weight_scale_inv` [ceil(out / bo), ceil(in / bi)] (despite the name, the
//     multiplier: w = fp8 * scale_inv), else a per-tensor `weight_scale` (one element). The
//     activation_scheme (dynamic, or static with `input_scale`) is not applied, as above.
//     `ignored_layers` and `modules_to_not_convert` are matched as substrings; lm_head is never
//     quantized.
//
// Anything else (asymmetric compressed-tensors, AWQ gemv, GPTQ act-order or 8-bit,
// Marlin-repacked, ...) is kUnimplemented naming the method, format or field, so that a checkpoint
// is never read as something it is not.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/common/dtype.h"
#include "nlohmann/json_fwd.hpp"

namespace baton::runtime {

// AWQ's interleaving: nibble i of a packed word holds output column kAwqOrder[i] of its eight.
inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

struct CheckpointQuantization {
  enum class Layout { kInt8, kPacked8, kPacked4, kAwq, kGptq, kFp8 };
  Layout layout = Layout::kInt8;
  DType weight_dtype = DType::kI8;  // what the quantized modules load as (kI8, kI4 or kF8E4M3)
  std::string format;               // compressed-tensors' format, else the quant_method
  int group_size = 0;               // int4 layouts: columns per scale; 0: one group per row
  bool gptq_zero_minus_one = false; // GPTQ v1: a stored zero point is the zero minus one
  // kFp8: the scale tensor's name after "<module>.", and the block of weights one scale covers
  // (rows, columns); 0 x 0 when the scale is per tensor or per channel (told by its shape).
  std::string fp8_scale_name = "weight_scale";
  int fp8_block_rows = 0;
  int fp8_block_cols = 0;
  std::vector<std::string> ignore;  // compressed-tensors: module names or "re:<regex>"
  std::vector<std::string> not_converted;  // AWQ, fp8: substrings of module names left unquantized

  // Whether the module (e.g. "model.layers.0.self_attn.q_proj", "lm_head") is stored quantized.
  bool Quantizes(std::string_view module) const;
};

// nullopt when `config` (config.json's object) has no quantization_config. `path` names the file in
// errors.
absl::StatusOr<std::optional<CheckpointQuantization>> ReadCheckpointQuantization(
    const nlohmann::json& config, const std::filesystem::path& path);

}  // namespace baton::runtime
