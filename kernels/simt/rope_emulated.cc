#include "kernels/common/status_macros.h"
#include "kernels/cuda/rope.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status RopeEmulated(const RopeParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_tokens == 0) return absl::OkStatus();
  return simt::Launch(cuda_detail::RopeLaunchShape(params),
                      [&] { cuda_detail::RopeKernel(params); });
}

}  // namespace baton::kernels
