#include "kernels/cuda/token_bitmask.h"

#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/token_bitmask.cuh"

namespace baton::kernels {

absl::Status TokenBitmask(const TokenBitmaskParams& params, cudaStream_t stream) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_masked == 0) return absl::OkStatus();
  const simt::LaunchShape shape = cuda_detail::TokenBitmaskLaunchShape(params);
  cuda_detail::TokenBitmaskKernel<<<dim3(shape.grid_x, shape.grid_y), dim3(shape.block_x), 0, stream>>>(
      params);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::kernels
