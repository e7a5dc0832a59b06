#include "kernels/cuda/swiglu.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/swiglu.cuh"

namespace baton::kernels {

namespace {
constexpr int kMaxGridY = 65535;
}  // namespace

bool SwigluSupported(const SwigluParams& params) {
  return Validate(params).ok() && params.num_tokens <= kMaxGridY;
}

absl::Status Swiglu(const SwigluParams& params, cudaStream_t stream) {
  RETURN_IF_ERROR(Validate(params));
  if (params.num_tokens > kMaxGridY) {
    return absl::InvalidArgumentError(
        absl::StrCat("Swiglu: num_tokens ", params.num_tokens, " > ", kMaxGridY));
  }
  if (params.num_tokens == 0) return absl::OkStatus();
  const simt::LaunchShape s = cuda_detail::SwigluLaunchShape(params);
  cuda_detail::SwigluKernel<<<dim3(s.grid_x, s.grid_y), dim3(s.block_x), 0, stream>>>(params);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::kernels
