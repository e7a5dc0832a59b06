#include "runtime/model/llama_model.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <initializer_list>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "baton/kernels/paged_kv.h"
#include "kernels/common/status_macros.h"
#include "runtime/model/device_weights.h"

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
      .k = static_cast<int>(p.weight.shape[1]),
      .weight_scales = p.weight.scales,
      .weight_zeros = p.weight.zeros,
      .weight_group_size = p.weight.group_size};
}

absl::Status Linear(DeviceBackend& backend, const Weight& w, const Weight* bias, const float* in,
                    float* out, int m) {
  return backend.Matmul(ToParams({w, bias, out}, in, m));
}

// Projections of the same input in one op (one pass over the pool when decoding on the CPU).
absl::Status LinearGroup(DeviceBackend& backend, std::initializer_list<Projection> projections,
                         const float* in, int m) {
  absl::InlinedVector<kernels::MatmulParams, 3> group;
  for (const Projection& p : projections) group.push_back(ToParams(p, in, m));
  // A pre-quantized checkpoint may leave some of a group's weights unquantized (its `ignore`); a
  // group shares one weight dtype, so those run one by one.
  for (const kernels::MatmulParams& p : group) {
    if (p.weight_dtype != group[0].weight_dtype) {
      for (const kernels::MatmulParams& each : group) RETURN_IF_ERROR(backend.Matmul(each));
      return absl::OkStatus();
    }
  }
  return backend.MatmulGroup(group);
}

// A communicator of a group of `size` ranks in which this rank is `rank`, when size > 1.
absl::Status CheckComm(const Communicator* comm, absl::string_view name, int size, int rank) {
  if (size == 1) return absl::OkStatus();
  if (comm == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: ", name, "_size ", size, " needs a ", name, " communicator"));
  }
  if (comm->size() != size || comm->rank() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: the ", name, " communicator is rank ", comm->rank(), " of ", comm->size(),
        ", the shard is ", name, " rank ", rank, " of ", size));
  }
  return absl::OkStatus();
}

const Weight* OptionalBias(const Weight& bias) { return bias.data != nullptr ? &bias : nullptr; }

template <typename T>
absl::Status ReserveElems(DeviceBuffer& buffer, size_t count) {
  return buffer.Reserve(count * sizeof(T));
}

}  // namespace

LlamaModel::LlamaModel(ModelConfig config, ModelShard shard, ModelComms comms,
                       std::unique_ptr<LlamaWeights> weights, DType matmul_dtype,
                       DeviceBackend* backend)
    : config_(std::move(config)),
      shard_(std::move(shard)),
      comms_(comms),
      weights_(std::move(weights)),
      matmul_dtype_(matmul_dtype),
      backend_(backend),
      vocab_head_(config_, shard_, *weights_, backend, comms.tp),
      x_(backend),
      h_(backend),
      q_(backend),
      k_(backend),
      v_(backend),
      attn_(backend),
      gate_(backend),
      up_(backend),
      ctx_k_(backend),
      ctx_v_(backend),
      inv_freq_(backend),
      positions_staging_(backend),
      slot_mapping_staging_(backend),
      context_lens_staging_(backend),
      block_tables_staging_(backend),
      prefill_q_start_staging_(backend),
      ctx_start_staging_(backend),
      prompt_rows_(backend) {}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const std::filesystem::path& model_dir,
                                                             DType matmul_dtype,
                                                             DeviceBackend* backend,
                                                             ThreadPool* load_pool,
                                                             const ShardSpec& shard_spec,
                                                             ModelComms comms) {
  if (matmul_dtype != DType::kF32 && matmul_dtype != DType::kBF16 && matmul_dtype != DType::kF16 &&
      matmul_dtype != DType::kI8 && matmul_dtype != DType::kI4 && matmul_dtype != DType::kF8E4M3) {
    return absl::InvalidArgumentError(absl::StrCat("weight dtype ",
                                                   std::string(DTypeName(matmul_dtype)),
                                                   " is not supported (f32, bf16, f16, i8, i4 or fp8)"));
  }
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(model_dir));
  ASSIGN_OR_RETURN(ModelShard shard, MakeModelShard(config, shard_spec));
  RETURN_IF_ERROR(CheckComm(comms.tp, "tp", shard_spec.tp_size, shard_spec.tp_rank));
  RETURN_IF_ERROR(CheckComm(comms.pp, "pp", shard_spec.pp_size, shard_spec.pp_rank));
  if (shard_spec.tp_size == 1) comms.tp = nullptr;
  if (shard_spec.pp_size == 1) comms.pp = nullptr;
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaWeights> weights,
                   LoadLlamaWeights(model_dir, config, matmul_dtype, load_pool, &shard));
  if (backend->IsHostMemory()) MoveMappedMatmulWeightsToHugePages(*weights);
  std::vector<DeviceBuffer> device_weights;
  RETURN_IF_ERROR(UploadWeights(*weights, *backend, &device_weights));
  ASSIGN_OR_RETURN(std::vector<float> inv_freq,
                   kernels::RopeInvFreq(config.rope_theta, config.head_dim, config.rope_scaling));
  auto model = std::unique_ptr<LlamaModel>(
      new LlamaModel(std::move(config), std::move(shard), comms, std::move(weights), matmul_dtype,
                     backend));
  model->device_weights_ = std::move(device_weights);
  const size_t inv_freq_bytes = inv_freq.size() * sizeof(float);
  RETURN_IF_ERROR(model->inv_freq_.Reserve(inv_freq_bytes));
  RETURN_IF_ERROR(backend->CopyToDevice(model->inv_freq_.data<void>(), inv_freq.data(),
                                        inv_freq_bytes));
  return model;
}

KvPoolShape LlamaModel::KvShape(int block_size, DType kv_dtype) const {
  return KvPoolShape{.num_layers = shard_.num_layers(),
                     .num_kv_heads = shard_.num_kv_heads,
                     .head_dim = config_.head_dim,
                     .block_size = block_size,
                     .dtype = kv_dtype};
}

template <typename T>
absl::StatusOr<const T*> LlamaModel::ToDevice(std::span<const T> host, DeviceBuffer& staging) {
  if (backend_->IsHostMemory()) return host.data();
  const size_t bytes = host.size_bytes();
  RETURN_IF_ERROR(staging.Reserve(bytes));
  if (bytes > 0) RETURN_IF_ERROR(backend_->CopyToDevice(staging.data<void>(), host.data(), bytes));
  return staging.data<const T>();
}

absl::Status LlamaModel::Stage(const StepBatch& batch) {
  const size_t num_tokens = batch.num_tokens();
  const int num_seqs = batch.num_seqs();
  const size_t q_dim = static_cast<size_t>(shard_.num_heads) * config_.head_dim;
  const size_t kv_dim = static_cast<size_t>(shard_.num_kv_heads) * config_.head_dim;
  RETURN_IF_ERROR(ReserveElems<float>(x_, num_tokens * config_.hidden_size));
  RETURN_IF_ERROR(ReserveElems<float>(h_, num_tokens * config_.hidden_size));
  RETURN_IF_ERROR(ReserveElems<float>(q_, num_tokens * q_dim));
  RETURN_IF_ERROR(ReserveElems<float>(k_, num_tokens * kv_dim));
  RETURN_IF_ERROR(ReserveElems<float>(v_, num_tokens * kv_dim));
  RETURN_IF_ERROR(ReserveElems<float>(attn_, num_tokens * q_dim));
  RETURN_IF_ERROR(ReserveElems<float>(gate_, num_tokens * shard_.intermediate_size));
  RETURN_IF_ERROR(ReserveElems<float>(up_, num_tokens * shard_.intermediate_size));

  // Prefill chunks. When no chunk has a cached prefix, the fresh K/V rows are the whole context;
  // otherwise every chunk's context is gathered from the cache into contiguous rows (Attention).
  const int num_decode = batch.num_decode_seqs;
  const int num_prefill = num_seqs - num_decode;
  prefill_q_start_.resize(num_prefill + 1);
  ctx_start_.resize(num_prefill + 1);
  has_prefix_ = false;
  max_prefill_q_len_ = 0;
  max_prefill_ctx_len_ = 0;
  const int first_token = batch.q_start[num_decode];
  for (int i = 0; i <= num_prefill; ++i) {
    prefill_q_start_[i] = batch.q_start[num_decode + i] - first_token;
  }
  ctx_start_[0] = 0;
  for (int i = 0; i < num_prefill; ++i) {
    const int s = num_decode + i;
    const int q_len = batch.q_start[s + 1] - batch.q_start[s];
    has_prefix_ |= batch.context_lens[s] != q_len;
    max_prefill_q_len_ = std::max(max_prefill_q_len_, q_len);
    max_prefill_ctx_len_ = std::max(max_prefill_ctx_len_, batch.context_lens[s]);
    ctx_start_[i + 1] = ctx_start_[i] + batch.context_lens[s];
  }
  if (has_prefix_) {
    const size_t ctx_elems = static_cast<size_t>(ctx_start_[num_prefill]) * kv_dim;
    RETURN_IF_ERROR(ReserveElems<float>(ctx_k_, ctx_elems));
    RETURN_IF_ERROR(ReserveElems<float>(ctx_v_, ctx_elems));
  }

  ASSIGN_OR_RETURN(step_.positions, ToDevice(batch.positions, positions_staging_));
  ASSIGN_OR_RETURN(step_.slot_mapping, ToDevice(batch.slot_mapping, slot_mapping_staging_));
  ASSIGN_OR_RETURN(step_.context_lens, ToDevice(batch.context_lens, context_lens_staging_));
  ASSIGN_OR_RETURN(step_.block_tables, ToDevice(batch.block_tables, block_tables_staging_));
  ASSIGN_OR_RETURN(step_.prefill_q_start, ToDevice(std::span<const int32_t>(prefill_q_start_),
                                                   prefill_q_start_staging_));
  ASSIGN_OR_RETURN(step_.ctx_start,
                   ToDevice(std::span<const int32_t>(ctx_start_), ctx_start_staging_));
  if (shard_.spec.pp_rank == 0) RETURN_IF_ERROR(vocab_head_.StageTokens(batch.token_ids));
  if (IsLastStage()) RETURN_IF_ERROR(vocab_head_.StageSampling(batch.sampling, num_seqs));
  return absl::OkStatus();
}

absl::Status LlamaModel::Forward(const StepBatch& batch, const KvPool& kv_pool,
                                 StepOutput* out) {
  if (batch.num_tokens() == 0 || batch.num_seqs() == 0) {
    return absl::InvalidArgumentError("forward: empty batch");
  }
  out->prompt_logprobs.clear();
  if (decode_graphs_ != nullptr) {
    if (const std::optional<DecodeGraphShape> shape = DecodeGraphs::ShapeOf(batch)) {
      return ForwardGraphed(batch, *shape, kv_pool, out);
    }
  }
  RETURN_IF_ERROR(Stage(batch));
  RETURN_IF_ERROR(Compute(batch, kv_pool));
  RETURN_IF_ERROR(Collect(batch.num_seqs(), batch.return_logits, out));
  if (IsLastStage() && !batch.prompt_targets.empty()) return ScorePrompt(batch, out);
  return absl::OkStatus();
}

absl::Status LlamaModel::ScorePrompt(const StepBatch& batch, StepOutput* out) {
  // Rows of the sequences' runs that score a token, as [first, last) row ranges.
  struct Run {
    int seq, first, last;
  };
  std::vector<Run> runs;
  for (int s = 0; s < batch.num_seqs(); ++s) {
    for (int r = batch.q_start[s]; r < batch.q_start[s + 1]; ++r) {
      if (batch.prompt_targets[r] < 0) continue;
      if (!runs.empty() && runs.back().seq == s && runs.back().last == r) {
        ++runs.back().last;
      } else {
        runs.push_back({s, r, r + 1});
      }
    }
  }
  // Every TP rank computes the logits (a vocab-parallel head gathers them); one reads them.
  const bool reads = shard_.spec.tp_rank == 0;
  const size_t hidden = config_.hidden_size;
  const float* x = x_.data<float>();  // the last layer's residual stream of every row
  RETURN_IF_ERROR(ReserveElems<float>(prompt_rows_, 2 * kScoredRowsPerPass * hidden));
  float* gathered = prompt_rows_.data<float>();
  float* normed = gathered + kScoredRowsPerPass * hidden;
  // Passes of at most kScoredRowsPerPass rows bound the logits' memory, [rows, vocab_size].
  size_t run = 0;
  int next_row = runs.empty() ? 0 : runs[0].first;
  while (run < runs.size()) {
    std::vector<std::pair<int, int>> rows;  // (seq, row) of this pass
    while (run < runs.size() && static_cast<int>(rows.size()) < kScoredRowsPerPass) {
      const int take = std::min(runs[run].last - next_row,
                                kScoredRowsPerPass - static_cast<int>(rows.size()));
      RETURN_IF_ERROR(backend_->CopyOnDevice(gathered + rows.size() * hidden,
                                             x + static_cast<size_t>(next_row) * hidden,
                                             sizeof(float) * take * hidden));
      for (int i = 0; i < take; ++i) rows.emplace_back(runs[run].seq, next_row + i);
      next_row += take;
      if (next_row == runs[run].last && ++run < runs.size()) next_row = runs[run].first;
    }
    const int num_rows = static_cast<int>(rows.size());
    RETURN_IF_ERROR(backend_->RmsNorm(
        kernels::RmsNormParams{.out = normed,
                               .in = gathered,
                               .weight = static_cast<const float*>(weights_->final_norm.data),
                               .num_tokens = num_rows,
                               .hidden = static_cast<int>(hidden),
                               .eps = config_.rms_norm_eps}));
    RETURN_IF_ERROR(vocab_head_.Logits(normed, num_rows, reads ? &scored_logits_ : nullptr));
    if (!reads) continue;
    const size_t vocab = config_.vocab_size;
    for (int i = 0; i < num_rows; ++i) {
      const auto [seq, row] = rows[i];
      out->prompt_logprobs.push_back(PromptTokenLogprobs{
          .seq = seq,
          .token_index = batch.positions[row] + 1,
          .logprobs = kernels::TopLogprobs(
              std::span<const float>(scored_logits_.data() + i * vocab, vocab),
              batch.prompt_top_k[seq], batch.prompt_targets[row])});
    }
  }
  return absl::OkStatus();
}

bool LlamaModel::EnableDecodeGraphs() {
  if (!backend_->SupportsGraphs() || comms_.tp != nullptr || comms_.pp != nullptr) return false;
  if (decode_graphs_ == nullptr) decode_graphs_ = std::make_unique<DecodeGraphs>(backend_);
  return true;
}

absl::Status LlamaModel::ForwardGraphed(const StepBatch& batch, const DecodeGraphShape& shape,
                                        const KvPool& kv_pool, StepOutput* out) {
  const StepBatch padded = decode_graphs_->Pad(batch, shape);
  RETURN_IF_ERROR(Stage(padded));
  ASSIGN_OR_RETURN(DeviceGraph* graph,
                   decode_graphs_->Get(shape, ScratchAddresses(kv_pool),
                                       [&] { return Compute(padded, kv_pool); }));
  RETURN_IF_ERROR(graph->Replay());
  return Collect(batch.num_seqs(), batch.return_logits, out);
}

std::vector<const void*> LlamaModel::ScratchAddresses(const KvPool& kv_pool) const {
  std::vector<const void*> addresses;
  for (const DeviceBuffer* buffer :
       {&x_, &h_, &q_, &k_, &v_, &attn_, &gate_, &up_, &ctx_k_, &ctx_v_, &positions_staging_,
        &slot_mapping_staging_, &context_lens_staging_, &block_tables_staging_,
        &prefill_q_start_staging_, &ctx_start_staging_}) {
    addresses.push_back(buffer->data<void>());
  }
  addresses.push_back(kv_pool.LayerView(0).k);
  vocab_head_.AppendScratchAddresses(&addresses);
  return addresses;
}

absl::Status LlamaModel::Compute(const StepBatch& batch, const KvPool& kv_pool) {
  const int num_tokens = batch.num_tokens();
  const int num_seqs = batch.num_seqs();
  const int hidden = config_.hidden_size;
  float* x = x_.data<float>();
  float* h = h_.data<float>();
  const size_t x_bytes = sizeof(float) * static_cast<size_t>(num_tokens) * hidden;
  const int pp_rank = shard_.spec.pp_rank;

  if (pp_rank == 0) {
    RETURN_IF_ERROR(vocab_head_.Embed(num_tokens, x));
  } else {
    RETURN_IF_ERROR(comms_.pp->Recv(x, x_bytes, pp_rank - 1));
  }
  for (int layer_idx = shard_.layer_begin; layer_idx < shard_.layer_end; ++layer_idx) {
    RETURN_IF_ERROR(Layer(layer_idx, batch, kv_pool));
  }
  if (!IsLastStage()) return comms_.pp->Send(x, x_bytes, pp_rank + 1);

  // Only each sequence's last token needs logits. When every sequence has one new token (decode),
  // those are x's rows as they are.
  const float* last_rows = x;
  if (num_tokens != num_seqs) {
    for (int s = 0; s < num_seqs; ++s) {
      const int last = batch.q_start[s + 1] - 1;
      RETURN_IF_ERROR(backend_->CopyOnDevice(h + static_cast<size_t>(s) * hidden,
                                             x + static_cast<size_t>(last) * hidden,
                                             sizeof(float) * hidden));
    }
    last_rows = h;
  }
  RETURN_IF_ERROR(backend_->RmsNorm(
      kernels::RmsNormParams{.out = h,
                             .in = last_rows,
                             .weight = static_cast<const float*>(weights_->final_norm.data),
                             .num_tokens = num_seqs,
                             .hidden = hidden,
                             .eps = config_.rms_norm_eps}));
  return vocab_head_.Head(h, num_seqs);
}

absl::Status LlamaModel::Collect(int num_seqs, bool return_logits, StepOutput* out) {
  if (!IsLastStage()) {
    out->clear();
    return absl::OkStatus();
  }
  return vocab_head_.Collect(num_seqs, return_logits, out);
}

absl::Status LlamaModel::Layer(int layer_idx, const StepBatch& batch, const KvPool& kv_pool) {
  const LayerWeights& w = weights_->layers[layer_idx - weights_->layer_begin];
  const int num_tokens = batch.num_tokens();
  const int hidden = config_.hidden_size;
  float* x = x_.data<float>();
  float* h = h_.data<float>();
  float* gate = gate_.data<float>();

  // Every later layer's input norm was fused into the previous layer's last residual add.
  if (layer_idx == shard_.layer_begin) {
    RETURN_IF_ERROR(backend_->RmsNorm(
        kernels::RmsNormParams{.out = h,
                               .in = x,
                               .weight = static_cast<const float*>(w.input_norm.data),
                               .num_tokens = num_tokens,
                               .hidden = hidden,
                               .eps = config_.rms_norm_eps}));
  }
  RETURN_IF_ERROR(LinearGroup(*backend_,
                              {{w.q_proj, OptionalBias(w.q_bias), q_.data<float>()},
                               {w.k_proj, OptionalBias(w.k_bias), k_.data<float>()},
                               {w.v_proj, OptionalBias(w.v_bias), v_.data<float>()}},
                              h, num_tokens));
  RETURN_IF_ERROR(Attention(layer_idx, batch, kv_pool));
  RETURN_IF_ERROR(Linear(*backend_, w.o_proj, nullptr, attn_.data<float>(), h, num_tokens));
  RETURN_IF_ERROR(ReduceTp(h, num_tokens));
  RETURN_IF_ERROR(backend_->AddRmsNorm(
      kernels::AddRmsNormParams{.out = h,
                                .residual = x,
                                .in = h,
                                .weight = static_cast<const float*>(w.post_attention_norm.data),
                                .num_tokens = num_tokens,
                                .hidden = hidden,
                                .eps = config_.rms_norm_eps}));
  const int inter = shard_.intermediate_size;
  RETURN_IF_ERROR(LinearGroup(
      *backend_, {{w.gate_proj, nullptr, gate}, {w.up_proj, nullptr, up_.data<float>()}}, h,
      num_tokens));
  RETURN_IF_ERROR(backend_->Swiglu(kernels::SwigluParams{.out = gate,
                                                         .gate = gate,
                                                         .up = up_.data<float>(),
                                                         .num_tokens = num_tokens,
                                                         .intermediate = inter,
                                                         .in_stride = inter,
                                                         .out_stride = inter}));
  RETURN_IF_ERROR(Linear(*backend_, w.down_proj, nullptr, gate, h, num_tokens));
  RETURN_IF_ERROR(ReduceTp(h, num_tokens));
  if (layer_idx + 1 < shard_.layer_end) {
    const LayerWeights& next = weights_->layers[layer_idx + 1 - weights_->layer_begin];
    return backend_->AddRmsNorm(
        kernels::AddRmsNormParams{.out = h,
                                  .residual = x,
                                  .in = h,
                                  .weight = static_cast<const float*>(next.input_norm.data),
                                  .num_tokens = num_tokens,
                                  .hidden = hidden,
                                  .eps = config_.rms_norm_eps});
  }
  // The shard's last layer: x goes to the next pipeline stage as it is, or only each sequence's
  // last row is normalized (with the final norm, in Forward), so there is no norm of all rows to
  // fuse with.
  return backend_->Add(
      kernels::AddParams{.out = x, .a = x, .b = h, .n = static_cast<int64_t>(num_tokens) * hidden});
}

absl::Status LlamaModel::ReduceTp(float* out, int num_tokens) {
  if (comms_.tp == nullptr) return absl::OkStatus();
  // o_proj and down_proj have no bias in the LLaMA family, so the partial products simply add up.
  return comms_.tp->AllReduceSum(out, static_cast<size_t>(num_tokens) * config_.hidden_size);
}

absl::Status LlamaModel::Attention(int layer_idx, const StepBatch& batch, const KvPool& kv_pool) {
  const int num_tokens = batch.num_tokens();
  const int head_dim = config_.head_dim;
  const int num_heads = shard_.num_heads;
  const int num_kv_heads = shard_.num_kv_heads;
  const int q_dim = num_heads * head_dim;
  const int kv_dim = num_kv_heads * head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const kernels::PagedKvView cache = kv_pool.LayerView(layer_idx - shard_.layer_begin);
  float* q = q_.data<float>();
  float* k = k_.data<float>();
  float* v = v_.data<float>();
  float* attn = attn_.data<float>();

  RETURN_IF_ERROR(backend_->Rope(kernels::RopeParams{.q = q,
                                                     .k = k,
                                                     .positions = step_.positions,
                                                     .inv_freq = inv_freq_.data<float>(),
                                                     .num_tokens = num_tokens,
                                                     .num_heads = num_heads,
                                                     .num_kv_heads = num_kv_heads,
                                                     .head_dim = head_dim,
                                                     .q_stride = q_dim,
                                                     .k_stride = kv_dim}));
  RETURN_IF_ERROR(backend_->KvWrite(kernels::KvWriteParams{.cache = cache,
                                                           .k = k,
                                                           .v = v,
                                                           .slot_mapping = step_.slot_mapping,
                                                           .num_tokens = num_tokens,
                                                           .kv_stride = kv_dim}));

  const int num_decode = batch.num_decode_seqs;
  if (num_decode > 0) {
    RETURN_IF_ERROR(backend_->PagedAttentionDecode(
        kernels::PagedAttentionParams{.out = attn,
                                      .q = q,
                                      .cache = cache,
                                      .block_tables = step_.block_tables,
                                      .context_lens = step_.context_lens,
                                      .num_seqs = num_decode,
                                      .num_heads = num_heads,
                                      .max_blocks_per_seq = batch.max_blocks_per_seq,
                                      .q_stride = q_dim,
                                      .scale = scale}));
  }
  const int num_prefill = batch.num_seqs() - num_decode;
  if (num_prefill == 0) return absl::OkStatus();

  // Prefill chunks: their context is the fresh K/V rows, or, when some chunk has a cached prefix,
  // every chunk's context gathered from the cache (which now holds the fresh rows too).
  const size_t first_token = static_cast<size_t>(batch.q_start[num_decode]);
  const float* ctx_k = k + first_token * kv_dim;
  const float* ctx_v = v + first_token * kv_dim;
  if (has_prefix_) {
    const int32_t* prefill_block_tables =
        step_.block_tables + static_cast<size_t>(num_decode) * batch.max_blocks_per_seq;
    RETURN_IF_ERROR(backend_->KvGather(kernels::KvGatherParams{
        .k_out = ctx_k_.data<float>(),
        .v_out = ctx_v_.data<float>(),
        .cache = cache,
        .block_tables = prefill_block_tables,
        .out_start = step_.ctx_start,
        .num_seqs = num_prefill,
        .max_blocks_per_seq = batch.max_blocks_per_seq,
        .out_stride = kv_dim,
        .max_len = max_prefill_ctx_len_}));
    ctx_k = ctx_k_.data<float>();
    ctx_v = ctx_v_.data<float>();
  }
  return backend_->PrefillAttention(
      kernels::PrefillAttentionParams{.out = attn + first_token * q_dim,
                                      .q = q + first_token * q_dim,
                                      .k = ctx_k,
                                      .v = ctx_v,
                                      .q_start = step_.prefill_q_start,
                                      .kv_start = step_.ctx_start,
                                      .num_seqs = num_prefill,
                                      .num_heads = num_heads,
                                      .num_kv_heads = num_kv_heads,
                                      .head_dim = head_dim,
                                      .q_stride = q_dim,
                                      .kv_stride = kv_dim,
                                      .scale = scale,
                                      .max_q_len = max_prefill_q_len_,
                                      // A bf16 model's GEMMs round the activations to bf16
                                      // already; its attention may too, on tensor cores.
                                      .allow_bf16_tensor_cores = matmul_dtype_ == DType::kBF16});
}

}  // namespace baton::runtime
