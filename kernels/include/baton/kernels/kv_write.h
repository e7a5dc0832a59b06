// KV write: copies new tokens' K and V rows into their slots of the paged cache (see paged_kv.h).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "baton/kernels/paged_kv.h"
#include "kernels/common/thread_pool.h"

namespace baton::kernels {

struct KvWriteParams {
  PagedKvView cache;
  const float* k;               // [num_tokens, kv_stride], first num_kv_heads*head_dim used
  const float* v;               // [num_tokens, kv_stride], first num_kv_heads*head_dim used
  const int32_t* slot_mapping;  // [num_tokens] = block_id * block_size + slot; < 0 skips the token
  int num_tokens;
  int kv_stride;  // elements between consecutive tokens of k and v, >= num_kv_heads*head_dim
};

// Checks the cache view, pointers (which may be null only when num_tokens == 0) and strides.
// Does not read slot_mapping (it may live on a device).
absl::Status Validate(const KvWriteParams& params);

// Copies token t's K and V heads into slot slot_mapping[t]. Validates first; then, if
// cache.num_blocks > 0, returns InvalidArgument naming the first token whose slot is out of range
// (before writing anything). Tokens with a negative slot are skipped (padding). Two tokens must not
// map to the same slot. `pool` may be nullptr (runs on the calling thread).
absl::Status KvWriteCpu(const KvWriteParams& params, ThreadPool* pool);

}  // namespace baton::kernels
