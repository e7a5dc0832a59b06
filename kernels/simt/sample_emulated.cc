#include "kernels/common/status_macros.h"
#include "kernels/cuda/sample.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status SampleEmulated(const SampleParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_seqs == 0) return absl::OkStatus();
  return simt::Launch(cuda_detail::SampleLaunchShape(params),
                      [&] { cuda_detail::SampleKernel(params); });
}

}  // namespace baton::kernels
