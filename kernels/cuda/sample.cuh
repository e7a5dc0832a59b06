// Sampling kernel body: one block per sequence, the arithmetic of sample.h (integer weights, so
// every sum is exact and the token equals SampleToken's for the same seed and draw index).
//
// Method, per row:
//   1. argmax: a block max over (key, ~index) packed in 64 bits gives the max logit and its first
//      index at once; a NaN anywhere makes the token -1. Greedy rows stop here.
//   2. top-k, then top-p, without sorting: the kept set is a prefix of the order "higher logit
//      first, lower index first", so it is fixed by its last member (key, index). The key is found
//      by a bitwise radix select: from the top bit down, keep the bit if the tokens with a key at
//      or above the candidate still reach the target (count k, or the top-p weight), each step one
//      block sum (32 in all); the index by a prefix scan over the tokens with that key.
//   3. min-p: the kept set also drops the tokens whose weight is below MinPWeight (a test on each
//      token's own weight, so no select is needed);
//   4. the draw: a block sum of the kept weight, the target from the Philox bits, and a prefix
//      scan over the kept tokens in index order for the first whose running sum exceeds it.
// Sums over the whole row read it strided (coalesced; integer sums do not care about order); the
// prefix scans need index order, so they give each thread a contiguous chunk instead. Weights are
// recomputed from the logits on every pass rather than stored: a row of 150k tokens would not fit
// in shared memory, and a pass costs a handful of FMAs per token.
#pragma once

#include "baton/kernels/philox.h"
#include "baton/kernels/sample.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kSampleMaxThreads = 1024;
inline constexpr int kSampleTokensPerThread = 16;
inline constexpr int kSampleMaxWarps = kSampleMaxThreads / simt::kWarpSize;

// Enough threads for ~16 tokens each, in whole warps, at most 1024: a 32k-150k vocabulary gets the
// whole block, a small one (tests) a few warps.
inline simt::LaunchShape SampleLaunchShape(const SampleParams& p) {
  const int64_t wanted =
      (int64_t{p.vocab_size} + kSampleTokensPerThread - 1) / kSampleTokensPerThread;
  int64_t threads = (wanted + simt::kWarpSize - 1) / simt::kWarpSize * simt::kWarpSize;
  if (threads < simt::kWarpSize) threads = simt::kWarpSize;
  if (threads > kSampleMaxThreads) threads = kSampleMaxThreads;
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(p.num_seqs);
  shape.block_x = static_cast<unsigned>(threads);
  return shape;
}

template <bool kMax>
BATON_DEVICE uint64_t WarpReduce64(uint64_t value) {
  for (int offset = simt::kWarpSize / 2; offset > 0; offset /= 2) {
    const uint64_t other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = kMax ? (other > value ? other : value) : value + other;
  }
  return value;
}

// Sum (or max) of `value` over the block, returned to every thread; `scratch` holds
// kSampleMaxWarps + 1 values. Every thread must call it.
template <bool kMax>
BATON_DEVICE uint64_t BlockReduce64(uint64_t value, uint64_t* scratch) {
  const int warp = static_cast<int>(threadIdx.x) / simt::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % simt::kWarpSize;
  const int num_warps = static_cast<int>(blockDim.x) / simt::kWarpSize;
  value = WarpReduce64<kMax>(value);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = WarpReduce64<kMax>(lane < num_warps ? scratch[lane] : 0);
    if (lane == 0) scratch[num_warps] = value;
  }
  __syncthreads();
  return scratch[num_warps];
}

BATON_DEVICE uint64_t WarpInclusiveSum64(uint64_t value) {
  const int lane = static_cast<int>(threadIdx.x) % simt::kWarpSize;
  for (int offset = 1; offset < simt::kWarpSize; offset *= 2) {
    const uint64_t other = __shfl_sync(0xffffffffu, value, lane >= offset ? lane - offset : lane);
    if (lane >= offset) value += other;
  }
  return value;
}

// The sum of `value` over the threads before this one (in threadIdx order); `scratch` as
// BlockReduce64's. Every thread must call it.
BATON_DEVICE uint64_t BlockExclusiveSum64(uint64_t value, uint64_t* scratch) {
  const int warp = static_cast<int>(threadIdx.x) / simt::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % simt::kWarpSize;
  const int num_warps = static_cast<int>(blockDim.x) / simt::kWarpSize;
  const uint64_t inclusive = WarpInclusiveSum64(value);
  if (lane == simt::kWarpSize - 1) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    const uint64_t total = lane < num_warps ? scratch[lane] : 0;
    const uint64_t before = WarpInclusiveSum64(total) - total;
    if (lane < num_warps) scratch[lane] = before;
  }
  __syncthreads();
  const uint64_t result = scratch[warp] + inclusive - value;
  __syncthreads();  // the next call rewrites scratch
  return result;
}

// One row's tokens and the kept set so far: the tokens up to (bound_key, bound_idx) in the order
// "higher key first, lower index first" (all of them initially).
struct SampleRow {
  const float* logits;
  int n;
  float max_logit;
  float inv_temperature;
  uint32_t bound_key;   // 0 initially
  int32_t bound_idx;    // n initially
  uint64_t min_weight;  // 0 until min-p applies (after top-k and top-p)

  BATON_DEVICE bool Kept(int i, uint32_t key) const {
    return key > bound_key || (key == bound_key && i <= bound_idx);
  }
  // What a select or a scan counts of token i: its weight, or 1; 0 when not kept.
  BATON_DEVICE uint64_t Measure(int i, uint32_t key, bool by_weight) const {
    if (!Kept(i, key)) return 0;
    if (!by_weight && min_weight == 0) return 1;
    const uint64_t weight = SamplingWeight(logits[i], max_logit, inv_temperature);
    if (weight < min_weight) return 0;
    return by_weight ? weight : 1;
  }
};

// Per-thread sum (strided, coalesced) of Measure over the tokens with key >= min_key.
BATON_DEVICE uint64_t ThreadSumAtOrAbove(const SampleRow& row, bool by_weight, uint32_t min_key) {
  uint64_t sum = 0;
  for (int i = static_cast<int>(threadIdx.x); i < row.n; i += static_cast<int>(blockDim.x)) {
    const uint32_t key = SampleKey(row.logits[i]);
    if (key >= min_key) sum += row.Measure(i, key, by_weight);
  }
  return sum;
}

// The first token, in index order, at which the running sum of Measure (over the tokens with key
// `only_key` when `restrict_key`) exceeds `target`. Requires target < that measure's total.
// `found` is one int32 of shared memory. Every thread must call it; all get the answer.
BATON_DEVICE int32_t FindFirstExceeding(const SampleRow& row, bool by_weight, bool restrict_key,
                                        uint32_t only_key, uint64_t target, uint64_t* scratch,
                                        int32_t* found) {
  const int chunk = (row.n + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
  const int begin = static_cast<int>(threadIdx.x) * chunk < row.n
                        ? static_cast<int>(threadIdx.x) * chunk : row.n;
  const int end = begin + chunk < row.n ? begin + chunk : row.n;
  uint64_t sum = 0;
  for (int i = begin; i < end; ++i) {
    const uint32_t key = SampleKey(row.logits[i]);
    if (!restrict_key || key == only_key) sum += row.Measure(i, key, by_weight);
  }
  if (threadIdx.x == 0) *found = -1;
  uint64_t cum = BlockExclusiveSum64(sum, scratch);
  // The chunks' intervals [cum, cum + sum) tile [0, total): exactly one contains target.
  if (cum <= target && target < cum + sum) {
    for (int i = begin; i < end; ++i) {
      const uint32_t key = SampleKey(row.logits[i]);
      if (!restrict_key || key == only_key) cum += row.Measure(i, key, by_weight);
      if (cum > target) {
        *found = i;
        break;
      }
    }
  }
  __syncthreads();
  const int32_t result = *found;
  __syncthreads();  // the next call rewrites found
  return result;
}

// Narrows row's kept set to its shortest prefix whose Measure reaches target (1 <= target <= the
// kept total): the radix select of the key, then the scan for the index.
BATON_DEVICE void SelectPrefix(SampleRow& row, bool by_weight, uint64_t target, uint64_t* scratch,
                               int32_t* found) {
  uint32_t key = 0;  // the largest key whose tokens at or above it reach target
  for (int bit = 31; bit >= 0; --bit) {
    const uint32_t candidate = key | (uint32_t{1} << bit);
    const uint64_t mass =
        BlockReduce64<false>(ThreadSumAtOrAbove(row, by_weight, candidate), scratch);
    if (mass >= target) key = candidate;
  }
  const uint64_t above =
      key == 0xFFFFFFFFu
          ? 0
          : BlockReduce64<false>(ThreadSumAtOrAbove(row, by_weight, key + 1), scratch);
  // above < target, so the tokens with this key supply the rest: the first index where they do.
  const int32_t idx =
      FindFirstExceeding(row, by_weight, /*restrict_key=*/true, key, target - above - 1, scratch,
                         found);
  row.bound_key = key;
  row.bound_idx = idx;
}

BATON_GLOBAL void SampleKernel(SampleParams p) {
  BATON_SHARED_ARRAY(uint64_t, scratch, kSampleMaxWarps + 1);
  BATON_SHARED_ARRAY(float, float_scratch, kSampleMaxWarps + 1);
  BATON_SHARED_ARRAY(int32_t, found, 1);
  const int64_t seq = blockIdx.x;
  const int n = p.vocab_size;
  const float* logits = p.logits + seq * n;

  uint64_t best = 0;  // (key << 32) | ~index: the max is the max key's first index
  uint64_t has_nan = 0;
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) {
    const float x = logits[i];
    if (x != x) {
      has_nan = 1;
      continue;
    }
    const uint64_t packed =
        (uint64_t{SampleKey(x)} << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(i));
    if (packed > best) best = packed;
  }
  has_nan = BlockReduce64<true>(has_nan, scratch);
  if (has_nan != 0) {
    if (threadIdx.x == 0) {
      p.token_ids[seq] = -1;
      if (p.logprobs != nullptr) p.logprobs[seq] = NAN;
    }
    return;
  }
  best = BlockReduce64<true>(best, scratch);
  const int32_t argmax = static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(best));
  const float max_logit = logits[argmax];

  int32_t token = argmax;
  const float temperature = p.temperature[seq];
  if (temperature > 0.0f && max_logit != -INFINITY) {
    SampleRow row{logits, n, max_logit, 1.0f / temperature, /*bound_key=*/0, /*bound_idx=*/n,
                  /*min_weight=*/0};
    const int32_t top_k = p.top_k[seq];
    const float top_p = p.top_p[seq];
    if (top_k > 0 && top_k < n) {
      SelectPrefix(row, /*by_weight=*/false, static_cast<uint64_t>(top_k), scratch, found);
    }
    if (top_p < 1.0f) {
      const uint64_t total = BlockReduce64<false>(ThreadSumAtOrAbove(row, true, 0), scratch);
      SelectPrefix(row, /*by_weight=*/true, TopPTarget(top_p, total), scratch, found);
    }
    if (p.min_p != nullptr) row.min_weight = MinPWeight(p.min_p[seq]);
    const uint64_t kept_total = BlockReduce64<false>(ThreadSumAtOrAbove(row, true, 0), scratch);
    const uint64_t target = DrawTarget(SamplerBits24(p.seed[seq], p.draw_idx[seq]), kept_total);
    token = FindFirstExceeding(row, /*by_weight=*/true, /*restrict_key=*/false, 0, target, scratch,
                               found);
  }
  if (p.logprobs != nullptr) {
    float sum = 0.0f;
    for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) {
      sum += expf(logits[i] - max_logit);
    }
    sum = BlockSum(sum, float_scratch);
    if (threadIdx.x == 0) p.logprobs[seq] = (logits[token] - max_logit) - logf(sum);
  }
  if (threadIdx.x == 0) p.token_ids[seq] = token;
}

}  // namespace baton::kernels::cuda_detail
