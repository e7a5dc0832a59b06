#include "kernels/cuda/swiglu.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/swiglu.cuh"

namespace baton::kernels {

namespace {

// The column blocks go on grid y (at most 65535), the tokens on x (2^31 - 1).
constexpr int64_t kMaxColumnBlocks = 65535;

bool FitsTheGrid(const SwigluParams& params) {
  return (int64_t{params.intermediate} + cuda_detail::kSwigluThreads - 1) /
             cuda_detail::kSwigluThreads <=
         kMaxColumnBlocks;
}

}  // namespace

bool SwigluSupported(const SwigluParams& params) {
  return Validate(params).ok() && FitsTheGrid(params);
}

absl::Status Swiglu(const SwigluParams& params, cudaStream_t stream) {
  RETURN_IF_ERROR(Validate(params));
  if (!FitsTheGrid(params)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Swiglu: intermediate ", params.intermediate, " > ",
                     kMaxColumnBlocks * cuda_detail::kSwigluThreads));
  }
  if (params.num_tokens == 0) return absl::OkStatus();
  const simt::LaunchShape s = cuda_detail::SwigluLaunchShape(params);
  cuda_detail::SwigluKernel<<<dim3(s.grid_x, s.grid_y), dim3(s.block_x), 0, stream>>>(params);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::kernels
