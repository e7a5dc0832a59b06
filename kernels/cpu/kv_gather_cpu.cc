#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "baton/kernels/kv_gather.h"
#include "kernels/common/dtype.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/parallel.h"

namespace baton::kernels {

namespace {

// The checks KvGatherCpu makes on the host-side index arrays before it copies anything.
absl::Status CheckIndices(const KvGatherParams& p) {
  const PagedKvView& cache = p.cache;
  if (p.num_seqs > 0 && p.out_start[0] != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KvGather: out_start[0] = ", p.out_start[0], " must be 0"));
  }
  const int64_t max_len = int64_t{p.max_blocks_per_seq} * cache.block_size;
  for (int s = 0; s < p.num_seqs; ++s) {
    const int64_t len = int64_t{p.out_start[s + 1]} - p.out_start[s];
    if (len < 0 || len > max_len) {
      return absl::InvalidArgumentError(absl::StrCat("KvGather: sequence ", s, " has length ", len,
                                                     ", outside [0, ", max_len, "]"));
    }
    if (cache.num_blocks == 0) continue;
    const int32_t* table = p.block_tables + int64_t{s} * p.max_blocks_per_seq;
    const int64_t num_blocks_read = (len + cache.block_size - 1) / cache.block_size;
    for (int64_t b = 0; b < num_blocks_read; ++b) {
      if (table[b] < 0 || table[b] >= cache.num_blocks) {
        return absl::InvalidArgumentError(absl::StrCat("KvGather: sequence ", s, " reads block ",
                                                       table[b], " of a cache of ",
                                                       cache.num_blocks, " blocks"));
      }
    }
  }
  return absl::OkStatus();
}

// bf16 is the high half of an f32: widening is exact (a shift the compiler vectorizes).
void WidenBf16(const uint16_t* in, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = Bf16ToF32(in[i]);
}

}  // namespace

absl::Status KvGatherCpu(const KvGatherParams& p, ThreadPool* pool) {
  RETURN_IF_ERROR(Validate(p));
  if (p.num_seqs == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckIndices(p));
  const PagedKvView& cache = p.cache;
  const int64_t num_rows = p.out_start[p.num_seqs];
  const int64_t row_elems = int64_t{cache.num_kv_heads} * cache.head_dim;
  const int head_dim = cache.head_dim;
  const bool bf16 = cache.dtype == DType::kBF16;
  // Rows are split over the pool; a chunk finds the sequence of its first row, then walks on.
  internal::ParallelChunks(pool, num_rows, 2 * row_elems, [&](int64_t begin, int64_t end, int) {
    int s = static_cast<int>(std::upper_bound(p.out_start, p.out_start + p.num_seqs + 1, begin) -
                             p.out_start) - 1;
    for (int64_t row = begin; row < end; ++row) {
      while (row >= p.out_start[s + 1]) ++s;  // skips empty sequences too
      const int64_t pos = row - p.out_start[s];
      const int32_t* table = p.block_tables + int64_t{s} * p.max_blocks_per_seq;
      const int64_t slot_idx = int64_t{table[pos / cache.block_size]} * cache.block_size +
                               pos % cache.block_size;
      float* k_row = p.k_out + row * p.out_stride;
      float* v_row = p.v_out + row * p.out_stride;
      for (int h = 0; h < cache.num_kv_heads; ++h) {
        const int64_t src = KvOffset(cache, slot_idx, h);
        float* k_out = k_row + int64_t{h} * head_dim;
        float* v_out = v_row + int64_t{h} * head_dim;
        if (bf16) {
          WidenBf16(KvData<const uint16_t>(cache.k) + src, k_out, head_dim);
          WidenBf16(KvData<const uint16_t>(cache.v) + src, v_out, head_dim);
        } else {
          std::memcpy(k_out, KvData<const float>(cache.k) + src, head_dim * sizeof(float));
          std::memcpy(v_out, KvData<const float>(cache.v) + src, head_dim * sizeof(float));
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace baton::kernels
