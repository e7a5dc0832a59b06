#include "kernels/common/status_macros.h"
#include "kernels/cuda/add_rms_norm.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status AddRmsNormEmulated(const AddRmsNormParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_tokens == 0) return absl::OkStatus();
  return simt::Launch(cuda_detail::AddRmsNormLaunchShape(params),
                      [&] { cuda_detail::AddRmsNormKernel(params); });
}

}  // namespace baton::kernels
