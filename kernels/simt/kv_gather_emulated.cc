#include "kernels/common/status_macros.h"
#include "kernels/cuda/kv_gather.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status KvGatherEmulated(const KvGatherParams& params) {
  RETURN_IF_ERROR(cuda_detail::KvGatherCheckSupported(params));
  if (params.num_seqs == 0) return absl::OkStatus();
  absl::Status status;
  cuda_detail::ForKvElement(params.cache.dtype, [&](auto element) {
    status = simt::Launch(cuda_detail::KvGatherLaunchShape(params),
                          [&] { cuda_detail::KvGatherKernel<decltype(element)>(params); });
  });
  return status;
}

}  // namespace baton::kernels
