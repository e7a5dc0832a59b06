// CUDA KV gather out of the paged cache (see baton/kernels/kv_gather.h). Device pointers,
// including block_tables and out_start.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/kv_gather.h"

namespace baton::kernels {

// True iff Validate() passes, num_seqs fits the grid (<= 65535) and max_len >= 1 when
// num_seqs > 0.
bool KvGatherSupported(const KvGatherParams& params);

// Validates (InvalidArgument also when unsupported), then enqueues on `stream`. The indices are not
// checked on the device: every len must be <= max_len and every block id read in range.
absl::Status KvGather(const KvGatherParams& params, cudaStream_t stream);

}  // namespace baton::kernels
