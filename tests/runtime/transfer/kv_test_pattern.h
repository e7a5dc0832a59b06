// Test helpers for KV transfer: a byte pattern that differs per (pool seed, block, layer, slot,
// head, dim), checks against it, and random block lists with contiguous runs and scattered ids.
//
// Whole-block patterns are raw 32-bit words over the block's bytes, whatever the pool's dtype (a
// transport moves bytes; a bf16 block is simply half as many of them). Tests that place values per
// element (one (layer, head, token, dim) at a time) go through KvElementBits, StoreKvElement and
// LoadKvElement, which give each dtype its own element width.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/common/dtype.h"
#include "runtime/kv_cache/kv_pool.h"

namespace baton::runtime::transfer_testing {

// A 32-bit word per (seed, block, word index): a splitmix64 finalizer, so neighbouring blocks,
// layers, slots, heads and dims all differ.
inline uint32_t PatternWord(uint32_t seed, BlockId block, uint64_t word_idx) {
  uint64_t x = (uint64_t{seed} << 40) ^ (uint64_t(uint32_t(block)) << 28) ^ word_idx;
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return static_cast<uint32_t>(x ^ (x >> 31));
}

// The element a pattern word becomes in a pool of `dtype`, as its bits: the word itself for f32;
// for bf16, what a prefill writing the f32 with those bits would store (F32ToBf16).
inline uint32_t KvElementBits(uint32_t word, DType dtype) {
  return dtype == DType::kBF16 ? F32ToBf16(std::bit_cast<float>(word)) : word;
}

// The element at `p` of a pool of `dtype` (DTypeBytes(dtype) bytes), as bits.
inline uint32_t LoadKvElement(const std::byte* p, DType dtype) {
  if (dtype == DType::kBF16) {
    uint16_t bits;
    std::memcpy(&bits, p, sizeof(bits));
    return bits;
  }
  uint32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return bits;
}

// Stores `bits` (from KvElementBits) as the element at `p` of a pool of `dtype`.
inline void StoreKvElement(std::byte* p, DType dtype, uint32_t bits) {
  if (dtype == DType::kBF16) {
    const auto half = static_cast<uint16_t>(bits);
    std::memcpy(p, &half, sizeof(half));
    return;
  }
  std::memcpy(p, &bits, sizeof(bits));
}

// Writes the pattern of (seed, pattern_block) into `block` of `pool`.
inline void FillBlock(const KvPool& pool, BlockId block, uint32_t seed, BlockId pattern_block) {
  auto* words = reinterpret_cast<uint32_t*>(pool.BlockData(block));
  // Whole words for bf16 too: a block holds K and V, an even number of elements.
  const uint64_t num_words = pool.BlockBytes() / sizeof(uint32_t);
  for (uint64_t i = 0; i < num_words; ++i) words[i] = PatternWord(seed, pattern_block, i);
}

// Every block b of the pool gets the pattern of (seed, b).
inline void FillPool(const KvPool& pool, uint32_t seed) {
  for (BlockId b = 0; b < pool.num_blocks(); ++b) FillBlock(pool, b, seed, b);
}

// Whether `block` of `data` (a block of block_bytes) holds the pattern of (seed, pattern_block);
// names the first differing word (its layer follows from the offset) on failure.
inline ::testing::AssertionResult HoldsPattern(const std::byte* data, size_t block_bytes,
                                               uint32_t seed, BlockId pattern_block) {
  const auto* words = reinterpret_cast<const uint32_t*>(data);
  for (uint64_t i = 0; i < block_bytes / sizeof(uint32_t); ++i) {
    if (words[i] != PatternWord(seed, pattern_block, i)) {
      return ::testing::AssertionFailure()
             << "word " << i << " (byte " << i * 4 << " of " << block_bytes << ") is " << words[i]
             << ", pattern of seed " << seed << " block " << pattern_block << " says "
             << PatternWord(seed, pattern_block, i);
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult BlockHoldsPattern(const KvPool& pool, BlockId block,
                                                    uint32_t seed, BlockId pattern_block) {
  ::testing::AssertionResult result =
      HoldsPattern(pool.BlockData(block), pool.BlockBytes(), seed, pattern_block);
  if (!result) result << " (destination block " << block << ")";
  return result;
}

// After a pull of src[i] (pattern `src_seed`) into dst[i] of `dst_pool` (first filled with pattern
// `dst_seed`): every pulled block equals its source, every other block is untouched.
inline ::testing::AssertionResult PulledExactly(const KvPool& dst_pool, uint32_t dst_seed,
                                                const std::vector<BlockId>& src,
                                                const std::vector<BlockId>& dst,
                                                uint32_t src_seed) {
  std::vector<BlockId> pulled_from(dst_pool.num_blocks(), -1);
  for (size_t i = 0; i < dst.size(); ++i) pulled_from[dst[i]] = src[i];
  for (BlockId b = 0; b < dst_pool.num_blocks(); ++b) {
    const bool pulled = pulled_from[b] >= 0;
    ::testing::AssertionResult result =
        pulled ? BlockHoldsPattern(dst_pool, b, src_seed, pulled_from[b])
               : BlockHoldsPattern(dst_pool, b, dst_seed, b);
    if (!result) return result << (pulled ? " which should hold a pulled block" : " (untouched)");
  }
  return ::testing::AssertionSuccess();
}

enum class BlockListKind { kContiguous, kScattered, kMixed };

// `count` distinct ids in [0, num_blocks): one run at a random start (kContiguous), a random subset
// in random order (kScattered), or a few contiguous runs of random lengths in random places
// (kMixed).
inline std::vector<BlockId> RandomBlockList(std::mt19937& rng, int num_blocks, int count,
                                            BlockListKind kind) {
  std::vector<BlockId> all(num_blocks);
  std::iota(all.begin(), all.end(), 0);
  if (kind == BlockListKind::kContiguous) {
    const BlockId start = std::uniform_int_distribution<int>(0, num_blocks - count)(rng);
    return std::vector<BlockId>(all.begin() + start, all.begin() + start + count);
  }
  if (kind == BlockListKind::kScattered) {
    std::shuffle(all.begin(), all.end(), rng);
    return std::vector<BlockId>(all.begin(), all.begin() + count);
  }
  // kMixed: cut [0, num_blocks) into runs of 1..6, shuffle the runs, take runs until count is
  // reached.
  std::vector<std::vector<BlockId>> runs;
  for (int start = 0; start < num_blocks;) {
    const int len = std::min(num_blocks - start, std::uniform_int_distribution<int>(1, 6)(rng));
    runs.emplace_back(all.begin() + start, all.begin() + start + len);
    start += len;
  }
  std::shuffle(runs.begin(), runs.end(), rng);
  std::vector<BlockId> result;
  for (const auto& run : runs) {
    for (BlockId b : run) {
      if (static_cast<int>(result.size()) == count) return result;
      result.push_back(b);
    }
  }
  return result;
}

}  // namespace baton::runtime::transfer_testing
