// CUDA SwiGLU (see baton/kernels/swiglu.h). Device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/swiglu.h"

namespace baton::kernels {

// Every valid SwigluParams with intermediate <= 65535 * 256 (the column blocks on grid y) is
// supported, any number of tokens.
bool SwigluSupported(const SwigluParams& params);

// Validates (InvalidArgument also when unsupported), then enqueues on `stream`.
absl::Status Swiglu(const SwigluParams& params, cudaStream_t stream);

}  // namespace baton::kernels
