#include "kernels/cuda/matmul_fp8_gemv.h"

#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/matmul_fp8_gemv.cuh"

namespace baton::kernels {

absl::Status MatmulFp8Gemv(const MatmulParams& params, cudaStream_t stream) {
  RETURN_IF_ERROR(ValidateFp8Gemv(params));
  if (params.m == 0) return absl::OkStatus();
  const simt::LaunchShape shape = cuda_detail::MatmulFp8GemvLaunchShape(params);
  cuda_detail::MatmulFp8GemvKernel<<<dim3(shape.grid_x), dim3(shape.block_x), 0, stream>>>(params);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::kernels
