#include "kernels/common/status_macros.h"
#include "kernels/cuda/kv_write.cuh"
#include "kernels/simt/emulated_kernels.h"

namespace baton::kernels {

absl::Status KvWriteEmulated(const KvWriteParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_tokens == 0) return absl::OkStatus();
  return simt::Launch(cuda_detail::KvWriteLaunchShape(params),
                      [&] { cuda_detail::KvWriteKernel(params); });
}

}  // namespace baton::kernels
