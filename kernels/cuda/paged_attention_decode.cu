#include "kernels/cuda/paged_attention_decode.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/paged_attention_decode.cuh"

namespace baton::kernels {

bool PagedAttentionDecodeSupported(const PagedAttentionParams& params) {
  return Validate(params).ok() && params.cache.head_dim <= cuda_detail::kDecodeMaxHeadDim;
}

absl::Status PagedAttentionDecode(const PagedAttentionParams& params, cudaStream_t stream) {
  RETURN_IF_ERROR(Validate(params));
  if (params.cache.head_dim > cuda_detail::kDecodeMaxHeadDim) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttentionDecode: head_dim ",
                                                   params.cache.head_dim, " > ",
                                                   cuda_detail::kDecodeMaxHeadDim));
  }
  if (params.num_seqs == 0) return absl::OkStatus();
  const simt::LaunchShape s = cuda_detail::PagedAttentionDecodeLaunchShape(params);
  cuda_detail::ForKvElement(params.cache.dtype, [&](auto element) {
    cuda_detail::PagedAttentionDecodeKernel<decltype(element)>
        <<<dim3(s.grid_x, s.grid_y), dim3(s.block_x), 0, stream>>>(params);
  });
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::kernels
