#include "kernels/cuda/prefill_attention.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/prefill_attention.cuh"
#include "kernels/cuda/prefill_attention_mma.cuh"

namespace baton::kernels {

namespace {

constexpr int kMaxGridYz = 65535;

absl::Status CheckSupported(const PrefillAttentionParams& p) {
  RETURN_IF_ERROR(Validate(p));
  if (p.head_dim > cuda_detail::kPrefillMaxHeadDim || p.num_heads > kMaxGridYz ||
      p.num_seqs > kMaxGridYz || (p.num_seqs > 0 && p.max_q_len < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PrefillAttention (CUDA): unsupported head_dim ", p.head_dim, ", num_heads ", p.num_heads,
        ", num_seqs ", p.num_seqs, " or max_q_len ", p.max_q_len));
  }
  return absl::OkStatus();
}

}  // namespace

bool PrefillAttentionSupported(const PrefillAttentionParams& params) {
  return CheckSupported(params).ok();
}

absl::Status PrefillAttention(const PrefillAttentionParams& params, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckSupported(params));
  if (params.num_seqs == 0) return absl::OkStatus();
  if (cuda_detail::UsesTensorCores(params)) {
    const simt::LaunchShape s = cuda_detail::PrefillAttentionMmaLaunchShape(params);
    const dim3 grid(s.grid_x, s.grid_y, s.grid_z);
    if (params.head_dim == 64) {
      cuda_detail::PrefillAttentionMmaKernel<64><<<grid, dim3(s.block_x), 0, stream>>>(params);
    } else {
      cuda_detail::PrefillAttentionMmaKernel<128><<<grid, dim3(s.block_x), 0, stream>>>(params);
    }
    BATON_CUDA_CALL(cudaGetLastError());
    return absl::OkStatus();
  }
  const simt::LaunchShape s = cuda_detail::PrefillAttentionLaunchShape(params);
  cuda_detail::PrefillAttentionKernel<<<dim3(s.grid_x, s.grid_y, s.grid_z), dim3(s.block_x),
                                        s.dynamic_shared_bytes, stream>>>(params);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::kernels
