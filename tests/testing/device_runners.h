// Runs the CUDA kernels on host buffers, for tests: each *OnDevice function copies every buffer the
// params point at (sizes derived from the params) to the GPU, launches the real kernel on a fresh
// stream, waits, copies the outputs back into the host buffers, and frees everything. The dance is
// written once (device_runners.cc: Run); an op adds one function that lists its params' arrays
// (In/Out with an element count) and names its launcher. Built only when BATON_HAS_CUDA
// (baton_testing_cuda); reference these only from `#if BATON_HAS_CUDA` instantiation lists.
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

namespace baton::testing {

// Visible CUDA devices; 0 when there is none or no driver.
int CudaDeviceCount();
inline bool CudaDeviceAvailable() { return CudaDeviceCount() > 0; }

// Paged-cache ops need cache.num_blocks > 0 (to size the pool copy).
absl::Status RmsNormOnDevice(const kernels::RmsNormParams& host_params);
absl::Status EmbeddingOnDevice(const kernels::EmbeddingParams& host_params);
absl::Status RopeOnDevice(const kernels::RopeParams& host_params);
absl::Status KvWriteOnDevice(const kernels::KvWriteParams& host_params);
absl::Status KvGatherOnDevice(const kernels::KvGatherParams& host_params);
absl::Status AddOnDevice(const kernels::AddParams& host_params);
absl::Status SwigluOnDevice(const kernels::SwigluParams& host_params);
absl::Status PagedAttentionDecodeOnDevice(const kernels::PagedAttentionParams& host_params);
absl::Status PrefillAttentionOnDevice(const kernels::PrefillAttentionParams& host_params);
absl::Status AddRmsNormOnDevice(const kernels::AddRmsNormParams& host_params);
// The workspace is a host buffer of PagedAttentionSplitKvWorkspaceBytes(attn, num_splits) bytes.
absl::Status PagedAttentionSplitKvOnDevice(const kernels::PagedAttentionSplitKvParams& host_params);
absl::Status SampleOnDevice(const kernels::SampleParams& host_params);
absl::Status LogitsProcessorsOnDevice(const kernels::LogitsProcessorsParams& host_params);
// The logits rows are 0 .. the largest of `rows`.
absl::Status TokenBitmaskOnDevice(const kernels::TokenBitmaskParams& host_params);
absl::Status MatmulInt8GemvOnDevice(const kernels::MatmulParams& host_params);
absl::Status MatmulInt4GemvOnDevice(const kernels::MatmulParams& host_params);
absl::Status MatmulFp8GemvOnDevice(const kernels::MatmulParams& host_params);

}  // namespace baton::testing
