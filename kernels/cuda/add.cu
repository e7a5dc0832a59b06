#include "kernels/cuda/add.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/add.cuh"

namespace baton::kernels {

bool AddSupported(const AddParams& params) {
  return Validate(params).ok() && cuda_detail::AddNumBlocks(params.n) <= cuda_detail::kAddMaxBlocks;
}

absl::Status Add(const AddParams& params, cudaStream_t stream) {
  RETURN_IF_ERROR(Validate(params));
  if (cuda_detail::AddNumBlocks(params.n) > cuda_detail::kAddMaxBlocks) {
    return absl::InvalidArgumentError(absl::StrCat("Add: n ", params.n, " needs more than ",
                                                   cuda_detail::kAddMaxBlocks, " blocks"));
  }
  if (params.n == 0) return absl::OkStatus();
  const simt::LaunchShape s = cuda_detail::AddLaunchShape(params);
  cuda_detail::AddKernel<<<dim3(s.grid_x), dim3(s.block_x), 0, stream>>>(params);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::kernels
