#include "kernels/common/status_macros.h"
#include "kernels/cuda/matmul_int4_gemv.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status MatmulInt4GemvEmulated(const MatmulParams& params) {
  RETURN_IF_ERROR(ValidateInt4Gemv(params));
  if (params.m == 0) return absl::OkStatus();
  return simt::Launch(cuda_detail::MatmulInt4GemvLaunchShape(params),
                      [&] { cuda_detail::MatmulInt4GemvKernel(params); });
}

}  // namespace baton::kernels
