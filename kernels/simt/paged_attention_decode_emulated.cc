#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/paged_attention_decode.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status PagedAttentionDecodeEmulated(const PagedAttentionParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.cache.head_dim > cuda_detail::kDecodeMaxHeadDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("PagedAttentionDecode: head_dim ", params.cache.head_dim, " > ",
                     cuda_detail::kDecodeMaxHeadDim));
  }
  if (params.num_seqs == 0) return absl::OkStatus();
  absl::Status status;
  cuda_detail::ForKvElement(params.cache.dtype, [&](auto element) {
    status = simt::Launch(cuda_detail::PagedAttentionDecodeLaunchShape(params), [&] {
      cuda_detail::PagedAttentionDecodeKernel<decltype(element)>(params);
    });
  });
  return status;
}

}  // namespace baton::kernels
