#include "kernels/cuda/paged_attention_split_kv.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/paged_attention_split_kv.cuh"

namespace baton::kernels {

bool PagedAttentionSplitKvSupported(const PagedAttentionSplitKvParams& params) {
  return Validate(params).ok() && params.attn.cache.head_dim <= cuda_detail::kDecodeMaxHeadDim;
}

absl::Status PagedAttentionSplitKv(const PagedAttentionSplitKvParams& params,
                                   cudaStream_t stream) {
  RETURN_IF_ERROR(Validate(params));
  if (params.attn.cache.head_dim > cuda_detail::kDecodeMaxHeadDim) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttentionSplitKv: head_dim ",
                                                   params.attn.cache.head_dim, " > ",
                                                   cuda_detail::kDecodeMaxHeadDim));
  }
  if (params.attn.num_seqs == 0) return absl::OkStatus();
  const simt::LaunchShape s = cuda_detail::PagedAttentionSplitKvLaunchShape(params);
  cuda_detail::ForKvElement(params.attn.cache.dtype, [&](auto element) {
    cuda_detail::PagedAttentionSplitKvKernel<decltype(element)>
        <<<dim3(s.grid_x, s.grid_y, s.grid_z), dim3(s.block_x), 0, stream>>>(params);
  });
  BATON_CUDA_CALL(cudaGetLastError());
  const simt::LaunchShape m = cuda_detail::PagedAttentionSplitKvMergeLaunchShape(params);
  cuda_detail::PagedAttentionSplitKvMergeKernel<<<dim3(m.grid_x, m.grid_y), dim3(m.block_x), 0,
                                                  stream>>>(params);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::kernels
