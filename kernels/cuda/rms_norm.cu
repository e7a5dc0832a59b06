#include "kernels/cuda/rms_norm.h"

#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/rms_norm.cuh"

namespace baton::kernels {

absl::Status RmsNorm(const RmsNormParams& params, cudaStream_t stream) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_tokens == 0) return absl::OkStatus();
  const simt::LaunchShape shape = cuda_detail::RmsNormLaunchShape(params);
  cuda_detail::RmsNormKernel<<<dim3(shape.grid_x), dim3(shape.block_x), 0, stream>>>(params);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::kernels
