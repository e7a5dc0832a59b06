// Attention kernels on the CPU. Decode: GB/s of K/V read (memory-bound). Prefill: GFLOP/s of the
// causal QK^T and PV products (compute-bound).
//   PagedDecode args: {batch, context_len, threads, huge pages, shape, bf16 cache}; Prefill args:
//   {seq_len, threads}. Decode also counts cached tokens per second ("tokens/s": batch x context),
//   the figure an f32 and a bf16 cache compare on (GB/s counts the bytes each actually reads).
//   Shapes (block_size 16): 0 = Llama-3-8B-like heads (32 query heads, 8 kv heads, head_dim 128),
//   1 = our `tiny` (6, 6, 48), 2 = our `small` (12, 4, 64). Prefill uses shape 0.
#include <sys/mman.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "baton/kernels/paged_attention.h"
#include "baton/kernels/prefill_attention.h"
#include "benchmark/benchmark.h"
#include "kernels/common/dtype.h"
#include "kernels/reference/random_tensor.h"

namespace baton::kernels {
namespace {

constexpr int kHeads = 32;
constexpr int kKvHeads = 8;
constexpr int kHeadDim = 128;
constexpr int kBlockSize = 16;

struct HeadShape {
  int heads, kv_heads, head_dim;
};
constexpr HeadShape kShapes[] = {{kHeads, kKvHeads, kHeadDim}, {6, 6, 48}, {12, 4, 64}};

// A KV pool as the runtime would allocate it: 2 MiB aligned, with transparent huge pages requested
// when state.range(3) is 1 (the pool is read at a 4 KiB stride per head, so 4 KiB pages cost a TLB
// miss per row).
struct Pool {
  void* data = nullptr;
  Pool(size_t elems, DType dtype, bool huge_pages, uint64_t seed) {
    const size_t used = elems * DTypeBytes(dtype);
    const size_t bytes = (used + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    data = std::aligned_alloc(2u << 20, bytes);
    if (huge_pages) madvise(data, bytes, MADV_HUGEPAGE);
    const std::vector<float> values = kernels::reference::RandomVector(elems, seed);
    if (dtype == DType::kBF16) {
      for (size_t i = 0; i < elems; ++i) static_cast<uint16_t*>(data)[i] = F32ToBf16(values[i]);
    } else {
      std::memcpy(data, values.data(), used);
    }
  }
  ~Pool() { std::free(data); }
};

void BM_PagedDecode(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  const int len = static_cast<int>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  const bool huge_pages = state.range(3) == 1;
  const HeadShape shape = kShapes[state.range(4)];
  const DType dtype = state.range(5) == 1 ? DType::kBF16 : DType::kF32;
  const int blocks_per_seq = (len + kBlockSize - 1) / kBlockSize;
  const int num_blocks = batch * blocks_per_seq;
  const int64_t block_stride = int64_t{kBlockSize} * shape.kv_heads * shape.head_dim;
  Pool k(num_blocks * block_stride, dtype, huge_pages, 1);
  Pool v(num_blocks * block_stride, dtype, huge_pages, 2);
  std::vector<int32_t> tables(size_t(batch) * blocks_per_seq);
  std::iota(tables.begin(), tables.end(), 0);
  std::vector<int32_t> lens(batch, len);
  const std::vector<float> q = kernels::reference::RandomVector(size_t(batch) * shape.heads * shape.head_dim, 3);
  std::vector<float> out(q.size());
  auto pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  const PagedAttentionParams params{
      .out = out.data(),
      .q = q.data(),
      .cache = {.k = k.data,
                .v = v.data,
                .block_stride = block_stride,
                .block_size = kBlockSize,
                .num_kv_heads = shape.kv_heads,
                .head_dim = shape.head_dim,
                .num_blocks = num_blocks,
                .dtype = dtype},
      .block_tables = tables.data(),
      .context_lens = lens.data(),
      .num_seqs = batch,
      .num_heads = shape.heads,
      .max_blocks_per_seq = blocks_per_seq,
      .q_stride = shape.heads * shape.head_dim,
      .scale = 1.0f / std::sqrt(float(shape.head_dim))};
  for (auto _ : state) {
    if (!PagedAttentionDecodeCpu(params, pool.get()).ok()) state.SkipWithError("failed");
    benchmark::DoNotOptimize(out.data());
  }
  const double kv_bytes =
      2.0 * DTypeBytes(dtype) * batch * len * shape.kv_heads * shape.head_dim;
  state.counters["GB/s"] =
      benchmark::Counter(kv_bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens/s"] =
      benchmark::Counter(double(batch) * len, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PagedDecode)
    ->Args({1, 1024, 1, 0, 0, 0})->Args({1, 1024, 2, 0, 0, 0})->Args({16, 1024, 1, 0, 0, 0})
    ->Args({16, 1024, 1, 1, 0, 0})->Args({16, 1024, 2, 1, 0, 0})->Args({64, 256, 2, 1, 0, 0})
    ->Args({8, 2000, 1, 1, 1, 0})->Args({8, 2000, 2, 1, 1, 0})->Args({8, 2000, 1, 1, 2, 0})
    // `small` with 131 MB of K/V (f32), four times a 32 MiB L3: the serving case, read from DRAM;
    // then the same with a bf16 cache (66 MB).
    ->Args({32, 2000, 1, 1, 2, 0})->Args({32, 2000, 2, 1, 2, 0})
    ->Args({32, 2000, 1, 1, 2, 1})->Args({32, 2000, 2, 1, 2, 1})
    ->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_Prefill(benchmark::State& state) {
  const int len = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const std::vector<float> q = kernels::reference::RandomVector(size_t(len) * kHeads * kHeadDim, 1);
  const std::vector<float> k = kernels::reference::RandomVector(size_t(len) * kKvHeads * kHeadDim, 2);
  const std::vector<float> v = kernels::reference::RandomVector(size_t(len) * kKvHeads * kHeadDim, 3);
  std::vector<float> out(q.size());
  const std::vector<int32_t> starts = {0, len};
  auto pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  const PrefillAttentionParams params{.out = out.data(),
                                      .q = q.data(),
                                      .k = k.data(),
                                      .v = v.data(),
                                      .q_start = starts.data(),
                                      .kv_start = starts.data(),
                                      .num_seqs = 1,
                                      .num_heads = kHeads,
                                      .num_kv_heads = kKvHeads,
                                      .head_dim = kHeadDim,
                                      .q_stride = kHeads * kHeadDim,
                                      .kv_stride = kKvHeads * kHeadDim,
                                      .scale = 1.0f / std::sqrt(float(kHeadDim)),
                                      .max_q_len = len};
  for (auto _ : state) {
    if (!PrefillAttentionCpu(params, pool.get()).ok()) state.SkipWithError("failed");
    benchmark::DoNotOptimize(out.data());
  }
  // Causal: about len^2 / 2 (query, key) pairs per head, 2 products of head_dim MACs each.
  const double flops = 4.0 * kHeads * kHeadDim * (double(len) * (len + 1) / 2);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Prefill)
    ->Args({512, 1})->Args({512, 2})->Args({2048, 2})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace baton::kernels

BENCHMARK_MAIN();
