#include "kernels/cuda/kv_gather.h"

#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/kv_gather.cuh"

namespace baton::kernels {

bool KvGatherSupported(const KvGatherParams& params) {
  return cuda_detail::KvGatherCheckSupported(params).ok();
}

absl::Status KvGather(const KvGatherParams& params, cudaStream_t stream) {
  RETURN_IF_ERROR(cuda_detail::KvGatherCheckSupported(params));
  if (params.num_seqs == 0) return absl::OkStatus();
  const simt::LaunchShape s = cuda_detail::KvGatherLaunchShape(params);
  cuda_detail::ForKvElement(params.cache.dtype, [&](auto element) {
    cuda_detail::KvGatherKernel<decltype(element)>
        <<<dim3(s.grid_x, s.grid_y), dim3(s.block_x), 0, stream>>>(params);
  });
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::kernels
