// The CUDA kernels run by the SIMT emulation on host memory: same Validate() and launch shape as
// the real launchers (kernels/cuda/*.h), same kernel bodies (kernels/cuda/*.cuh). For tests only:
// they are slow (every CUDA thread is a fiber).
#pragma once

#include "absl/status/status.h"
#include "baton/kernels/add.h"
#include "baton/kernels/add_rms_norm.h"
#include "baton/kernels/embedding.h"
#include "baton/kernels/paged_attention.h"
#include "baton/kernels/paged_attention_split_kv.h"
#include "baton/kernels/kv_gather.h"
#include "baton/kernels/kv_write.h"
#include "baton/kernels/logits_processors.h"
#include "baton/kernels/matmul.h"
#include "baton/kernels/prefill_attention.h"
#include "baton/kernels/rms_norm.h"
#include "baton/kernels/rope.h"
#include "baton/kernels/sample.h"
#include "baton/kernels/swiglu.h"
#include "baton/kernels/token_bitmask.h"

namespace baton::kernels {

// Each validates like its CUDA launcher (InvalidArgument), then runs the kernel over host
// pointers. Internal if the emulation detects a barrier deadlock.
absl::Status RmsNormEmulated(const RmsNormParams& params);
absl::Status EmbeddingEmulated(const EmbeddingParams& params);
absl::Status RopeEmulated(const RopeParams& params);
absl::Status KvWriteEmulated(const KvWriteParams& params);
absl::Status KvGatherEmulated(const KvGatherParams& params);
absl::Status SwigluEmulated(const SwigluParams& params);
absl::Status PagedAttentionDecodeEmulated(const PagedAttentionParams& params);
absl::Status PrefillAttentionEmulated(const PrefillAttentionParams& params);
absl::Status AddEmulated(const AddParams& params);
absl::Status AddRmsNormEmulated(const AddRmsNormParams& params);
absl::Status PagedAttentionSplitKvEmulated(const PagedAttentionSplitKvParams& params);
absl::Status SampleEmulated(const SampleParams& params);
absl::Status LogitsProcessorsEmulated(const LogitsProcessorsParams& params);
absl::Status TokenBitmaskEmulated(const TokenBitmaskParams& params);
absl::Status MatmulInt8GemvEmulated(const MatmulParams& params);
absl::Status MatmulInt4GemvEmulated(const MatmulParams& params);
absl::Status MatmulFp8GemvEmulated(const MatmulParams& params);

}  // namespace baton::kernels
