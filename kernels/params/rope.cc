#include "baton/kernels/rope.h"

#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

using internal::CheckAtLeast;
using internal::CheckPointer;

absl::StatusOr<std::vector<float>> RopeInvFreq(float theta, int rotary_dim,
                                               const RopeScaling& scaling) {
  constexpr absl::string_view kOp = "RopeInvFreq";
  if (!(theta > 1) || std::isinf(theta)) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": theta = ", theta, " must be > 1"));
  }
  if (rotary_dim <= 0 || rotary_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": rotary_dim = ", rotary_dim, " must be positive and even"));
  }
  if (scaling.type != RopeScalingType::kNone && !(scaling.factor > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": scaling factor = ", scaling.factor, " must be > 0"));
  }
  if (scaling.type == RopeScalingType::kLlama3 &&
      (!(scaling.low_freq_factor < scaling.high_freq_factor) ||
       scaling.original_max_position <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": llama3 scaling needs low_freq_factor < high_freq_factor (got ",
        scaling.low_freq_factor, ", ", scaling.high_freq_factor,
        ") and original_max_position > 0 (got ", scaling.original_max_position, ")"));
  }
  // transformers computes these in float32 tensors; so do we, op by op.
  std::vector<float> inv_freq(rotary_dim / 2);
  for (int i = 0; i < rotary_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    inv_freq[i] = 1.0f / powf(theta, exponent);
  }
  switch (scaling.type) {
    case RopeScalingType::kNone:
      break;
    case RopeScalingType::kLinear:
      for (float& f : inv_freq) f /= scaling.factor;
      break;
    case RopeScalingType::kLlama3: {
      const float old_len = static_cast<float>(scaling.original_max_position);
      const float low_freq_wavelen = old_len / scaling.low_freq_factor;
      const float high_freq_wavelen = old_len / scaling.high_freq_factor;
      for (float& f : inv_freq) {
        const float wavelen = 2 * std::numbers::pi_v<float> / f;
        if (wavelen > low_freq_wavelen) {
          f = f / scaling.factor;
        } else if (wavelen >= high_freq_wavelen) {
          const float smooth = (old_len / wavelen - scaling.low_freq_factor) /
                               (scaling.high_freq_factor - scaling.low_freq_factor);
          f = (1 - smooth) * f / scaling.factor + smooth * f;
        }
      }
      break;
    }
  }
  return inv_freq;
}

absl::Status Validate(const RopeParams& params) {
  constexpr absl::string_view kOp = "Rope";
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_tokens", params.num_tokens, 0));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_heads", params.num_heads, 1));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_kv_heads", params.num_kv_heads, 0));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "head_dim", params.head_dim, 2));
  if (params.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": head_dim = ", params.head_dim, " must be even"));
  }
  RETURN_IF_ERROR(CheckAtLeast(kOp, "q_stride", params.q_stride,
                               int64_t{params.num_heads} * params.head_dim));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "k_stride", params.k_stride,
                               int64_t{params.num_kv_heads} * params.head_dim));
  const bool empty = params.num_tokens == 0;
  RETURN_IF_ERROR(CheckPointer(kOp, "q", params.q, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "k", params.k, empty || params.num_kv_heads == 0));
  RETURN_IF_ERROR(CheckPointer(kOp, "positions", params.positions, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "inv_freq", params.inv_freq));
  return absl::OkStatus();
}

}  // namespace baton::kernels
