#include "kernels/cuda/add_rms_norm.h"

#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/add_rms_norm.cuh"

namespace baton::kernels {

absl::Status AddRmsNorm(const AddRmsNormParams& params, cudaStream_t stream) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_tokens == 0) return absl::OkStatus();
  const simt::LaunchShape shape = cuda_detail::AddRmsNormLaunchShape(params);
  cuda_detail::AddRmsNormKernel<<<dim3(shape.grid_x), dim3(shape.block_x), 0, stream>>>(params);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::kernels
