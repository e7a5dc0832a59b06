// Plain-loop references of every kernel op: the specification the fast CPU kernels and the CUDA
// kernels are tested against. Scalar code, no threads, double accumulation in every reduction.
// They do not validate: call them only with params that Validate() accepts and in-range indices.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "baton/kernels/add_rms_norm.h"
#include "baton/kernels/embedding.h"
#include "baton/kernels/matmul.h"
#include "baton/kernels/paged_attention.h"
#include "baton/kernels/kv_gather.h"
#include "baton/kernels/kv_write.h"
#include "baton/kernels/prefill_attention.h"
#include "baton/kernels/rms_norm.h"
#include "baton/kernels/rope.h"
#include "baton/kernels/sampling.h"
#include "baton/kernels/swiglu.h"

namespace baton::kernels::reference {

void Embedding(const EmbeddingParams& params);
void RmsNorm(const RmsNormParams& params);
// residual += in (in f32, as the kernels round it), then RmsNorm of the updated residual.
void AddRmsNorm(const AddRmsNormParams& params);
void Rope(const RopeParams& params);
void KvWrite(const KvWriteParams& params);
void KvGather(const KvGatherParams& params);
void Swiglu(const SwigluParams& params);
void Add(float* out, const float* a, const float* b, int64_t n);
void Matmul(const MatmulParams& params);

// Textbook attention of one query head over a dense K/V:
// out[d] = sum_j softmax_j(scale * q.k_j) v_j[d], j in [0, num_keys).
// q, out: [head_dim]; k, v: [num_keys, kv_stride] (row j starts at k + j * kv_stride).
void DenseAttention(float* out, const float* q, const float* k, const float* v, int num_keys,
                    int head_dim, int64_t kv_stride, float scale);

void PrefillAttention(const PrefillAttentionParams& params);

// Gathers each sequence's K/V through its block table into dense arrays, then DenseAttention.
void PagedAttentionDecode(const PagedAttentionParams& params);

// The distribution SampleToken draws from: probs [logits.size()], zero outside the kept set.
// temperature must be > 0 (greedy has no distribution).
std::vector<double> SamplingDistribution(std::span<const float> logits,
                                         const SamplingOptions& options);

// log_softmax(logits) in double.
std::vector<double> LogSoftmax(std::span<const float> logits);

}  // namespace baton::kernels::reference
