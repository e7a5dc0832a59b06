// The GPU backend on the cuda-emulated device: every op on device buffers against the CPU backend
// on the same host inputs; the emulated runtime's provenance checks (host pointers and extents out
// of bounds are Internal, naming the op and the field); the copies' bounds; the registry.
//
// Tolerance: the emulated CUDA kernels sum in another order than the CPU kernels, so float results
// are compared with |gpu - cpu| <= 1e-5 + 1e-5 * |cpu| (testing::ToleranceFor(kF32), the kernels'
// own); ops that only move or add numbers (Embedding, KvWrite, KvGather, Add) must be bit-exact.
#include "runtime/backend/gpu_backend.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/reference/random_tensor.h"
#include "runtime/backend/backend_registry.h"
#include "runtime/backend/cpu_backend.h"
#include "runtime/backend/device_buffer.h"
#include "runtime/backend/emulated_gpu_runtime.h"
#include "tests/testing/paged_kv_cache.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tolerance.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::baton::kernels::reference::RandomBf16;
using ::baton::kernels::reference::RandomF16;
using ::baton::kernels::reference::RandomVector;
using ::baton::testing::AllClose;
using ::baton::testing::Tolerance;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr Tolerance kFloatTol = ::baton::testing::ToleranceFor(DType::kF32);
constexpr Tolerance kExact = {0, 0};

// Device copies of host arrays on a backend, freed before it.
class DeviceArrays {
 protected:
  // A device copy of `host` (at least one element's room, so an empty array still has an address).
  template <typename T>
  T* Upload(const std::vector<T>& host) {
    DeviceBuffer& buffer = buffers_.emplace_back(gpu_);
    EXPECT_THAT(buffer.Reserve(std::max<size_t>(1, host.size()) * sizeof(T)), IsOk());
    EXPECT_THAT(gpu_->CopyToDevice(buffer.data<void>(), host.data(), host.size() * sizeof(T)),
                IsOk());
    return buffer.data<T>();
  }
  template <typename T>
  std::vector<T> Download(const T* device, size_t count) {
    std::vector<T> host(count);
    EXPECT_THAT(gpu_->CopyToHost(host.data(), device, count * sizeof(T)), IsOk());
    return host;
  }

  std::unique_ptr<DeviceBackend> backend_;
  DeviceBackend* gpu_ = nullptr;       // backend_
  std::vector<DeviceBuffer> buffers_;  // after backend_: freed before it
  CpuBackend cpu_{nullptr};
};

// The ops on each GPU device kind this machine has: cuda-emulated always, cuda on a GPU (skipped
// where CreateBackend fails: no CUDA build, no driver or no device).
class GpuOpsTest : public ::testing::TestWithParam<DeviceKind>, protected DeviceArrays {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<DeviceBackend>> backend =
        CreateBackend(BackendOptions{.device = GetParam()});
    if (!backend.ok()) GTEST_SKIP() << backend.status();
    backend_ = *std::move(backend);
    gpu_ = backend_.get();
  }

  // MatmulGroup (two products sharing the input, one with a bias) and Matmul.
  void MatmulAndGroupMatchCpu(DType dtype) {
    constexpr int kM = 3, kN = 17, kN2 = 9, kK = 40;
    const std::vector<float> in = RandomVector(kM * kK, 5);
    const std::vector<float> bias = RandomVector(kN, 6);
    const std::vector<float> w_f32 = RandomVector(kN * kK, 7), w2_f32 = RandomVector(kN2 * kK, 8);
    const bool f32 = dtype == DType::kF32;
    // 16-bit weights: bf16 or f16 encodings, as the dtype says.
    const std::vector<uint16_t> w_16 =
        dtype == DType::kF16 ? RandomF16(kN * kK, 7) : RandomBf16(kN * kK, 7);
    const std::vector<uint16_t> w2_16 =
        dtype == DType::kF16 ? RandomF16(kN2 * kK, 8) : RandomBf16(kN2 * kK, 8);
    const void* w = f32 ? static_cast<const void*>(w_f32.data()) : w_16.data();
    const void* w2 = f32 ? static_cast<const void*>(w2_f32.data()) : w2_16.data();
    const void* dw = f32 ? static_cast<const void*>(Upload(w_f32)) : Upload(w_16);
    const void* dw2 = f32 ? static_cast<const void*>(Upload(w2_f32)) : Upload(w2_16);

    std::vector<float> expected(kM * kN), expected2(kM * kN2);
    ASSERT_THAT(cpu_.MatmulGroup({{.out = expected.data(), .in = in.data(), .weight = w,
                                   .weight_dtype = dtype, .bias = bias.data(), .m = kM, .n = kN,
                                   .k = kK},
                                  {.out = expected2.data(), .in = in.data(), .weight = w2,
                                   .weight_dtype = dtype, .bias = nullptr, .m = kM, .n = kN2,
                                   .k = kK}}),
                IsOk());
    const float* din = Upload(in);
    const float* dbias = Upload(bias);
    float* out = Upload(std::vector<float>(kM * kN, -1));
    float* out2 = Upload(std::vector<float>(kM * kN2, -1));
    ASSERT_THAT(gpu_->MatmulGroup({{.out = out, .in = din, .weight = dw, .weight_dtype = dtype,
                                   .bias = dbias, .m = kM, .n = kN, .k = kK},
                                  {.out = out2, .in = din, .weight = dw2, .weight_dtype = dtype,
                                   .bias = nullptr, .m = kM, .n = kN2, .k = kK}}),
                IsOk());
    EXPECT_TRUE(AllClose(Download(out, expected.size()), expected, kFloatTol));
    EXPECT_TRUE(AllClose(Download(out2, expected2.size()), expected2, kFloatTol));

    float* single = Upload(std::vector<float>(kM * kN, -1));
    ASSERT_THAT(gpu_->Matmul({.out = single, .in = din, .weight = dw, .weight_dtype = dtype,
                             .bias = dbias, .m = kM, .n = kN, .k = kK}),
                IsOk());
    EXPECT_TRUE(AllClose(Download(single, expected.size()), expected, kFloatTol));
  }
};

INSTANTIATE_TEST_SUITE_P(Devices, GpuOpsTest,
                         ::testing::Values(DeviceKind::kCudaEmulated, DeviceKind::kCuda),
                         [](const auto& info) {
                           return info.param == DeviceKind::kCuda ? std::string("cuda")
                                                                  : std::string("cuda_emulated");
                         });

// A GpuBackend over an emulated runtime the test can look into.
class GpuBackendTest : public ::testing::Test, protected DeviceArrays {
 protected:
  GpuBackendTest() {
    runtime_ = new EmulatedGpuRuntime();
    auto backend =
        std::make_unique<GpuBackend>(DeviceKind::kCudaEmulated, std::unique_ptr<GpuRuntime>(runtime_));
    gpu_backend_ = backend.get();
    backend_ = std::move(backend);
    gpu_ = backend_.get();
  }

  EmulatedGpuRuntime* runtime_;  // owned by backend_
  GpuBackend* gpu_backend_;      // backend_
};

// ---------------------------------------------------------------------------------------------
// Every op against the CPU backend.

TEST_P(GpuOpsTest, EmbeddingMatchesCpuForF32AndBf16Tables) {
  constexpr int kVocab = 11, kHidden = 24, kTokens = 5;
  const std::vector<int32_t> ids = {3, 0, 10, 3, 7};
  const std::vector<float> table_f32 = RandomVector(kVocab * kHidden, 1);
  const std::vector<uint16_t> table_bf16 = RandomBf16(kVocab * kHidden, 2);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const void* host_table = dtype == DType::kF32 ? static_cast<const void*>(table_f32.data())
                                                  : static_cast<const void*>(table_bf16.data());
    const void* device_table = dtype == DType::kF32 ? static_cast<const void*>(Upload(table_f32))
                                                    : static_cast<const void*>(Upload(table_bf16));
    std::vector<float> expected(kTokens * kHidden);
    kernels::EmbeddingParams p{.out = expected.data(), .table = host_table, .table_dtype = dtype,
                               .token_ids = ids.data(), .num_tokens = kTokens, .hidden = kHidden,
                               .vocab_size = kVocab};
    ASSERT_THAT(cpu_.Embedding(p), IsOk());
    float* out = Upload(std::vector<float>(kTokens * kHidden, -1));
    p.out = out;
    p.table = device_table;
    p.token_ids = Upload(ids);
    ASSERT_THAT(gpu_->Embedding(p), IsOk());
    EXPECT_TRUE(AllClose(Download(out, expected.size()), expected, kExact)) << DTypeName(dtype);
  }
}

TEST_P(GpuOpsTest, RmsNormMatchesCpu) {
  constexpr int kTokens = 3, kHidden = 37;
  const std::vector<float> in = RandomVector(kTokens * kHidden, 3);
  const std::vector<float> weight = RandomVector(kHidden, 4);
  std::vector<float> expected(in.size());
  kernels::RmsNormParams p{.out = expected.data(), .in = in.data(), .weight = weight.data(),
                           .num_tokens = kTokens, .hidden = kHidden, .eps = 1e-5f};
  ASSERT_THAT(cpu_.RmsNorm(p), IsOk());
  float* x = Upload(in);
  p.out = x;  // in place, as the model may run it
  p.in = x;
  p.weight = Upload(weight);
  ASSERT_THAT(gpu_->RmsNorm(p), IsOk());
  EXPECT_TRUE(AllClose(Download(x, in.size()), expected, kFloatTol));
}

TEST_P(GpuOpsTest, MatmulAndGroupMatchCpuForF32Bf16AndF16Weights) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    MatmulAndGroupMatchCpu(dtype);
  }
}

// int8 weights with a scale per row (and a bias): on CUDA, panels widened to bf16 for cuBLAS, then
// scaled; the CPU's int8 kernels compute the same sums up to their order. Panels are 64 MiB, so one
// here; a decode-sized and a prefill-sized m.
TEST_P(GpuOpsTest, MatmulMatchesCpuForInt8Weights) {
  constexpr int kN = 33, kK = 70;
  std::vector<int8_t> q(kN * kK);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<int8_t>(static_cast<int>(i * 37 % 255) - 127);
  const std::vector<float> scales = RandomVector(kN, 21, 0.001f, 0.01f);
  const std::vector<float> bias = RandomVector(kN, 22);
  const int8_t* dq = Upload(q);
  const float* dscales = Upload(scales);
  const float* dbias = Upload(bias);
  for (int m : {3, 40}) {
    SCOPED_TRACE(::testing::Message() << "m " << m);
    const std::vector<float> in = RandomVector(m * kK, 23);
    std::vector<float> expected(m * kN);
    kernels::MatmulParams p{.out = expected.data(), .in = in.data(), .weight = q.data(),
                            .weight_dtype = DType::kI8, .bias = bias.data(), .m = m, .n = kN,
                            .k = kK, .weight_scales = scales.data()};
    ASSERT_THAT(cpu_.Matmul(p), IsOk());
    float* out = Upload(std::vector<float>(m * kN, -1));
    p.out = out;
    p.in = Upload(in);
    p.weight = dq;
    p.bias = dbias;
    p.weight_scales = dscales;
    ASSERT_THAT(gpu_->Matmul(p), IsOk());
    EXPECT_TRUE(AllClose(Download(out, expected.size()), expected, kFloatTol));
  }
}

TEST_P(GpuOpsTest, RopeMatchesCpu) {
  constexpr int kTokens = 4, kHeads = 4, kKvHeads = 2, kHeadDim = 8;
  constexpr int kQStride = kHeads * kHeadDim + 3, kKStride = kKvHeads * kHeadDim + 1;
  std::vector<float> q = RandomVector(kTokens * kQStride, 9);
  std::vector<float> k = RandomVector(kTokens * kKStride, 10);
  const std::vector<int32_t> positions = {0, 5, 6, 100};
  absl::StatusOr<std::vector<float>> inv_freq = kernels::RopeInvFreq(10000, kHeadDim, {});
  ASSERT_THAT(inv_freq, IsOk());
  float* dq = Upload(q);
  float* dk = Upload(k);
  kernels::RopeParams p{.q = q.data(), .k = k.data(), .positions = positions.data(),
                        .inv_freq = inv_freq->data(), .num_tokens = kTokens, .num_heads = kHeads,
                        .num_kv_heads = kKvHeads, .head_dim = kHeadDim, .q_stride = kQStride,
                        .k_stride = kKStride};
  ASSERT_THAT(cpu_.Rope(p), IsOk());
  p.q = dq;
  p.k = dk;
  p.positions = Upload(positions);
  p.inv_freq = Upload(*inv_freq);
  ASSERT_THAT(gpu_->Rope(p), IsOk());
  EXPECT_TRUE(AllClose(Download(dq, q.size()), q, kFloatTol));
  EXPECT_TRUE(AllClose(Download(dk, k.size()), k, kFloatTol));
}

// A pool of kBlocks blocks of two layers; the views address layer 1, as the model's do.
struct KvPoolShape {
  static constexpr int kBlocks = 5, kBlockSize = 4, kKvHeads = 2, kHeadDim = 8;
  static constexpr int64_t kLayerElems = int64_t{kBlockSize} * kKvHeads * kHeadDim;
  static constexpr int64_t kBlockStride = 2 * kLayerElems;
  static constexpr size_t kPoolElems = kBlocks * kBlockStride;

  static kernels::PagedKvView View(float* k_pool, float* v_pool) {
    return {.k = k_pool + kLayerElems, .v = v_pool + kLayerElems, .block_stride = kBlockStride,
            .block_size = kBlockSize, .num_kv_heads = kKvHeads, .head_dim = kHeadDim,
            .num_blocks = kBlocks};
  }
};

TEST_P(GpuOpsTest, KvWriteMatchesCpu) {
  using S = KvPoolShape;
  constexpr int kTokens = 5, kStride = S::kKvHeads * S::kHeadDim + 2;
  std::vector<float> k_pool = RandomVector(S::kPoolElems, 11), v_pool = RandomVector(S::kPoolElems, 12);
  const std::vector<float> k = RandomVector(kTokens * kStride, 13);
  const std::vector<float> v = RandomVector(kTokens * kStride, 14);
  const std::vector<int32_t> slots = {0, 7, -1, 19, 9};  // -1: padding, skipped
  float* dk_pool = Upload(k_pool);
  float* dv_pool = Upload(v_pool);
  kernels::KvWriteParams p{.cache = S::View(k_pool.data(), v_pool.data()), .k = k.data(),
                           .v = v.data(), .slot_mapping = slots.data(), .num_tokens = kTokens,
                           .kv_stride = kStride};
  ASSERT_THAT(cpu_.KvWrite(p), IsOk());
  p.cache = S::View(dk_pool, dv_pool);
  p.k = Upload(k);
  p.v = Upload(v);
  p.slot_mapping = Upload(slots);
  ASSERT_THAT(gpu_->KvWrite(p), IsOk());
  EXPECT_TRUE(AllClose(Download(dk_pool, k_pool.size()), k_pool, kExact));
  EXPECT_TRUE(AllClose(Download(dv_pool, v_pool.size()), v_pool, kExact));
}

TEST_P(GpuOpsTest, KvGatherMatchesCpu) {
  using S = KvPoolShape;
  constexpr int kSeqs = 2, kMaxBlocks = 3, kStride = S::kKvHeads * S::kHeadDim;
  const std::vector<float> k_pool = RandomVector(S::kPoolElems, 15);
  const std::vector<float> v_pool = RandomVector(S::kPoolElems, 16);
  const std::vector<int32_t> tables = {4, 1, 0, 2, 3, 0};
  const std::vector<int32_t> out_start = {0, 9, 12};  // lens 9 and 3
  const int rows = out_start.back();
  std::vector<float> k_expected(rows * kStride), v_expected(rows * kStride);
  kernels::KvGatherParams p{.k_out = k_expected.data(), .v_out = v_expected.data(),
                            .cache = S::View(const_cast<float*>(k_pool.data()),
                                             const_cast<float*>(v_pool.data())),
                            .block_tables = tables.data(), .out_start = out_start.data(),
                            .num_seqs = kSeqs, .max_blocks_per_seq = kMaxBlocks,
                            .out_stride = kStride, .max_len = 9};
  ASSERT_THAT(cpu_.KvGather(p), IsOk());
  float* k_out = Upload(std::vector<float>(rows * kStride, -1));
  float* v_out = Upload(std::vector<float>(rows * kStride, -1));
  p.k_out = k_out;
  p.v_out = v_out;
  p.cache = S::View(Upload(k_pool), Upload(v_pool));
  p.block_tables = Upload(tables);
  p.out_start = Upload(out_start);
  ASSERT_THAT(gpu_->KvGather(p), IsOk());
  EXPECT_TRUE(AllClose(Download(k_out, k_expected.size()), k_expected, kExact));
  EXPECT_TRUE(AllClose(Download(v_out, v_expected.size()), v_expected, kExact));
}

TEST_P(GpuOpsTest, PagedAttentionDecodeMatchesCpu) {
  using S = KvPoolShape;
  constexpr int kSeqs = 2, kHeads = 4, kMaxBlocks = 3;
  constexpr int kQStride = kHeads * S::kHeadDim + 5;
  const std::vector<float> k_pool = RandomVector(S::kPoolElems, 17);
  const std::vector<float> v_pool = RandomVector(S::kPoolElems, 18);
  const std::vector<float> q = RandomVector(kSeqs * kQStride, 19);
  const std::vector<int32_t> tables = {2, 0, 4, 3, 1, 0};
  const std::vector<int32_t> context_lens = {10, 5};
  std::vector<float> expected(kSeqs * kHeads * S::kHeadDim);
  kernels::PagedAttentionParams p{
      .out = expected.data(), .q = q.data(),
      .cache = S::View(const_cast<float*>(k_pool.data()), const_cast<float*>(v_pool.data())),
      .block_tables = tables.data(), .context_lens = context_lens.data(), .num_seqs = kSeqs,
      .num_heads = kHeads, .max_blocks_per_seq = kMaxBlocks, .q_stride = kQStride,
      .scale = 1.0f / std::sqrt(float{S::kHeadDim})};
  ASSERT_THAT(cpu_.PagedAttentionDecode(p), IsOk());
  float* out = Upload(std::vector<float>(expected.size(), -1));
  p.out = out;
  p.q = Upload(q);
  p.cache = S::View(Upload(k_pool), Upload(v_pool));
  p.block_tables = Upload(tables);
  p.context_lens = Upload(context_lens);
  ASSERT_THAT(gpu_->PagedAttentionDecode(p), IsOk());
  EXPECT_TRUE(AllClose(Download(out, expected.size()), expected, kFloatTol));
}

TEST_P(GpuOpsTest, PrefillAttentionMatchesCpu) {
  constexpr int kHeads = 4, kKvHeads = 2, kHeadDim = 8;
  constexpr int kQStride = kHeads * kHeadDim, kKvStride = kKvHeads * kHeadDim + 3;
  const std::vector<int32_t> q_start = {0, 3, 5}, kv_start = {0, 6, 8};  // one cached prefix
  const int num_q = q_start.back(), num_kv = kv_start.back();
  const std::vector<float> q = RandomVector(num_q * kQStride, 20);
  const std::vector<float> k = RandomVector(num_kv * kKvStride, 21);
  const std::vector<float> v = RandomVector(num_kv * kKvStride, 22);
  std::vector<float> expected(num_q * kHeads * kHeadDim);
  kernels::PrefillAttentionParams p{
      .out = expected.data(), .q = q.data(), .k = k.data(), .v = v.data(),
      .q_start = q_start.data(), .kv_start = kv_start.data(), .num_seqs = 2, .num_heads = kHeads,
      .num_kv_heads = kKvHeads, .head_dim = kHeadDim, .q_stride = kQStride,
      .kv_stride = kKvStride, .scale = 1.0f / std::sqrt(float{kHeadDim}), .max_q_len = 3};
  ASSERT_THAT(cpu_.PrefillAttention(p), IsOk());
  float* out = Upload(std::vector<float>(expected.size(), -1));
  p.out = out;
  p.q = Upload(q);
  p.k = Upload(k);
  p.v = Upload(v);
  p.q_start = Upload(q_start);
  p.kv_start = Upload(kv_start);
  ASSERT_THAT(gpu_->PrefillAttention(p), IsOk());
  EXPECT_TRUE(AllClose(Download(out, expected.size()), expected, kFloatTol));
}

TEST_P(GpuOpsTest, SwigluMatchesCpu) {
  constexpr int kTokens = 3, kInter = 19, kInStride = 2 * kInter;
  const std::vector<float> gate_up = RandomVector(kTokens * kInStride, 23, -6, 6);
  std::vector<float> expected = gate_up;
  kernels::SwigluParams p{.out = expected.data(), .gate = expected.data(),
                          .up = expected.data() + kInter, .num_tokens = kTokens,
                          .intermediate = kInter, .in_stride = kInStride, .out_stride = kInStride};
  ASSERT_THAT(cpu_.Swiglu(p), IsOk());
  float* x = Upload(gate_up);  // fused gate/up rows, out over gate as the model does
  p.out = x;
  p.gate = x;
  p.up = x + kInter;
  ASSERT_THAT(gpu_->Swiglu(p), IsOk());
  EXPECT_TRUE(AllClose(Download(x, gate_up.size()), expected, kFloatTol));
}

TEST_P(GpuOpsTest, AddMatchesCpuInPlace) {
  constexpr int64_t kN = 1000;
  const std::vector<float> a = RandomVector(kN, 24), b = RandomVector(kN, 25);
  std::vector<float> expected = a;
  ASSERT_THAT(cpu_.Add({.out = expected.data(), .a = expected.data(), .b = b.data(), .n = kN}),
              IsOk());
  float* x = Upload(a);
  ASSERT_THAT(gpu_->Add({.out = x, .a = x, .b = Upload(b), .n = kN}), IsOk());
  EXPECT_TRUE(AllClose(Download(x, kN), expected, kExact));
}

TEST_P(GpuOpsTest, AddRmsNormMatchesCpu) {
  constexpr int kTokens = 3, kHidden = 300;
  const std::vector<float> residual = RandomVector(kTokens * kHidden, 30);
  const std::vector<float> in = RandomVector(kTokens * kHidden, 31);
  const std::vector<float> weight = RandomVector(kHidden, 32);
  std::vector<float> expected_residual = residual, expected = in;
  kernels::AddRmsNormParams p{.out = expected.data(), .residual = expected_residual.data(),
                              .in = expected.data(), .weight = weight.data(),
                              .num_tokens = kTokens, .hidden = kHidden, .eps = 1e-5f};
  ASSERT_THAT(cpu_.AddRmsNorm(p), IsOk());
  float* dresidual = Upload(residual);
  float* h = Upload(in);
  p.out = h;  // over the sublayer's output, as the model runs it
  p.residual = dresidual;
  p.in = h;
  p.weight = Upload(weight);
  ASSERT_THAT(gpu_->AddRmsNorm(p), IsOk());
  EXPECT_TRUE(AllClose(Download(dresidual, residual.size()), expected_residual, kExact));
  EXPECT_TRUE(AllClose(Download(h, in.size()), expected, kFloatTol));
}

// Sampling on the device copies back only the token ids, and they are the CPU backend's exactly
// (sample.h: integer arithmetic, the same Philox draw); logprobs within f32 rounding.
TEST_P(GpuOpsTest, SampleGivesTheCpuTokens) {
  constexpr int kSeqs = 8, kVocab = 3001;
  const std::vector<float> logits = RandomVector(kSeqs * kVocab, 30, -6, 6);
  const std::vector<float> temperature = {0.0f, 1.0f, 0.7f, 1.3f, 1.0f, 0.5f, 2.0f, 1.0f};
  const std::vector<int32_t> top_k = {0, 0, 40, 0, 5, 1000, 0, 1};
  const std::vector<float> top_p = {1.0f, 1.0f, 1.0f, 0.9f, 0.5f, 0.95f, 0.2f, 1.0f};
  const std::vector<uint64_t> seed = {1, 2, 3, 4, 5, 6, 7, 0xfedcba9876543210ull};
  const std::vector<uint64_t> draw_idx = {0, 0, 1, 2, 3, 100, 1ull << 40, 7};
  std::vector<int32_t> expected_tokens(kSeqs);
  std::vector<float> expected_logprobs(kSeqs);
  kernels::SampleParams p{.logits = logits.data(), .temperature = temperature.data(),
                          .top_k = top_k.data(), .top_p = top_p.data(), .seed = seed.data(),
                          .draw_idx = draw_idx.data(), .token_ids = expected_tokens.data(),
                          .logprobs = expected_logprobs.data(), .num_seqs = kSeqs,
                          .vocab_size = kVocab};
  ASSERT_THAT(cpu_.Sample(p), IsOk());
  p.logits = Upload(logits);
  p.temperature = Upload(temperature);
  p.top_k = Upload(top_k);
  p.top_p = Upload(top_p);
  p.seed = Upload(seed);
  p.draw_idx = Upload(draw_idx);
  p.token_ids = Upload(std::vector<int32_t>(kSeqs, -2));
  p.logprobs = Upload(std::vector<float>(kSeqs));
  ASSERT_THAT(gpu_->Sample(p), IsOk());
  EXPECT_EQ(Download(p.token_ids, kSeqs), expected_tokens);
  EXPECT_TRUE(AllClose(Download(p.logprobs, kSeqs), expected_logprobs, kFloatTol));
}

TEST_P(GpuOpsTest, CopyOnDeviceMovesARow) {
  const std::vector<float> src = RandomVector(64, 26);
  float* dsrc = Upload(src);
  float* ddst = Upload(std::vector<float>(16, 0));
  ASSERT_THAT(gpu_->CopyOnDevice(ddst, dsrc + 48, 16 * sizeof(float)), IsOk());
  EXPECT_EQ(Download(ddst, 16), std::vector<float>(src.begin() + 48, src.end()));
}

// Columns [2, 5) of a [3, 8] matrix into columns [1, 4) of a [3, 6] one: the vocab-parallel
// logits' rearrangement.
TEST_P(GpuOpsTest, CopyOnDevice2DMovesAColumnBlock) {
  const std::vector<float> src = RandomVector(3 * 8, 27);
  float* dsrc = Upload(src);
  float* ddst = Upload(std::vector<float>(3 * 6, 0));
  ASSERT_THAT(gpu_->CopyOnDevice2D(ddst + 1, 6 * sizeof(float), dsrc + 2, 8 * sizeof(float),
                                   3 * sizeof(float), 3),
              IsOk());
  std::vector<float> expected(3 * 6, 0);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) expected[r * 6 + 1 + c] = src[r * 8 + 2 + c];
  }
  EXPECT_EQ(Download(ddst, expected.size()), expected);
}

// Long contexts for few sequences x heads: the backend takes the split-KV kernels, with the
// workspace from its caching allocator (one Malloc on the first call, none after), and matches the
// CPU backend, including a sequence of one token and one whose context ends mid-split.
TEST_F(GpuBackendTest, LongContextTakesTheSplitKvPathAndMatchesCpu) {
  constexpr int kKvHeads = 2, kGroup = 2, kHeadDim = 64, kBlockSize = 16;
  constexpr int kHeads = kKvHeads * kGroup;
  testing::TestPagedKvCache cache({1500, 1, 700}, kBlockSize, kKvHeads, kHeadDim, 40, 41);
  const int num_seqs = cache.num_seqs();
  const int q_stride = kHeads * kHeadDim;
  const std::vector<float> q = RandomVector(num_seqs * q_stride, 42);
  kernels::PagedAttentionParams p = cache.DecodeParams(q.data(), kHeads);
  // 12 items on 108 SMs, 1520 keys at most (95 blocks): 5 splits of 19 blocks (304 keys).
  ASSERT_EQ(kernels::PagedAttentionSplitKvNumSplits(p, runtime_->num_sms()), 5);
  std::vector<float> expected(num_seqs * kHeads * kHeadDim);
  p.out = expected.data();
  ASSERT_THAT(cpu_.PagedAttentionDecode(p), IsOk());

  float* out = Upload(std::vector<float>(expected.size(), NAN));
  kernels::PagedKvView view = cache.view();
  const int64_t layer_offset = static_cast<float*>(view.k) - cache.k_pool().data();
  view.k = Upload(cache.k_pool()) + layer_offset;
  view.v = Upload(cache.v_pool()) + layer_offset;
  p.out = out;
  p.q = Upload(q);
  p.cache = view;
  p.block_tables = Upload(cache.block_tables());
  p.context_lens = Upload(cache.context_lens());
  const int64_t mallocs_before = runtime_->stats().num_mallocs;
  ASSERT_THAT(gpu_->PagedAttentionDecode(p), IsOk());
  EXPECT_EQ(runtime_->stats().num_mallocs, mallocs_before + 1);  // the workspace
  EXPECT_TRUE(AllClose(Download(out, expected.size()), expected, kFloatTol));
  ASSERT_THAT(gpu_->PagedAttentionDecode(p), IsOk());
  EXPECT_EQ(runtime_->stats().num_mallocs, mallocs_before + 1);  // from the cache
  EXPECT_TRUE(AllClose(Download(out, expected.size()), expected, kFloatTol));
}

// ---------------------------------------------------------------------------------------------
// Provenance: what a GPU would fault on (or silently corrupt), the emulated device reports.

TEST_F(GpuBackendTest, HostPointerInAnOpIsInternalNamingOpAndField) {
  constexpr int kTokens = 2, kHidden = 16;
  const std::vector<float> host_weight = RandomVector(kHidden, 27);
  float* x = Upload(RandomVector(kTokens * kHidden, 28));
  EXPECT_THAT(gpu_->RmsNorm({.out = x, .in = x, .weight = host_weight.data(),
                            .num_tokens = kTokens, .hidden = kHidden, .eps = 1e-5f}),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("cuda-emulated"), HasSubstr("RmsNorm"),
                             HasSubstr("weight"), HasSubstr("not device memory"))));
  // A host weight matrix (the checkpoint's mmap, say) given to a GEMM.
  const std::vector<float> host_matrix = RandomVector(4 * kHidden, 29);
  float* out = Upload(std::vector<float>(kTokens * 4));
  EXPECT_THAT(gpu_->Matmul({.out = out, .in = x, .weight = host_matrix.data(),
                           .weight_dtype = DType::kF32, .bias = nullptr, .m = kTokens, .n = 4,
                           .k = kHidden}),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("Matmul"), HasSubstr("weight"))));
  // A host index array (the step's positions) given to Rope.
  const std::vector<int32_t> positions = {0, 1};
  const std::vector<float> inv_freq(4, 1.0f);
  EXPECT_THAT(gpu_->Rope({.q = x, .k = x, .positions = positions.data(),
                         .inv_freq = Upload(inv_freq), .num_tokens = kTokens, .num_heads = 1,
                         .num_kv_heads = 1, .head_dim = 8, .q_stride = kHidden,
                         .k_stride = kHidden}),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("Rope"), HasSubstr("positions"))));
}

TEST_F(GpuBackendTest, SampleChecksEveryArray) {
  constexpr int kSeqs = 2, kVocab = 50;
  const std::vector<uint64_t> host_seed = {1, 2};
  kernels::SampleParams p{.logits = Upload(RandomVector(kSeqs * kVocab, 31)),
                          .temperature = Upload(std::vector<float>{1.0f, 0.0f}),
                          .top_k = Upload(std::vector<int32_t>{0, 0}),
                          .top_p = Upload(std::vector<float>{0.9f, 1.0f}),
                          .seed = host_seed.data(),
                          .draw_idx = Upload(std::vector<uint64_t>{0, 0}),
                          .token_ids = Upload(std::vector<int32_t>(kSeqs)),
                          .logprobs = nullptr,
                          .num_seqs = kSeqs,
                          .vocab_size = kVocab};
  EXPECT_THAT(gpu_->Sample(p), StatusIs(absl::StatusCode::kInternal,
                                        AllOf(HasSubstr("Sample"), HasSubstr("seed"),
                                              HasSubstr("not device memory"))));
  p.seed = Upload(host_seed);
  p.vocab_size = kVocab + 1;  // the logits hold kVocab per row
  EXPECT_THAT(gpu_->Sample(p),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("Sample: logits"), HasSubstr("past its end"))));
  p.vocab_size = kVocab;
  EXPECT_THAT(gpu_->Sample(p), IsOk());
}

TEST_F(GpuBackendTest, ExtentPastTheAllocationIsInternalNamingTheSizes) {
  float* a = Upload(std::vector<float>(100, 1));
  float* b = Upload(std::vector<float>(101, 2));
  // `a` holds 100 floats; an Add over 101 reads and writes one past it.
  EXPECT_THAT(gpu_->Add({.out = a, .a = a, .b = b, .n = 101}),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("Add: out needs 404 bytes at offset 0"),
                             HasSubstr("past its end"))));
  // An interior pointer whose rows run past the end: Swiglu's `up` half of a fused buffer with
  // one token too many.
  constexpr int kInter = 10;
  float* fused = Upload(std::vector<float>(2 * 2 * kInter));  // 2 tokens
  float* out = Upload(std::vector<float>(3 * kInter));
  EXPECT_THAT(gpu_->Swiglu({.out = out, .gate = fused, .up = fused + kInter, .num_tokens = 3,
                           .intermediate = kInter, .in_stride = 2 * kInter,
                           .out_stride = kInter}),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("Swiglu"), HasSubstr("gate"))));
}

TEST_F(GpuBackendTest, BlockIdsPastThePoolAreInternal) {
  using S = KvPoolShape;
  float* k_pool = Upload(std::vector<float>(S::kPoolElems));
  float* v_pool = Upload(std::vector<float>(S::kPoolElems));
  kernels::PagedKvView cache = S::View(k_pool, v_pool);
  cache.num_blocks = 0;  // unknown: the ids are then the only bound, and the runtime reads them
  const std::vector<int32_t> tables = {1, S::kBlocks};  // the second block is one past the pool
  constexpr int kHeads = 2;
  kernels::PagedAttentionParams p{
      .out = Upload(std::vector<float>(kHeads * S::kHeadDim)),
      .q = Upload(std::vector<float>(kHeads * S::kHeadDim)), .cache = cache,
      .block_tables = Upload(tables), .context_lens = Upload(std::vector<int32_t>{6}),
      .num_seqs = 1, .num_heads = kHeads, .max_blocks_per_seq = 2,
      .q_stride = kHeads * S::kHeadDim, .scale = 1};
  EXPECT_THAT(gpu_->PagedAttentionDecode(p),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("PagedAttentionDecode"), HasSubstr("cache.k"))));
  // Only the first block is read when the context fits in it.
  p.context_lens = Upload(std::vector<int32_t>{4});
  EXPECT_THAT(gpu_->PagedAttentionDecode(p), IsOk());
}

TEST_F(GpuBackendTest, SplitKvWorkspaceMustBeDeviceMemoryOfItsWholeSize) {
  using S = KvPoolShape;
  constexpr int kHeads = 2, kSplits = 2;
  const std::vector<int32_t> tables = {1, 3};
  kernels::PagedAttentionSplitKvParams p{
      .attn = {.out = Upload(std::vector<float>(kHeads * S::kHeadDim)),
               .q = Upload(std::vector<float>(kHeads * S::kHeadDim)),
               .cache = S::View(Upload(std::vector<float>(S::kPoolElems)),
                                Upload(std::vector<float>(S::kPoolElems))),
               .block_tables = Upload(tables),
               .context_lens = Upload(std::vector<int32_t>{6}),
               .num_seqs = 1, .num_heads = kHeads, .max_blocks_per_seq = 2,
               .q_stride = kHeads * S::kHeadDim, .scale = 1},
      .workspace = nullptr,
      .num_splits = kSplits};
  const size_t floats = kernels::PagedAttentionSplitKvWorkspaceBytes(p.attn, kSplits) / sizeof(float);
  std::vector<float> host_workspace(floats);
  p.workspace = host_workspace.data();
  EXPECT_THAT(runtime_->Launch(p),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("PagedAttentionSplitKv"), HasSubstr("workspace"),
                             HasSubstr("not device memory"))));
  p.workspace = Upload(std::vector<float>(floats - 1));
  EXPECT_THAT(runtime_->Launch(p),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("workspace"), HasSubstr("past its end"))));
  p.workspace = Upload(std::vector<float>(floats));
  EXPECT_THAT(runtime_->Launch(p), IsOk());
}

TEST_F(GpuBackendTest, InvalidParamsStayInvalidArgument) {
  float* x = Upload(std::vector<float>(8));
  EXPECT_THAT(gpu_->Add({.out = x, .a = nullptr, .b = x, .n = 8}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a is null")));
  EXPECT_THAT(gpu_->MatmulGroup({{.out = x, .in = x, .weight = x, .weight_dtype = DType::kF32,
                                 .bias = nullptr, .m = 1, .n = 2, .k = 4},
                                {.out = x, .in = x, .weight = nullptr,
                                 .weight_dtype = DType::kF32, .bias = nullptr, .m = 1, .n = 2,
                                 .k = 4}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(GpuBackendTest, CopiesOutOfBoundsAreRejected) {
  float* x = Upload(std::vector<float>(16));
  std::vector<float> host(32);
  EXPECT_THAT(gpu_->CopyToDevice(x, host.data(), 17 * sizeof(float)),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("CopyHostToDevice"), HasSubstr("device"),
                             HasSubstr("68 bytes"))));
  EXPECT_THAT(gpu_->CopyToDevice(x + 8, host.data(), 9 * sizeof(float)),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("offset 32")));
  EXPECT_THAT(gpu_->CopyToHost(host.data(), x + 1, 16 * sizeof(float)),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("CopyDeviceToHost")));
  // A host array on the device side, and a device array on the host side.
  EXPECT_THAT(gpu_->CopyToHost(host.data(), host.data() + 16, 4),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("not device memory")));
  EXPECT_THAT(gpu_->CopyToDevice(x, x, 4),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("is device memory")));
  float* y = Upload(std::vector<float>(8));
  EXPECT_THAT(gpu_->CopyOnDevice(y, x, 16 * sizeof(float)),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("device_dst")));
  EXPECT_THAT(gpu_->CopyOnDevice(x, y, 16 * sizeof(float)),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("device_src")));
  EXPECT_THAT(gpu_->CopyOnDevice(x, y, 8 * sizeof(float)), IsOk());
  // Two rows of 4 floats 8 apart: the second row ends at float 12 of x (in), of y (past its 8).
  EXPECT_THAT(gpu_->CopyOnDevice2D(x, 32, y, 16, 16, 2), IsOk());
  EXPECT_THAT(gpu_->CopyOnDevice2D(y, 32, x, 32, 16, 2),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("device_dst")));
  EXPECT_THAT(gpu_->CopyOnDevice2D(x, 8, y, 16, 16, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pitches")));
}

TEST_F(GpuBackendTest, FreedMemoryIsNoLongerDevice) {
  // A freed buffer's block stays allocated in the allocator's cache, yet a stale pointer into it
  // is caught; once the cache is emptied it is not device memory at all.
  float* stale = nullptr;
  {
    DeviceBuffer buffer(gpu_);
    ASSERT_THAT(buffer.Reserve(64), IsOk());
    stale = buffer.data<float>();
  }
  std::vector<float> host(16);
  EXPECT_THAT(gpu_->CopyToHost(host.data(), stale, 64),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("already freed")));
  ASSERT_THAT(gpu_backend_->allocator().EmptyCache(), IsOk());
  EXPECT_EQ(runtime_->stats().bytes_in_use, 0u);
  EXPECT_THAT(gpu_->CopyToHost(host.data(), stale, 64),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("not device memory")));
}

TEST_F(GpuBackendTest, PinningTakesHostMemoryOnceAndNeverDeviceMemory) {
  std::vector<std::byte> host(4096);
  ASSERT_THAT(gpu_->PinHostMemory(host.data(), host.size()), IsOk());
  EXPECT_EQ(runtime_->pinned_host_bytes(), host.size());
  EXPECT_THAT(gpu_->PinHostMemory(host.data() + 100, 16),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("already pinned")));
  EXPECT_THAT(gpu_->UnpinHostMemory(host.data() + 100),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("does not start a pinned region")));
  DeviceBuffer device(gpu_);
  ASSERT_THAT(device.Reserve(64), IsOk());
  EXPECT_THAT(gpu_->PinHostMemory(device.data<std::byte>(), 64),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("device memory")));
  // Copies to and from pinned memory are copies as any other.
  std::vector<float> row = {1, 2, 3, 4};
  std::memcpy(host.data(), row.data(), 16);
  ASSERT_THAT(gpu_->CopyToDevice(device.data<float>(), host.data(), 16), IsOk());
  ASSERT_THAT(gpu_->CopyToHost(host.data() + 16, device.data<float>(), 16), IsOk());
  EXPECT_EQ(std::memcmp(host.data(), host.data() + 16, 16), 0);
  ASSERT_THAT(gpu_->UnpinHostMemory(host.data()), IsOk());
  EXPECT_EQ(runtime_->pinned_host_bytes(), 0u);
}

// ---------------------------------------------------------------------------------------------
// The registry.

TEST(GpuBackendRegistryTest, CudaEmulatedIsInEveryBuild) {
  auto backend = CreateBackend(BackendOptions{.device = DeviceKind::kCudaEmulated});
  ASSERT_THAT(backend, IsOk());
  EXPECT_EQ((*backend)->device(), DeviceKind::kCudaEmulated);
  EXPECT_FALSE((*backend)->IsHostMemory());
  EXPECT_EQ(DeviceKindName(DeviceKind::kCudaEmulated), "cuda-emulated");
}

TEST(GpuBackendRegistryTest, CudaIsACleanErrorWithoutADevice) {
  // No build here has a GPU: a CUDA build says so (Unavailable), a build without CUDA has no
  // backend (Unimplemented); a bad index is never a crash. On a GPU machine both may succeed.
  for (int index : {0, 1000}) {
    auto backend = CreateBackend(BackendOptions{.device = DeviceKind::kCuda, .device_index = index});
    if (backend.ok()) {
      EXPECT_EQ((*backend)->device(), DeviceKind::kCuda);
      continue;
    }
    EXPECT_THAT(backend.status().code(),
                ::testing::AnyOf(absl::StatusCode::kUnimplemented, absl::StatusCode::kUnavailable,
                                 absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(backend.status().message(), HasSubstr("cuda"));
  }
}

}  // namespace
}  // namespace baton::runtime
