#include "kernels/common/status_macros.h"
#include "kernels/cuda/kv_write.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status KvWriteEmulated(const KvWriteParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_tokens == 0) return absl::OkStatus();
  absl::Status status;
  cuda_detail::ForKvElement(params.cache.dtype, [&](auto element) {
    status = simt::Launch(cuda_detail::KvWriteLaunchShape(params),
                          [&] { cuda_detail::KvWriteKernel<decltype(element)>(params); });
  });
  return status;
}

}  // namespace baton::kernels
