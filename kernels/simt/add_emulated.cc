#include "kernels/common/status_macros.h"
#include "kernels/cuda/add.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status AddEmulated(const AddParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.n == 0) return absl::OkStatus();
  return simt::Launch(cuda_detail::AddLaunchShape(params), [&] { cuda_detail::AddKernel(params); });
}

}  // namespace baton::kernels
