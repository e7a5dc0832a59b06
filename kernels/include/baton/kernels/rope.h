// Rotary position embedding, Hugging Face semantics: "rotate_half" (NeoX) pairing, with the
// frequency table optionally rescaled for long contexts (linear, or Llama 3's smoothed scheme).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/common/thread_pool.h"

namespace baton::kernels {

enum class RopeScalingType { kNone, kLinear, kLlama3 };

// Mirrors config.json's "rope_scaling". Defaults are Llama 3.1's except `factor`.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  float factor = 1;  // kLinear: positions / factor; kLlama3: low-frequency division factor
  float low_freq_factor = 1;   // kLlama3 only
  float high_freq_factor = 4;  // kLlama3 only
  int original_max_position = 8192;  // kLlama3 only: original_max_position_embeddings
};

// Returns inv_freq [rotary_dim / 2]: inv_freq[i] = theta^(-2i / rotary_dim), computed like
// transformers' _compute_default_rope_parameters, then rescaled: kLinear divides every entry by
// `factor` (same as positions / factor); kLlama3 applies _compute_llama3_parameters (wavelengths
// longer than original_max_position / low_freq_factor are divided by factor, shorter than
// original_max_position / high_freq_factor kept, smooth interpolation between).
// InvalidArgument if theta <= 1, rotary_dim is not a positive even number, factor <= 0, or (kLlama3)
// low_freq_factor >= high_freq_factor or original_max_position <= 0.
absl::StatusOr<std::vector<float>> RopeInvFreq(float theta, int rotary_dim,
                                               const RopeScaling& scaling);

struct RopeParams {
  float* q;                   // [num_tokens, q_stride] holding [num_heads, head_dim]
  float* k;                   // [num_tokens, k_stride] holding [num_kv_heads, head_dim]
  const int32_t* positions;   // [num_tokens], >= 0
  const float* inv_freq;      // [head_dim / 2]
  int num_tokens;
  int num_heads;
  int num_kv_heads;
  int head_dim;  // even
  int q_stride;  // >= num_heads * head_dim
  int k_stride;  // >= num_kv_heads * head_dim
};

// Checks pointers (null allowed only when num_tokens == 0), even head_dim, strides. Does not read
// positions.
absl::Status Validate(const RopeParams& params);

// In place, for every head of q and k: with half = head_dim / 2 and angle = pos * inv_freq[i]
// (f32 product, as HF's `positions.float() @ inv_freq`), for i < half:
//   x'[i]        = x[i] * cos(angle) - x[i + half] * sin(angle)
//   x'[i + half] = x[i + half] * cos(angle) + x[i] * sin(angle)
// Validates, then returns InvalidArgument naming the first negative position (before writing).
// `pool` may be nullptr.
absl::Status RopeCpu(const RopeParams& params, ThreadPool* pool);

}  // namespace baton::kernels
