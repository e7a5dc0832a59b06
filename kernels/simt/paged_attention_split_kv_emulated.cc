#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/paged_attention_split_kv.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status PagedAttentionSplitKvEmulated(const PagedAttentionSplitKvParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.attn.cache.head_dim > cuda_detail::kDecodeMaxHeadDim) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttentionSplitKv: head_dim ",
                                                   params.attn.cache.head_dim, " > ",
                                                   cuda_detail::kDecodeMaxHeadDim));
  }
  if (params.attn.num_seqs == 0) return absl::OkStatus();
  absl::Status status;
  cuda_detail::ForKvElement(params.attn.cache.dtype, [&](auto element) {
    status = simt::Launch(cuda_detail::PagedAttentionSplitKvLaunchShape(params), [&] {
      cuda_detail::PagedAttentionSplitKvKernel<decltype(element)>(params);
    });
  });
  RETURN_IF_ERROR(status);
  return simt::Launch(cuda_detail::PagedAttentionSplitKvMergeLaunchShape(params),
                      [&] { cuda_detail::PagedAttentionSplitKvMergeKernel(params); });
}

}  // namespace baton::kernels
