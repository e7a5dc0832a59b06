#include "runtime/model/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "baton/kernels/add.h"
#include "baton/kernels/embedding.h"
#include "baton/kernels/matmul.h"
#include "baton/kernels/paged_attention.h"
#include "baton/kernels/kv_write.h"
#include "baton/kernels/paged_kv.h"
#include "baton/kernels/prefill_attention.h"
#include "baton/kernels/rms_norm.h"
#include "baton/kernels/rope.h"
#include "baton/kernels/swiglu.h"
#include "kernels/common/status_macros.h"

namespace baton::runtime {
namespace {

// One product of a layer: out[m, weight.shape[0]] = in[m, weight.shape[1]] * weight^T (+ bias).
struct Projection {
  const Weight& weight;
  const Weight* bias;  // or nullptr
  float* out;
};

kernels::MatmulParams ToParams(const Projection& p, const float* in, int m) {
  return kernels::MatmulParams{
      .out = p.out,
      .in = in,
      .weight = p.weight.data,
      .weight_dtype = p.weight.dtype,
      .bias = p.bias != nullptr ? static_cast<const float*>(p.bias->data) : nullptr,
      .m = m,
      .n = static_cast<int>(p.weight.shape[0]),
      .k = static_cast<int>(p.weight.shape[1])};
}

absl::Status Linear(const Weight& w, const Weight* bias, const float* in, float* out, int m,
                    ThreadPool* pool) {
  return kernels::MatmulCpu(ToParams({w, bias, out}, in, m), pool);
}

// Projections of the same input in one kernel call (one pass over the pool when decoding).
absl::Status LinearGroup(std::initializer_list<Projection> projections, const float* in, int m,
                         ThreadPool* pool) {
  absl::InlinedVector<kernels::MatmulParams, 3> group;
  for (const Projection& p : projections) group.push_back(ToParams(p, in, m));
  return kernels::MatmulGroupCpu(group, pool);
}

const Weight* OptionalBias(const Weight& bias) { return bias.data != nullptr ? &bias : nullptr; }

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const std::filesystem::path& model_dir,
                                                             DType matmul_dtype, ThreadPool* pool) {
  if (matmul_dtype != DType::kF32 && matmul_dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight dtype ", std::string(DTypeName(matmul_dtype)), " is not supported (f32 or bf16)"));
  }
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(model_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaWeights> weights,
                   LoadLlamaWeights(model_dir, config, matmul_dtype, pool));
  auto model = std::unique_ptr<LlamaModel>(
      new LlamaModel(std::move(config), std::move(weights), matmul_dtype, pool));
  ASSIGN_OR_RETURN(model->inv_freq_,
                   kernels::RopeInvFreq(model->config_.rope_theta, model->config_.head_dim,
                                        model->config_.rope_scaling));
  return model;
}

KvPoolShape LlamaModel::KvShape(int block_size) const {
  return KvPoolShape{.num_layers = config_.num_layers,
                     .num_kv_heads = config_.num_kv_heads,
                     .head_dim = config_.head_dim,
                     .block_size = block_size};
}

absl::Status LlamaModel::Forward(const StepBatch& batch, const KvPool& kv_pool,
                                 std::vector<float>* logits) {
  const int num_tokens = batch.num_tokens();
  const int num_seqs = batch.num_seqs();
  const int hidden = config_.hidden_size;
  const int q_dim = config_.num_heads * config_.head_dim;
  const int kv_dim = config_.num_kv_heads * config_.head_dim;
  if (num_tokens == 0 || num_seqs == 0) {
    return absl::InvalidArgumentError("forward: empty batch");
  }
  x_.resize(static_cast<size_t>(num_tokens) * hidden);
  h_.resize(x_.size());
  q_.resize(static_cast<size_t>(num_tokens) * q_dim);
  k_.resize(static_cast<size_t>(num_tokens) * kv_dim);
  v_.resize(k_.size());
  attn_.resize(q_.size());
  gate_.resize(static_cast<size_t>(num_tokens) * config_.intermediate_size);
  up_.resize(gate_.size());

  RETURN_IF_ERROR(kernels::EmbeddingCpu(
      kernels::EmbeddingParams{.out = x_.data(),
                               .table = weights_->embed_tokens.data,
                               .table_dtype = weights_->embed_tokens.dtype,
                               .token_ids = batch.token_ids.data(),
                               .num_tokens = num_tokens,
                               .hidden = hidden,
                               .vocab_size = config_.vocab_size},
      pool_));
  for (int layer_idx = 0; layer_idx < config_.num_layers; ++layer_idx) {
    RETURN_IF_ERROR(Layer(layer_idx, batch, kv_pool));
  }

  // Only each sequence's last token needs logits.
  for (int s = 0; s < num_seqs; ++s) {
    const int last = batch.q_start[s + 1] - 1;
    std::memcpy(&h_[static_cast<size_t>(s) * hidden], &x_[static_cast<size_t>(last) * hidden],
                sizeof(float) * hidden);
  }
  RETURN_IF_ERROR(kernels::RmsNormCpu(
      kernels::RmsNormParams{.out = h_.data(),
                             .in = h_.data(),
                             .weight = static_cast<const float*>(weights_->final_norm.data),
                             .num_tokens = num_seqs,
                             .hidden = hidden,
                             .eps = config_.rms_norm_eps},
      pool_));
  logits->resize(static_cast<size_t>(num_seqs) * config_.vocab_size);
  return Linear(weights_->lm_head, nullptr, h_.data(), logits->data(), num_seqs, pool_);
}

absl::Status LlamaModel::Layer(int layer_idx, const StepBatch& batch, const KvPool& kv_pool) {
  const LayerWeights& w = weights_->layers[layer_idx];
  const int num_tokens = batch.num_tokens();
  const int hidden = config_.hidden_size;

  RETURN_IF_ERROR(kernels::RmsNormCpu(
      kernels::RmsNormParams{.out = h_.data(),
                             .in = x_.data(),
                             .weight = static_cast<const float*>(w.input_norm.data),
                             .num_tokens = num_tokens,
                             .hidden = hidden,
                             .eps = config_.rms_norm_eps},
      pool_));
  RETURN_IF_ERROR(LinearGroup({{w.q_proj, OptionalBias(w.q_bias), q_.data()},
                               {w.k_proj, OptionalBias(w.k_bias), k_.data()},
                               {w.v_proj, OptionalBias(w.v_bias), v_.data()}},
                              h_.data(), num_tokens, pool_));
  RETURN_IF_ERROR(Attention(layer_idx, batch, kv_pool));
  RETURN_IF_ERROR(Linear(w.o_proj, nullptr, attn_.data(), h_.data(), num_tokens, pool_));
  RETURN_IF_ERROR(kernels::AddCpu(x_.data(), x_.data(), h_.data(),
                                  static_cast<int64_t>(num_tokens) * hidden, pool_));

  RETURN_IF_ERROR(kernels::RmsNormCpu(
      kernels::RmsNormParams{.out = h_.data(),
                             .in = x_.data(),
                             .weight = static_cast<const float*>(w.post_attention_norm.data),
                             .num_tokens = num_tokens,
                             .hidden = hidden,
                             .eps = config_.rms_norm_eps},
      pool_));
  const int inter = config_.intermediate_size;
  RETURN_IF_ERROR(LinearGroup({{w.gate_proj, nullptr, gate_.data()}, {w.up_proj, nullptr, up_.data()}},
                              h_.data(), num_tokens, pool_));
  RETURN_IF_ERROR(kernels::SwigluCpu(kernels::SwigluParams{.out = gate_.data(),
                                                           .gate = gate_.data(),
                                                           .up = up_.data(),
                                                           .num_tokens = num_tokens,
                                                           .intermediate = inter,
                                                           .in_stride = inter,
                                                           .out_stride = inter},
                                     pool_));
  RETURN_IF_ERROR(Linear(w.down_proj, nullptr, gate_.data(), h_.data(), num_tokens, pool_));
  return kernels::AddCpu(x_.data(), x_.data(), h_.data(), static_cast<int64_t>(num_tokens) * hidden,
                         pool_);
}

absl::Status LlamaModel::Attention(int layer_idx, const StepBatch& batch, const KvPool& kv_pool) {
  const int num_tokens = batch.num_tokens();
  const int head_dim = config_.head_dim;
  const int q_dim = config_.num_heads * head_dim;
  const int kv_dim = config_.num_kv_heads * head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const kernels::PagedKvView cache = kv_pool.LayerView(layer_idx);

  RETURN_IF_ERROR(kernels::RopeCpu(kernels::RopeParams{.q = q_.data(),
                                                       .k = k_.data(),
                                                       .positions = batch.positions.data(),
                                                       .inv_freq = inv_freq_.data(),
                                                       .num_tokens = num_tokens,
                                                       .num_heads = config_.num_heads,
                                                       .num_kv_heads = config_.num_kv_heads,
                                                       .head_dim = head_dim,
                                                       .q_stride = q_dim,
                                                       .k_stride = kv_dim},
                                   pool_));
  RETURN_IF_ERROR(kernels::KvWriteCpu(kernels::KvWriteParams{.cache = cache,
                                                             .k = k_.data(),
                                                             .v = v_.data(),
                                                             .slot_mapping = batch.slot_mapping.data(),
                                                             .num_tokens = num_tokens,
                                                             .kv_stride = kv_dim},
                                      pool_));

  const int num_decode = batch.num_decode_seqs;
  if (num_decode > 0) {
    RETURN_IF_ERROR(kernels::PagedAttentionDecodeCpu(
        kernels::PagedAttentionParams{.out = attn_.data(),
                                      .q = q_.data(),
                                      .cache = cache,
                                      .block_tables = batch.block_tables.data(),
                                      .context_lens = batch.context_lens.data(),
                                      .num_seqs = num_decode,
                                      .num_heads = config_.num_heads,
                                      .max_blocks_per_seq = batch.max_blocks_per_seq,
                                      .q_stride = q_dim,
                                      .scale = scale},
        pool_));
  }
  const int num_prefill = batch.num_seqs() - num_decode;
  if (num_prefill == 0) return absl::OkStatus();

  // Prefill chunks. When no chunk has a cached prefix, the fresh K/V rows are the whole context;
  // otherwise every chunk's context is gathered from the cache into contiguous rows.
  const int first_token = batch.q_start[num_decode];
  prefill_q_start_.resize(num_prefill + 1);
  ctx_start_.resize(num_prefill + 1);
  bool has_prefix = false;
  for (int i = 0; i <= num_prefill; ++i) {
    prefill_q_start_[i] = batch.q_start[num_decode + i] - first_token;
  }
  ctx_start_[0] = 0;
  for (int i = 0; i < num_prefill; ++i) {
    const int s = num_decode + i;
    const int q_len = batch.q_start[s + 1] - batch.q_start[s];
    has_prefix |= batch.context_lens[s] != q_len;
    ctx_start_[i + 1] = ctx_start_[i] + batch.context_lens[s];
  }
  const float* ctx_k = k_.data() + static_cast<size_t>(first_token) * kv_dim;
  const float* ctx_v = v_.data() + static_cast<size_t>(first_token) * kv_dim;
  if (has_prefix) {
    ctx_k_.resize(static_cast<size_t>(ctx_start_[num_prefill]) * kv_dim);
    ctx_v_.resize(ctx_k_.size());
    for (int i = 0; i < num_prefill; ++i) {
      const int s = num_decode + i;
      const int32_t* table = batch.block_tables.data() + static_cast<size_t>(s) * batch.max_blocks_per_seq;
      for (int pos = 0; pos < batch.context_lens[s]; ++pos) {
        const int64_t slot_idx =
            int64_t{table[pos / cache.block_size]} * cache.block_size + pos % cache.block_size;
        const size_t row = static_cast<size_t>(ctx_start_[i] + pos) * kv_dim;
        for (int h = 0; h < cache.num_kv_heads; ++h) {
          const int64_t offset = kernels::KvOffset(cache, slot_idx, h);
          const size_t dst = row + static_cast<size_t>(h) * cache.head_dim;
          std::memcpy(&ctx_k_[dst], cache.k + offset, sizeof(float) * cache.head_dim);
          std::memcpy(&ctx_v_[dst], cache.v + offset, sizeof(float) * cache.head_dim);
        }
      }
    }
    ctx_k = ctx_k_.data();
    ctx_v = ctx_v_.data();
  }
  return kernels::PrefillAttentionCpu(
      kernels::PrefillAttentionParams{.out = attn_.data() + static_cast<size_t>(first_token) * q_dim,
                                      .q = q_.data() + static_cast<size_t>(first_token) * q_dim,
                                      .k = ctx_k,
                                      .v = ctx_v,
                                      .q_start = prefill_q_start_.data(),
                                      .kv_start = ctx_start_.data(),
                                      .num_seqs = num_prefill,
                                      .num_heads = config_.num_heads,
                                      .num_kv_heads = config_.num_kv_heads,
                                      .head_dim = head_dim,
                                      .q_stride = q_dim,
                                      .kv_stride = kv_dim,
                                      .scale = scale},
      pool_);
}

}  // namespace baton::runtime
