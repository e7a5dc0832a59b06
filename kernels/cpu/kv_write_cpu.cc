#include <cstring>

#include "absl/strings/str_cat.h"
#include "baton/kernels/kv_write.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/parallel.h"

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
  // A token's row of K (and of V) scatters into one run of head_dim per kv head.
  const int64_t row_elems = int64_t{cache.num_kv_heads} * cache.head_dim;
  const size_t head_bytes = cache.head_dim * sizeof(float);
  internal::ParallelChunks(pool, p.num_tokens, 2 * row_elems, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t slot_idx = p.slot_mapping[t];
      if (slot_idx < 0) continue;
      for (int h = 0; h < cache.num_kv_heads; ++h) {
        const int64_t dst = KvOffset(cache, slot_idx, h);
        const int64_t src = t * p.kv_stride + int64_t{h} * cache.head_dim;
        std::memcpy(cache.k + dst, p.k + src, head_bytes);
        std::memcpy(cache.v + dst, p.v + src, head_bytes);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace baton::kernels
