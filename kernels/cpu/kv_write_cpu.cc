#include <cstring>

#include "absl/strings/str_cat.h"
#include "baton/kernels/kv_write.h"
#include "kernels/common/dtype.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/parallel.h"

namespace baton::kernels {
namespace {

// out[i] = bf16(in[i]), to nearest even: the same rounding as the matmuls' activations.
void RoundToBf16(const float* in, uint16_t* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = F32ToBf16(in[i]);
}

}  // namespace

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
  const int head_dim = cache.head_dim;
  const bool bf16 = cache.dtype == DType::kBF16;
  internal::ParallelChunks(pool, p.num_tokens, 2 * row_elems, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t slot_idx = p.slot_mapping[t];
      if (slot_idx < 0) continue;
      for (int h = 0; h < cache.num_kv_heads; ++h) {
        const int64_t dst = KvOffset(cache, slot_idx, h);
        const int64_t src = t * p.kv_stride + int64_t{h} * head_dim;
        if (bf16) {
          RoundToBf16(p.k + src, KvData<uint16_t>(cache.k) + dst, head_dim);
          RoundToBf16(p.v + src, KvData<uint16_t>(cache.v) + dst, head_dim);
        } else {
          std::memcpy(KvData<float>(cache.k) + dst, p.k + src, head_dim * sizeof(float));
          std::memcpy(KvData<float>(cache.v) + dst, p.v + src, head_dim * sizeof(float));
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace baton::kernels
