// CUDA KV write into the paged cache (see baton/kernels/kv_write.h). Device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/kv_write.h"

namespace baton::kernels {

// Every valid KvWriteParams is supported.
inline bool KvWriteSupported(const KvWriteParams& params) { return Validate(params).ok(); }

// Validates, then enqueues on `stream`. slot_mapping is not range-checked on the device.
absl::Status KvWrite(const KvWriteParams& params, cudaStream_t stream);

}  // namespace baton::kernels
