#include "kernels/common/status_macros.h"
#include "kernels/cuda/matmul_int8_gemv.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status MatmulInt8GemvEmulated(const MatmulParams& params) {
  RETURN_IF_ERROR(ValidateInt8Gemv(params));
  if (params.m == 0) return absl::OkStatus();
  return simt::Launch(cuda_detail::MatmulInt8GemvLaunchShape(params),
                      [&] { cuda_detail::MatmulInt8GemvKernel(params); });
}

}  // namespace baton::kernels
