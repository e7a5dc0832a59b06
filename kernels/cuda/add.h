// CUDA residual add (see baton/kernels/add.h). Device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/add.h"

namespace baton::kernels {

// Every valid AddParams with n <= (2^31 - 1) * 256 (grid x) is supported.
bool AddSupported(const AddParams& params);

// Validates (InvalidArgument also when unsupported), then enqueues on `stream`.
absl::Status Add(const AddParams& params, cudaStream_t stream);

}  // namespace baton::kernels
