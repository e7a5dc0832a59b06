#include "kernels/common/status_macros.h"
#include "kernels/cuda/token_bitmask.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status TokenBitmaskEmulated(const TokenBitmaskParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_masked == 0) return absl::OkStatus();
  return simt::Launch(cuda_detail::TokenBitmaskLaunchShape(params),
                      [&] { cuda_detail::TokenBitmaskKernel(params); });
}

}  // namespace baton::kernels
