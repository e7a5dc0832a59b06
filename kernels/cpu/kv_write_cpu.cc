#include <cstring>

#include "absl/strings/str_cat.h"
#include "baton/kernels/paged_kv.h"
#include "kernels/cpu/parallel.h"
#include "runtime/common/status_macros.h"

namespace baton::kernels {

absl::Status KvWriteCpu(const KvWriteParams& p, ThreadPool* pool) {
  RETURN_IF_ERROR(Validate(p));
  const PagedKvView& cache = p.cache;
  if (cache.num_blocks > 0) {
    const int64_t num_slots = int64_t{cache.num_blocks} * cache.block_size;
    for (int t = 0; t < p.num_tokens; ++t) {
      if (p.slot_mapping[t] >= num_slots) {
        return absl::InvalidArgumentError(absl::StrCat("KvWrite: slot ", p.slot_mapping[t],
                                                       " of token ", t, " is beyond the ",
                                                       num_slots, " slots of the cache"));
      }
    }
  }
  // A slot's kv heads are adjacent, so each token is one contiguous row in K and one in V.
  const int64_t row_elems = int64_t{cache.num_kv_heads} * cache.head_dim;
  internal::ParallelChunks(pool, p.num_tokens, 2 * row_elems, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t slot_idx = p.slot_mapping[t];
      if (slot_idx < 0) continue;
      const int64_t dst = KvOffset(cache, slot_idx, 0);
      std::memcpy(cache.k + dst, p.k + t * p.kv_stride, row_elems * sizeof(float));
      std::memcpy(cache.v + dst, p.v + t * p.kv_stride, row_elems * sizeof(float));
    }
  });
  return absl::OkStatus();
}

}  // namespace baton::kernels
