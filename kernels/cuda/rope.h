// CUDA RoPE (see baton/kernels/rope.h). Device pointers; inv_freq comes from RopeInvFreq() copied
// to the device.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/rope.h"

namespace baton::kernels {

// Every valid RopeParams is supported.
inline bool RopeSupported(const RopeParams& params) { return Validate(params).ok(); }

// Validates, then enqueues on `stream`. Positions are not checked on the device.
absl::Status Rope(const RopeParams& params, cudaStream_t stream);

}  // namespace baton::kernels
