#include "kernels/common/status_macros.h"
#include "kernels/cuda/logits_processors.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status LogitsProcessorsEmulated(const LogitsProcessorsParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_seqs == 0) return absl::OkStatus();
  return simt::Launch(cuda_detail::LogitsProcessorsLaunchShape(params),
                      [&] { cuda_detail::LogitsProcessorsKernel(params); });
}

}  // namespace baton::kernels
