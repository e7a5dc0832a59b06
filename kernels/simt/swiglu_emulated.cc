#include "kernels/common/status_macros.h"
#include "kernels/cuda/swiglu.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status SwigluEmulated(const SwigluParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_tokens == 0) return absl::OkStatus();
  return simt::Launch(cuda_detail::SwigluLaunchShape(params),
                      [&] { cuda_detail::SwigluKernel(params); });
}

}  // namespace baton::kernels
