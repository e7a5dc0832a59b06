#include "kernels/cuda/kv_write.h"

#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/kv_write.cuh"

namespace baton::kernels {

absl::Status KvWrite(const KvWriteParams& params, cudaStream_t stream) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_tokens == 0) return absl::OkStatus();
  const simt::LaunchShape s = cuda_detail::KvWriteLaunchShape(params);
  cuda_detail::ForKvElement(params.cache.dtype, [&](auto element) {
    cuda_detail::KvWriteKernel<decltype(element)><<<dim3(s.grid_x), dim3(s.block_x), 0, stream>>>(
        params);
  });
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::kernels
