#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/prefill_attention.cuh"
#include "kernels/cuda/prefill_attention_mma.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status PrefillAttentionEmulated(const PrefillAttentionParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.head_dim > cuda_detail::kPrefillMaxHeadDim ||
      (params.num_seqs > 0 && params.max_q_len < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("PrefillAttention (CUDA): unsupported head_dim ", params.head_dim,
                     " or max_q_len ", params.max_q_len));
  }
  if (params.num_seqs == 0) return absl::OkStatus();
  if (cuda_detail::UsesTensorCores(params)) {
    const simt::LaunchShape shape = cuda_detail::PrefillAttentionMmaLaunchShape(params);
    if (params.head_dim == 64) {
      return simt::Launch(shape, [&] { cuda_detail::PrefillAttentionMmaKernel<64>(params); });
    }
    return simt::Launch(shape, [&] { cuda_detail::PrefillAttentionMmaKernel<128>(params); });
  }
  return simt::Launch(cuda_detail::PrefillAttentionLaunchShape(params),
                      [&] { cuda_detail::PrefillAttentionKernel(params); });
}

}  // namespace baton::kernels
