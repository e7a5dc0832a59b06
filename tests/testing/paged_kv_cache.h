// A paged KV cache for kernel tests: random logical K/V contents per sequence, scattered into
// physical blocks in a shuffled order, with every slot that holds no token set to NaN (so a kernel
// that reads one produces NaN). The logical contents depend only on `content_seed`, the placement
// only on `placement_seed`: two caches that differ in placement_seed hold the same sequences.
//
// Layout: the pool has num_blocks blocks of block_stride = 2 * block_elems + 8 elements, as if it
// held two layers plus padding; the view points at "layer 1" (offset block_elems + 8). Block tables
// are [num_seqs, max_blocks_per_seq]; unused entries point at a poison block (all NaN) that no
// sequence owns.
//
// A bf16 cache (dtype kBF16) holds the same sequences rounded to bf16; dense_k/dense_v are then the
// rounded values, so they are exactly what the cache holds. Its pools keep the element count (as
// f32 vectors, twice the bytes needed), with the bf16 elements packed from the start.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "baton/kernels/paged_attention.h"
#include "baton/kernels/paged_kv.h"
#include "kernels/common/dtype.h"
#include "kernels/reference/random_tensor.h"

namespace baton::testing {

class TestPagedKvCache {
 public:
  TestPagedKvCache(std::vector<int> context_lens, int block_size, int num_kv_heads, int head_dim,
                   uint64_t content_seed, uint64_t placement_seed, int extra_blocks = 3,
                   DType dtype = DType::kF32)
      : context_lens_(std::move(context_lens)),
        block_size_(block_size),
        num_kv_heads_(num_kv_heads),
        head_dim_(head_dim),
        dtype_(dtype) {
    const int num_seqs = static_cast<int>(context_lens_.size());
    const int64_t row_elems = int64_t{num_kv_heads} * head_dim;
    max_blocks_per_seq_ = 1;
    int num_blocks_used = 0;
    for (int len : context_lens_) {
      const int blocks = (len + block_size - 1) / block_size;
      max_blocks_per_seq_ = std::max(max_blocks_per_seq_, blocks + 1);  // one spare column
      num_blocks_used += blocks;
    }
    num_blocks_ = num_blocks_used + extra_blocks + 1;  // + the poison block
    const int64_t block_elems = int64_t{block_size} * row_elems;
    block_stride_ = 2 * block_elems + 8;
    layer_offset_ = block_elems + 8;
    k_pool_.assign(num_blocks_ * block_stride_, NAN);
    v_pool_.assign(num_blocks_ * block_stride_, NAN);
    if (dtype_ == DType::kBF16) {  // NaN as bf16 too, over the packed elements
      std::fill_n(reinterpret_cast<uint16_t*>(k_pool_.data()), k_pool_.size(), F32ToBf16(NAN));
      std::fill_n(reinterpret_cast<uint16_t*>(v_pool_.data()), v_pool_.size(), F32ToBf16(NAN));
    }

    // Physical ids: a shuffled permutation; the last id of the permutation is the poison block.
    std::vector<int32_t> ids(num_blocks_);
    std::iota(ids.begin(), ids.end(), 0);
    std::mt19937_64 placement(placement_seed);
    std::shuffle(ids.begin(), ids.end(), placement);
    const int32_t poison = ids.back();
    block_tables_.assign(int64_t{num_seqs} * max_blocks_per_seq_, poison);

    size_t next_id = 0;
    kernels::reference::TestRng content(content_seed);
    dense_k_.resize(num_seqs);
    dense_v_.resize(num_seqs);
    for (int s = 0; s < num_seqs; ++s) {
      const int len = context_lens_[s];
      for (int b = 0; b * block_size < len; ++b) {
        block_tables_[int64_t{s} * max_blocks_per_seq_ + b] = ids[next_id++];
      }
      dense_k_[s].resize(len * row_elems);
      dense_v_[s].resize(len * row_elems);
      for (float& x : dense_k_[s]) x = Representable(content.Uniform());
      for (float& x : dense_v_[s]) x = Representable(content.Uniform());
      const kernels::PagedKvView v = view();
      for (int j = 0; j < len; ++j) {
        const int64_t slot_idx = SlotIndex(s, j);
        for (int h = 0; h < num_kv_heads; ++h) {
          const int64_t dst = kernels::KvOffset(v, slot_idx, h);
          for (int d = 0; d < head_dim; ++d) {
            Store(v.k, dst + d, dense_k_[s][j * row_elems + h * head_dim + d]);
            Store(v.v, dst + d, dense_v_[s][j * row_elems + h * head_dim + d]);
          }
        }
      }
    }
  }

  kernels::PagedKvView view() {
    const int64_t offset_bytes = layer_offset_ * static_cast<int64_t>(DTypeBytes(dtype_));
    return {.k = reinterpret_cast<std::byte*>(k_pool_.data()) + offset_bytes,
            .v = reinterpret_cast<std::byte*>(v_pool_.data()) + offset_bytes,
            .block_stride = block_stride_,
            .block_size = block_size_,
            .num_kv_heads = num_kv_heads_,
            .head_dim = head_dim_,
            .num_blocks = num_blocks_,
            .dtype = dtype_};
  }
  // block_id * block_size + slot of token j of sequence s.
  int64_t SlotIndex(int s, int j) const {
    return int64_t{block_tables_[int64_t{s} * max_blocks_per_seq_ + j / block_size_]} *
               block_size_ +
           j % block_size_;
  }
  int num_seqs() const { return static_cast<int>(context_lens_.size()); }
  const std::vector<int32_t>& block_tables() const { return block_tables_; }  // [num_seqs, max]
  const std::vector<int>& context_lens() const { return context_lens_; }

  // Decode attention of q [num_seqs, num_heads * head_dim] (host) over this cache, with the
  // usual 1/sqrt(head_dim) scale; `out` is the caller's to set.
  kernels::PagedAttentionParams DecodeParams(const float* q, int num_heads) {
    return kernels::PagedAttentionParams{
        .out = nullptr, .q = q, .cache = view(), .block_tables = block_tables_.data(),
        .context_lens = context_lens_.data(), .num_seqs = num_seqs(), .num_heads = num_heads,
        .max_blocks_per_seq = max_blocks_per_seq_, .q_stride = num_heads * head_dim_,
        .scale = 1.0f / std::sqrt(static_cast<float>(head_dim_))};
  }
  int max_blocks_per_seq() const { return max_blocks_per_seq_; }
  // The logical K/V of sequence s: [len, num_kv_heads * head_dim].
  const std::vector<float>& dense_k(int s) const { return dense_k_[s]; }
  const std::vector<float>& dense_v(int s) const { return dense_v_[s]; }
  std::vector<float>& k_pool() { return k_pool_; }  // [num_blocks, block_stride] (f32 caches)
  std::vector<float>& v_pool() { return v_pool_; }
  // Element i of a pool, as f32 whatever the dtype.
  float PoolElement(const std::vector<float>& pool, int64_t i) const {
    return dtype_ == DType::kBF16 ? Bf16ToF32(reinterpret_cast<const uint16_t*>(pool.data())[i])
                                  : pool[i];
  }

 private:
  float Representable(float x) const {
    return dtype_ == DType::kBF16 ? Bf16ToF32(F32ToBf16(x)) : x;
  }
  void Store(void* data, int64_t i, float x) const {
    if (dtype_ == DType::kBF16) {
      static_cast<uint16_t*>(data)[i] = F32ToBf16(x);
    } else {
      static_cast<float*>(data)[i] = x;
    }
  }

  std::vector<int> context_lens_;
  int block_size_;
  int num_kv_heads_;
  int head_dim_;
  DType dtype_;
  int max_blocks_per_seq_ = 0;
  int num_blocks_ = 0;
  int64_t block_stride_ = 0;
  int64_t layer_offset_ = 0;
  std::vector<float> k_pool_;
  std::vector<float> v_pool_;
  std::vector<int32_t> block_tables_;
  std::vector<std::vector<float>> dense_k_;
  std::vector<std::vector<float>> dense_v_;
};

}  // namespace baton::testing
