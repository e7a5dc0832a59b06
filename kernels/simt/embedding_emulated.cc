#include "kernels/common/status_macros.h"
#include "kernels/cuda/embedding.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status EmbeddingEmulated(const EmbeddingParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_tokens == 0) return absl::OkStatus();
  return simt::Launch(cuda_detail::EmbeddingLaunchShape(params),
                      [&] { cuda_detail::EmbeddingKernel(params); });
}

}  // namespace baton::kernels
