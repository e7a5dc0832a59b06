#include "kernels/cuda/rope.h"

#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/rope.cuh"

namespace baton::kernels {

absl::Status Rope(const RopeParams& params, cudaStream_t stream) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_tokens == 0) return absl::OkStatus();
  const simt::LaunchShape s = cuda_detail::RopeLaunchShape(params);
  cuda_detail::RopeKernel<<<dim3(s.grid_x), dim3(s.block_x), 0, stream>>>(params);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::kernels
