// Token embedding lookup: out[t, :] = table[token_ids[t], :], converted to f32.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/common/dtype.h"
#include "kernels/common/thread_pool.h"

namespace baton::kernels {

struct EmbeddingParams {
  float* out;                // [num_tokens, hidden]
  const void* table;         // [vocab_size, hidden] in table_dtype
  DType table_dtype;         // kF32, kF16 or kBF16
  const int32_t* token_ids;  // [num_tokens]
  int num_tokens;
  int hidden;
  int vocab_size;
};

// Checks pointers (null allowed only when num_tokens == 0) and sizes. Does not read token_ids.
absl::Status Validate(const EmbeddingParams& params);

// Validates, then returns InvalidArgument naming the first token id outside [0, vocab_size) (before
// writing anything), then gathers. `pool` may be nullptr.
absl::Status EmbeddingCpu(const EmbeddingParams& params, ThreadPool* pool);

}  // namespace baton::kernels
