#include "kernels/cuda/logits_processors.h"

#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/logits_processors.cuh"

namespace baton::kernels {

absl::Status LogitsProcessors(const LogitsProcessorsParams& params, cudaStream_t stream) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_seqs == 0) return absl::OkStatus();
  const simt::LaunchShape shape = cuda_detail::LogitsProcessorsLaunchShape(params);
  cuda_detail::LogitsProcessorsKernel<<<dim3(shape.grid_x), dim3(shape.block_x), 0, stream>>>(
      params);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::kernels
