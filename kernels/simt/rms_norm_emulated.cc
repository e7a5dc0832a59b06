#include "kernels/common/status_macros.h"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status RmsNormEmulated(const RmsNormParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_tokens == 0) return absl::OkStatus();
  return simt::Launch(cuda_detail::RmsNormLaunchShape(params),
                      [&] { cuda_detail::RmsNormKernel(params); });
}

}  // namespace baton::kernels
