// MatmulCpu throughput: GB/s of weights streamed (decode GEMV, m = 1), GFLOP/s at decode batches
// (m = 8..64, where f32 turns compute-bound) and prefill (m = 512), for f32, bf16 and f16 weights on 1
// and 2 threads, next to plain OpenBLAS calls (its own threading) for comparison. BM_FmaPeak is
// the ceiling one core reaches with f32 FMAs alone (no memory), to read GFLOP/s against.
//   Args: {m, n, k, threads}
#include <cblas.h>

#include <array>
#include <bit>
#include <memory>
#include <vector>

#include "baton/kernels/matmul.h"
#include "benchmark/benchmark.h"
#include "kernels/cpu/simd.h"
#include "kernels/reference/random_tensor.h"

namespace baton::kernels {
namespace {

void SetCounters(benchmark::State& state, int m, int n, int k, size_t weight_bytes) {
  const double bytes = double(weight_bytes) * n * k + 4.0 * m * (k + n);
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2e-9 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_MatmulCpu(benchmark::State& state, DType dtype) {
  const int m = static_cast<int>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  const int k = static_cast<int>(state.range(2));
  const int threads = static_cast<int>(state.range(3));
  const std::vector<float> in = kernels::reference::RandomVector(size_t(m) * k, 1);
  const std::vector<float> w32 =
      dtype == DType::kF32 ? kernels::reference::RandomVector(size_t(n) * k, 2) : std::vector<float>();
  const std::vector<uint16_t> w16 =
      dtype == DType::kBF16  ? kernels::reference::RandomBf16(size_t(n) * k, 2)
      : dtype == DType::kF16 ? kernels::reference::RandomF16(size_t(n) * k, 2)
                             : std::vector<uint16_t>();
  std::vector<float> out(size_t(m) * n);
  auto pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  const MatmulParams params{.out = out.data(),
                            .in = in.data(),
                            .weight = dtype == DType::kF32 ? static_cast<const void*>(w32.data())
                                                           : static_cast<const void*>(w16.data()),
                            .weight_dtype = dtype,
                            .bias = nullptr,
                            .m = m,
                            .n = n,
                            .k = k};
  for (auto _ : state) {
    if (!MatmulCpu(params, pool.get()).ok()) state.SkipWithError("MatmulCpu failed");
    benchmark::DoNotOptimize(out.data());
  }
  SetCounters(state, m, n, k, DTypeBytes(dtype));
}

// OpenBLAS alone, with its own threads: sgemm, or sgemv for m == 1.
void BM_OpenBlas(benchmark::State& state) {
  const int m = static_cast<int>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  const int k = static_cast<int>(state.range(2));
  openblas_set_num_threads(static_cast<int>(state.range(3)));
  const std::vector<float> in = kernels::reference::RandomVector(size_t(m) * k, 1);
  const std::vector<float> w = kernels::reference::RandomVector(size_t(n) * k, 2);
  std::vector<float> out(size_t(m) * n);
  for (auto _ : state) {
    if (m == 1) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, w.data(), k, in.data(), 1, 0.0f,
                  out.data(), 1);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, in.data(), k, w.data(),
                  k, 0.0f, out.data(), n);
    }
    benchmark::DoNotOptimize(out.data());
  }
  openblas_set_num_threads(1);  // what MatmulCpu expects
  SetCounters(state, m, n, k, 4);
}

#if defined(__AVX512F__)
// 12 independent chains of 512-bit FMAs on registers: enough in flight to cover the FMA latency.
void BM_FmaPeak(benchmark::State& state) {
  constexpr int kChains = 12;
  constexpr int64_t kRounds = 1 << 20;
  __m512 acc[kChains];  // a plain array: std::array<__m512> drops the type's alignment attribute
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(1.0f + 1e-7f * i);
  const __m512 scale = _mm512_set1_ps(0.999999f), shift = _mm512_set1_ps(1e-7f);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRounds; ++r) {
      for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], scale, shift);
    }
    benchmark::DoNotOptimize(acc);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * 16 * kChains * kRounds,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_FmaPeak)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif

// The matmuls of one batch-1 decode step of `small` (12 layers of Q/K/V and gate/up as groups, o and
// down alone, then the LM head), every layer with its own weights as in a real model, so they stream
// from memory in the order a decode step reads them. BM_ReadSweep reads the same bytes with a plain
// sum on the same threads: the ratio of the two GB/s is how close the GEMVs of a step come to the
// machine's read bandwidth, without the rest of the step.
struct SmallDecodeWeights {
  static constexpr int kLayers = 12, kHidden = 768, kKvDim = 256, kInter = 2048, kVocab = 32000;
  explicit SmallDecodeWeights(DType dtype) : dtype(dtype) {
    const size_t per_layer = size_t(kHidden) * (2 * kHidden + 2 * kKvDim) + 3 * size_t(kHidden) * kInter;
    const size_t total = kLayers * per_layer + size_t(kVocab) * kHidden;
    bytes.assign(total * DTypeBytes(dtype), 0x3f);  // small finite values in f32, bf16 and f16 alike
  }
  const void* At(size_t elements) const { return bytes.data() + elements * DTypeBytes(dtype); }
  DType dtype;
  std::vector<uint8_t> bytes;
};

void BM_DecodeStepMatmuls(benchmark::State& state, DType dtype) {
  using W = SmallDecodeWeights;
  const int threads = static_cast<int>(state.range(0));
  const W weights(dtype);
  const std::vector<float> in = kernels::reference::RandomVector(W::kInter, 1);
  std::vector<float> q(W::kHidden), k(W::kKvDim), v(W::kKvDim), o(W::kHidden), gate(W::kInter),
      up(W::kInter), down(W::kHidden), logits(W::kVocab);
  auto pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  auto params = [&](size_t& offset, float* out, int n, int k_dim) {
    const MatmulParams p{.out = out, .in = in.data(), .weight = weights.At(offset), .weight_dtype = dtype,
                         .bias = nullptr, .m = 1, .n = n, .k = k_dim};
    offset += size_t(n) * k_dim;
    return p;
  };
  for (auto _ : state) {
    size_t offset = 0;
    bool ok = true;
    for (int layer = 0; layer < W::kLayers; ++layer) {
      const std::array<MatmulParams, 3> qkv = {params(offset, q.data(), W::kHidden, W::kHidden),
                                               params(offset, k.data(), W::kKvDim, W::kHidden),
                                               params(offset, v.data(), W::kKvDim, W::kHidden)};
      ok &= MatmulGroupCpu(qkv, pool.get()).ok();
      ok &= MatmulCpu(params(offset, o.data(), W::kHidden, W::kHidden), pool.get()).ok();
      const std::array<MatmulParams, 2> gate_up = {params(offset, gate.data(), W::kInter, W::kHidden),
                                                   params(offset, up.data(), W::kInter, W::kHidden)};
      ok &= MatmulGroupCpu(gate_up, pool.get()).ok();
      ok &= MatmulCpu(params(offset, down.data(), W::kHidden, W::kInter), pool.get()).ok();
    }
    ok &= MatmulCpu(params(offset, logits.data(), W::kVocab, W::kHidden), pool.get()).ok();
    if (!ok) state.SkipWithError("MatmulCpu failed");
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["GB/s"] = benchmark::Counter(weights.bytes.size() * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// GB/s of one pass of sum_range(data, begin, end) over the weights of a `small` decode step, the
// elements (of type T) split over the threads.
template <typename T, typename SumRange>
void RunSweep(benchmark::State& state, DType dtype, SumRange sum_range) {
  const int threads = static_cast<int>(state.range(0));
  const SmallDecodeWeights weights(dtype);
  const auto* data = reinterpret_cast<const T*>(weights.bytes.data());
  const int64_t n = static_cast<int64_t>(weights.bytes.size() / sizeof(T));
  ThreadPool pool(threads);
  std::vector<float> sums(threads);
  for (auto _ : state) {
    pool.ParallelFor(n, [&](int64_t begin, int64_t end, int t) { sums[t] = sum_range(data, begin, end); });
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["GB/s"] = benchmark::Counter(weights.bytes.size() * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

void BM_ReadSweep(benchmark::State& state, DType dtype) {
  RunSweep<float>(state, dtype, [](const float* data, int64_t begin, int64_t end) {
    float acc[16] = {};
    for (int64_t i = begin; i + 16 <= end; i += 16) {
      for (int j = 0; j < 16; ++j) acc[j] += data[i + j];
    }
    for (int j = 1; j < 16; ++j) acc[0] += acc[j];
    return acc[0];
  });
}

// The least any bf16 kernel without AVX512_BF16 does per weight: BM_ReadSweep's bf16 bytes, each
// weight widened to f32 (shifted into the high half) before the sum. On a core whose read rate
// depends on the instructions per byte (Zen 3), this caps what a bf16 GEMV can stream.
void BM_WidenSweep(benchmark::State& state) {
  RunSweep<uint16_t>(state, DType::kBF16, [](const uint16_t* data, int64_t begin, int64_t end) {
    float acc[16] = {};
    int64_t i = begin;
#if defined(__AVX2__)
    // The fewest instructions: one load per 16 weights, one unpack against zero per 8.
    const __m256i zero = _mm256_setzero_si256();
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    for (; i + 16 <= end; i += 16) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i));
      acc0 = _mm256_add_ps(acc0, _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, bits)));
      acc1 = _mm256_add_ps(acc1, _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, bits)));
    }
    _mm256_storeu_ps(acc, acc0);
    _mm256_storeu_ps(acc + 8, acc1);
#endif
    for (; i + 16 <= end; i += 16) {
      for (int j = 0; j < 16; ++j) acc[j] += std::bit_cast<float>(uint32_t{data[i + j]} << 16);
    }
    for (int j = 1; j < 16; ++j) acc[0] += acc[j];
    return acc[0];
  });
}

BENCHMARK_CAPTURE(BM_DecodeStepMatmuls, f32, DType::kF32)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ReadSweep, f32, DType::kF32)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DecodeStepMatmuls, bf16, DType::kBF16)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ReadSweep, bf16, DType::kBF16)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DecodeStepMatmuls, f16, DType::kF16)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WidenSweep)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

void Shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    b->Args({1, 2048, 768, threads});
    b->Args({1, 32000, 768, threads});
    b->Args({1, 4096, 4096, threads});
    b->Args({4, 2048, 768, threads});
    b->Args({8, 32000, 768, threads});
    b->Args({16, 32000, 768, threads});
    b->Args({32, 32000, 768, threads});
    b->Args({64, 32000, 768, threads});
    b->Args({512, 2048, 768, threads});
    b->Args({512, 768, 2048, threads});
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_MatmulCpu, f32, DType::kF32)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatmulCpu, bf16, DType::kBF16)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatmulCpu, f16, DType::kF16)->Apply(Shapes);
BENCHMARK(BM_OpenBlas)->Apply(Shapes);

}  // namespace
}  // namespace baton::kernels

BENCHMARK_MAIN();
