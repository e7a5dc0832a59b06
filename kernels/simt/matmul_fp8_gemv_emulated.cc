#include "kernels/common/status_macros.h"
#include "kernels/cuda/matmul_fp8_gemv.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status MatmulFp8GemvEmulated(const MatmulParams& params) {
  RETURN_IF_ERROR(ValidateFp8Gemv(params));
  if (params.m == 0) return absl::OkStatus();
  return simt::Launch(cuda_detail::MatmulFp8GemvLaunchShape(params),
                      [&] { cuda_detail::MatmulFp8GemvKernel(params); });
}

}  // namespace baton::kernels
