// CUDA embedding lookup (see baton/kernels/embedding.h). Device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/embedding.h"

namespace baton::kernels {

// Every valid EmbeddingParams is supported.
inline bool EmbeddingSupported(const EmbeddingParams& params) { return Validate(params).ok(); }

// Validates, then enqueues on `stream`. Ids cannot be checked on the host (they live on the
// device): a row whose id is out of range comes out as NaN.
absl::Status Embedding(const EmbeddingParams& params, cudaStream_t stream);

}  // namespace baton::kernels
